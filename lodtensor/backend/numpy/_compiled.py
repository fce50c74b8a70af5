"""The compiled kernels of the NumPy backend: segment sum, max and min over each sequence's rows in one
read, and the backward passes of segment softmax, max and min (for the torch backend's CPU autograd) in
one read of their inputs (``_csegment.c``, ``_cbackward.h``), and GELU of float32 and relu of
float32/float64 values in one pass (``_cpointwise.c``).

Both are built from C when the package is installed (they need only a C
compiler and Python's headers; no library beyond NumPy). The segment kernel
reduces every sequence where it lies, a tile of columns at a time held in
SIMD registers, without the GIL: large inputs are cut into runs of sequences
with about equal row counts, which the calling thread and the kernels' own C
thread pool (``_cparallel.h``) take; the pointwise kernels cut their values
the same way. Where they were not built (no compiler
at install time), or are switched off with ``set_compiled_kernels(False)`` or
``LODTENSOR_COMPILED=0``, the NumPy-only kernels (:mod:`._chunks`,
:mod:`._pieces`, :mod:`._special`) serve with the same results.

>>> import numpy as np
>>> data = np.arange(48, dtype=np.float32).reshape(6, 8)
>>> out = compiled_reduce(np.add, data, np.array([0, 2, 2, 6]), -1)
>>> out[:, :2].tolist() if compiled_kernels() else "not built"
[[8.0, 10.0], [-1.0, -1.0], [112.0, 116.0]]
"""

import math
import os

import numpy as np

from .._threads import get_num_threads
from . import _pool, _tuning

try:
    from ._csegment import segment_reduce as _kernel
except ImportError:  # installed without a C compiler: the NumPy kernels serve
    _kernel = None
try:
    from ._csegment import extreme_grad as _extreme_grad
    from ._csegment import softmax_grad as _softmax_grad
except ImportError:  # an extension built before it had the backward kernels
    _softmax_grad = _extreme_grad = None
try:
    from ._cpointwise import gelu_f32 as _gelu_f32
    from ._cpointwise import relu as _relu
    from ._cpointwise import relu_torch as _relu_torch
except ImportError:
    _gelu_f32 = _relu = _relu_torch = None
# name -> (kernel, whether large outputs are streamed). GELU is not: on 87 MiB it took 7.3 ms streamed
# against 6.6 ms with plain stores (2 threads; its arithmetic, not memory, sets the pace), where relu
# took 4.5 against 5.8 ms.
_POINTWISE = {"gelu_f32": (_gelu_f32, False), "relu": (_relu, True), "relu_torch": (_relu_torch, True)}

__all__ = ["compiled_fits", "compiled_reduce", "compiled_pointwise", "compiled_kernels", "set_compiled_kernels",
           "compiled_softmax_grad", "compiled_extreme_grad"]

_OPS = {np.add: 0, np.maximum: 1, np.minimum: 2}
# (dtype kind, item size) -> the kernel's type code; unsigned ints for sums only (a wrapping sum has
# the same bits signed or not; their order differs)
_KINDS = {("f", 4): 0, ("f", 8): 1, ("i", 4): 2, ("i", 8): 3, ("u", 4): 2, ("u", 8): 3}

_enabled = _kernel is not None and os.environ.get("LODTENSOR_COMPILED", "1").strip() not in ("0", "")


def compiled_kernels():
    """True when the NumPy backend's segment reductions, GELU and relu run in the compiled kernels
    (and ``linear`` folds its bias into NumPy's BLAS GEMM).

    False when the segment kernel was not built (no C compiler when the package was installed)
    or they are switched off (:func:`set_compiled_kernels`, ``LODTENSOR_COMPILED=0``). Each kernel
    that was not built falls back on its own to the NumPy-only code, with the same results.

    >>> previous = set_compiled_kernels(False)  # the NumPy-only kernels, e.g. to compare results
    >>> compiled_kernels()
    False
    >>> set_compiled_kernels(previous)
    False
    """
    return _enabled


