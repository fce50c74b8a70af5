import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import LoDTensor
from lodtensor.backend.numpy import _tuning as np_tuning

from .reference import pad as ref_pad
from .strategies import lod_tensors


def test_to_padded_with_empty_sequence():
    t = LoDTensor(np.arange(1, 6, dtype=np.float32), [[0, 2, 2, 5]])
    padded, lengths = t.to_padded(pad_value=-1)
    assert padded.tolist() == [[1, 2, -1], [-1, -1, -1], [3, 4, 5]]
    assert lengths.tolist() == [2, 0, 3] and lengths.dtype == np.int64
    assert padded.dtype == np.float32


def test_to_padded_maxlen_and_rows():
    t = LoDTensor(np.arange(10).reshape(5, 2), [[0, 1, 5]])
    padded, _ = t.to_padded(maxlen=6)
    assert padded.shape == (2, 6, 2) and padded[0, 1:].sum() == 0
    message = "maxlen=3 is shorter than the longest sequence \\(4\\); truncation is not supported"
    with pytest.raises(ValueError, match=message):
        t.to_padded(maxlen=3)
    padded, _ = t.to_padded(pad_value=np.array([7, 8]))
    assert padded[0, 1].tolist() == [7, 8]
    with pytest.raises(ValueError, match="pad_value must be a scalar or broadcast"):
        t.to_padded(pad_value=np.zeros(3))


def test_to_padded_levels():
    t = lt.from_nested_list([[[1, 2], [3]], [[4, 5, 6]]])
    outer, lengths = t.to_padded(level=0)
    assert outer.tolist() == [[1, 2, 3], [4, 5, 6]] and lengths.tolist() == [3, 3]
    inner, lengths = t.to_padded()
    assert inner.tolist() == [[1, 2, 0], [3, 0, 0], [4, 5, 6]] and lengths.tolist() == [2, 1, 3]
    with pytest.raises(IndexError, match="level 2 is out of range"):
        t.to_padded(level=2)


def test_to_padded_out():
    t = LoDTensor(np.arange(6, dtype=np.float32).reshape(3, 2), [[0, 1, 3]])
    out = np.full((2, 2, 2), 99, np.float32)
    padded, _ = t.to_padded(out=out)
    assert padded is out and out.tolist() == [[[0, 1], [0, 0]], [[2, 3], [4, 5]]]
    with pytest.raises(ValueError, match=r"out must have shape \(2, 2, 2\)"):
        t.to_padded(out=np.zeros((2, 3, 2), np.float32))
    with pytest.raises(TypeError, match="out must have dtype float32"):
        t.to_padded(out=np.zeros((2, 2, 2), np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        t.to_padded(out=np.zeros((2, 2, 4), np.float32)[:, :, ::2])


def test_from_padded():
    t = lt.from_padded(np.array([[1, 2, 0], [0, 0, 0], [3, 4, 5]]), [2, 0, 3])
    assert t.lod() == [[0, 2, 2, 5]] and t.data.tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match=r"lengths\[1\]=4 exceeds the padded length 3"):
        lt.from_padded(np.zeros((2, 3)), [1, 4])
    with pytest.raises(ValueError, match="one entry per sequence \\(2\\), got 3"):
        lt.from_padded(np.zeros((2, 3)), [1, 1, 1])
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        lt.from_padded(np.zeros(3), [1, 1, 1])
    with pytest.raises(lt.LoDError, match="non-negative"):
        lt.from_padded(np.zeros((2, 3)), [1, -1])


def test_to_padded_all_three_levels():
    t = lt.from_nested_list([[[[1], [2, 3]], [[4]]], [[[5, 6, 7]]]])
    padded, masks = t.to_padded_all(pad_value=-1)
    assert padded.shape == (2, 2, 2, 3)
    assert padded[0, 0, 1].tolist() == [2, 3, -1] and padded[1, 1].tolist() == [[-1] * 3] * 2
    assert [m.shape for m in masks] == [(2, 2), (2, 2, 2), (2, 2, 2, 3)]
    assert masks[0].tolist() == [[True, True], [True, False]]
    assert masks[-1].sum() == 7
    assert np.array_equal(padded[masks[-1]], t.data)
    assert lt.from_padded_all(padded, masks).tolist() == t.tolist()


def test_from_padded_all_rejects_bad_masks():
    t = lt.from_nested_list([[[1], [2, 3]], [[4]]])
    padded, masks = t.to_padded_all()
    with pytest.raises(ValueError, match="prefix"):
        lt.from_padded_all(padded, [np.array([[False, True], [True, False]]), masks[1]])
    with pytest.raises(ValueError, match="boolean array of rank 2"):
        lt.from_padded_all(padded, [masks[0].astype(int), masks[1]])


@given(lod_tensors(min_levels=1, max_levels=3), st.sampled_from([0, -1, 2.5]), st.integers(0, 3))
def test_pad_unpad_round_trip(t, pad_value, extra):
    lengths = t.lod.lengths(-1)
    offsets = t.lod.absolute_offsets(-1)
    sequences = [list(t.data[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    maxlen = int(lengths.max(initial=0)) + extra
    padded, lens = t.to_padded(pad_value=pad_value, maxlen=maxlen)
    assert np.array_equal(padded, ref_pad(sequences, pad_value, maxlen, t.data.shape[1:], t.dtype))
    back = lt.from_padded(padded, lens)
    assert back.lod() == [t.lod.offsets(-1).tolist()] and np.array_equal(back.data, t.data)


@given(lod_tensors(min_levels=1, max_levels=3))
def test_pad_all_round_trip(t):
    padded, masks = t.to_padded_all()
    assert len(masks) == t.lod_level and padded.ndim == t.lod_level + t.data.ndim
    again = lt.from_padded_all(padded, masks)
    assert again.lod == t.lod and np.array_equal(again.data, t.data)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("pad_value", [0, -1.5, "row"])
@pytest.mark.parametrize("use_out", [False, True])
def test_split_padding_paths_agree(monkeypatch, threads, pad_value, use_out):

    monkeypatch.setattr(np_tuning, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setenv("LODTENSOR_NUM_THREADS", threads)
    lt.set_num_threads(None)  # read the environment variable
    assert lt.get_num_threads() == int(threads)
    lengths = [3, 0, 7, 1, 1, 0, 5, 2, 9, 4]
    data = np.arange(sum(lengths) * 3, dtype=np.float32).reshape(-1, 3)
    t = LoDTensor.from_lengths(data, lengths)
    value = np.array([7.0, 8.0, 9.0], np.float32) if pad_value == "row" else pad_value
    out = np.full((10, 11, 3), 123.0, np.float32) if use_out else None
    padded, lens = t.to_padded(pad_value=value, maxlen=11, out=out)
    offsets = t.lod.offsets(0)
    expected = ref_pad([list(data[a:b]) for a, b in zip(offsets[:-1], offsets[1:])], value, 11, (3,), np.float32)
    assert np.array_equal(padded, expected)
    back = lt.from_padded(padded, lens)
    assert np.array_equal(back.data, data) and back.lod() == t.lod()
