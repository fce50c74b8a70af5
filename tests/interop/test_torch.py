"""torch: jagged nested tensors, PackedSequence, EmbeddingBag, varlen attention; against real torch."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
import lodtensor.nested as ln

from .._torch_range import public_njt, safe_globals, seqlens, torch_jagged

torch = pytest.importorskip("torch")
nn = torch.nn
rnn = torch.nn.utils.rnn

DTYPES = ["float32", "float64", "int64", "int32"]


def _one_level(lengths, row_shape=(), dtype="float32", backend="numpy"):
    rows = int(sum(lengths))
    data = np.arange(rows * int(np.prod(row_shape)), dtype=dtype).reshape((rows, *row_shape))
    if backend == "torch":
        data = torch.from_numpy(data)
    return lt.LoDTensor(data, recursive_sequence_lengths=[list(lengths)])


one_level = st.builds(
    _one_level,
    st.lists(st.integers(0, 5), min_size=1, max_size=10),
    st.sampled_from([(), (3,), (2, 2)]),
    st.sampled_from(DTYPES),
    st.sampled_from(["numpy", "torch"]),
)


@given(t=one_level)
def test_jagged_round_trip_shares_buffers(t):
    njt = t.to_nested_jagged()
    assert njt.layout == torch.jagged and njt.size(0) == len(t)
    data = t.data if isinstance(t.data, torch.Tensor) else torch.from_numpy(t.data)
    if t.num_rows:
        assert njt.values().data_ptr() == data.data_ptr()
    assert njt.offsets().data_ptr() != t.lod.levels[0].__array_interface__["data"][0]  # torch's own copy
    for got, want in zip(njt.unbind(), t.unbind()):
        want = want.data if isinstance(want.data, torch.Tensor) else torch.from_numpy(want.data)
        assert torch.equal(got, want)
    back = lt.from_torch(njt)
    assert back.lod() == t.lod() and back.shape() == t.shape()
    assert back.data.data_ptr() == njt.values().data_ptr() or t.num_rows == 0


def _public_njt(t):
    """torch's public constructor on the same buffers: the oracle for to_nested_jagged."""
    data = t.data if isinstance(t.data, torch.Tensor) else torch.from_numpy(t.data)
    lengths = np.diff(t.lod.levels[0])
    offsets = t.to_nested_jagged().offsets()  # the same offsets tensor, so the same nested int
    return public_njt(data, offsets, int(lengths.min()), int(lengths.max()))


@given(t=one_level)
def test_to_nested_jagged_equals_torchs_constructor(t):
    # NumPy data takes the direct NestedTensor path, torch data torch's view op: both must
    # give what nested_tensor_from_jagged gives, metadata included
    njt, want = t.to_nested_jagged(), _public_njt(t)
    assert type(njt) is type(want)
    assert njt.shape == want.shape and njt.dtype == want.dtype and njt.device == want.device
    assert njt._ragged_idx == want._ragged_idx and njt.lengths() is None
    assert seqlens(njt) == seqlens(want)
    assert njt.requires_grad == want.requires_grad
    assert all(torch.equal(a, b) for a, b in zip(njt.unbind(), want.unbind()))
    # same nested int: ops between ours and torch's own njt work
    assert torch.equal((njt + want).values(), want.values() * 2)
    assert torch.equal(torch_jagged(torch.nested.to_padded_tensor, njt, -1), torch.nested.to_padded_tensor(want, -1))
    if isinstance(t.data, torch.Tensor):  # caller-held data: a view of it, as torch makes
        assert njt._is_view() and njt._base is t.data


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_to_nested_jagged_gradients_equal_torchs(dtype):
    lengths = [3, 1, 4, 2]
    x = torch.randn(10, 5, dtype=dtype)
    grads = []
    for build in ("lodtensor", "torch"):
        leaf = x.clone().requires_grad_(True)
        t = lt.from_torch(leaf, recursive_sequence_lengths=[lengths])
        njt = t.to_nested_jagged() if build == "lodtensor" else _public_njt(t)
        assert njt.requires_grad and njt.grad_fn is not None
        out = torch_jagged(torch.nested.to_padded_tensor, njt.sin() * njt, 0.0)
        out.sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[0], grads[1])
    torch.autograd.gradcheck(
        lambda v: torch.nested.to_padded_tensor(lt.from_torch(v, [[0, 3, 4, 8, 10]]).to_nested_jagged().cos(), 0.0),
        (torch.randn(10, 2, dtype=torch.float64, requires_grad=True),),
    )


