"""The fused element-wise parts of an LSTM or GRU time step (``cuda/rnn.cu``), launched by pointer.

A step of the recurrences is one or two GEMMs and a dozen element-wise ops on a few hundred KB;
on a GPU each op is a launch, and the loop is bound by launches rather than by bytes.
:class:`LSTMSteps` launches one kernel after each forward GEMM and one before each backward GEMM;
:class:`GRUSteps` one after each of a step's two GEMMs, each way. Both GPU routes use them: CuPy
arrays (``numpy/_recurrent.py`` on CuPy, forward) and torch CUDA tensors
(``backend/torch/_fused_steps.py``, with autograd), each giving its pointers and the context of its
launches. A loop plans all its launches before its first step (:meth:`_Steps.plan`: every operand's
address at every step, from the step-major buffers' base addresses, by NumPy): a step then costs its
launch alone, no view and no pointer lookup per operand. float32/float64 data, and the activations
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

    # -- a whole loop's launches planned at once: per step only the launch itself (no views, no pointers) --
    def at(self, a):
        """The address of ``a`` (None: 0), the same at every step."""
        return _NULL if a is None else np.uint64(self.ptr(a))

    def rows_at(self, a, starts):
        """Per step, the address of row ``starts[t]`` of ``a`` (a contiguous step-major buffer; None: 0)."""
        if a is None:
            return _NULL
        starts = np.asarray(starts, dtype=np.uint64)
        return self.at(a) + starts * np.uint64(a.nbytes // max(int(a.shape[0]), 1))

    def previous(self, a, starts, first):
        """Per step ``t``, the address of step ``t - 1``'s rows of ``a`` (``starts``: each step's first
        row); at step 0 the address of ``first`` (the initial state; None: 0)."""
        prev = self.rows_at(a, [0, *starts[:-1]])
        prev[0] = self.at(first)
        return prev

    def plan(self, kind, counts, width, operands, *flags):
        """Kernel ``kind``'s launches, one per step ``t`` over ``counts[t]`` rows of ``width``, its pointer
        arguments ``operands``: each an address (:meth:`at`) or an address per step (:meth:`rows_at`,
        :meth:`previous`). Run step ``t``'s with :meth:`launch`."""
        n = np.asarray(counts, dtype=np.int64)
        columns = [list(np.broadcast_to(np.asarray(a, dtype=np.uint64), n.shape)) for a in operands]
        grids = np.clip(-(-n * width // _cuda.BLOCK), 1, _MAX_BLOCKS).tolist()
        d, tail = np.int64(width), (self.acts, *(np.int32(f) for f in flags))
        fn, block = self.fns[kind], (_cuda.BLOCK,)
        return [(fn, (grid,), block, (*pointers, rows, d, *tail)) for grid, rows, *pointers in zip(grids, n, *columns)]

    @staticmethod
    def launch(planned):
        """One launch of :meth:`plan`."""
        fn, grid, block, args = planned
        fn(grid, block, args)


class LSTMSteps(_Steps):
    """Kernels ``lstm_step`` (after a step's GEMM: the gates activated in place, the cell, the hidden state and,
    for the backward, the cell's activation) and ``lstm_step_grad`` (before a step's GEMM backward)."""

    __slots__ = ()
    KERNELS = ("lstm_step", "lstm_step_grad")

    @staticmethod
    def _code(gate, cell, cand):
        return gate | cell << 4 | cand << 8


class GRUSteps(_Steps):
    """Kernels ``gru_step_gates`` (after the gates' GEMM: update and reset activated, ``r * h_prev``),
    ``gru_step_out`` (after the candidate's GEMM: the new state), and their gradients ``gru_step_grad_out``
    and ``gru_step_grad_reset``."""

    __slots__ = ()
    KERNELS = ("gru_step_gates", "gru_step_out", "gru_step_grad_out", "gru_step_grad_reset")

    @staticmethod
    def _code(gate, cand):
        return gate | cand << 8
