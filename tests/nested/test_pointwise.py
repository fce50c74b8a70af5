"""The pointwise tables against torch 2.13's jagged layout: values, dtypes and which calls raise.

Every table op runs on the same random ragged inputs (zero-length components
included) as ``lodtensor.nested`` NumPy and torch nested tensors and as a
``torch.nested`` jagged tensor; both must raise or both must agree.
"""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln
from lodtensor.nested import BINARY, UNARY

from ._cases import run_call, typed_arrays

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = ["float32", "float64", "int64", "bool"]


def _sweep(dtypes, fast_torch):
    """(dtype, lib) pairs: every dtype on NumPy (where the dtype rules are ours) in the default run; on torch
    (which applies its own rules) ``fast_torch`` there and the rest under ``make test-slow``."""
    pairs = [(d, "numpy") for d in dtypes]
    for d in dtypes:
        marks = () if d == fast_torch else (pytest.mark.slow,)
        pairs.append(pytest.param(d, "torch", marks=marks))
    return pairs
_TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool}


def _arrays(seed, dtype, lengths=(2, 0, 3), width=3):
    return typed_arrays(seed, dtype, lengths, width)


def _jagged(arrays):
    return torch.nested.nested_tensor([torch.from_numpy(a.copy()) for a in arrays], layout=torch.jagged)


def _ours(arrays, lib):
    nt = ln.nested_tensor(arrays, layout="jagged")
    return nt.to_torch() if lib == "torch" else nt


def _torch_fn(name):
    spec = UNARY.get(name) or BINARY.get(name)
    path = spec[1]
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


_run = run_call


def _same(ours, theirs, rtol=2e-5):
    """Our nested result equals torch's jagged one, dtype included."""
    got = ours.to_tensor_list()
    want = theirs.unbind()
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
        b = b.detach().numpy()
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)


def _compare(ours_call, theirs_call, rtol=2e-5):
    theirs, their_err = _run(theirs_call)
    ours, our_err = _run(ours_call)
    if their_err is not None:
        assert our_err is not None, f"torch raised {their_err!r}, we returned a result"
        return
    assert our_err is None, f"we raised {our_err!r}, torch returned a result"
    _same(ours, theirs, rtol)


_LOOSE = {"lgamma", "digamma", "erfinv", "i0", "sinc", "erfc", "gelu", "mish"}


@pytest.mark.parametrize("dtype, lib", _sweep(DTYPES, "float64"))
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_table_matches_jagged(name, dtype, lib):
    arrays = _arrays(hash(name) % 1000, dtype)
    fn = _torch_fn(name)
    rtol = 2e-4 if name in _LOOSE else 2e-5
    _compare(lambda: getattr(ln, name)(_ours(arrays, lib)), lambda: fn(_jagged(arrays)), rtol)
    # the method and torch.<op> through __torch_function__ agree with the function
    if dtype == "float64" and _run(lambda: fn(_jagged(arrays)))[1] is None:  # (bitwise_not refuses floats)
        nt = _ours(arrays, lib)
        _same(getattr(nt, name)(), fn(_jagged(arrays)), rtol)
        if lib == "torch":
            _same(fn(nt), fn(_jagged(arrays)), rtol)


