"""Sequence ops on their own: the NumPy and torch backends give the same values, dtypes and lods on
the same inputs (every dtype, empty sequences at the edges, multi-level lods at every level, rows
of 0 to 2 extra dims), and bad arguments raise errors that name the argument and the value.
(The differential pass against real Paddle is tests/paddle/test_paddle_sequence_hunt.py.)"""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import LoDError
from lodtensor import sequence as S

torch = pytest.importorskip("torch")

LODS = [[[0, 2, 2, 5]], [[0, 0, 3, 5]], [[0, 3, 5, 5]], [[0, 0, 0]], [[0, 2, 3], [0, 1, 3, 6]],
        [[0, 1, 3], [0, 0, 2, 2]], [[0, 1, 2], [0, 2, 3], [0, 1, 3, 6]]]
DTYPES = ["float32", "float64", "float16", "int32", "int64", "bool", "uint8"]


def make(lod, row, dtype, seed=0):
    values = np.random.default_rng(seed).standard_normal((lod[-1][-1], *row)) * 3
    return lt.LoDTensor((values > 0) if dtype == "bool" else values.astype(dtype), lod)


def on_torch(value):
    if isinstance(value, lt.LoDTensor):
        return lt.LoDTensor(torch.from_numpy(np.ascontiguousarray(value.numpy())), value.lod())
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    return value


def observed(result):
    if isinstance(result, tuple):
        return [item for part in result for item in observed(part)]
    if isinstance(result, lt.LoDTensor):
        data = result.data
        return [(data.numpy() if isinstance(data, torch.Tensor) else np.asarray(data), result.lod())]
    return [(result.numpy() if isinstance(result, torch.Tensor) else np.asarray(result), None)]


def outcome(fn, args, kwargs):
    try:
        return True, observed(fn(*args, **kwargs))
    except Exception as err:  # noqa: BLE001 - which calls raise is compared
        return False, err


