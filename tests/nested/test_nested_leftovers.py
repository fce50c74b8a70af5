"""torch.special's orthogonal polynomials, ``index_put`` / ``index_put_`` and ``rrelu`` on nested tensors, and
the pointwise formulas on CuPy data (cupy stub), against torch 2.13.

What torch 2.13 does on nested tensors (run, not remembered):

- polynomials ``f(x, n)``: the jagged layout runs them with ``n`` a Python number, a dense tensor, or a nested
  tensor sharing ``x``'s offsets, and ``x`` a number or dense tensor with a nested ``n``; integers give
  float32; float16 is refused; no autograd. The strided layout raises NotImplementedError. Ours: the jagged
  layout's results on both layouts.
- ``index_put``: the jagged layout runs ``(b,)`` (whole components, through a padded copy) and ``(b, j, ...)``,
  but checks ``j[t] < lengths()[t]`` (position by position) instead of ``j[t] < length(b[t])``, so it refuses
  calls whose index count is not the batch size or which meet an empty component, and writes a negative ``j``
  into the component before; its backward raises. The strided layout raises NotImplementedError. Ours: the
  same values where torch's check lets a call through; per-component checks, negative indices from each
  component's end, gradients, and both layouts otherwise (compared with dense per-component torch).
- ``rrelu``: both layouts raise NotImplementedError; ours is dense ``F.rrelu`` on every component.
"""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln
from lodtensor.nested._tables import POLYNOMIALS

torch = pytest.importorskip("torch")
F = torch.nn.functional

LENGTHS = [(2, 0, 3), (1,), (4, 1, 0, 2)]
DTYPES = [torch.float32, torch.float64]


def _comps(lengths, dtype, seed=0, low=-1.5, high=1.5, tail=(3,)):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, *tail, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype) for n in lengths]


def _torch_jagged(comps, like=None):
    if like is not None:
        return torch.nested.nested_tensor_from_jagged(torch.cat(comps), like.offsets())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([c.clone() for c in comps], layout=torch.jagged)


def _ours(comps, kind, layout="jagged", requires_grad=False):
    data = [c.numpy() for c in comps] if kind == "numpy" else [c.clone() for c in comps]
    return ln.nested_tensor(data, layout=layout, requires_grad=requires_grad)


def _parts(nt):
    return [np.asarray(c.detach().numpy() if isinstance(c, torch.Tensor) else c) for c in nt.unbind()]


def _assert_same(got, want, rtol, atol=None):
    got, want = _parts(got), _parts(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol if atol is None else atol, equal_nan=True)


# -- polynomials --------------------------------------------------------------------------------------
def _tol(dtype):
    return 2e-5 if dtype == torch.float32 else 1e-10


# form: call(f, x, n_nested, library) with x the nested input (values in [-1.5, 1.5]) and n_nested a nested
# tensor of degrees 0-11 of x's structure; library "torch" (torch.special) or "ln"
_FORMS = {
    "scalar_n": lambda f, x, n, d: f(x, 5),
    "scalar_n_high": lambda f, x, n, d: f(x, 11),  # (the trigonometric forms of the Chebyshev families)
    "float_n": lambda f, x, n, d: f(x, 3.7),  # (truncated to 3)
    "dense_0d_n": lambda f, x, n, d: f(x, d(torch.tensor(4.0))),
    "dense_row_n": lambda f, x, n, d: f(x, d(torch.tensor([0.0, 2.0, 9.0]))),
    "nested_n": lambda f, x, n, d: f(x, n),
    "scalar_x": lambda f, x, n, d: f(0.3, n),
    "dense_x": lambda f, x, n, d: f(d(torch.tensor([0.4, -1.0, 1.2])), n),
}