def _operand(kind, dtype, seed):
    """The second operand and its torch twin: nested, scalar, bias over the last dim, per-component dense."""
    g = np.random.default_rng(seed)
    if kind == "nested":  # torch wants one shared offsets object; ours compares structures by value
        arrays = _arrays(seed + 1, dtype)
        return lambda lib: _ours(arrays, lib), lambda first: torch.nested.nested_tensor_from_jagged(
            torch.from_numpy(np.concatenate(arrays)), first.offsets()
        )
    if kind == "scalar":
        value = {"bool": True, "int64": 2}.get(dtype, 0.75)
        return lambda lib: value, lambda first: value
    shape = (3,) if kind == "bias" else (3, 1, 3)
    dense = _arrays(seed + 2, dtype, lengths=(shape[0],), width=1)[0].reshape(-1)[: int(np.prod(shape))]
    dense = np.resize(dense if dense.size else g.random(1).astype(dense.dtype), shape)
    return (lambda lib: torch.from_numpy(dense.copy()) if lib == "torch" else dense.copy()), (
        lambda first: torch.from_numpy(dense.copy())
    )


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("kind", ["nested", "scalar", "bias", "batch"])
@pytest.mark.parametrize(
    "dtypes",
    [
        ("float32", "float32"),
        ("float64", "float32"),
        ("int64", "int64"),
        ("int64", "float32"),
        ("bool", "bool"),
        ("float32", "int64"),
    ],
)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_table_matches_jagged(name, dtypes, kind, lib):
    left, right = dtypes
    arrays = _arrays(7, left)
    ours_other, their_other = _operand(kind, right, 11)
    fn = _torch_fn(name)
    first = _jagged(arrays)
    _compare(lambda: getattr(ln, name)(_ours(arrays, lib), ours_other(lib)), lambda: fn(first, their_other(first)))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize(
    "expr",
    [
        lambda m, a, b: m.where(a > 0, a, 0.0),
        lambda m, a, b: m.where(a > 0, a, b),
        lambda m, a, b: m.clamp(a, -0.5, 0.5),
        lambda m, a, b: m.clamp(a, min=0.0),
        lambda m, a, b: m.clamp(a, max=0),
        lambda m, a, b: m.nan_to_num(m.log(a), nan=0.0, neginf=-9.0),
        lambda m, a, b: F.leaky_relu(a, 0.2) if m is torch else m.leaky_relu(a, 0.2),
        lambda m, a, b: m.div(a, b, rounding_mode="floor"),
        lambda m, a, b: m.div(a, 0.3, rounding_mode="trunc"),
        lambda m, a, b: m.add(a, b, alpha=2),
        lambda m, a, b: 2.0 - a,
        lambda m, a, b: 1 / (a + 3),
        lambda m, a, b: 2**a,
        lambda m, a, b: -a,
        lambda m, a, b: (a > 0) & (b > 0),
        lambda m, a, b: (a > 0) | ~(b > 0),
    ],
    ids=[
        "where-scalar",
        "where-nested",
        "clamp",
        "clamp-min",
        "clamp-max-int",
        "nan_to_num",
        "leaky_relu",
        "div-floor",
        "div-trunc",
        "add-alpha",
        "rsub",
        "rdiv",
        "rpow",
        "neg",
        "and",
        "or-not",
    ],
)
def test_expressions_match_jagged(expr, lib):
    a, b = _arrays(3, "float32"), _arrays(4, "float32")
    first = _jagged(a)
    second = torch.nested.nested_tensor_from_jagged(torch.from_numpy(np.concatenate(b)), first.offsets())
    _compare(lambda: expr(ln, _ours(a, lib), _ours(b, lib)), lambda: expr(torch, first, second))


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 5), min_size=1, max_size=6),
    width=st.integers(1, 4),
    name=st.sampled_from(["exp", "tanh", "sigmoid", "sqrt", "floor", "square", "isnan", "gelu", "softplus"]),
    op=st.sampled_from(["maximum", "atan2", "mul", "lt", "copysign", "hypot"]),
)
def test_random_ragged_shapes_match_jagged(lengths, width, name, op):
    if sum(lengths) == 0:
        lengths = [*lengths[:-1], 1]
    a = _arrays(len(lengths), "float32", lengths, width)
    b = _arrays(len(lengths) + 1, "float32", lengths, width)
    _compare(lambda: getattr(ln, name)(_ours(a, "numpy")), lambda: _torch_fn(name)(_jagged(a)))
    first = _jagged(a)
    second = torch.nested.nested_tensor_from_jagged(torch.from_numpy(np.concatenate(b)), first.offsets())
    _compare(lambda: getattr(ln, op)(_ours(a, "numpy"), _ours(b, "numpy")), lambda: _torch_fn(op)(first, second))
    bias = np.linspace(-1, 1, width).astype(np.float32)
    _compare(
        lambda: getattr(ln, op)(_ours(a, "numpy"), bias), lambda: _torch_fn(op)(_jagged(a), torch.from_numpy(bias))
    )


