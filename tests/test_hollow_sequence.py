"""Every sequence op and LoDTensor method on a LoD with a level of no sequence (offsets ``[0]``).

The cases (``tests/hollow.py`` plus three-level ones) hold no data row, so every result is known
from the offsets alone: a pool gives one ``pad_value`` row per sequence of the pooled level, a pad
``(sequences, maxlen, *row)`` of ``pad_value``, a rank table one ``(i, 0)`` item per sequence.
Each test asserts that exact result, its dtype and shape, and that the LoD it carries is one the
gate accepts (``LoDTensor(out.data, out.lod())``); or, where there is nothing to compute, the
clear error. NumPy backend; real Paddle refuses most of these inputs (0 data rows, or ``[0]``
levels), see ``tests/paddle/test_paddle_sequence_ops.py`` for the ones it runs.
"""

import copy
import pickle

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend import get_backend
from lodtensor.ops.reduce import POOL_TYPES

from .hollow import hollow_cases

ROW = (3,)


def _cases():
    cases = dict(hollow_cases(ROW))

    def make(lod):
        return lt.LoDTensor(np.zeros((0, *ROW), np.float32), lod)

    cases["3lvl_none"] = make([[0], [0], [0]])  # three levels, no document
    cases["3lvl_paragraphs_without_sentences"] = make([[0, 2], [0, 0, 0], [0]])
    cases["3lvl_doc_with_one_empty_paragraph"] = make([[0, 1, 1], [0, 0], [0]])
    return cases


CASES = _cases()
NAMES = sorted(CASES)
LEVELS = [(name, level) for name in NAMES for level in range(CASES[name].lod_level)]
SIGNED_LEVELS = [(name, level) for name in NAMES for level in range(-CASES[name].lod_level, CASES[name].lod_level)]


def _level_ids(pairs):
    return [f"{name}-level{level}" for name, level in pairs]


def count(t, level):
    """Number of sequences of ``level`` (offsets have one more entry)."""
    return len(t.lod()[level]) - 1


def absolute(t, level):
    """Offsets of ``level`` counted in data rows."""
    offsets = np.asarray(t.lod()[level])
    for finer in t.lod()[level + 1 :]:
        offsets = np.asarray(finer)[offsets]
    return offsets.tolist()


def checked(out, lod, shape, dtype):
    """``out`` is a LoDTensor with exactly ``lod``, ``shape`` and ``dtype``, and its lod passes the gate."""
    assert isinstance(out, lt.LoDTensor)
    assert out.lod() == lod
    assert tuple(out.data.shape) == tuple(shape)
    assert out.data.dtype == np.dtype(dtype)
    again = lt.LoDTensor(out.data, out.lod())
    assert again.lod() == lod
    return out


def _ids(t, dtype=np.int64):
    return t.with_data(np.zeros((0, 1), dtype))


# ------------------------------------------------------------------------------------------
# Pooling, softmax, steps
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pool_type", POOL_TYPES)
@pytest.mark.parametrize(("name", "level"), SIGNED_LEVELS, ids=_level_ids(SIGNED_LEVELS))
def test_pool_every_level_gives_pad_rows(name, level, pool_type):
    t = CASES[name]
    k = level % t.lod_level
    out = S.sequence_pool(t, pool_type, pad_value=-1.5, level=level)
    checked(out, t.lod()[:k], (count(t, k), *ROW), np.float32)
    assert (out.data == -1.5).all()


@pytest.mark.parametrize("pool_type", ["sum", "average", "sqrt", "max", "min", "first", "last"])
@pytest.mark.parametrize("name", NAMES)
def test_pool_of_int_rows_keeps_the_dtype_of_a_full_batch(name, pool_type):
    t = CASES[name]
    ints = t.with_data(np.zeros((0, *ROW), np.int32))
    full = lt.LoDTensor(np.ones((2, *ROW), np.int32), [[0, 2]])
    out = S.sequence_pool(ints, pool_type, pad_value=7)
    want = S.sequence_pool(full, pool_type).data.dtype
    checked(out, t.lod()[:-1], (count(t, -1), *ROW), want)
    assert (out.data == 7).all()


