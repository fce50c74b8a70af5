"""torch.special's orthogonal polynomials, written once against an array module ``xp`` (NumPy or CuPy).

Chebyshev T, U, V, W and their shifted forms, Hermite H (physicists') and He
(probabilists'), Laguerre L and Legendre P of degree ``n``: torch 2.13's
algorithm (``aten/src/ATen/native/Math.h``) vectorised. Each family is a list
of closed-form cases in torch's order (the first that holds wins: a negative
degree gives 0, ``|x| == 1``, the trigonometric form of the Chebyshev families
for ``|x| < 1`` past a few degrees, degrees 0 and 1) and a three-term
recurrence for the rest, in the input's dtype with torch's operation order.

SciPy's ``eval_chebyt`` & co. are not used: where torch defines a value they
differ from it (a negative degree: SciPy's symmetry, torch 0; an infinite
``x``; the overflow of the recurrence, where torch's gives NaN and SciPy's an
infinity), and four of the twelve have no SciPy function (cupyx has none).

The degree is torch's ``static_cast<int64_t>(n)`` of ``n`` in the result
dtype: truncated toward zero; NaN, an infinity or a value past int64 reads as
a negative degree (x86's conversion), so the result is 0. Where torch's
recurrence reads an uninitialised value (NaN ``x`` and degree >= 2 in all but
Chebyshev T and the Hermite families), the result here is NaN.

Cost: the closed forms are a few whole-array passes; the recurrence runs only
on the elements no closed form covers, one pass per degree over those whose
degree is at least that high (sorted by degree once, so a tensor ``n`` costs
the sum of the degrees, as torch's per-element loops do).
"""

import numpy as np

__all__ = ["POLYNOMIALS"]

_INT64_MIN = np.iinfo(np.int64).min
_HERMITE_LIMIT = {np.dtype(np.float32): 128, np.dtype(np.float64): 512}  # torch: a NaN past these degrees
_CHUNK = 64  # recurrence steps between two checks that some element is still finite


def _degree(xp, n):
    """torch's integer degree of ``n`` (an array of the result dtype, or integers)."""
    if n.dtype.kind in "iub":
        return n.astype(np.int64)
    ok = xp.isfinite(n) & (xp.abs(n) < 2.0**63)
    return xp.where(ok, xp.trunc(xp.where(ok, n, 0)).astype(np.int64), _INT64_MIN)


def _parity(xp, k, even, odd):
    return xp.where(k % 2 == 0, even, odd)


def _on(xp, mask, fn, *arrays):
    """``fn(*arrays)`` where ``mask`` holds (each array broadcast to the mask's shape), 0 elsewhere; the
    scalar 0 where it holds nowhere (nothing computed)."""
    where = xp.nonzero(mask.reshape(-1))[0]
    if where.size == 0:
        return arrays[0].dtype.type(0)
    picked = [xp.broadcast_to(a, mask.shape).reshape(-1)[where] for a in arrays]
    out = xp.zeros(mask.size, dtype=arrays[0].dtype)
    out[where] = fn(*picked)
    return out.reshape(mask.shape)


# -- the families: cases(xp, x, k, T) -> [(mask, value)], first(x, T) -> degree 1, step(x, m, p, q, T) ->
# degree m + 1 from degrees m - 1 (p) and m (q), each in torch's operation order ---------------------------
#: Chebyshev T, U, V, W of degree 1 at ``y``
_FIRST = {"t": lambda y, T: y, "u": lambda y, T: y + y, "v": lambda y, T: y + y - T(1),
          "w": lambda y, T: y + y + T(1)}
#: the degree past which torch's Chebyshev families use their trigonometric form for |x| < 1
_TRIG_FROM = {"t": 6, "u": 8, "v": 8, "w": 8, "st": 6, "su": 6, "sv": 6, "sw": 4}


