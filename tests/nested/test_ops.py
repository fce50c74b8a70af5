"""Every op on every backend against a per-component NumPy reference, plus the fast paths' invariants."""

import math

import numpy as np
import pytest

import lodtensor.nested as ln

from ._cases import SHAPES, assert_components, ragged_arrays, shape_id

_ERF = np.vectorize(math.erf)


def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True)) if x.shape[axis] else x
    return e / e.sum(axis=axis, keepdims=True) if x.shape[axis] else x


def ref_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    return out * (1 if w is None else w) + (0 if b is None else b)


def build(backend, arrays):
    return ln.nested_tensor([backend.array(a) for a in arrays])


def numpy_parts(backend, nt):
    return [backend.numpy(c) for c in nt.unbind()]


@pytest.fixture(params=SHAPES, ids=shape_id)
def shape(request):
    return request.param


UNARY = {
    "relu": (ln.relu, lambda x: np.maximum(x, 0)),
    "gelu": (ln.gelu, lambda x: 0.5 * x * (1 + _ERF(x / math.sqrt(2)))),
    "silu": (ln.silu, lambda x: x / (1 + np.exp(-x))),
    "abs": (ln.abs, np.abs),
    "sgn": (ln.sgn, np.sign),
    "neg": (ln.neg, np.negative),
    "logical_not": (ln.logical_not, np.logical_not),
    "clone": (ln.clone, lambda x: x),
    "exp_via_ops": (lambda nt: (nt * 2 - nt) / 1.0, lambda x: x),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ops(backend, shape, name):
    arrays = ragged_arrays(7, *shape, dtype="float64")
    nt = build(backend, arrays)
    ours, ref = UNARY[name]
    out = ours(nt)
    assert out._struct is nt._struct  # elementwise results share the structure
    assert_components(numpy_parts(backend, out), [ref(a) for a in arrays], "float64")


@pytest.mark.parametrize("name", ["relu", "silu"])
def test_inplace_activations_write_into_the_input(backend, name):
    arrays = ragged_arrays(5, 2, (0,), "float64")
    nt = build(backend, arrays)
    ours, ref = UNARY[name]
    out = ours(nt, inplace=True)
    assert out is nt
    assert_components(numpy_parts(backend, nt), [ref(a) for a in arrays], "float64")


def test_elementwise_is_one_call_on_the_buffer():
    nt = ln.nested_tensor([np.ones((3, 2, 2)), np.ones((1, 4, 5))])
    out = ln.relu(nt - 2)
    assert out._buffer.shape == (nt.numel(),) and out._struct is nt._struct


def test_softmax_all_dims(backend, shape):
    arrays = ragged_arrays(3, *shape, dtype="float64")
    nt = build(backend, arrays)
    for d in range(1, nt.dim()):
        out = ln.softmax(nt, d)
        assert_components(numpy_parts(backend, out), [ref_softmax(a, d - 1) for a in arrays], "float64")


def test_softmax_heads_over_ragged_dim(backend):
    arrays = [np.random.default_rng(i).standard_normal((n, 8)) for i, n in enumerate([5, 0, 1, 9])]
    out = ln.softmax(build(backend, arrays), 1)
    assert_components(numpy_parts(backend, out), [ref_softmax(a, 0) for a in arrays], "float64")
    mid = [np.random.default_rng(i).standard_normal((2, n, 3)) for i, n in enumerate([4, 1, 3])]
    out = ln.softmax(build(backend, mid), 2)  # ragged middle dim, regular dims around it: segments
    assert_components(numpy_parts(backend, out), [ref_softmax(a, 1) for a in mid], "float64")


def test_softmax_dtype_argument(backend):
    nt = build(backend, [np.zeros(2, np.float32)])
    assert "float64" in str(ln.softmax(nt, 1, dtype="float64").dtype)


def test_select_transpose(backend, shape):
    arrays = ragged_arrays(5, *shape, dtype="float64", empty=False, low=1)
    nt = build(backend, arrays)
    for d in range(1, nt.dim()):
        for index in (0, -1):
            assert_components(numpy_parts(backend, nt.select(d, index)), [a.take(index, axis=d - 1) for a in arrays],
                              exact=True)
        for e in range(d + 1, nt.dim()):
            assert_components(numpy_parts(backend, nt.transpose(d, e)), [np.swapaxes(a, d - 1, e - 1) for a in arrays],
                              exact=True)
    np.testing.assert_array_equal(backend.numpy(nt.select(0, -1)), arrays[-1])
    np.testing.assert_array_equal(backend.numpy(nt[1]), arrays[1])


def test_reshape_is_free(backend):
    arrays = [np.arange(12.0).reshape(2, 6), np.arange(18.0).reshape(3, 6)]
    nt = build(backend, arrays)
    out = nt.reshape(2, -1, 2, 3)
    assert out._buffer is nt._buffer
    assert_components(numpy_parts(backend, out), [a.reshape(-1, 2, 3) for a in arrays], exact=True)
    back = out.view(2, -1, 6)
    assert_components(numpy_parts(backend, back), arrays, exact=True)
    assert back.reshape_as(out)._struct is out._struct


def test_linear_layer_norm(backend, shape):
    rank, ragged = shape
    arrays = ragged_arrays(11, rank, ragged, dtype="float64")
    nt = build(backend, arrays)
    g = np.random.default_rng(0)
    if nt._struct.regular[-1]:
        d = arrays[0].shape[-1]
        w, b = g.standard_normal((4, d)), g.standard_normal(4)
        out = ln.linear(nt, backend.array(w), backend.array(b))
        assert_components(numpy_parts(backend, out), [a @ w.T + b for a in arrays], "float64")
        out = ln.linear(nt, backend.array(w))
        assert_components(numpy_parts(backend, out), [a @ w.T for a in arrays], "float64")
        gw, gb = g.standard_normal(d), g.standard_normal(d)
        out = ln.layer_norm(nt, (d,), backend.array(gw), backend.array(gb), eps=1e-3)
        assert_components(numpy_parts(backend, out), [ref_layer_norm(a, 1, gw, gb, 1e-3) for a in arrays], "float64")
        out = ln.layer_norm(nt, d)
        assert_components(numpy_parts(backend, out), [ref_layer_norm(a, 1) for a in arrays], "float64")
    else:
        with pytest.raises(ValueError, match="same trailing dimension"):
            ln.linear(nt, backend.array(g.standard_normal((4, 2))))


def test_matmul_bmm_grouped(backend):
    g = np.random.default_rng(1)
    lens = [3, 0, 5, 3, 1]
    q = [g.standard_normal((n, 4)) for n in lens]
    k = [g.standard_normal((4, n)) for n in lens]
    a, b = build(backend, q), build(backend, k)
    assert_components(numpy_parts(backend, a @ b), [x @ y for x, y in zip(q, k)], "float64")
    assert_components(numpy_parts(backend, ln.bmm(a, b)), [x @ y for x, y in zip(q, k)], "float64")
    w = g.standard_normal((4, 2))
    assert_components(numpy_parts(backend, a @ backend.array(w)), [x @ w for x in q], "float64")
    dense = g.standard_normal((5, 4, 2))
    out = ln.bmm(a, backend.array(dense))
    assert_components(numpy_parts(backend, out), [x @ y for x, y in zip(q, dense)], "float64")


def test_to_padded_and_masked(backend, shape):
    arrays = ragged_arrays(13, *shape, dtype="float64")
    nt = build(backend, arrays)
    padded = backend.numpy(nt.to_padded_tensor(-1.0))
    padded2, mask = nt.to_masked(-1.0)
    np.testing.assert_array_equal(backend.numpy(padded2), padded)
    mask = backend.numpy(mask)
    for i, a in enumerate(arrays):
        region = (i,) + tuple(slice(0, s) for s in a.shape)
        np.testing.assert_array_equal(padded[region], a)
        assert (padded[i] == -1).sum() == padded[i].size - a.size
        full = np.zeros(padded.shape[1:], bool)
        full[tuple(slice(0, s) for s in a.shape)] = True
        np.testing.assert_array_equal(mask[i], full.reshape(mask.shape[1:] + (-1,)).any(axis=-1)
                                      if mask.ndim < padded.ndim else full)


def test_masked_fill_and_comparisons(backend):
    arrays = [np.array([[1.0, -2.0]]), np.array([[-3.0, 4.0], [5.0, -6.0]])]
    nt = build(backend, arrays)
    out = nt.masked_fill(nt < 0, 0.0)
    assert_components(numpy_parts(backend, out), [np.maximum(a, 0) for a in arrays], exact=True)
    assert_components(numpy_parts(backend, nt.masked_fill(True, 9.0)), [np.full_like(a, 9) for a in arrays], exact=True)
    same = ln.clone(nt)
    assert_components(numpy_parts(backend, nt >= same), [np.ones_like(a, bool) for a in arrays], exact=True)
    assert_components(numpy_parts(backend, ~(nt == 1.0)), [a != 1 for a in arrays], exact=True)


def test_like_factories_and_dropout(backend):
    nt = build(backend, [np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)])
    for out in (ln.zeros_like(nt), ln.empty_like(nt), ln.randn_like(nt), ln.dropout(nt, 0.5)):
        assert out._struct is nt._struct and out.dtype == nt.dtype
    assert backend.numpy(ln.zeros_like(nt, dtype="float64").to_padded_tensor(1.0)).dtype == np.float64
    kept = ln.dropout(nt, 0.5, training=False)  # a copy of the same values, as torch's nested dropout gives
    assert kept is not nt and kept._struct.same_as(nt._struct)
    assert np.array_equal(backend.numpy(kept.values()), backend.numpy(nt.values()))
    with pytest.raises(TypeError, match="normal_kernel_cpu"):
        ln.randn_like(build(backend, [np.ones(2, np.int64)]))