# -- several ragged dims: per-component dense torch is the reference -------------------------------
@pytest.mark.parametrize("name", ["exp", "sin", "relu", "sigmoid", "gelu", "leaky_relu", "round", "isfinite"])
def test_unary_on_images_matches_per_component(name):
    g = np.random.default_rng(0)
    parts = [g.standard_normal((2, h, w)).astype(np.float32) for h, w in [(3, 4), (0, 2), (5, 1)]]
    ours = getattr(ln, name)(ln.nested_tensor(parts))
    fn = _torch_fn(name)
    for got, part in zip(ours.unbind(), parts):
        np.testing.assert_allclose(got, fn(torch.from_numpy(part)).numpy(), rtol=2e-5, atol=2e-6)


def test_dense_broadcast_on_images():
    """A bias over the regular channel dim and a per-image scale, on images ragged in H and W."""
    g = np.random.default_rng(1)
    parts = [g.standard_normal((h, w, 3)).astype(np.float32) for h, w in [(3, 4), (1, 2), (2, 5)]]
    nt = ln.nested_tensor(parts)
    bias = np.float32([1, 2, 3])
    scale = np.float32([2, 3, 4]).reshape(3, 1, 1, 1)
    for got, p, s in zip(((nt + bias) * scale).unbind(), parts, scale[:, 0]):
        np.testing.assert_allclose(got, (p + bias) * s, rtol=1e-6)
    with pytest.raises(ValueError, match="cannot call binary pointwise function"):
        nt * np.ones((2, 1, 3), np.float32)


# -- NumPy ufuncs ----------------------------------------------------------------------------------
def test_numpy_ufuncs_return_nested():
    parts = _arrays(5, "float32")
    nt = ln.nested_tensor(parts)
    out = np.exp(nt)
    assert isinstance(out, ln.NestedTensor) and out.dtype == np.float32
    for got, p in zip(out.unbind(), parts):
        np.testing.assert_allclose(got, np.exp(p), rtol=1e-6)
    # NumPy scalars act as Python numbers (torch's rule): float32 stays float32
    assert (np.float64(2.0) * nt).dtype == np.float32
    assert np.maximum(nt, 0).to_padded_tensor(-1).min() >= -1
    target = ln.zeros_like(nt)
    res = np.add(nt, 1, out=target)
    assert res is target
    for got, p in zip(target.unbind(), parts):
        np.testing.assert_allclose(got, p + 1)
    mant, expo = np.frexp(nt)
    assert isinstance(mant, ln.NestedTensor) and expo.dtype == np.int32
    with pytest.raises(TypeError, match="reduce is not supported on a NestedTensor"):
        np.add.reduce(nt)
    with pytest.raises(ValueError, match="out= must be NestedTensors"):
        np.add(nt, 1, out=ln.nested_tensor([np.zeros((1, 3), np.float32)]))


