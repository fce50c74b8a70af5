"""Findings of a probe of torch's functions and keyword arguments on NestedTensor, against torch 2.13
(2026-11-29).

Each test fails on the code before its fix: an integer ``dtype=`` of sum/prod not kept, ``dim=()`` and
``keepdim`` with ``dim=None`` refused, NumPy's promotion in cat/stack and in ``where`` of two numbers,
NumPy's heaviside/sign/angle/lgamma/gelu/hardshrink/softshrink/floor division at special values, bool
isclose ignoring its tolerances, and torch's module-level names of methods not routed.
"""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _pair(comps, data):
    """torch's jagged tensor of ``comps`` and ours, of torch or NumPy data."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.nested.nested_tensor([c.clone() for c in comps], layout=torch.jagged)
    ours = ln.nested_tensor([c.clone() if data == "torch" else c.numpy().copy() for c in comps], layout=torch.jagged)
    return ref, ours


def _same(ours, ref):
    parts = lambda x: [np.asarray(c) for c in x.unbind()] if getattr(x, "is_nested", False) else [np.asarray(x)]  # noqa: E731
    assert str(ours.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    a, b = parts(ours), [p.detach().numpy() if hasattr(p, "detach") else p for p in parts(ref)]
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=2e-3, equal_nan=True)


_COMPS = {
    "int64": [torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[7, 8, 9]])],
    "float32": [torch.tensor([[1.5, -2.0, 3.0], [4.0, 5.0, 6.5]]), torch.tensor([[7.0, 8.0, 9.0]])],
    "bool": [torch.tensor([[True, False, True], [True, True, True]]), torch.tensor([[False, False, True]])],
    "int8": [torch.tensor([[40, 80, 120], [-40, 90, 1]], dtype=torch.int8),
             torch.tensor([[7, 8, 9]], dtype=torch.int8)],
}


@pytest.mark.parametrize("data", ["torch", "numpy"])
@pytest.mark.parametrize("src", sorted(_COMPS))
@pytest.mark.parametrize("kind", ["sum", "prod"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.uint8, torch.int8, torch.float64])
def test_integer_dtype_of_sum_and_prod_is_kept(data, src, kind, dtype):
    ref, ours = _pair(_COMPS[src], data)
    fn = getattr(torch, kind)
    for args in ((-1,), (1,), ()):
        _same(fn(ours, *args, dtype=dtype), fn(ref, *args, dtype=dtype))


@pytest.mark.parametrize("data", ["torch", "numpy"])
@pytest.mark.parametrize("kind", ["sum", "mean", "amax", "amin"])
def test_empty_dim_list_reduces_everything(data, kind):
    ref, ours = _pair(_COMPS["float32"], data)
    fn = getattr(torch, kind)
    for dim in ((), []):
        _same(fn(ours, dim=dim), fn(ref, dim=dim))
        _same(fn(ours, dim=dim, keepdim=True), fn(ref, dim=dim, keepdim=True))
    if kind != "mean":  # (torch's jagged mean refuses dim=None with keepdim)
        out = fn(ours, dim=None, keepdim=True) if kind == "sum" else fn(ours, dim=(), keepdim=True)
        assert tuple(out.shape) == (1, 1, 1)


@pytest.mark.parametrize("op", [torch.cat, torch.stack])
def test_cat_and_stack_promote_as_torch_on_numpy_data(op):
    kinds = [np.int64, np.float16, np.float32, np.bool_, np.uint8, np.int8, np.complex64]
    for d1 in kinds:
        for d2 in kinds:
            a = ln.nested_tensor([np.array([[1, 2]]).astype(d1)], layout="jagged")
            b = ln.nested_tensor([np.array([[0, 1]]).astype(d2)], layout="jagged")
            dense = [torch.from_numpy(np.array([[1, 2]]).astype(d1)), torch.from_numpy(np.array([[0, 1]]).astype(d2))]
            want = op(dense, -1)
            got = op([a, b], -1)
            assert str(got.dtype) == str(want.dtype).split(".")[-1], (d1, d2)
            np.testing.assert_array_equal(np.asarray(got.unbind()[0]), want.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.int8])
def test_where_of_two_numbers_takes_torch_dtypes(dtype):
    x = np.array([[1.0, -2.0, 3.0]]).astype(dtype)
    ref, ours = _pair([torch.from_numpy(x)], "numpy")
    for a, b in ((1.0, -1.0), (1, -1), (True, False), (1, 2.5), (1j, 0)):
        _same(torch.where(ours > 0, a, b), torch.where(ref > 0, a, b))


_SPECIAL = [np.nan, np.inf, -0.0, -np.inf, 0.0, 1.5, -2.5, 0.3, -0.3, 1e30]
_OPS = {
    "sign": torch.sign, "sgn": torch.sgn, "angle": torch.angle, "lgamma": torch.lgamma, "gelu": F.gelu,
    "gelu-tanh": lambda t: F.gelu(t, approximate="tanh"), "hardshrink": F.hardshrink, "softshrink": F.softshrink,
    "div-floor": lambda t: torch.div(t, 2, rounding_mode="floor"),
    "div-floor-neg": lambda t: torch.div(t, -0.5, rounding_mode="floor"),
    "heaviside": lambda t: torch.heaviside(t, torch.full_like(t, 0.5)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", sorted(_OPS))
def test_special_values_as_torch_on_numpy_data(name, dtype):
    x = np.array([_SPECIAL], dtype)
    ref, ours = _pair([torch.from_numpy(x)], "numpy")
    _same(_OPS[name](ours), _OPS[name](ref))


def test_gelu_of_infinities_on_the_compiled_and_numpy_paths():
    from lodtensor.backend.numpy import _special

    x = np.array([np.inf, -np.inf, np.nan, 3.0, -3.0] * 64, np.float32)
    want = F.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(_special.gelu(x), want, rtol=1e-6, atol=1e-7, equal_nan=True)
    out, ax, t = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    with np.errstate(all="ignore"):
        _special._gelu32_block(x, out, ax, t)  # the kernel without a C compiler
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.uint8])
def test_heaviside_of_integers_and_bools_keeps_their_dtype(dtype):
    x = np.array([[0, 3, 1, 0]]).astype(dtype)
    v = np.array([[7, 7, 0, 1]]).astype(dtype)
    want = torch.heaviside(torch.from_numpy(x), torch.from_numpy(v))
    got = torch.heaviside(ln.nested_tensor([x], layout="jagged"), ln.nested_tensor([v], layout="jagged"))
    assert str(got.dtype) == str(want.dtype).split(".")[-1]
    assert np.asarray(got.unbind()[0]).tolist() == want.tolist()


@pytest.mark.parametrize("data", ["torch", "numpy"])
@pytest.mark.parametrize("tol", [{"rtol": 0, "atol": 1}, {}, {"rtol": 0, "atol": 0}, {"rtol": 1, "atol": 0}])
def test_isclose_of_bools_reads_its_tolerances(data, tol):
    b1, b2 = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])
    pack = (lambda t: [t]) if data == "torch" else (lambda t: [t.numpy()])
    got = torch.isclose(ln.nested_tensor(pack(b1)), ln.nested_tensor(pack(b2)), **tol)
    assert np.asarray(got.unbind()[0]).tolist() == torch.isclose(b1, b2, **tol).tolist()


def test_isclose_of_two_libraries_says_so():
    from lodtensor.errors import BackendMismatchError

    with pytest.raises(BackendMismatchError, match="isclose"):
        torch.isclose(ln.nested_tensor([np.ones(2)]), torch.tensor(2.5))


@pytest.mark.parametrize("data", ["torch", "numpy"])
def test_module_level_names_of_methods_are_routed(data):
    ref, ours = _pair(_COMPS["float32"], data)
    for fn in (torch.numel, torch.is_floating_point, torch.is_complex, torch.is_signed, torch.get_device,
               torch.is_inference, torch.is_conj, torch.is_neg, lambda x: torch.is_same_size(x, x)):
        assert fn(ours) == fn(ref)
    _same(torch.narrow(ours, -1, 1, 2), torch.narrow(ref, -1, 1, 2))
    if data == "torch":  # (torch's argument parser refuses a NumPy operand before any dispatch)
        _same(torch.linalg.matmul(ours, torch.ones(3, 2)), torch.linalg.matmul(ref, torch.ones(3, 2)))
    for name in ("arccos_", "arcsin_", "arctan_", "arcsinh_", "negative_"):
        a, b = ref * 0.1, ours * 0.1
        _same(getattr(torch, name)(b), getattr(torch, name)(a))


def test_unsupported_name_message_is_short_and_suggests():
    nt = ln.nested_tensor([np.ones((2, 3))], layout="jagged")
    with pytest.raises(TypeError, match=r"^torch\.cumsum is not supported .*closest supported ops: sum") as err:
        torch.cumsum(nt, 1)
    assert len(str(err.value)) < 300


def _outcome(fn):
    try:
        return fn(), None
    except Exception as err:  # noqa: BLE001 - which calls raise is compared
        return None, err


def _parts(x):
    if isinstance(x, (tuple, list)):
        return [_parts(p) for p in x]
    if getattr(x, "is_nested", False) or isinstance(x, ln.NestedTensor):
        return [np.asarray(c.detach() if hasattr(c, "detach") else c) for c in x.unbind()]
    return np.asarray(x.detach()) if hasattr(x, "detach") else x


def _alike(a, b):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_alike(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and np.allclose(a.astype(float), b.astype(float))
    return str(a).replace("torch.", "") == str(b).replace("torch.", "")


_FUNCS = {
    "result_type float": lambda x: torch.result_type(x, 2.5),
    "result_type int": lambda x: torch.result_type(x, 2),
    "result_type self": lambda x: torch.result_type(x, x),
    "tensor_split 2": lambda x: torch.tensor_split(x, 2, dim=-1),
    "tensor_split 7": lambda x: torch.tensor_split(x, 7, dim=2),
    "tensor_split indices": lambda x: torch.tensor_split(x, [1, 4], dim=2),
    "tensor_split negative": lambda x: torch.tensor_split(x, [-2, 9], dim=2),
    "method tensor_split": lambda x: x.tensor_split(2, -1),
    "dstack": lambda x: torch.dstack([x, x]),
    "repeat_interleave": lambda x: torch.repeat_interleave(x, 2, dim=-1),
    "repeat_interleave 0": lambda x: torch.repeat_interleave(x, 0, dim=-1),
    "method repeat_interleave": lambda x: x.repeat_interleave(3, dim=2),
    "l1_loss": lambda x: F.l1_loss(x, x * 2),
    "l1_loss sum": lambda x: F.l1_loss(x, x * 2, reduction="sum"),
    "l1_loss none": lambda x: F.l1_loss(x, x * 2, reduction="none"),
}


@pytest.mark.parametrize("data", ["torch", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(_FUNCS))
def test_torch_functions_that_were_missing(name, dtype, data):
    if data == "numpy" and dtype == "bfloat16":
        pytest.skip("NumPy has no bfloat16")
    comps = [torch.arange(10).reshape(2, 5).to(getattr(torch, dtype)),
             (torch.arange(5).reshape(1, 5) + 3).to(getattr(torch, dtype))]
    ref, ours = _pair(comps, data)
    want, want_err = _outcome(lambda: _parts(_FUNCS[name](ref)))
    got, got_err = _outcome(lambda: _parts(_FUNCS[name](ours)))
    assert (want_err is None) == (got_err is None), (want_err, got_err)
    assert _alike(got, want)


@pytest.mark.parametrize("data", ["torch", "numpy"])
def test_one_hot(data):
    comps = [torch.tensor([[1, 2, 0], [0, 1, 1]]), torch.tensor([[2, 2, 1]])]
    ref, ours = _pair(comps, data)
    for classes in (3, -1, 5):
        assert _alike(_parts(F.one_hot(ours, classes)), _parts(F.one_hot(ref, classes)))
    for bad in (2, 1):  # dense torch refuses it (torch 2.13's jagged layout computes)
        with pytest.raises(RuntimeError, match="smaller than num_classes"):
            F.one_hot(comps[0], bad)
        with pytest.raises(RuntimeError, match="smaller than num_classes"):  # (ArgumentError: a RuntimeError too)
            F.one_hot(ours, bad)
    with pytest.raises(TypeError, match="LongTensor"):
        F.one_hot(ours.float(), 3)
