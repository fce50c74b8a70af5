"""Scalar arguments converted to the input's dtype as torch 2.13 converts them, against its jagged layout:
F.threshold (a fractional threshold of an integer tensor truncated, a value the dtype cannot hold refused
instead of wrapped; in place, over holes, its second derivative), and the scalars of masked_fill, where and
clamp (refused where torch refuses them: they wrapped silently on NumPy data, 300 into uint8 as 44)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import lodtensor.nested as ln  # noqa: E402
from lodtensor.errors import ArgumentError  # noqa: E402

DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"]
SCALARS = [(0, 0), (-5.5, 100), (5, 7.5), (5.5, -1), (100, 300.7), (127.9, 1), (-128.9, 2), (1e6, 1.0),
           (1.5, 70000.0), (float("nan"), 1), (1, float("nan")), (float("inf"), 0), (1.5, float("-inf")),
           (2**63, 1), (-3, -3), (0.5, 1e300), (True, 3), (1, 1 + 0j), (1, 1 + 2j), (-1, 255), (-200, 1)]
DATA = [-128, -6, -5, 0, 1, 5, 6, 100, 127]


def _torch_answer(dtype, th, value):
    x = torch.tensor(DATA, dtype=getattr(torch, dtype) if dtype != "uint8" else torch.uint8).reshape(-1)
    if dtype == "uint8":
        x = torch.tensor([abs(v) for v in DATA], dtype=torch.uint8)
    nt = torch.nested.nested_tensor([x[:4], x[4:]], layout=torch.jagged)
    try:
        return [c.tolist() for c in F.threshold(nt, th, value).unbind()]
    except RuntimeError as err:
        return ("refused", str(err))


def _ours(lib, dtype, th, value, inplace=False):
    data = [abs(v) for v in DATA] if dtype == "uint8" else DATA
    x = np.array(data, dtype=dtype) if lib == "numpy" else torch.tensor(data, dtype=getattr(torch, dtype))
    nt = ln.nested_tensor([x[:4], x[4:]])
    try:
        out = (F.threshold_ if inplace else F.threshold)(nt, th, value)
    except ArgumentError as err:
        assert isinstance(err, RuntimeError) and err.argument in ("threshold", "value")
        return ("refused", str(err))
    if inplace:
        assert out is nt
    return [np.asarray(c).tolist() if lib == "numpy" else c.tolist() for c in out.unbind()]


def _same(ours, theirs):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple), f"torch refuses ({theirs[1]}), we gave {ours}"
        assert "without overflow" in ours[1] and "without overflow" in theirs[1]
        assert theirs[1].split("type ")[1].split(" ")[0] in ours[1]  # the same C type named
        return
    assert not isinstance(ours, tuple), f"torch answers {theirs}, we refused: {ours[1]}"
    np.testing.assert_array_equal(np.concatenate(ours), np.concatenate(theirs))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("th, value", SCALARS, ids=[f"{a!r},{b!r}" for a, b in SCALARS])
def test_threshold_matches_torch_jagged(lib, dtype, th, value):
    _same(_ours(lib, dtype, th, value), _torch_answer(dtype, th, value))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["uint8", "int64", "float16"])
def test_in_place_matches_and_a_refusal_writes_nothing(lib, dtype):
    for th, value in SCALARS:
        _same(_ours(lib, dtype, th, value, inplace=True), _torch_answer(dtype, th, value))
    x = np.array([1, 2, 3], dtype=dtype) if lib == "numpy" else torch.tensor([1, 2, 3], dtype=getattr(torch, dtype))
    nt = ln.nested_tensor([x[:1], x[1:]])
    before = [np.asarray(c).tolist() for c in nt.unbind()]
    with pytest.raises(ArgumentError, match=r"converted to type .* without overflow.*'value' is 1e\+300"):
        F.threshold(nt, 1, 1e300, inplace=True)
    assert [np.asarray(c).tolist() for c in nt.unbind()] == before


def test_checked_scalar_as_torch_converts():
    from lodtensor.nested._dtypes import checked_scalar  # noqa: PLC0415

    assert checked_scalar(-5.5, np.dtype("int64")) == -5 and checked_scalar(5.9, np.dtype("int8")) == 5
    assert checked_scalar(-1, np.dtype("uint8")) == 255  # a negative integer wraps into an unsigned type
    assert checked_scalar(-1.0, np.dtype("uint8")) == (None, "uint8_t")  # a float does not
    assert checked_scalar(1e6, np.dtype("float16"), opmath=True).dtype == np.float32
    assert checked_scalar(1e6, np.dtype("float16")) == (None, "c10::Half")
    assert np.isinf(checked_scalar(float("inf"), np.dtype("float16")))
    assert checked_scalar(float("nan"), np.dtype("int32")) == (None, "int")
    assert checked_scalar(torch.tensor(2.5), torch.float64) == 2.5


def test_bool_refused_and_missing_arguments_named():
    with pytest.raises(TypeError, match="not implemented for 'Bool'"):
        F.threshold(ln.nested_tensor([np.array([True, False])]), 0, 1)
    for data in (np.array([1 + 1j, 2]), torch.tensor([1 + 1j, 2])):  # torch: "threshold_cpu" not implemented
        with pytest.raises(RuntimeError, match="not implemented for .Complex"):  # (DTypeError, as for bool)
            F.threshold(ln.nested_tensor([data]), 1.5, 0.0)
    with pytest.raises(TypeError, match="missing required argument.*'value'"):
        ln.threshold(ln.nested_tensor([np.array([1.0])]), 0.5)
    with pytest.raises(TypeError, match="argument 'value' must be a number"):
        ln.threshold(ln.nested_tensor([np.array([1.0])]), 0.5, "1")


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_over_holes_as_torch(lib):
    base = np.arange(24.0).reshape(3, 8) - 10
    start, length = np.array([0, 2, 1]), np.array([3, 5, 7])
    ours = ln.narrow(base if lib == "numpy" else torch.from_numpy(base.copy()), 1, start, length, layout="jagged")
    theirs = torch.nested.narrow(torch.from_numpy(base.copy()), 1, torch.from_numpy(start), torch.from_numpy(length),
                                 layout=torch.jagged)
    got, want = F.threshold(ours, -2.5, 9.0), F.threshold(theirs, -2.5, 9.0)
    assert (got.lengths() is None) == (want.lengths() is None)
    for a, b in zip(got.unbind(), want.unbind()):
        np.testing.assert_array_equal(np.asarray(a), b.numpy())


def test_second_derivative_is_torchs_zeros():
    """As torch's dense threshold_backward (its jagged layout has no double backward here): the first
    derivative requires grad (create_graph), the second is zeros."""
    x = torch.tensor([0.2, 1.5, -3.0, 4.0, 0.7], dtype=torch.float64, requires_grad=True)
    for y in (F.threshold(ln.nested_tensor_from_jagged(x, np.array([0, 2, 5])), 0.5, -1.0).values(),
              F.threshold(x, 0.5, -1.0)):
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        assert g.requires_grad and g.tolist() == [0.0, 1.0, 0.0, 1.0, 1.0]
        (h,) = torch.autograd.grad(g.sum(), x)
        assert h.tolist() == [0.0] * 5


FILLS = {
    "masked_fill": lambda t, v: t.masked_fill(t > 2, v),
    "where_other": lambda t, v: torch.where(t > 2, t, v),
    "where_input": lambda t, v: torch.where(t > 2, v, t),
    "clamp_min": lambda t, v: torch.clamp(t, min=v),
    "clamp_max": lambda t, v: torch.clamp(t, max=v),
}
FILL_VALUES = [300, -1, -129, 255, 127, 2.5, -2.5, 1e300, float("inf"), float("nan"), 70000.0, 1 + 2j, True]


def _fill(lib, dtype, op, value):
    make = {"jagged": lambda x: torch.nested.nested_tensor([x[:3], x[3:]], layout=torch.jagged),
            "torch": lambda x: ln.nested_tensor([x[:3], x[3:]]),
            "numpy": lambda x: ln.nested_tensor([x.numpy()[:3], x.numpy()[3:]])}[lib]
    nt = make(torch.tensor([1, 2, 3, 4], dtype=getattr(torch, dtype)))
    try:
        out = FILLS[op](nt, value)
    except (RuntimeError, TypeError) as err:
        return ("refused", type(err).__name__, str(err))
    parts = [c.tolist() if isinstance(c, torch.Tensor) else np.asarray(c).tolist() for c in out.unbind()]
    return parts, str(out.dtype).replace("torch.", "")


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "float16", "float32", "complex64"])
@pytest.mark.parametrize("op", sorted(FILLS))
def test_fill_scalars_refused_or_converted_as_torch(lib, dtype, op):
    for value in FILL_VALUES:
        theirs, ours = _fill("jagged", dtype, op, value), _fill(lib, dtype, op, value)
        if theirs[0] == "refused":
            assert ours[0] == "refused", f"{op}({dtype}, {value!r}): torch refuses ({theirs[2]}), we gave {ours}"
            if "without overflow" in theirs[2] and not isinstance(value, complex):  # (complex: "not supported")
                assert "without overflow" in ours[2] and theirs[2].split("type ")[1].split(" ")[0] in ours[2]
            continue
        assert ours[0] != "refused", f"{op}({dtype}, {value!r}): torch gives {theirs}, we refused: {ours[2]}"
        np.testing.assert_array_equal(np.concatenate(ours[0]), np.concatenate(theirs[0]))
        assert ours[1] == theirs[1] or (ours[1], theirs[1]) == ("complex64", "complex32")  # (NumPy has no complex32)


def _t64(v):  # (float64: torch.tensor(1e300) would be float32's inf before masked_fill saw it)
    return torch.tensor(v, dtype=torch.float64 if isinstance(v, float) else None)


ZERO_D = [_t64, np.array, lambda v: np.asarray(v)[()]]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "float16", "complex64"])
@pytest.mark.parametrize("wrap", range(len(ZERO_D)), ids=["tensor_0d", "ndarray_0d", "numpy_scalar"])
def test_masked_fill_0d_values_as_dense_torch(lib, dtype, wrap):
    """A 0-d tensor, array or NumPy scalar as ``value``: converted as dense torch converts it (tensor(-1) into
    uint8 is 255; tensor(300) refused). Torch's jagged masked_fill wraps tensor(300) to 44, silently: dense
    torch's refusal is followed. A NumPy complex scalar keeps its imaginary part on torch data (torch's own
    ``where`` drops it)."""
    values = [300, -1, 2.5, 1e300, 1 + 2j] if dtype == "complex64" else [300, -1, 2.5, 1e300, 70000.0]
    for value in values:
        x = torch.tensor([1, 2, 3, 4], dtype=getattr(torch, dtype))
        try:
            theirs = x.masked_fill(x.real > 2 if x.is_complex() else x > 2, _t64(value)).tolist()
        except RuntimeError as err:
            theirs = ("refused", str(err))
        nt = ln.nested_tensor([x[:3], x[3:]]) if lib == "torch" else ln.nested_tensor([x.numpy()[:3], x.numpy()[3:]])
        try:
            m = np.array([False, False, True, True])
            parts = [m[:3], m[3:]]
            mask = ln.nested_tensor(parts if lib == "numpy" else [torch.from_numpy(p) for p in parts])
            out = ln.masked_fill(nt, mask, ZERO_D[wrap](value))
            ours = np.concatenate([np.asarray(c) for c in out.unbind()]).tolist()
        except ArgumentError as err:
            ours = ("refused", str(err))
        if theirs[0] == "refused":
            assert ours[0] == "refused" and theirs[1].split("type ")[1].split(" ")[0] in ours[1], (value, ours)
        else:
            assert ours == theirs, (value, ours, theirs)


FILL_CALLS = {  # name: (ours on a nested tensor, torch's on a dense tensor)
    "fill_": (lambda n, v: n.fill_(v), lambda t, v: t.clone().fill_(v)),
    "full_like": (ln.full_like, torch.full_like),
    "fill": (ln.fill, torch.fill),
    "add_alpha": (lambda n, v: ln.add(n, 1, alpha=v), lambda t, v: torch.add(t, 1, alpha=v)),
    "sub_alpha_nested": (lambda n, v: ln.sub(n, n, alpha=v), lambda t, v: torch.sub(t, t, alpha=v)),
}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "float16", "complex64", "bool"])
@pytest.mark.parametrize("name", sorted(FILL_CALLS))
def test_fill_values_and_alpha_converted_as_torch(name, dtype, lib):
    """fill_/full_like/fill and add/sub's alpha: -1 into uint8 is 255, 300 into int8 refused (NumPy raised its
    OverflowError for both; alpha=300 wrapped on every backend), a complex number into bool is True."""
    ours_call, their_call = FILL_CALLS[name]
    x = np.array([1, 2, 3], dtype=dtype)
    for value in [300, -1, -129, 1e300, 2.5, 1 + 2j, True, 70000.0, 2**63, 127]:
        try:
            theirs = their_call(torch.from_numpy(x), value).tolist()
        except (RuntimeError, TypeError):
            theirs = "refused"
        parts = [x[:1].copy(), x[1:].copy()]
        nt = ln.nested_tensor(parts if lib == "numpy" else [torch.from_numpy(p) for p in parts])
        try:
            ours = np.concatenate([np.asarray(c) for c in ours_call(nt, value).unbind()]).tolist()
        except (RuntimeError, TypeError):
            ours = "refused"
        assert ours == theirs, (value, ours, theirs)