def _backward_after_write(build, write):
    """Backward through an njt saved for backward, after (or without) an in-place write to its data."""
    x = torch.arange(18.0).reshape(6, 3)
    w = torch.ones(6, 3, requires_grad=True)
    njt = build(x)
    y = torch_jagged(torch.nested.to_padded_tensor, njt * torch.nested.nested_tensor_from_jagged(w, njt.offsets()), 0.0)
    y = y.sum()
    if write:
        x.add_(1)
    try:
        y.backward()
    except Exception as err:  # noqa: BLE001 - the outcome itself is compared with torch's
        return type(err), str(err)
    return w.grad


@pytest.mark.parametrize("write", [False, True])
def test_to_nested_jagged_in_place_version_check_like_torch(write):
    # torch data: the njt shares the data's version counter, so an in-place write to the
    # data after the njt was saved for backward is caught exactly as with torch's constructor
    # (torch 2.13 then fails while formatting its message; the same failure either way)
    offsets = torch.tensor([0, 2, 6])
    ours = _backward_after_write(lambda x: lt.from_torch(x, [[0, 2, 6]]).to_nested_jagged(), write)
    torchs = _backward_after_write(lambda x: torch.nested.nested_tensor_from_jagged(x, offsets), write)
    if write:
        assert isinstance(torchs, tuple) and ours == torchs
    else:
        assert torch.equal(ours, torchs) and torch.equal(ours, torch.arange(18.0).reshape(6, 3))


def test_from_torch_recognises_its_own_offsets_in_o1():
    t = _one_level([3] * 200)
    back = lt.from_torch(t.to_nested_jagged())
    assert back.lod.levels[0].__array_interface__["data"][0] == t.lod.levels[0].__array_interface__["data"][0]


def test_from_torch_foreign_njt():
    parts = [torch.randn(2, 3), torch.randn(0, 3), torch.randn(4, 3)]
    njt = torch.nested.as_nested_tensor(parts, layout=torch.jagged)
    t = lt.from_torch(njt)
    assert t.lod() == [[0, 2, 2, 6]]
    assert t.data.data_ptr() == njt.values().data_ptr()
    assert torch.equal(t.data, torch.cat(parts))
    # the LoD owns a checked copy of foreign offsets: writing torch's offsets cannot reach it
    njt.offsets()[1] = 5
    assert t.lod() == [[0, 2, 2, 6]]


def test_autograd_through_jagged():
    x = torch.arange(6.0, requires_grad=True)
    t = lt.from_torch(x, [[0, 2, 6]])
    njt = t.to_nested_jagged()
    (njt.values() * 2).sum().backward()
    assert x.grad.tolist() == [2.0] * 6


def test_holes_raise():
    values = torch.arange(10.0)
    njt = torch.nested.nested_tensor_from_jagged(values, torch.tensor([0, 3, 6]), lengths=torch.tensor([2, 3]))
    with pytest.raises(ValueError, match="holes"):
        lt.from_torch(njt)


def test_bad_jagged_calls():
    t = lt.LoDTensor(np.arange(4.0), [[0, 1, 2], [0, 1, 4]])
    with pytest.raises(ValueError, match="lod_level 1, got 2"):
        t.to_nested_jagged()
    with pytest.raises(TypeError, match="do not pass lod"):
        lt.from_torch(_one_level([1, 2]).to_nested_jagged(), [[0, 3]])
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        lt.from_torch(np.zeros(3))


# -- PackedSequence --------------------------------------------------------------------------
lengths_pos = st.lists(st.integers(1, 6), min_size=1, max_size=40)  # past 16: torch's sort is not stable


@given(lengths=lengths_pos, enforce=st.booleans())
def test_packed_sequence_matches_torch(lengths, enforce):
    if enforce:
        lengths = sorted(lengths, reverse=True)
    t = _one_level(lengths, (2,), "float64")
    ps = t.to_packed_sequence(enforce_sorted=enforce)
    seqs = [torch.from_numpy(s.data) for s in t.unbind()]
    ref = rnn.pack_sequence(seqs, enforce_sorted=enforce)
    assert torch.equal(ps.batch_sizes, ref.batch_sizes)
    assert torch.equal(ps.data, ref.data)  # equal lengths too: they keep torch's sort's order
    if not enforce:
        assert torch.equal(ps.sorted_indices, ref.sorted_indices)
        assert torch.equal(ps.unsorted_indices, ref.unsorted_indices)
    nps = ln.as_nested_tensor(list(seqs), layout="jagged").to_packed_sequence(enforce_sorted=enforce)
    assert torch.equal(nps.data, ref.data) and torch.equal(nps.batch_sizes, ref.batch_sizes)
    for got, want in zip(rnn.unpack_sequence(ps), seqs):
        assert torch.equal(got, want)
    back = lt.from_packed_sequence(ps)
    assert back.lod() == t.lod() and torch.equal(back.data, torch.from_numpy(t.data))
    assert lt.from_packed_sequence(ref).lod() == t.lod()


