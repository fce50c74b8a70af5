"""``nt.shape`` with symbolic ragged sizes, indexing, ``stack`` and torch's RuntimeError class, each checked
against torch 2.13's jagged layout on the same statements (the torch.nested docs' ``.shape`` examples)."""

import numpy as np
import pytest

import lodtensor.nested as ln
from lodtensor.errors import ShapeError

torch = pytest.importorskip("torch")


def _canon(shape):
    """A shape as text with its ragged symbols numbered by first appearance: ``(2, j1, 6)`` whatever the counter."""
    names, out = {}, []
    for s in shape:
        text = str(s)
        if text.startswith("j") or "j" in text:
            text = names.setdefault(text, f"s{len(names) + 1}")
        out.append(text)
    return tuple(out)


def _pair(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    parts = [torch.randn(*s, generator=g) for s in shapes]
    return ln.nested_tensor(parts), torch.nested.nested_tensor(parts, layout=torch.jagged)


# the torch.nested docs' statements that use .shape, each as (ours, theirs) on the same components
DOC_STATEMENTS = {
    "construct": lambda nt, t: nt.shape,
    "values": lambda nt, t: tuple(nt.values().shape),
    "unsqueeze": lambda nt, t: nt.unsqueeze(-1).shape,
    "unflatten": lambda nt, t: nt.unflatten(-1, [2, 3]).shape,
    "cat dim 2": lambda nt, t: t.cat([nt, nt], dim=2).shape,
    "stack dim 2": lambda nt, t: t.stack([nt, nt], dim=2).shape,
    "transpose": lambda nt, t: nt.transpose(-1, -2).shape,
    "linear": lambda nt, t: t.nn.functional.linear(nt, t.ones(4, 6)).shape,
    "unpack": lambda nt, t: tuple(_canon(nt.shape)),
    "reshape with its sizes": lambda nt, t: nt.reshape(nt.shape[0], nt.shape[1], 2, 3).shape,
    "view with its sizes": lambda nt, t: nt.view(nt.shape[0], nt.shape[1], 3, 2).shape,
    "shape[0], shape[-1], len": lambda nt, t: (nt.shape[0], nt.shape[-1], len(nt.shape)),
    "same structure equal": lambda nt, t: ((nt + 1).shape == nt.shape, nt.sin().shape == nt.shape),
    "ragged size is not an int": lambda nt, t: (nt.shape[1] == 2, nt.shape[1] != 4),
    "index [..., 1:3]": lambda nt, t: nt[..., 1:3].shape,
    "index [..., -1]": lambda nt, t: nt[..., -1].shape,
    "index [..., None]": lambda nt, t: nt[..., None].shape,
    "index [..., 1, None]": lambda nt, t: nt[..., 1, None].shape,
}


@pytest.mark.parametrize("name", list(DOC_STATEMENTS))
def test_doc_statements_match_torch_jagged(name):
    ours, theirs = _pair([(2, 6), (4, 6)])
    got, want = DOC_STATEMENTS[name](ours, torch), DOC_STATEMENTS[name](theirs, torch)
    assert _canon(got) == _canon(want)


def test_docs_narrow_and_from_jagged_shapes():
    padded = torch.randn(3, 5, 4)
    seq_lens = torch.tensor([3, 2, 5])
    ours = ln.narrow(padded, dim=1, start=0, length=seq_lens, layout="jagged")
    theirs = torch.nested.narrow(padded, dim=1, start=0, length=seq_lens, layout=torch.jagged)
    assert _canon(ours.shape) == _canon(theirs.shape) == ("3", "s1", "4")
    assert not ours.is_contiguous() and not theirs.is_contiguous()
    values, offsets = torch.randn(82, 128), torch.tensor([0, 50, 82])
    nt1 = ln.nested_tensor_from_jagged(values=values, offsets=offsets)
    nt2 = ln.nested_tensor_from_jagged(values=torch.randn(82, 128), offsets=nt1.offsets())
    assert _canon((nt1 + nt2).shape) == ("2", "s1", "128") and (nt1 + nt2).shape == nt1.shape


def test_ragged_sizes_compare_by_structure():
    a = ln.nested_tensor([np.zeros((2, 6)), np.zeros((4, 6))])
    b = ln.nested_tensor([np.ones((2, 6)), np.ones((4, 6))])  # equal structure, built apart
    c = ln.nested_tensor([np.zeros((3, 6)), np.zeros((4, 6))])
    assert a.shape == b.shape and str(a.shape[1]) == str(b.shape[1])  # one symbol while both live
    assert a.shape != c.shape and a.shape[1] != c.shape[1]
    assert hash(a.shape[1]) == hash(b.shape[1])
    assert a.shape[1].lengths().tolist() == [2, 4]
    assert a.transpose(1, 2).shape[2] == a.shape[1]
    assert repr(a.shape).startswith("Size([2, j") and a.shape[1:][1] == 6
    images = ln.nested_tensor([np.zeros((3, 4, 5)), np.zeros((3, 6, 5)), np.zeros((3, 4, 7))])
    assert images.shape[:2] == (3, 3) and images.shape[2] != images.shape[3]


def test_ragged_sizes_refuse_ints_and_other_dims():
    nt = ln.nested_tensor([np.zeros((2, 6)), np.zeros((4, 6))])
    other = ln.nested_tensor([np.zeros((3, 6)), np.zeros((4, 6))])
    with pytest.raises(RuntimeError, match=r"int\(\): the ragged dim j\d+ has no single size"):
        int(nt.shape[1])
    with pytest.raises(ShapeError, match=r"numel\(\)"):
        nt.shape.numel()
    with pytest.raises(RuntimeError, match=r"reshape\(\): the ragged size j\d+ at dimension 1 .* is not this"):
        nt.reshape(other.shape)
    with pytest.raises(RuntimeError, match=r"ragged size j\d+ at dimension 2"):
        nt.reshape(2, -1, nt.shape[1])


@pytest.mark.parametrize("index", [
    (1, slice(None), -1), (1, -1), (1, slice(None), slice(1, 5, 2)), (1, None), (0, Ellipsis, slice(1, 3)),
    (1, slice(None), slice(None)), (-1,), (Ellipsis, slice(1, 3)), (Ellipsis, -1), (Ellipsis, None),
    (Ellipsis, 1, None), (Ellipsis, slice(0, 6, 2)),
], ids=str)
def test_indexing_matches_torch_jagged(index):
    ours, theirs = _pair([(2, 6), (4, 6)], seed=1)
    got, want = ours[index], theirs[index]
    if getattr(want, "is_nested", False):
        assert _canon(got.shape) == _canon(want.shape)
        for g, w in zip(got.unbind(), want.unbind()):
            torch.testing.assert_close(g, w)
    else:
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("index, message", [
    ((slice(None), slice(0, 1)), "slice.*on ragged dim"),
    ((slice(0, 2, 2),), "only a step of 1"),
    ((None,), "unsqueeze.*dim=0"),
])
def test_indexing_refusals_are_runtime_errors(index, message):
    nt = ln.nested_tensor([np.zeros((2, 6)), np.zeros((4, 6))])
    with pytest.raises(RuntimeError, match=message):
        nt[index]


def test_indexing_beyond_torch_slices_dim0_as_a_view():
    nt = ln.nested_tensor([np.zeros((2, 6)), np.ones((4, 6)), np.full((1, 6), 2.0)])
    tail = nt[1:]
    assert tail.nested_size().tolist() == [[4, 6], [1, 6]]
    tail.unbind()[0][0, 0] = 7.0
    assert nt.unbind()[1][0, 0] == 7.0
    assert nt[:, :, 0].nested_size().tolist() == [[2], [4], [1]]


@pytest.mark.parametrize("dim", [2, 3, -1, 1])
def test_stack(dim):
    ours, theirs = _pair([(2, 6), (4, 6)], seed=2)
    got = torch.stack([ours, ours * 2], dim=dim)
    want = [torch.stack([c, c * 2], dim=dim - 1 if dim > 0 else dim) for c in theirs.unbind()]
    for g, w in zip(got.unbind(), want):
        torch.testing.assert_close(g, w)
    if dim != 1:  # torch's jagged layout stops at the ragged dim; dim 1 goes beyond it
        assert _canon(got.shape) == _canon(torch.stack([theirs, theirs * 2], dim=dim).shape)


def test_stack_refusals():
    nt = ln.nested_tensor([np.zeros((2, 6)), np.zeros((4, 6))])
    with pytest.raises(RuntimeError, match=r"stack\(\): not supported for NestedTensor on dim=0"):
        ln.stack([nt, nt], 0)
    with pytest.raises(RuntimeError, match="same nested structure"):
        ln.stack([nt, ln.nested_tensor([np.zeros((3, 6)), np.zeros((4, 6))])], 2)


RUNTIME_ERRORS = {  # calls torch refuses with RuntimeError on its jagged layout: ours too (and ValueError)
    "size of a ragged dim": lambda m, nt: m.nested.nested_tensor([m.zeros(2, 3), m.zeros(3, 3)]).size(1)
    if m is not torch else nt.size(1),
    "mismatched dims": lambda m, nt: m.nested.nested_tensor([m.zeros(2, 3), m.zeros(3)], layout=m.jagged),
    "softmax over dim 0": lambda m, nt: m.softmax(nt, 0),
    "binary ops of other structures": lambda m, nt: nt + m.nested.nested_tensor(
        [m.zeros(3, 3), m.zeros(3, 3)], layout=m.jagged),
    "unsqueeze dim 0": lambda m, nt: nt.unsqueeze(0),
    "chunk ragged dim": lambda m, nt: nt.chunk(2, dim=1),
    "linear mismatched": lambda m, nt: m.nn.functional.linear(nt, m.zeros(4, 5)),
}


class _Ours:
    """``torch`` with ``torch.nested`` replaced by lodtensor.nested: the same statements, the import swapped."""

    nested = ln
    jagged = "jagged"

    def __getattr__(self, name):
        return getattr(torch, name)


@pytest.mark.parametrize("name", list(RUNTIME_ERRORS))
def test_runtime_errors_where_torch_raises_them(name):
    call = RUNTIME_ERRORS[name]
    theirs = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)], layout=torch.jagged)
    ours = ln.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)], layout="jagged")
    if name != "size of a ragged dim":  # torch's jagged size(1) is its symbol; its strided layout raises
        with pytest.raises(RuntimeError):
            call(torch, theirs)
    with pytest.raises(RuntimeError) as caught:
        call(_Ours(), ours)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ShapeError)
