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
    grads = {}
    for lib in ("torch", "ours"):
        base = _base(4).requires_grad_()
        s, n = torch.tensor(START), torch.tensor(LENGTH)
        nt = (torch.nested.narrow(base, 1, s, n, layout=torch.jagged) if lib == "torch"
              else ln.narrow(base, 1, s, n, layout="jagged"))
        y = torch.where(nt > 0, nt.sin() * 2 + nt, nt * nt)
        assert y.values().requires_grad
        loss = sum((c * torch.arange(c.numel(), dtype=c.dtype).reshape(c.shape)).sum() for c in y.unbind())
        loss.backward()
        grads[lib] = base.grad
    torch.testing.assert_close(grads["ours"], grads["torch"], rtol=1e-12, atol=1e-12)


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