def test_packed_sequence_orders_equal_lengths_as_torch_does():
    """Past 16 sequences torch's sort is not stable: a stable argsort gave other sorted_indices and data."""
    lengths = np.random.default_rng(7).integers(1, 4, size=40).tolist()
    t = _one_level(lengths, (2,), "float64")
    seqs = [torch.from_numpy(s.data) for s in t.unbind()]
    ref = rnn.pack_sequence(seqs, enforce_sorted=False)
    for ps in (t.to_packed_sequence(), ln.as_nested_tensor(seqs, layout="jagged").to_packed_sequence()):
        assert torch.equal(ps.sorted_indices, ref.sorted_indices) and torch.equal(ps.data, ref.data)
        assert torch.equal(ps.unsorted_indices, ref.unsorted_indices)


def test_packed_lstm_equals_per_sequence():
    torch.manual_seed(0)
    lengths = [3, 0 + 1, 5, 2, 5]
    t = lt.from_torch(torch.randn(sum(lengths), 4, requires_grad=True), recursive_sequence_lengths=[lengths])
    lstm = nn.LSTM(4, 3, batch_first=True)
    out, (h, _) = lstm(t.to_packed_sequence())
    for i, seq in enumerate(t.unbind()):
        o1, (h1, _) = lstm(seq.data[None])
        torch.testing.assert_close(h[:, i], h1[:, 0])
        torch.testing.assert_close(lt.from_packed_sequence(out)[i].data, o1[0])
    h.sum().backward()
    assert t.data.grad is not None and t.data.grad.shape == (sum(lengths), 4)


def test_packed_sequence_bad_input():
    with pytest.raises(ValueError, match="sequence 1 is empty"):
        _one_level([2, 0, 1]).to_packed_sequence()
    with pytest.raises(ValueError, match=r"non-increasing, but lengths\[0\]=1 < lengths\[1\]=2"):
        _one_level([1, 2]).to_packed_sequence(enforce_sorted=True)
    bad = rnn.PackedSequence(torch.zeros(3), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="batch_sizes must be positive, non-increasing"):
        lt.from_packed_sequence(bad)
    with pytest.raises(TypeError, match="must be a PackedSequence"):
        lt.from_packed_sequence(torch.zeros(3))


# -- EmbeddingBag and attention --------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_embedding_bag_matches_per_sequence(mode, lengths, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10, size=sum(lengths))
    t = lt.LoDTensor(ids, recursive_sequence_lengths=[lengths])
    torch.manual_seed(seed)
    bag = nn.EmbeddingBag(10, 4, mode=mode)
    inp, offsets = t.embedding_bag_inputs()
    assert inp.dtype == torch.int64
    if ids.size:
        assert inp.data_ptr() == ids.__array_interface__["data"][0]
    out = bag(inp, offsets)
    for i, seq in enumerate(t.unbind()):
        rows = bag.weight[torch.from_numpy(seq.data)]
        want = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0).values if len(rows) else None}[mode]
        torch.testing.assert_close(out[i], want if len(rows) else torch.zeros(4))


def test_embedding_bag_inputs_bad_data():
    with pytest.raises(ValueError, match="1-D integer ids"):
        lt.LoDTensor(np.ones(3), [[0, 3]]).embedding_bag_inputs()


def test_sdpa_on_jagged_equals_per_sequence():
    torch.manual_seed(1)
    lengths = [3, 1, 6, 2]
    heads, dim = 2, 4
    t = lt.from_torch(torch.randn(sum(lengths), heads, dim), recursive_sequence_lengths=[lengths])
    q = t.to_nested_jagged().transpose(1, 2)  # (B, heads, (j), dim)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q).transpose(1, 2)
    for got, seq in zip(out.unbind(), t.unbind()):
        x = seq.data.transpose(0, 1)[None]
        want = torch.nn.functional.scaled_dot_product_attention(x, x, x)[0].transpose(0, 1)
        torch.testing.assert_close(got, want)


def test_cu_seqlens():
    t = lt.LoDTensor(np.arange(6.0), [[0, 1, 3], [0, 2, 2, 6]])
    cu, longest = t.cu_seqlens()
    assert cu.dtype == np.int32 and cu.tolist() == [0, 2, 2, 6] and longest == 4
    cu0, longest0 = t.cu_seqlens(level=0)
    assert cu0.tolist() == [0, 2, 6] and longest0 == 4
    tt = t.to_torch()
    cu_t, _ = tt.cu_seqlens()
    assert isinstance(cu_t, torch.Tensor) and cu_t.dtype == torch.int32 and cu_t.tolist() == [0, 2, 2, 6]


