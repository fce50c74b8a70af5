"""NumPy versions of the activation functions NumPy lacks: erf, gelu, silu.

Large float arrays are computed in cache-sized blocks (every temporary stays
in L2, so main memory sees one read of ``x`` and one write of the result) and
the blocks are shared among a few threads (NumPy releases the GIL inside its
loops). ``set_num_threads`` sets how many; small arrays run on the caller's
thread.
"""

import math

import numpy as np

from ._threads import get_num_threads, pool, set_num_threads

__all__ = ["erf", "gelu", "silu", "relu", "map_blocks", "set_num_threads", "get_num_threads"]

_BLOCK = 1 << 17  # elements per block: a few float32 temporaries of this size fit in L2 (measured best)
_PARALLEL_MIN = 1 << 18  # below this many elements, threads cost more than they save
def map_blocks(fn, x, out, block=_BLOCK, scratch=0):
    """``fn(x[a:b], out[a:b], *tmp)`` over blocks of axis 0 of ``x``, on a few threads when large.

    ``fn`` writes its block of the result into its second argument. Each
    thread gets ``scratch`` temporaries shaped like a block, allocated once
    per call: temporaries of a few hundred KiB allocated per block would each
    be a fresh ``mmap`` (and page faults) in glibc.
    """
    n = x.shape[0]
    if n == 0:
        return out
    row = x.size // n
    step = max(1, block // max(row, 1))
    threads = get_num_threads()
    chunks = range(0, n, step)
    parallel = x.size >= _PARALLEL_MIN and threads > 1 and len(chunks) > 1
    starts = iter(chunks)  # shared: each thread takes the next block when it is free (no stragglers)

    def run():
        tmp = [np.empty((step,) + x.shape[1:], dtype=x.dtype) for _ in range(scratch)]
        for a in starts:
            m = min(step, n - a)
            fn(x[a : a + m], out[a : a + m], *[t[:m] for t in tmp])

    if not parallel:
        run()
        return out
    workers = pool()
    helpers = [workers.submit(run) for _ in range(min(threads, len(chunks)) - 1)]
    run()  # the caller works too
    for h in helpers:
        h.result()
    return out


# -- erf ------------------------------------------------------------------------------------
_SCIPY_SPECIAL = {}


def _scipy_erf():
    """scipy.special.erf when SciPy is installed (imported on first use), else None."""
    if "erf" not in _SCIPY_SPECIAL:
        try:
            from scipy.special import erf as scipy_erf  # noqa: PLC0415 - optional accelerator
        except ImportError:
            scipy_erf = None
        _SCIPY_SPECIAL["erf"] = scipy_erf
    return _SCIPY_SPECIAL["erf"]


def _erf64(x):
    """erf on float64 to full precision: SciPy's ufunc when installed, else the standard
    library's ``math.erf`` element by element (correct, but about 5x slower)."""
    x = np.asarray(x, dtype=np.float64)
    fast = _scipy_erf()
    if fast is not None:
        return fast(x)
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


# float32: Abramowitz & Stegun 7.1.26 for erfc(|z|) = t P(t) exp(-z^2), t = 1 / (1 + p |z|);
# absolute error < 1.5e-7, below float32 resolution of the results it feeds.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _half_erfc_block(ax, scale, out, t):
    """``out = 0.5 * erfc(ax * scale)`` for ``ax >= 0`` (float32, in place; ``t`` is scratch)."""
    np.multiply(ax, _AS_P * scale, out=t)
    t += 1.0
    np.reciprocal(t, out=t)
    np.multiply(t, _AS_A[4] * 0.5, out=out)
    for coef in _AS_A[3::-1]:
        out += coef * 0.5
        out *= t
    np.multiply(ax, ax, out=t)
    t *= -(scale * scale)
    np.exp(t, out=t)
    out *= t
    return out


def _erf32_block(x, out, ax, t):
    np.abs(x, out=ax)
    _half_erfc_block(ax, 1.0, out, t)
    out *= -2.0
    out += 1.0
    np.copysign(out, x, out=out)


def erf(x):
    """The error function of a NumPy float array (float64: < 1 ulp; float32: < 2e-7 absolute)."""
    x = np.asarray(x)
    if x.dtype == np.float64 or x.dtype.kind != "f":
        return _erf64(x).astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
    out = np.empty(x.shape, dtype=x.dtype)
    flat = x.reshape(-1)
    map_blocks(_erf32_block, flat, out.reshape(-1), scratch=2)
    return out


_SQRT1_2 = 0.7071067811865476


def _gelu32_block(x, out, ax, t):
    # gelu(x) = x * Phi(x) = relu(x) - |x| * Phi(-|x|), and Phi(-|x|) = erfc(|x| / sqrt 2) / 2
    np.abs(x, out=ax)
    _half_erfc_block(ax, _SQRT1_2, out, t)
    out *= ax
    np.maximum(x, 0, out=t)
    np.subtract(t, out, out=out)


def _gelu_tanh_block(x, out):
    np.multiply(x, x, out=out)
    out *= 0.044715
    out += 1.0
    out *= x
    out *= 0.7978845608028654  # sqrt(2 / pi)
    np.tanh(out, out=out)
    out += 1.0
    out *= x
    out *= 0.5


def gelu(x, approximate="none"):
    """GELU of a NumPy float array, as torch computes it (``approximate`` 'none' or 'tanh')."""
    out = np.empty(x.shape, dtype=x.dtype)
    flat, res = x.reshape(-1), out.reshape(-1)
    if approximate == "tanh":
        map_blocks(_gelu_tanh_block, flat, res)
    elif x.dtype in (np.float32, np.float16):
        if x.dtype == np.float16:
            return gelu(x.astype(np.float32)).astype(np.float16)
        map_blocks(_gelu32_block, flat, res, scratch=2)
    else:
        np.multiply(flat, 0.5 * (1.0 + _erf64(flat * _SQRT1_2)), out=res)
    return out


def _silu_block(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1.0
    np.divide(x, out, out=out)


def silu(x):
    """SiLU (``x * sigmoid(x)``) of a NumPy float array."""
    out = np.empty(x.shape, dtype=x.dtype)
    map_blocks(_silu_block, x.reshape(-1), out.reshape(-1))
    return out


def _relu_block(x, out):
    np.maximum(x, 0, out=out)


def relu(x):
    """``max(x, 0)`` keeping the dtype; threaded for large arrays."""
    out = np.empty(x.shape, dtype=x.dtype)
    map_blocks(_relu_block, x.reshape(-1), out.reshape(-1), block=1 << 17)
    return out
