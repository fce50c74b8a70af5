"""Shape ops and jagged constructors against torch 2.13's jagged layout: components, and which calls raise."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln
from lodtensor.nested._layouts import to_layout

from ._cases import run_call

torch = pytest.importorskip("torch")


def _arrays(seed, lengths=(2, 0, 3), row=(1, 4)):
    g = np.random.default_rng(seed)
    return [g.standard_normal((n, *row)).astype(np.float32) for n in lengths]


def _pair(arrays, lib="numpy"):
    ours = ln.nested_tensor(arrays, layout="jagged")
    theirs = torch.nested.nested_tensor([torch.from_numpy(a.copy()) for a in arrays], layout=torch.jagged)
    return (ours.to_torch() if lib == "torch" else ours), theirs


_run = run_call


def _same(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
        return
    assert isinstance(ours, ln.NestedTensor)
    got, want = ours.unbind(), theirs.unbind()
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
        assert a.shape == tuple(b.shape)
        np.testing.assert_array_equal(a, b.numpy())


def _compare(ours_call, theirs_call):
    theirs, their_err = _run(theirs_call)
    ours, our_err = _run(ours_call)
    if their_err is not None:
        assert our_err is not None, f"torch raised {their_err!r}, we returned a result"
        return
    assert our_err is None, f"we raised {our_err!r}, torch returned a result"
    _same(ours, theirs)


CALLS = {
    "unsqueeze0": lambda x: x.unsqueeze(0),
    "unsqueeze1": lambda x: x.unsqueeze(1),
    "unsqueeze2": lambda x: x.unsqueeze(2),
    "unsqueeze-1": lambda x: x.unsqueeze(-1),
    "squeeze2": lambda x: x.squeeze(2),
    "squeeze1": lambda x: x.squeeze(1),
    "squeeze0": lambda x: x.squeeze(0),
    "squeeze3": lambda x: x.squeeze(3),
    "flatten": lambda x: x.flatten(),
    "flatten1": lambda x: x.flatten(1),
    "flatten2": lambda x: x.flatten(2),
    "flatten23": lambda x: x.flatten(2, 3),
    "unflatten": lambda x: x.unflatten(3, (2, 2)),
    "unflatten-1": lambda x: x.unflatten(-1, (2, -1)),
    "unflatten1": lambda x: x.unflatten(1, (1, -1)),
    "narrow3": lambda x: x.narrow(3, 1, 2),
    "narrow-neg": lambda x: x.narrow(3, -2, 2),
    "narrow1": lambda x: x.narrow(1, 0, 1),
    "narrow-too-long": lambda x: x.narrow(3, 2, 3),
    "chunk-1": lambda x: x.chunk(2, -1),
    "chunk3": lambda x: x.chunk(3, 3),
    "chunk0": lambda x: x.chunk(2, 0),
    "chunk1": lambda x: x.chunk(2, 1),
    "split": lambda x: x.split(3, -1),
    "split-list": lambda x: x.split([1, 3], -1),
    "split0": lambda x: x.split(1, 0),
    "split1": lambda x: x.split(2, 1),
    "split_with_sizes": lambda x: x.split_with_sizes([1, 3], 3),
    "split_with_sizes-bad": lambda x: x.split_with_sizes([1, 2], 3),
    "expand": lambda x: x.expand(3, -1, 5, 4),
    "expand-same": lambda x: x.expand(-1, -1, 1, -1),
    "expand-batch": lambda x: x.expand(4, -1, 1, 4),
    "expand-ragged": lambda x: x.expand(3, 2, 1, 4),
}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_shape_ops_match_jagged(name, lib):
    ours, theirs = _pair(_arrays(0), lib)
    _compare(lambda: CALLS[name](ours), lambda: CALLS[name](theirs))


@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1])
def test_cat_matches_jagged(dim):
    a, b = _arrays(1), _arrays(2, row=(1, 2))
    ours_a, theirs_a = _pair(a)
    ours_b = ln.nested_tensor(b)
    theirs_b = torch.nested.nested_tensor_from_jagged(torch.from_numpy(np.concatenate(b)), theirs_a.offsets())
    _compare(lambda: ln.cat([ours_a, ours_b], dim), lambda: torch.cat([theirs_a, theirs_b], dim))


def test_views_share_the_buffer_and_keep_autograd():
    parts = [torch.rand(n, 1, 4, dtype=torch.float64) for n in (2, 0, 3)]
    offsets = ln.nested_tensor(parts).offsets()
    values = torch.cat(parts).requires_grad_(True)

    def f(v):
        nt = ln.nested_tensor_from_jagged(v, offsets)
        x = nt.squeeze(2).unsqueeze(-1).flatten(2).unflatten(2, (2, 2)).flatten(2)
        y = ln.cat([x.narrow(2, 0, 2) * 2, x.split(2, -1)[1]], -1).unsqueeze(2).expand(-1, -1, 3, -1)
        return y.values()

    assert torch.autograd.gradcheck(f, (values,))
    nt = ln.nested_tensor(_arrays(3))
    assert nt.squeeze(2)._buffer is nt._buffer and nt.unsqueeze(1)._buffer is nt._buffer


def test_shape_ops_on_images():
    """Several ragged dims (beyond torch's jagged layout): every component as dense torch gives it."""
    g = np.random.default_rng(4)
    parts = [g.standard_normal((3, h, w, 1)).astype(np.float32) for h, w in [(2, 4), (1, 3), (3, 4)]]
    nt = ln.nested_tensor(parts)
    checks = [
        (nt.narrow(1, 1, 2), lambda p: p[1:3]),
        (nt.squeeze(-1), lambda p: p[..., 0]),
        (nt.unsqueeze(1), lambda p: p[None]),
        (nt.expand(-1, -1, -1, -1, 2), lambda p: np.broadcast_to(p, p.shape[:-1] + (2,))),
        (ln.cat([nt, nt], 1), lambda p: np.concatenate([p, p], 0)),
        (nt.split(1, 1)[2], lambda p: p[2:3]),
    ]
    for out, fn in checks:
        for got, p in zip(out.unbind(), parts):
            np.testing.assert_array_equal(got, fn(p))
    with pytest.raises(ValueError, match="ragged dim"):
        nt.narrow(2, 0, 1)


# -- jagged constructors -------------------------------------------------------------------------
def test_from_jagged_with_holes_matches_torch():
    values = np.arange(20.0, dtype=np.float32).reshape(10, 2)
    offsets, lengths = np.array([0, 2, 5, 9]), np.array([1, 3, 0])
    ours = ln.nested_tensor_from_jagged(values, offsets, lengths=lengths)
    theirs = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values), torch.from_numpy(offsets),
                                                    lengths=torch.from_numpy(lengths))
    _same(ours, theirs)
    assert ours.lengths().tolist() == theirs.lengths().tolist()
    assert ours.offsets().tolist() == theirs.offsets().tolist()
    assert ours.values() is values and not ours.is_contiguous() and ours.jagged_dim == 1
    _same(ours * 2, theirs * 2)
    doubled, theirs_doubled = ours * 2, theirs * 2  # elementwise results keep the holes, as torch's (_holes)
    assert doubled.lengths().tolist() == theirs_doubled.lengths().tolist()
    assert doubled.offsets().tolist() == theirs_doubled.offsets().tolist()
    np.testing.assert_array_equal(doubled.values(), theirs_doubled.values().numpy())
    with pytest.raises(ValueError, match="outside the 10 rows"):
        ln.nested_tensor_from_jagged(values, [0, 8, 9], lengths=[1, 3])
    with pytest.raises(ValueError, match="len\\(lengths\\) \\+ 1"):
        ln.nested_tensor_from_jagged(values, [0, 8], lengths=[1, 3])


