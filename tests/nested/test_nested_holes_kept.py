"""Nested tensors with holes (torch's jagged ``offsets`` plus ``lengths``: ``narrow`` of a dense tensor,
``nested_tensor_from_jagged``) against torch 2.13: elementwise ops and ``clone`` compute over all of ``values`` and
keep the holes (``values()``, ``offsets()``, ``lengths()`` and the components as torch's); in-place ops write into
``values`` (the caller's tensor, as torch's view does), the holes too for elementwise ops, ``fill_``, ``zero_`` and
``copy_``; values that are a leaf requiring grad are refused before anything is written; gradients reach the base
as torch's. Ops torch refuses with holes (a dense operand per component, a tensor of another structure) compute on
the components and give no holes. NumPy data likewise (``lodtensor/nested/_holes.py``)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402

START, LENGTH = [0, 1, 2], [2, 3, 1]


def _base(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, 4, 2, generator=g, dtype=torch.float64)


def _pair(base):
    """torch's and ours, each over its own copy of ``base`` (returned with them)."""
    theirs_base, ours_base = base.clone(), base.clone()
    s, n = torch.tensor(START), torch.tensor(LENGTH)
    return (torch.nested.narrow(theirs_base, 1, s, n, layout=torch.jagged), theirs_base,
            ln.narrow(ours_base, 1, s, n, layout="jagged"), ours_base)


def _base_grads(seed, loss_of):
    """The gradient of ``loss_of(nt)`` with respect to the base, for torch's tensor with holes and ours."""
    grads = {}
    for lib in ("torch", "ours"):
        base = _base(seed).requires_grad_()
        s, n = torch.tensor(START), torch.tensor(LENGTH)
        nt = (torch.nested.narrow(base, 1, s, n, layout=torch.jagged) if lib == "torch"
              else ln.narrow(base, 1, s, n, layout="jagged"))
        loss_of(nt).backward()
        grads[lib] = base.grad
    return grads["ours"], grads["torch"]


def _same(ours, theirs):
    assert ours.lengths() is not None, "the holes were dropped"
    assert ours.lengths().tolist() == theirs.lengths().tolist()
    assert ours.offsets().tolist() == theirs.offsets().tolist()
    torch.testing.assert_close(ours.values(), theirs.values(), rtol=0, atol=0, equal_nan=True)
    got, want = ours.unbind(), theirs.unbind()
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


OUT_OF_PLACE = {
    "sin": lambda x: x.sin(),
    "neg": lambda x: -x,
    "relu": torch.relu,
    "exp": torch.exp,
    "abs": torch.abs,
    "sigmoid": torch.sigmoid,
    "plus scalar": lambda x: x + 1.5,
    "scalar minus": lambda x: 2.0 - x,
    "times itself": lambda x: x * x,
    "add alpha": lambda x: torch.add(x, x, alpha=2),
    "pow": lambda x: x**2,
    "times a row": lambda x: x * torch.tensor([1.0, -2.0], dtype=torch.float64),
    "div": lambda x: x / 3,
    "compare": lambda x: x > 0,
    "where": lambda x: torch.where(x > 0, x, 0.0),
    "clamp": lambda x: x.clamp(min=-0.5, max=0.5),
    "clone": lambda x: x.clone(),
    "chained": lambda x: (x.sin() * 2 + x).relu(),
}


@pytest.mark.parametrize("op", list(OUT_OF_PLACE))
def test_elementwise_ops_keep_the_holes_as_torch(op):
    theirs, _, ours, ours_base = _pair(_base())
    before = ours_base.clone()
    _same(OUT_OF_PLACE[op](ours), OUT_OF_PLACE[op](theirs))
    assert torch.equal(ours_base, before)  # out of place: the values untouched


IN_PLACE = {
    "add_": lambda x: x.add_(1),
    "mul_": lambda x: x.mul_(-2),
    "sin_": lambda x: x.sin_(),
    "zero_": lambda x: x.zero_(),
    "fill_": lambda x: x.fill_(3.0),
    "copy_ of the same holes": lambda x: x.copy_(x * 0 + 5),
    "clamp_": lambda x: x.clamp_(min=0.0),
    "relu_": torch.relu_,
}


@pytest.mark.parametrize("op", list(IN_PLACE))
def test_in_place_ops_write_into_the_values_as_torch(op):
    """torch's tensor with holes is a view of its values: an in-place op writes there, the holes too."""
    theirs, theirs_base, ours, ours_base = _pair(_base(1))
    assert IN_PLACE[op](ours) is ours
    IN_PLACE[op](theirs)
    torch.testing.assert_close(ours_base, theirs_base, rtol=0, atol=0)
    _same(ours, theirs)