def test_embedding_bag_modes(backend):
    g = np.random.default_rng(2)
    ids = [[1, 2, 4], [], [0], [3, 3]]
    weight = g.standard_normal((5, 3))
    nt = ln.nested_tensor([backend.array(np.array(i, np.int64)) for i in ids])
    w = backend.array(weight)
    expect = {
        "sum": [weight[i].sum(0) if i else np.zeros(3) for i in ids],
        "mean": [weight[i].mean(0) if i else np.zeros(3) for i in ids],
        "max": [weight[i].max(0) if i else np.zeros(3) for i in ids],
    }
    for mode, want in expect.items():
        np.testing.assert_allclose(backend.numpy(ln.embedding_bag(nt, w, mode=mode)), np.array(want), rtol=1e-12)
    psw = ln.nested_tensor([backend.array(np.array(v, np.float64)) for v in [[1.0, 2.0, 0.5], [], [3.0], [1.0, -1.0]]])
    out = backend.numpy(ln.embedding_bag(nt, w, mode="sum", per_sample_weights=psw))
    np.testing.assert_allclose(out[0], weight[1] + 2 * weight[2] + 0.5 * weight[4])
    np.testing.assert_allclose(out[3], 0.0, atol=1e-12)
    out = backend.numpy(ln.embedding_bag(nt, w, mode="mean", padding_idx=3))
    np.testing.assert_allclose(out[3], 0.0)
    with pytest.raises(ValueError, match="only supported for mode='sum'"):
        ln.embedding_bag(nt, w, mode="max", per_sample_weights=psw)
    with pytest.raises(IndexError, match="index out of range"):
        ln.embedding_bag(ln.nested_tensor([backend.array(np.array([7]))]), w)


