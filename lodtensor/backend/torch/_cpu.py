"""CPU kernels of the torch backend: NumPy (or MKL SpMM) forward passes with torch backward passes.

Each is a ``torch.autograd.Function`` whose backward is built from
differentiable torch ops, so double backward works, and whose forward-mode
derivative (``jvp``) is torch ops on the tangent (``_jvp``). Whether one serves a call
is decided in ``torch.py`` (``_CPU_SHORTCUTS``, ``_numpy_moves``, ``_spmm_fits``).
"""

import os
import threading
import warnings

import numpy as np
import torch

from ..numpy import _pool
from ..numpy._backend import NumpyBackend
from ..numpy._compiled import (
    compiled_extreme_grad,
    compiled_kernels,
    compiled_pointwise,
    compiled_reduce,
    compiled_softmax_grad,
)
from ..numpy._special import run_compiled
from . import _jvp, _tuning
from ._rows import pad_index, segment_ids
from ._vmap import fast_apply, rows_rule, wrapped

__all__ = ["SegmentExtreme", "SegmentSoftmax", "PadCPU", "UnpadCPU", "SegmentSumSpMM", "ReluCPU"]

_NUMPY = NumpyBackend()


# -- segment max, min and softmax: the NumPy kernels forward ----------------------------------------
@rows_rule
class SegmentExtreme(torch.autograd.Function):
    """Max or min of each row segment of a CPU tensor.

    Forward: the NumPy backend's kernel on the tensor's memory (its plan is
    cached per offsets tensor). Backward: as ``scatter_reduce``'s, each
    segment's gradient is shared evenly among the rows that reach its extreme,
    per column; by the compiled kernel (``compiled_extreme_grad``) unless a graph
    of the backward is wanted (``create_graph=True``), then by differentiable
    ops, so double backward works.
    """

    @staticmethod
    def forward(data, offsets, ids, reduce, empty):
        host = data.detach().resolve_conj().resolve_neg().numpy()
        ufunc = np.maximum if reduce == "max" else np.minimum
        return torch.from_numpy(_NUMPY._reduceat(ufunc, host, offsets.numpy(), empty, owner=offsets))

    @staticmethod
    def setup_context(ctx, inputs, output):
        data, offsets, ids = inputs[:3]
        _jvp.save(ctx, data, output, offsets, _ids_or_empty(ids))
        ctx.has_ids = ids is not None

    @staticmethod
    def jvp(ctx, tangent, *_):
        data, out, offsets = ctx.saved_tensors[:3]
        return _jvp.segment_extreme(tangent, data, out, offsets)

    @staticmethod
    def backward(ctx, grad):
        data, out, offsets, ids = ctx.saved_tensors
        if not torch.is_grad_enabled() and not wrapped(grad):  # no graph wanted, a plain grad: the compiled kernel
            host = compiled_extreme_grad(_host(data), _host(out), _host(grad), offsets.numpy())
            if host is not None:
                return torch.from_numpy(host), None, None, None, None
        if not ctx.has_ids:
            ids = segment_ids(offsets, data.shape[0])
        hit = (data == out.index_select(0, ids)).to(grad.dtype)
        ties = torch.zeros_like(out, dtype=grad.dtype).index_add(0, ids, hit)  # out of place: vmap batches it
        return grad.index_select(0, ids) * hit / ties.clamp(min=1).index_select(0, ids), None, None, None, None


@rows_rule
class SegmentSoftmax(_jvp.SoftmaxRule, torch.autograd.Function):
    """Softmax over each row segment of a CPU tensor: the NumPy kernel forward (3x faster than
    the torch ops here for one score per row); backward ``y * (g - segment_sum(g * y))``, by the
    compiled kernel (``compiled_softmax_grad``: one read of each, one write) unless a graph of the
    backward is wanted (``create_graph=True``), then by differentiable torch ops.

    The result is saved as an output, so autograd can differentiate the backward pass again.
    """

    @staticmethod
    def forward(data, offsets, ids, be):
        return torch.from_numpy(_NUMPY._softmax(_host(data), offsets.numpy(), owner=offsets))  # plans kept per offsets

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, offsets, ids, be = inputs
        _jvp.save(ctx, output, offsets, _ids_or_empty(ids))
        ctx.has_ids, ctx.be = ids is not None, be

    @staticmethod
    def backward(ctx, grad):
        out, offsets, ids = ctx.saved_tensors
        # no graph of the backward wanted and a plain gradient (not a batch of them, as
        # autograd.grad(is_grads_batched=True) passes under vmap: no memory to read): the compiled kernel
        if not torch.is_grad_enabled() and not wrapped(grad):
            host = compiled_softmax_grad(_host(grad), _host(out), offsets.numpy())
            if host is not None:
                return torch.from_numpy(host), None, None, None
        ids = ids if ctx.has_ids else ctx.be.segment_ids(offsets, total=out.shape[0])
        inner = ctx.be.segment_sum(grad * out, offsets, ids=ids).index_select(0, ids)
        return out * (grad - inner), None, None, None