@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda v: "-".join(map(str, v)))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("form", sorted(_FORMS))
@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
def test_polynomial_matches_torch_jagged(name, form, dtype, lengths):
    comps = _comps(lengths, dtype)
    degrees = [torch.randint(0, 12, c.shape, generator=torch.Generator().manual_seed(3)).to(dtype) for c in comps]
    call = _FORMS[form]
    x = _torch_jagged(comps)
    want = call(getattr(torch.special, name), x, _torch_jagged(degrees, like=x), lambda t: t.to(dtype))
    for kind in ("torch", "numpy"):
        ox, on = _ours(comps, kind), _ours(degrees, kind)
        conv = (lambda t: t.to(dtype).numpy()) if kind == "numpy" else (lambda t: t.to(dtype))
        got = call(getattr(ln, name), ox, on, conv)
        _assert_same(got, want, _tol(dtype))
        if kind == "torch":  # through torch's own name too (__torch_function__)
            _assert_same(call(getattr(torch.special, name), ox, on, conv), want, _tol(dtype))


@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
def test_polynomial_integer_input_gives_float32_and_both_layouts_agree(name):
    comps = [torch.tensor([[0, 1], [2, -1]]), torch.zeros((0, 2), dtype=torch.int64), torch.tensor([[3, 1]])]
    want = getattr(torch.special, name)(_torch_jagged(comps), 3)
    assert want.dtype == torch.float32
    for kind in ("torch", "numpy"):
        for layout in ("jagged", "strided"):
            _assert_same(getattr(ln, name)(_ours(comps, kind, layout), 3), want, 1e-6)
    with pytest.raises(NotImplementedError):  # torch's strided layout has no kernel for it
        getattr(torch.special, name)(torch.nested.nested_tensor(comps), 3)


_X = [-np.inf, -3.0, -1.0, -0.7, -1e-5, 0.0, 0.3, 0.5, 1.0, 1.5, 2.0, np.inf, np.nan]
_N = [-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 13.0, 20.0, 2.7, -0.5, np.nan, np.inf, -np.inf, 1e30]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
def test_polynomial_edge_values_match_torch(name, dtype):
    """Every closed form and the recurrence: x at +-1, 0, the shifted families' 0 and 1, infinities; degrees
    negative, fractional, NaN, infinite, past int64. A NaN x with degree >= 2: torch reads an uninitialised
    value in most families (it returned 6.9e-310 in a run), ours NaN: compared only where torch is defined."""
    x, n = (a.astype(dtype).reshape(-1) for a in np.meshgrid(np.array(_X), np.array(_N)))
    want = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n)).numpy()
    nt_x = ln.nested_tensor([x[:100], x[100:100], x[100:]])
    got = np.concatenate(_parts(getattr(ln, name)(nt_x, ln.nested_tensor([n[:100], n[100:100], n[100:]]))))
    degree = np.where(np.isfinite(n) & (np.abs(n) < 2.0**63), np.trunc(np.nan_to_num(n)), -1)  # (torch's)
    defined = ~(np.isnan(x) & (degree >= 2))
    assert got.dtype == want.dtype == dtype
    np.testing.assert_allclose(got[defined], want[defined], rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-6 if dtype == np.float32 else 1e-12, equal_nan=True)
    assert np.isnan(got[~defined]).all()


def test_polynomial_float16_is_refused_and_torch_keeps_no_graph():
    half = [np.array([0.5, 1.0], np.float16)]
    with pytest.raises(TypeError, match=r"chebyshev_polynomial_t\(\): not implemented for dtype float16"):
        ln.chebyshev_polynomial_t(ln.nested_tensor(half), 2)
    with pytest.raises(NotImplementedError, match="Half"):
        ln.chebyshev_polynomial_t(ln.nested_tensor([torch.from_numpy(half[0])]), 2)
    x = ln.nested_tensor([torch.tensor([0.5, 2.0])], requires_grad=True)
    assert not torch.special.hermite_polynomial_h(x, 3).requires_grad  # torch defines no derivative either
    assert not torch.special.hermite_polynomial_h(torch.tensor([0.5], requires_grad=True), 3).requires_grad
    with pytest.raises(TypeError, match="at least one NestedTensor"):
        ln.legendre_polynomial_p(0.5, 2)


