"""Reductions (max, argmax, min, argmin, prod, any, all, and sum/mean/amax/amin) against torch 2.13's
jagged layout: values, dtypes, dense-or-nested results and which calls raise."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln

from ._cases import run_call, typed_arrays

torch = pytest.importorskip("torch")

OPS = ["max", "argmax", "min", "argmin", "prod", "any", "all", "sum", "mean", "amax", "amin"]


def _arrays(seed, dtype, lengths=(2, 3, 1), width=3):
    return typed_arrays(seed, dtype, lengths, width)


_run = run_call


def _numpy(t):
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _flat(x):
    """A nested or dense result (ours or torch's) as a flat NumPy array plus its kind."""
    if isinstance(x, ln.NestedTensor):
        return np.concatenate([np.asarray(_numpy(c) if hasattr(c, "detach") else c).reshape(-1)
                               for c in x.unbind()] or [np.zeros(0)]), "nested"
    if isinstance(x, torch.Tensor):
        if x.is_nested:
            return _numpy(x.values()).reshape(-1), "nested"
        return _numpy(x).reshape(-1), "dense"
    return np.asarray(x).reshape(-1), "dense"


def _check(ours, theirs):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == 2
        for a, b in zip(ours, theirs):
            _check(a, b)
        return
    a, kind_a = _flat(ours)
    b, kind_b = _flat(theirs)
    assert kind_a == kind_b
    assert str(a.dtype) == str(b.dtype), (a.dtype, b.dtype)
    if isinstance(theirs, torch.Tensor) and not theirs.is_nested:
        shape = ours.shape if hasattr(ours, "shape") else np.shape(ours)
        assert tuple(shape) == tuple(theirs.shape)
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5, equal_nan=True)


def _compare(ours_call, theirs_call):
    theirs, their_err = _run(theirs_call)
    ours, our_err = _run(ours_call)
    if their_err is not None:
        assert our_err is not None, f"torch raised {their_err!r}, we returned {ours!r}"
        return
    assert our_err is None, f"we raised {our_err!r}, torch returned a result"
    _check(ours, theirs)


def _pair(arrays, lib):
    ours = ln.nested_tensor(arrays, layout="jagged")
    theirs = torch.nested.nested_tensor([torch.from_numpy(a.copy()) for a in arrays], layout=torch.jagged)
    return (ours.to_torch() if lib == "torch" else ours), theirs


def _sweep(dtypes, fast_torch):
    """(dtype, lib): every dtype on NumPy; on torch ``fast_torch`` by default, the rest under make test-slow."""
    return [(d, "numpy") for d in dtypes] + [
        pytest.param(d, "torch", marks=() if d == fast_torch else (pytest.mark.slow,)) for d in dtypes]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (1, 2)])
@pytest.mark.parametrize("dtype, lib", _sweep(["float32", "float64", "int64", "bool"], "float32"))
@pytest.mark.parametrize("op", OPS)
def test_reductions_match_jagged(op, dtype, dim, keepdim, lib):
    if dim is None and keepdim:
        pytest.skip("keepdim needs a dim")
    ours, theirs = _pair(_arrays(1, dtype), lib)

    def call(mod, x):
        fn = getattr(mod, op)
        return fn(x) if dim is None else fn(x, dim, keepdim=keepdim)

    _compare(lambda: call(ln, ours), lambda: call(torch, theirs))
    if lib == "torch" and dim is not None:  # torch.<op>(nt) reaches us through __torch_function__
        _compare(lambda: call(torch, ours), lambda: call(torch, theirs))


@pytest.mark.parametrize("op", ["prod", "any", "all", "sum", "max", "argmin"])
def test_reductions_with_an_empty_component(op):
    arrays = _arrays(2, "float32", lengths=(2, 0, 3))
    ours, theirs = _pair(arrays, "numpy")
    _compare(lambda: getattr(ln, op)(ours, 2), lambda: getattr(torch, op)(theirs, 2))
    # max/argmin: an empty component gives the dtype's lowest value and index 0, as torch's jagged layout
    _compare(lambda: getattr(ln, op)(ours, 1), lambda: getattr(torch, op)(theirs, 1))


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=6), width=st.integers(1, 4),
       op=st.sampled_from(OPS), dim=st.sampled_from([None, 1, 2]), keepdim=st.booleans())
def test_random_lengths_match_jagged(lengths, width, op, dim, keepdim):
    dtype = "bool" if op in ("any", "all") else "float32"
    ours, theirs = _pair(_arrays(len(lengths), dtype, lengths, width), "numpy")
    keepdim = keepdim and dim is not None
    kwargs = {"keepdim": True} if keepdim else {}
    args = () if dim is None else (dim,)
    _compare(lambda: getattr(ln, op)(ours, *args, **kwargs), lambda: getattr(torch, op)(theirs, *args, **kwargs))


@pytest.mark.parametrize("op", ["argmax", "argmin", "prod", "any", "all", "max"])
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_images_match_per_component(op, dim):
    """Several ragged dims (beyond torch's jagged layout): every component reduced as dense torch does."""
    g = np.random.default_rng(3)
    parts = [g.standard_normal((2, h, w)).astype(np.float32) for h, w in [(3, 4), (1, 2), (3, 5)]]
    x = [p > 0 for p in parts] if op in ("any", "all") else parts
    out = getattr(ln, op)(ln.nested_tensor(x), dim)
    values = out.indices if op == "max" else out
    pieces = values.unbind() if isinstance(values, ln.NestedTensor) else list(values)
    for got, part in zip(pieces, x):
        want = getattr(torch, op)(torch.from_numpy(part), dim - 1)
        want = want.indices if op == "max" else want
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5)