@pytest.mark.parametrize("op", [S.sequence_first_step, S.sequence_last_step])
@pytest.mark.parametrize("name", NAMES)
def test_first_and_last_step(name, op):
    t = CASES[name]
    out = checked(op(t), t.lod()[:-1], (count(t, -1), *ROW), np.float32)
    assert (out.data == 0).all()


@pytest.mark.parametrize(("name", "level"), SIGNED_LEVELS, ids=_level_ids(SIGNED_LEVELS))
def test_softmax_keeps_the_lod(name, level):
    t = CASES[name]
    checked(S.sequence_softmax(t, level=level), t.lod(), (0, *ROW), np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_topk_avg_pooling(name):
    t = CASES[name]
    out = S.sequence_topk_avg_pooling(t.with_data(np.zeros(0, np.float32)), t, t, [1, 3], 2)
    checked(out, [absolute(t, 0)], (0, 4), np.float32)  # row's top level, counted in rows


# ------------------------------------------------------------------------------------------
# Padding
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("maxlen", [None, 2])
@pytest.mark.parametrize(("name", "level"), SIGNED_LEVELS, ids=_level_ids(SIGNED_LEVELS))
def test_to_padded_every_level(name, level, maxlen):
    t = CASES[name]
    n = count(t, level % t.lod_level)
    padded, lengths = t.to_padded(level=level, pad_value=4.0, maxlen=maxlen)
    assert padded.shape == (n, maxlen or 0, *ROW) and padded.dtype == np.float32
    assert (padded == 4.0).all()
    assert lengths.dtype == np.int64 and lengths.tolist() == [0] * n
    back = lt.from_padded(padded, lengths)
    checked(back, [[0] * (n + 1)], (0, *ROW), np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_to_padded_all_and_back(name):
    t = CASES[name]
    dense, masks = t.to_padded_all(pad_value=2.0)
    widths = [max(np.diff(level).tolist(), default=0) for level in t.lod()]
    assert dense.shape == (count(t, 0), *widths, *ROW) and (dense == 2.0).all()
    assert [m.shape for m in masks] == [dense.shape[: k + 2] for k in range(t.lod_level)]
    assert [m.dtype for m in masks] == [np.dtype(bool)] * t.lod_level
    checked(lt.from_padded_all(dense, masks), t.lod(), (0, *ROW), np.float32)


@pytest.mark.parametrize("maxlen", [None, 3])
@pytest.mark.parametrize("name", NAMES)
def test_sequence_pad_then_unpad(name, maxlen):
    t = CASES[name]
    n = count(t, -1)
    padded, length = S.sequence_pad(t, np.float32(-1.0), maxlen=maxlen)
    checked(padded, t.lod()[:-1], (n, maxlen or 0, *ROW), np.float32)
    checked(length, t.lod()[:-1], (n,), np.int64)
    assert (padded.data == -1.0).all() and length.data.tolist() == [0] * n
    checked(S.sequence_unpad(padded, length), t.lod(), (0, *ROW), np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_sequence_pad_with_a_row_of_pad_values(name):
    t = CASES[name]
    padded, _ = S.sequence_pad(t, np.array([1.0, 2.0, 3.0], np.float32), maxlen=1)
    assert (padded.data == np.array([1.0, 2.0, 3.0], np.float32)).all()
    assert padded.data.shape == (count(t, -1), 1, *ROW)


# ------------------------------------------------------------------------------------------
# Reshaping, selecting, expanding
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_same_lod_ops(name):
    t = CASES[name]
    n = count(t, -1)
    zeros = np.zeros(n, np.int64)
    checked(S.sequence_reverse(t), t.lod(), (0, *ROW), np.float32)
    checked(S.sequence_slice(t, zeros, zeros), t.lod(), (0, *ROW), np.float32)
    checked(S.sequence_slice(t, zeros[:, None], zeros[:, None]), t.lod(), (0, *ROW), np.float32)
    checked(S.sequence_enumerate(_ids(t), 3, pad_value=-1), t.lod(), (0, 3), np.int64)
    checked(S.sequence_enumerate(t.with_data(np.zeros(0, np.int32)), 2), t.lod(), (0, 2), np.int32)
    checked(S.sequence_reshape(t, 1), t.lod(), (0, 1), np.float32)
    checked(S.sequence_reshape(t, 6), t.lod(), (0, 6), np.float32)
    checked(S.sequence_erase(_ids(t), [0, 1]), t.lod(), (0, 1), np.int64)
    checked(S.sequence_concat([t, t, t]), t.lod(), (0, *ROW), np.float32)
    checked(S.sequence_expand_as(np.ones((n, 2), np.float32), t), t.lod(), (0, 2), np.float32)
    checked(t + t, t.lod(), (0, *ROW), np.float32)
    checked(np.exp(t) * 2, t.lod(), (0, *ROW), np.float32)
    checked(np.add(t, t.with_data(np.ones((0, *ROW), np.float32))), t.lod(), (0, *ROW), np.float32)
    checked(t @ np.ones((3, 2), np.float32), t.lod(), (0, 2), np.float32)
    checked(t > 0, t.lod(), (0, *ROW), bool)


@pytest.mark.parametrize("name", NAMES)
def test_enumerate_of_no_row_builds_no_window_index(name):
    t = CASES[name]
    # no (rows, win_size) index for 0 rows: 2**40 ids a row would be 8 TiB of index
    checked(S.sequence_enumerate(_ids(t), 2**40), t.lod(), (0, 2**40), np.int64)


@pytest.mark.parametrize("name", NAMES)
def test_sequence_slice_past_an_empty_sequence_is_an_index_error(name):
    t = CASES[name]
    n = count(t, -1)
    if n == 0:
        with pytest.raises(ValueError, match="one entry per sequence"):
            S.sequence_slice(t, [0], [0])
        return
    with pytest.raises(IndexError, match=r"offset\[0\]=0 and length\[0\]=1"):
        S.sequence_slice(t, np.zeros(n, np.int64), np.ones(n, np.int64))


@pytest.mark.parametrize("name", NAMES)
def test_concat_with_a_full_tensor_of_the_same_sequences(name):
    t = CASES[name]
    n = count(t, -1)
    rows = np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3)
    full = lt.LoDTensor(rows, [*t.lod()[:-1], list(range(0, 2 * n + 1, 2))])
    for parts in ([t, full], [full, t]):
        out = checked(S.sequence_concat(parts), full.lod(), (2 * n, *ROW), np.float32)
        np.testing.assert_array_equal(out.data, rows)


@pytest.mark.parametrize(("name", "level"), LEVELS, ids=_level_ids(LEVELS))
def test_expand_rows_by_every_level(name, level):
    t = CASES[name]
    n = count(t, level)
    copies = int(np.diff(t.lod()[level]).sum())  # one copy of x's one-row sequence i per item of y's sequence i
    out = S.sequence_expand(lt.LoDTensor(np.ones((n, 2)), [list(range(n + 1))]), t, level)
    checked(out, [list(range(copies + 1))], (copies, 2), np.float64)
    assert (out.data == 1).all()


@pytest.mark.parametrize("name", NAMES)
def test_expand_by_its_own_top_level(name):
    t = CASES[name]
    out = S.sequence_expand(t, t, 0)
    lengths = np.diff(t.lod()[0])
    # every top-level sequence repeated by its own length: empty ones vanish
    picks = np.repeat(np.arange(lengths.size), lengths)
    want = t[picks]  # the copies, each a top-level sequence of its own
    checked(out, want.lod(), (0, *ROW), np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_expand_all_repeats_zero(name):
    t = CASES[name]
    x = lt.LoDTensor(np.arange(count(t, -1) * 2.0).reshape(-1, 2), None)
    checked(S.sequence_expand(x, t), [], (0, 2), np.float64)


@pytest.mark.parametrize("name", NAMES)
def test_scatter_and_mask(name):
    t = CASES[name]
    n = count(t, -1)
    out = S.sequence_scatter(np.ones((n, 3)), _ids(t), t.with_data(np.zeros((0, 1))))
    assert out.shape == (n, 3) and (out == 1).all()
    lengths = t.lengths(-1)
    assert S.sequence_mask(lengths).shape == (n, 0)
    mask = S.sequence_mask(lengths, maxlen=2, dtype="bool")
    assert mask.shape == (n, 2) and mask.dtype == bool and not mask.any()
    checked(S.sequence_mask(_ids(t)), t.lod(), (0, 1, 0), np.int64)


@pytest.mark.parametrize("name", NAMES)
def test_lod_reset_and_append(name):
    t = CASES[name]
    checked(S.lod_reset(t, y=t), t.lod(), (0, *ROW), np.float32)
    checked(S.lod_reset(t, target_lod=[0]), [[0]], (0, *ROW), np.float32)
    checked(S.lod_append(t, [0]), [*t.lod(), [0]], (0, *ROW), np.float32)
    with pytest.raises(lt.LoDError, match="lod_append"):
        S.lod_append(t, [0, 0])  # one sequence more than the last level's end (0)


# ------------------------------------------------------------------------------------------
# Decoding, beam search, rank tables
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_ctc_and_edit_distance(name):
    t = CASES[name]
    top = [absolute(t, 0)]
    checked(S.ctc_align(_ids(t), 0), top, (0, 1), np.int64)
    checked(S.ctc_greedy_decoder(t.with_data(np.zeros((0, 4), np.float32)), 0), top, (0, 1), np.int64)
    distance, number = S.edit_distance(_ids(t), _ids(t), normalized=False)  # on the last level
    n = count(t, -1)
    assert distance.shape == (n, 1) and (distance == 0).all() and number.tolist() == [n]


@pytest.mark.parametrize("parent", [False, True])
@pytest.mark.parametrize(("name", "level"), LEVELS, ids=_level_ids(LEVELS))
def test_beam_search_without_prefixes(name, level, parent):
    t = CASES[name]
    scores = t.with_data(np.zeros((0, 1), np.float32))
    for ids in (_ids(t), None):
        out = S.beam_search(_ids(t), scores, ids, scores, 2, 0, level=level, return_parent_idx=parent)
        lod = [absolute(t, level), [0]]
        checked(out[0], lod, (0, 1), np.int64)
        checked(out[1], lod, (0, 1), np.float32)
        if parent:
            assert out[2].shape == (0,) and out[2].dtype == np.int32


def test_beam_search_refuses_ids_that_do_not_match_the_scores():
    lod = [[0, 2], [0, 1, 2]]
    scores = lt.LoDTensor(np.zeros((2, 3), np.float32), lod)
    pre_ids, pre_scores = scores.with_data(np.ones((2, 1), np.int64)), scores.with_data(np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"ids has shape \[2, 2\] but scores has \[2, 3\]"):
        S.beam_search(pre_ids, pre_scores, scores.with_data(np.zeros((2, 2), np.int64)), scores, 2, 0)


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].lod_level == 2])
def test_beam_search_decode_of_empty_steps(name):
    t = CASES[name]
    ids, scores = _ids(t), t.with_data(np.zeros((0, 1), np.float32))
    sent_ids, sent_scores = S.beam_search_decode([ids, ids], [scores, scores], 2, 0)
    lod = [[0] * (count(t, 0) + 1), [0]]
    checked(sent_ids, lod, (0,), np.int64)
    checked(sent_scores, lod, (0,), np.float32)


