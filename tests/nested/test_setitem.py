"""``nt[index] = value`` against torch 2.13's jagged layout (NestedTensor had no ``__setitem__`` at all).

torch's jagged layout writes where the index starts with a component: ``nt[i] = t``, ``nt[i, j] = v``,
``nt[i, 1:] = v``, ``nt[i, j, k] = v``; it refuses a slice or ``...`` over dim 0 and a nested mask. Here the
same writes go into the component's view of the storage (views of it see them), numbers converted as torch
converts them; a bool nested mask writes as ``masked_fill_`` (beyond torch).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402
from lodtensor.errors import BackendMismatchError, ShapeError  # noqa: E402


def _parts():
    return [np.arange(6.0).reshape(2, 3), np.arange(10.0, 13.0).reshape(1, 3)]


def _ours(lib, parts=None):
    parts = parts if parts is not None else _parts()
    return ln.nested_tensor(parts if lib == "numpy" else [torch.from_numpy(p) for p in parts])


def _lists(nt):
    return [np.asarray(c.detach() if hasattr(c, "detach") else c).tolist() for c in nt.unbind()]


WRITES = {  # name: (index, value as a NumPy array or a number)
    "component": (0, np.zeros((2, 3))),
    "component_row_broadcast": (0, np.array([1.0, 2.0, 3.0])),
    "component_number": (1, 4.0),
    "row": ((1, 0), 9.0),
    "element": ((1, 0, 2), 9.0),
    "negative": ((-1, -1, -1), -5.0),
    "rows_slice": ((0, slice(1, None)), 7.0),
    "column": ((0, slice(None), 1), np.array([8.0, 9.0])),
    "ellipsis_after": ((0, Ellipsis, 2), 3.0),
    "bad_shape": (1, np.zeros((2, 2))),
    "dim0_slice": ((slice(None), 0), 9.0),
    "dim0_ellipsis": ((Ellipsis, 1), 9.0),
    "out_of_range": (2, 1.0),
}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(WRITES))
def test_setitem_as_torch_jagged(name, lib):
    index, value = WRITES[name]
    theirs = torch.nested.nested_tensor([torch.from_numpy(p) for p in _parts()], layout=torch.jagged)
    try:
        theirs[index] = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
        want = [c.tolist() for c in theirs.unbind()]
    except (RuntimeError, NotImplementedError, ValueError, IndexError):
        want = "refused"
    ours = _ours(lib)
    before = _lists(ours)
    try:
        ours[index] = (torch.from_numpy(value) if lib == "torch" else value) if isinstance(value, np.ndarray) else value
        got = _lists(ours)
    except (RuntimeError, ValueError, IndexError, ShapeError):
        got = "refused"
        assert _lists(ours) == before  # (a refused write leaves the tensor untouched)
    assert got == want


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_numbers_are_converted_as_torch_converts_them(lib):
    parts = [np.array([1, 2], np.uint8), np.array([3], np.uint8)]
    nt = _ours(lib, parts)
    nt[0, 1] = -1  # (torch: 255)
    assert _lists(nt) == [[1, 255], [3]]
    with pytest.raises(RuntimeError, match="cannot be converted to type uint8_t without overflow"):
        nt[1] = 300
    assert _lists(nt) == [[1, 255], [3]]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_a_nested_mask_writes_like_masked_fill(lib):
    nt = _ours(lib)
    nt[nt > 4] = -1.0
    assert _lists(nt) == [[[0.0, 1.0, 2.0], [3.0, 4.0, -1.0]], [[-1.0, -1.0, -1.0]]]


def test_the_write_is_seen_through_the_storage_and_its_views():
    nt = _ours("numpy")
    values = nt.values()
    view = nt.transpose(1, 2)
    nt[1, 0, 1] = 100.0
    assert values[2, 1] == 100.0 and view.unbind()[1][1, 0] == 100.0
    view[0, 2] = np.array([-1.0, -2.0])  # (into a transposed view: its storage, column 2 of component 0)
    assert nt.unbind()[0][:, 2].tolist() == [-1.0, -2.0]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_a_tensor_with_holes_writes_into_its_values_as_torch(lib):
    values, offsets, lengths = np.arange(8.0), np.array([0, 4, 8]), np.array([2, 3])
    theirs = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values.copy()), torch.from_numpy(offsets),
                                                    lengths=torch.from_numpy(lengths))
    theirs[1, 2] = 50.0
    theirs[0] = torch.tensor([-1.0, -2.0])
    wrap = torch.from_numpy if lib == "torch" else np.asarray
    ours = ln.nested_tensor_from_jagged(wrap(values.copy()), wrap(offsets), lengths=wrap(lengths))
    ours[1, 2] = 50.0
    ours[0] = wrap(np.array([-1.0, -2.0]))
    assert _lists(ours) == [c.tolist() for c in theirs.unbind()] == [[-1.0, -2.0], [4.0, 5.0, 50.0]]
    assert np.asarray(ours.values()).tolist() == theirs.values().tolist()
    assert (ours * 1).to_tensor_list()[1].tolist() == [4.0, 5.0, 50.0]  # (an op reads the buffer gathered again)


def test_a_write_on_the_graph_gives_torchs_gradient():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    offsets = torch.tensor([0, 2, 3])
    ours = ln.nested_tensor_from_jagged(x * 3, offsets)
    ours[0, 1] = 0.0
    (g,) = torch.autograd.grad(ours.values().sum(), x)
    dense = x * 3
    dense[1] = 0.0
    (want,) = torch.autograd.grad(dense.sum(), x)
    assert g.tolist() == want.tolist() == [[3.0, 3.0], [0.0, 0.0], [3.0, 3.0]]


def test_refusals_name_what_to_use():
    nt = _ours("numpy")
    with pytest.raises(ShapeError, match="must start with a component.*masked_fill_.*index_put_"):
        nt[:, 0] = 1.0
    with pytest.raises(TypeError, match="NestedTensor"):
        nt[0] = _ours("numpy")
    with pytest.raises(BackendMismatchError, match="__setitem__"):
        nt[0] = torch.zeros(2, 3)
    leaf = ln.nested_tensor([torch.ones(2), torch.ones(1)], requires_grad=True)
    with pytest.raises(RuntimeError):  # (torch's: a leaf that requires grad is not written in place)
        leaf[0, 0] = 2.0


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_two_ragged_dims_write_a_document_or_its_sentences(lib):
    """``nt[d]`` is document ``d``: a number fills it, ``nt[d, s, ...]`` writes into sentence ``s`` (beyond
    torch, which has no second ragged dim)."""
    wrap = torch.from_numpy if lib == "torch" else np.asarray
    docs = ln.nested_tensor([[wrap(np.zeros((3, 4))), wrap(np.zeros((1, 4)))], [wrap(np.zeros((2, 4)))]])
    docs[0, 1, 0, 2] = 5.0
    docs[1] = 7.0
    docs[0, 0] = wrap(np.ones((3, 4)))
    rows = np.asarray(docs.to_lod_tensor().data)
    assert rows[:3].tolist() == [[1.0] * 4] * 3 and rows[3].tolist() == [0.0, 0.0, 5.0, 0.0]
    assert rows[4:].tolist() == [[7.0] * 4] * 2
