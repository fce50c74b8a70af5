"""The jagged layout keeps its ragged dim ragged when every component has the same length, as torch's does
(``(2, j1, 3)``, not ``(2, 2, 3)``), differential against torch.nested 2.13; the strided layout keeps
such a dim regular, as torch's strided layout does.

Every op below runs on ours and on torch's jagged layout: shapes (ragged entries compared as "j"), dtypes and
values must agree, and where torch raises we raise with torch's exception type.
"""

import pickle

import numpy as np
import pytest

import lodtensor.nested as ln
from lodtensor.errors import ShapeError

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _dims(shape):
    return tuple(s if isinstance(s, int) else "j" for s in shape)


def _outcome(fn, ns, parts):
    """What ``fn`` gives on ``ns``'s jagged nested tensor of ``parts``: its kind, shape, dtype and values."""
    nt = ns.nested_tensor([p.clone() for p in parts], layout=torch.jagged)
    try:
        return _describe(fn(nt, ns))
    except RuntimeError as err:
        return ("raises", RuntimeError, str(err))


def _describe(out):
    if isinstance(out, (tuple, list)) and any(isinstance(x, torch.Tensor) or getattr(x, "is_nested", False)
                                              for x in out):
        return ("tuple", [_describe(x) for x in out])
    if getattr(out, "is_nested", False):
        return ("nested", _dims(out.shape), out.dtype, [c.detach() for c in out.unbind()])
    if isinstance(out, torch.Tensor):
        return ("dense", tuple(out.shape), out.dtype, [out.detach()])
    return ("value", _dims(out) if isinstance(out, tuple) else out)


def _assert_same(ours, theirs):
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "raises":
        return
    if ours[0] == "tuple":
        assert len(ours[1]) == len(theirs[1])
        for a, b in zip(ours[1], theirs[1]):
            _assert_same(a, b)
        return
    if ours[0] == "value":
        assert ours == theirs
        return
    assert ours[1:3] == theirs[1:3], (ours[:3], theirs[:3])
    for a, b in zip(ours[3], theirs[3]):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _parts(lengths=(2, 2), row=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, row, generator=g) for n in lengths]


