"""A differential hunt of lodtensor.nested against torch 2.13's jagged layout (reductions, shape ops, views,
broadcasting pointwise ops, conversions, matmul): each case here disagreed with torch before its fix.

1. ``any``/``all`` over a tuple of dims (the batch and ragged dims, or regular dims) raised; torch reduces.
2. Errors torch raises as ``RuntimeError`` (``NotImplementedError`` for a kernel "not implemented for 'Long'")
   were plain ``TypeError``: ``mean`` of integers, ``argmax`` of bool, softmax/gelu/layer_norm of integers,
   bool subtraction, ``gcd`` of floats, a weight of another dtype in ``linear``/``layer_norm``/``matmul``.
   Now :class:`~lodtensor.errors.DTypeError` (TypeError, ValueError and RuntimeError).
3. ``view``/``reshape`` of a jagged tensor did not infer a -1 past the ragged dim (torch views ``values()``).
4. ``reshape_as`` returned the input's own buffer: for a leaf input, a leaf without ``grad_fn`` (``is_leaf``
   True); torch's is a view (not a leaf, a ``grad_fn``).
5. ``flatten(d, d)`` was a new view; torch returns the input itself.
6. ``clamp``/``clamp_min``/``clamp_max`` with a tensor bound split the gradient in half where the value equals
   the bound (``maximum``'s rule); torch's clamp passes it all to the input.
7. ``lerp`` with a dense (or 0-d tensor) weight raised "sub: expected at least one NestedTensor operand".
8. ``to(dtype)`` / ``half()`` / ``type()`` of a transposed view made it contiguous with a flat ``values()``;
   torch keeps the view's layout (and ``memory_format=torch.contiguous_format`` makes it contiguous).
9. ``matmul`` of a nested tensor with a dense ``(1, k, m)`` (or ``(1, 1, k, m)``) matrix raised, and so did a
   dense ``(D, E)`` / ``(B, D, E)`` times a transposed nested ``(B, E, j1)``; torch broadcasts / multiplies.
"""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LENGTHS = (2, 0, 3)


def _comps(tail=(4,), dtype=torch.float64, seed=0, lengths=LENGTHS):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, *tail, generator=g, dtype=torch.float64).to(dtype) for n in lengths]