def test_other_in_place_writes_reach_the_components_rows_of_the_values():
    """An in-place op without a torch counterpart here (``masked_fill_``, ``index_put_``) writes the components
    back into their rows of the values: ``values()``, the caller's tensor and ``unbind()`` agree."""
    _, _, ours, base = _pair(_base(2))
    holes = base.reshape(12, 2).clone()
    ours.masked_fill_(ours > 0, 9.0)
    ours.index_put_((torch.tensor([1]), torch.tensor([0])), torch.tensor([-7.0, -8.0], dtype=torch.float64))
    rows = [range(0, 2), range(5, 8), range(10, 11)]
    flat = base.reshape(12, 2)
    for component, span in zip(ours.unbind(), rows):
        torch.testing.assert_close(flat[list(span)], component, rtol=0, atol=0)
    assert torch.equal(flat[1, :].new_tensor([-7.0, -8.0]), flat[5])
    hole_rows = [r for r in range(12) if not any(r in span for span in rows)]
    torch.testing.assert_close(flat[hole_rows], holes[hole_rows], rtol=0, atol=0)  # the holes as they were
    assert ours.values() is not None and torch.equal(ours.values(), flat)


def test_values_that_are_a_leaf_requiring_grad_refuse_in_place_ops_before_writing():
    theirs_base, ours_base = _base(3).requires_grad_(), _base(3).requires_grad_()
    s, n = torch.tensor(START), torch.tensor(LENGTH)
    theirs = torch.nested.narrow(theirs_base, 1, s, n, layout=torch.jagged)
    ours = ln.narrow(ours_base, 1, s, n, layout="jagged")
    components = [c.detach().clone() for c in ours.unbind()]
    for op in ("add_", "fill_", "copy_ of the same holes", "sin_"):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            IN_PLACE[op](theirs)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            IN_PLACE[op](ours)
        for got, want in zip(ours.unbind(), components):  # nothing written, in the copy or the values
            assert torch.equal(got.detach(), want)
        assert torch.equal(ours_base.detach(), _base(3))
    with torch.no_grad():  # (no autograd recording: the write goes through, as torch's)
        ours.add_(1)
        theirs.add_(1)
    torch.testing.assert_close(ours_base.detach(), theirs_base.detach(), rtol=0, atol=0)
    _same(ours.detach(), theirs.detach())


def test_gradients_through_ops_with_holes_reach_the_base_as_torch():
    def loss_of(nt):
        y = torch.where(nt > 0, nt.sin() * 2 + nt, nt * nt)
        assert y.values().requires_grad
        return sum((c * torch.arange(c.numel(), dtype=c.dtype).reshape(c.shape)).sum() for c in y.unbind())

    ours, theirs = _base_grads(4, loss_of)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_from_jagged_with_lengths_keeps_the_holes_through_ops_and_writes():
    values = torch.arange(20.0, dtype=torch.float64).reshape(10, 2)
    offsets, lengths = torch.tensor([0, 2, 5, 9]), torch.tensor([1, 3, 0])
    theirs = torch.nested.nested_tensor_from_jagged(values.clone(), offsets, lengths=lengths)
    ours_values = values.clone()
    ours = ln.nested_tensor_from_jagged(ours_values, offsets, lengths=lengths)
    _same(ours.cos() - 1, theirs.cos() - 1)
    ours.mul_(3)
    theirs.mul_(3)
    _same(ours, theirs)
    torch.testing.assert_close(ours_values, theirs.values(), rtol=0, atol=0)


def test_ops_torch_refuses_with_holes_give_components_without_holes():
    """A dense operand per component ``(B, 1, D)`` (torch: "final offset should match"), or a tensor of the
    same components without holes (torch: another ragged structure): computed on the components alone."""
    theirs, _, ours, _ = _pair(_base(5))
    per_component = torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]], [[5.0, 6.0]]], dtype=torch.float64)
    with pytest.raises(RuntimeError):
        theirs * per_component
    got = ours * per_component
    assert got.lengths() is None
    for a, b, w in zip(got.unbind(), ours.unbind(), per_component):
        torch.testing.assert_close(a, b * w, rtol=0, atol=0)
    compact = ours.contiguous()
    with pytest.raises(RuntimeError):
        theirs + theirs.contiguous()
    summed = ours + compact
    assert summed.lengths() is None
    for a, b in zip(summed.unbind(), ours.unbind()):
        torch.testing.assert_close(a, b * 2, rtol=0, atol=0)


