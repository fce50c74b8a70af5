"""``view()`` of a transposed nested tensor to another shape: a view of its storage (dims merged, split, of size 1
added or dropped) where the storage can give one, else torch's "view size is not compatible" error; never a
silent copy (``_shape._reshaped``, ``_dims.regrouped_view``, ``_permute.view_plans``). torch 2.13's jagged
layout views a transposed tensor only to its own shape where the ragged dim moved, and views or refuses by
strides otherwise: checked against it where it answers, against NumPy's no-copy reshape of each component
elsewhere."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln
from lodtensor.errors import ShapeError

torch = pytest.importorskip("torch")

_INCOMPATIBLE = "view size is not compatible with input tensor's size and stride"


def _pair(seed=0):
    g = torch.Generator().manual_seed(seed)
    parts = [torch.randn(n, 4, 6, generator=g, dtype=torch.float64) for n in (2, 3)]
    return ln.nested_tensor([p.clone() for p in parts], layout="jagged"), torch.nested.nested_tensor(
        [p.clone() for p in parts], layout=torch.jagged)


@pytest.mark.parametrize("shape", [(2, -1, 6, 2, 2), (2, -1, 3, 2, 4), (2, -1, 1, 6, 4), (2, -1, 6, 4, 1)])
def test_a_view_torch_gives_is_a_view_here_with_its_components(shape):
    ours, theirs = _pair()
    got, want = ours.transpose(2, 3).view(*shape), theirs.transpose(2, 3).view(*shape)
    for a, b in zip(got.unbind(), want.unbind()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    got.mul_(0)
    want.mul_(0)
    torch.testing.assert_close(ours.values(), theirs.values(), rtol=0, atol=0)
    assert float(ours.values().abs().sum()) == 0.0


@pytest.mark.parametrize("shape", [(2, -1, 24), (2, -1, 3, 8), (2, -1, 12, 2)])
def test_a_view_neither_storage_can_give_raises_torch_error(shape):
    ours, theirs = _pair()
    with pytest.raises(RuntimeError, match=_INCOMPATIBLE):
        theirs.transpose(2, 3).view(*shape)
    before = ours.values().clone()
    with pytest.raises(ShapeError, match=_INCOMPATIBLE):
        ours.transpose(2, 3).view(*shape)
    torch.testing.assert_close(ours.values(), before, rtol=0, atol=0)
    assert ours.transpose(2, 3).reshape(*shape).shape[2] == shape[2]  # (reshape copies, as torch's)


@pytest.mark.parametrize("shape", [(2, 4, -1, 3, 2), (2, 4, -1, 2, 3), (2, 4, -1, 6, 1)])
def test_with_the_ragged_dim_moved_a_view_torch_refuses_is_a_view_here(shape):
    ours, theirs = _pair()
    with pytest.raises(RuntimeError, match="ragged_idx != 1"):
        theirs.transpose(1, 2).view(*shape)
    got = ours.transpose(1, 2).view(*shape)
    for i, part in enumerate(theirs.unbind()):
        dense = part.transpose(0, 1)
        want = dense.reshape([dense.shape[1] if s == -1 else s for s in shape[1:]])
        torch.testing.assert_close(got.unbind()[i], want, rtol=0, atol=0)
    got.add_(1)
    torch.testing.assert_close(ours.values(), theirs.values() + 1, rtol=0, atol=0)


def test_a_view_of_a_transposed_tensor_with_holes_keeps_them_and_sees_the_cache():
    """The KV-cache pattern one step further: ``narrow`` of a cache split into heads and transposed, then viewed
    with the head dim in pairs: a view of the cache that keeps the holes (a write into the cache shows)."""
    cache = torch.randn(2, 5, 8, dtype=torch.float64)
    nt = ln.narrow(cache, 1, torch.tensor([0, 1]), torch.tensor([3, 4]), layout="jagged")
    heads = nt.unflatten(-1, (2, 4)).transpose(1, 2).view(2, 2, -1, 2, 2)
    assert heads.lengths().tolist() == [3, 4]
    cache[1, 2] = 7.0
    np.testing.assert_array_equal(heads.unbind()[1][:, 1].numpy(), np.full((2, 2, 2), 7.0))
    heads.mul_(2)
    np.testing.assert_array_equal(cache[1, 2].numpy(), np.full(8, 14.0))


@st.composite
def _cases(draw):
    """Components ``(n, *row)`` (2 or 3 regular dims of sizes 2..4, lengths 2..4), a transpose of two component
    dims, and a regrouping of two neighbouring regular dims of the result: merged, the first split (4 into 2, 2)
    or a size-1 dim put between them."""
    row = [draw(st.sampled_from([2, 3, 4])) for _ in range(draw(st.integers(2, 3)))]
    lengths = draw(st.lists(st.integers(2, 4), min_size=2, max_size=3))
    a, b = draw(st.sampled_from([(i, j) for i in range(len(row) + 1) for j in range(i + 1, len(row) + 1)]))
    return row, lengths, (a, b), draw(st.sampled_from(["merge", "split", "one"])), draw(st.integers(0, 2))


@settings(max_examples=80, deadline=None)
@given(_cases())
def test_a_view_is_a_view_exactly_where_numpy_views_every_component(case):
    row, lengths, (a, b), how, where = case
    parts = [np.arange(n * int(np.prod(row)), dtype=np.float64).reshape(n, *row) + 1000 * i
             for i, n in enumerate(lengths)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged").transpose(a + 1, b + 1)
    dense = [p.swapaxes(a, b) for p in parts]
    ragged = b if a == 0 else 0  # (the component axis the rows went to)
    k = min(where, len(row) - 1)
    if k <= ragged or (how == "split" and dense[0].shape[k] != 4):  # (the ragged dim stays where it is)
        return
    def regroup(shape):
        head, pair, tail = list(shape[:k]), list(shape[k:k + 2]), list(shape[k + 2:])
        mid = {"merge": [pair[0] * pair[1]], "split": [2, 2, pair[1]], "one": [pair[0], 1, pair[1]]}[how]
        return head + mid + tail
    shape = [len(parts)] + regroup([-1 if j == ragged else s for j, s in enumerate(dense[0].shape)])
    expected = []
    for d in dense:
        try:
            expected.append(np.reshape(d, regroup(list(d.shape)), copy=False))
        except ValueError:
            expected.append(None)
    if any(e is None for e in expected):
        with pytest.raises(ShapeError, match=_INCOMPATIBLE):
            nt.view(*shape)
        return
    got = nt.view(*shape)
    for g, e in zip(got.unbind(), expected):
        np.testing.assert_array_equal(g, e)
    got.mul_(-1)
    for c, p in zip(nt.unbind(), dense):
        np.testing.assert_array_equal(c, -p)


def test_the_refusal_names_the_sizes_asked_for_and_the_kind_of_view():
    ours, _ = _pair()
    with pytest.raises(ShapeError, match=r"component 0 of sizes \[2, 6, 4\] viewed as \[2, 24\], a transposed view"):
        ours.transpose(2, 3).view(2, -1, 24)
    with pytest.raises(ShapeError, match=r"sizes \[2, 4, 2\] viewed as \[2, 8\], a view of part of a regular dim"):
        ours[..., 1:3].view(2, -1, 8)