def test_from_jagged_dim_2_matches_torch():
    values = np.arange(24.0, dtype=np.float32).reshape(2, 6, 2)
    ours = ln.nested_tensor_from_jagged(values, np.array([0, 2, 6]), jagged_dim=2)
    theirs = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values), torch.tensor([0, 2, 6]), jagged_dim=2)
    _same(ours, theirs)
    assert ours.jagged_dim == 2 == theirs._ragged_idx


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_narrow_dense_matches_torch(lib):
    x = np.arange(36.0, dtype=np.float32).reshape(3, 6, 2)
    start, length = np.array([0, 1, 5]), np.array([2, 3, 1])
    arg = torch.from_numpy(x) if lib == "torch" else x
    ours = ln.narrow(arg, 1, start, length, layout="jagged")
    theirs = torch.nested.narrow(torch.from_numpy(x), 1, torch.from_numpy(start), torch.from_numpy(length),
                                 layout=torch.jagged)
    _same(ours, theirs)
    assert ours.lengths().tolist() == theirs.lengths().tolist()
    assert ours.offsets().tolist() == theirs.offsets().tolist()
    _same(ln.narrow(arg, 1, 2, 3, layout="jagged"),
          torch.nested.narrow(torch.from_numpy(x), 1, 2, 3, layout=torch.jagged))
    with pytest.raises(ValueError, match="jagged layout only supports dim=1"):
        ln.narrow(arg, 2, 0, 1, layout="jagged")
    with pytest.raises(IndexError, match="exceeds dimension size"):
        ln.narrow(arg, 1, start, length + 1, layout="jagged")


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
def test_masked_select_matches_torch(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours = ln.masked_select(x, x > 0)
    theirs = torch.nested.masked_select(torch.from_numpy(x), torch.from_numpy(x > 0))
    _same(ours, theirs)
    assert ours.offsets().tolist() == theirs.offsets().tolist()
    with pytest.raises(ValueError, match="does not broadcast"):  # a size-1 dim broadcasts, as torch's
        ln.masked_select(x, (x > 0)[..., :2])


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=6), width=st.sampled_from([2, 4, 6]),
       op=st.sampled_from(["unsqueeze2", "squeeze2", "flatten23", "narrow3", "chunk-1", "split", "expand-same"]))