def assert_backends_agree(fn, *args, **kwargs):
    ok_n, n = outcome(fn, args, kwargs)
    ok_t, t = outcome(fn, [on_torch(a) for a in args], {k: on_torch(v) for k, v in kwargs.items()})
    assert ok_n == ok_t, (n, t)
    if not ok_n:
        assert type(n) is type(t), (n, t)
        return
    for (a, lod_a), (b, lod_b) in zip(n, t):
        assert lod_a == lod_b and a.shape == b.shape and a.dtype == b.dtype, (lod_a, lod_b, a.dtype, b.dtype)
        tol = 1e-2 if a.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("row", [(), (1,), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lod", LODS, ids=lambda lod: str(lod).replace(" ", ""))
def test_numpy_and_torch_backends_agree(lod, dtype, row):
    x = make(lod, row, dtype)
    for pool_type in ["sum", "average", "sqrt", "max", "min", "first", "last"]:
        assert_backends_agree(S.sequence_pool, x, pool_type, pad_value=-1)
        for level in range(len(lod)):
            assert_backends_agree(S.sequence_pool, x, pool_type, level=level)
    assert_backends_agree(S.sequence_first_step, x)
    assert_backends_agree(S.sequence_last_step, x)
    for level in range(-1, len(lod)):
        assert_backends_agree(S.sequence_softmax, x, level=level)
    assert_backends_agree(S.sequence_reverse, x)
    assert_backends_agree(S.sequence_pad, x, 0)
    assert_backends_agree(S.sequence_pad, x, 1, maxlen=6)
    assert_backends_agree(S.sequence_concat, [x, x])
    assert_backends_agree(S.sequence_reshape, x, 1)
    assert_backends_agree(S.sequence_enumerate, x, 3, pad_value=1)
    lengths = np.diff(lod[-1])
    assert_backends_agree(S.sequence_slice, x, np.minimum(1, lengths), np.maximum(lengths - 1, 0))
    assert_backends_agree(S.sequence_expand_as, make([[0, len(lengths)]], row, dtype, 1).numpy(), x)
    for ref_level in range(-len(lod), len(lod)):
        count = len(x.lod()[ref_level]) - 1
        assert_backends_agree(S.sequence_expand, make([[0, count]], row, dtype, 2).numpy(), x, ref_level=ref_level)
        with_lod = make([list(range(0, 2 * count + 1, 2))], row, dtype, 3)
        assert_backends_agree(S.sequence_expand, with_lod, x, ref_level=ref_level)
    if row:
        padded, length = S.sequence_pad(x, 0)
        assert_backends_agree(S.sequence_unpad, padded.numpy(), length.numpy())
        assert_backends_agree(S.sequence_unpad, padded, length.numpy())
    assert_backends_agree(S.lod_append, x, list(range(x.num_rows + 1)))


# ------------------------------------------------------------------------------------------
# Arguments that must be refused with an error naming them (each once accepted or unnamed)
# ------------------------------------------------------------------------------------------
X = lt.LoDTensor(np.arange(10.0, dtype="float32").reshape(5, 2), [[0, 2, 2, 5]])
IDS = lt.LoDTensor(np.arange(5).reshape(5, 1), [[0, 2, 2, 5]])
LOD2 = [[0, 1, 3], [0, 1, 2, 3]]
PRE_IDS = lt.LoDTensor(np.ones((3, 1), "int64"), LOD2)
PRE_SCORES = lt.LoDTensor(np.zeros((3, 1), "float32"), LOD2)
CAND = lt.LoDTensor(np.arange(12).reshape(3, 4), LOD2)
SCORES = lt.LoDTensor(np.linspace(0.1, 0.9, 12, dtype="float32").reshape(3, 4), LOD2)
TOPK_X = lt.LoDTensor(np.arange(6.0), [[0, 6]])
ROWS, COLS = lt.LoDTensor(np.zeros(2), [[0, 2]]), lt.LoDTensor(np.zeros(3), [[0, 3]])

REFUSED = [
    ("rank-level-str", lambda: S.lod_rank_table(X, "0"), TypeError,
     "lod_rank_table\\(\\): level must be an integer, got str '0'"),
    ("rank-level-none", lambda: S.lod_rank_table(X, None), TypeError, "lod_rank_table\\(\\): level must be an integer"),
    ("beam-size-str", lambda: S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, "2", 0), TypeError,
     "beam_search\\(\\): beam_size must be an integer, got str '2'"),
    ("beam-size-float", lambda: S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, 2.5, 0), TypeError,
     "beam_size must be an integer, got float 2.5"),
    ("beam-end-id-float", lambda: S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, 2, 0.5), TypeError,
     "beam_search\\(\\): end_id must be an integer, got float 0.5"),
    ("beam-end-id-none", lambda: S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, 2, None), TypeError,
     "end_id must be an integer, got NoneType None"),
    ("beam-level-str", lambda: S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, 2, 0, level="0"), TypeError,
     "beam_search\\(\\): level must be an integer, got str '0'"),
    ("beam-accumulated-str", lambda: S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, 2, 0, is_accumulated="False"),
     TypeError, "beam_search\\(\\): is_accumulated must be True or False, got str 'False'"),
    ("beam-decode-size-str", lambda: S.beam_search_decode([PRE_IDS], [PRE_SCORES], "2", 0), TypeError,
     "beam_search_decode\\(\\): beam_size must be an integer, got str '2'"),
    ("beam-decode-end-str", lambda: S.beam_search_decode([PRE_IDS], [PRE_SCORES], 2, "0"), TypeError,
     "beam_search_decode\\(\\): end_id must be an integer, got str '0'"),
    ("topk-string", lambda: S.sequence_topk_avg_pooling(TOPK_X, ROWS, COLS, "12", 1), TypeError,
     "topks must be a list of positive integers, got str '12'"),
    ("topk-float", lambda: S.sequence_topk_avg_pooling(TOPK_X, ROWS, COLS, [1.5], 1), TypeError,
     "topks must be a list of positive integers, got \\[1.5\\]"),
    ("topk-bool", lambda: S.sequence_topk_avg_pooling(TOPK_X, ROWS, COLS, [True], 1), TypeError,
     "topks must be a list of positive integers, got \\[True\\]"),
    ("ctc-align-merge-str", lambda: S.ctc_align(IDS, 0, merge_repeated="False"), TypeError,
     "ctc_align\\(\\): merge_repeated must be True or False, got str 'False'"),
    ("edit-normalized-str", lambda: S.edit_distance(IDS, IDS, normalized="False"), TypeError,
     "edit_distance\\(\\): normalized must be True or False, got str 'False'"),
    ("edit-ignored-int", lambda: S.edit_distance(IDS, IDS, normalized=False, ignored_tokens=3), TypeError,
     "edit_distance\\(\\): ignored_tokens must be a list of integer ids, got int"),
    ("edit-ignored-float", lambda: S.edit_distance(IDS, IDS, normalized=False, ignored_tokens=[1.5]), TypeError,
     "edit_distance\\(\\): ignored_tokens must be a list of integer ids, got \\[1.5\\]"),
    ("pool-is-test-str", lambda: S.sequence_pool(X, "sum", is_test="yes"), TypeError,
     "sequence_pool\\(\\): is_test must be True or False, got str 'yes'"),
    ("softmax-use-cudnn-str", lambda: S.sequence_softmax(X, use_cudnn="no"), TypeError,
     "sequence_softmax\\(\\): use_cudnn must be True or False, got str 'no'"),
    ("unpad-too-long", lambda: S.sequence_unpad(np.zeros((2, 3, 1)), [4, 1]), ValueError,
     "sequence_unpad\\(\\): length\\[0\\]=4 exceeds x's padded length 3"),
    ("unpad-count", lambda: S.sequence_unpad(np.zeros((2, 3, 1)), [1]), ValueError,
     "sequence_unpad\\(\\): length must have one entry per padded sequence of x \\(2\\), got 1"),
    ("unpad-rank1", lambda: S.sequence_unpad(np.zeros(3), [1, 1, 1]), ValueError,
     "sequence_unpad\\(\\): x must have shape \\(sequences, maxlen, ...\\), got \\(3,\\)"),
    ("slice-uint64-wraps", lambda: S.sequence_slice(X, np.array([2**63 + 1, 0, 0], np.uint64), [0, 0, 0]),
     ValueError, "sequence_slice\\(\\): offset\\[0\\]=9223372036854775809 is too large"),
    ("unpad-uint64-wraps", lambda: S.sequence_unpad(np.zeros((2, 3, 1)), np.array([1, 2**64 - 1], np.uint64)),
     ValueError, "sequence_unpad\\(\\): length\\[1\\]=18446744073709551615 is too large"),
    ("reset-y-uint64-wraps", lambda: S.lod_reset(X, y=np.array([0, 2**63, 5], np.uint64)), ValueError,
     "lod_reset\\(\\): y\\[1\\]=9223372036854775808 is too large"),
    ("reset-target-float", lambda: S.lod_reset(X, target_lod=[0, 2.5, 5]), TypeError,
     "lod_reset\\(\\): target_lod: lod \\(lod level 0\\) must have an integer dtype"),
]