# -- pad and unpad: the NumPy kernels forward, index_select / pad backward ----------------------
def _ids_or_empty(ids):
    """Segment ids to save for the backward pass, or an empty stand-in (it computes them when needed)."""
    return ids if ids is not None else torch.empty(0, dtype=torch.int64)


def _host(x):
    return x.detach().resolve_conj().resolve_neg().numpy()


_POOLED = {torch.float32: np.float32, torch.float64: np.float64}


def _gather_rows(src, index):
    """``src.index_select(0, index)``; where no graph of it is recorded (a backward pass without
    ``create_graph``), into a buffer-pool output: a fresh output of 16 MiB or more pays its page
    faults (``[81819, 128]`` float32: 10-13 ms against 2-3 ms into a pooled one)."""
    if torch.is_grad_enabled() or src.dtype not in _POOLED or wrapped(src):  # (vmap has no out= rule)
        return src.index_select(0, index)
    out = torch.from_numpy(_pool.empty((index.numel(),) + tuple(src.shape[1:]), _POOLED[src.dtype]))
    return torch.index_select(src, 0, index, out=out)


@rows_rule
class PadCPU(_jvp.PadRule, torch.autograd.Function):
    """Rows into ``(n, maxlen, *row)`` by the NumPy kernel; the gradient is the unpadding of
    the incoming one (``index_select``, itself differentiable; into a pooled output without
    ``create_graph``)."""

    @staticmethod
    def forward(data, offsets, maxlen, pad_value, plan):
        value = _host(pad_value) if isinstance(pad_value, torch.Tensor) else pad_value
        return torch.from_numpy(_NUMPY.pad(_host(data), offsets.numpy(), maxlen, value, plan=plan))

    @staticmethod
    def backward(ctx, grad):
        (offsets,) = ctx.saved_tensors
        index = pad_index(offsets, ctx.maxlen, ctx.rows)
        flat = grad.reshape((grad.shape[0] * grad.shape[1],) + tuple(grad.shape[2:]))  # not -1: rows may be empty
        return _gather_rows(flat, index), None, None, None, None


@rows_rule(lead=2)
class UnpadCPU(_jvp.UnpadRule, torch.autograd.Function):
    """The first ``length`` rows of each padded sequence by the NumPy kernel; the gradient
    is the incoming one padded with zeros."""

    @staticmethod
    def forward(padded, offsets, plan):
        return torch.from_numpy(_NUMPY.unpad(_host(padded), offsets.numpy(), plan=plan))

    @staticmethod
    def setup_context(ctx, inputs, output):
        padded, offsets, _ = inputs
        _jvp.save(ctx, offsets)
        ctx.shape = tuple(padded.shape)
        ctx.rows = int(output.shape[0])

    @staticmethod
    def backward(ctx, grad):
        (offsets,) = ctx.saved_tensors
        n, maxlen = ctx.shape[:2]
        index = pad_index(offsets, maxlen, grad.shape[0])
        out = torch.zeros((n * maxlen,) + tuple(grad.shape[1:]), dtype=grad.dtype)
        return out.index_copy(0, index, grad).reshape(ctx.shape), None, None


# -- segment sum as a sparse-dense product (one CSR x dense product; see torch.py) -------------
_spmm_buffers = {}  # dtype -> (column indices 0..k-1, ones), grown on demand and shared
_spmm_lock = threading.Lock()
_spmm_quiet = threading.Event()  # set once torch's one-time "sparse CSR is beta" warning has been swallowed
_quiet_lock = threading.Lock()


def _forget_lock_after_fork():  # a lock held by another thread at the fork is never released in the child
    global _spmm_lock, _quiet_lock  # noqa: PLW0603 - rebound in the child only
    _spmm_lock = threading.Lock()
    _quiet_lock = threading.Lock()