CASES = {
    "shape": lambda nt, ns: tuple(nt.shape),
    "size()": lambda nt, ns: tuple(nt.size()),
    "dim": lambda nt, ns: nt.dim(),
    "size(0)": lambda nt, ns: nt.size(0),
    "size(-1)": lambda nt, ns: nt.size(-1),
    "numel": lambda nt, ns: nt.numel(),
    "unbind": lambda nt, ns: nt.unbind(),
    "nt[0]": lambda nt, ns: nt[1],
    "nt[..., 0]": lambda nt, ns: nt[..., 0],
    "to_padded_tensor": lambda nt, ns: ns.to_padded_tensor(nt, 0.0),
    "to_padded_tensor output_size": lambda nt, ns: ns.to_padded_tensor(nt, -1.0, output_size=(2, 4, 3)),
    "view(2, -1, 3)": lambda nt, ns: nt.view(2, -1, 3),
    "reshape(-1, -1, 3, 1)": lambda nt, ns: nt.reshape(-1, -1, 3, 1),
    "reshape(2, j, 1, 3)": lambda nt, ns: nt.reshape(2, nt.shape[1], 1, 3),
    "reshape(2, 2, 3)": lambda nt, ns: nt.reshape(2, 2, 3),
    "view(2, 2, 3)": lambda nt, ns: nt.view(2, 2, 3),
    "reshape(2, 6)": lambda nt, ns: nt.reshape(2, 6),
    "reshape_as": lambda nt, ns: nt.reshape_as(nt),
    "transpose(1, 2)": lambda nt, ns: nt.transpose(1, 2),
    "transpose shape": lambda nt, ns: tuple(nt.transpose(1, 2).shape),
    "transpose size(1)": lambda nt, ns: nt.transpose(1, 2).size(1),
    "transpose contiguous": lambda nt, ns: nt.transpose(1, 2).contiguous(),
    "transpose * 2": lambda nt, ns: nt.transpose(1, 2) * 2,
    "transpose sum(1)": lambda nt, ns: nt.transpose(1, 2).sum(1),
    "transpose sum(1, keepdim)": lambda nt, ns: nt.transpose(1, 2).sum(1, keepdim=True),
    "transpose mean(2)": lambda nt, ns: nt.transpose(1, 2).mean(2),
    "transpose softmax(1)": lambda nt, ns: nt.transpose(1, 2).softmax(1),
    "transpose transpose": lambda nt, ns: nt.transpose(1, 2).contiguous().transpose(1, 2),
    "transpose unsqueeze(1)": lambda nt, ns: nt.transpose(1, 2).unsqueeze(1),
    "transpose select(1)": lambda nt, ns: nt.transpose(1, 2).select(1, 0),
    "sum(1)": lambda nt, ns: nt.sum(dim=1),
    "sum(1, keepdim)": lambda nt, ns: nt.sum(dim=1, keepdim=True),
    "mean(1)": lambda nt, ns: nt.mean(dim=1),
    "amax(1)": lambda nt, ns: nt.amax(dim=1),
    "max(1)": lambda nt, ns: nt.max(dim=1).values,
    "argmax(1)": lambda nt, ns: nt.argmax(dim=1),
    "sum(2)": lambda nt, ns: nt.sum(dim=2),
    "sum(2, keepdim)": lambda nt, ns: nt.sum(dim=2, keepdim=True),
    "amax(-1)": lambda nt, ns: nt.amax(dim=-1),
    "sum(0)": lambda nt, ns: nt.sum(dim=0),
    "softmax(1)": lambda nt, ns: nt.softmax(dim=1),
    "softmax(-1)": lambda nt, ns: nt.softmax(dim=-1),
    "log_softmax(-1)": lambda nt, ns: F.log_softmax(nt, dim=-1),
    "layer_norm": lambda nt, ns: F.layer_norm(nt, (3,)),
    "rms_norm": lambda nt, ns: F.rms_norm(nt, (3,)),
    "linear": lambda nt, ns: F.linear(nt, torch.linspace(-1, 1, 12).reshape(4, 3), torch.ones(4)),
    "matmul dense": lambda nt, ns: nt @ torch.linspace(-1, 1, 15).reshape(3, 5),
    "bmm dense": lambda nt, ns: torch.bmm(nt, torch.linspace(-1, 1, 30).reshape(2, 3, 5)),
    "matmul transposed @ nt": lambda nt, ns: nt.transpose(1, 2) @ nt,
    "cat(2)": lambda nt, ns: torch.cat([nt, nt * 2], dim=2),
    "cat(1)": lambda nt, ns: torch.cat([nt, nt * 2], dim=1),
    "stack(2)": lambda nt, ns: torch.stack([nt, nt * 2], dim=2),
    "narrow(2)": lambda nt, ns: nt.narrow(2, 1, 2),
    "narrow(1)": lambda nt, ns: nt.narrow(1, 0, 1),
    "chunk(2)": lambda nt, ns: nt.chunk(3, dim=2),
    "chunk(1)": lambda nt, ns: nt.chunk(2, dim=1),
    "chunk(0)": lambda nt, ns: nt.chunk(2, dim=0),
    "split(2)": lambda nt, ns: nt.split(1, dim=2),
    "split(1)": lambda nt, ns: nt.split(1, dim=1),
    "unflatten(-1)": lambda nt, ns: nt.unflatten(-1, (3, 1)),
    "unflatten(1)": lambda nt, ns: nt.unflatten(1, (1, 2)),
    "flatten(1, 2)": lambda nt, ns: nt.flatten(1, 2),
    "squeeze(1)": lambda nt, ns: nt.squeeze(1),
    "unsqueeze(1)": lambda nt, ns: nt.unsqueeze(1),
    "unsqueeze(1) sum(-1)": lambda nt, ns: nt.unsqueeze(1).sum(-1),
    "unsqueeze(-1)": lambda nt, ns: nt.unsqueeze(-1),
    "unsqueeze expand": lambda nt, ns: nt.unsqueeze(-1).expand(-1, -1, -1, 4),
    "select(2)": lambda nt, ns: nt.select(2, 1),
    "where": lambda nt, ns: torch.where(nt > 0, nt, nt * 0),
    "relu + sin": lambda nt, ns: F.relu(nt) + nt.sin(),
    "nt + nt * 2": lambda nt, ns: nt + nt * 2,
    "nt + dense row": lambda nt, ns: nt + torch.arange(3.0),
    "nt * dense (B, 1, D)": lambda nt, ns: nt * torch.arange(6.0).reshape(2, 1, 3),
    "nt + dense (B, L, D)": lambda nt, ns: nt + torch.arange(12.0).reshape(2, 2, 3),
    "dense (B, L, 1) * nt": lambda nt, ns: torch.arange(4.0).reshape(2, 2, 1) * nt,
    "nt + dense (3, 3)": lambda nt, ns: nt + torch.ones(3, 3),
    "ones_like": lambda nt, ns: torch.ones_like(nt),
    "clone": lambda nt, ns: nt.clone(),
    "pickle": lambda nt, ns: pickle.loads(pickle.dumps(nt)),
    "pickle transposed": lambda nt, ns: pickle.loads(pickle.dumps(nt.transpose(1, 2).contiguous())),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("lengths", [(2, 2), (2, 4)], ids=["equal", "ragged"])
def test_jagged_op_matches_torch(name, lengths):
    if name == "to_padded_tensor output_size" and max(lengths) > 4:
        pytest.skip("output size below the longest")
    fn = CASES[name]
    if lengths != (2, 2) and name in ("reshape(2, 2, 3)", "view(2, 2, 3)", "nt + dense (B, L, D)",
                                      "dense (B, L, 1) * nt"):
        return  # (fixed shapes made for equal lengths of 2)
    parts = _parts(lengths)
    _assert_same(_outcome(fn, ln, parts), _outcome(fn, torch.nested, parts))


def test_equal_lengths_shape_is_symbolic_and_size_of_the_jagged_dim_raises():
    nt = ln.nested_tensor(_parts(), layout=torch.jagged)
    B, S, E = nt.shape
    assert (B, E) == (2, 3) and str(S).startswith("j") and S.lengths().tolist() == [2, 2] and S != 2
    assert nt.jagged_dim == 1 and nt.transpose(1, 2).jagged_dim == 2
    with pytest.raises(RuntimeError, match="irregular"):
        nt.size(1)
    with pytest.raises(ShapeError, match="irregular"):
        nt.transpose(1, 2).size(2)
    assert nt.transpose(1, 2).size(1) == 3
    single = ln.nested_tensor(_parts((3,)), layout=torch.jagged)
    assert _dims(single.shape) == (1, "j", 3)


def test_strided_layout_keeps_equal_dims_regular():
    parts = _parts()
    nt = ln.nested_tensor(parts)
    theirs = torch.nested.nested_tensor(parts)
    assert tuple(nt.shape) == (2, 2, 3) and nt.size(1) == theirs.size(1) == 2
    assert nt.jagged_dim == 1
    jagged = ln.nested_tensor(parts, layout="jagged")
    assert tuple(ln.as_nested_tensor(jagged, layout="strided").shape) == (2, 2, 3)  # (torch refuses converting)
    assert _dims(ln.as_nested_tensor(nt, layout="jagged").shape) == (2, "j", 3)
    assert tuple((nt * 2).reshape(2, 2, 3).shape) == (2, 2, 3)


@pytest.mark.parametrize("build", ["from_jagged", "as_nested dense", "narrow", "from lod", "from torch njt"])
def test_jagged_constructors_of_equal_lengths_give_a_ragged_dim(build):
    values = torch.arange(12.0).reshape(4, 3)
    offsets = torch.tensor([0, 2, 4])
    if build == "from_jagged":
        pair = [ns.nested_tensor_from_jagged(values, offsets) for ns in (ln, torch.nested)]
    elif build == "as_nested dense":
        pair = [ns.as_nested_tensor(values.reshape(2, 2, 3), layout=torch.jagged) for ns in (ln, torch.nested)]
    elif build == "narrow":
        pair = [ns.narrow(values.reshape(2, 2, 3), 1, 0, 2, layout=torch.jagged) for ns in (ln, torch.nested)]
    elif build == "from lod":
        import lodtensor as lt  # noqa: PLC0415

        t = lt.LoDTensor(values, [[0, 2, 4]])
        pair = [ln.as_nested_tensor(t, layout="jagged"), torch.nested.nested_tensor_from_jagged(values, offsets)]
        assert tuple(t.to_nested().shape) == (2, 2, 3)  # the strided default: regular
    else:
        njt = torch.nested.nested_tensor_from_jagged(values, offsets)
        pair = [ln.as_nested_tensor(njt), njt]
    ours, theirs = pair
    assert _dims(ours.shape) == _dims(theirs.shape) == (2, "j", 3)
    assert ours.layout == torch.jagged
    for a, b in zip(ours.unbind(), theirs.unbind()):
        assert torch.equal(a, b)


def test_from_jagged_with_a_later_jagged_dim_keeps_it_ragged():
    values = torch.arange(24.0).reshape(3, 4, 2)
    ours = ln.nested_tensor_from_jagged(values, torch.tensor([0, 2, 4]), jagged_dim=2)
    assert _dims(ours.shape) == (2, 3, "j", 2) and ours.jagged_dim == 2
    with pytest.raises(RuntimeError, match="irregular"):
        ours.size(2)


def test_scaled_dot_product_attention_of_equal_lengths():
    g = torch.Generator().manual_seed(1)
    parts = [torch.randn(3, 2, 4, generator=g), torch.randn(3, 2, 4, generator=g)]
    outs = []
    for ns in (ln, torch.nested):
        q = ns.nested_tensor([p.clone() for p in parts], layout=torch.jagged).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, q, q)
        assert _dims(out.shape) == (2, 2, "j", 4)
        outs.append(out.transpose(1, 2))
    for a, b in zip(outs[0].unbind(), outs[1].unbind()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_separately_built_tensors_of_equal_lengths_combine_by_value():
    """torch refuses two nested ints of separate offsets; we compare structures by value (docs/nested.md)."""
    parts = _parts()
    a, b = (ln.nested_tensor(parts, layout=torch.jagged) for _ in range(2))
    assert a.shape == b.shape
    out = a + b
    assert _dims(out.shape) == (2, "j", 3)
    with pytest.raises(RuntimeError, match="cannot call binary pointwise"):
        torch.nested.nested_tensor(parts, layout=torch.jagged) + torch.nested.nested_tensor(parts, layout=torch.jagged)


def test_to_lod_tensor_and_back_keep_values_and_the_layouts_rule():
    nt = ln.nested_tensor(_parts(), layout=torch.jagged)
    t = nt.to_lod_tensor()
    assert t.lod.offsets(0).tolist() == [0, 2, 4]
    assert torch.equal(torch.as_tensor(np.asarray(t.data)) if not isinstance(t.data, torch.Tensor) else t.data,
                       torch.cat(nt.unbind()))
    assert _dims(ln.as_nested_tensor(t, layout=torch.jagged).shape) == (2, "j", 3)


def test_unpickling_checks_the_jagged_dim():
    from lodtensor.nested._tensor import _rebuild  # noqa: PLC0415

    buf, sizes = np.zeros(12), np.array([[2, 3], [2, 3]])
    assert _dims(_rebuild(buf, sizes, "jagged", (), None, 1).shape) == (2, 2, "j")
    for bad in (2, -1, True, "1"):
        with pytest.raises(ValueError, match="jag"):
            _rebuild(buf, sizes, "jagged", (), None, bad)
    assert tuple(_rebuild(buf, sizes, "strided", (), None, 0).shape) == (2, 2, 3)
