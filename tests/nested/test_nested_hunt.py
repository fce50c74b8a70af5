"""Differences from torch 2.13's jagged layout found by a differential fuzzer, each checked against torch."""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LENGTHS = [(2, 0, 3), (3,), (1, 5)]


def _components(lengths, width=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, width, generator=g, dtype=torch.float64).to(dtype) for n in lengths]


def _pair(comps, lib="torch", requires_grad=False):
    """(ours, torch jagged) over the same components; ours on torch or NumPy data."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nested.nested_tensor(
            [c.clone() for c in comps], layout=torch.jagged, requires_grad=requires_grad
        )
    if lib == "torch":
        ours = ln.nested_tensor([c.clone() for c in comps], layout="jagged", requires_grad=requires_grad)
    else:
        ours = ln.nested_tensor([c.numpy().copy() for c in comps], layout="jagged")
    return ours, theirs


def _same(ours, theirs):
    assert isinstance(ours, ln.NestedTensor), type(ours)
    a, b = ours.unbind(), theirs.unbind()
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x = x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
        y = y.detach().numpy()
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def _weighted_sum(nt):
    return sum(c.sum() * (i + 1) for i, c in enumerate(nt.unbind()))


# -- in place on a tensor with history: the backward reads values the write replaced ----------------
INPLACE = {
    "clamp_": lambda y, x: y.clamp_(0.1),
    "clamp_nested_": lambda y, x: y.clamp_(x * 0.5),
    "mul_": lambda y, x: y.mul_(x),
    "imul": lambda y, x: y.__imul__(x),
    "atan2_": lambda y, x: y.atan2_(x + 3),
    "pow_": lambda y, x: y.pow_(2),
    "leaky_relu_inplace": lambda y, x: F.leaky_relu(y, 0.1, inplace=True),
    "elu_inplace": lambda y, x: F.elu(y, inplace=True),
    "hardtanh_inplace": lambda y, x: F.hardtanh(y, -0.5, 0.5, inplace=True),
    "sigmoid_": lambda y, x: y.sigmoid_(),
}


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_op_on_a_tensor_with_history_backpropagates_like_torch(op, lengths):
    """Reference: the same in-place call on every component as a dense torch tensor."""
    fn = INPLACE[op]
    comps = _components(lengths)
    ours = ln.nested_tensor([c.clone() for c in comps], layout="jagged", requires_grad=True)
    out = fn(ours * 1, ours)
    _weighted_sum(out).backward()
    for i, (c, got, grad) in enumerate(zip(comps, out.unbind(), ours.grad.unbind())):
        leaf = c.clone().requires_grad_()
        want = fn(leaf * 1, leaf)
        (want.sum() * (i + 1)).backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(grad, leaf.grad)


# -- Tensor.where(condition, other): torch's method order -----------------------------------------
@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_where_method_takes_the_condition_first_like_torch(lib):
    comps = _components((2, 0, 3))
    ours, theirs = _pair(comps, lib)
    _same(ours.where(ours > 0, -1.0), theirs.where(theirs > 0, -1.0))
    flags = [c > 0 for c in comps]
    cond = [c < 0.5 for c in comps]
    bools, _ = _pair(flags, lib)
    bcond, _ = _pair(cond, lib)
    got = bools.where(bcond, True)  # used to run where(bools, bcond, True): wrong values, no error
    for g, f, c in zip(got.unbind(), flags, cond):
        np.testing.assert_array_equal(np.asarray(g), f.where(c, True).numpy())


# -- pointwise ops torch's jagged layout runs ------------------------------------------------------
OPS = {
    "clamp_min": lambda x: x.clamp_min(0.1),
    "torch.clamp_min": lambda x: torch.clamp_min(x, -0.2),
    "clamp_max": lambda x: torch.clamp_max(x, 0.1),
    "clamp_min_": lambda x: (x * 1).clamp_min_(0.1),
    "clip": lambda x: x.clip(-0.2, 0.3),
    "lerp_low": lambda x: torch.lerp(x, x.exp(), 0.3),
    "lerp_high": lambda x: x.lerp(x.exp(), 0.7),
    "float_power": lambda x: torch.float_power(x, 2),
    "float_power_nested": lambda x: torch.float_power(x.abs(), x),
    "threshold": lambda x: F.threshold(x, 0.1, 2.0),
    "nn.Threshold": torch.nn.Threshold(0.1, -2.0),
    "softmin": lambda x: F.softmin(x, -1),
    "nn.Softmin": torch.nn.Softmin(-1),
    "fill": lambda x: torch.fill(x, 2.0) + x,
    "view_as": lambda x: x.view_as(x) * 2,
    "unary_plus": lambda x: +x,
    "arccos": lambda x: x.clamp(-0.9, 0.9).arccos(),
    "subtract": lambda x: x.subtract(x * 3),
    "true_divide": lambda x: x.true_divide(3),
}


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", sorted(OPS))
def test_pointwise_ops_of_the_jagged_layout_match_torch(op, dtype, lengths):
    fn = OPS[op]
    ours, theirs = _pair(_components(lengths, dtype=dtype), requires_grad=True)
    out_ours, out_theirs = fn(ours), fn(theirs)
    _same(out_ours, out_theirs)
    _weighted_sum(out_ours).backward()
    _weighted_sum(out_theirs).backward()
    _same(ours.grad, theirs.grad)


@pytest.mark.parametrize("op", sorted(set(OPS) - {"clamp_min_"}))
def test_pointwise_ops_of_the_jagged_layout_on_numpy(op):
    ours, theirs = _pair(_components((2, 0, 3), dtype=torch.float32), "numpy")
    out = OPS[op](ours)  # torch's functions take NumPy nested tensors through __torch_function__ too
    assert isinstance(out.values(), np.ndarray)
    _same(out, OPS[op](theirs))


def test_integer_and_special_pointwise_ops_match_torch():
    ints = [torch.tensor([[4, 6], [9, 12]]), torch.tensor([[0, 7]])]
    for lib in ("torch", "numpy"):
        ours, theirs = _pair(ints, lib)
        _same(ln.gcd(ours, ours * 0 + 6), torch.gcd(theirs, theirs * 0 + 6))
        with pytest.raises(TypeError, match="must be Tensor"):
            ln.gcd(ours, 6)
        _same(torch.lcm(ours, ours + 1), torch.lcm(theirs, theirs + 1))
        _same(torch.float_power(ours, 2), torch.float_power(theirs, 2))
        _same(ln.threshold(ours, 5, 7.5), F.threshold(theirs, 5, 7.5))  # keeps int64, as torch
        _same(torch.fill(ours, 2.7), torch.fill(theirs, 2.7))
        with pytest.raises(TypeError, match="gcd"):
            ln.gcd(ours.float(), ours.float())
        floats, tfloats = _pair(_components((2, 0, 3)), lib)
        for a, b in zip(torch.frexp(floats), torch.frexp(tfloats)):
            _same(a, b)
        _same(torch.heaviside(floats, floats * 0 + 0.5), torch.heaviside(tfloats, tfloats * 0 + 0.5))
        with pytest.raises(TypeError, match="different dtypes"):
            torch.heaviside(floats, floats.float())
        with pytest.raises(TypeError, match="lerp"):
            torch.lerp(ours, ours, 0.5)


def test_is_same_size_and_in_place_threshold():
    ours, theirs = _pair(_components((2, 0, 3)))
    other, tother = _pair(_components((2, 1, 3)))
    assert ours.is_same_size(ours * 2) == theirs.is_same_size(theirs * 2) is True
    assert ours.is_same_size(other) is False
    y = ours.clone()
    assert F.threshold(y, 0.0, 0.5, inplace=True) is y  # torch's jagged layout has no threshold_
    for got, c in zip(y.unbind(), theirs.unbind()):
        torch.testing.assert_close(got, F.threshold(c, 0.0, 0.5))


# -- a bool operand in a subtraction: torch refuses it on every backend ---------------------------
@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("call", ["b - 1", "1 - b", "i - b", "f - b", "i - True", "sub_alpha"])
def test_subtraction_with_a_bool_operand_raises_like_torch(lib, call):
    flags = [torch.tensor([True, False]), torch.tensor([True])]
    b, _ = _pair(flags, lib)
    i, _ = _pair([torch.tensor([1, 2]), torch.tensor([3])], lib)
    f, _ = _pair([torch.tensor([1.0, 2.0]), torch.tensor([3.0])], lib)
    run = {
        "b - 1": lambda b, i, f: b - 1,
        "1 - b": lambda b, i, f: 1 - b,
        "i - b": lambda b, i, f: i - b,
        "f - b": lambda b, i, f: f - b,
        "i - True": lambda b, i, f: i - True,
        "sub_alpha": lambda b, i, f: torch.sub(i, b, alpha=2),
    }[call]
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):  # torch's dtype rule
        run(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    with pytest.raises((TypeError, RuntimeError), match="with a bool tensor is not supported"):
        run(b, i, f)  # NumPy data gave int64/float32 results; torch.sub(i, b, alpha=2) on either backend too


def test_masked_fill_with_a_true_scalar_keeps_the_graph():
    """A Python True mask filled a fresh tensor off the graph: backward through it raised, or a sum with
    other terms lost its (zero) gradient. It stays on the graph now, with a zero gradient, as torch's
    masked_fill with an all-true mask."""
    x = ln.nested_tensor([torch.randn(2, 3), torch.randn(1, 3)], layout="jagged", requires_grad=True)
    y = x.masked_fill(True, 5.0)
    assert y.requires_grad and torch.equal(y.values(), torch.full((3, 3), 5.0))
    y.values().sum().backward()
    assert torch.equal(x.grad.values(), torch.zeros(3, 3))