@pytest.mark.parametrize(("name", "level"), LEVELS, ids=_level_ids(LEVELS))
def test_rank_table_family(name, level):
    t = CASES[name]
    n = count(t, level)
    table = S.lod_rank_table(t, level)
    lengths = np.diff(t.lod()[level])
    assert table.items() == sorted(enumerate(lengths.tolist()), key=lambda item: -item[1])
    assert len(table) == n
    assert table.coarse_lod() == t.lod()[:level]
    assert S.max_sequence_len(table).tolist() == [max(lengths.tolist(), default=0)]
    steps = S.lod_tensor_to_array(t, table)
    assert isinstance(steps, S.LoDTensorArray) and len(steps) == max(lengths.tolist(), default=0)
    for step in steps:
        lt.LoDTensor(step.data, step.lod())
        assert step.data.shape[1:] == ROW
    if steps:
        checked(S.array_to_lod_tensor(steps, table), t.lod(), (0, *ROW), np.float32)
    else:
        with pytest.raises(ValueError, match="empty LoDTensorArray"):  # as Paddle: no step, no dtype to build from
            S.array_to_lod_tensor(steps, table)
    if level == 0:
        order = [i for i, _ in table.items()]
        checked(S.reorder_lod_tensor_by_rank(t, table), t[order].lod(), (0, *ROW), np.float32)


