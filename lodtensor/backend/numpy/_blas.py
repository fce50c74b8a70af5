"""``x @ weight.T + bias`` in one call of NumPy's own BLAS, the bias folded into the GEMM.

NumPy's ``matmul`` calls ``cblas_sgemm`` with ``beta=0``: OpenBLAS first zeroes
the result, and the bias is then one more pass over it (read and write). Here
the result is filled with the bias rows instead of zeros and the same GEMM
runs with ``beta=1``: the bias costs no pass of its own (measured on the
75K x 256 x 256 float32 case of ``bench/cpu.py``: 54 ms against 59-63 ms for
``matmul`` then ``+=``, the GEMM alone 52 ms).

The same bits as the two-step way: OpenBLAS adds the product into the result
one block of the inner dimension ``k`` at a time, so a result value is
``fl(b + x_i . w_j)`` as ``fl(fl(x_i . w_j) + b)`` only while ``k`` fits in one
block. The fold serves ``k`` up to ``_tuning.BLAS_MAX_DEPTH`` (256), and only once a probe
GEMM of that depth has given the two-step way's bits on this machine's BLAS
(its block depth depends on the CPU it picked); deeper products take the two-step
way, where the bias pass is a smaller part of the time (measured on 73K rows,
256 outputs: 10% of the two-step time at ``k`` = 256, 5% at 512, 3% at 1024).

The BLAS is the one NumPy's wheels ship and have loaded already (OpenBLAS
from ``scipy-openblas``, with its ``scipy_`` symbol prefix; ``64_`` marks the
64-bit-integer build). Where NumPy uses another BLAS (a distribution's or
conda's build, Accelerate), or the switch of :func:`._compiled.set_compiled_kernels`
is off, :func:`gemm_bias` returns None and the caller takes the two-step way.
"""

import ctypes
import glob
import os

import numpy as np

from . import _compiled, _tuning
from ._util import broadcast_row

__all__ = ["gemm_bias"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# (symbol name stem, integer type): the scipy-openblas builds NumPy's wheels bundle
_BUILDS = (("scipy_cblas_{}gemm64_", ctypes.c_int64), ("scipy_cblas_{}gemm", ctypes.c_int32))
_LIBRARY_GLOBS = ("numpy.libs/libscipy_openblas*", "numpy/.dylibs/libscipy_openblas*")


def _library_paths():
    """NumPy's bundled OpenBLAS files, those this process has mapped (the loaded one) first."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    found = [os.path.realpath(p) for pattern in _LIBRARY_GLOBS for p in sorted(glob.glob(os.path.join(site, pattern)))]
    try:
        with open("/proc/self/maps") as maps:
            mapped = {line.split(None, 5)[-1].strip() for line in maps if "openblas" in line}
    except OSError:  # not Linux: the files as found
        mapped = set()
    return sorted(found, key=lambda p: p not in mapped)


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
            lib = ctypes.CDLL(path)  # loaded by NumPy already: the same library
        except OSError:
            continue
        for stem, integer in _BUILDS:
            found = {
                np.dtype(np.float32): _bind(lib, stem.format("s"), integer, ctypes.c_float),
                np.dtype(np.float64): _bind(lib, stem.format("d"), integer, ctypes.c_double),
            }
            if all(found.values()):
                return found
    return {}


_GEMM = None


def _probe(dtype, fn):
    """Whether a folded GEMM of depth ``_tuning.BLAS_MAX_DEPTH`` gives the two-step way's bits here (192 x 192
    results: large enough for OpenBLAS's blocked path, not its small-matrix kernels)."""
    g = np.random.default_rng(0)
    x = g.standard_normal((192, _tuning.BLAS_MAX_DEPTH)).astype(dtype)
    w = g.standard_normal((192, _tuning.BLAS_MAX_DEPTH)).astype(dtype)
    b = g.standard_normal(192).astype(dtype)
    out = np.empty((192, 192), dtype)
    _call(fn, x, w, b, out, _tuning.BLAS_MAX_DEPTH, _tuning.BLAS_MAX_DEPTH)
    return out.tobytes() == (x @ w.T + b).tobytes()


def _gemm(dtype):
    """``(gemm function, largest integer argument)`` for ``dtype`` where the fold is exact, or None."""
    global _GEMM  # noqa: PLW0603 - found once, on first use
    if _GEMM is None:
        _GEMM = {dtype: found for dtype, found in _load().items() if _probe(dtype, found[0])}
    return _GEMM.get(dtype)


def _call(fn, x, weight, bias, out, lda, ldb):
    n, k = x.shape
    m = weight.shape[0]
    broadcast_row(out, bias)
    fn(_ROW_MAJOR, _NO_TRANS, _TRANS, n, m, k, 1.0, x.ctypes.data, lda, weight.ctypes.data, ldb, 1.0,
       out.ctypes.data, m)


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

    None (``out`` untouched) unless ``x`` is ``(n, k)``, ``weight`` ``(m, k)``,
    ``bias`` ``(m,)`` and ``out`` a writeable ``(n, m)``, all four float32 or all
    float64; and for matrices BLAS cannot address (byte-swapped, unaligned,
    columns apart), an ``out`` overlapping an input, small results, a single
    row or column (NumPy's ``matmul`` calls GEMV there: the bits would differ),
    ``k`` deeper than ``_tuning.BLAS_MAX_DEPTH`` or a BLAS whose probe failed (the bits
    would differ), or no NumPy BLAS found.

    >>> import numpy as np
    >>> x, w, b = np.ones((300, 4), np.float32), np.eye(200, 4, dtype=np.float32), np.arange(200, dtype=np.float32)
    >>> out = np.empty((300, 200), np.float32)
    >>> r = gemm_bias(x, w, b, out)
    >>> r is None or bool((r == x @ w.T + b).all())
    True
    """
    dtype = out.dtype
    if not _compiled.compiled_kernels() or dtype.kind != "f" or dtype.byteorder not in "=|":
        return None
    if x.ndim != 2 or weight.ndim != 2 or out.ndim != 2 or bias is None or bias.ndim != 1:
        return None
    n, k = x.shape
    m = weight.shape[0]
    if weight.shape[1] != k or bias.shape != (m,) or out.shape != (n, m) or bias.dtype != dtype:
        return None
    if n * m < _tuning.BLAS_MIN_VALUES or min(n, m) == 1 or not 0 < k <= _tuning.BLAS_MAX_DEPTH:
        return None
    if not (out.flags.c_contiguous and out.flags.aligned and out.flags.writeable):
        return None
    lda, ldb = _leading(x, dtype), _leading(weight, dtype)
    if lda is None or ldb is None or any(np.may_share_memory(out, a) for a in (x, weight, bias)):
        return None
    found = _gemm(dtype)
    if found is None or max(n, m, k, lda, ldb) > found[1]:
        return None
    _call(found[0], x, weight, bias, out, lda, ldb)
    return out
