"""Unit tests of the decoding, beam-search and rank-table ops (the Paddle comparisons live in
tests/paddle/test_paddle_decode_ops.py)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import sequence as S
from tests.strategies import lod_tensors


def _levenshtein(a, b):
    d = np.arange(len(b) + 1, dtype=float)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return d[-1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), min_size=1, max_size=7)),
                min_size=1, max_size=6))
def test_edit_distance_equals_per_pair_dp(pairs):
    hyp = lt.from_nested_list([[[t] for t in h] for h, _ in pairs], dtype="int64", lod_level=1)
    ref = lt.from_nested_list([[[t] for t in r] for _, r in pairs], dtype="int64", lod_level=1)
    dist, num = S.edit_distance(hyp, ref, normalized=False)
    expected = [_levenshtein(h, r) for h, r in pairs]
    np.testing.assert_allclose(dist.ravel(), expected)
    assert num.tolist() == [len(pairs)] and dist.dtype == np.float32
    norm, _ = S.edit_distance(hyp, ref)
    np.testing.assert_allclose(norm.ravel(), np.array(expected) / [len(r) for _, r in pairs], rtol=1e-6)


def test_edit_distance_errors():
    hyp = lt.LoDTensor(np.array([[1], [2]]), [[0, 1, 2]])
    with pytest.raises(ValueError, match="same number of sequences"):
        S.edit_distance(hyp, lt.LoDTensor(np.array([[1]]), [[0, 1]]))
    with pytest.raises(ValueError, match="label sequence 1 is empty"):
        S.edit_distance(hyp, lt.LoDTensor(np.array([[1]]), [[0, 1, 1]]))
    with pytest.raises(TypeError, match="integer ids"):
        S.edit_distance(hyp.with_data(np.zeros((2, 1))), hyp)


@settings(max_examples=40, deadline=None)
@given(lod_tensors(min_levels=1, max_levels=3), st.data())
def test_rank_array_round_trip(x, data):
    level = data.draw(st.integers(0, x.lod_level - 1))
    # a step whose items have no sub-sequences at all would need a lod level of zero sequences
    assume(all(x.lengths(k).min(initial=1) > 0 for k in range(level + 1, x.lod_level - 1)))
    table = S.lod_rank_table(x, level)
    lengths = x.lengths(level)
    assert [n for _, n in table.items()] == sorted(lengths.tolist(), reverse=True)
    arr = S.lod_tensor_to_array(x, table)
    assert len(arr) == (int(lengths.max()) if lengths.size else 0)
    assert [len(a) for a in arr] == [int((lengths > t).sum()) for t in range(len(arr))]
    if len(arr):
        back = S.array_to_lod_tensor(arr, table)
        assert back.lod() == x.lod()
        np.testing.assert_array_equal(back.numpy(), x.numpy())


def test_rank_family_keeps_torch_autograd():
    torch = pytest.importorskip("torch")
    data = torch.arange(12.0, dtype=torch.float64).reshape(6, 2).requires_grad_()
    x = lt.LoDTensor(data, [[0, 1, 4, 6]])
    table = S.lod_rank_table(x)
    arr = S.lod_tensor_to_array(x, table)
    assert isinstance(arr[0].data, torch.Tensor)
    back = S.array_to_lod_tensor(S.LoDTensorArray([a * (t + 1) for t, a in enumerate(arr)]), table)
    back.data.sum().backward()
    assert data.grad[:, 0].tolist() == [1.0, 1.0, 2.0, 3.0, 1.0, 2.0]
    reordered = S.reorder_lod_tensor_by_rank(x, table)
    assert reordered.lod() == [[0, 3, 5, 6]]


def test_rank_errors():
    x = lt.LoDTensor(np.zeros((3, 1)), [[0, 1, 3]])
    with pytest.raises(TypeError, match="LoDRankTable"):
        S.lod_tensor_to_array(x, [(0, 2)])
    with pytest.raises(ValueError, match="do not match the table"):
        S.lod_tensor_to_array(lt.LoDTensor(np.zeros((3, 1)), [[0, 2, 3]]), S.lod_rank_table(x))
    with pytest.raises(IndexError, match="level 1 is out of range"):
        S.lod_rank_table(x, level=1)
    with pytest.raises(ValueError, match="items per step"):
        S.array_to_lod_tensor([x], S.lod_rank_table(x))


def test_ctc_and_erase():
    probs = np.eye(4)[[0, 1, 1, 0, 1, 2, 2, 3, 0, 0]]
    out = S.ctc_greedy_decoder(lt.LoDTensor(probs, [[0, 5, 8, 10]]), blank=0)
    assert out.tolist() == [[[1], [1]], [[2], [3]], []]
    erased = S.sequence_erase(out, [1])
    assert erased.tolist() == [[], [[2], [3]], []]
    with pytest.raises(ValueError, match=r"shape \[N, 1\]"):
        S.sequence_erase(lt.LoDTensor(np.zeros((2, 2), "int64"), [[0, 2]]), [1])


def test_beam_search_prunes_finished_sources_and_decode_orders_by_score():
    lod = [[0, 1, 2], [0, 1, 2]]
    pre_ids = lt.LoDTensor(np.array([[0], [5]]), lod)  # source 0 has ended (end_id 0)
    pre_scores = lt.LoDTensor(np.array([[-1.0], [-2.0]], "float32"), lod)
    ids = lt.LoDTensor(np.array([[3, 4], [6, 7]]), lod)
    scores = lt.LoDTensor(np.array([[-0.5, -0.1], [-2.5, -2.2]], "float32"), lod)
    sel_ids, sel_scores, parent = S.beam_search(pre_ids, pre_scores, ids, scores, 2, 0, return_parent_idx=True)
    assert sel_ids.lod() == [[0, 1, 2], [0, 0, 2]]
    assert sel_ids.data.ravel().tolist() == [7, 6] and parent.tolist() == [1, 1]
    sent, sent_scores = S.beam_search_decode([pre_ids, sel_ids], [pre_scores, sel_scores], 2, 0)
    assert sent.lod() == [[0, 1, 3], [0, 1, 3, 5]]
    assert sent.data.tolist() == [0, 5, 7, 5, 6]


def _ctc_reference(seq, blank, merge):
    out, prev = [], None
    for token in seq:
        if token != blank and not (merge and token == prev):
            out.append(token)
        prev = token
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=8), min_size=1, max_size=5), st.integers(0, 3), st.booleans())
def test_ctc_align_both_forms_equal_a_per_sequence_loop(seqs, blank, merge):
    x = lt.from_nested_list([[[t] for t in s] for s in seqs], dtype="int64", lod_level=1)
    expected = [_ctc_reference(s, blank, merge) for s in seqs]
    out = S.ctc_align(x, blank, merge_repeated=merge)
    assert out.tolist() == [[[t] for t in e] for e in expected]
    width = max(len(s) for s in seqs)
    dense = np.full((len(seqs), width + 1), 7, dtype=np.int32)  # 7: never read, beyond every length
    for i, s in enumerate(seqs):
        dense[i, : len(s)] = s
    padded, length = S.ctc_align(dense, blank, merge_repeated=merge, input_length=[len(s) for s in seqs],
                                 padding_value=-1)
    assert padded.dtype == length.dtype == np.int32 and length.shape == (len(seqs), 1)
    assert [row[: n].tolist() for row, n in zip(padded, length.ravel())] == expected
    assert all((row[n:] == -1).all() for row, n in zip(padded, length.ravel()))


def test_padded_forms_of_greedy_decoder_and_edit_distance():
    torch = pytest.importorskip("torch")
    probs = np.eye(3)[[[1, 1, 0, 2], [2, 0, 2, 2]]]
    out, length = S.ctc_greedy_decoder(probs, 0, input_length=[[4], [2]], padding_value=9)
    assert out.tolist() == [[1, 2, 9, 9], [2, 9, 9, 9]] and length.ravel().tolist() == [2, 1]
    out_t, length_t = S.ctc_greedy_decoder(torch.from_numpy(probs), 0, input_length=torch.tensor([4, 2]))
    assert isinstance(out_t, torch.Tensor) and out_t[:, :2].tolist() == [[1, 2], [2, 0]]
    hyp, ref = np.array([[1, 2, 3, 0], [4, 0, 0, 0]]), np.array([[1, 3], [4, 4]])
    d, n = S.edit_distance(hyp, ref, normalized=False, input_length=[3, 1], label_length=[2, 2])
    assert d.ravel().tolist() == [1.0, 1.0] and n.tolist() == [2]
    d_t, _ = S.edit_distance(torch.from_numpy(hyp), torch.from_numpy(ref), input_length=torch.tensor([3, 1]),
                             label_length=torch.tensor([2, 2]))
    assert isinstance(d_t, torch.Tensor) and d_t.ravel().tolist() == [0.5, 0.5]


PADDED_BAD = [
    ("one-length", lambda: S.edit_distance(np.zeros((1, 2), "int64"), np.zeros((1, 2), "int64"), input_length=[1]),
     ValueError, "needs both input_length and label_length; label_length is None"),
    ("rows", lambda: S.edit_distance(np.zeros((2, 2), "int64"), np.zeros((1, 2), "int64"), input_length=[1, 1],
                                     label_length=[1]), ValueError, "same number of rows, got 2 and 1"),
    ("float-ids", lambda: S.ctc_align(np.zeros((1, 2)), 0, input_length=[1]), TypeError,
     "integer ids, got dtype float64"),
    ("length-shape", lambda: S.ctc_align(np.zeros((2, 3), "int64"), 0, input_length=[[1, 1]]), ValueError,
     r"input_length must have shape \[2\] or \[2, 1\] \(one per row\), got \[1, 2\]"),
    ("length-range", lambda: S.ctc_align(np.zeros((2, 3), "int64"), 0, input_length=[1, 4]), ValueError,
     r"input_length\[1\]=4 is outside \[0, 3\]"),
    ("lod-and-length", lambda: S.ctc_greedy_decoder(lt.LoDTensor(np.zeros((2, 3)), [[0, 2]]), 0, input_length=[2]),
     ValueError, "input has a lod, so its length is given by it"),
    ("rank", lambda: S.ctc_greedy_decoder(np.zeros((2, 3)), 0, input_length=[2, 2]), ValueError,
     r"padded input must have shape \[batch, T, num_classes \+ 1\], got \[2, 3\]"),
    ("blank", lambda: S.ctc_align(lt.LoDTensor(np.zeros((2, 1), "int64"), [[0, 2]]), "0"), TypeError,
     "blank must be an integer, got str '0'"),
]


@pytest.mark.parametrize("call, exc, pattern", [case[1:] for case in PADDED_BAD], ids=[case[0] for case in PADDED_BAD])
def test_padded_form_errors(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