def test_from_torch_keeps_autograd_of_a_computed_njt():
    x = torch.arange(6.0, requires_grad=True)
    njt = torch.nested.nested_tensor_from_jagged(x, torch.tensor([0, 2, 6])) * 3
    t = lt.from_torch(njt)
    assert t.lod() == [[0, 2, 6]] and t.data.requires_grad
    t.data.sum().backward()
    assert x.grad.tolist() == [3.0] * 6


@pytest.mark.parametrize("change", ["class moved", "view op moved", "view op changed", "constructor changed"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_to_nested_jagged_falls_back_when_torchs_private_names_change(monkeypatch, change, backend):
    """The fast paths use torch's private NestedTensor class, _nt_view_dummy and _nested_view_from_jagged:
    if a torch version moves or changes any of them (simulated where lodtensor looks them up, as torch's
    public constructor keeps working), that constructor gives the same tensor."""
    from torch.nested._internal import nested_tensor as private  # noqa: PLC0415

    from lodtensor.interop import torch as interop  # noqa: PLC0415

    t = _one_level([3, 1, 4], (2,), backend=backend)
    want = _public_njt(t)
    if change == "class moved":
        monkeypatch.setattr(interop, "_jagged_class", lambda: None)
    elif change == "view op moved":
        real_import = __import__

        def no_view_dummy(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
            if name == "torch.nested._internal.nested_tensor" and "_nt_view_dummy" in (fromlist or ()):
                raise ImportError("cannot import name '_nt_view_dummy'")
            return real_import(name, globals, locals, fromlist, level)

        monkeypatch.setattr("builtins.__import__", no_view_dummy)
    elif change == "view op changed":

        def new_arguments(*args):
            raise TypeError("_nested_view_from_jagged() takes 4 positional arguments")

        monkeypatch.setattr(interop, "_jagged_view_op", lambda torch: (new_arguments, private._nt_view_dummy))
    else:

        class Changed(private.NestedTensor):  # a constructor without the _metadata_cache keyword
            @staticmethod
            def __new__(cls, values, offsets, **kwargs):
                if "_metadata_cache" in kwargs:
                    raise TypeError("__new__() got an unexpected keyword argument '_metadata_cache'")
                return private.NestedTensor.__new__(private.NestedTensor, values, offsets, **kwargs)

        monkeypatch.setattr(interop, "_jagged_class", lambda: Changed)
    njt = t.to_nested_jagged()
    monkeypatch.undo()
    assert type(njt) is type(want) and seqlens(njt) == seqlens(want)
    assert all(torch.equal(a, b) for a, b in zip(njt.unbind(), want.unbind()))
    assert njt.values().data_ptr() == want.values().data_ptr()
    assert njt.requires_grad == want.requires_grad


def test_torch_load_with_weights_only_admits_lodtensor_objects():
    import io

    objs = {"t": lt.LoDTensor(torch.arange(6.0), [[0, 2, 6]]), "n": lt.LoDTensor(np.arange(3.0), [[0, 1, 3]]),
            "lod": lt.LoD([[0, 1, 3]]), "nt": ln.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)],
                                                               layout=torch.jagged)}
    buf = io.BytesIO()
    torch.save(objs, buf)
    buf.seek(0)
    with pytest.raises(Exception, match="weights_only|Unsupported global"):
        torch.load(buf, weights_only=True)  # torch's default refuses what it does not know
    buf.seek(0)
    with safe_globals(lt.interop.torch_safe_globals()):
        back = torch.load(buf, weights_only=True)
    assert back["t"].lod() == [[0, 2, 6]] and torch.equal(back["t"].data, objs["t"].data)
    assert back["n"].tolist() == objs["n"].tolist() and back["lod"] == objs["lod"]
    assert back["nt"].nested_size().tolist() == [[2, 3], [1, 3]]


@pytest.mark.parametrize("make", [np.zeros, torch.zeros], ids=["numpy", "torch"])
@pytest.mark.parametrize("lod", [[[0, 0]], [[0]], [[0, 0, 0], [0]]], ids=["empty-sequences", "batch0", "hollow"])
def test_torch_load_with_weights_only_takes_tensors_of_no_element(make, lod):
    """No bytes pickled as b"", which protocol 2 writes as a call of builtins.bytes: torch's weights_only
    loader refused every LoDTensor of 0 elements."""
    import io

    t = lt.LoDTensor(make((0, 3)), lod)
    buf = io.BytesIO()
    torch.save({"t": t}, buf)
    buf.seek(0)
    with safe_globals(lt.interop.torch_safe_globals()):
        back = torch.load(buf, weights_only=True)["t"]
    assert back.lod() == lod and tuple(back.data.shape) == (0, 3) and type(back.data) is type(t.data)
