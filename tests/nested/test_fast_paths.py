"""The fast paths of softmax/log_softmax: row blocks over a regular last dim, and per-component
results written in place for components ragged in several dims. Each is checked against the plain
NumPy formula and against torch.nested where torch is installed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln
from lodtensor.backend import get_backend


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("name, ref", [("softmax", _softmax), ("log_softmax", _log_softmax)])
def test_row_blocks_match_the_formula(name, ref, threads):
    # 2,000 rows x 97: above the row-block threshold, several blocks, a ragged last block
    g = np.random.default_rng(5)
    lengths = g.integers(1, 40, size=100)
    data = (g.standard_normal((int(lengths.sum()), 97)) * 4).astype(np.float32)
    data[3, :5] = -np.inf  # a row with some -inf scores
    nt = ln.nested_tensor_from_jagged(data, np.concatenate([[0], np.cumsum(lengths)]))
    ln.set_num_threads(threads)
    try:
        got = getattr(ln, name)(nt, -1).values()
    finally:
        ln.set_num_threads(None)
    with np.errstate(invalid="ignore"):
        want = ref(data.astype(np.float64), 1)
    assert data.size >= 1 << 16
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_out_argument_of_the_dense_kernels(name):
    be = get_backend("numpy")
    x = np.random.default_rng(1).standard_normal((300, 257)).astype(np.float32)
    for axis in (0, 1, -1):
        want = getattr(be, name)(x, axis)
        out = np.full_like(x, np.nan)
        assert getattr(be, name)(x, axis, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)
    strided = np.empty((300, 514), np.float32)[:, ::2]  # an out that is not contiguous: no row blocks
    getattr(be, name)(x, 1, out=strided)
    np.testing.assert_allclose(strided, getattr(be, name)(x, 1), rtol=1e-6, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6)), min_size=1, max_size=6),
       st.integers(1, 3), st.sampled_from(["softmax", "log_softmax"]), st.sampled_from([1.0, 40.0]))
def test_images_in_place_per_component(shapes, dim, name, scale):
    # scale 1: values span < 16, softmax takes one shift for the whole buffer; 40: per-component shifts
    g = np.random.default_rng(len(shapes))
    parts = [(g.standard_normal(s) * scale).astype(np.float32) for s in shapes]
    got = getattr(ln, name)(ln.nested_tensor(parts), dim).unbind()
    ref = _softmax if name == "softmax" else _log_softmax
    for p, r in zip(parts, got):
        np.testing.assert_allclose(np.asarray(r), ref(p.astype(np.float64), dim - 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_images_against_torch_nested(name):
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(3)
    parts = [g.standard_normal((3, int(h), int(w))).astype(np.float32) for h, w in g.integers(2, 30, size=(7, 2))]
    theirs = torch.nested.nested_tensor([torch.from_numpy(p) for p in parts])
    for dim in (1, 2, 3):
        ours = getattr(ln, name)(ln.nested_tensor(parts), dim).unbind()
        if name == "softmax":  # torch.nested strided has softmax; log_softmax per component
            want = [t.numpy() for t in torch.softmax(theirs, dim).unbind()]
        else:
            want = [torch.log_softmax(torch.from_numpy(p), dim - 1).numpy() for p in parts]
        for a, b in zip(ours, want):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)


def test_images_softmax_with_nan_or_inf_takes_per_component_shifts():
    parts = [np.zeros((2, 3, 4), np.float32), np.ones((2, 2, 5), np.float32)]
    parts[0][1, 0, 0] = np.inf
    parts[1][0, 1, 1] = np.nan
    got = ln.softmax(ln.nested_tensor(parts), 2).unbind()
    with np.errstate(invalid="ignore"):
        for p, r in zip(parts, got):
            np.testing.assert_array_equal(np.isnan(np.asarray(r)), np.isnan(_softmax(p, 1)))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_images_torch_backend_gradcheck(name):
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(4)
    parts = [torch.from_numpy(g.standard_normal((2, h, w))) for h, w in ((3, 4), (2, 5), (4, 2))]
    flat = torch.cat([p.reshape(-1) for p in parts]).requires_grad_(True)

    def f(values):
        pieces, at = [], 0
        for p in parts:
            pieces.append(values[at : at + p.numel()].reshape(p.shape))
            at += p.numel()
        return getattr(ln, name)(ln.as_nested_tensor(pieces), 2).values()

    assert torch.autograd.gradcheck(f, (flat,))


def _padded_extreme(parts, kind):
    """(values, indices) over dim 1 by hand: argmax/argmin of each component along its rows."""
    arg = np.argmax if kind == "max" else np.argmin
    index = np.stack([arg(p, axis=0) for p in parts])
    return np.stack([np.take_along_axis(p, i[None], 0)[0] for p, i in zip(parts, index)]), index


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12), st.sampled_from(["max", "min"]),
       st.sampled_from([np.float32, np.float64, np.int32, np.int64]), st.booleans(), st.integers(0, 2**31))
def test_max_over_the_ragged_dim_by_segments(lengths, kind, dtype, specials, seed):
    g = np.random.default_rng(seed)
    parts = [g.integers(-3, 4, size=(n, 3, 2)).astype(dtype) for n in lengths]  # few values: many ties
    if specials and np.dtype(dtype).kind == "f":
        parts[0][-1, 0, 0] = np.nan
        parts[-1][0, 1, 1] = -np.inf
        parts[-1][-1, 2, 0] = np.nan
    got = getattr(ln, kind)(ln.nested_tensor(parts), 1)
    want_values, want_index = _padded_extreme(parts, kind)
    np.testing.assert_array_equal(np.asarray(got.values), want_values)
    np.testing.assert_array_equal(np.asarray(got.indices), want_index)
    assert np.asarray(got.indices).dtype == np.int64
    kept = getattr(ln, kind)(ln.nested_tensor(parts), 1, keepdim=True)
    np.testing.assert_array_equal(np.asarray(kept.indices)[:, 0], want_index)


def test_max_over_the_ragged_dim_against_torch_jagged():
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(8)
    lengths = g.integers(1, 300, size=40)
    data = g.integers(-20, 20, size=(int(lengths.sum()), 16)).astype(np.float32)  # ties: first index wins
    data[5, 3] = np.nan
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    jagged = torch.nested.nested_tensor_from_jagged(torch.from_numpy(data), torch.from_numpy(offsets))
    for kind in ("max", "min"):
        ours = getattr(ln, kind)(ln.nested_tensor_from_jagged(data, offsets), 1)
        theirs = getattr(torch, kind)(jagged, 1)
        np.testing.assert_array_equal(np.asarray(ours.values), theirs.values.numpy())
        np.testing.assert_array_equal(np.asarray(ours.indices), theirs.indices.numpy())


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(1, 4)), min_size=1, max_size=6),
       st.sampled_from([0.0, -1.5]))
def test_to_padded_tensor_of_components_ragged_in_several_dims(shapes, padding):
    g = np.random.default_rng(len(shapes))
    parts = [g.standard_normal(s).astype(np.float32) for s in shapes]
    got = ln.to_padded_tensor(ln.nested_tensor(parts), padding)
    want = np.full((len(parts), *np.max(shapes, axis=0)), padding, np.float32)
    for i, p in enumerate(parts):
        want[(i, *[slice(0, k) for k in p.shape])] = p
    np.testing.assert_array_equal(np.asarray(got), want)


def test_to_padded_tensor_of_images_against_torch():
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(9)
    parts = [g.standard_normal((3, int(h), int(w))).astype(np.float32) for h, w in g.integers(1, 20, size=(9, 2))]
    theirs = torch.nested.to_padded_tensor(torch.nested.nested_tensor([torch.from_numpy(p) for p in parts]), 0.5)
    np.testing.assert_array_equal(np.asarray(ln.to_padded_tensor(ln.nested_tensor(parts), 0.5)), theirs.numpy())
    ours_t = ln.to_padded_tensor(ln.nested_tensor([torch.from_numpy(p) for p in parts]), 0.5)
    np.testing.assert_array_equal(ours_t.numpy(), theirs.numpy())
