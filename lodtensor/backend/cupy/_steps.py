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

The steps' GEMMs are planned the same way (:meth:`_Steps.gemm`): each one cuBLAS call by address through
CuPy's binding (``cupy.cuda.cublas``), with the handle the caller gives (torch's, on torch data: its TF32 mode),
in place of a library matmul per step. The binding sets the handle's stream to CuPy's current one before each
call (torch's, in the torch route's launch context); ``cublasSetStream`` also puts the handle back on cuBLAS's
default workspace, whichever workspace torch gave it (torch sets its own again when it next asks for the
handle). On the H100 (2026-11-28) a GRU step's four torch GEMMs and four launches took about 230 us of host
time against about 120 us of GPU time: the loop waited on the host. Where CuPy has no cuBLAS binding the steps
do not serve (:func:`blas`).
"""

import contextlib
import weakref

import numpy as np

from . import _launch
from . import cuda as _cuda

__all__ = ["LSTMSteps", "GRUSteps", "serves", "blas"]

_NULL = np.uint64(0)
_MAX_BLOCKS = 1 << 16
_OP_N, _OP_T = 0, 1  # cuBLAS's CUBLAS_OP_N, CUBLAS_OP_T
_GEMMS = {"float32": "sgemm", "float64": "dgemm"}
_BLAS = weakref.WeakKeyDictionary()  # cupy module -> its cuBLAS binding, or None where it has none


# the first CuPy major version whose every release takes alpha and beta by address (``size_t``: from 9.0.0b1;
# by value, ``float``/``double``, in v8 and 9.0.0a1/a2)
_SCALARS_BY_ADDRESS = 10


def blas(xp):
    """CuPy ``xp``'s cuBLAS binding (``xp.cuda.cublas``: ``sgemm``/``dgemm`` by address, alpha and beta too), or
    None where it cannot be imported (no cuBLAS library), lacks them or is older."""
    if xp not in _BLAS:
        major = str(getattr(xp, "__version__", "0")).split(".")[0]
        try:
            found = xp.cuda.cublas if major.isdigit() and int(major) >= _SCALARS_BY_ADDRESS else None
        except Exception:  # noqa: BLE001 - an unloadable cuBLAS is no cuBLAS: the unfused steps serve
            found = None
        _BLAS[xp] = found if all(hasattr(found, g) for g in _GEMMS.values()) else None
    return _BLAS[xp]


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
    __slots__ = ("acts", "fns", "ptr", "context", "gemm_fn", "handle", "scalars")
    KERNELS = ()

    def __init__(self, xp, dtype, acts, ptr, context=contextlib.nullcontext, handle=None):
        """``ptr(array)``: its device address; ``context()``: the context to launch in; ``handle()``: the cuBLAS
        handle to plan the GEMMs with, asked in that context (default: CuPy's of the current device)."""
        self.ptr, self.context = ptr, context
        self.acts = np.int32(self._code(*(_cuda.RNN_ACTS[a] for a in acts)))
        name = np.dtype(dtype).name
        self.fns = {k: _launch.kernel(xp, "rnn", _cuda.kernel_name(k, dtype=name)) for k in self.KERNELS}
        self.gemm_fn = getattr(blas(xp), _GEMMS[name])
        self.handle = handle if handle is not None else xp.cuda.get_cublas_handle
        self.scalars = np.array([1, 0], dtype=name)  # alpha 1; beta 1 or 0, by address (host pointer mode)

    def launching(self):
        return self.context()

    # -- a whole loop's launches planned at once: per step only the launch itself (no views, no pointers) --
    def at(self, a):
        """The address of ``a`` (None: 0), the same at every step."""
        return _NULL if a is None else np.uint64(self.ptr(a))

    def rows_at(self, a, starts, column=0):
        """Per step, the address of row ``starts[t]`` of ``a`` (a contiguous step-major buffer; None: 0), at its
        ``column``."""
        if a is None:
            return _NULL
        starts = np.asarray(starts, dtype=np.uint64)
        row = a.nbytes // max(int(a.shape[0]), 1)
        return self.at(a) + starts * np.uint64(row) + np.uint64(column * (row // max(int(a.shape[1]), 1)))

    def previous(self, a, starts, first):
        """Per step ``t``, the address of step ``t - 1``'s rows of ``a`` (``starts``: each step's first
        row); at step 0 the address of ``first`` (the initial state; None: 0)."""
        prev = self.rows_at(a, [0, *starts[:-1]])
        prev[0] = self.at(first)
        return prev

    def plan(self, kind, counts, width, operands, *flags):
        """Kernel ``kind``'s launches, one per step ``t`` over ``counts[t]`` rows of ``width``, its pointer
        arguments ``operands``: each an address (:meth:`at`) or an address per step (:meth:`rows_at`,
        :meth:`previous`). Run step ``t``'s with :meth:`run`."""
        n = np.asarray(counts, dtype=np.int64)
        columns = [list(np.broadcast_to(np.asarray(a, dtype=np.uint64), n.shape)) for a in operands]
        grids = np.clip(-(-n * width // _cuda.BLOCK), 1, _MAX_BLOCKS).tolist()
        d, tail = np.int64(width), (self.acts, *(np.int32(f) for f in flags))
        fn, block = self.fns[kind], (_cuda.BLOCK,)
        return [(fn, ((grid,), block, (*pointers, rows, d, *tail)))
                for grid, rows, *pointers in zip(grids, n, *columns)]

    def gemm(self, counts, out, ldc, a, lda, w, *, transposed=False, accumulate=True):
        """Per step ``t``, the GEMM ``out_t (+)= a_t @ w`` (``w.T`` where ``transposed``) over ``counts[t]`` rows,
        as one cuBLAS call each: ``out`` and ``a`` are the rows' addresses (per step, or one for every step) of
        row-major matrices with rows ``ldc`` and ``lda`` elements apart, ``w`` a contiguous 2-D array; ``+=``
        where ``accumulate``, else ``=``. cuBLAS is column-major: a row-major matrix's memory is its transpose
        there, so it computes ``out^T = B^T a^T`` (``B``: ``w`` or ``w.T``), with ``w``'s memory (``w^T`` there)
        as its first operand, ``CUBLAS_OP_T`` where ``transposed`` (``B^T = w``), and ``a``'s as its second."""
        rows, cols = (int(s) for s in w.shape)
        m, k, op = (rows, cols, _OP_T) if transposed else (cols, rows, _OP_N)
        alpha = self.scalars.ctypes.data
        beta = alpha + (0 if accumulate else self.scalars.itemsize)
        n = np.asarray(counts, dtype=np.int64)
        outs, ins = (np.broadcast_to(np.asarray(p, dtype=np.uint64), n.shape).tolist() for p in (out, a))
        head, w_at = (self.handle(), op, _OP_N, m), self.ptr(w)
        fn = self.gemm_fn
        return [(fn, (*head, r, k, alpha, w_at, cols, a_t, lda, beta, c_t, ldc))
                for r, a_t, c_t in zip(n.tolist(), ins, outs)]

    @staticmethod
    def run(step):
        """The planned calls ``step`` (of :meth:`plan` and :meth:`gemm`), in order."""
        for fn, args in step:
            fn(*args)


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
