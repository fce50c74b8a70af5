"""``x @ weight.T + bias`` in one call of NumPy's own BLAS, the bias folded into the GEMM.

NumPy's ``matmul`` calls ``cblas_sgemm`` with ``beta=0``: OpenBLAS first zeroes
the result, and the bias is then one more pass over it (read and write). Here
the result is filled with the bias rows instead of zeros and the same GEMM
runs with ``beta=1``: the bias costs no pass of its own (measured on the
75K x 256 x 256 float32 case of ``bench/cpu.py``: 54 ms against 59-63 ms for
``matmul`` then ``+=``, the GEMM alone 52 ms). Each result value is
``fl(fl(x_i . w_j) + b_j)``, as in the two-step way: the same bits.

The BLAS is the one NumPy's wheels ship and have loaded already (OpenBLAS
from ``scipy-openblas``, with its ``scipy_`` symbol prefix; ``64_`` marks the
64-bit-integer build). Where NumPy uses another BLAS (a distribution's or
conda's build, Accelerate), or the switch of :func:`._np_compiled.set_compiled_kernels`
is off, :func:`gemm_bias` returns None and the caller takes the two-step way.
"""

import ctypes
import glob
import os

import numpy as np

from . import _np_compiled

__all__ = ["gemm_bias"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# Results smaller than this many values take the two-step way: the ctypes call costs a few
# microseconds, about what the bias pass costs there.
_MIN_VALUES = 1 << 15
# (symbol name stem, integer type): the scipy-openblas builds NumPy's wheels bundle
_BUILDS = (("scipy_cblas_{}gemm64_", ctypes.c_int64), ("scipy_cblas_{}gemm", ctypes.c_int32))
_LIBRARY_GLOBS = ("numpy.libs/libscipy_openblas*", "numpy/.dylibs/libscipy_openblas*")


def _library_paths():
    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    for pattern in _LIBRARY_GLOBS:
        yield from sorted(glob.glob(os.path.join(site, pattern)))


def _bind(lib, name, integer, real):
    fn = getattr(lib, name, None)
    if fn is None:
        return None
    c_int, ptr = ctypes.c_int, ctypes.c_void_p
    fn.argtypes = [c_int, c_int, c_int, integer, integer, integer, real, ptr, integer, ptr, integer, real, ptr,
                   integer]
    fn.restype = None
    return fn, np.iinfo(np.int64 if integer is ctypes.c_int64 else np.int32).max


def _load():
    """``{dtype: (gemm function, largest integer argument)}`` of NumPy's BLAS, or ``{}``."""
    for path in _library_paths():
        try:
            lib = ctypes.CDLL(os.path.realpath(path))  # loaded by NumPy already: the same library
        except OSError:
            continue
        for stem, integer in _BUILDS:
            found = {np.dtype(np.float32): _bind(lib, stem.format("s"), integer, ctypes.c_float),
                     np.dtype(np.float64): _bind(lib, stem.format("d"), integer, ctypes.c_double)}
            if all(found.values()):
                return found
    return {}


_GEMM = None


def _gemm(dtype):
    global _GEMM  # noqa: PLW0603 - found once, on first use
    if _GEMM is None:
        _GEMM = _load()
    return _GEMM.get(dtype)


def _leading(a, dtype):
    """The leading dimension of the row-major matrix ``a`` in items, or None where BLAS cannot read it."""
    if a.dtype != dtype or not a.flags.aligned or a.ndim != 2:
        return None
    rows, cols = a.strides
    item = dtype.itemsize
    if cols != item or rows % item or rows // item < a.shape[1] or rows <= 0:
        return None
    return rows // item


def gemm_bias(x, weight, bias, out):
    """Fill the C-contiguous ``out`` with ``x @ weight.T + bias``; returns ``out``, or None where it cannot.

    None (``out`` untouched) for other dtypes than float32/float64 with all four
    alike, matrices BLAS cannot address (byte-swapped, unaligned, columns apart),
    an ``out`` overlapping an input, small results, a single row or column
    (NumPy's ``matmul`` calls GEMV there: the bits would differ), or no NumPy
    BLAS found.

    >>> import numpy as np
    >>> x, w, b = np.ones((300, 4), np.float32), np.eye(200, 4, dtype=np.float32), np.arange(200, dtype=np.float32)
    >>> out = np.empty((300, 200), np.float32)
    >>> r = gemm_bias(x, w, b, out)
    >>> r is None or bool((r == x @ w.T + b).all())
    True
    """
    dtype = out.dtype
    if not _np_compiled.compiled_kernels() or dtype.kind != "f" or dtype.byteorder not in "=|":
        return None
    n, k = x.shape
    m = weight.shape[0]
    if n * m < _MIN_VALUES or min(n, m) == 1 or k == 0 or not out.flags.c_contiguous or not out.flags.aligned:
        return None
    if bias is None or bias.dtype != dtype or bias.shape != (m,) or out.shape != (n, m):
        return None
    lda, ldb = _leading(x, dtype), _leading(weight, dtype)
    found = _gemm(dtype)
    if lda is None or ldb is None or found is None or any(np.may_share_memory(out, a) for a in (x, weight, bias)):
        return None
    fn, largest = found
    if max(n, m, k, lda, ldb) > largest:
        return None
    np.copyto(out, bias)
    fn(_ROW_MAJOR, _NO_TRANS, _TRANS, n, m, k, 1.0, x.ctypes.data, lda, weight.ctypes.data, ldb, 1.0,
       out.ctypes.data, m)
    return out
