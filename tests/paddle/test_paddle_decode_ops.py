"""Differential tests of the decoding, beam-search and rank-table ops against real Paddle 2.6.2.

Paddle 2.6 keeps these operators (``sequence_erase``, ``edit_distance``,
``ctc_align``, ``beam_search``, ``beam_search_decode``, ``lod_rank_table``, ...)
but no Python wrappers, so each case is a static Program of raw operators
(``_raw.run``). Compared: data (exact for ids, allclose for scores) and lod.
"""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from _raw import ARRAY, TABLE, edit_distance_program, run  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.fluid import layers as L  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def ids(values, lod):
    return lt.LoDTensor(np.asarray(values, dtype="int64").reshape(-1, 1), lod)


def same(paddle_out, ours, exact=True):
    data, lod = paddle_out
    mine = ours.numpy() if isinstance(ours, lt.LoDTensor) else np.asarray(ours)
    assert data.shape == mine.shape, (data.shape, mine.shape)
    if exact:
        np.testing.assert_array_equal(data, mine)
    else:
        np.testing.assert_allclose(data, mine, rtol=1e-5, atol=1e-6)
    if isinstance(ours, lt.LoDTensor):
        assert lod == ours.lod()


ERASE_CASES = [
    ([2, 2, 6, 1, 3, 9, 6, 1, 0, 1], [[0, 3, 6, 10]], [2, 3, 5]),
    ([2, 2, 6, 1, 3, 9], [[0, 2, 2, 6]], [2]),
    ([1, 2, 3, 4, 5, 6], [[0, 1, 3], [0, 2, 4, 6]], [1, 4]),
    ([7, 7, 7], [[0, 3]], [8]),
]


@pytest.mark.parametrize("values, lod, tokens", ERASE_CASES)
def test_sequence_erase(values, lod, tokens):
    x = ids(values, lod)
    got = run(lambda v, op: op("sequence_erase", {"X": v["x"]}, {"Out": "int64"}, {"tokens": tokens})["Out"], {"x": x})
    same(got[0], L.sequence_erase(x, tokens))


EDIT_CASES = [
    ([1, 2, 3, 4, 5], [[0, 3, 3, 5]], [1, 3, 3, 5, 7, 8], [[0, 2, 4, 6]]),
    ([1, 2, 3, 1, 2, 3, 4], [[0, 4, 7]], [3, 2, 1, 1, 1, 2, 3, 4, 5, 6], [[0, 3, 10]]),
    ([5, 6], [[0, 2, 2]], [5, 6, 9], [[0, 1, 3]]),
]


@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("ignored", [None, [1, 3]])
@pytest.mark.parametrize("hyp, hyp_lod, ref, ref_lod", EDIT_CASES)
def test_edit_distance(hyp, hyp_lod, ref, ref_lod, normalized, ignored):
    h, r = ids(hyp, hyp_lod), ids(ref, ref_lod)
    kept = L.sequence_erase(r, ignored) if ignored else r

    build = edit_distance_program(normalized, ignored)
    if normalized and np.any(kept.lengths() == 0):  # both refuse to divide by an empty reference
        with pytest.raises(Exception, match="empty"):
            run(build, {"h": h, "r": r})
        with pytest.raises(ValueError, match="empty"):
            L.edit_distance(h, r, normalized=normalized, ignored_tokens=ignored)
        return
    ours = L.edit_distance(h, r, normalized=normalized, ignored_tokens=ignored)
    got = run(build, {"h": h, "r": r})
    same(got[0], ours[0], exact=False)
    same(got[1], ours[1])


def test_edit_distance_random():
    rng = np.random.RandomState(3)
    for _ in range(5):
        n = 6
        hl, rl = rng.randint(0, 7, n), rng.randint(1, 7, n)
        h = ids(rng.randint(0, 4, hl.sum()), [np.concatenate([[0], np.cumsum(hl)]).tolist()])
        r = ids(rng.randint(0, 4, rl.sum()), [np.concatenate([[0], np.cumsum(rl)]).tolist()])
        got = run(lambda v, op: op("edit_distance", {"Hyps": v["h"], "Refs": v["r"]},
                                   {"Out": "float32", "SequenceNum": "int64"}, {"normalized": True})["Out"],
                  {"h": h, "r": r})
        same(got[0], L.edit_distance(h, r)[0], exact=False)