def _pair(comps, requires_grad=False):
    """(ours on torch data, torch's jagged) over copies of the same components."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nested.nested_tensor([c.clone() for c in comps], layout=torch.jagged,
                                            requires_grad=requires_grad)
    ours = ln.nested_tensor([c.clone() for c in comps], layout="jagged", requires_grad=requires_grad)
    return ours, theirs


def _parts(x):
    if isinstance(x, ln.NestedTensor) or x.is_nested:
        return [c.detach() for c in x.unbind()]
    return [x.detach()]


def _same(ours, theirs):
    assert isinstance(ours, ln.NestedTensor) == theirs.is_nested
    a, b = _parts(ours), _parts(theirs)
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert p.shape == q.shape and p.dtype == q.dtype
        assert torch.allclose(p, q, equal_nan=True) if p.is_floating_point() else torch.equal(p, q)


def _weighted_sum(nt):
    """A scalar whose gradient differs per element (so a wrong gradient cannot hide)."""
    return sum((c * torch.arange(1, c.numel() + 1, dtype=c.dtype).reshape(c.shape)).sum() for c in nt.unbind())


# -- 1. any / all over several dims -----------------------------------------------------------------------
@pytest.mark.parametrize("op", ["any", "all"])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (0, 1, 3), (0, 1, 2, 3), (2, 3), (-1, -2)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float64])
def test_any_all_over_several_dims_as_torch(op, dims, keepdim, dtype):
    comps = _comps(tail=(3, 2), dtype=dtype)
    if dtype == torch.bool:
        comps[0][0, 0, 0] = not comps[0][0, 0, 0]  # both outcomes somewhere
    ours, theirs = _pair(comps)
    _same(getattr(torch, op)(ours, dims, keepdim=keepdim), getattr(torch, op)(theirs, dims, keepdim=keepdim))
    numpy_nt = ln.nested_tensor([c.numpy() for c in comps], layout="jagged")
    on_numpy = getattr(ln, op)(numpy_nt, dims, keepdim=keepdim)
    expected = _parts(getattr(torch, op)(theirs, dims, keepdim=keepdim))
    got = on_numpy.to_tensor_list() if isinstance(on_numpy, ln.NestedTensor) else [on_numpy]
    assert [np.asarray(g).tolist() for g in got] == [e.tolist() for e in expected]


def test_any_over_batch_and_a_regular_dim_still_refused_as_torch():
    ours, theirs = _pair(_comps(dtype=torch.bool))
    with pytest.raises(RuntimeError):
        torch.any(theirs, (0, 2))
    with pytest.raises(RuntimeError, match="ragged dim"):
        torch.any(ours, (0, 2))


# -- 2. error classes ---------------------------------------------------------------------------------
ERRORS = {
    "mean of int64": (torch.int64, lambda x: torch.mean(x, -1)),
    "argmax of bool": (torch.bool, lambda x: torch.argmax(x, -1)),
    "softmax of int64": (torch.int64, lambda x: torch.softmax(x, -1)),
    "log_softmax of bool": (torch.bool, lambda x: F.log_softmax(x, -1)),
    "gelu of int64": (torch.int64, F.gelu),
    "silu of bool": (torch.bool, F.silu),
    "layer_norm of int64": (torch.int64, lambda x: F.layer_norm(x, (4,))),
    "bool - bool": (torch.bool, lambda x: x - x),
    "bool - 1": (torch.bool, lambda x: x - 1),
    "gcd of floats": (torch.int64, lambda x: torch.gcd(x.float(), x.float())),
    "linear, float32 weight": (torch.float64, lambda x: F.linear(x, torch.ones(2, 4))),
    "layer_norm, float32 weight": (torch.float64, lambda x: F.layer_norm(x, (4,), torch.ones(4))),
    "matmul, float32 other": (torch.float64, lambda x: torch.matmul(x, x.float().transpose(1, 2))),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_dtype_refusals_are_runtime_errors_as_torch(name):
    dtype, call = ERRORS[name]
    ours, theirs = _pair(_comps(dtype=dtype))
    with pytest.raises(RuntimeError) as expected:
        call(theirs)
    with pytest.raises(RuntimeError) as got:
        call(ours)
    assert isinstance(got.value, TypeError)  # (still what it was: code catching TypeError keeps working)
    if "not implemented for '" in str(expected.value):  # torch's key phrase, with its C type name
        phrase = str(expected.value).split("not implemented for ")[1][:8]
        assert f"not implemented for {phrase}" in str(got.value)


# -- 3. view / reshape with -1 past the ragged dim ----------------------------------------------------------
@pytest.mark.parametrize("method", ["view", "reshape"])
@pytest.mark.parametrize("tail, shape", [
    ((3, 2), (3, -1, -1)),
    ((3, 2), (3, -1, 2, -1)),
    ((3, 2), (3, -1, 1, -1)),
    ((3, 2), (-1, -1, -1)),
    ((4,), (3, -1, 2, -1)),
    ((), (3, -1, -1)),
    ((3, 2), (3, -1, 6)),  # (these already agreed: kept)
    ((3, 2), (3, -1, -1, 2)),
])
def test_view_infers_minus_one_past_the_ragged_dim_as_torch(method, tail, shape):
    ours, theirs = _pair(_comps(tail=tail))
    got, expected = getattr(ours, method)(*shape), getattr(theirs, method)(*shape)
    _same(got, expected)
    assert [int(s) for s in got.shape[2:]] == list(expected.shape[2:])


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 3), min_size=1, max_size=4), tail=st.sampled_from([(6,), (2, 3), (3, 2, 2)]),
       split=st.sampled_from([(-1,), (2, -1), (-1, 3), (1, -1, 2), (3, -1), (2, 2, -1), (-1, 1)]),
       method=st.sampled_from(["view", "reshape"]))
def test_view_with_one_inferred_row_dim_matches_torch(lengths, tail, split, method):
    """Any split of the row with one -1 in it: torch's result or torch's refusal (a RuntimeError), on ours too.
    (Not of no rows at all: torch's dense view of an empty ``values()`` finds the -1 ambiguous; ours keeps the row.)"""
    assume(sum(lengths) > 0)
    ours, theirs = _pair(_comps(tail=tail, lengths=lengths))
    shape = (len(lengths), -1, *split)
    try:
        expected = getattr(theirs, method)(*shape)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(ours, method)(*shape)
        return
    _same(getattr(ours, method)(*shape), expected)


def test_view_still_refuses_what_cannot_be_inferred():
    ours, _ = _pair(_comps(tail=(3, 2)))
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        ours.view(3, -1, 4, -1)  # 6 elements per row are not a multiple of 4


# -- 4. reshape_as is a view --------------------------------------------------------------------------------
def _reshape_as_flags(lib):
    nt = lib.nested_tensor(_comps(), layout=torch.jagged)
    before = nt.reshape_as(nt)
    nt.requires_grad_()
    leaf = lib.nested_tensor(_comps(), layout=torch.jagged, requires_grad=True)
    view = leaf.reshape_as(leaf)
    return before.requires_grad, view.is_leaf, view.requires_grad, view.grad_fn is None


def test_reshape_as_is_a_view_with_torch_autograd_flags():
    assert _reshape_as_flags(ln) == _reshape_as_flags(torch.nested) == (False, False, True, False)


def test_reshape_as_passes_the_gradient_and_refuses_an_inplace_write_as_torch():
    ours = ln.nested_tensor(_comps(tail=(4,)), layout="jagged", requires_grad=True)
    other = ln.nested_tensor(_comps(tail=(2, 2)), layout="jagged")
    view = ours.reshape_as(other)
    with pytest.raises(RuntimeError, match="leaf"):
        view.mul_(2)
    _weighted_sum(view).backward()
    assert [g.tolist() for g in ours.grad.unbind()] == [
        torch.arange(1, c.numel() + 1, dtype=c.dtype).reshape(c.shape).tolist() for c in _comps(tail=(4,))]


# -- 5. flatten of one dim ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dims", [(2, 2), (-1, -1), (3, 3)])
def test_flatten_of_one_dim_is_the_input_as_torch(dims):
    ours, theirs = _pair(_comps(tail=(3, 2)), requires_grad=True)
    assert theirs.flatten(*dims) is theirs
    assert ours.flatten(*dims) is ours


# -- 6. clamp's gradient where a value equals a tensor bound ------------------------------------------------
BOUND = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)
TIES = [torch.tensor([[0.0, 1.0, -1.0], [2.0, 0.0, 3.0]], dtype=torch.float64),
        torch.tensor([[0.0, 0.5, 1.0]], dtype=torch.float64)]
