"""Third pass over the sequence ops, without Paddle: the torch backend against the NumPy backend on
the ops the first pass (tests/test_sequence_hunt.py) leaves out (decoding, beam search, rank tables,
scatter, mask, lod_reset, top-k pooling, sequence_conv, row_conv), on lods with 0 sequences, empty
sequences at the edges and 2-3 levels; pooling and softmax at every level against a NumPy reference;
and the regressions of the bugs this pass fixed (the Paddle side is
tests/paddle/test_paddle_sequence_hunt3.py):

- ``sequence_softmax`` had no ``name`` argument (Paddle 2.6: ``(input, use_cudnn=False, name=None)``);
- ``sequence_mask`` refused a 0-d length, which Paddle masks as one row;
- ``nn.functional.sequence_conv`` with a bias of the wrong size failed inside a reshape, without naming it;
- ``beam_search`` rounded float64 scores to float32 (the selected scores changed, near ties collapsed);
- ``sequence_topk_avg_pooling`` of integer input gave float64 on NumPy and float32 on torch.
"""

import inspect

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.fluid import layers as L
from lodtensor.nn import functional as NF

torch = pytest.importorskip("torch")

from tests.test_sequence_hunt import assert_backends_agree  # noqa: E402

LODS = [[[0, 2, 2, 5]], [[0, 0, 3, 5]], [[0, 3, 5, 5]], [[0, 0, 0]], [[0]], [[0, 0], [0]],
        [[0, 2, 3], [0, 1, 3, 6]], [[0, 1, 3], [0, 0, 2, 2]], [[0, 1, 2], [0, 2, 3], [0, 1, 3, 6]]]


def _ids(lod, dtype, seed=0):
    rows = lod[-1][-1]
    return lt.LoDTensor((np.random.default_rng(seed).integers(0, 4, rows)).astype(dtype).reshape(-1, 1), lod)


def _floats(lod, width, dtype, seed=0):
    return lt.LoDTensor(np.random.default_rng(seed).standard_normal((lod[-1][-1], width)).astype(dtype), lod)


# ------------------------------------------------------------------------------------------
# torch == NumPy on the ops the first pass does not cover
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("lod", LODS, ids=lambda lod: str(lod).replace(" ", ""))
def test_id_ops_backends_agree(lod, dtype):
    ids = _ids(lod, dtype)
    n, rows = len(lod[-1]) - 1, lod[-1][-1]
    assert_backends_agree(S.sequence_erase, ids, [1, 3])
    assert_backends_agree(S.edit_distance, ids, ids, normalized=False)
    assert_backends_agree(S.edit_distance, ids, S.sequence_reverse(ids), normalized=False, ignored_tokens=[0])
    assert_backends_agree(S.ctc_align, ids, 0)
    assert_backends_agree(S.ctc_align, ids, 1, merge_repeated=False)
    assert_backends_agree(S.sequence_enumerate, ids, 3, pad_value=2)
    assert_backends_agree(S.sequence_mask, ids, maxlen=2)
    assert_backends_agree(S.sequence_mask, ids.numpy(), maxlen=2, dtype="bool")
    assert_backends_agree(S.sequence_mask, ids.numpy(), dtype="float16")
    assert_backends_agree(S.sequence_scatter, np.zeros((n, 4), dtype), ids, ids)
    assert_backends_agree(S.lod_reset, ids, target_lod=[0, rows])
    assert_backends_agree(S.lod_reset, ids, y=np.array([0, rows]))
    assert_backends_agree(S.lod_append, ids, list(range(rows + 1)))
    assert_backends_agree(lambda x: S.max_sequence_len(S.lod_rank_table(x, level=len(lod) - 1)), ids)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("lod", LODS, ids=lambda lod: str(lod).replace(" ", ""))
def test_float_ops_backends_agree(lod, dtype):
    p = _floats(lod, 4, dtype)
    rng = np.random.default_rng(1)
    assert_backends_agree(S.ctc_greedy_decoder, p, 0)
    assert_backends_agree(S.ctc_greedy_decoder, p, 3)
    assert_backends_agree(lambda x: S.reorder_lod_tensor_by_rank(x, S.lod_rank_table(x, level=0)), p)
    if lod[-1][-1]:
        last = len(lod) - 1
        assert_backends_agree(
            lambda x: S.array_to_lod_tensor(S.lod_tensor_to_array(x, S.lod_rank_table(x, last)),
                                            S.lod_rank_table(x, last)), p)
    assert_backends_agree(NF.sequence_conv, p, rng.standard_normal((12, 2)).astype(dtype), None, 3)
    assert_backends_agree(NF.sequence_conv, p, rng.standard_normal((8, 2)).astype(dtype),
                          rng.standard_normal(2).astype(dtype), 2, padding_start=1)
    assert_backends_agree(NF.row_conv, p, rng.standard_normal((3, 4)).astype(dtype))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "int32", "bool"])