# ------------------------------------------------------------------------------------------
# LoDTensor methods
# ------------------------------------------------------------------------------------------
def _nested(lod):
    """Nested lists of the (empty) sequences, one level at a time in plain Python."""
    items = []
    for level in reversed(lod):
        items = [items[a:b] for a, b in zip(level, level[1:])]
    return items


@pytest.mark.parametrize("name", NAMES)
def test_python_protocol(name):
    t = CASES[name]
    n = count(t, 0)
    assert t.tolist() == t.to_list() == _nested(t.lod())
    assert len(t) == n and len(list(t)) == n and len(t.unbind()) == n
    for part in (*t.unbind(), *t):
        assert part.data.shape == (0, *ROW)
        lt.LoDTensor(part.data, part.lod())
    assert np.array(t).shape == (0, *ROW) and t.numpy().shape == (0, *ROW)
    assert t.recursive_sequence_lengths() == [np.diff(level).tolist() for level in t.lod()]
    assert t.has_valid_recursive_sequence_lengths()
    for again in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        checked(again, t.lod(), (0, *ROW), np.float32)
    assert f"lod={t.lod()}" in repr(t)
    for level in range(t.lod_level):
        assert t.lengths(level).tolist() == np.diff(t.lod()[level]).tolist()
        assert t.offsets(level).tolist() == t.lod()[level]


