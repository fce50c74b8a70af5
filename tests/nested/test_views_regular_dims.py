"""Views of regular dims, and the memory-level methods of torch's jagged layout (docs/nested.md).

``narrow``, ``chunk``, ``split``, ``split_with_sizes``, slices and int indexing of a regular dim return views of
the input's rows, as torch 2.13's jagged layout returns views of ``values()``. Each case runs on torch's jagged
layout and on ours over torch and NumPy data: the pieces' values, ``values()`` shapes and strides,
``stride(d)``, ``storage_offset()`` and ``is_contiguous()`` agree; the pieces share the input's memory; a write
into a piece reaches the input and a write into the input reaches the piece (compared with torch's after the
same writes). Gradients through the views equal torch's where its backward runs (``chunk``) and the
per-component dense ones elsewhere (torch 2.13's jagged ``narrow``, slice, ``select`` and ``split`` backward
raise, or crash the process: never called here). Then ``storage_offset``, ``is_pinned``, ``is_shared`` /
``share_memory_``, ``detach_``, ``apply_``, ``new_empty`` / ``new_zeros`` / ``new_ones`` and ``native_dropout``
against torch's jagged layout on both kinds of data.
"""

import copy
import pickle
import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LENGTHS = [(2, 0, 3), (1,), (3, 1, 4, 2)]
LIBS = ["torch", "numpy"]


def _comps(lengths, tail=(12,), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(n, *tail, generator=g, dtype=torch.float64) for n in lengths]


