"""NumPy versions of the activation functions NumPy lacks: erf, gelu, silu.

Large float arrays are computed in cache-sized blocks (every temporary stays
in L2, so main memory sees one read of ``x`` and one write of the result) and
the blocks are shared among a few threads (NumPy releases the GIL inside its
loops). ``set_num_threads`` sets how many; small arrays run on the caller's
thread.
"""

import math

import numpy as np

from .._threads import get_num_threads, run_together, set_num_threads
from . import _pool, _tuning
from ._compiled import compiled_pointwise

__all__ = [
    "erf", "gelu", "silu", "relu", "map_blocks", "run_compiled", "set_num_threads", "get_num_threads", "NUMPY_EXTRA",
]


def map_blocks(fn, x, out, block=_tuning.SPECIAL_BLOCK, scratch=0):
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
    parallel = x.size >= _tuning.SPECIAL_PARALLEL_MIN and threads > 1 and len(chunks) > 1
    starts = iter(chunks)  # shared: each thread takes the next block when it is free (no stragglers)

    def run():
        tmp = [np.empty((step,) + x.shape[1:], dtype=x.dtype) for _ in range(scratch)]
        for a in starts:
            m = min(step, n - a)
            fn(x[a : a + m], out[a : a + m], *[t[:m] for t in tmp])

    if not parallel:
        run()
        return out
    run_together(run, [run] * (min(threads, len(chunks)) - 1))  # the caller works too
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


# float32: Abramowitz & Stegun 7.1.26 for erfc(z) = t P(t) exp(-z^2), t = 1 / (1 + p z), z >= 0;
# absolute error < 1.5e-7, below float32 resolution of the results it feeds. gelu evaluates it in
# the variable w = k t with k = a5 ** (1 / 5), which makes the polynomial monic: one pass fewer,
# and w = k / (1 + p z) is one divide (NumPy's float32 divide is about 2x faster than its
# reciprocal). erf keeps the plain form (1 - erfc(0) rounds to exactly 0 there).
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_AS_K = _AS_A[4] ** 0.2
_AS_C = tuple(c / _AS_K ** (j + 1) for j, c in enumerate(_AS_A[:4]))  # w, w^2, w^3, w^4 (w^5: 1)


def _erfc_block(ax, scale, out, t):
    """``out = erfc(ax * scale)`` for ``ax >= 0`` (float32, in place; ``t`` is scratch): 15 passes."""
    np.multiply(ax, _AS_P * scale, out=t)
    t += 1.0
    np.divide(_AS_K, t, out=t)  # w
    np.add(t, _AS_C[3], out=out)  # Horner on the monic quartic
    for coef in _AS_C[2::-1]:
        out *= t
        out += coef
    out *= t
    return _times_gauss(ax, scale, out, t)


def _times_gauss(ax, scale, out, t):
    """``out *= exp(-(ax * scale) ** 2)`` (in place; ``t`` is scratch): the factor both erfc forms end with."""
    np.multiply(ax, ax, out=t)
    t *= -(scale * scale)
    np.exp(t, out=t)
    out *= t
    return out


def _half_erfc_block(ax, scale, out, t):
    """``out = 0.5 * erfc(ax * scale)`` for ``ax >= 0`` (float32, in place; ``t`` is scratch)."""
    np.multiply(ax, _AS_P * scale, out=t)
    t += 1.0
    np.reciprocal(t, out=t)
    np.multiply(t, _AS_A[4] * 0.5, out=out)
    for coef in _AS_A[3::-1]:
        out += coef * 0.5
        out *= t
    return _times_gauss(ax, scale, out, t)


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
    out = _pool.empty(x.shape, x.dtype)
    flat = np.ascontiguousarray(x).reshape(-1)
    map_blocks(_erf32_block, flat, out.reshape(-1), scratch=2)
    return out


_SQRT1_2 = 0.7071067811865476


def _gelu32_block(x, out, ax, t):
    # gelu(x) = x Phi(x) = relu(x) - |x| Phi(-|x|) = x / 2 + |x| / 2 - |x| erfc(|x| / sqrt 2) / 2
    # (relu as x / 2 + |x| / 2: NumPy's maximum against a scalar is about 3x slower than an add,
    # and x + |x| overflows past 1.7e38)
    np.abs(x, out=ax)
    ax *= 0.5
    _erfc_block(ax, 2 * _SQRT1_2, out, t)
    out *= ax
    np.multiply(x, 0.5, out=t)
    t += ax  # exact: 0 for x <= 0, so the negative tail keeps its relative precision
    np.subtract(t, out, out=out)
    np.copyto(out, x, where=np.isposinf(x))  # inf - inf * 0 is NaN; torch's gelu(inf) is inf


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
    if x.dtype == np.float16:  # torch computes half in float32, rounding once
        return gelu(x.astype(np.float32), approximate).astype(np.float16)
    out = _pool.empty(x.shape, x.dtype)
    # a strided view (a transposed or sliced nested component) is read once into rows the kernels take
    flat, res = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
    if approximate == "tanh":
        map_blocks(_gelu_tanh_block, flat, res)
    elif x.dtype == np.float32:
        kernel = compiled_pointwise("gelu_f32", x.nbytes)
        if kernel is not None:  # the same formula in one compiled pass (lodtensor/backend/_cpointwise.c)
            run_compiled(kernel, flat, res, _tuning.GELU_PARALLEL_BYTES)
        else:
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
    out = _pool.empty(x.shape, x.dtype)
    map_blocks(_silu_block, np.ascontiguousarray(x).reshape(-1), out.reshape(-1))
    return out


