"""Invariants of nested tensors on random ragged shapes (hypothesis)."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
import lodtensor.nested as ln


@st.composite
def component_lists(draw, max_rank=3, ragged=None):
    """Lists of float64 components of one rank; each dim ragged or not, zeros allowed."""
    rank = draw(st.integers(1, max_rank))
    n = draw(st.integers(1, 5))
    fixed = [draw(st.integers(1, 3)) for _ in range(rank)]
    if ragged is None:
        ragged = draw(st.sets(st.integers(0, rank - 1)))
    parts = []
    for i in range(n):
        shape = [draw(st.integers(0, 4)) if d in ragged else fixed[d] for d in range(rank)]
        parts.append(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * (i + 1) / 7.0)
    return parts


def same(parts, expected):
    assert len(parts) == len(expected)
    for a, b in zip(parts, expected):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


@given(component_lists())
def test_components_round_trip(parts):
    nt = ln.nested_tensor(parts)
    same(nt.unbind(), parts)
    same(ln.as_nested_tensor(list(nt.unbind())).to_tensor_list(), parts)
    assert nt.numel() == sum(p.size for p in parts)
    assert nt.nested_size().tolist() == [list(p.shape) for p in parts]


@given(component_lists())
def test_padding_then_slicing_restores_components(parts):
    nt = ln.nested_tensor(parts)
    padded = ln.to_padded_tensor(nt, np.nan)
    same([padded[(i,) + tuple(slice(0, s) for s in p.shape)] for i, p in enumerate(parts)], parts)
    assert int(np.isnan(padded).sum()) == padded.size - nt.numel()
    _, mask = nt.to_masked(0.0, mask_dim=nt.dim())
    assert int(mask.sum()) == nt.numel()


@given(component_lists())
def test_reshape_keep_and_transpose_twice_are_identities(parts):
    nt = ln.nested_tensor(parts)
    keep = [len(parts)] + [-1] * (nt.dim() - 1)
    same(nt.reshape(keep).unbind(), parts)
    if nt.dim() >= 3:
        same(nt.transpose(1, -1).transpose(1, -1).unbind(), parts)


@given(component_lists(), st.data())
def test_softmax_sums_to_one(parts, data):
    nt = ln.nested_tensor(parts)
    dim = data.draw(st.integers(1, nt.dim() - 1))
    for p, s in zip(parts, ln.softmax(nt, dim).unbind()):
        if p.size:
            np.testing.assert_allclose(s.sum(axis=dim - 1), 1.0, rtol=1e-12)


@given(component_lists(), st.data())
def test_sums_over_any_dim_equal_per_component_sums(parts, data):
    """ln.sum / ln.mean over any component dim equal each component's own reduction (dense results
    are stacked components), whichever dims are ragged."""
    nt = ln.nested_tensor(parts)
    dim = data.draw(st.integers(1, nt.dim() - 1))
    for name, ref in (("sum", np.sum), ("mean", np.mean)):
        out = getattr(ln, name)(nt, dim=dim)
        got = out.unbind() if isinstance(out, ln.NestedTensor) else list(out)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy warns on the mean of nothing
            expected = [ref(p, axis=dim - 1) for p in parts]
        for a, b in zip(got, expected):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ln.sum(nt), sum(p.sum() for p in parts), rtol=1e-12, atol=1e-12)


@given(component_lists(ragged={0}))
def test_lod_case_round_trips_without_copies(parts):
    nt = ln.nested_tensor(parts)
    t = nt.to_lod_tensor()
    assert t.lengths(0).tolist() == [len(p) for p in parts]
    assert np.shares_memory(t.data, nt._buffer) or t.data.size == 0
    back = t.to_nested()
    same(back.unbind(), parts)
    data, offsets = nt.to_packed()
    assert offsets.tolist() == lt.LoD.from_lengths([[len(p) for p in parts]]).offsets(0).tolist()


@given(component_lists())
def test_backends_agree(parts):
    torch = pytest.importorskip("torch")
    a = ln.nested_tensor(parts)
    b = ln.nested_tensor([torch.from_numpy(p) for p in parts])
    for op in (ln.relu, ln.gelu, lambda x: x * 2 - 1, lambda x: ln.softmax(x, -1)):
        same([t.numpy() for t in op(b).unbind()], op(a).unbind())


def test_threaded_kernels_work_in_a_forked_child():
    import multiprocessing

    big = ln.nested_tensor([np.linspace(-3, 3, 300_000, dtype=np.float32)])
    expected = ln.gelu(big).unbind()[0]  # starts the thread pool in this process
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_gelu_sum, (np.linspace(-3, 3, 300_000, dtype=np.float32),)).get(timeout=60)
    assert np.isclose(got, float(expected.sum()), rtol=1e-6)


def _gelu_sum(values):
    return float(ln.gelu(ln.nested_tensor([values])).unbind()[0].sum())