# -- in place --------------------------------------------------------------------------------------
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_inplace_ops_match_jagged(lib):
    a, b = _arrays(8, "float32"), _arrays(9, "float32")
    ours, theirs = _ours(a, lib), _jagged(a)
    for step in (
        lambda x, y: x.add_(y, alpha=0.5),
        lambda x, y: x.mul_(2.0),
        lambda x, y: x.exp_(),
        lambda x, y: x.clamp_(max=3.0),
        lambda x, y: x.masked_fill_(x > 2.5, -1.0),
    ):
        out = step(ours, _ours(b, lib))
        other = torch.nested.nested_tensor_from_jagged(torch.from_numpy(np.concatenate(b)), theirs.offsets())
        try:
            step(theirs, other)
        except NotImplementedError:  # torch 2.13 jagged has no masked_fill_: the out-of-place result
            theirs = theirs.masked_fill(theirs > 2.5, -1.0)
        assert out is ours
        _same(ours, theirs)
    ours.zero_()
    assert float(ours.to_padded_tensor(1.0).sum()) == 4 * 3  # only the padding (4 rows of 3) is 1
    ours.fill_(2)
    ours.copy_(_ours(b, lib))
    _same(ours, _jagged(b))
    ints = _ours(_arrays(1, "int64"), lib)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        ints.add_(0.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.nested.nested_tensor([torch.ones(2, dtype=torch.int64)], layout=torch.jagged).add_(0.5)


# -- autograd --------------------------------------------------------------------------------------
_GRAD_UNARY = [
    "exp",
    "tanh",
    "sigmoid",
    "sin",
    "log1p",
    "erf",
    "gelu",
    "silu",
    "elu",
    "leaky_relu",
    "softplus",
    "mish",
    "rsqrt",
    "atan",
    "square",
]


@pytest.mark.parametrize("name", _GRAD_UNARY)
def test_unary_gradcheck(name):
    parts = [torch.rand(n, 3, dtype=torch.float64) + 0.1 for n in (2, 0, 3)]
    nt = ln.nested_tensor(parts)
    buf = nt.values().detach().clone().requires_grad_(True)

    def f(values):
        return getattr(ln, name)(ln.nested_tensor_from_jagged(values, nt.offsets())).values()

    assert torch.autograd.gradcheck(f, (buf,))


@pytest.mark.parametrize("name", ["atan2", "maximum", "mul", "div", "pow", "hypot", "xlogy"])
def test_binary_gradcheck_with_dense(name):
    parts = [torch.rand(n, 3, dtype=torch.float64) + 0.1 for n in (2, 0, 3)]
    offsets = ln.nested_tensor(parts).offsets()
    values = torch.cat(parts).requires_grad_(True)
    other = (torch.rand(3, 1, 3, dtype=torch.float64) + 0.2).requires_grad_(True)

    def f(v, o):
        return getattr(ln, name)(ln.nested_tensor_from_jagged(v, offsets), o).values()

    assert torch.autograd.gradcheck(f, (values, other))


# every differentiable table op, through the nested wrapper, in float64 on torch
_NO_GRAD = {"isfinite", "isinf", "isnan", "isneginf", "isposinf", "signbit", "logical_not", "bitwise_not", "angle",
            "conj", "hardshrink", "softshrink", "round", "floor", "ceil", "trunc", "fix", "sign", "sgn",
            # torch.special's functions torch 2.13 has no derivative for (their outputs do not require grad)
            "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
            "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
            "spherical_bessel_j0"}  # fmt: skip
_SHIFT = {"acosh": 1.5, "mvlgamma": 1.0}  # inputs in the op's domain
_ARGS = {"mvlgamma": (2,), "threshold": (0.5, -1.0)}  # parameters torch requires


@pytest.mark.parametrize("name", sorted(set(UNARY) - _NO_GRAD))
def test_every_differentiable_unary_op_gradchecks(name):
    g = torch.Generator().manual_seed(0)
    values = (torch.rand(5, 2, dtype=torch.float64, generator=g) * 0.6 + 0.2 + _SHIFT.get(name, 0.0))
    values.requires_grad_(True)
    offsets = np.array([0, 2, 2, 5])
    fn = getattr(ln, name)
    args = _ARGS.get(name, ())
    assert torch.autograd.gradcheck(lambda v: fn(ln.nested_tensor_from_jagged(v, offsets), *args).values(), (values,))


@pytest.mark.parametrize("name", sorted(n for n, spec in BINARY.items() if spec[2] in ("promote", "float", "fp")
                                        and not n.startswith("bitwise") and n != "nextafter"
                                        and n not in ("zeta", "igamma", "igammac")))  # (torch: no derivative)
def test_every_differentiable_binary_op_gradchecks(name):
    g = torch.Generator().manual_seed(1)
    a = (torch.rand(5, 2, dtype=torch.float64, generator=g) * 0.6 + 0.2).requires_grad_(True)
    b = (torch.rand(5, 2, dtype=torch.float64, generator=g) * 0.6 + 0.9).requires_grad_(True)
    offsets = np.array([0, 2, 2, 5])
    fn = getattr(ln, name)

    def f(x, y):
        return fn(ln.nested_tensor_from_jagged(x, offsets), ln.nested_tensor_from_jagged(y, offsets)).values()

    assert torch.autograd.gradcheck(f, (a, b))