def set_compiled_kernels(enabled):
    """Switch the compiled kernels on or off; returns the previous setting.

    Raises ``RuntimeError`` when asked to switch it on and it was not built.

    >>> previous = set_compiled_kernels(False)
    >>> set_compiled_kernels(previous), compiled_kernels() == previous
    (False, True)
    """
    global _enabled  # noqa: PLW0603 - the process-wide switch
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"enabled must be True or False, got {enabled!r}")
    if enabled and _kernel is None:
        raise RuntimeError(
            "the compiled segment kernel was not built when lodtensor was installed (no C compiler "
            "was found); reinstall with a C compiler (gcc or clang) to build it"
        )
    previous, _enabled = _enabled, bool(enabled)
    return previous


#: The most threads one call of the compiled kernels runs on (``_cparallel.h``: PARALLEL_MAX_WORKERS + 1;
#: the kernels refuse more): a larger ``set_num_threads()`` count is capped to it.
POOL_MAX_THREADS = 64


def _threads_for(nbytes):
    """Threads for a segment kernel reading ``nbytes``: the kernel cuts its sequences into runs of about
    equal rows and runs them on the kernels' own pool (``_cparallel.h``) from
    ``_tuning.COMPILED_PARALLEL_BYTES``."""
    return min(get_num_threads(), POOL_MAX_THREADS) if nbytes >= _tuning.COMPILED_PARALLEL_BYTES else 1


def compiled_pointwise(name, nbytes):
    """The compiled pointwise kernel ``name`` as ``fn(x, out)``, or None where the kernels are
    switched off or were not built.

    ``"gelu_f32"`` (float32), ``"relu"`` (float32 or float64, as ``np.maximum(x, 0)``) or
    ``"relu_torch"`` (as ``torch.relu``: -0.0 kept): C-contiguous
    native buffers of one type and length, ``out`` may be ``x``; ``fn(x, out, threads)`` splits the
    work among ``threads`` threads of the kernels' own pool (``_cparallel.h``; at most
    ``POOL_MAX_THREADS``). ``nbytes`` is the whole
    output's size: from ``_tuning.STREAM_BYTES`` on, relu writes with streaming stores.
    """
    kernel, streams = _POINTWISE[name]
    if kernel is None or not _enabled:
        return None
    stream = streams and nbytes >= _tuning.STREAM_BYTES
    return lambda x, out, threads=1: kernel(x, out, stream, min(threads, POOL_MAX_THREADS))


def compiled_fits(ufunc, data, offsets):
    """Whether :func:`compiled_reduce` serves ``ufunc`` (add, maximum, minimum) of ``data``: the kernel
    built and on, a native float/int32/int64 dtype (unsigned for sums only), rows of 32 bytes or more,
    or narrower float rows in long runs."""
    op = _OPS.get(ufunc)
    kind = _KINDS.get((data.dtype.kind, data.dtype.itemsize))
    if not _enabled or op is None or kind is None or (data.dtype.kind == "u" and op) or not data.dtype.isnative:
        return False
    width = math.prod(data.shape[1:])
    row_bytes = width * data.dtype.itemsize
    if row_bytes == 0:
        return False
    return row_bytes >= _tuning.COMPILED_MIN_ROW_BYTES or (
        data.dtype.kind == "f"  # NumPy's reduceat widens narrow int sums to int64: those stay its way
        and (ufunc is np.add or width > 1)
        and _tuning.COMPILED_MIN_ROW_BYTES % row_bytes == 0
        and data.size >= _tuning.NARROW_VALUES * max(offsets.size - 1, 1)
    )


