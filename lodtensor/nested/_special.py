"""NumPy versions of the activation functions NumPy lacks: erf, gelu, silu.

Large float arrays are computed in cache-sized blocks (every temporary stays
in L2, so main memory sees one read of ``x`` and one write of the result) and
the blocks are shared among a few threads (NumPy releases the GIL inside its
loops). ``set_num_threads`` sets how many; small arrays run on the caller's
thread.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["erf", "gelu", "silu", "relu", "map_blocks", "set_num_threads", "get_num_threads"]

_BLOCK = 1 << 17  # elements per block: a few float32 temporaries of this size fit in L2 (measured best)
_PARALLEL_MIN = 1 << 18  # below this many elements, threads cost more than they save
_state = {"threads": max(1, min(os.cpu_count() or 1, 8)), "pool": None}


def set_num_threads(n):
    """Use ``n`` threads (>= 1) for large NumPy activations and normalisations."""
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads(): n must be >= 1, got {n}")
    _state["threads"] = n
    pool = _state["pool"]
    _state["pool"] = None
    if pool is not None:
        pool.shutdown(wait=False)


def get_num_threads():
    """Threads used for large NumPy activations and normalisations."""
    return _state["threads"]


def _pool():
    pool = _state["pool"]
    if pool is None:
        pool = _state["pool"] = ThreadPoolExecutor(_state["threads"], thread_name_prefix="lodtensor")
    return pool


def _forget_pool_after_fork():
    _state["pool"] = None  # the parent's threads do not exist in a forked child (DataLoader workers)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


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
    threads = _state["threads"]
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
    helpers = [_pool().submit(run) for _ in range(min(threads, len(chunks)) - 1)]
    run()  # the caller works too
    for h in helpers:
        h.result()
    return out


# -- erf ------------------------------------------------------------------------------------
# float64: fdlibm's s_erf.c (Sun Microsystems, freely redistributable), < 1 ulp.
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
       -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
       -8.12874355063065934246e01, -9.81432934416914548592e00)
_SA = (1.0, 1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
       6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
       6.57024977031928170135e00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
       -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
       -4.83519191608651397019e02)
_SB = (1.0, 3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
       3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
       -2.24409524465858183362e01)
_ERX = 8.45062911510467529297e-01


def _poly(c, z):
    out = np.full_like(z, c[-1])
    for coef in c[-2::-1]:
        out *= z
        out += coef
    return out


def _erf64(x):
    """fdlibm's piecewise erf on float64 (each region on its own subset)."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    out = np.where(np.isnan(x), x, np.sign(x))  # |x| >= 6 (and +-inf): +-1; NaN stays NaN
    small = np.flatnonzero(ax < 0.84375)
    if small.size:
        v = x.ravel()[small]
        z = v * v
        out.ravel()[small] = v + v * (_poly(_PP, z) / _poly(_QQ, z))
    mid = np.flatnonzero((ax >= 0.84375) & (ax < 1.25))
    if mid.size:
        v = x.ravel()[mid]
        s = np.abs(v) - 1.0
        out.ravel()[mid] = np.copysign(_ERX + _poly(_PA, s) / _poly(_QA, s), v)
    tail = np.flatnonzero((ax >= 1.25) & (ax < 6.0))
    if tail.size:
        v = x.ravel()[tail]
        a = np.abs(v)
        s = 1.0 / (a * a)
        near = a < 1 / 0.35
        ratio = np.where(near, _poly(_RA, s) / _poly(_SA, s), _poly(_RB, s) / _poly(_SB, s))
        z = (a.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
        r = np.exp(-z * z - 0.5625) * np.exp((z - a) * (z + a) + ratio)
        out.ravel()[tail] = np.copysign(1.0 - r / a, v)
    return out


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