@pytest.mark.parametrize("lod", [[[0, 4, 4, 9]], [[0, 9]], [[0, 1, 3], [0, 2, 5, 9]]])
@pytest.mark.parametrize("blank", [0, 3])
def test_ctc_greedy_decoder(lod, blank):
    rng = np.random.RandomState(len(lod) + blank)
    p = lt.LoDTensor(np.eye(4, dtype="float32")[rng.randint(0, 4, 9)] + 0.01 * rng.rand(9, 4).astype("float32"),
                     lod)

    def build(v, op):
        top = op("top_k", {"X": v["p"]}, {"Out": "float32", "Indices": "int64"}, {"k": 1})
        return op("ctc_align", {"Input": top["Indices"]}, {"Output": "int64"},
                  {"blank": blank, "merge_repeated": True})["Output"]

    got = run(build, {"p": p})
    ours = L.ctc_greedy_decoder(p, blank)
    np.testing.assert_array_equal(got[0][0], ours.numpy())
    assert got[0][1][-1] == ours.lod()[0]


RANK_CASES = [
    ([[0, 1, 4, 6]], 0),
    ([[0, 3, 3, 5, 9]], 0),
    ([[0, 2, 4], [0, 1, 4, 4, 10]], 0),
    ([[0, 2, 4], [0, 1, 4, 4, 10]], 1),
    ([[0, 1, 3], [0, 2, 2, 6], [0, 1, 3, 4, 6, 7, 10]], 1),
]


@pytest.mark.parametrize("lod, level", RANK_CASES)
def test_rank_table_family(lod, level):
    rows = lod[-1][-1]
    x = lt.LoDTensor(np.arange(rows * 2, dtype="float32").reshape(rows, 2), lod)
    reorder = level == 0 and 0 not in np.diff(lod[0])  # Paddle cannot slice an empty sequence

    def build(v, op):
        t = op("lod_rank_table", {"X": v["x"]}, {"Out": ("float32", TABLE)}, {"level": level})["Out"]
        m = op("max_sequence_len", {"RankTable": t}, {"Out": "int64"})["Out"]
        a = op("lod_tensor_to_array", {"X": v["x"], "RankTable": t}, {"Out": ("float32", ARRAY)})["Out"]
        b = op("array_to_lod_tensor", {"X": a, "RankTable": t}, {"Out": "float32"})["Out"]
        outs = [m, a, b]
        if reorder:
            outs.append(op("reorder_lod_tensor_by_rank", {"X": v["x"], "RankTable": t}, {"Out": "float32"})["Out"])
        return outs

    got = run(build, {"x": x})
    table = L.lod_rank_table(x, level)
    same(got[0], L.max_sequence_len(table))
    arr = L.lod_tensor_to_array(x, table)
    assert len(got[1]) == len(arr)
    for theirs, mine in zip(got[1], arr):
        np.testing.assert_array_equal(theirs[0], mine.numpy())
        assert theirs[1] == mine.lod()
    same(got[2], L.array_to_lod_tensor(arr, table))
    if reorder:
        same(got[3], L.reorder_lod_tensor_by_rank(x, table))


def test_rank_table_of_rows():
    x = lt.LoDTensor(np.arange(8, dtype="float32").reshape(4, 2))
    lodded = lt.LoDTensor(np.arange(10, dtype="float32").reshape(5, 2), [[0, 2, 3, 3, 5]])

    def build(v, op):
        t = op("lod_rank_table", {"X": v["x"]}, {"Out": ("float32", TABLE)}, {"level": 0})["Out"]
        return op("reorder_lod_tensor_by_rank", {"X": v["y"], "RankTable": t}, {"Out": "float32"})["Out"]

    got = run(build, {"x": lodded, "y": x})
    same(got[0], L.reorder_lod_tensor_by_rank(x, L.lod_rank_table(lodded)))


def _beam_inputs(rng, lod, width, end_id, ended_rows):
    prefixes = lod[1][-1]
    pre_ids = rng.randint(1, 9, size=(prefixes, 1)).astype("int64")
    pre_ids[list(ended_rows)] = end_id
    arrays = {
        "pi": pre_ids,
        "ps": rng.rand(prefixes, 1).astype("float32"),
        "ids": rng.randint(0, 9, size=(prefixes, width)).astype("int64"),
        "sc": rng.rand(prefixes, width).astype("float32"),
    }
    return {k: lt.LoDTensor(a, lod) for k, a in arrays.items()}


BEAM_CASES = [
    ([[0, 2, 3], [0, 1, 2, 3]], ()),
    ([[0, 2, 3], [0, 1, 2, 3]], (0,)),
    ([[0, 2, 3], [0, 1, 2, 3]], (2,)),
    ([[0, 1, 3], [0, 1, 2, 3]], (0, 1, 2)),
    ([[0, 3, 3, 5], [0, 1, 2, 3, 4, 5]], (1, 3)),
]