CLAMPS = {
    "clamp min=[D]": lambda x, b: torch.clamp(x, min=b),
    "clamp max=[D]": lambda x, b: torch.clamp(x, max=b),
    "clamp both": lambda x, b: torch.clamp(x, b, b + 1),
    "clamp_min": torch.clamp_min,
    "clamp_max": torch.clamp_max,
    "Tensor.clamp min=[B,1,D]": lambda x, b: x.clamp(min=b.expand(2, 1, 3)),
    "clamp min=nested": lambda x, b: torch.clamp(x, min=x * 0 + 0.5),
}
DENSE = {  # the per-component dense call where it is not the same as the nested one
    "Tensor.clamp min=[B,1,D]": lambda c, b: c.clamp(min=b),  # (every component's row of the bound is b)
    "clamp min=nested": lambda c, b: torch.clamp(c, min=c * 0 + 0.5),
}


@pytest.mark.parametrize("name", list(CLAMPS))
def test_clamp_with_a_tensor_bound_passes_ties_gradient_to_input_as_dense_torch(name):
    fn = CLAMPS[name]
    ours = ln.nested_tensor([c.clone() for c in TIES], layout="jagged", requires_grad=True)
    bound = BOUND.clone().requires_grad_()
    out = fn(ours, bound)
    _weighted_sum(out).backward()
    for i, (comp, got, grad) in enumerate(zip(TIES, out.unbind(), ours.grad.unbind())):  # dense torch, per component
        c = comp.clone().requires_grad_()
        ref = DENSE.get(name, fn)(c, bound)
        (ref * torch.arange(1, ref.numel() + 1, dtype=ref.dtype).reshape(ref.shape)).sum().backward()
        assert torch.equal(got.detach(), ref.detach())
        assert torch.equal(grad, c.grad), (i, grad, c.grad)


def test_clamp_with_a_tensor_bound_on_numpy_data_keeps_values_and_dtype():
    comps = [c.numpy() for c in _comps()]
    comps[0][0, 0] = np.nan
    nt = ln.nested_tensor(comps, layout="jagged")
    bound = np.array([np.nan, 0.0, 1.0, -1.0], np.float32)
    for kw in ({"min": bound}, {"max": bound}):
        got = ln.clamp(nt, **kw)
        for a, c in zip(got.to_tensor_list(), comps):
            ref = torch.clamp(torch.from_numpy(c), **{k: torch.from_numpy(v) for k, v in kw.items()})
            assert a.dtype == np.float64
            np.testing.assert_array_equal(a, ref.numpy())
    ints = ln.nested_tensor([np.array([[1, 5]]), np.array([[-3, 0]])], layout="jagged")
    assert ln.clamp(ints, min=np.array([1.5, 0.0], np.float32)).dtype == np.float32  # as torch.clamp


# -- 7. lerp with a dense weight ----------------------------------------------------------------------------
@pytest.mark.parametrize("weight", [torch.tensor(0.3, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64),
                                    torch.linspace(0.1, 0.9, 4, dtype=torch.float64)])
