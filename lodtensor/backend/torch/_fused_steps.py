"""One kernel for the element-wise part of each LSTM step on CUDA tensors (``cuda/rnn.cu``).

A step of the recurrence (``_recurrent``) is a GEMM and then a dozen element-wise ops on a few
hundred KB; on a GPU each op is a launch, and the loop is bound by launches rather than by
bytes. With CuPy installed, for float32/float64 data and the activations the kernels compute
(``cuda.RNN_ACTS``: identity, sigmoid, tanh, relu), :class:`LSTMSteps` launches
``lt_lstm_step`` after each forward GEMM and ``lt_lstm_step_grad`` before each backward GEMM,
on torch's current stream, on torch's memory (pointers, no views: no host work per operand).
The results are those of the unfused steps (tests: the emulated route, ``_cuda._EMULATED``).
"""

import numpy as np
import torch

from ..cupy import _launch
from ..cupy import cuda as _kernels
from . import _cuda, _tuning

__all__ = ["LSTMSteps"]

_DTYPES = {torch.float32: "float32", torch.float64: "float64"}
_NULL = np.uint64(0)
_MAX_BLOCKS = 1 << 16


def _ptr(t):
    return _NULL if t is None else np.uint64(t.data_ptr())


class LSTMSteps:
    """The fused steps of one LSTM recurrence; :meth:`of` gives None where they cannot serve."""

    __slots__ = ("dev", "acts", "step", "grad")

    @classmethod
    def of(cls, x, acts, operands):
        """For the recurrence over ``x`` (its gates, step-major) with Paddle's ``acts`` (gate, cell,
        candidate); ``operands``: every other tensor the steps read (None where absent)."""
        if not _tuning.FUSED_STEPS or x.dtype not in _DTYPES or not _cuda.fits(x):
            return None
        if any(a not in _kernels.RNN_ACTS for a in acts):
            return None
        if any(t is not None and (t.dtype != x.dtype or not t.is_contiguous() or t.device != x.device)
               for t in operands):
            return None
        return cls(x, acts)

    def __init__(self, x, acts):
        self.dev = _cuda._Device(x.device)
        gate, cell, cand = (_kernels.RNN_ACTS[a] for a in acts)
        self.acts = np.int32(gate | cell << 4 | cand << 8)
        dtype = _DTYPES[x.dtype]
        xp = self.dev.xp
        self.step = _launch.kernel(xp, "rnn", _kernels.kernel_name("lstm_step", dtype=dtype))
        self.grad = _launch.kernel(xp, "rnn", _kernels.kernel_name("lstm_step_grad", dtype=dtype))

    def launching(self):
        """The context of the launches: the tensors' device current, torch's stream as CuPy's."""
        return self.dev.launching()

    @staticmethod
    def _grid(n, d):
        return (_launch.blocks(int(n) * int(d), _kernels.BLOCK, _MAX_BLOCKS),), (_kernels.BLOCK,)

    def forward(self, g, c_prev, peep, c, h, tc):
        """Activate the step's gates ``g`` ``[n, 4D]`` in place, write ``c``, ``h`` and (unless None)
        ``tc`` ``[n, D]`` from ``c_prev`` (None: none) and the peepholes ``peep`` ``[3D]`` (None: none)."""
        n, d = int(c.shape[0]), int(c.shape[1])
        grid, block = self._grid(n, d)
        self.step(grid, block, (_ptr(g), _ptr(c_prev), _ptr(peep), _ptr(c), _ptr(h), _ptr(tc),
                                np.int64(n), np.int64(d), self.acts))

    def backward(self, g, tc, c_prev, peep, gh, gc, dh, dc, dg):
        """The step's gate gradients into ``dg`` ``[n, 4D]`` from ``dh`` + ``gh`` and ``dc`` + ``gc``
        (``gh``/``gc`` None: no output gradient); ``dc`` becomes the previous cell's gradient."""
        n, d = int(dh.shape[0]), int(dh.shape[1])
        grid, block = self._grid(n, d)
        self.grad(grid, block, (_ptr(g), _ptr(tc), _ptr(c_prev), _ptr(peep), _ptr(gh), _ptr(gc), _ptr(dh),
                                _ptr(dc), _ptr(dg), np.int64(n), np.int64(d), self.acts))