def test_polynomial_cost_is_per_degree_and_nan_stops_the_recurrence():
    """A huge degree where the recurrence overflows to NaN ends as torch's does (NaN), without a pass per
    degree; a tensor degree runs each element's own degree (sorted), as a scalar one does."""
    nt = ln.nested_tensor([np.array([2.0, 3.0]), np.array([-2.5])])
    assert np.isnan(np.concatenate(_parts(ln.chebyshev_polynomial_t(nt, 10**9)))).all()
    degrees = ln.nested_tensor([np.array([3.0, 40.0]), np.array([7.0])])
    got = np.concatenate(_parts(ln.laguerre_polynomial_l(nt, degrees)))
    want = [ln.laguerre_polynomial_l(ln.nested_tensor([np.array([v])]), d).to_tensor_list()[0][0]
            for v, d in ((2.0, 3), (3.0, 40), (-2.5, 7))]
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -- index_put ------------------------------------------------------------------------------------------
_I = torch.tensor
_FULL = [(2, 3), (1, 3), (3, 3), (2, 3)]  # torch's check passes only for indices it compares position by position
_B, _J = _I([0, 2, 2, 3]), _I([1, 0, 2, 1])
_PUT = {  # name: call(x, dense) where torch's jagged layout runs it (no empty component, len(index) == batch)
    "rows_scalar": lambda x, d: x.index_put((d(_B), d(_J)), d(_I(5.0))),
    "rows_row": lambda x, d: x.index_put((d(_B), d(_J)), d(_I([7.0, 8.0, 9.0]))),
    "rows_each": lambda x, d: x.index_put((d(_B), d(_J)), d(torch.arange(12.0).reshape(4, 3))),
    "elements": lambda x, d: x.index_put((d(_B), d(_J), d(_I([0, 1, 2, 2]))), d(_I([1.0, 2.0, 3.0, 4.0]))),
    "elements_accumulate": lambda x, d: x.index_put((d(_B), d(_J), d(_I([0, 0, 2, 2]))), d(_I([1.0, 2, 3, 4])),
                                                    accumulate=True),
    "components": lambda x, d: x.index_put((d(_I([0, 3])),), d(_I([1.0, 2.0, 3.0]))),
    "components_accumulate": lambda x, d: x.index_put((d(_I([0, 3, 3])),), d(_I([1.0, 2.0, 3.0])), accumulate=True),
    "components_each": lambda x, d: x.index_put((d(_I([0, 3])),), d(_I([[1.0, 2, 3], [4, 5, 6]]).unsqueeze(1))),
    "int32_indices": lambda x, d: x.index_put((d(_B.int()), d(_J.int())), d(_I(5.0))),
    "torch_index_put": lambda x, d: torch.index_put(x, (d(_B), d(_J)), d(_I(5.0))),
    "in_place": lambda x, d: x.index_put_((d(_B), d(_J)), d(_I(5.0))),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(_PUT))
def test_index_put_matches_torch_jagged(name, dtype):
    comps = [c.to(dtype) for c in _comps([n for n, _ in _FULL], torch.float64)]
    call = _PUT[name]
    x = _torch_jagged(comps)
    want = call(x, lambda t: t.to(dtype) if t.is_floating_point() else t)
    for kind in ("torch", "numpy"):
        if name == "torch_index_put" and kind == "numpy":
            continue
        ours = _ours(comps, kind)
        conv = (lambda t: (t.to(dtype) if t.is_floating_point() else t).numpy()) if kind == "numpy" else (
            lambda t: t.to(dtype) if t.is_floating_point() else t)
        got = call(ours, conv)
        _assert_same(got, want, 0)
        if name == "in_place":
            assert got is ours
            _assert_same(ours, want, 0)
        else:
            _assert_same(ours, _torch_jagged(comps), 0)  # the input untouched