def test_numpy_values_keep_the_holes_and_take_the_writes():
    base = np.arange(24.0).reshape(3, 4, 2)
    nt = ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")
    doubled = nt * 2
    assert doubled.lengths().tolist() == LENGTH and doubled.values().shape == (12, 2)
    np.testing.assert_array_equal(doubled.values(), base.reshape(12, 2) * 2)
    np.testing.assert_array_equal(doubled.unbind()[1], base[1, 1:4] * 2)
    nt.add_(1)
    np.testing.assert_array_equal(base.reshape(-1), np.arange(24.0) + 1)  # every row, as torch's
    np.testing.assert_array_equal(nt.unbind()[2], base[2, 2:3])


F = torch.nn.functional

INPLACE_TRUE = {
    "relu": lambda x: F.relu(x, inplace=True),
    "relu6": lambda x: F.relu6(x, inplace=True),
    "hardtanh": lambda x: F.hardtanh(x, -0.3, 0.4, inplace=True),
    "elu": lambda x: F.elu(x, alpha=0.5, inplace=True),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2, inplace=True),
    "silu": lambda x: F.silu(x, inplace=True),
    "selu": lambda x: F.selu(x, inplace=True),
    "celu": lambda x: F.celu(x, inplace=True),
    "hardsigmoid": lambda x: F.hardsigmoid(x, inplace=True),
}


@pytest.mark.parametrize("op", list(INPLACE_TRUE))
def test_activations_with_inplace_true_write_every_row_of_the_values_as_torch(op):
    """``F.<activation>(nt, inplace=True)`` is an in-place elementwise op: every row of the values, the holes
    too, as ``nt.relu_()`` (before: the components' rows alone)."""
    theirs, theirs_base, ours, ours_base = _pair(_base(6))
    assert INPLACE_TRUE[op](ours) is ours
    INPLACE_TRUE[op](theirs)
    torch.testing.assert_close(ours_base, theirs_base, rtol=1e-15, atol=1e-15)
    _same(ours, theirs)


def test_activations_with_inplace_true_on_a_copy_give_torch_s_gradients():
    def loss_of(nt):
        y = F.relu(F.elu(nt.clone(), alpha=0.5, inplace=True) - 0.1, inplace=True)
        return (y.values() * torch.arange(24, dtype=y.dtype).reshape(12, 2)).sum()

    ours, theirs = _base_grads(7, loss_of)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


CASTS = {
    "to(float32)": lambda x: x.to(torch.float32),
    "float()": lambda x: x.float(),
    "long()": lambda x: x.long(),
    "bool()": lambda x: x.bool(),
    "half()": lambda x: x.half(),
    "type(float32)": lambda x: x.type(torch.float32),
    "type_as": lambda x: x.type_as(torch.zeros(1, dtype=torch.int32)),
    "to(another nested tensor)": lambda x: x.to(x.float()),
    "to(cpu, float32)": lambda x: x.to("cpu", torch.float32),
    "to(float32, contiguous_format)": lambda x: x.to(torch.float32, memory_format=torch.contiguous_format),
    "to(float64, copy=True)": lambda x: x.to(torch.float64, copy=True),
}


@pytest.mark.parametrize("cast", list(CASTS))
def test_casts_keep_the_holes_as_torch(cast):
    """``to(dtype)`` and the casts convert all of the values and keep the holes, as torch's (before: a compact
    copy of the components without holes); the result is a copy, the values untouched by writes into it."""
    theirs, _, ours, ours_base = _pair(_base(8))
    got, expected = CASTS[cast](ours), CASTS[cast](theirs)
    _same(got, expected)
    assert got.dtype == expected.dtype and got.is_contiguous() == expected.is_contiguous()
    before = ours_base.clone()
    got.zero_()
    assert torch.equal(ours_base, before)
    assert ours.to(torch.float64) is ours  # (nothing to change: itself, as torch's)


def test_a_cast_with_holes_gives_torch_s_gradients():
    def loss_of(nt):
        y = (nt.float() * 3).double()
        assert y.lengths() is not None
        return (y.values() * torch.arange(24, dtype=y.dtype).reshape(12, 2)).sum()

    ours, theirs = _base_grads(9, loss_of)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


