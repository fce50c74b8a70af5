"""Nested tensors of no component (torch's ``(0, j1, 3)``) and hollow LoDs, differential against torch.nested.

An empty batch (``lod=[[0]]``), the level under documents that are all empty, ``nested_tensor_from_jagged(values,
offsets=[0])``: the components' dims are known though there is no component, and every op keeps them as
torch's jagged layout does; ``torch.nested.nested_tensor([])`` (rank-0 components) as torch's strided one.
"""

import copy
import pickle
import warnings

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor.errors import ShapeError
from tests.hollow import hollow_cases

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _dims(shape):
    """A shape with each ragged entry as "j" (torch's j1, j2... and ours compare by kind, not by number)."""
    return tuple(s if isinstance(s, int) else "j" for s in shape)


def _dims_match(ours, theirs):
    """Our shape is torch's, ragged dims where torch's are (the jagged dim stays ragged even when every
    component has the same size there, as torch's jagged layout keeps it)."""
    return _dims(ours) == _dims(theirs)


def _as_torch(x):
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


def _same(ours, theirs):
    """``ours`` (a NestedTensor, an array, a tuple of them, a number) equals torch's result exactly."""
    if isinstance(theirs, torch.Tensor) and theirs.is_nested:
        assert isinstance(ours, ln.NestedTensor), type(ours)
        assert _dims_match(ours.shape, theirs.shape), (ours.shape, theirs.shape)
        if ours.size(0) == 0:  # no component: exactly torch's (0, j1, 3)
            assert _dims(ours.shape) == _dims(theirs.shape)
        assert ours.dim() == theirs.dim() and ours.size(0) == theirs.size(0) and ours.numel() == theirs.numel()
        assert str(ours.dtype) == str(theirs.dtype)
        mine, torchs = ours.unbind(), theirs.unbind()
        assert len(mine) == len(torchs)
        for a, b in zip(mine, torchs):
            assert tuple(a.shape) == tuple(b.shape)
            torch.testing.assert_close(_as_torch(a), b, equal_nan=True, rtol=1e-5, atol=1e-6)
    elif isinstance(theirs, torch.Tensor):
        assert not isinstance(ours, ln.NestedTensor)
        assert tuple(ours.shape) == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype)
        torch.testing.assert_close(_as_torch(ours), theirs, equal_nan=True)
    elif isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    else:
        assert ours == theirs


def _jagged(make, values, offsets):
    if make == "torch":
        return torch.nested.nested_tensor_from_jagged(values, offsets=torch.tensor(offsets))
    return ln.nested_tensor_from_jagged(values, offsets=torch.tensor(offsets))


def _values(shape, dtype=torch.float32):
    n = int(np.prod(shape))
    return (torch.arange(n, dtype=torch.float64).reshape(shape) / 7 - 1).to(dtype)