def _dense_put(comps, b, index_rest, values, accumulate=False):
    """The per-component dense reference: component b[t] gets values[t] at index_rest[t]."""
    out = [c.clone() for c in comps]
    for t in range(len(b)):
        where = tuple(int(i[t]) for i in index_rest)
        if accumulate:
            out[int(b[t])][where] += values[t]
        else:
            out[int(b[t])][where] = values[t]
    return out


@pytest.mark.parametrize("layout", ["jagged", "strided"])
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_index_put_with_empty_components_and_negative_indices(kind, layout):
    """Where torch's jagged layout refuses (an empty component, fewer indices than components) or writes a
    negative ragged index into the component before: per-component dense torch."""
    comps = _comps((2, 0, 3), torch.float64)
    b, j = _I([2, 0, -1]), _I([-1, 1, 0])
    values = _I([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float64)
    d = (lambda t: t.numpy()) if kind == "numpy" else (lambda t: t)
    want = _dense_put(comps, [2, 0, 2], [[-1, 1, 0]], values)
    got = _ours(comps, kind, layout).index_put((d(b), d(j)), d(values))
    assert [np.asarray(c).tolist() for c in _parts(got)] == [c.tolist() for c in want]
    assert got.layout == layout
    with pytest.raises(RuntimeError, match="out of bounds"):
        _torch_jagged(comps).index_put((b, j), values)


def test_index_put_gradients_on_torch_data():
    """torch's jagged backward raises (NotImplementedError: aten.index.Tensor); ours is the dense one."""
    comps = _comps((2, 0, 3), torch.float64)
    b, j = _I([0, 2, 2]), _I([1, 0, 2])
    for accumulate in (False, True):
        x = _ours(comps, "torch", requires_grad=True)
        v = _I([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
        out = x.index_put((b, j), v, accumulate=accumulate)
        weights = [torch.arange(c.numel(), dtype=torch.float64).reshape(c.shape) for c in comps]
        sum((c * w).sum() for c, w in zip(out.unbind(), weights)).backward()
        dense = [c.clone().requires_grad_() for c in comps]
        dv = v.detach().clone().requires_grad_()
        ref = _dense_put([c * 1 for c in dense], [0, 2, 2], [[1, 0, 2]], dv.expand(3, 3), accumulate)
        sum((c * w).sum() for c, w in zip(ref, weights)).backward()
        for g, r in zip(x.grad.unbind(), dense):
            torch.testing.assert_close(g, r.grad)
        torch.testing.assert_close(v.grad, dv.grad)


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_index_put_on_several_ragged_dims(kind):
    """Images (C, H, W) of different sizes: (b, c, h, w) elements, and (b, c) whole ragged planes."""
    comps = [torch.arange(2 * 2 * 3, dtype=torch.float32).reshape(2, 2, 3), torch.zeros(2, 1, 2)]
    d = (lambda t: t.numpy()) if kind == "numpy" else (lambda t: t)
    got = _ours(comps, kind, "strided").index_put((d(_I([0, 1])), d(_I([1, 0])), d(_I([1, 0])), d(_I([2, -1]))),
                                                 d(_I([50.0, 60.0])))
    want = _dense_put(comps, [0, 1], [[1, 0], [1, 0], [2, -1]], _I([50.0, 60.0]))
    assert [np.asarray(c).tolist() for c in _parts(got)] == [c.tolist() for c in want]
    planes = _ours(comps, kind, "strided").index_put((d(_I([1, 0])), d(_I([0, 1]))),
                                                    d(_I([-1.0, -2.0]).reshape(2, 1, 1)))
    want = _dense_put(comps, [1, 0], [[0, 1]], _I([-1.0, -2.0]).reshape(2, 1, 1))
    assert [np.asarray(c).tolist() for c in _parts(planes)] == [c.tolist() for c in want]


_ONE = _I(1.0, dtype=torch.float64)
_BAD_PUT = {  # name: (call(x, d), exception, message)
    "ragged_out_of_range": (lambda x, d: x.index_put((d(_I([0, 2])), d(_I([1, 3]))), d(_ONE)), IndexError,
                            r"index 3 is out of bounds for dim 1 of component 2, whose size is 3"),
    "empty_component": (lambda x, d: x.index_put((d(_I([1])), d(_I([0]))), d(_ONE)), IndexError,
                        r"index 0 is out of bounds for dim 1 of component 1, whose size is 0"),
    "component_out_of_range": (lambda x, d: x.index_put((d(_I([3])),), d(_ONE)), IndexError,
                               r"index 3 is out of bounds for dim 0 \(the components\)"),
    "regular_out_of_range": (lambda x, d: x.index_put((d(_I([0])), d(_I([0])), d(_I([3]))), d(_ONE)),
                             IndexError, "index 3 is out of bounds for dim 2 of component 0"),
    "too_many": (lambda x, d: x.index_put(tuple(d(_I([0])) for _ in range(4)), d(_ONE)), IndexError,
                 "too many indices: got 4 but the nested tensor has 3 dims"),
    "bool_mask": (lambda x, d: x.index_put((d(_I([True, False, True])),), d(_ONE)), TypeError, "Bool mask"),
    "float_index": (lambda x, d: x.index_put((d(_I([0.0])),), d(_ONE)), TypeError, "must hold integers"),
    "nested_index": (lambda x, d: x.index_put((x > 0,), d(_ONE)), TypeError, "is a NestedTensor"),
    "list_index": (lambda x, d: x.index_put(([0],), d(_ONE)), TypeError, "must be an integer array"),
    "dtype_mismatch": (lambda x, d: x.index_put((d(_I([0])),), d(_I(1.0, dtype=torch.float32))), TypeError,
                       "got Double for the destination and Float for the source"),
    "scalar_values": (lambda x, d: x.index_put((d(_I([0])),), 1.0), TypeError, "values must be a dense array"),
    "values_shape": (lambda x, d: x.index_put((d(_I([0, 2])),), d(torch.ones(2, 2, 3, dtype=torch.float64))),
                     ValueError, r"do not broadcast to \(2, 1, 3\)"),
    "indices_shapes": (lambda x, d: x.index_put((d(_I([0, 2])), d(_I([0, 1, 0]))), d(_ONE)), IndexError,
                       "could not be broadcast together"),
    "not_a_tuple": (lambda x, d: x.index_put(d(_I([0])), d(_ONE)), TypeError, "must be a tuple"),
}


@pytest.mark.parametrize("kind", ["torch", "numpy"])
@pytest.mark.parametrize("name", sorted(_BAD_PUT))
def test_index_put_refusals_name_the_problem(name, kind):
    call, exc, message = _BAD_PUT[name]
    comps = _comps((2, 0, 3), torch.float64)
    x = _ours(comps, kind)
    d = (lambda t: t.numpy()) if kind == "numpy" else (lambda t: t)
    with pytest.raises(exc, match=message):
        call(x, d)
    _assert_same(x, _torch_jagged(comps), 0)  # untouched


# -- rrelu -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda v: "-".join(map(str, v)))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("bounds", [(), (0.1, 0.3), (-0.5, -0.2)], ids=["default", "custom", "negative"])
def test_rrelu_eval_is_torchs_formula_exactly(bounds, dtype, lengths):
    comps = _comps(lengths, dtype)
    want = [F.rrelu(c, *bounds) for c in comps]
    for kind in ("torch", "numpy"):
        for layout in ("jagged", "strided"):
            x = _ours(comps, kind, layout)
            got = ln.rrelu(x, *bounds)
            assert [np.asarray(c).tolist() for c in _parts(got)] == [c.tolist() for c in want]
            assert got.dtype == x.dtype
        if kind == "torch":
            for call in (lambda t: F.rrelu(t, *bounds), lambda t: torch.rrelu(t, *bounds)):
                assert [c.tolist() for c in call(_ours(comps, kind)).unbind()] == [c.tolist() for c in want]
    with pytest.raises(NotImplementedError):  # torch's own nested layouts have no rrelu
        F.rrelu(_torch_jagged(comps))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_rrelu_training_draws_slopes_in_bounds_uniformly(kind, dtype):
    """Training: positives kept, each negative times a slope of [lower, upper), the slopes uniform (mean and
    quartiles within 4 standard errors of the uniform's and of dense torch's, about 20,000 draws), a new draw
    per call."""
    lower, upper = 0.1, 0.4
    comps = _comps((20000, 0, 10000), dtype, low=-2.0, high=1.0, tail=())
    x = _ours(comps, kind)
    out = np.concatenate(_parts(F.rrelu(x, lower, upper, True) if kind == "torch" else
                                ln.rrelu(x, lower, upper, True)))
    flat = torch.cat(comps).numpy()
    neg, pos = flat < 0, flat > 0
    np.testing.assert_array_equal(out[pos], flat[pos])
    slopes = (out[neg] / flat[neg]).astype(np.float64)
    eps = 1e-6 if dtype == torch.float32 else 1e-12
    assert slopes.min() >= lower - eps and slopes.max() <= upper + eps
    dense = (F.rrelu(torch.cat(comps), lower, upper, True).numpy()[neg] / flat[neg]).astype(np.float64)
    width, count = upper - lower, slopes.size
    se = width / np.sqrt(12 * count)  # of a mean of uniform draws
    assert abs(slopes.mean() - (lower + upper) / 2) < 4 * se
    assert abs(slopes.mean() - dense.mean()) < 4 * np.sqrt(2) * se
    for q in (0.25, 0.75):  # (the standard error of a uniform sample's q-quantile: width sqrt(q (1 - q) / count))
        assert abs(np.quantile(slopes, q) - (lower + q * width)) < 4 * width * np.sqrt(q * (1 - q) / count)
        assert abs(np.quantile(slopes, q) - np.quantile(dense, q)) < 4 * np.sqrt(2) * width * np.sqrt(
            q * (1 - q) / count)
    again = np.concatenate(_parts(ln.rrelu(x, lower, upper, True)))
    assert not np.array_equal(again, out)


def test_rrelu_training_on_torch_data_is_torchs_draw_and_gradient():
    """torch data: torch.rrelu on the buffer, so a seeded generator gives dense torch's values; the gradient
    is each element's slope (1 for positives)."""
    comps = _comps((3, 0, 4), torch.float64)
    x = _ours(comps, "torch", requires_grad=True)
    got = torch.rrelu(x, 0.1, 0.3, True, torch.Generator().manual_seed(7))
    want = torch.rrelu(torch.cat(comps), 0.1, 0.3, True, torch.Generator().manual_seed(7))
    torch.testing.assert_close(torch.cat(list(got.unbind())), want)
    sum(c.sum() for c in got.unbind()).backward()
    flat = torch.cat(comps)
    slopes = torch.where(flat > 0, torch.ones_like(flat), want / flat)
    torch.testing.assert_close(torch.cat(list(x.grad.unbind())), slopes)


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_rrelu_in_place_and_refusals(kind):
    comps = _comps((2, 0, 3), torch.float32)
    want = [F.rrelu(c) for c in comps]
    x = _ours(comps, kind)
    same = ln.rrelu(x, inplace=True)
    assert same is x and [c.tolist() for c in map(np.asarray, _parts(x))] == [c.tolist() for c in want]
    y = _ours(comps, kind)
    assert y.rrelu_() is y and [np.asarray(c).tolist() for c in _parts(y)] == [c.tolist() for c in want]
    with pytest.raises((ValueError, RuntimeError), match="Lower bound should be less than or equal to the upper"):
        ln.rrelu(_ours(comps, kind), 0.5, 0.1)
    ints = ln.nested_tensor([np.array([1, -2])] if kind == "numpy" else [torch.tensor([1, -2])])
    with pytest.raises(TypeError, match="floating point"):
        ln.rrelu(ints)
    if kind == "numpy":
        with pytest.raises(TypeError, match="generator= takes a torch.Generator"):
            ln.OP_TABLE["torch_rrelu"](x, 0.1, 0.2, True, object())


# -- the formulas on CuPy data (tests/backend/cupy_stub.py: NumPy behind cupy's names) ----------------------
@pytest.fixture
def stub(monkeypatch):
    from ..backend import cupy_stub

    return cupy_stub.install(monkeypatch)


_ON_CUPY = {  # name: call(nt) on CuPy data, compared with the same call on NumPy data
    "xlogy": lambda nt: ln.xlogy(nt, nt + 1),
    "xlogy_scalar": lambda nt: ln.xlogy(nt, 2.0),
    "xlog1py": lambda nt: ln.xlog1py(nt, nt),
    "mvlgamma": lambda nt: ln.mvlgamma(nt + 2, 3),
    "polygamma": lambda nt: ln.polygamma(2, nt + 1),
    "chebyshev_polynomial_u": lambda nt: ln.chebyshev_polynomial_u(nt, 11),
    "laguerre_polynomial_l": lambda nt: ln.laguerre_polynomial_l(nt, nt * 4),
    "rrelu": lambda nt: ln.rrelu(nt - 1),
    "threshold": lambda nt: ln.threshold(nt, 0.5, -1.0),  # (the table formula, scalars cast for the dtype)
    "logaddexp_complex": lambda nt: ln.logaddexp(nt * (1 + 0.5j), nt * (0.5 - 1j)),  # (torch's complex rule)
    "index_put": None,  # (its index arrays are made in the test)
}


@pytest.mark.parametrize("name", sorted(_ON_CUPY))
def test_formulas_run_on_cupy_arrays(stub, name):
    """xlogy, xlog1py, mvlgamma and polygamma handed CuPy arrays to NumPy and SciPy (np.asarray, np.full,
    scipy.special): they now run with the array module of the data and cupyx.scipy.special."""
    values = np.linspace(0.1, 1.4, 9).astype(np.float32).reshape(3, 3)
    offsets = np.array([0, 2, 2, 3])
    host = ln.nested_tensor_from_jagged(values, offsets)
    device = ln.nested_tensor_from_jagged(stub.asarray(values), stub.asarray(offsets))
    if name == "index_put":
        got = device.index_put((stub.asarray(np.array([0, 2])),), stub.asarray(np.float32([1.0, 2.0, 3.0])))
        want = host.index_put((np.array([0, 2]),), np.float32([1.0, 2.0, 3.0]))
    else:
        got, want = _ON_CUPY[name](device), _ON_CUPY[name](host)
    assert type(got._buf) is type(device._buf)
    np.testing.assert_allclose(np.asarray(stub.asnumpy(got._buf)), np.asarray(want._buf), rtol=1e-6)


def test_airy_ai_on_cupy_data_says_cupyx_lacks_it(stub):
    device = ln.nested_tensor_from_jagged(stub.asarray(np.float32([[0.5], [1.0]])), stub.asarray(np.array([0, 2])))
    with pytest.raises(TypeError, match=r"airy_ai\(\) on CuPy data: cupyx.scipy.special has no airy"):
        ln.airy_ai(device)


# -- a Python number first, torch data second -------------------------------------------------------------
@pytest.mark.parametrize("call", [torch.sub, torch.special.xlogy, torch.special.legendre_polynomial_p],
                         ids=["sub", "xlogy", "legendre_polynomial_p"])
def test_a_python_float_before_float64_torch_data_keeps_its_precision(call):
    """The torch backend made the number a float32 0-d tensor: 0.3 - nt read 0.30000001192092896 on float64
    data (1.2e-8 off dense torch)."""
    comps = [torch.tensor([1.0, 2.0, 5.0], dtype=torch.float64), torch.tensor([3.0], dtype=torch.float64)]
    got = call(0.3, _ours(comps, "torch"))
    want = [call(0.3, c) for c in comps]
    assert [c.tolist() for c in got.unbind()] == [c.tolist() for c in want]