@pytest.mark.parametrize("name", NAMES)
def test_indexing(name):
    t = CASES[name]
    n = count(t, 0)
    for index in (slice(None), slice(0, 0), slice(5, 9), slice(None, None, -1), np.zeros(0, np.int64), [],
                  np.zeros(n, bool)):
        part = t[index]
        picks = np.arange(n)[index]
        lt.LoDTensor(part.data, part.lod())
        assert part.tolist() == [t.tolist()[i] for i in picks]
        assert len(part) == picks.size
    with pytest.raises(IndexError, match=f"index {n} is out of range for {n} top-level sequences"):
        t[n]


@pytest.mark.parametrize("name", NAMES)
def test_setters_and_factories(name):
    t = CASES[name]
    u = lt.LoDTensor(np.zeros((0, *ROW), np.float32))
    u.set_lod(t.lod())
    checked(u, t.lod(), (0, *ROW), np.float32)
    v = lt.LoDTensor(np.zeros((0, *ROW), np.float32))
    v.set_recursive_sequence_lengths(t.recursive_sequence_lengths())
    checked(v, t.lod(), (0, *ROW), np.float32)
    with pytest.raises(lt.LoDError, match="must end at len"):
        lt.LoDTensor(np.zeros((1, *ROW)), t.lod())
    checked(lt.create_lod_tensor(t.data, t.recursive_sequence_lengths(), lt.CPUPlace()), t.lod(), (0, *ROW),
            np.float32)
    checked(lt.from_nested_list(t.tolist(), dtype=np.float32, lod_level=t.lod_level), t.lod(), (0,), np.float32)


# ------------------------------------------------------------------------------------------
# The NumPy backend's segment kernels on offsets [0]
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", [(), (3,), (2, 2)])
def test_numpy_segment_kernels_of_no_sequence(row):
    be = get_backend("numpy")
    data = np.zeros((0, *row), np.float32)
    none = np.zeros(1, np.int64)
    for out in (be.segment_sum(data, none), be.segment_mean(data, none), be.segment_max(data, none, empty=0),
                be.segment_min(data, none, empty=0), be.pad(data, none, 2, 1.0)[:, 0]):
        assert out.shape == (0, *row)
    assert be.segment_softmax(data, none).shape == (0, *row)
    values, index = be.segment_extreme_with_index(data, none, "max")
    assert values.shape == index.shape == (0, *row) and index.dtype == np.int64
