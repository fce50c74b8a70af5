"""Pointwise-table functions written once against an array module, for the NumPy and CuPy backends.

Each entry of :data:`XP_FORMULAS` is ``fn(xp, special, *args, **kwargs)``:
``xp`` is the array module of the data (``numpy`` or ``cupy``) and
``special(name)`` returns the scipy.special function ``name`` of that library
(SciPy's on NumPy, cupyx.scipy.special's on CuPy, or a clear error where it
has none). So the same formula runs on host and device arrays, and never hands
a CuPy array to NumPy or SciPy.
"""

import math

import numpy as np

from ...errors import ArgumentError
from ._orthopoly import POLYNOMIALS

__all__ = ["XP_FORMULAS"]


def _x_log(xp, x, y, log, name):
    """``x * log(y)`` with 0 where ``x == 0`` and ``y`` is not NaN (torch's xlogy / xlog1py), in the operands'
    dtype (Python scalars are weak, NEP 50: float32 stays float32); complex operands refused, as torch's."""
    dtype = xp.result_type(x, y)
    if dtype.kind == "c":  # (NumPy's log would give a complex value where torch has no kernel)
        raise TypeError(f"{name}(): not implemented for complex operands (torch's {name} has no complex kernel), "
                        f"got dtype {dtype}")
    x, y = xp.asarray(x, dtype=dtype), xp.asarray(y, dtype=dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = x * log(y)
    return xp.where((x == 0) & ~xp.isnan(y), dtype.type(0), out).astype(out.dtype, copy=False)


def _real(name, x):
    """A complex ``x`` refused (SciPy's functions would refuse it naming their ufunc, not the op)."""
    if x.dtype.kind == "c":
        raise TypeError(f"{name}(): not implemented for complex data (torch's {name} has no complex kernel), got "
                        f"dtype {x.dtype}")


def xlogy(xp, special, x, y):
    return _x_log(xp, x, y, xp.log, "xlogy")


def xlog1py(xp, special, x, y):
    return _x_log(xp, x, y, xp.log1p, "xlog1py")


def mvlgamma(xp, special, x, p=None):
    """torch's formula, ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)`` (SciPy's multigammaln refuses small
    x, where torch gives a value): ``p`` whole-array passes."""
    if p is None:
        raise TypeError("mvlgamma() missing 1 required positional argument: 'p'")
    if p < 1:
        raise ArgumentError(f"mvlgamma(): p has to be greater than or equal to 1, got p={p}", argument="p", value=p)
    _real("mvlgamma", x)
    gammaln = special("gammaln")
    out = xp.full(x.shape, p * (p - 1) / 4 * math.log(math.pi), dtype=x.dtype)
    for j in range(p):
        out += gammaln(x - x.dtype.type(j / 2)).astype(x.dtype, copy=False)
    return out


def polygamma(xp, special, x, n):
    """The ``n``-th derivative of digamma (``n`` a Python int, checked by the op), in ``x``'s dtype."""
    _real("polygamma", x)
    return special("polygamma")(xp.asarray(n, dtype=np.float64), x).astype(x.dtype, copy=False)


def rrelu(xp, special, x, lower=0.125, upper=1.0 / 3, training=False, generator=None):
    """torch's randomized leaky ReLU: ``x`` where ``x > 0``; else ``x * a`` with ``a`` the mean slope
    ``(lower + upper) / 2`` (evaluation) or drawn uniformly from ``[lower, upper)`` per element (training; the
    library's global random state, as dropout's)."""
    if generator is not None:
        raise TypeError("rrelu(): generator= takes a torch.Generator, for torch data only; NumPy and CuPy data "
                        "draw from their library's global random state (seed it with np.random.seed / "
                        "cupy.random.seed)")
    if lower > upper:
        raise ArgumentError(f"rrelu(): Lower bound should be less than or equal to the upper bound, got "
                            f"lower={lower}, upper={upper}", argument="lower", value=lower)
    if not training:  # torch: leaky_relu with the mean slope, cast to the data's dtype
        return xp.where(x > 0, x, x * x.dtype.type((lower + upper) / 2))
    slopes = (xp.random.random_sample(x.shape) * (upper - lower) + lower).astype(x.dtype, copy=False)
    return xp.where(x <= 0, x * slopes, x)  # (NaN: not <= 0, kept as torch keeps it)


def threshold(xp, special, x, threshold, value):
    """``value`` where ``x <= threshold`` (NaN stays), both given as the scalar types torch converts them to
    (the op checks and converts them: ``lodtensor.nested._dtypes.checked_scalar``)."""
    return xp.where(x <= threshold, value, x).astype(x.dtype, copy=False)


def logaddexp(xp, special, a, b):
    """``log(exp(a) + exp(b))``: NumPy's ufunc for real operands; for complex ones (which it refuses), torch's
    rule: the operand of the smaller real part ``lo``, the other ``hi``, ``hi + log1p(exp(lo - hi))``; NaN in
    either part of either operand gives NaN + NaN j; equal infinite real parts give ``lo`` (-inf) or
    ``log(exp(lo) + exp(hi))`` (+inf)."""
    dtype = xp.result_type(a, b)
    if dtype.kind != "c":
        return xp.logaddexp(a, b)
    a, b = xp.asarray(a, dtype=dtype), xp.asarray(b, dtype=dtype)
    first = a.real < b.real
    lo, hi = xp.where(first, a, b), xp.where(first, b, a)
    with np.errstate(all="ignore"):
        e = xp.exp(lo - hi)  # log1p(e) as |1 + e| and its angle: NumPy's complex log1p loses a tiny e's real part
        out = hi + 0.5 * xp.log1p(e.real * (2 + e.real) + e.imag * e.imag) + 1j * xp.arctan2(e.imag, 1 + e.real)
        infinite = ~xp.isfinite(lo.real) & (lo.real == hi.real)
        out = xp.where(infinite, xp.where(lo.real < 0, lo, xp.log(xp.exp(lo) + xp.exp(hi))), out)
    return xp.where(xp.isnan(a) | xp.isnan(b), dtype.type(complex(math.nan, math.nan)), out).astype(dtype, copy=False)


def sign(xp, special, x):
    """-1, 0 or 1, as torch's: NaN gives 0 (NumPy's NaN), bool data is kept."""
    if x.dtype.kind == "b":
        return x.copy()
    out = xp.sign(x)
    if x.dtype.kind == "f":
        xp.copyto(out, 0, where=xp.isnan(out))  # NaN: in place
    return out


def sgn(xp, special, x):
    """``x / |x|`` (0 at 0) for complex data, :func:`sign` for real data."""
    if x.dtype.kind != "c":
        return sign(xp, special, x)
    mag = xp.abs(x)
    return xp.where(mag == 0, 0, x / xp.where(mag == 0, 1, mag)).astype(x.dtype, copy=False)


def angle(xp, special, x):
    """The argument of complex data; of real data pi where ``x < 0``, else 0 (-0.0 too: NumPy gives pi), NaN kept."""
    if x.dtype.kind == "c":
        return xp.angle(x)
    return xp.where(x < 0, math.pi, xp.where(xp.isnan(x), x, 0)).astype(x.dtype, copy=False)


def heaviside(xp, special, x, values):
    """``values`` where ``x == 0``, else ``x > 0`` (NaN gives 0), in the operands' dtype: torch's, which takes
    integers and bools too (NumPy's ufunc is float only and keeps NaN)."""
    dtype = xp.result_type(x, values)
    return xp.where(x == 0, values, x > 0).astype(dtype, copy=False)


def hardshrink(xp, special, x, lambd=0.5):
    """0 where ``|x| <= lambd``, else ``x`` (NaN kept, as torch's)."""
    return xp.where(xp.abs(x) <= lambd, 0, x).astype(x.dtype, copy=False)


def softshrink(xp, special, x, lambd=0.5):
    """``x`` moved ``lambd`` towards 0, 0 where ``|x| <= lambd`` (NaN kept, as torch's)."""
    lambd = x.dtype.type(lambd)
    shrunk = xp.where(x > lambd, x - lambd, x + lambd)
    return xp.where(xp.abs(x) <= lambd, 0, shrunk).astype(x.dtype, copy=False)


def lgamma(xp, special, x):
    """``log|Gamma(x)|`` by SciPy's gammaln, with torch's +inf at -inf (gammaln gives -inf)."""
    _real("lgamma", x)
    out = special("gammaln")(x)
    return xp.where(xp.isneginf(x), math.inf, out).astype(x.dtype, copy=False)


#: pointwise table name -> ``fn(xp, special, *args, **kwargs)``
XP_FORMULAS = {
    "xlogy": xlogy, "xlog1py": xlog1py, "mvlgamma": mvlgamma, "polygamma": polygamma, "rrelu": rrelu,
    "threshold": threshold, "logaddexp": logaddexp, "sign": sign, "sgn": sgn, "angle": angle,
    "heaviside": heaviside, "hardshrink": hardshrink, "softshrink": softshrink, "lgamma": lgamma,
    **POLYNOMIALS,
}  # fmt: skip
