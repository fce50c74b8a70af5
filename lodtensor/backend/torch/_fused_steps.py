"""One kernel for each element-wise part of an LSTM or GRU step on CUDA tensors (``cuda/rnn.cu``).

A step of the recurrences (``_recurrent``) is one or two GEMMs and a dozen element-wise ops on a
few hundred KB; on a GPU each op is a launch, and the loop is bound by launches rather than by
bytes. With CuPy installed, for float32/float64 data and the activations the kernels compute
(``cuda.RNN_ACTS``: identity, sigmoid, tanh, relu), :class:`LSTMSteps` launches one kernel after
each forward GEMM and one before each backward GEMM; :class:`GRUSteps` one after each of a
step's two GEMMs, each way. They run on torch's current stream, on torch's memory (pointers, no
views: no host work per operand). The results are those of the unfused steps (tests: the
emulated route, ``_cuda._EMULATED``).
"""

import numpy as np
import torch

from ..cupy import _launch
from ..cupy import cuda as _kernels
from . import _cuda, _tuning

__all__ = ["LSTMSteps", "GRUSteps"]

_DTYPES = {torch.float32: "float32", torch.float64: "float64"}
_NULL = np.uint64(0)
_MAX_BLOCKS = 1 << 16


def _ptr(t):
    return _NULL if t is None else np.uint64(t.data_ptr())


class _Steps:
    """The fused steps of one recurrence; :meth:`of` gives None where they cannot serve."""

    __slots__ = ("dev", "acts", "fns")
    KERNELS = ()

    @classmethod
    def of(cls, x, acts, operands):
        """For the recurrence over ``x`` (its gates, step-major) with Paddle's ``acts``; ``operands``:
        every other tensor the steps read (None where absent)."""
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
        self.acts = np.int32(self._code(*(_kernels.RNN_ACTS[a] for a in acts)))
        xp, dtype = self.dev.xp, _DTYPES[x.dtype]
        self.fns = {k: _launch.kernel(xp, "rnn", _kernels.kernel_name(k, dtype=dtype)) for k in self.KERNELS}

    def launching(self):
        """The context of the launches: the tensors' device current, torch's stream as CuPy's."""
        return self.dev.launching()

    def _run(self, kind, like, tensors, *flags):
        """Kernel ``kind`` over the ``[n, D]`` values of ``like``: pointers, n, D, the activations, flags."""
        n, d = int(like.shape[0]), int(like.shape[1])
        grid = (_launch.blocks(n * d, _kernels.BLOCK, _MAX_BLOCKS),)
        args = tuple(_ptr(t) for t in tensors) + (np.int64(n), np.int64(d), self.acts)
        self.fns[kind](grid, (_kernels.BLOCK,), args + tuple(np.int32(f) for f in flags))


class LSTMSteps(_Steps):
    __slots__ = ()
    KERNELS = ("lstm_step", "lstm_step_grad")

    @staticmethod
    def _code(gate, cell, cand):
        return gate | cell << 4 | cand << 8

    def forward(self, g, c_prev, peep, c, h, tc):
        """Activate the step's gates ``g`` ``[n, 4D]`` in place, write ``c``, ``h`` and (unless None)
        ``tc`` ``[n, D]`` from ``c_prev`` (None: none) and the peepholes ``peep`` ``[3D]`` (None: none)."""
        self._run("lstm_step", c, (g, c_prev, peep, c, h, tc))

    def backward(self, g, tc, c_prev, peep, gh, gc, dh, dc, dg):
        """The step's gate gradients into ``dg`` ``[n, 4D]`` from ``dh`` + ``gh`` and ``dc`` + ``gc``
        (``gh``/``gc`` None: no output gradient); ``dc`` becomes the previous cell's gradient."""
        self._run("lstm_step_grad", dh, (g, tc, c_prev, peep, gh, gc, dh, dc, dg))


class GRUSteps(_Steps):
    __slots__ = ()
    KERNELS = ("gru_step_gates", "gru_step_out", "gru_step_grad_out", "gru_step_grad_reset")

    @staticmethod
    def _code(gate, cand):
        return gate | cand << 8

    def gates(self, g, h_prev, rh):
        """After the gates' GEMM: update and reset activated in place in ``g`` ``[n, 3D]``, ``rh = r * h_prev``."""
        self._run("gru_step_gates", rh, (g, h_prev, rh))

    def out(self, g, h_prev, out, origin):
        """After the candidate's GEMM (or the whole step where ``h_prev`` is None): the candidate (and,
        without ``h_prev``, the update) activated in place, the new state into ``out``."""
        self._run("gru_step_out", out, (g, h_prev, out), origin)

    def grad_out(self, g, h_prev, gh, dh, dg, origin):
        """The update's and candidate's gradients into ``dg`` from ``dh`` + ``gh``; ``dh`` becomes the
        direct part of the previous state's gradient (without ``h_prev``: the reset's gradient 0)."""
        self._run("gru_step_grad_out", dh, (g, h_prev, gh, dh, dg), origin)

    def grad_reset(self, g, h_prev, drh, dh, dg):
        """The reset's gradient into ``dg`` from ``drh`` (the gradient of ``r * h_prev``); ``dh += drh * r``."""
        self._run("gru_step_grad_reset", dh, (g, h_prev, drh, dh, dg))