def _relu_block(x, out):
    np.maximum(x, 0, out=out)


def relu(x, out=None):
    """``np.maximum(x, 0)`` of a float array, keeping the dtype, into ``out`` (C-contiguous, of
    ``x``'s shape and dtype, ``x`` itself or not overlapping it) or a new array; threaded for
    large arrays, in one compiled pass for native float32/float64."""
    out = _pool.empty(x.shape, x.dtype) if out is None else out
    kernel = compiled_pointwise("relu", out.nbytes) if x.dtype in (np.float32, np.float64) else None
    flat = x.reshape(-1)
    if kernel is None or not x.dtype.isnative or not flat.flags.c_contiguous:
        if flat.size < _tuning.SPECIAL_PARALLEL_MIN:
            _relu_block(flat, out.reshape(-1))
        else:
            map_blocks(_relu_block, flat, out.reshape(-1), block=1 << 17)
        return out
    return run_compiled(kernel, flat, out)


def run_compiled(kernel, flat, out, parallel_bytes=None):
    """The compiled pointwise ``kernel(flat, out, threads)`` (1-d ``flat``, ``out`` of its size): on one
    thread below ``parallel_bytes`` of output (default ``_tuning.RELU_PARALLEL_BYTES``), else split
    among ``get_num_threads()`` threads of the kernels' own pool, which hands work over in about a
    microsecond (the Python pool's hand-off cost about 120 us: relu of 4 MB took 92 us on one thread
    and 165 us on two)."""
    limit = _tuning.RELU_PARALLEL_BYTES if parallel_bytes is None else parallel_bytes
    kernel(flat, out.reshape(-1), get_num_threads() if out.nbytes >= limit else 1)
    return out


# -- the pointwise table's functions NumPy lacks, with torch's argument names -----------------------
def _scipy(name):
    """A scipy.special function (SciPy is an optional extra: a clear error names it when missing)."""
    try:
        import scipy.special as sp  # noqa: PLC0415 - optional, imported on first use
    except ImportError as err:
        raise ImportError(f"{name}() on NumPy data needs SciPy: pip install 'lodtensor[scipy]'") from err
    return getattr(sp, name)


def _c(x, value):
    """``value`` as a scalar of ``x``'s dtype (keeps float32 math in float32)."""
    return x.dtype.type(value)


def sigmoid(x):
    out = np.negative(x)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


def rsqrt(x):
    out = np.sqrt(x)
    return np.reciprocal(out, out=out)


def logit(x, eps=None):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


def frac(x):
    return x - np.trunc(x)


def erfc(x):
    return _scipy("erfc")(x).astype(x.dtype, copy=False)


def erfinv(x):
    return _scipy("erfinv")(x).astype(x.dtype, copy=False)


def digamma(x):
    return _scipy("psi")(x).astype(x.dtype, copy=False)


def i0(x):
    return np.i0(x).astype(x.dtype, copy=False)


def round_(x, decimals=0):
    return np.round(x, decimals) if decimals else np.rint(x) if x.dtype.kind == "f" else x.copy()


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, copy=True, nan=nan, posinf=posinf, neginf=neginf)


def hardtanh(x, min_val=-1.0, max_val=1.0):
    return np.clip(x, _c(x, min_val), _c(x, max_val))


def relu6(x):
    return hardtanh(x, 0, 6)


def hardsigmoid(x):
    return np.clip(x / _c(x, 6) + _c(x, 0.5), 0, 1).astype(x.dtype, copy=False)


def leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, x * _c(x, negative_slope))


def elu(x, alpha=1.0):
    return np.where(x > 0, x, _c(x, alpha) * np.expm1(np.minimum(x, 0)))


def celu(x, alpha=1.0):
    return np.where(x > 0, x, _c(x, alpha) * np.expm1(np.minimum(x, 0) / _c(x, alpha)))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def selu(x):
    return _c(x, _SELU_SCALE) * elu(x, _SELU_ALPHA)


def softplus(x, beta=1.0, threshold=20.0):
    bx = x * _c(x, beta)
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / _c(x, beta))


def mish(x):
    return x * np.tanh(softplus(x))


