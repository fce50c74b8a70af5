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


def _flat(x):
    """A nested or dense result (ours or torch's) as a flat NumPy array plus its kind."""
    if isinstance(x, ln.NestedTensor):
        return np.concatenate([np.asarray(c.detach() if hasattr(c, "detach") else c).reshape(-1)
                               for c in x.unbind()] or [np.zeros(0)]), "nested"
    if isinstance(x, torch.Tensor):
        if x.is_nested:
            return x.values().detach().numpy().reshape(-1), "nested"
        return x.detach().numpy().reshape(-1), "dense"
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
    if op in ("max", "argmin"):  # torch 2.13's jagged kernel leaks its padding (finfo.min, index 0) for an
        with pytest.raises(ValueError, match="has size 0"):  # empty component; dense torch raises: so do we
            getattr(ln, op)(ours, 1)
        return
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