#: name -> f(nt, nt4, one, ids): run on torch's nested tensors and on ours alike (ours through
#: ``__torch_function__``); nt: (B, j, 3), nt4: (B, j, 2, 3), ids: (B, j) int64
CASES = {
    "add": lambda nt, nt4, ids: nt + nt,
    "add_scalar": lambda nt, nt4, ids: nt + 1,
    "add_dense": lambda nt, nt4, ids: nt + torch.ones(3),
    "mul": lambda nt, nt4, ids: nt * 2,
    "exp": lambda nt, nt4, ids: nt.exp(),
    "relu": lambda nt, nt4, ids: F.relu(nt),
    "gelu": lambda nt, nt4, ids: F.gelu(nt),
    "neg": lambda nt, nt4, ids: -nt,
    "eq": lambda nt, nt4, ids: nt == nt,  # noqa: PLR0124 - the op under test
    "sum": lambda nt, nt4, ids: nt.sum(),
    "sum_last": lambda nt, nt4, ids: nt.sum(-1),
    "sum_last_keepdim": lambda nt, nt4, ids: nt.sum(-1, keepdim=True),
    "sum_ragged": lambda nt, nt4, ids: nt.sum(1),
    "mean_last": lambda nt, nt4, ids: nt.mean(-1),
    "mean_ragged": lambda nt, nt4, ids: nt.mean(1),
    "amax_last": lambda nt, nt4, ids: nt.amax(-1),
    "max_last": lambda nt, nt4, ids: tuple(nt.max(-1)),
    "argmax_last": lambda nt, nt4, ids: nt.argmax(-1),
    "prod_last": lambda nt, nt4, ids: nt.prod(-1),
    "any": lambda nt, nt4, ids: nt.any(),
    "all": lambda nt, nt4, ids: nt.all(),
    "softmax": lambda nt, nt4, ids: torch.softmax(nt, -1),
    "log_softmax": lambda nt, nt4, ids: torch.log_softmax(nt, -1),
    "layer_norm": lambda nt, nt4, ids: F.layer_norm(nt, (3,)),
    "layer_norm_affine": lambda nt, nt4, ids: F.layer_norm(nt, (3,), torch.ones(3) * 2, torch.ones(3)),
    "rms_norm": lambda nt, nt4, ids: F.rms_norm(nt, (3,)),
    "linear": lambda nt, nt4, ids: F.linear(nt, _values((5, 3))),
    "linear_bias": lambda nt, nt4, ids: F.linear(nt, _values((5, 3)), torch.ones(5)),
    "matmul_dense": lambda nt, nt4, ids: torch.matmul(nt, _values((3, 4))),
    "matmul_nested": lambda nt, nt4, ids: torch.matmul(nt4, nt4.transpose(-1, -2)),
    "narrow": lambda nt, nt4, ids: nt.narrow(2, 1, 2),
    "cat_last": lambda nt, nt4, ids: torch.cat([nt, nt], dim=2),
    "transpose": lambda nt, nt4, ids: nt.transpose(1, 2),
    "transpose_regular": lambda nt, nt4, ids: nt4.transpose(2, 3),
    "unsqueeze": lambda nt, nt4, ids: nt.unsqueeze(-1),
    "squeeze": lambda nt, nt4, ids: nt.unsqueeze(-1).squeeze(-1),
    "flatten": lambda nt, nt4, ids: nt4.flatten(-2, -1),
    "unflatten": lambda nt, nt4, ids: nt.unflatten(-1, (3, 1)),
    "chunk": lambda nt, nt4, ids: nt.chunk(3, -1),
    "split": lambda nt, nt4, ids: nt.split(1, -1),
    "clone": lambda nt, nt4, ids: nt.clone(),
    "to_float64": lambda nt, nt4, ids: nt.to(torch.float64),
    "zeros_like": lambda nt, nt4, ids: torch.zeros_like(nt),
    "full_like": lambda nt, nt4, ids: torch.full_like(nt, 2.0),
    "masked_fill": lambda nt, nt4, ids: nt.masked_fill(nt > 0, 1.0),
    "where": lambda nt, nt4, ids: torch.where(nt > 0, nt, 0.0),
    "embedding": lambda nt, nt4, ids: F.embedding(ids, _values((4, 3))),
    "padded": lambda nt, nt4, ids: torch.nested.to_padded_tensor(nt, -1.0),
    "padded_4d": lambda nt, nt4, ids: torch.nested.to_padded_tensor(nt4, -1.0),
    "fill_": lambda nt, nt4, ids: nt.clone().fill_(1.0),
    "add_": lambda nt, nt4, ids: nt.clone().add_(1.0),
    "unbind": lambda nt, nt4, ids: nt.unbind(),
    "dims": lambda nt, nt4, ids: (nt.dim(), nt.size(0), nt.size(-1), len(nt), nt.numel()),
}


def _inputs(make, lengths):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64).tolist()
    rows = offsets[-1]
    nt = _jagged(make, _values((rows, 3)), offsets)
    nt4 = _jagged(make, _values((rows, 2, 3)), offsets)
    ids = _jagged(make, torch.arange(rows, dtype=torch.int64) % 4, offsets)
    return nt, nt4, ids