@pytest.mark.parametrize("rows, cols", [([2, 0, 3], [3, 2, 1]), ([2, 3], [0, 4]), ([0], [0]), ([1, 2], [5, 1])],
                         ids=str)
@pytest.mark.parametrize("channels", [1, 2])
def test_topk_avg_pooling_backends_agree(rows, cols, channels, dtype):
    """Integer and bool input gave float64 on NumPy but float32 on torch (torch's true division);
    both give float64 now, as sequence_pool's average of integers."""
    n = [channels * r * c for r, c in zip(rows, cols)]
    values = np.random.default_rng(0).standard_normal(sum(n)) * 3
    data = (values > 0) if dtype == "bool" else values.astype(dtype)
    x = lt.LoDTensor(data, [np.concatenate([[0], np.cumsum(n)]).tolist()])
    r = lt.LoDTensor(np.zeros(sum(rows)), [np.concatenate([[0], np.cumsum(rows)]).tolist()])
    c = lt.LoDTensor(np.zeros(sum(cols)), [np.concatenate([[0], np.cumsum(cols)]).tolist()])
    assert_backends_agree(S.sequence_topk_avg_pooling, x, r, c, [1, 3, 2], channels)
    out = S.sequence_topk_avg_pooling(x, r, c, [1, 3, 2], channels)
    if dtype in ("int64", "int32", "bool"):
        assert out.data.dtype == np.float64
        as_float = S.sequence_topk_avg_pooling(x.with_data(data.astype("float64")), r, c, [1, 3, 2], channels)
        np.testing.assert_array_equal(out.data, as_float.data)
    else:
        assert out.data.dtype == np.dtype(dtype)


def _beam_inputs(dtype, seed=0, lod=((0, 2, 3), (0, 1, 2, 3)), width=4, ended=(1,)):
    rng = np.random.RandomState(seed)
    lod = [list(level) for level in lod]
    rows = lod[-1][-1]
    pre_ids = rng.randint(1, 9, size=(rows, 1)).astype("int64")
    pre_ids[list(ended)] = 0
    return (lt.LoDTensor(pre_ids, lod), lt.LoDTensor(rng.rand(rows, 1).astype(dtype), lod),
            lt.LoDTensor(rng.randint(0, 9, size=(rows, width)).astype("int64"), lod),
            lt.LoDTensor(rng.rand(rows, width).astype(dtype), lod))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("accumulated", [True, False])
@pytest.mark.parametrize("beam_size", [1, 2, 9])
def test_beam_search_backends_agree(dtype, accumulated, beam_size):
    args = _beam_inputs(dtype)
    assert_backends_agree(S.beam_search, *args, beam_size, 0, is_accumulated=accumulated, return_parent_idx=True)
    sel_ids, sel_scores = S.beam_search(*args, beam_size, 0, is_accumulated=accumulated)
    steps = [args[0], sel_ids]
    scores = [args[1], sel_scores]
    assert_backends_agree(S.beam_search_decode, steps, scores, beam_size, 0)


