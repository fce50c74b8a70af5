"""NumPy ``unpad`` of small padded data: NumPy's boolean index, no row index (bench/overhead.py's
``from_padded`` per-call cost, 16 sequences: the index and row views cost 17 us, the mask 6).

Both paths give the same rows and the same error; the small one builds no index."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import get_backend
from lodtensor.backend.numpy import _backend, _tuning
from lodtensor.errors import ShapeError

CASES = {
    "rows": (np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4), [0, 2, 3]),
    "3d_rows": (np.arange(3 * 4 * 2 * 3, dtype=np.float64).reshape(3, 4, 2, 3), [0, 4, 4, 5]),
    "transposed": (np.arange(4 * 3 * 2, dtype=np.int32).reshape(2, 3, 4).transpose(0, 2, 1), [0, 3, 7]),
    "big_endian_f16": (np.arange(12, dtype=">f2").reshape(2, 6, 1), [0, 6, 6]),
    "bool": (np.arange(8).reshape(2, 4) % 3 == 0, [0, 1, 4]),
    "no_rows": (np.zeros((0, 5, 2)), [0]),
    "maxlen_0": (np.zeros((3, 0, 2)), [0, 0, 0, 0]),
}


def _both(monkeypatch, padded, offsets):
    be = get_backend("numpy")
    offsets = np.asarray(offsets, dtype=np.int64)
    small = be.unpad(padded, offsets)
    monkeypatch.setattr(_tuning, "UNPAD_MASK_BYTES", -1)
    return small, be.unpad(padded, offsets)


@pytest.mark.parametrize("case", sorted(CASES))
def test_small_unpad_equals_the_indexed_one(monkeypatch, case):
    padded, offsets = CASES[case]
    small, indexed = _both(monkeypatch, padded, offsets)
    assert small.dtype == indexed.dtype == padded.dtype and small.shape == indexed.shape
    np.testing.assert_array_equal(small, indexed)
    assert small.flags.c_contiguous and small.flags.writeable and not np.shares_memory(small, padded)


def test_small_unpad_builds_no_row_index(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("a row index for a small unpad")

    monkeypatch.setattr(_backend, "pad_index", refuse)
    t = lt.from_padded(np.arange(24.0).reshape(2, 3, 4), [2, 3])
    assert t.lod() == [[0, 2, 5]] and t.data[2].tolist() == [12.0, 13.0, 14.0, 15.0]


def test_both_paths_refuse_a_sequence_longer_than_maxlen(monkeypatch):
    be = get_backend("numpy")
    padded, offsets = np.zeros((2, 3, 1)), np.array([0, 2, 6])
    with pytest.raises(ShapeError) as small:
        be.unpad(padded, offsets)
    monkeypatch.setattr(_tuning, "UNPAD_MASK_BYTES", -1)
    with pytest.raises(ShapeError) as indexed:
        be.unpad(padded, offsets)
    assert str(small.value) == str(indexed.value) and "fewer than the longest sequence of offsets (4 rows)" in str(
        small.value)