def sparse_csr(crow, cols, values, size):
    """``torch.sparse_csr_tensor`` (invariants not checked: ours hold), its one-time "sparse CSR is beta"
    warning swallowed. ``warnings.catch_warnings`` swaps the process-wide filter list: threads overlapping
    in it can restore each other's lists and leave the "ignore" filter in place for good (every later
    UserWarning of the process lost). Only the calls before torch has warned go through it, one at a time."""
    if not _spmm_quiet.is_set():
        with _quiet_lock:
            if not _spmm_quiet.is_set():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    matrix = torch.sparse_csr_tensor(crow, cols, values, size=size, check_invariants=False)
                _spmm_quiet.set()
                return matrix
    return torch.sparse_csr_tensor(crow, cols, values, size=size, check_invariants=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_lock_after_fork)


def _spmm_parts(rows, dtype):
    """Column indices ``0..rows-1`` and ``rows`` ones: views of buffers kept for reuse, up to
    ``_tuning.SPMM_KEPT_BYTES`` a dtype; more rows get buffers of their own, for this call only
    (kept, one batch of 20M rows left 228 MiB held for the rest of the process)."""
    parts = _spmm_buffers.get(dtype)
    if parts is not None and parts[0].numel() >= rows:
        return parts[0][:rows], parts[1][:rows]
    row_bytes = 8 + dtype.itemsize  # an index and a one per row
    most = _tuning.SPMM_KEPT_BYTES // row_bytes
    if rows > most:
        return torch.arange(rows, dtype=torch.int64), torch.ones(rows, dtype=dtype)
    with _spmm_lock:
        parts = _spmm_buffers.get(dtype)
        if parts is None or parts[0].numel() < rows:
            size = min(max(rows, 2 * (parts[0].numel() if parts is not None else 0), 1024), most)
            parts = (torch.arange(size, dtype=torch.int64), torch.ones(size, dtype=dtype))
            _spmm_buffers[dtype] = parts
    return parts[0][:rows], parts[1][:rows]


def _spmm_segment_sum(flat, offsets):
    """Row segment sums of a 2-D ``flat`` as one CSR x dense product."""
    rows, n = flat.shape[0], offsets.numel() - 1
    if not flat.is_contiguous():
        flat = flat.contiguous()
    cols, ones = _spmm_parts(rows, flat.dtype)
    return sparse_csr(offsets, cols, ones, (n, rows)) @ flat


@rows_rule
class SegmentSumSpMM(torch.autograd.Function):
    """Segment sum of 2-D rows by the NumPy backend's compiled kernel on the tensor's own memory
    (rows of 32 bytes or more, where it was built) or else by SpMM; the backward pass copies each
    segment's gradient to its rows (``index_select``, into a pooled output without ``create_graph``),
    itself differentiable for double backward."""

    @staticmethod
    def forward(flat, offsets, ids):
        out = None
        if compiled_kernels():
            host = flat.detach().resolve_conj().resolve_neg().numpy()
            out = compiled_reduce(np.add, host, offsets.numpy(), 0)
        return _spmm_segment_sum(flat, offsets) if out is None else torch.from_numpy(out)

    @staticmethod
    def setup_context(ctx, inputs, output):
        flat, offsets, ids = inputs
        _jvp.save(ctx, offsets, _ids_or_empty(ids))
        ctx.has_ids, ctx.rows = ids is not None, flat.shape[0]

    @staticmethod
    def jvp(ctx, tangent, *_):
        return _jvp.segment_sum(tangent, ctx.saved_tensors[0])

    @staticmethod
    def backward(ctx, grad):
        offsets, ids = ctx.saved_tensors
        if not ctx.has_ids:
            ids = segment_ids(offsets, ctx.rows)
        return _gather_rows(grad, ids), None, None


# -- relu: the compiled kernel forward ------------------------------------------------------------
@fast_apply
class ReluCPU(torch.autograd.Function):
    """``torch.relu`` of a contiguous CPU float32/float64 tensor by the compiled kernel, torch's bits
    (-0.0 kept), on two threads for large tensors: 7x faster than ``torch.relu`` on 75 MB here.
    Backward and forward-mode derivatives as torch's (``threshold_backward`` on the result: NaN
    positions pass the gradient), differentiable again for double backward."""

    @staticmethod
    def forward(x):
        kernel = compiled_pointwise("relu_torch", x.numel() * x.element_size())
        if kernel is None:  # switched off since the caller looked
            return torch.relu(x.detach())
        host = x.detach().numpy()
        out = _pool.empty(host.shape, host.dtype)
        run_compiled(kernel, host.reshape(-1), out)
        return torch.from_numpy(out)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _jvp.save(ctx, output)

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, result, 0)

    @staticmethod
    def jvp(ctx, tangent):
        (result,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(tangent, result, 0)