def test_random_lengths_match_jagged(lengths, width, op):
    if sum(lengths) == 0:
        lengths = [*lengths[:-1], 1]
    ours, theirs = _pair(_arrays(len(lengths), lengths, (1, width)))
    _compare(lambda: CALLS[op](ours), lambda: CALLS[op](theirs))


# -- layouts ----------------------------------------------------------------------------------------
def test_to_layout_round_trips():
    parts = _arrays(5, lengths=(2, 0, 3), row=(4,))
    nt = ln.nested_tensor(parts)
    padded, mask = nt.to(ln.Layout.Masked)
    assert mask.tolist() == [[True, True, False], [False] * 3, [True] * 3]
    np.testing.assert_array_equal(padded[2], parts[2])
    data, offsets = nt.to(ln.Layout.Packed)
    assert offsets.tolist() == [0, 2, 2, 5] and data.shape == (5, 4)
    assert [c.shape for c in nt.to(ln.Layout.List)] == [(2, 4), (0, 4), (3, 4)]
    t = nt.to(ln.Layout.LoD)
    assert t.lod() == [[0, 2, 2, 5]] and np.shares_memory(np.asarray(t.data), nt.values())
    assert nt.to(ln.Layout.Padded).shape == (3, 3, 4)
    assert nt.to("masked")[1].shape == (3, 3)
    full = ln.nested_tensor([parts[0], parts[2]])  # torch's PackedSequence has no empty sequences
    packed = full.to_torch().to(ln.Layout.PackedSequence)
    back = ln.as_nested_tensor(packed)
    for a, b in zip(back.unbind(), [parts[0], parts[2]]):
        np.testing.assert_array_equal(a.numpy(), b)
    with pytest.raises(ValueError, match="layout must be one of"):
        to_layout(nt, "sparse")