@pytest.mark.parametrize("lengths", [[], [0, 2], [0, 0]], ids=["no_component", "empty_sequence", "all_empty"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_ops_match_torch_jagged(name, lengths):
    fn = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = fn(*_inputs("torch", lengths))
    ours = fn(*_inputs("ours", lengths))
    _same(ours, theirs)


# torch raises on these; we raise too, with an error of torch's type
ERRORS = {
    "sum_batch": (lambda nt: nt.sum(0), RuntimeError),
    "max_all": (lambda nt: nt.max(), RuntimeError),
    "narrow_batch": (lambda nt: nt.narrow(0, 0, 0), RuntimeError),
    "select": (lambda nt: nt.select(0, 0), IndexError),
    "getitem": (lambda nt: nt[0], IndexError),
    "bool": (bool, RuntimeError),
    "packed_sequence": (lambda nt: torch.nn.utils.rnn.pack_sequence(list(nt.unbind())), RuntimeError),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_no_component_errors_as_torch(name):
    fn, kind = ERRORS[name]
    with pytest.raises(kind):
        fn(_inputs("torch", [])[0])
    with pytest.raises(kind):
        fn(_inputs("ours", [])[0])


def test_to_packed_sequence_of_no_component_refuses_like_torch():
    with pytest.raises(RuntimeError, match="at least one step"):
        _inputs("ours", [])[0].to_packed_sequence()


def test_cat_of_no_component_and_some():
    ours = [_jagged("ours", _values((0, 3)), [0]), _jagged("ours", _values((2, 3)), [0, 2])]
    theirs = [_jagged("torch", _values((0, 3)), [0]), _jagged("torch", _values((2, 3)), [0, 2])]
    for dim in (0, 2):
        with pytest.raises(RuntimeError):
            torch.cat(theirs, dim=dim)
        with pytest.raises(RuntimeError):
            torch.cat(ours, dim=dim)
    with pytest.raises(RuntimeError):  # one empty, one not: their structures differ, no broadcasting
        ours[0] + _jagged("ours", _values((1, 3)), [0, 1])


def test_from_jagged_with_no_component_keeps_the_row_shape():
    """The fuzz target nested_from_jagged: lengths [] over values of 0 rows is a nested tensor of no component
    whose rows are (2,); it is the LoDTensor of an empty batch and back."""
    for kw in ({"offsets": [0]}, {"lengths": []}, {"offsets": np.array([0])}):
        nt = ln.nested_tensor_from_jagged(np.zeros((0, 2)), **kw)
        assert _dims(nt.shape) == (0, "j", 2) and nt.dim() == 3 and nt.unbind() == ()
        t = nt.to_lod_tensor()
        assert t.lod() == [[0]] and t.data.shape == (0, 2) and t.data.dtype == np.float64
        back = t.to_nested()
        assert _dims(back.shape) == (0, "j", 2) and back.to_lod_tensor().lod() == [[0]]
    theirs = torch.nested.nested_tensor_from_jagged(torch.zeros(0, 2), offsets=torch.tensor([0]))
    ours = ln.as_nested_tensor(theirs)  # torch's own jagged tensor of no component
    assert _dims(ours.shape) == _dims(theirs.shape) == (0, "j", 2)
    assert ours.to_lod_tensor().data.shape == (0, 2)


def test_from_jagged_holes_of_no_component():
    theirs = torch.nested.nested_tensor_from_jagged(torch.zeros(0, 3), offsets=torch.tensor([0]),
                                                    lengths=torch.tensor([], dtype=torch.int64))
    ours = ln.nested_tensor_from_jagged(np.zeros((0, 3), np.float32), offsets=[0], lengths=[])
    assert _dims(ours.shape) == _dims(theirs.shape) == (0, "j", 3)


@pytest.mark.parametrize("name", sorted(hollow_cases()))
def test_hollow_lod_tensor_round_trips(name):
    t = hollow_cases()[name]
    n = int(t.lod.offsets(-1).size - 1)  # sequences of the last level: the components
    for nt in (t.to_nested(), ln.as_nested_tensor(t)):
        assert nt.size(0) == n and nt.dim() == 3 and nt.numel() == 0 and str(nt.dtype) == "float32"
        assert _dims(nt.shape) == ((0, "j", 3) if n == 0 else (n, 0, 3))
        back = nt.to_lod_tensor()
        assert back.lod() == [t.lod()[-1]] and back.data.shape == (0, 3) and back.data.dtype == np.float32
        padded = ln.to_padded_tensor(nt, 0.0)
        assert padded.shape == (n, 0, 3) and padded.dtype == np.float32
        theirs = torch.nested.nested_tensor_from_jagged(torch.zeros(0, 3), offsets=torch.tensor(t.lod()[-1]))
        assert _dims(nt.shape) == _dims(theirs.shape) or n != 0  # (torch's of n empty sequences: (n, j1, 3))
        assert tuple(torch.nested.to_padded_tensor(theirs, 0.0).shape) == padded.shape


def test_padded_with_output_size():
    ours, theirs = _inputs("ours", [])[0], _inputs("torch", [])[0]
    got = torch.nested.to_padded_tensor(ours, 0.0, output_size=(0, 5, 3))
    assert tuple(got.shape) == tuple(torch.nested.to_padded_tensor(theirs, 0.0, output_size=(0, 5, 3)).shape)
    assert tuple(got.shape) == (0, 5, 3)
    with pytest.raises(ValueError, match="Truncation"):
        ln.to_padded_tensor(ln.nested_tensor_from_jagged(np.zeros((0, 3)), [0]), 0.0, output_size=(0, 5, 2))


def test_pickle_deepcopy_repr_keep_the_dims():
    for nt in (_inputs("ours", [])[0], ln.nested_tensor_from_jagged(np.zeros((0, 2, 3)), [0]),
               ln.nested_tensor_from_jagged(np.zeros((0, 3)), [0]).transpose(1, 2)):
        for other in (pickle.loads(pickle.dumps(nt)), copy.deepcopy(nt), copy.copy(nt)):
            assert _dims(other.shape) == _dims(nt.shape) and other.dtype == nt.dtype and other.layout == nt.layout
        assert repr(nt).startswith("nested_tensor([")
    transposed = ln.nested_tensor_from_jagged(np.zeros((0, 3)), [0]).transpose(1, 2)
    assert _dims(pickle.loads(pickle.dumps(transposed)).shape) == (0, 3, "j")


def test_pickle_refuses_a_bad_hollow():
    from lodtensor.nested._tensor import _rebuild

    buf = np.zeros(0, np.float32)
    assert _dims(_rebuild(buf, np.zeros((0, 2), np.int64), "jagged", (), (None, 3)).shape) == (0, "j", 3)
    for bad in ((None,), (None, -1), ("x", 3), [None, 3]):
        with pytest.raises((ValueError, TypeError)):
            _rebuild(buf, np.zeros((0, 2), np.int64), "jagged", (), bad)
    with pytest.raises(ValueError):  # components present: no hollow
        _rebuild(np.zeros(3, np.float32), np.array([[1, 3]]), "jagged", (), (None, 3))


def test_autograd_through_no_component():
    values = torch.zeros(0, 3, requires_grad=True)
    weight = torch.ones(5, 3, requires_grad=True)
    out = F.linear(ln.nested_tensor_from_jagged(values, torch.tensor([0])), weight)
    assert _dims(out.shape) == (0, "j", 5) and out.requires_grad
    torch.nested.to_padded_tensor(out, 0.0).sum().backward()
    assert values.grad.shape == (0, 3) and torch.equal(weight.grad, torch.zeros(5, 3))


def test_strided_empty_list_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nested.nested_tensor([])
        as_theirs = torch.nested.as_nested_tensor([])
    for ours in (ln.nested_tensor([]), ln.as_nested_tensor([]), ln.nested_tensor([], dtype=torch.float32)):
        assert ours.dim() == theirs.dim() == as_theirs.dim() == 1
        assert ours.size(0) == theirs.size(0) == 0 and ours.numel() == theirs.numel() == 0
        assert str(ours.dtype).replace("torch.", "") == str(theirs.dtype).replace("torch.", "") == "float32"
        assert ours.unbind() == theirs.unbind() == ()
        padded = ln.to_padded_tensor(ours, 0.0)
        assert tuple(padded.shape) == tuple(torch.nested.to_padded_tensor(theirs, 0.0).shape) == (0,)
        added = theirs + 1  # (torch's strided layout has no .shape for it; size(0), dim() and unbind it has)
        assert (ours + 1).dim() == added.dim() and (ours + 1).size(0) == added.size(0) == 0
        assert (ours + 1).unbind() == added.unbind() == ()
        with pytest.raises(IndexError):
            theirs.size(1)
        with pytest.raises(IndexError):
            ours.size(1)
        with pytest.raises(IndexError):
            ours.select(0, 0)
        with pytest.raises(RuntimeError):  # rank 0 components: no rows, no LoD
            ours.to_lod_tensor()
        assert _dims(pickle.loads(pickle.dumps(ours)).shape) == (0,)
    assert ln.nested_tensor([], dtype=np.int64).dtype == np.int64
    for make in (torch.nested.nested_tensor, torch.nested.as_nested_tensor, ln.nested_tensor, ln.as_nested_tensor):
        with pytest.raises(RuntimeError, match="empty tensor list"):
            make([], layout=torch.jagged)


def test_dense_of_no_row():
    theirs = torch.nested.as_nested_tensor(torch.zeros(0, 3, 2), layout=torch.jagged)
    ours = ln.as_nested_tensor(np.zeros((0, 3, 2), np.float32), layout="jagged")
    assert _dims(ours.shape) == _dims(theirs.shape) == (0, "j", 2)
    mask = torch.zeros(0, 4, dtype=torch.bool)
    got = ln.masked_select(torch.zeros(0, 4), mask)
    assert _dims(got.shape) == _dims(torch.nested.masked_select(torch.zeros(0, 4), mask).shape) == (0, "j")
    got = ln.masked_select(np.zeros((0, 4)), np.zeros((0, 4), bool))
    assert _dims(got.shape) == (0, "j") and got.to_lod_tensor().lod() == [[0]]


def test_empty_sequences_from_a_list():
    parts = [np.zeros((0, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)]
    ours = ln.nested_tensor(parts)
    theirs = torch.nested.nested_tensor([torch.as_tensor(p) for p in parts])
    assert ours.size(0) == 2 and ours.numel() == theirs.numel() == 6
    np.testing.assert_array_equal(ln.to_padded_tensor(ours, -1.0), torch.nested.to_padded_tensor(theirs, -1.0).numpy())
    t = ours.to_lod_tensor()
    assert t.lod() == [[0, 0, 2]] and t.data.shape == (2, 3)
    assert [tuple(c.shape) for c in lt.LoDTensor(t.data, t.lod()).to_nested().unbind()] == [(0, 3), (2, 3)]


def test_shape_error_is_a_runtime_error():
    assert issubclass(ShapeError, RuntimeError) and issubclass(ShapeError, ValueError)