def _theirs(comps, layout=torch.jagged, requires_grad=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([c.clone() for c in comps], layout=layout, requires_grad=requires_grad)


def _ours(comps, lib, layout="jagged", requires_grad=False):
    data = [c.clone() if lib == "torch" else c.numpy().copy() for c in comps]
    return ln.nested_tensor(data, layout=layout, requires_grad=requires_grad)


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _pieces(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _parts(nt):
    return [_np(c) for c in nt.unbind()]


def _assert_parts(ours, theirs, where=""):
    a, b = _parts(ours), _parts(theirs)
    assert len(a) == len(b), where
    for i, (x, y) in enumerate(zip(a, b)):
        assert x.shape == y.shape, (where, i, x.shape, y.shape)
        np.testing.assert_array_equal(x, y, err_msg=f"{where} component {i}")


def _strides(a):
    return tuple(a.stride()) if isinstance(a, torch.Tensor) else tuple(s // a.itemsize for s in a.strides)


def _shares(a, b):
    if isinstance(a, torch.Tensor):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    return np.shares_memory(a, b)


# name: (call on a nested tensor, the same per component (dense, dims one lower), component tail)
VIEWS = {
    "narrow": (lambda x: x.narrow(2, 1, 3), lambda c: c.narrow(1, 1, 3), (12,)),
    "narrow_negative_dim": (lambda x: x.narrow(-1, 4, 8), lambda c: c.narrow(-1, 4, 8), (12,)),
    "chunk": (lambda x: x.chunk(3, -1), lambda c: c.chunk(3, -1), (12,)),
    "chunk_uneven": (lambda x: x.chunk(5, 2), lambda c: c.chunk(5, 1), (12,)),
    "split": (lambda x: x.split(5, -1), lambda c: c.split(5, -1), (12,)),
    "split_sizes": (lambda x: x.split([2, 7, 3], -1), lambda c: c.split([2, 7, 3], -1), (12,)),
    "split_with_sizes": (lambda x: x.split_with_sizes([4, 8], 2), lambda c: c.split_with_sizes([4, 8], 1), (12,)),
    "slice": (lambda x: x[..., 1:3], lambda c: c[..., 1:3], (12,)),
    "slice_step": (lambda x: x[..., 1:11:3], lambda c: c[..., 1:11:3], (12,)),
    "index_last": (lambda x: x[..., -1], lambda c: c[..., -1], (12,)),
    "select": (lambda x: x.select(2, 5), lambda c: c.select(1, 5), (12,)),
    "slice_of_slice": (lambda x: x[..., 2:11][..., ::2], lambda c: c[..., 2:11][..., ::2], (12,)),
    "narrow_of_chunk": (lambda x: x.chunk(2, -1)[1].narrow(2, 1, 3), lambda c: c.chunk(2, -1)[1].narrow(1, 1, 3),
                        (12,)),
    "rank3_last": (lambda x: x[..., 1:3], lambda c: c[..., 1:3], (3, 4)),
    "rank3_middle": (lambda x: x.select(2, 1), lambda c: c.select(1, 1), (3, 4)),
    "rank3_chunk_middle": (lambda x: x.chunk(3, 2), lambda c: c.chunk(3, 1), (3, 4)),
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda v: "-".join(map(str, v)))
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_match_torch_jagged_and_share_memory(name, lengths, lib):
    call, _, tail = VIEWS[name]
    comps = _comps(lengths, tail)
    theirs, ours = _theirs(comps), _ours(comps, lib)
    want, got = _pieces(call(theirs)), _pieces(call(ours))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        _assert_parts(g, w, f"piece {k}")
        assert tuple(g.values().shape) == tuple(w.values().shape)
        assert _strides(g.values()) == _strides(w.values()), k
        assert [g.stride(d) for d in range(1, g.dim())] == list(w.stride()[1:]), k
        assert g.storage_offset() == w.storage_offset(), k
        assert g.is_contiguous() == w.is_contiguous(), k
        assert _shares(g.values(), ours.values()), k
    for k, (g, w) in enumerate(zip(got, want)):  # a write into each piece reaches the input
        g.mul_(-(k + 2))
        w.mul_(-(k + 2))
    _assert_parts(ours, theirs, "input after writes into the pieces")
    ours.add_(1000.0)  # a write into the input reaches the pieces
    theirs.add_(1000.0)
    for k, (g, w) in enumerate(zip(got, want)):
        _assert_parts(g, w, f"piece {k} after a write into the input")


def _weights(p, i, k):
    return torch.linspace(-1, 1, p.numel(), dtype=torch.float64).reshape(p.shape) * (i + 1) * (k + 1)


def _loss(pieces):
    return sum((c * _weights(c, i, k)).sum() for k, p in enumerate(pieces) for i, c in enumerate(p))


@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda v: "-".join(map(str, v)))
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_gradients_match_per_component_dense(name, lengths):
    call, dense, tail = VIEWS[name]
    comps = _comps(lengths, tail)
    ours = _ours(comps, "torch", requires_grad=True)
    got = _pieces(call(ours))
    assert all(g.requires_grad and not g.is_leaf for g in got)
    _loss([g.unbind() for g in got]).backward()
    leaves = [c.clone().requires_grad_() for c in comps]
    per_comp = [_pieces(dense(c)) for c in leaves]
    _loss([[per_comp[i][k] for i in range(len(leaves))] for k in range(len(got))]).backward()
    for a, leaf in zip(ours.grad.unbind(), leaves):
        np.testing.assert_allclose(_np(a), _np(leaf.grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda v: "-".join(map(str, v)))
def test_chunk_gradients_match_torch_jagged(lengths):
    comps = _comps(lengths)
    ours, theirs = _ours(comps, "torch", requires_grad=True), _theirs(comps, requires_grad=True)
    for x in (ours, theirs):
        pieces = x.chunk(3, -1)
        _loss([pieces[1].exp().unbind(), (pieces[2] * pieces[0]).unbind()]).backward()
    _assert_parts(ours.grad, theirs.grad)


# in-place writes through a view: (our call on a view of dim 2, the same on the dense component view)
WRITES = {
    "mul_": (lambda v: v.mul_(3.0), lambda c: c.mul_(3.0)),
    "add_self": (lambda v: v.add_(v), lambda c: c.add_(c.clone())),
    "copy_": (lambda v: v.copy_(v * 2 + 1), lambda c: c.copy_(c * 2 + 1)),
    "fill_": (lambda v: v.fill_(7.0), lambda c: c.fill_(7.0)),
    "zero_": (lambda v: v.zero_(), lambda c: c.zero_()),
    "clamp_": (lambda v: v.clamp_(0.2, 0.6), lambda c: c.clamp_(0.2, 0.6)),
    "masked_fill_": (lambda v: v.masked_fill_(v > 0.5, -1.0), lambda c: c.masked_fill_(c > 0.5, -1.0)),
    "dropout_p1_inplace": (lambda v: ln.dropout(v, 1.0, True, inplace=True), lambda c: c.zero_()),
    "ufunc_out": (lambda v: np.multiply(v, 3.0, out=v), lambda c: c.mul_(3.0)),
    "apply_": (lambda v: v.apply_(lambda x: x * x), lambda c: c.mul_(c.clone())),
}


# views to write into: (ours, the same of one dense component)
PICKS = {
    "slice": (lambda x: x[..., 3:9:2], lambda c: c[..., 3:9:2]),
    "select": (lambda x: x[..., 4], lambda c: c[..., 4]),
    "chunk_piece": (lambda x: x.chunk(2, -1)[1], lambda c: c.narrow(-1, 6, 6)),
    "transposed_slice": (lambda x: x.unflatten(-1, (3, 4)).transpose(1, 2)[..., 1:3],
                         lambda c: c.unflatten(-1, (3, 4)).transpose(0, 1)[..., 1:3]),
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("view", sorted(PICKS))
@pytest.mark.parametrize("name", sorted(WRITES))
def test_in_place_ops_write_through_a_view(name, view, lib):
    if name == "ufunc_out" and lib == "torch":
        pytest.skip("NumPy ufuncs take NumPy data")
    ours_write, dense_write = WRITES[name]
    pick = PICKS[view]
    comps = _comps((2, 0, 3))
    ours = _ours(comps, lib)
    ours_write(pick[0](ours))
    want = [c.clone() for c in comps]
    for c in want:
        dense_write(pick[1](c))
    for got, w in zip(_parts(ours), want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-12)


@pytest.mark.parametrize("view", sorted(PICKS))
@pytest.mark.parametrize("name", ["mul_", "add_self", "copy_", "clamp_", "masked_fill_", "fill_"])
def test_gradients_through_in_place_writes_into_views(name, view):
    ours_write, dense_write = WRITES[name]
    comps = _comps((2, 0, 3))
    leaf = _ours(comps, "torch", requires_grad=True)
    z = leaf * 1.5
    if view == "chunk_piece":  # a piece of a multi-output view op: torch refuses the write where autograd records
        with pytest.raises(RuntimeError, match="modified inplace"):  # (tests/nested/test_view_autograd_flags.py)
            ours_write(PICKS[view][0](z))
        return
    ours_write(PICKS[view][0](z))
    _loss([z.unbind()]).backward()
    leaves = [c.clone().requires_grad_() for c in comps]
    dense = [c * 1.5 for c in leaves]
    for c in dense:
        dense_write(PICKS[view][1](c))
    _loss([dense]).backward()
    for a, c in zip(_parts(leaf.grad), leaves):
        np.testing.assert_allclose(a, _np(c.grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_ops_on_a_view_read_the_inputs_current_values(lib):
    ours = _ours(_comps((2, 0, 3)), lib)
    view = ours[..., 1:3]
    before = _np(ln.to_padded_tensor(view.sum(-1), 0.0))
    ours.add_(1.0)
    np.testing.assert_allclose(_np(ln.to_padded_tensor(view.sum(-1), 0.0)), np.where(before != 0, before + 2, 0))
    t = ours.transpose(1, 2)  # (a transposed view's own values, read through its storage, as a copy would)
    np.testing.assert_allclose(_np(t[:, 1:3].contiguous().values()), _np(view.transpose(1, 2).contiguous().values()))


# view ops on a view: (call, whether torch's jagged layout returns a view)
ON_VIEWS = {
    "unflatten": (lambda x: x.narrow(2, 0, 6).unflatten(-1, (2, 3)), True),
    "unsqueeze": (lambda x: x[..., 1:3].unsqueeze(-1), True),
    "squeeze": (lambda x: x[..., 1:2].squeeze(-1), True),
    "view": (lambda x: x[..., ::2].view(x.size(0), -1, 2, 3), True),
    "reshape": (lambda x: x[..., 0:6].reshape(x.size(0), -1, 3, 2), False),
    "flatten_run": (lambda x: x.unflatten(-1, (3, 4)).narrow(2, 1, 2).flatten(-2), False),
    "flatten_gaps": (lambda x: x.unflatten(-1, (3, 4))[..., 1:3].flatten(-2), False),
    "transpose": (lambda x: x[..., 0:6].transpose(1, 2), True),
    "detach": (lambda x: x[..., 1:3].detach(), True),
    "chunk_batch": (lambda x: x[..., 1:3].chunk(2, 0)[-1], True),
    "clone": (lambda x: x[..., 1:3].clone(), False),
    "contiguous": (lambda x: x[..., 1:3].contiguous(), False),
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("name", sorted(ON_VIEWS))
def test_view_ops_on_a_view_match_torch_jagged(name, lib):
    call, shared = ON_VIEWS[name]
    comps = _comps((2, 1, 3))
    theirs, ours = _theirs(comps), _ours(comps, lib)
    want, got = call(theirs), call(ours)
    _assert_parts(got, want)
    assert got.is_contiguous() == want.is_contiguous()
    assert _strides(got.values()) == _strides(want.values())
    assert _shares(got.values(), ours.values()) == shared
    got.values()[...] = -5.0  # through the result's values(), whatever it is
    assert any((p == -5.0).any() for p in _parts(ours)) == shared


@pytest.mark.parametrize("lib", LIBS)
def test_components_values_and_conversions_of_a_view_share_memory(lib):
    ours = _ours(_comps((2, 0, 3)), lib)
    view = ours[..., 2:8:2]
    first = view.unbind()[0]
    first[...] = -1.0
    assert (_parts(ours)[0][:, 2:8:2] == -1.0).all()
    view[2][0, 0] = -2.0  # nt[i]: the component, a view too
    assert _parts(ours)[2][0, 2] == -2.0
    view.values()[1, 1] = -3.0
    assert _parts(ours)[0][1, 4] == -3.0
    other = view.numpy() if lib == "torch" else view.to_torch()
    other.fill_(-4.0)
    assert (_parts(ours)[2][:, 2:8:2] == -4.0).all()
    shallow = copy.copy(view)
    shallow.fill_(-6.0)
    assert (_parts(ours)[0][:, 2:8:2] == -6.0).all()
    for twin in (copy.deepcopy(view), pickle.loads(pickle.dumps(view))):  # own memory, the same values
        for a, b in zip(_parts(twin), _parts(view)):
            np.testing.assert_array_equal(a, b)
        twin.fill_(9.0)
        assert not (_parts(ours)[0] == 9.0).any()


@pytest.mark.parametrize("lib", LIBS)
def test_strided_layout_views_match_torch_strided(lib):
    """torch's strided layout returns views for chunk, split_with_sizes and select of a regular dim (and refuses
    narrow, split and slices there, which ours gives as views too)."""
    comps = _comps((2, 3))
    for call in (lambda x: x.chunk(3, -1), lambda x: x.split_with_sizes([5, 7], -1), lambda x: x.select(2, 4)):
        theirs, ours = _theirs(comps, torch.strided), _ours(comps, lib, "strided")
        want, got = _pieces(call(theirs)), _pieces(call(ours))
        for k, (g, w) in enumerate(zip(got, want)):
            _assert_parts(g, w, k)
            g.unbind()[1][...] = -(k + 1.0)
            w.unbind()[1][...] = -(k + 1.0)
        _assert_parts(ours, theirs)
    ours = _ours(comps, lib, "strided")
    for piece in (ours.narrow(2, 1, 3), ours[..., ::4], *ours.split(5, -1)):
        assert _shares(piece.values(), ours.values())


@pytest.mark.parametrize("lib", LIBS)
def test_views_need_rows_else_ops_copy(lib):
    """Components with several ragged dims (images) are no rows: a window of their regular dim is a copy."""
    images = [torch.rand(3, h, w, dtype=torch.float64) for h, w in ((2, 5), (4, 1))]
    ours = _ours(images, lib, "strided")
    part = ours[:, 0:2]
    for got, img in zip(_parts(part), images):
        np.testing.assert_array_equal(got, img[0:2].numpy())
    assert part.is_contiguous() and not _shares(part.values(), ours.values())


@pytest.mark.parametrize("lib", LIBS)
def test_slices_of_a_tensor_of_no_component_keep_the_dim_sizes(lib):
    values = torch.zeros(0, 4)
    theirs = torch.nested.nested_tensor_from_jagged(values, torch.tensor([0]))
    ours = ln.nested_tensor_from_jagged(values if lib == "torch" else values.numpy(), np.array([0]))
    for call in (lambda x: x[..., 1:3], lambda x: x[..., ::3], lambda x: x.narrow(2, 1, 2), lambda x: x[..., -1]):
        want, got = call(theirs), call(ours)
        assert [s if isinstance(s, int) else -1 for s in got.shape] == [
            s if isinstance(s, int) else -1 for s in want.shape]
        assert tuple(got.values().shape) == tuple(want.values().shape)


def test_unflatten_keeps_the_jagged_dim_where_it_is():
    """unflatten of a dim before the jagged one: the jagged dim moves by the dims the split adds."""
    comps = _comps((2, 3))
    got = _ours(comps, "numpy").transpose(1, 2).unflatten(1, (3, 4))
    assert got.dim() == 4 and got.size(1) == 3 and got.size(2) == 4 and got.jagged_dim == 3
    for a, c in zip(_parts(got), comps):
        np.testing.assert_array_equal(a, c.numpy().T.reshape(3, 4, -1))
    wide = ln.nested_tensor([np.zeros((6, 2)), np.zeros((6, 3))], layout="jagged").unflatten(1, (2, 3))
    assert wide.size(1) == 2 and wide.size(2) == 3 and wide.jagged_dim == 3


def test_in_place_dropout_writes_through_a_transposed_view():
    ours = _ours(_comps((2, 3)), "numpy")
    t = ours.transpose(1, 2)
    t + 0  # (reads it once)
    ln.dropout(t, 1.0, True, inplace=True)
    assert all((p == 0).all() for p in _parts(ours)) and all((p == 0).all() for p in _parts(t))


# -- the memory-level methods -----------------------------------------------------------------------------------
STORAGE_OFFSETS = {
    "plain": lambda x: [x],
    "narrow": lambda x: [x.narrow(2, 3, 4)],
    "chunk": lambda x: x.chunk(3, -1),
    "chunk_batch": lambda x: x.chunk(2, 0),
    "index_last": lambda x: [x[..., -1]],
    "chunk_of_chunk_batch": lambda x: x.chunk(2, -1)[1].chunk(2, 0),
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("name", sorted(STORAGE_OFFSETS))
def test_storage_offset_matches_torch_jagged(name, lib):
    comps = _comps((2, 1, 3))
    want = [p.storage_offset() for p in STORAGE_OFFSETS[name](_theirs(comps))]
    assert [p.storage_offset() for p in STORAGE_OFFSETS[name](_ours(comps, lib))] == want


@pytest.mark.parametrize("lib", LIBS)
def test_storage_offset_of_values_with_an_offset(lib):
    values = torch.arange(60.0).reshape(5, 12)
    theirs = torch.nested.nested_tensor_from_jagged(values[2:], torch.tensor([0, 1, 3]))
    ours = ln.nested_tensor_from_jagged(values[2:] if lib == "torch" else values.numpy()[2:], np.array([0, 1, 3]))
    assert ours.storage_offset() == theirs.storage_offset() == 24
    assert ours.narrow(2, 3, 2).storage_offset() == theirs.narrow(2, 3, 2).storage_offset()


@pytest.mark.parametrize("lib", LIBS)
def test_new_factories_match_torch_jagged(lib):
    comps = _comps((2, 3))
    theirs, ours = _theirs(comps), _ours(comps, lib)
    for name, value in (("new_zeros", 0), ("new_ones", 1), ("new_empty", None)):
        for kwargs in ({}, {"dtype": torch.int32}):
            mine = dict(kwargs) if lib == "torch" or not kwargs else {"dtype": np.int32}
            want, got = getattr(theirs, name)((), **kwargs), getattr(ours, name)((), **mine)
            assert type(got) is (torch.Tensor if lib == "torch" else np.ndarray) and got.shape == ()
            assert _np(got).dtype == _np(want).dtype
            if value is not None:
                assert _np(got) == _np(want) == value
            with pytest.raises(RuntimeError, match=r"not supported for NJT with shape != \(\)"):
                getattr(theirs, name)((2,))
            with pytest.raises(RuntimeError, match=r"not supported for NJT with shape != \(\)"):
                getattr(ours, name)((2,))
    with pytest.raises(TypeError, match="size"):
        theirs.new_zeros()
    with pytest.raises(TypeError, match="size"):
        ours.new_zeros()
    if lib == "torch":
        leaf = ours.new_zeros((), requires_grad=True)
        assert leaf.requires_grad and leaf.is_leaf
    else:
        with pytest.raises(TypeError, match="requires_grad"):
            ours.new_zeros((), requires_grad=True)


@pytest.mark.parametrize("lib", LIBS)
def test_native_dropout_matches_torch_jagged(lib):
    comps = _comps((2, 0, 3))
    for p in (0.0, 0.5, 1.0):
        theirs, ours = _theirs(comps), _ours(comps, lib)
        out, mask = torch.native_dropout(ours, p, True) if lib == "torch" else ln.native_dropout(ours, p, True)
        want_out, want_mask = torch.native_dropout(theirs, p, True)
        assert out.shape[0] == want_out.shape[0] and _np(mask.values()).dtype == _np(want_mask.values()).dtype
        scale = 0.0 if p == 1 else 1 / (1 - p)
        for o, m, c in zip(_parts(out), _parts(mask), comps):
            np.testing.assert_allclose(o, c.numpy() * m * scale, rtol=1e-12)
            assert m.all() if p == 0 else (not m.any()) if p == 1 else True
    nan = ln.nested_tensor([np.array([np.nan, 1.0])])
    assert np.isnan(ln.native_dropout(nan, 1.0, True)[0].values()[0])  # (torch keeps NaN * 0 too)
    kept, mask = ln.native_dropout(_ours(comps, lib), 0.5, None)  # train=None trains, as torch's
    ints = ln.nested_tensor([np.arange(3), np.arange(2)])
    out, mask = ln.native_dropout(ints, 0.5, False)  # evaluation: any dtype, a copy, every element kept
    assert _parts(out)[0].tolist() == [0, 1, 2] and _parts(mask)[1].tolist() == [True, True]
    assert not np.shares_memory(out.values(), ints.values())
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ln.native_dropout(ints, 0.5, True)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        ln.native_dropout(_ours(comps, lib), 1.5, True)


def test_native_dropout_gradient_is_mask_times_scale():
    comps = _comps((2, 0, 3))
    ours = _ours(comps, "torch", requires_grad=True)
    out, mask = torch.native_dropout(ours, 0.25, True)
    assert out.requires_grad and not mask.requires_grad
    _loss([out.unbind()]).backward()
    for g, m, i in zip(_parts(ours.grad), _parts(mask), range(3)):
        np.testing.assert_allclose(g, _np(_weights(torch.zeros(g.shape), i, 0)) * m / 0.75, rtol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_is_pinned_is_shared_and_share_memory_match_torch_jagged(lib):
    comps = _comps((2, 3))
    theirs, ours = _theirs(comps), _ours(comps, lib)
    assert ours.is_pinned() is theirs.is_pinned() is False
    assert ours.is_shared() is theirs.is_shared() is False
    view = ours[..., 1:3]
    if lib == "numpy":
        with pytest.raises(TypeError, match="numpy data cannot move into shared memory"):
            ours.share_memory_()
        assert not ours.is_shared()
        return
    assert ours.share_memory_() is ours and theirs.share_memory_() is theirs
    assert ours.is_shared() and theirs.is_shared() and view.is_shared()  # the storage moved, views with it
    view.fill_(-1.0)
    assert (_parts(ours)[0][:, 1:3] == -1.0).all()


def test_detach_in_place_matches_torch_jagged():
    comps = _comps((2, 3))
    for build in (lambda t: t * 2, lambda t: t.exp()):
        theirs = build(_theirs(comps, requires_grad=True))
        ours = build(_ours(comps, "torch", requires_grad=True))
        other = ours.reshape(2, -1, 3, 4)  # another nested tensor over the same buffer keeps its history
        assert ours.detach_() is ours and theirs.detach_() is theirs
        for x in (ours, theirs):
            assert not x.requires_grad and x.grad_fn is None and x.is_leaf
        assert other.requires_grad
        _assert_parts(ours, theirs)
    theirs, ours = _theirs(comps, requires_grad=True) * 2, _ours(comps, "torch", requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        theirs.narrow(2, 1, 2).detach_()
    for view in (ours.narrow(2, 1, 2), ours.transpose(1, 2)):
        with pytest.raises(RuntimeError, match="Can't detach views in-place"):
            view.detach_()
    assert ours.requires_grad
    numpy_nt = _ours(comps, "numpy")
    assert numpy_nt.detach_() is numpy_nt and not numpy_nt.requires_grad


@pytest.mark.parametrize("lib", LIBS)
def test_apply_matches_torch_jagged(lib):
    comps = _comps((2, 0, 3))
    theirs, ours = _theirs(comps), _ours(comps, lib)
    assert ours.apply_(lambda v: v * v - 1) is ours
    theirs.apply_(lambda v: v * v - 1)
    _assert_parts(ours, theirs)
    ints = [torch.arange(4).reshape(2, 2), torch.arange(2).reshape(1, 2)]
    theirs = _theirs(ints)
    ours = ln.nested_tensor([c.clone() if lib == "torch" else c.numpy() for c in ints], layout="jagged")
    theirs.apply_(lambda v: v / 2)  # a float result cast to the ints, as torch casts it
    ours.apply_(lambda v: v / 2)
    _assert_parts(ours, theirs)
    theirs[..., 1:2].apply_(lambda v: v + 10)  # (a view: written through)
    ours[..., 1:2].apply_(lambda v: v + 10)
    _assert_parts(ours, theirs)
    before = _parts(ours)

    def boom(v):
        if v > 5:
            raise ValueError("no")
        return -v

    with pytest.raises(ValueError, match="no"):
        ours.apply_(boom)
    for a, b in zip(_parts(ours), before):  # nothing written
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="callable"):
        ours.apply_(3)


def test_apply_refuses_data_that_requires_grad():
    ours = _ours(_comps((2, 3)), "torch", requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call apply_\\(\\) on Variable that requires grad"):
        ours.apply_(lambda v: v)
    ours.detach().apply_(lambda v: 0.0)  # (the detached data: allowed, and the leaf sees it, as torch's)
    assert all((p == 0).all() for p in _parts(ours))