@pytest.mark.parametrize("call, exc, message", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_refused_with_a_named_argument(call, exc, message):
    before = X.numpy().copy(), X.lod(), IDS.numpy().copy()
    with pytest.raises(exc, match=message):
        call()
    assert np.array_equal(X.numpy(), before[0]) and X.lod() == before[1] and np.array_equal(IDS.numpy(), before[2])


def test_fixed_arguments_still_take_their_valid_forms():
    """The checks above keep every valid spelling: NumPy integers and bools, 0/1 flags, int arrays."""
    table = S.lod_rank_table(X, np.int64(0))
    assert table.items() == [(2, 3), (0, 2), (1, 0)]
    sel, _ = S.beam_search(PRE_IDS, PRE_SCORES, CAND, SCORES, np.int32(2), np.int64(0), is_accumulated=np.bool_(True))
    assert sel.lod() == [[0, 1, 3], [0, 2, 2, 4]] and sel.numpy().ravel().tolist() == [3, 2, 11, 10]
    assert S.ctc_align(IDS, 0, merge_repeated=0).data.ravel().tolist() == [1, 2, 3, 4]
    out = S.sequence_topk_avg_pooling(TOPK_X, ROWS, COLS, np.array([1, 2]), 1)
    assert out.data.tolist() == [[2.0, 1.5], [5.0, 4.5]]
    d, _ = S.edit_distance(IDS, IDS, normalized=0, ignored_tokens=np.array([3], np.int32))
    assert d.ravel().tolist() == [0.0, 0.0, 0.0]
    assert S.sequence_pool(X, "sum", is_test=np.bool_(True)).data.tolist() == [[2.0, 4.0], [0.0, 0.0], [18.0, 21.0]]
    assert S.sequence_unpad(np.zeros((2, 3, 1)), np.array([1, 2], np.uint64)).lod() == [[0, 1, 3]]
    assert S.sequence_slice(X, np.array([1, 0, 1], np.uint64), [1, 0, 2]).lod() == [[0, 1, 1, 3]]


def test_negative_lengths_still_reported_as_lod_errors():
    with pytest.raises(LoDError, match="sequence_unpad\\(\\): length must be non-negative, got lengths\\[1\\]=-1"):
        S.sequence_unpad(np.zeros((2, 3, 1)), [1, -1])