def test_inputs_are_not_mutated_by_failing_ops(backend):
    arrays = [np.array([[1.0, 2.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])]
    nt = build(backend, arrays)
    before = [c.copy() for c in numpy_parts(backend, nt)]
    st = nt._struct
    bad_calls = [
        lambda: nt.reshape(3, -1, 2), lambda: nt.transpose(0, 1), lambda: ln.softmax(nt, 0),
        lambda: nt + build(backend, arrays[:1]), lambda: nt.to_padded_tensor(0, (2, 1, 2)),
        lambda: ln.linear(nt, backend.array(np.ones((3, 5)))), lambda: nt.select(1, 2),
    ]
    for call in bad_calls:
        with pytest.raises((ValueError, TypeError, IndexError)):
            call()
    assert nt._struct is st
    assert_components(numpy_parts(backend, nt), before, exact=True)


@pytest.mark.parametrize("kind", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_reductions_of_images_per_component(backend, kind, dim):
    """Components ragged in two dims (3 x H x W): every dim reduces per component, results nested."""
    g = np.random.default_rng(dim)
    arrays = [g.standard_normal((3, int(h), int(w))) for h, w in [(2, 5), (4, 1), (3, 3)]]
    out = getattr(ln, kind)(build(backend, arrays), dim=dim)
    ref = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[kind]
    assert_components(numpy_parts(backend, out), [ref(a, axis=dim - 1) for a in arrays], "float64")
    kept = getattr(ln, kind)(build(backend, arrays), dim=dim, keepdim=True)
    assert kept.nested_size().tolist() == [[1 if k == dim - 1 else s for k, s in enumerate(a.shape)] for a in arrays]


def test_sum_over_the_ragged_dim_is_dense_and_differentiable(backend):
    arrays = [np.ones((2, 3)), np.full((4, 3), 2.0), np.zeros((0, 3))]
    nt = build(backend, arrays)
    out = ln.sum(nt, dim=1)
    assert backend.numpy(out).tolist() == [[2.0] * 3, [8.0] * 3, [0.0] * 3]
    means = backend.numpy(ln.mean(nt, dim=1))
    assert means[:2].tolist() == [[1.0] * 3, [2.0] * 3] and np.isnan(means[2]).all()  # an empty mean is nan
    if backend.be.name == "torch":
        leaf = ln.nested_tensor([backend.array(a) for a in arrays], requires_grad=True)
        ln.sum(leaf, dim=1).sum().backward()
        assert leaf.grad.nested_size().tolist() == [[2, 3], [4, 3], [0, 3]]
