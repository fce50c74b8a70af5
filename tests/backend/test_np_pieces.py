"""Segment sums of narrow float rows by block pieces (``lodtensor.backend._np_pieces``)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.backend import get_backend
from lodtensor.backend.numpy import _pieces as _np_pieces
from lodtensor.backend.numpy import _routes
from lodtensor.backend.numpy import _tuning as np_tuning


def _offsets(lens):
    return np.r_[0, np.cumsum(lens)].astype(np.int64)


def _oracle(data, offsets):
    """Each sequence summed on its own, in float64 (the reference the tolerance is taken against)."""
    return np.array([data[a:b].astype(np.float64).sum(0) for a, b in zip(offsets[:-1], offsets[1:])])


def _lengths(k):
    """Random LoDs with empty sequences, one giant sequence, all length 1, lengths around multiples
    of ``k`` and sequences inside one block."""
    around = st.integers(1, 4).flatmap(lambda m: st.sampled_from([m * k - 1, m * k, m * k + 1]))
    return st.one_of(
        st.lists(st.integers(0, 70), min_size=1, max_size=40),
        st.lists(st.one_of(around, st.just(0)), min_size=1, max_size=30),
        st.lists(st.integers(0, k - 1), min_size=1, max_size=60),
        st.integers(1, 300).map(lambda n: [1] * n),
        st.tuples(st.integers(0, 5), st.integers(200, 900), st.integers(0, 5)).map(lambda t: [t[0], t[1], t[2]]),
    )


@settings(max_examples=120, deadline=None)
@given(data=st.data(), k=st.sampled_from([2, 4, 16]), dtype=st.sampled_from(["float32", "float64"]),
       width=st.sampled_from([1, 4, 8, 16]))
def test_pieces_sum_matches_each_sequence_and_threads_match_bit_for_bit(data, k, dtype, width):
    """Sums by pieces equal each sequence summed on its own within the tolerance of another
    summation order (``8 * eps * longest * (max |x| + 1)``), and the threaded product (blocks split
    among 3 threads) equals the one-thread result bit for bit (every block is reduced alone)."""
    lens = data.draw(_lengths(k))
    saved = np_tuning.PIECE_ROWS, np_tuning.PIECES_PARALLEL_BYTES
    np_tuning.PIECE_ROWS, np_tuning.PIECES_PARALLEL_BYTES = k, 0
    try:
        offsets = _offsets(lens)
        if offsets[-1] == 0:
            return
        g = np.random.default_rng(sum(lens) + k)
        values = (g.standard_normal((int(offsets[-1]), width)) * 50).astype(dtype)
        results = {}
        for threads in (1, 3):
            lt.set_num_threads(threads)
            results[threads] = _np_pieces.pieces_sum(values, offsets)
        assert results[1].dtype == values.dtype and results[1].shape == (len(lens), width)
        assert np.array_equal(results[1], results[3])
        tol = np.finfo(dtype).eps * 8 * max(lens) * (np.abs(values).max() + 1)
        assert np.allclose(results[1], _oracle(values, offsets), rtol=0, atol=tol)
    finally:
        np_tuning.PIECE_ROWS, np_tuning.PIECES_PARALLEL_BYTES = saved
        lt.set_num_threads(None)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_rows_stay_in_their_sequence(bad):
    """A 0 x inf in the product would be NaN in a neighbour's piece: such data goes the chunk
    kernel's way, so only the sequence holding the value is affected."""
    offsets = _offsets([5, 3, 9, 0, 7])
    values = np.arange(24 * 16, dtype=np.float32).reshape(24, 16) / 7
    values[6, 2] = bad  # the second sequence, which sits inside the second block of 4
    saved = np_tuning.PIECE_ROWS
    np_tuning.PIECE_ROWS = 4
    try:
        got = _np_pieces.pieces_sum(values, offsets)
    finally:
        np_tuning.PIECE_ROWS = saved
    want = _oracle(values, offsets).astype(np.float32)
    assert np.allclose(got, want, rtol=1e-5, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
    assert np.isfinite(np.delete(got, 1, axis=0)).all()


@pytest.fixture
def numpy_alone(monkeypatch, uncompiled):
    """The NumPy backend as without SciPy and its compiled kernel (sums go by NumPy kernels, not a
    CSR product)."""
    monkeypatch.setattr(_routes, "_SPARSE", False)
    return get_backend("numpy")


def test_backend_sums_of_narrow_float_rows_go_by_pieces(numpy_alone, monkeypatch):
    """segment_sum and segment_mean of float32 x 16 and float64 x 8 rows use the pieces (one plan
    per LoD and dtype), other dtypes and widths the chunk kernel; results equal each sequence's."""
    calls = []
    real = _np_pieces._pieces_plan
    monkeypatch.setattr(_np_pieces, "_pieces_plan", lambda *a: calls.append(a[2]) or real(*a))
    offsets = _offsets([40, 0, 3, 17, 1, 64])
    offsets.setflags(write=False)
    g = np.random.default_rng(5)
    for dtype, width in (("float32", 16), ("float64", 8), ("float32", 4), ("int32", 16), ("float32", 64)):
        values = (g.standard_normal((int(offsets[-1]), width)) * 9).astype(dtype)
        for _ in range(2):
            total = numpy_alone.segment_sum(values, offsets)
            assert total.dtype == values.dtype
            assert np.allclose(total, _oracle(values, offsets), rtol=1e-5, atol=1e-3)
        mean = numpy_alone.segment_mean(values, offsets, empty=-2)
        assert mean[1].tolist() == [-2] * width
    assert calls == [np.dtype("float32"), np.dtype("float64")]


def test_non_contiguous_and_multi_dim_rows(numpy_alone):
    """A strided view and rows of shape (4, 4) are summed like their contiguous copies."""
    offsets = _offsets([0, 33, 2, 0, 50, 16])
    g = np.random.default_rng(6)
    wide = g.standard_normal((int(offsets[-1]), 32)).astype(np.float32)
    view = wide[:, ::2]  # 16 float32 values a row, not contiguous
    assert not view.flags.c_contiguous
    got = numpy_alone.segment_sum(view, offsets)
    assert np.allclose(got, _oracle(view, offsets), rtol=1e-5, atol=1e-4)
    square = np.ascontiguousarray(view).reshape(-1, 4, 4)
    got = numpy_alone.segment_sum(square, offsets)
    assert got.shape == (6, 4, 4)
    assert np.allclose(got.reshape(6, 16), _oracle(view, offsets), rtol=1e-5, atol=1e-4)
    assert wide.flags.writeable and np.array_equal(view, wide[:, ::2])  # the caller's data untouched