EDGES = {  # (values, offsets, lengths), offsets and lengths given as lists, NumPy arrays or torch tensors
    "a zero-length component": ((10, 2), [0, 2, 5, 9], np.array([0, 3, 0])),
    "every component empty": ((10, 2), torch.tensor([0, 2, 5, 9]), [0, 0, 0]),
    "1-d components": ((10,), np.array([0, 2, 5, 9]), torch.tensor([1, 3, 1])),
    "3-d components": ((10, 2, 3), [0, 2, 5, 9], [1, 3, 1]),
    "one component": ((10, 2), [2, 9], [3]),
    "values with rows past the last offset": ((12, 2), [0, 2, 5, 9], [1, 3, 1]),
}


@pytest.mark.parametrize("edge", list(EDGES))
def test_edge_shapes_keep_the_holes_through_casts_and_inplace_activations(edge):
    shape, offsets, lengths = EDGES[edge]
    values = torch.randn(*shape, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    theirs_values, ours_values = values.clone(), values.clone()
    theirs = torch.nested.nested_tensor_from_jagged(theirs_values, torch.as_tensor(offsets),
                                                     lengths=torch.as_tensor(lengths))
    ours = ln.nested_tensor_from_jagged(ours_values, offsets, lengths=lengths)
    for fn in (lambda x: x.float(), lambda x: (x > 0).long(), lambda x: x.sin() * 2):
        _same(fn(ours), fn(theirs))
    F.relu(ours, inplace=True).mul_(3)
    F.relu(theirs, inplace=True).mul_(3)
    torch.testing.assert_close(ours_values, theirs_values, rtol=0, atol=0)
    _same(ours, theirs)


def test_numpy_values_cast_and_inplace_activation_keep_the_holes():
    base = np.arange(24.0).reshape(3, 4, 2) - 12
    nt = ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")
    cast = nt.to(np.float32)
    assert cast.dtype == np.float32 and cast.lengths().tolist() == LENGTH and cast.values().shape == (12, 2)
    np.testing.assert_array_equal(cast.values(), base.reshape(12, 2).astype(np.float32))
    ln.relu(nt, inplace=True)
    np.testing.assert_array_equal(base.reshape(-1), np.maximum(np.arange(24.0) - 12, 0))  # every row
    np.testing.assert_array_equal(nt.unbind()[1], base[1, 1:4])


def test_numpy_ufunc_out_writes_the_components_rows_into_the_values():
    """``np.<ufunc>(..., out=nt)`` writes ``nt``'s components, then their rows of the values as any other
    write (before: ``unbind()`` changed, ``values()`` and the caller's array stale); read-only values are
    refused before anything is written."""
    original = np.arange(24.0).reshape(3, 4, 2)
    base = original.copy()
    nt = ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")
    quotient = ln.narrow(np.zeros((3, 4, 2)), 1, np.array(START), np.array(LENGTH), layout="jagged")
    np.multiply(nt, 2, out=nt)
    np.divmod(nt, 4, out=(quotient, None))
    expected = original.copy()
    for i, (start, length) in enumerate(zip(START, LENGTH)):
        expected[i, start:start + length] *= 2
        np.testing.assert_array_equal(nt.unbind()[i], expected[i, start:start + length])
        np.testing.assert_array_equal(quotient.values().reshape(3, 4, 2)[i, start:start + length],
                                      expected[i, start:start + length] // 4)
    np.testing.assert_array_equal(base, expected)  # the components' rows written, the holes as they were
    assert nt.values() is not None and np.shares_memory(nt.values(), base)
    frozen = np.broadcast_to(np.arange(2.0), (10, 2))
    read_only = ln.nested_tensor_from_jagged(frozen, np.array([0, 2, 5, 9]), lengths=np.array([1, 3, 1]))
    with pytest.raises(ValueError, match="read-only"):
        np.multiply(read_only, 2, out=read_only)
    for component in read_only.unbind():
        np.testing.assert_array_equal(component, np.broadcast_to(np.arange(2.0), component.shape))


def _over_last(name):
    return lambda x: getattr(torch, name)(x, dim=-1)


ROW_DIM_OPS = {
    **{f"{name}(-1)": _over_last(name) for name in ("sum", "mean", "prod", "amax", "amin", "argmax", "argmin")},
    "any(-1)": lambda x: torch.any(x > 0, dim=-1),
    "sum(-1, keepdim)": lambda x: x.sum(-1, keepdim=True),
    "sum(2)": lambda x: x.sum(2),
    "sum((2, 3))": lambda x: x.sum((2, 3)),
    "softmax(-1)": lambda x: x.softmax(-1),
    "log_softmax(2)": lambda x: x.log_softmax(2),
    "softmin(-1)": lambda x: torch.nn.functional.softmin(x, -1),
    "layer_norm((3,))": lambda x: torch.nn.functional.layer_norm(x, (3,)),
    "layer_norm((2, 3)) with weight": lambda x: torch.nn.functional.layer_norm(
        x, (2, 3), torch.full((2, 3), 2.0, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64)),
    "matmul by a matrix": lambda x: x @ torch.arange(15.0, dtype=torch.float64).reshape(3, 5) / 7,
    "transposed, matmul by a matrix": lambda x: x.transpose(1, 2) @ torch.ones(3, 2, dtype=torch.float64),
}


@pytest.mark.parametrize("op", list(ROW_DIM_OPS))
def test_reductions_and_normalisations_over_row_dims_keep_the_holes_as_torch(op):
    """Over the row dims alone (not the ragged dim), torch's jagged layout computes over all of values and keeps
    the holes: so do these (``_holes.over_row_dims``)."""
    base = torch.randn(3, 4, 2, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    s, n = torch.tensor(START), torch.tensor(LENGTH)
    theirs = ROW_DIM_OPS[op](torch.nested.narrow(base, 1, s, n, layout=torch.jagged))
    ours = ROW_DIM_OPS[op](ln.narrow(base, 1, s, n, layout="jagged"))
    assert ours.lengths() is not None and ours.lengths().tolist() == theirs.lengths().tolist()
    assert ours.dtype == theirs.dtype and tuple(ours.values().shape) == tuple(theirs.values().shape)
    torch.testing.assert_close(ours.values(), theirs.values(), rtol=1e-12, atol=1e-12)
    for a, b in zip(ours.unbind(), theirs.unbind()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_reductions_over_the_ragged_dim_compute_on_the_components():
    """Over the ragged dim (torch: "not supported for non-contiguous nested tensors") the components alone."""
    base = _base(7)
    s, n = torch.tensor(START), torch.tensor(LENGTH)
    with pytest.raises(RuntimeError):
        torch.nested.narrow(base, 1, s, n, layout=torch.jagged).sum(1)
    ours = ln.narrow(base, 1, s, n, layout="jagged")
    want = torch.stack([base[i, START[i] : START[i] + LENGTH[i]].sum(0) for i in range(3)])
    torch.testing.assert_close(ours.sum(1), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours.softmax(1).unbind()[1], base[1, 1:4].softmax(0), rtol=1e-12, atol=1e-12)
    assert ours.softmax(1).lengths() is None


def test_the_rows_index_is_made_once_per_offsets_and_not_reused_for_others(monkeypatch):
    """A tensor with holes gathers its components' rows (an op's result: on the first read that needs them) by
    an index made once per (offsets, lengths) and device (``_holes._index``): a chain of ops makes it once;
    another tensor's holes get their own."""
    from lodtensor.nested import _holes  # noqa: PLC0415

    made = []
    real = _holes.rows_of
    monkeypatch.setattr(_holes, "rows_of", lambda *a: made.append(1) or real(*a))
    monkeypatch.setattr(_holes, "_INDEX", {})
    _, _, ours, base = _pair(_base(8))
    out = ((ours * 2).sin() + ours).relu()
    ours.add_(1)
    assert len(made) == 1
    other = ln.narrow(base, 1, torch.tensor([1, 0, 0]), torch.tensor([1, 1, 4]), layout="jagged")  # other holes
    assert len(made) == 1  # (construction gathers by its own index: from_jagged's)
    doubled = other * 2
    assert len(made) == 1  # (its buffer not gathered yet: the op ran over the values)
    doubled.sum(dim=1)
    assert len(made) == 2
    for a, b in zip(doubled.unbind(), other.unbind()):
        torch.testing.assert_close(a, b * 2, rtol=0, atol=0)
    for a, b in zip(out.unbind(), ours.unbind()):
        torch.testing.assert_close(a, ((b - 1) * 2).sin().add(b - 1).relu(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_min_over_a_row_dim_keep_the_holes(kind, keepdim):
    """``max``/``min`` with a row dim give ``(values, indices)``, both with the holes, as torch's."""
    theirs, _, ours, _ = _pair(_base(11))
    got, want = getattr(ours, kind)(dim=-1, keepdim=keepdim), getattr(theirs, kind)(dim=-1, keepdim=keepdim)
    _same(got.values, want.values)
    _same(got.indices, want.indices)
