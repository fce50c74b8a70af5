"""The fused element-wise parts of an LSTM or GRU time step (``cuda/rnn.cu``), launched by pointer.

A step of the recurrences is one or two GEMMs and a dozen element-wise ops on a few hundred KB;
on a GPU each op is a launch, and the loop is bound by launches rather than by bytes.
:class:`LSTMSteps` launches one kernel after each forward GEMM and one before each backward GEMM;
:class:`GRUSteps` one after each of a step's two GEMMs, each way. Both GPU routes use them: CuPy
arrays (``numpy/_recurrent.py`` on CuPy, forward) and torch CUDA tensors
(``backend/torch/_fused_steps.py``, with autograd), each giving its pointers (no views: no host
work per operand) and the context of its launches. float32/float64 data, and the activations
``cuda.RNN_ACTS`` (identity, sigmoid, tanh, relu); the callers keep their unfused steps otherwise.
"""

import contextlib

import numpy as np

from . import _launch
from . import cuda as _cuda

__all__ = ["LSTMSteps", "GRUSteps", "serves"]

_NULL = np.uint64(0)
_MAX_BLOCKS = 1 << 16


def serves(dtype, acts, operands=()):
    """Whether the kernels compute a recurrence on ``dtype`` data with Paddle's activations ``acts``,
    every one of ``operands`` (None where absent) contiguous and of that dtype."""
    if np.dtype(dtype).name not in _cuda.RNN_DTYPES or any(a not in _cuda.RNN_ACTS for a in acts):
        return False
    return all(a is None or (np.dtype(_dtype_name(a)) == np.dtype(dtype) and _contiguous(a)) for a in operands)


def _dtype_name(a):
    return str(a.dtype).rsplit(".", 1)[-1]  # numpy/cupy "float32", torch "torch.float32"


def _contiguous(a):
    flags = getattr(a, "flags", None)
    return flags.c_contiguous if flags is not None else a.is_contiguous()


class _Steps:
    __slots__ = ("acts", "fns", "ptr", "context")
    KERNELS = ()

    def __init__(self, xp, dtype, acts, ptr, context=contextlib.nullcontext):
        """``ptr(array)``: its device address; ``context()``: the context to launch in."""
        self.ptr, self.context = ptr, context
        self.acts = np.int32(self._code(*(_cuda.RNN_ACTS[a] for a in acts)))
        name = np.dtype(dtype).name
        self.fns = {k: _launch.kernel(xp, "rnn", _cuda.kernel_name(k, dtype=name)) for k in self.KERNELS}

    def launching(self):
        return self.context()

    def _run(self, kind, like, arrays, *flags):
        """Kernel ``kind`` over the ``[n, D]`` values of ``like``: pointers, n, D, the activations, flags."""
        n, d = int(like.shape[0]), int(like.shape[1])
        grid = (_launch.blocks(n * d, _cuda.BLOCK, _MAX_BLOCKS),)
        args = tuple(_NULL if a is None else np.uint64(self.ptr(a)) for a in arrays)
        self.fns[kind](grid, (_cuda.BLOCK,), args + (np.int64(n), np.int64(d), self.acts)
                       + tuple(np.int32(f) for f in flags))


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