@pytest.mark.parametrize("lod, ended", BEAM_CASES)
@pytest.mark.parametrize("accumulated, with_ids", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_beam_search(lod, ended, accumulated, with_ids, beam_size):
    rng = np.random.RandomState(len(ended) + beam_size)
    f = _beam_inputs(rng, lod, 4, 0, ended)

    def build(v, op):
        inputs = {"pre_ids": v["pi"], "pre_scores": v["ps"], "scores": v["sc"]}
        if with_ids:
            inputs["ids"] = v["ids"]
        out = op("beam_search", inputs, {"selected_ids": "int64", "selected_scores": "float32", "parent_idx": "int32"},
                 {"level": 0, "beam_size": beam_size, "end_id": 0, "is_accumulated": accumulated})
        return [out["selected_ids"], out["selected_scores"], out["parent_idx"]]

    got = run(build, f)
    sel_ids, sel_scores, parent = L.beam_search(f["pi"], f["ps"], f["ids"] if with_ids else None, f["sc"],
                                                beam_size, 0, is_accumulated=accumulated, return_parent_idx=True)
    same(got[0], sel_ids)
    same(got[1], sel_scores, exact=False)
    np.testing.assert_array_equal(got[2][0], parent)


def _search(seed, n_src=3, beam=2, width=3, steps=4, end_id=0):
    """A whole beam search run with lodtensor's beam_search: the step arrays for the decoder."""
    rng = np.random.RandomState(seed)
    lod = [list(range(n_src + 1)), list(range(n_src + 1))]
    pre_ids = lt.LoDTensor(np.ones((n_src, 1), "int64"), lod)
    pre_scores = lt.LoDTensor(np.zeros((n_src, 1), "float32"), lod)
    id_steps, score_steps = L.LoDTensorArray([pre_ids]), L.LoDTensorArray([pre_scores])
    sources = lod[0]
    for _ in range(steps):
        prefixes = pre_ids.num_rows
        cur_lod = [sources, list(range(prefixes + 1))]
        cand = lt.LoDTensor(rng.randint(0, 5, size=(prefixes, width)).astype("int64"), cur_lod)
        scores = lt.LoDTensor((pre_scores.numpy() + np.log(rng.rand(prefixes, width))).astype("float32"), cur_lod)
        sel_ids, sel_scores = L.beam_search(pre_ids, pre_scores, cand, scores, beam, end_id)
        id_steps.append(sel_ids)
        score_steps.append(sel_scores)
        sources = sel_ids._lod.absolute_offsets(0).tolist()
        pre_ids = lt.LoDTensor(sel_ids.numpy(), [sources, list(range(sel_ids.num_rows + 1))])
        pre_scores = pre_ids.with_data(sel_scores.numpy())
    return id_steps, score_steps


@pytest.mark.parametrize("seed", range(8))
def test_beam_search_decode(seed):
    id_steps, score_steps = _search(seed)
    feeds = {}
    for t, (a, b) in enumerate(zip(id_steps, score_steps)):
        feeds[f"i{t}"], feeds[f"s{t}"] = a, b

    def build(v, op):
        id_array, score_array = paddle.tensor.create_array("int64"), paddle.tensor.create_array("float32")
        for t in range(len(id_steps)):
            i = paddle.full([1], t, "int64")
            paddle.tensor.array_write(v[f"i{t}"], i, array=id_array)
            paddle.tensor.array_write(v[f"s{t}"], i, array=score_array)
        out = op("beam_search_decode", {"Ids": id_array, "Scores": score_array},
                 {"SentenceIds": "int64", "SentenceScores": "float32"}, {"beam_size": 2, "end_id": 0})
        return [out["SentenceIds"], out["SentenceScores"]]

    got = run(build, feeds)
    sent_ids, sent_scores = L.beam_search_decode(id_steps, score_steps, beam_size=2, end_id=0)
    same(got[0], sent_ids)
    same(got[1], sent_scores, exact=False)


# ------------------------------------------------------------------------------------------
# #26: ctc_align with merge_repeated=False, and the padded ("tensor") forms with lengths
# ------------------------------------------------------------------------------------------
# Paddle's own OpTest inputs (test_ctc_align.py) and a few more
ALIGN_LOD_CASES = [
    ([0, 1, 2, 2, 0, 4, 0, 4, 5, 0, 6, 6, 0, 0, 7, 7, 7, 0], [[0, 11, 18]], 0),
    ([0, 1, 2, 2, 0, 4, 0, 4, 5, 0, 6, 6, 0, 0, 7, 7, 7, 0, 0], [[0, 11, 19]], 0),
    ([0, 0, 1, 1, 3, 3, 3, 1], [[0, 2, 2, 8]], 3),
    ([5, 5, 5], [[0, 1, 3]], 0),
]


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("values, lod, blank", ALIGN_LOD_CASES)
def test_ctc_align_lod(values, lod, blank, merge, dtype):
    x = lt.LoDTensor(np.asarray(values, dtype).reshape(-1, 1), lod)
    got = run(lambda v, op: op("ctc_align", {"Input": v["x"]}, {"Output": dtype},
                               {"blank": blank, "merge_repeated": merge})["Output"], {"x": x})
    ours = L.ctc_align(x, blank, merge_repeated=merge)
    same(got[0], ours)
    assert ours.data.dtype == np.dtype(dtype)


def test_difference_ctc_align_all_blank():
    """Everything aligns to nothing: Paddle returns one row -1 with the lod [[0, 0]] (which does not
    fit it); lodtensor returns zero rows, as its ctc_greedy_decoder."""
    x = ids([0, 0, 0, 0], [[0, 4]])
    got = run(lambda v, op: op("ctc_align", {"Input": v["x"]}, {"Output": "int64"},
                               {"blank": 0, "merge_repeated": False})["Output"], {"x": x})
    assert got[0][0].ravel().tolist() == [-1] and got[0][1] == [[0, 0]]
    out = L.ctc_align(x, 0, merge_repeated=False)
    assert out.data.shape == (0, 1) and out.lod() == [[0, 0]]


PADDED_ALIGN_CASES = [  # Paddle's OpTest padded cases (test_ctc_align.py) and lengths of 0
    ([[0, 2, 4, 4, 0, 6, 3, 6, 6, 0, 0], [1, 1, 3, 0, 0, 4, 5, 6, 0, 0, 0]], [[9], [8]], 0),
    ([[0, 1, 2, 2, 0, 4], [0, 4, 5, 0, 6, 0], [0, 7, 7, 7, 0, 0]], [[6], [5], [4]], 0),
    ([[0, 1, 2, 2, 0, 4], [0, 4, 5, 0, 6, 0], [0, 7, 1, 7, 0, 0]], [[6], [5], [4]], 1),
    ([[3, 3, 1], [2, 3, 3]], [[0], [3]], -1),
]


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("values, lengths, padding", PADDED_ALIGN_CASES)
def test_ctc_align_padded(values, lengths, padding, merge, dtype):
    x = np.asarray(values, dtype)
    length = np.asarray(lengths, dtype)

    def build(v, op):
        out = op("ctc_align", {"Input": v["x"], "InputLength": v["n"]}, {"Output": dtype, "OutputLength": dtype},
                 {"blank": 0, "merge_repeated": merge, "padding_value": padding})
        return [out["Output"], out["OutputLength"]]

    got = run(build, {"x": x, "n": length})
    out, out_len = L.ctc_align(x, 0, merge_repeated=merge, input_length=length, padding_value=padding)
    np.testing.assert_array_equal(got[0][0], out)
    np.testing.assert_array_equal(got[1][0], out_len)
    assert out.dtype == out_len.dtype == np.dtype(dtype)
    # lengths as [batch] work as well (Paddle: [batch, 1] or [batch])
    again = L.ctc_align(x, 0, merge_repeated=merge, input_length=length.ravel(), padding_value=padding)
    np.testing.assert_array_equal(again[0], out)


@pytest.mark.parametrize("blank", [0, 2])
def test_ctc_greedy_decoder_padded(blank):
    """Paddle 1.x's ctc_greedy_decoder with input_length: top_k, squeeze, then ctc_align with lengths."""
    rng = np.random.RandomState(blank)
    probs = (np.eye(4)[rng.randint(0, 4, (3, 7))] + 0.01 * rng.rand(3, 7, 4)).astype("float32")
    length = np.array([[7], [3], [0]], "int64")

    def build(v, op):
        top = op("top_k", {"X": v["p"]}, {"Out": "float32", "Indices": "int64"}, {"k": 1})["Indices"]
        flat = op("squeeze2", {"X": top}, {"Out": "int64", "XShape": "int64"}, {"axes": [2]})["Out"]
        out = op("ctc_align", {"Input": flat, "InputLength": v["n"]}, {"Output": "int64", "OutputLength": "int64"},
                 {"blank": blank, "merge_repeated": True, "padding_value": 0})
        return [out["Output"], out["OutputLength"]]

    got = run(build, {"p": probs, "n": length})
    out, out_len = L.ctc_greedy_decoder(probs, blank, input_length=length)
    np.testing.assert_array_equal(got[0][0], out)
    np.testing.assert_array_equal(got[1][0], out_len)


def test_difference_padded_length_beyond_the_row():
    """A length longer than the padded row: Paddle reads the next row's ids (or past the buffer);
    a negative length crashes it. lodtensor raises ValueError naming the length."""
    x = np.array([[0, 2, 4, 4], [1, 1, 3, 0]], "int64")
    with pytest.raises(ValueError, match=r"input_length\[0\]=6 is outside \[0, 4\]"):
        L.ctc_align(x, 0, input_length=[[6], [2]])
    with pytest.raises(ValueError, match=r"label_length\[1\]=-1 is outside \[0, 4\]"):
        L.edit_distance(x, x, input_length=[2, 2], label_length=[2, -1])


EDIT_PADDED_CASES = [  # Paddle's OpTest (TestEditDistanceOpNormalizedTensor) and empty rows
    ([[10, 3, 0, 0], [6, 5, 8, 2]], [2, 4], [[10, 4, 0], [6, 7, 8]], [2, 3]),
    ([[1, 2, 3], [4, 4, 4], [7, 0, 0]], [3, 0, 1], [[1, 3], [4, 5], [8, 7]], [2, 1, 2]),
    ([[5, 6, 7, 8, 9]], [5], [[9, 8, 7, 6, 5, 4]], [6]),
]


@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("hyp, hyp_len, ref, ref_len", EDIT_PADDED_CASES)
def test_edit_distance_padded(hyp, hyp_len, ref, ref_len, normalized):
    from paddle.nn.functional.loss import edit_distance  # noqa: PLC0415 - Paddle 2.6 keeps this one

    h, r = np.asarray(hyp, "int64"), np.asarray(ref, "int64")
    hl, rl = np.asarray(hyp_len, "int64"), np.asarray(ref_len, "int64")
    # Paddle 2.6's dygraph edit_distance returns (sequence_num, distance), the reverse of its docs
    n, d = edit_distance(paddle.to_tensor(h), paddle.to_tensor(r), normalized=normalized,
                         input_length=paddle.to_tensor(hl), label_length=paddle.to_tensor(rl))
    ours_d, ours_n = L.edit_distance(h, r, normalized=normalized, input_length=hl, label_length=rl)
    np.testing.assert_allclose(ours_d, d.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(ours_n, n.numpy())
    assert ours_d.dtype == np.float32 and ours_d.shape == tuple(d.shape)
    # the same pairs as LoD tensors give the same distances
    def packed(dense, lengths):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        return ids(dense[np.arange(dense.shape[1]) < lengths[:, None]], [offsets])

    as_lod = L.edit_distance(packed(h, hl), packed(r, rl), normalized=normalized)
    np.testing.assert_array_equal(as_lod[0], ours_d)


def test_difference_edit_distance_padded_ignored_tokens():
    """Paddle's padded edit_distance cannot erase ignored_tokens (its sequence_erase needs a lod);
    lodtensor erases them from the counted ids of every row."""
    from paddle.nn.functional.loss import edit_distance  # noqa: PLC0415

    h, r = np.array([[1, 9, 2, 0]], "int64"), np.array([[1, 2, 9]], "int64")
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever Paddle raises
        edit_distance(paddle.to_tensor(h), paddle.to_tensor(r), ignored_tokens=[9],
                      input_length=paddle.to_tensor(np.array([3])), label_length=paddle.to_tensor(np.array([3])))
    d, _ = L.edit_distance(h, r, normalized=False, ignored_tokens=[9], input_length=[3], label_length=[3])
    assert d.ravel().tolist() == [0.0]


def test_sequence_topk_avg_pooling_is_not_in_paddle_2_6():
    """Paddle 2.6.2's wheel no longer registers sequence_topk_avg_pooling, so there is nothing to run it
    against here: tests/test_sequence_topk.py checks lodtensor's against an oracle of Paddle's kernel and
    its OpTest cases. This test notices when a Paddle build has the operator again."""
    from paddle.base import framework  # noqa: PLC0415

    assert "sequence_topk_avg_pooling" not in framework.OpProtoHolder.instance().op_proto_map
