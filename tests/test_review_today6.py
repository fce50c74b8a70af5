"""Regressions found by the second reading of 2026-11-27's changes (b982409..6c620e7): the polynomials on
empty input, unpickled holes of another dtype or library, whole-component layer_norm in half precision and on
integers, a one-row jagged narrow's holes, narrow's error classes, rrelu's argument checks and the special
functions on complex data."""

import pickle

import numpy as np
import pytest

import lodtensor.nested as ln
from lodtensor.backend.numpy._orthopoly import POLYNOMIALS

torch = pytest.importorskip("torch")
F = torch.nn.functional


# -- polynomials: empty input with a tensor degree ---------------------------------------------------------
@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
@pytest.mark.parametrize("degree_shape", [(0, 3), (3,)])
def test_a_polynomial_of_empty_input_with_a_tensor_degree_is_empty(name, degree_shape):
    """The recurrence read the highest degree as ``-k[order][0]`` of no element: IndexError for an empty x
    with an array degree (a nested tensor whose components are all empty, with a nested degree)."""
    x = np.zeros((0, 3), np.float32)
    n = np.full(degree_shape, 5.0, np.float32)
    want = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n))
    got = POLYNOMIALS[name](np, None, x, n)
    assert got.shape == tuple(want.shape) and got.dtype == np.float32


def test_a_nested_polynomial_of_empty_components_with_a_nested_degree():
    x = ln.nested_tensor([np.zeros(0, np.float32), np.zeros(0, np.float32)])
    out = ln.legendre_polynomial_p(x, x)
    assert [c.shape for c in out.unbind()] == [(0,), (0,)] and out.dtype == np.float32


# -- unpickling: the holes' values must be the buffer's kind of data ---------------------------------------
def _with_holes():
    return ln.nested_tensor_from_jagged(np.arange(8.0), np.array([0, 4, 7]), lengths=np.array([1, 3]))


class _Swap:
    """Pickles as ``nt``'s own pickle with the holes' values replaced (a crafted pickle)."""

    def __init__(self, nt, values):
        self.nt, self.values = nt, values

    def __reduce__(self):
        fn, args = self.nt.__reduce__()
        holes = args[-1]
        return fn, (*args[:-1], (self.values, *holes[1:]))


@pytest.mark.parametrize("values", [np.arange(8), np.arange(8.0, dtype=np.float32),
                                    torch.arange(8.0, dtype=torch.float64)], ids=["int64", "float32", "torch"])
def test_unpickled_holes_whose_values_are_other_data_than_the_buffer_are_refused(values):
    """Only the sizes were compared: float64 components with int64 (or float32, or torch) ``values()``
    unpickled into a tensor whose ``values()`` disagreed with its own dtype and library."""
    nt = _with_holes()
    blob = pickle.dumps(_Swap(nt, values))
    with pytest.raises(TypeError, match="holes' values must be numpy data of dtype float64"):
        pickle.loads(blob)
    back = pickle.loads(pickle.dumps(nt))  # the tensor's own pickle still loads
    assert back.values().dtype == back.dtype and back.lengths().tolist() == [1, 3]


# -- layer_norm over whole components ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_whole_component_layer_norm_of_a_long_float16_component_is_torchs(kind):
    """Sums and the element count were float16: a component of more than 65504 elements (or whose sum passes
    it) gave NaN everywhere; torch's layer_norm accumulates in float32."""
    rng = np.random.default_rng(0)
    comps = [(rng.standard_normal((40000, 2)) + 3).astype(np.float16), np.ones((3, 2), np.float16)]
    nt = ln.nested_tensor([torch.from_numpy(c) for c in comps] if kind == "torch" else comps)
    out = ln.layer_norm(nt, nt.shape[1:])
    assert str(out.dtype).endswith("float16")
    for got, c in zip(out.unbind(), comps):
        want = F.layer_norm(torch.from_numpy(c), c.shape).float().numpy()
        got = np.asarray(got.float() if kind == "torch" else got, dtype=np.float32)
        np.testing.assert_allclose(got, want, atol=2e-3)


def test_whole_component_layer_norm_dtype_rules_are_torchs_on_every_backend():
    """Integers gave float64 on NumPy data (NumPy's true division), float32 on torch data and in torch's
    jagged layout; bool and complex data computed (a wrong variance for complex), torch refuses both."""
    comps = [np.arange(6).reshape(2, 3), np.ones((1, 3), np.int64)]
    tj = torch.nested.nested_tensor([torch.from_numpy(c) for c in comps], layout=torch.jagged)
    want = F.layer_norm(tj, tj.shape[1:])
    got = ln.layer_norm(ln.nested_tensor(comps), ln.nested_tensor(comps).shape[1:])
    assert got.dtype == np.float32 and want.dtype == torch.float32
    for g, w in zip(got.unbind(), want.unbind()):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-6)
    for dtype in (np.bool_, np.complex64):
        nt = ln.nested_tensor([np.ones((2, 3), dtype), np.ones((1, 3), dtype)])
        with pytest.raises(TypeError, match="layer_norm"):
            ln.layer_norm(nt, nt.shape[1:])