def compiled_reduce(ufunc, data, offsets, fill, *, checked=False):
    """``ufunc`` (add, maximum, minimum) over each sequence's rows of ``data``; empty sequences get
    ``fill``. None where the kernel does not apply (:func:`compiled_fits`; ``checked``: the caller
    asked it already)."""
    if not checked and not compiled_fits(ufunc, data, offsets):
        return None
    op = _OPS[ufunc]
    kind = _KINDS[(data.dtype.kind, data.dtype.itemsize)]
    n = offsets.size - 1
    width = math.prod(data.shape[1:])
    rows = np.ascontiguousarray(data).reshape(data.shape[0], width)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = np.empty((n, width), dtype=data.dtype)
    empty = offsets[1:] == offsets[:-1]
    if empty.any():
        out[empty] = fill
    _kernel(op, kind, rows, offsets, out, width, 0, n, _threads_for(rows.nbytes))
    return out.reshape((n,) + data.shape[1:])


def compiled_softmax_grad(grad, y, offsets):
    """Segment softmax's backward, ``y * (grad - dot)`` with ``dot`` the sum over each sequence's rows
    of ``grad * y``, by the compiled kernel: each sequence's rows read in address order, a second time
    from cache, into one output (from the buffer pool). ``y`` the softmax's float32 or float64 output
    and ``grad`` alike; None where the kernel does not apply (not built or off, another dtype, no
    rows or columns).

    >>> y = np.full((3, 2), 0.5)
    >>> out = compiled_softmax_grad(np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 4.0]]), y, np.array([0, 2, 3]))
    >>> out.tolist() if compiled_kernels() else "not built"
    [[-0.5, 0.0], [0.5, 0.0], [0.5, 1.0]]
    """
    kind = {"f4": 0, "f8": 1}.get(y.dtype.str[1:])
    width = math.prod(y.shape[1:])
    rows = y.shape[0] if y.ndim else 0
    if (not _enabled or _softmax_grad is None or kind is None or grad.dtype != y.dtype or grad.shape != y.shape
            or not y.dtype.isnative or rows == 0 or width == 0):
        return None
    g = np.ascontiguousarray(grad).reshape(rows, width)
    ys = np.ascontiguousarray(y).reshape(rows, width)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = _pool.empty(y.shape, y.dtype)
    flat = out.reshape(rows, width)
    _softmax_grad(kind, g, ys, offsets, flat, width, 0, offsets.size - 1, _threads_for(ys.nbytes))
    return out


def compiled_extreme_grad(data, result, grad, offsets):
    """Segment max's or min's backward, as ``scatter_reduce``'s: each sequence's ``grad`` shared evenly,
    per column, among its rows of ``data`` equal to its ``result`` (a NaN result matches none), by the
    compiled kernel: each sequence's rows read twice in address order (the second time from cache), into
    one output (from the buffer pool). float32 or float64 ``data``, ``result`` and ``grad`` alike; None
    where the kernel does not apply (not built or off, another dtype, no rows or columns).

    >>> data = np.array([[1.0, 5.0], [3.0, 5.0], [3.0, 2.0], [7.0, 7.0]])
    >>> out = compiled_extreme_grad(data, np.array([[3.0, 5.0], [7.0, 7.0]]), np.full((2, 2), 6.0),
    ...                             np.array([0, 3, 4]))
    >>> out.tolist() if compiled_kernels() else "not built"
    [[0.0, 3.0], [3.0, 3.0], [3.0, 0.0], [6.0, 6.0]]
    """
    kind = {"f4": 0, "f8": 1}.get(data.dtype.str[1:])
    width = math.prod(data.shape[1:])
    rows, n = (data.shape[0] if data.ndim else 0), offsets.size - 1
    if (not _enabled or _extreme_grad is None or kind is None or not data.dtype.isnative or rows == 0 or width == 0
            or result.dtype != data.dtype or grad.dtype != data.dtype or result.shape != grad.shape
            or result.shape != (n,) + data.shape[1:]):
        return None
    x = np.ascontiguousarray(data).reshape(rows, width)
    m = np.ascontiguousarray(result).reshape(n, width)
    g = np.ascontiguousarray(grad).reshape(n, width)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = _pool.empty(data.shape, data.dtype)
    flat = out.reshape(rows, width)
    _extreme_grad(kind, x, m, g, offsets, flat, width, 0, n, _threads_for(x.nbytes))
    return out