@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_lerp_with_a_dense_weight_as_dense_torch(weight, lib):
    comps = _comps()
    if lib == "torch":
        nt = ln.nested_tensor([c.clone() for c in comps], layout="jagged", requires_grad=True)
        out = torch.lerp(nt, nt * 0 + 1, weight)
    else:
        nt = ln.nested_tensor([c.numpy() for c in comps], layout="jagged")
        out = ln.lerp(nt, nt * 0 + 1, weight.numpy())
    for got, c in zip(out.to_tensor_list(), comps):
        ref = torch.lerp(c, torch.ones_like(c), weight)
        np.testing.assert_allclose(np.asarray(got.detach() if lib == "torch" else got), ref.numpy(), rtol=1e-12)
    if lib == "torch":
        _weighted_sum(out).backward()
        assert torch.allclose(nt.grad.unbind()[0][0], (1 - weight) * torch.arange(1.0, 5.0, dtype=torch.float64))


# -- 8. to() of a transposed view keeps its layout ----------------------------------------------------------
CASTS = {
    "to(float32)": lambda x: x.to(torch.float32),
    "half()": lambda x: x.half(),
    "type(float32)": lambda x: x.type(torch.float32),
    "to(cpu, float32)": lambda x: x.to("cpu", torch.float32),
    "to(float32, contiguous_format)": lambda x: x.to(torch.float32, memory_format=torch.contiguous_format),
    "to(float64, contiguous_format)": lambda x: x.to(torch.float64, memory_format=torch.contiguous_format),
}


@pytest.mark.parametrize("name", list(CASTS))
def test_cast_of_a_transposed_view_keeps_its_layout_as_torch(name):
    ours, theirs = _pair(_comps(), requires_grad=True)
    got, expected = CASTS[name](ours.transpose(1, 2)), CASTS[name](theirs.transpose(1, 2))
    _same(got, expected)
    assert got.is_contiguous() == expected.is_contiguous()
    if "contiguous" not in name:  # (a contiguous transposed tensor: torch's values() are (D, sum(j)), ours flat)
        assert tuple(got.values().shape) == tuple(expected.values().shape)
        assert got.values().stride() == expected.values().stride()
    _weighted_sum(got).backward()
    _weighted_sum(expected).backward()
    _same(ours.grad, theirs.grad)


# -- 9. matmul with a broadcast dense batch, dense @ nested ---------------------------------------------------
G = torch.Generator().manual_seed(3)
MATMULS = {
    "(B, j, 4) @ (1, 4, 5)": ((4,), torch.matmul, (1, 4, 5)),
    "(B, j, 2, 4) @ (1, 1, 4, 5)": ((2, 4), torch.matmul, (1, 1, 4, 5)),
    "(B, j, 4) @ (3, 4, 5)": ((4,), torch.matmul, (3, 4, 5)),  # (already agreed: kept)
    "(5, 4) @ (B, 4, j)": ((4,), lambda x, m: torch.matmul(m, x.transpose(1, 2)), (5, 4)),
    "(B, 5, 4) @ (B, 4, j)": ((4,), lambda x, m: torch.matmul(m, x.transpose(1, 2)), (3, 5, 4)),
    "(1, 5, 4) @ (B, 4, j)": ((4,), lambda x, m: torch.matmul(m, x.transpose(1, 2)), (1, 5, 4)),
}


@pytest.mark.parametrize("name", list(MATMULS))
def test_matmul_with_dense_operands_as_torch(name):
    tail, fn, mshape = MATMULS[name]
    m = torch.randn(*mshape, generator=G, dtype=torch.float64)
    ours, theirs = _pair(_comps(tail=tail), requires_grad=True)
    m_ours, m_theirs = m.clone().requires_grad_(), m.clone().requires_grad_()
    got, expected = fn(ours, m_ours), fn(theirs, m_theirs)
    _same(got, expected)
    _weighted_sum(got).backward()
    _weighted_sum(expected).backward()
    _same(ours.grad, theirs.grad)
    assert torch.allclose(m_ours.grad, m_theirs.grad)


def test_dense_at_nested_on_numpy_data():
    comps = [c.numpy() for c in _comps()]
    nt = ln.nested_tensor(comps, layout="jagged")
    m = np.arange(8.0).reshape(2, 4)
    got = ln.matmul(m, nt.transpose(1, 2)).to_tensor_list()
    for g, c in zip(got, comps):
        np.testing.assert_allclose(g, m @ c.T)
    got = ln.matmul(nt, m.T.reshape(1, 4, 2)).to_tensor_list()
    for g, c in zip(got, comps):
        np.testing.assert_allclose(g, c @ m.T)


def test_dense_at_nested_with_the_ragged_dim_first_still_refused():
    ours, _ = _pair(_comps())
    with pytest.raises(ValueError, match="ragged dim last"):
        torch.matmul(torch.ones(5, 2, dtype=torch.float64), ours)