def _chebyshev_cases(kind):
    """Chebyshev T/U/V/W on [-1, 1] (``kind`` its letter), or their shifted forms on [0, 1] (``"s" + letter``)."""

    def cases(xp, x, k, T):
        shifted = kind.startswith("s")
        letter = kind[-1]
        y = x + x - T(1) if shifted else x
        kf = k.astype(T)
        k1 = (k + 1).astype(T)
        odd = (k + k + 1).astype(T)
        big = k > _TRIG_FROM[kind]
        if big.ndim or bool(big):  # (a scalar degree below the trigonometric form's: no pass over x)
            big = big & (xp.abs(y) < 1)
        if letter == "t":
            ends = (T(1), _parity(xp, k, T(1), T(-1)))

            def trig(y, kf, k1, odd, end):
                return xp.cos(kf * xp.arccos(y))
        elif letter == "u":
            ends = (k1, _parity(xp, k, k1, -k1))

            def trig(y, kf, k1, odd, end):
                theta = xp.arccos(y)
                s = xp.sin(theta)
                return xp.where(s != 0, xp.sin(k1 * theta) / s, k1 * xp.cos(k1 * theta) / y)
        elif letter == "v":
            ends = (T(1), _parity(xp, k, odd, -odd))

            def trig(y, kf, k1, odd, end):
                theta = xp.arccos(y)
                return xp.where(xp.sin(theta / T(2)) != 1, xp.cos((kf + T(0.5)) * theta) / xp.cos(theta / T(2)), end)
        else:
            ends = (odd, _parity(xp, k, T(1), T(-1)))
            limit = ends[1] if shifted else xp.where(x > 0, odd, ends[1])

            def trig(y, kf, k1, odd, end):
                theta = xp.arccos(y)
                return xp.where(xp.cos(theta / T(2)) != 1, xp.sin((kf + T(0.5)) * theta) / xp.sin(theta / T(2)), end)
        # the trigonometric form only where it applies (the transcendental passes cost most of a low degree)
        end = {"v": ends[1], "w": limit if letter == "w" else None}.get(letter, T(0))
        trig = _on(xp, big, trig, y, kf, k1, odd, end)
        one = _chebyshev_first(kind)  # degree 1, computed only where it is used
        if shifted:
            ends_cases = [(x == 1, ends[0]), (x == 0, ends[1])]
        elif letter in "tu":  # (torch: x > 0 or an even degree gives the first value)
            ends_cases = [(xp.abs(x) == 1, xp.where((x > 0) | (k % 2 == 0), ends[0], ends[1]))]
        else:
            ends_cases = [(xp.abs(x) == 1, xp.where(x > 0, ends[0], ends[1]))]
        return [(k < 0, T(0)), *ends_cases, (big, trig), (k == 0, T(1)), (k == 1, lambda: one(x, T))]

    return cases


def _chebyshev_first(kind):
    def first(x, T):
        y = x + x - T(1) if kind.startswith("s") else x
        return _FIRST[kind[-1]](y, T)

    return first


def _chebyshev_step(kind):
    if kind.startswith("s"):
        def step(x, m, p, q, T):
            y = x + x - T(1)
            return (y + y) * q - p
    else:
        def step(x, m, p, q, T):
            return (x + x) * q - p
    return step


def _hermite_cases(physicists):
    def cases(xp, x, k, T):
        limit = _HERMITE_LIMIT[np.dtype(T)]
        return [(k < 0, T(0)), (k == 0, T(1)), (k == 1, x + x if physicists else x), (k > limit, T(np.nan))]

    return cases


def _laguerre_cases(xp, x, k, T):
    return [(k < 0, T(0)), (xp.abs(x) == 0, T(1)), (k == 0, T(1)), (k == 1, T(1) - x)]


def _legendre_cases(xp, x, k, T):
    ends = xp.where((x > 0) | (k % 2 == 0), T(1), T(-1))
    return [(k < 0, T(0)), (xp.abs(x) == 1, ends), (k == 0, T(1)), (k == 1, x)]


#: name: (cases, first, step)
_FAMILIES = {
    **{f"chebyshev_polynomial_{c}": (_chebyshev_cases(c), _chebyshev_first(c), _chebyshev_step(c)) for c in "tuvw"},
    **{f"shifted_chebyshev_polynomial_{c}": (_chebyshev_cases("s" + c), _chebyshev_first("s" + c),
                                             _chebyshev_step("s" + c)) for c in "tuvw"},
    "hermite_polynomial_h": (_hermite_cases(True), lambda x, T: x + x,
                             lambda x, m, p, q, T: (x + x) * q - T(m + m) * p),
    "hermite_polynomial_he": (_hermite_cases(False), lambda x, T: x, lambda x, m, p, q, T: x * q - T(m) * p),
    "laguerre_polynomial_l": (_laguerre_cases, lambda x, T: T(1) - x,
                              lambda x, m, p, q, T: ((T(m + m) + (T(1) - x)) * q - T(m) * p) / T(m + 1)),
    "legendre_polynomial_p": (_legendre_cases, lambda x, T: x,
                              lambda x, m, p, q, T: (T(m + m + 1) * x * q - T(m) * p) / T(m + 1)),
}  # fmt: skip