# ------------------------------------------------------------------------------------------
# Pooling and softmax at every level of a 3-level lod, against a NumPy reference
# ------------------------------------------------------------------------------------------
LOD3 = [[0, 1, 1, 3], [0, 2, 2, 4], [0, 1, 1, 4, 6]]  # empty sequences at every level
REFERENCE = {"sum": np.sum, "max": np.max, "min": np.min, "average": np.mean,
             "sqrt": lambda s, axis: s.sum(axis) / np.sqrt(len(s)), "first": lambda s, axis: s[0],
             "last": lambda s, axis: s[-1]}


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("level", [0, 1, 2, -1, -3])
def test_pool_and_softmax_at_every_level(level, backend):
    data = np.arange(12.0).reshape(6, 2) * 0.5 - 1
    x = lt.LoDTensor(torch.from_numpy(data) if backend == "torch" else data, LOD3)
    bounds = x._lod.absolute_offsets(level % 3)
    pieces = [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    for pool_type, reduce in REFERENCE.items():
        out = S.sequence_pool(x, pool_type, pad_value=-9.0, level=level)
        want = np.stack([reduce(p, axis=0) if len(p) else np.full(2, -9.0) for p in pieces])
        got = out.data.numpy() if backend == "torch" else out.data
        np.testing.assert_allclose(got, want, err_msg=pool_type)
        assert out.lod() == LOD3[: level % 3]
    soft = S.sequence_softmax(x, level=level)
    got = soft.data.numpy() if backend == "torch" else soft.data
    want = np.concatenate([np.exp(p - p.max(0)) / np.exp(p - p.max(0)).sum(0) for p in pieces if len(p)])
    np.testing.assert_allclose(got, want)
    assert soft.lod() == LOD3


# ------------------------------------------------------------------------------------------
# Regressions of the bugs this pass fixed
# ------------------------------------------------------------------------------------------
def test_softmax_takes_paddles_name_argument():
    """Paddle 2.6: sequence_softmax(input, use_cudnn=False, name=None); ``name=`` raised TypeError."""
    x = lt.LoDTensor(np.log([[1.0], [3.0], [2.0], [2.0]]), [[0, 2, 4]])
    want = [0.25, 0.75, 0.5, 0.5]
    for fn in (S.sequence_softmax, L.sequence_softmax):
        assert list(inspect.signature(fn).parameters)[:3] == ["input", "use_cudnn", "name"]
        np.testing.assert_allclose(fn(x, name="softmax_0").data.ravel(), want)
        np.testing.assert_allclose(fn(x, False, "softmax_0").data.ravel(), want)
        np.testing.assert_allclose(fn(x, name=None, level=0).data.ravel(), want)


@pytest.mark.parametrize("make", [np.array, torch.tensor, int], ids=["numpy", "torch", "python"])
def test_mask_of_a_single_length(make):
    """A 0-d length gives one mask row (maxlen,), as Paddle's sequence_mask; it raised ValueError."""
    out = S.sequence_mask(make(3), maxlen=4)
    assert np.asarray(out).tolist() == [1, 1, 1, 0] and str(out.dtype).endswith("int64")
    assert np.asarray(S.sequence_mask(make(2), dtype="bool")).tolist() == [True, True]
    assert np.asarray(S.sequence_mask(make(0))).shape == (0,)
    if make is torch.tensor:  # torch in, torch out
        assert isinstance(out, torch.Tensor) and out.shape == (4,)


@pytest.mark.parametrize("bad, exc, message", [
    (np.array(2.5), TypeError, "x must hold integer lengths, got float64"),
    (2.5, TypeError, "x must hold integer lengths, got float64"),
    (np.array(-1), lt.LoDError, "lengths must be non-negative, got -1"),
    ("3", TypeError, "x must be an array or a list of numbers, got str '3'"),
])
def test_mask_of_a_bad_single_length_is_refused(bad, exc, message):
    with pytest.raises(exc, match="sequence_mask\\(\\): " + message):
        S.sequence_mask(bad)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("bias_shape", [(4,), (2,), (1, 4)], ids=str)
def test_sequence_conv_bias_of_the_wrong_size_is_named(bias_shape, backend):
    """It failed in a reshape (NumPy: 'cannot reshape array of size 4 into shape (1,3)'; torch a
    RuntimeError), without naming bias."""
    data = np.arange(10.0).reshape(5, 2)
    x = lt.LoDTensor(torch.from_numpy(data) if backend == "torch" else data, [[0, 2, 5]])
    with pytest.raises(ValueError, match="sequence_conv\\(\\): bias must have num_filters=3 elements .*got shape"):
        NF.sequence_conv(x, np.ones((6, 3)), bias=np.ones(bias_shape))
    out = NF.sequence_conv(x, np.ones((6, 3)), bias=np.ones((3, 1)))  # three values: accepted, as fc takes them
    assert tuple(out.data.shape) == (5, 3)


@pytest.mark.parametrize("accumulated", [True, False])
def test_beam_search_keeps_float64_scores(accumulated):
    """float64 scores went through float32: selected_scores 0.30000001192092896 for a score of 0.3, and
    candidates differing past float32's precision tied (the earlier one won)."""
    lod = [[0, 1], [0, 1]]
    pre_ids = lt.LoDTensor(np.array([[1]]), lod)
    pre_scores = lt.LoDTensor(np.array([[0.0]]), lod)
    ids = lt.LoDTensor(np.array([[5, 6, 7]]), lod)
    values = np.array([[0.3, 0.3 + 1e-12, 0.2]])
    scores = lt.LoDTensor(values if accumulated else np.exp(values), lod)
    sel_ids, sel_scores = S.beam_search(pre_ids, pre_scores, ids, scores, 1, 0, is_accumulated=accumulated)
    assert sel_ids.data.ravel().tolist() == [6]
    assert sel_scores.data.dtype == np.float64
    want = values[0, 1] if accumulated else 0.0 + np.log(np.exp(values[0, 1]))
    assert sel_scores.data.ravel().tolist() == [want]
    # float32 scores still compute in float32, as Paddle's kernel
    s32, = S.beam_search(pre_ids, pre_scores.with_data(np.array([[0.0]], "float32")), ids,
                         scores.with_data(scores.data.astype("float32")), 1, 0, is_accumulated=accumulated)[1:]
    assert s32.data.dtype == np.float32