def tanhshrink(x):
    return x - np.tanh(x)


def softsign(x):
    return x / (1 + np.abs(x))


def _int_divisor(a, b):
    """True for integer division; integer division by zero raises, as in torch."""
    if np.result_type(a, b).kind not in "biu":
        return False
    if not np.all(b):
        raise ZeroDivisionError("ZeroDivisionError")
    return True


def power(a, b):
    """``a ** b``; integers to negative integer powers as torch gives them (1, -1 or 0), not an error."""
    kind = np.result_type(a, b).kind
    if kind == "b":  # bool ** bool scalar: x ** True is x, x ** False is True (torch)
        return np.logical_or(a, np.logical_not(b))
    if kind not in "iu" or not np.any(np.less(b, 0)):
        return np.power(a, b)
    if np.ndim(b) == 0:  # torch refuses a negative scalar exponent, computes a negative tensor one
        raise ValueError("Integers to negative integer powers are not allowed.")
    neg = np.less(b, 0)
    out = np.power(a, np.where(neg, 0, b))
    odd = np.where(np.remainder(b, 2) == 1, -1, 1)
    return np.where(neg, np.where(np.equal(a, 1), 1, np.where(np.equal(a, -1), odd, 0)), out).astype(out.dtype)


def remainder(a, b):
    _int_divisor(a, b)
    return np.remainder(a, b)


def fmod(a, b):
    _int_divisor(a, b)
    return np.fmod(a, b)


def div_trunc(a, b, rounding_mode=None):
    if _int_divisor(a, b):  # np.abs of a Python int is an int64 scalar: the operands' dtype kept
        return (np.abs(a) // np.abs(b) * (np.sign(a) * np.sign(b))).astype(np.result_type(a, b), copy=False)
    return np.trunc(np.true_divide(a, b))


def div_floor(a, b, rounding_mode=None):
    _int_divisor(a, b)  # (NumPy's floor_divide of floats is torch's too: inf // 2 is NaN, not floor(inf))
    return np.floor_divide(a, b)


def conj(x):
    return np.conj(x) if x.dtype.kind == "c" else x.copy()


def clamp(x, min=None, max=None):  # noqa: A002 - torch's names
    return np.clip(x, min, max)


def relu_any(x):
    return relu(x) if x.dtype.kind == "f" else np.maximum(x, 0).astype(x.dtype, copy=False)


#: table name -> scipy.special's name (or a function of scipy.special) for torch.special's functions
SCIPY_SPECIAL = {
    "bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1", "modified_bessel_i0": "i0",
    "modified_bessel_i1": "i1", "modified_bessel_k0": "k0", "modified_bessel_k1": "k1",
    "scaled_modified_bessel_k0": "k0e", "scaled_modified_bessel_k1": "k1e", "i0e": "i0e", "i1": "i1",
    "i1e": "i1e", "erfcx": "erfcx", "log_ndtr": "log_ndtr", "ndtr": "ndtr", "ndtri": "ndtri", "entr": "entr",
    "zeta": "zeta", "gammainc": "gammainc", "gammaincc": "gammaincc",
    "airy_ai": ("airy", lambda f, x: f(x)[0]), "spherical_bessel_j0": ("spherical_jn", lambda f, x: f(0, x)),
}  # fmt: skip


def _by_scipy(name):
    scipy_name, adapt = SCIPY_SPECIAL[name] if isinstance(SCIPY_SPECIAL[name], tuple) else (SCIPY_SPECIAL[name], None)

    def fn(x, *more):  # the dtype of the (first) array operand, as the table's dtype rule cast them
        f = _scipy(scipy_name)
        out = adapt(f, x) if adapt else f(x, *more)
        return out.astype(next(a.dtype for a in (x, *more) if hasattr(a, "dtype")), copy=False)

    fn.__name__ = name
    return fn


#: pointwise table name -> NumPy implementation, for the names NumPy has no ufunc of.
NUMPY_EXTRA = {
    "erf": erf, "erfc": erfc, "erfinv": erfinv, "digamma": digamma, "i0": i0,
    "sigmoid": sigmoid, "rsqrt": rsqrt, "logit": logit, "frac": frac, "round": round_,
    "nan_to_num": nan_to_num, "relu": relu_any, "gelu": gelu, "silu": silu, "hardtanh": hardtanh,
    "relu6": relu6, "hardsigmoid": hardsigmoid, "leaky_relu": leaky_relu, "elu": elu, "celu": celu,
    "selu": selu, "softplus": softplus, "mish": mish, "tanhshrink": tanhshrink, "softsign": softsign,
    "clamp": clamp,
    "conj": conj, "remainder": remainder, "fmod": fmod, "power": power,
    "div_trunc": div_trunc, "div_floor": div_floor, **{name: _by_scipy(name) for name in SCIPY_SPECIAL},
}  # fmt: skip
