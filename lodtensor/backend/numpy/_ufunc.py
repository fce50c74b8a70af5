"""Elementwise NumPy ufuncs split by row blocks over the threads of ``lodtensor.set_num_threads``,
into outputs from the buffer pool (``_pool``) when the caller gives none."""

import math

import numpy as np

from ...errors import DTypeError
from .._threads import get_num_threads, run_together
from . import _pool, _special, _tuning

__all__ = ["apply_ufunc", "threaded_ufunc", "out_cast_error"]

#: the in-place operator of each ufunc that is one (named in the error of a result its tensor cannot hold)
_INPLACE = {
    "add": "+=", "subtract": "-=", "multiply": "*=", "divide": "/=", "true_divide": "/=", "floor_divide": "//=",
    "remainder": "%=", "power": "**=", "bitwise_and": "&=", "bitwise_or": "|=", "bitwise_xor": "^=",
    "left_shift": "<<=", "right_shift": ">>=",
}


def out_cast_error(name, result, out):
    """The :class:`~lodtensor.errors.DTypeError` of ufunc ``name`` whose result dtype ``result`` its ``out=``
    (dtype ``out``: an in-place operator's tensor) cannot hold under its library's casting rule; checked before
    anything is written, so the tensor is left as it was.

    >>> err = out_cast_error("add", np.dtype("float64"), np.dtype("int64"))
    >>> str(err).split(";")[0]
    "numpy.add (+= or out=): result type float64 can't be cast to the desired output type int64"
    """
    op = _INPLACE.get(name)
    where, new = (f"{op} or out=", f"t = t {op[:-1]} x") if op else ("out=", f"numpy.{name} without out=")
    return DTypeError(f"numpy.{name} ({where}): result type {result} can't be cast to the desired output type "
                      f"{out}; an in-place op keeps the tensor's dtype ({new} gives the promoted dtype)")


def apply_ufunc(ufunc, method, args, kwargs):
    """A NumPy ufunc call (split over the threads where :func:`threaded_ufunc` applies). An ``out=`` that
    cannot hold the result's dtype (NumPy's ``same_kind`` rule, checked by NumPy before anything is
    written) raises :func:`out_cast_error`'s DTypeError (a TypeError, as NumPy's UFuncTypeError is)."""
    try:
        if method == "__call__" and ufunc.signature is None:  # not gufuncs (matmul)
            result = threaded_ufunc(ufunc, args, kwargs)
            if result is not None:
                return result
        return getattr(ufunc, method)(*args, **kwargs)
    except TypeError as error:
        if type(error).__qualname__ != "_UFuncOutputCastingError":  # (NumPy's class is private; its name is not)
            raise
        raise out_cast_error(ufunc.__name__, error.from_, error.to) from None

# The widest item of a numeric result (complex long double): bounds a result's bytes before its dtype is known
# (a wider one, a string ufunc's, is at worst not split: the same values from one call).
_MAX_ITEMSIZE = 32