def _recurrence(xp, first, step, x, k, T, degree=None):
    """Degree ``k`` (each >= 2) at ``x`` (1-d) by the three-term recurrence: one pass per degree over the
    elements whose degree reaches it (sorted by degree, highest first, so they are a prefix); ``degree``: the
    one degree of every element (a scalar ``n``), no sorting then."""
    order = None if degree is not None else xp.argsort(-k)
    xs = x if order is None else x[order]
    p, q = xp.ones_like(xs), first(xs, T).copy()  # (a copy: some families start from x itself)
    negated = None if order is None else -k[order]  # ascending: degree >= d where -k <= -d
    top = degree if order is None else int(-negated[0])
    done = 1  # q holds degree ``done`` for every element still running
    while done < top:
        stop = min(top, done + _CHUNK)
        if order is None:
            counts = [xs.size] * (stop - done)
        else:
            counts = xp.searchsorted(negated, -xp.arange(done + 1, stop + 1), side="right").tolist()
        for m, c in zip(range(done, stop), counts):
            if c == xs.size:  # every element still running: shift the two degrees without copying
                p, q = q, step(xs, m, p, q, T)
                continue
            r = step(xs[:c], m, p[:c], q[:c], T)
            p[:c] = q[:c]
            q[:c] = r
        done = stop
        running = counts[-1]
        if running and bool(xp.isnan(q[:running]).all()):  # torch stops at a NaN too: it stays NaN
            break
    if order is None:
        return q
    out = xp.empty_like(q)
    out[order] = q
    return out


def _evaluate(name, xp, x, n):
    """``name``'s polynomial of degree ``n`` at ``x`` (arrays or scalars, broadcast together)."""
    cases, first, step = _FAMILIES[name]
    dtype = np.dtype(xp.result_type(x, n))
    if dtype not in _HERMITE_LIMIT:
        raise TypeError(f"{name}(): not implemented for dtype {dtype} (torch computes it in float32 or float64); "
                        f"cast the input first")
    n = xp.asarray(n, dtype=dtype)
    if n.ndim == 0:  # a scalar degree stays a scalar: its cases cost nothing per element, no sorting
        x = xp.asarray(x, dtype=dtype)
        k = _degree(xp, n)
        degree = int(k)
    else:
        x, n = xp.broadcast_arrays(xp.asarray(x, dtype=dtype), n)
        k = _degree(xp, n.reshape(-1))
        degree = None
    shape = x.shape
    x = xp.ascontiguousarray(x).reshape(-1)
    T = dtype.type
    with np.errstate(all="ignore"):  # the closed forms are computed everywhere, used where they apply
        rules = cases(xp, x, k, T)
        covered = rules[0][0]
        for mask, _ in rules[1:]:
            covered = covered | mask
        if x.size == 0:  # (nothing to evaluate: the recurrence would read the highest degree of none)
            out = xp.zeros(x.shape, dtype=dtype)
        elif not bool(covered.any()):  # no closed form applies anywhere: the recurrence on the whole input
            out = _recurrence(xp, first, step, x, k, T, degree)
        else:
            out = xp.zeros(x.shape, dtype=dtype)
            rest = xp.nonzero(~xp.broadcast_to(covered, x.shape))[0]
            if rest.size:
                out[rest] = _recurrence(xp, first, step, x[rest], None if degree is not None else k[rest], T, degree)
        for mask, value in reversed(rules):
            if mask.ndim == 0 and not bool(mask):  # a case of a scalar degree that does not hold
                continue
            out = xp.where(mask, value() if callable(value) else value, out)
    return out.astype(dtype, copy=False).reshape(shape)


def _make(name):
    def polynomial(xp, sp, x, n):
        return _evaluate(name, xp, x, n)

    polynomial.__name__ = name
    return polynomial


#: pointwise table name -> ``fn(xp, special, x, n)``
POLYNOMIALS = {name: _make(name) for name in _FAMILIES}