def test_max_of_two_nested_is_maximum():
    a, b = _arrays(4, "float32"), _arrays(5, "float32")
    out = ln.max(ln.nested_tensor(a), ln.nested_tensor(b))
    for got, x, y in zip(out.unbind(), a, b):
        np.testing.assert_array_equal(got, np.maximum(x, y))


def test_prod_gradcheck_over_the_ragged_dim():
    parts = [torch.rand(n, 3, dtype=torch.float64) + 0.5 for n in (2, 1, 3)]
    offsets = ln.nested_tensor(parts).offsets()
    values = torch.cat(parts).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v: ln.prod(ln.nested_tensor_from_jagged(v, offsets), 1), (values,))
    assert torch.autograd.gradcheck(
        lambda v: ln.max(ln.nested_tensor_from_jagged(v, offsets), 1).values, (values,))


_EXTREMES = ["amax", "amin", "max", "min", "argmax", "argmin"]


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32",
                                   "float64"])
@pytest.mark.parametrize("data", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_extremes_of_an_empty_component_match_jagged(dtype, data, layout):
    """The dtype's lowest value for a maximum (highest for a minimum) and index 0, as torch's jagged layout;
    values, dtypes and indices, keepdim or not, either layout of ours, NumPy or torch data."""
    if data == "numpy" and dtype == "bfloat16":
        pytest.skip("NumPy has no bfloat16")
    tdtype = getattr(torch, dtype)
    comps = [torch.arange(6).reshape(3, 2).to(tdtype), torch.zeros(0, 2, dtype=tdtype),
             torch.ones(1, 2, dtype=tdtype)]
    theirs = torch.nested.nested_tensor(comps, layout=torch.jagged)
    ours = ln.nested_tensor(comps if data == "torch" else [c.numpy() for c in comps],
                            layout=getattr(torch, layout))
    for op in _EXTREMES:
        for keepdim in (False, True):
            _compare(lambda op=op, k=keepdim: getattr(ln, op)(ours, 1, keepdim=k),
                     lambda op=op, k=keepdim: getattr(torch, op)(theirs, 1, keepdim=k))


@pytest.mark.parametrize("data", ["numpy", "torch"])
def test_extremes_when_every_component_is_empty(data):
    """torch 2.13 raises here (a padded tensor of width 0); we give what one empty component gives."""
    comps = [torch.zeros(0, 2, dtype=torch.int32)] * 2
    ours = ln.nested_tensor(comps if data == "torch" else [c.numpy() for c in comps])
    low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    assert np.asarray(ln.amax(ours, 1)).tolist() == [[low, low]] * 2
    assert np.asarray(ln.amin(ours, 1)).tolist() == [[high, high]] * 2
    values, indices = ln.max(ours, 1, keepdim=True)
    assert np.asarray(values).shape == (2, 1, 2) and np.asarray(indices).tolist() == [[[0, 0]]] * 2
    assert np.asarray(ln.argmin(ours, 1)).tolist() == [[0, 0]] * 2


def test_extreme_of_an_empty_component_has_torchs_gradient():
    comps = [torch.randn(3, 2), torch.zeros(0, 2), torch.randn(1, 2)]
    weights = torch.arange(6.0).reshape(3, 2)
    grads = []
    for make in (lambda: torch.nested.nested_tensor(comps, layout=torch.jagged, requires_grad=True),
                 lambda: ln.nested_tensor(comps, layout=torch.jagged, requires_grad=True)):
        nt = make()
        (torch.amax(nt, 1) * weights).sum().backward()
        grads.append([g.clone() for g in nt.grad.unbind()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [2, -1])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_min_with_ties_send_the_gradient_to_the_index_as_torch(kind, dim, keepdim):
    """``max``/``min`` over a regular dim: the gradient of the values reaches the one element the index names
    (torch's ``max(dim)``), not every tie (``amax`` shares it among them)."""
    parts = [torch.arange(n * 6.0).reshape(n, 2, 3) % 2 for n in (2, 1, 3)]  # (ties along both regular dims)
    grads = {}
    for name, mod in (("torch", torch.nested), ("ours", ln)):
        nt = mod.nested_tensor(parts, layout=torch.jagged if name == "torch" else "jagged", requires_grad=True)
        out = getattr(nt, kind)(dim=dim, keepdim=keepdim)
        sum((v * torch.arange(1.0, v.numel() + 1).reshape(v.shape)).sum() for v in out.values.unbind()).backward()
        grads[name] = [g.tolist() for g in nt.grad.unbind()]
    assert grads["ours"] == grads["torch"]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dim", [None, 1, -1])
@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all_of_uint8_give_uint8_as_torch(op, dim, lib):
    """torch keeps its old rule for uint8 data: ``any``/``all`` give uint8 0/1, not bool (NumPy data gave bool)."""
    x = np.array([[0, 3], [0, 0], [1, 255]], dtype=np.uint8)
    parts = [x[:1], x[1:]]
    theirs = getattr(torch.nested.nested_tensor([torch.from_numpy(p) for p in parts], layout=torch.jagged), op)(
        *(() if dim is None else (dim,)))
    nt = ln.nested_tensor(parts if lib == "numpy" else [torch.from_numpy(p) for p in parts])
    ours = getattr(ln, op)(nt, dim)
    want = [c.numpy() for c in theirs.unbind()] if theirs.is_nested else [theirs.numpy()]
    got = [np.asarray(c) for c in ours.unbind()] if hasattr(ours, "unbind") and isinstance(ours, ln.NestedTensor) else (
        [np.asarray(ours)])
    assert [g.dtype for g in got] == [w.dtype for w in want] == [np.dtype(np.uint8)] * len(want)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