def threaded_ufunc(ufunc, args, kwargs):
    """``ufunc(*args, **kwargs)`` split by rows over threads, or None where that does not apply.

    With one thread (``set_num_threads(1)``) it is one call into the same
    output. Applies to large outputs (``_tuning.UFUNC_PARALLEL_BYTES``) of ufuncs on NumPy arrays
    and scalars without ``where``: the output (the caller's ``out=`` or a new
    array, typed by a one-row call) is cut into row blocks, each computed by
    the same ufunc on the matching rows of the inputs (inputs that broadcast
    along the first axis are passed whole); not where ``out=`` overlaps an input
    other than as the very same view (NumPy's copy-first semantics). Elementwise, so each element is
    computed exactly as in one call: the result is bit for bit the same. A new
    output comes from the buffer pool (no page faults once it is warm), and
    each thread touches first the rows it writes.
    """
    if ufunc is np.maximum:
        relu = _relu_call(args, kwargs)
        if relu is not None:
            return relu
    if "where" in kwargs or ufunc.nout != 1 or ufunc.signature is not None:  # gufuncs (matmul) are not elementwise
        return None
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if not arrays or any(a.dtype.hasobject for a in arrays) or any(
        not isinstance(a, (np.ndarray, np.generic, int, float, complex, bool)) for a in args
    ):
        return None
    out = kwargs.get("out")
    if isinstance(out, tuple):
        out = out[0] if len(out) == 1 else None
        if out is None:
            return None
    if out is not None and not isinstance(out, np.ndarray):
        return None
    shapes = {a.shape for a in arrays} if out is None else {out.shape, *(a.shape for a in arrays)}
    shape = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)  # (one shape: the common case)
    if not shape or shape[0] < 2:
        return None
    if out is None and math.prod(shape) * _MAX_ITEMSIZE < _tuning.UFUNC_PARALLEL_BYTES:
        return None  # too small to split whatever the result's dtype: no probe call, no row count
    rows = shape[0]
    row_elems = int(np.prod(shape[1:], dtype=np.int64))
    if out is None:
        probe = ufunc(*[a[:1] if _splits(a, shape) else a for a in args], **kwargs)
        if not isinstance(probe, np.ndarray) or probe.ndim != len(shape):
            return None
        nbytes = rows * row_elems * probe.dtype.itemsize
        if nbytes < _tuning.UFUNC_PARALLEL_BYTES:
            return None
        out = _pool.empty(shape, probe.dtype)
    elif out.nbytes < _tuning.UFUNC_PARALLEL_BYTES or out.shape != shape or any(_overlaps(a, out) for a in arrays):
        return None  # NumPy reads overlapping inputs as if copied first: one call keeps that
    params = {k: v for k, v in kwargs.items() if k != "out"}
    threads = get_num_threads()
    if threads == 1:
        ufunc(*args, out=out, **params)
        return out
    step = max(1, _tuning.UFUNC_BLOCK_ELEMENTS // max(row_elems, 1))
    starts = iter(range(0, rows, step))  # shared: each thread takes the next block when free

    def work():
        for a in starts:
            b = min(rows, a + step)
            ufunc(*[x[a:b] if _splits(x, shape) else x for x in args], out=out[a:b], **params)

    threads = min(threads, -(-rows // step))
    run_together(work, [work] * (threads - 1))
    return out


def _relu_call(args, kwargs):
    """``np.maximum(x, 0)`` of a native float32/float64 array ``x`` by ``_special.relu`` (the compiled
    kernel: the same bits, 4-5x faster than NumPy's ``maximum`` here), or None.

    Only in this order: ``np.maximum(0, -0.0)`` is ``-0.0`` in NumPy, ``np.maximum(-0.0, 0)`` is
    ``0.0``. The zero is a Python ``int`` or ``float`` (weak: the result keeps ``x``'s dtype), ``+0``.
    ``out=``, if given, is C-contiguous, of ``x``'s shape and dtype, and ``x`` itself or apart from it.
    """
    if len(args) != 2 or (kwargs and set(kwargs) != {"out"}):
        return None
    x, zero = args
    if type(zero) not in (int, float) or zero != 0 or math.copysign(1.0, zero) < 0:
        return None
    # plain arrays of one dimension or more: subclasses (np.matrix, masked arrays) and 0-d arrays (a
    # NumPy scalar result) keep NumPy's own loop
    if type(x) is not np.ndarray or x.ndim == 0 or x.dtype not in _RELU_TYPES or not x.flags.c_contiguous:
        return None
    if x.size < _tuning.RELU_MIN:  # NumPy's own loop is done before these checks and calls would be
        return None
    out = kwargs.get("out")
    if isinstance(out, tuple):
        out = out[0] if len(out) == 1 else None
    if out is not None:
        if type(out) is not np.ndarray or out.dtype != x.dtype or out.shape != x.shape:
            return None
        if not out.flags.c_contiguous or not out.flags.writeable or _overlaps(x, out):
            return None
    elif "out" in kwargs:
        return None
    return _special.relu(x, out)


_RELU_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _splits(x, shape):
    """True for an array operand that runs along the first axis of a result of ``shape``."""
    return isinstance(x, np.ndarray) and x.ndim == len(shape) and x.shape[0] == shape[0]


def _overlaps(x, out):
    """True where ``x`` shares memory with ``out`` other than element for element (the same view)."""
    if not np.may_share_memory(x, out):
        return False
    same = (x.shape == out.shape and x.strides == out.strides
            and x.__array_interface__["data"][0] == out.__array_interface__["data"][0])
    return not same