# -- jagged narrow of one row ------------------------------------------------------------------------------
@pytest.mark.parametrize(("start", "length"), [(0, 2), (1, 2), (1, 3), (0, 4)])
def test_a_one_row_jagged_narrow_has_holes_unless_it_reaches_the_rows_end_as_torchs(start, length):
    """One row counted as tiling the buffer whatever its end: ``lengths()`` None, contiguous, ``values()`` the
    narrowed run; torch keeps the holes unless the row runs to its end."""
    x = torch.arange(4.0).reshape(1, 4)
    want = torch.nested.narrow(x, 1, torch.tensor([start]), torch.tensor([length]), layout=torch.jagged)
    got = ln.narrow(x, 1, torch.tensor([start]), torch.tensor([length]), layout="jagged")
    assert got.is_contiguous() == want.is_contiguous()
    assert (got.lengths() is None) == (want.lengths() is None)
    assert got.values().tolist() == want.values().tolist() and got.offsets().tolist() == want.offsets().tolist()
    assert [c.tolist() for c in got.unbind()] == [c.tolist() for c in want.unbind()]


# -- narrow's errors ---------------------------------------------------------------------------------------
def _narrow_cases():
    comps = [torch.ones(2, 4), torch.ones(3, 4), torch.ones(1, 4)]
    return [(torch.nested.nested_tensor(comps), ln.nested_tensor(comps), 0),  # the components (strided)
            (torch.nested.nested_tensor(comps, layout=torch.jagged), ln.nested_tensor(comps, layout=torch.jagged), 2)]


@pytest.mark.parametrize(("start", "length"), [(2, 3), (0, -1), (-5, 1), (5, 0)])
def test_narrow_raises_torchs_error_classes_naming_the_start_given(start, length):
    """Every bad call was an IndexError (torch: RuntimeError for a negative length or one past the end, so
    ``except RuntimeError`` missed ours), and a start below ``-size`` was reported normalised (``start (-1)``
    for a given -4)."""
    for theirs, ours, dim in _narrow_cases():
        with pytest.raises(Exception) as want:
            theirs.narrow(dim, start, length)
        with pytest.raises(Exception) as got:
            ours.narrow(dim, start, length)
        assert isinstance(got.value, want.type), (dim, start, length, got.value, want.value)
        if want.type is IndexError:
            assert f"but got {start})" in str(got.value)


# -- rrelu's arguments and data ----------------------------------------------------------------------------
@pytest.mark.parametrize("bounds", [("a", 0.3), (0.1, None)])
def test_rrelu_names_a_bound_that_is_no_number_on_numpy_data(bounds):
    """NumPy data failed inside the formula ("unsupported operand type(s) for /: 'str' and 'int'", or a
    comparison with None), naming neither argument; torch data named it."""
    nt = ln.nested_tensor([np.array([1.0, -2.0], np.float32)])
    key = "lower" if not isinstance(bounds[0], float) else "upper"
    with pytest.raises(TypeError, match=f"argument '{key}'"):
        ln.rrelu(nt, *bounds)


def test_rrelu_refuses_complex_data_as_torch_does():
    """NumPy compared complex numbers (lexicographically) and scaled some; torch has no complex kernel."""
    data = np.array([1 + 1j, -2 - 1j], np.complex64)
    with pytest.raises(NotImplementedError):
        F.rrelu(torch.from_numpy(data))
    nt = ln.nested_tensor([data.copy()])
    with pytest.raises(TypeError, match="rrelu"):
        ln.rrelu(nt)
    with pytest.raises(TypeError, match="rrelu"):
        torch.rrelu_(nt)
    assert nt.to_tensor_list()[0].tolist() == data.tolist()  # nothing written


# -- the special functions on complex data -----------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda t: torch.xlogy(t, t), lambda t: torch.special.xlog1py(t, 2.0), lambda t: torch.mvlgamma(t, 1),
    lambda t: torch.polygamma(1, t)], ids=["xlogy", "xlog1py", "mvlgamma", "polygamma"])
def test_special_functions_refuse_complex_numpy_data_naming_the_op(call):
    """xlogy and xlog1py gave NumPy's complex log where torch has no kernel; mvlgamma and polygamma failed
    in SciPy naming its ufunc ('gammaln', '_zeta'), not the op."""
    data = np.array([1 + 1j, 0.5], np.complex64)
    with pytest.raises(NotImplementedError):
        call(torch.from_numpy(data))
    with pytest.raises(TypeError, match="not implemented for complex"):
        call(ln.nested_tensor([data]))
