import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lodtensor import BackendMismatchError, backend_of, get_backend
from lodtensor.backend.numpy import _routes
from lodtensor.backend.numpy import _tuning as np_tuning
from lodtensor.lod import lengths_to_offsets

from ..conftest import BackendCase
from ..strategies import lengths


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_segment_reductions_with_empty_sequences(backend, dtype):
    data = backend.array(np.arange(1, 6), dtype=dtype)
    offsets = backend.array(lengths_to_offsets([2, 0, 3]))
    assert backend.numpy(backend.segment_sum(data, offsets)).tolist() == [3, 0, 12]
    assert backend.numpy(backend.segment_max(data, offsets, empty=-7)).tolist() == [2, -7, 5]
    assert backend.numpy(backend.segment_min(data, offsets, empty=-7)).tolist() == [1, -7, 3]
    assert backend.numpy(backend.segment_mean(data, offsets)).tolist() == [1.5, 0, 4]


def ref_segments(data, lens):
    offs = lengths_to_offsets(lens)
    return [data[a:b] for a, b in zip(offs[:-1], offs[1:])]


@pytest.mark.parametrize(
    "name",
    ["numpy", "torch", "torch-generic", pytest.param("cupy", marks=pytest.mark.gpu),
     pytest.param("torch-cuda", marks=pytest.mark.gpu)],
)
@settings(max_examples=40)
@given(lens=lengths(min_size=1), row=st.sampled_from([(), (3,), (4, 5)]))
def test_kernels_agree_with_reference(name, lens, row):
    with BackendCase(name) as case:
        _kernels_agree(case, lens, row)


def _kernels_agree(case, lens, row):
    n = sum(lens)
    host = np.random.default_rng(n).standard_normal((n,) + row)
    data = case.array(host)
    offsets = lengths_to_offsets(lens)
    segs = ref_segments(host, lens)
    zero = np.zeros(row)
    num = case.numpy
    assert np.allclose(num(case.segment_sum(data, offsets)), [s.sum(0) if len(s) else zero for s in segs])
    assert np.allclose(num(case.segment_max(data, offsets, empty=0)), [s.max(0) if len(s) else zero for s in segs])
    assert np.allclose(num(case.segment_min(data, offsets, empty=0)), [s.min(0) if len(s) else zero for s in segs])
    assert np.allclose(num(case.segment_mean(data, offsets)), [s.mean(0) if len(s) else zero for s in segs])
    soft = num(case.segment_softmax(data, offsets))
    parts = [np.exp(s - s.max(0)) / np.exp(s - s.max(0)).sum(0) for s in segs if len(s)]
    assert np.allclose(soft, np.concatenate(parts) if parts else host)
    ids = num(case.segment_ids(case.array(offsets), total=n))
    assert ids.tolist() == [i for i, k in enumerate(lens) for _ in range(k)]
    rep = case.repeat_interleave(case.array(np.arange(len(lens))), case.array(np.asarray(lens)), total=n)
    assert num(rep).tolist() == ids.tolist()
    assert num(case.cumsum(case.array(np.asarray(lens)), exclusive=True)).tolist() == offsets[:-1].tolist()
    idx = np.arange(n)[::-1].copy()
    assert np.array_equal(num(case.gather(data, case.array(idx))), host[idx])
    expected = np.zeros_like(host)
    expected[idx] = host
    assert np.array_equal(num(case.scatter(case.array(np.zeros_like(host)), case.array(idx), data)), expected)
    maxlen = max(lens) + 1
    padded = case.pad(data, offsets, maxlen, 0.0)
    assert tuple(padded.shape) == (len(lens), maxlen) + row
    assert np.array_equal(num(case.unpad(padded, offsets)), host)


def test_backend_of_and_mismatch():
    assert backend_of(np.zeros(2), 3, np.float32(1)).name == "numpy"

    class FakeCupy:
        pass

    FakeCupy.__module__ = "cupy._core"
    with pytest.raises(BackendMismatchError, match="cannot combine 'cupy' and 'numpy'"):
        backend_of(np.zeros(2), FakeCupy())
    with pytest.raises(ValueError, match="must be one of"):
        get_backend("jax")


def _numpy_path(monkeypatch, path):
    """The NumPy backend's segment reductions by ``path``: "compiled" (its compiled kernel), "csr"
    (SciPy's product for sums, NumPy kernels otherwise), "no-scipy" (NumPy kernels alone)."""
    from lodtensor.backend.numpy import _compiled as _np_compiled

    if path == "compiled":
        if _np_compiled._kernel is None:
            pytest.skip("the compiled segment kernel was not built")
        monkeypatch.setattr(_np_compiled, "_enabled", True)
        return
    monkeypatch.setattr(_np_compiled, "_enabled", False)
    if path == "csr":
        pytest.importorskip("scipy")
    else:
        monkeypatch.setattr(_routes, "_SPARSE", False)


NUMPY_PATHS = ["compiled", "csr", "no-scipy"]


@pytest.mark.parametrize("path", NUMPY_PATHS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_numpy_segment_sum_paths_agree(monkeypatch, path, dtype):
    _numpy_path(monkeypatch, path)
    be = get_backend("numpy")
    lens = [3, 0, 5, 1, 0, 7]
    data = np.arange(16 * 10, dtype=dtype).reshape(16, 10)
    offsets = lengths_to_offsets(lens)
    out = be.segment_sum(data, offsets)
    expected = [data[a:b].sum(0) if b > a else np.zeros(10) for a, b in zip(offsets[:-1], offsets[1:])]
    assert out.dtype == np.dtype(dtype) and np.allclose(out, expected)
    assert be.segment_sum(data[:0], lengths_to_offsets([0, 0])).tolist() == [[0] * 10] * 2


@pytest.mark.parametrize("row", [(4, 5), (8, 8)], ids=["blocks-and-singles", "blocks"])
@pytest.mark.parametrize("path", NUMPY_PATHS)
def test_threaded_numpy_reductions_agree(monkeypatch, path, row):
    import lodtensor as lt

    _numpy_path(monkeypatch, path)
    monkeypatch.setattr(np_tuning, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(np_tuning, "COMPILED_PARALLEL_BYTES", 0)
    # 80-byte rows: blocks of 4 rows, so sequences of 4+ rows are reduced alone; 512-byte rows: 16 rows
    monkeypatch.setattr(np_tuning, "BLOCK_BYTES", 320 if row == (4, 5) else 8192)
    lt.set_num_threads(3)
    try:
        be = get_backend("numpy")
        lens = [3, 0, 5, 1, 0, 7, 2, 2, 9, 1, 4]
        dtype = np.float32 if row == (4, 5) else np.float64  # 80-byte rows, 512-byte rows
        data = np.random.default_rng(1).standard_normal((sum(lens),) + row).astype(dtype)
        offsets = lengths_to_offsets(lens)
        segs = [data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        zero = np.zeros(row, dtype)
        assert np.allclose(be.segment_sum(data, offsets), [s.sum(0) if len(s) else zero for s in segs], atol=1e-5)
        assert np.allclose(be.segment_max(data, offsets, empty=0), [s.max(0) if len(s) else zero for s in segs])
        assert np.allclose(be.segment_min(data, offsets, empty=0), [s.min(0) if len(s) else zero for s in segs])
        monkeypatch.setattr(np_tuning, "SOFTMAX_BLOCK_BYTES", 200)  # blocks of 2 or 1 rows
        soft = [np.exp(s - s.max(0)) / np.exp(s - s.max(0)).sum(0) for s in segs if len(s)]
        assert np.allclose(be.segment_softmax(data, offsets), np.concatenate(soft))
        monkeypatch.setattr(np_tuning, "SOFTMAX_PARALLEL_BYTES", 0)  # narrow rows, split over threads
        full = [k for k in lens if k]
        scores = data.reshape(data.shape[0], -1)[:, 0].copy()
        parts = np.split(scores, np.cumsum(full)[:-1])
        expected = np.concatenate([np.exp(p - p.max()) / np.exp(p - p.max()).sum() for p in parts])
        assert np.allclose(be.segment_softmax(scores, lengths_to_offsets(full)), expected)
    finally:
        lt.set_num_threads(None)


@pytest.mark.parametrize("path", ["chunks", "blocks"])
def test_block_plans_are_cached_and_never_stale(monkeypatch, path, uncompiled):
    """A plan is reused for a LoD's read-only offsets, and for a writable array while its
    values are unchanged; one changed in place between calls is planned afresh. Floats go
    by chunks (``_np_chunks``), complex numbers (no identity for max) by sorted blocks."""
    from lodtensor.backend.numpy import _backend as numpy_backend
    from lodtensor.backend.numpy import _chunks as _np_chunks

    be = get_backend("numpy")
    data = np.random.default_rng(2).standard_normal((10, 32))
    if path == "blocks":
        data = data + 0j
    builds = []
    module, name = (_np_chunks, "_chunk_plan") if path == "chunks" else (numpy_backend, "_block_plan")
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: builds.append(a) or real(*a))
    frozen = lengths_to_offsets([4, 0, 6])
    frozen.setflags(write=False)
    for _ in range(2):
        out = be.segment_max(data, frozen, empty=-1)
        assert np.array_equal(out, [data[:4].max(0), np.full(32, -1.0), data[4:].max(0)])
    assert len(builds) == 1
    be.segment_min(np.ascontiguousarray(data[:, :16]), frozen, empty=0)  # another row width: another plan
    assert len(builds) == 2
    live = lengths_to_offsets([4, 0, 6])
    be.segment_max(data, live, empty=0)
    be.segment_max(data, live, empty=0)
    assert len(builds) == 3
    live[1:3] = [5, 5]  # now lengths 5, 0, 5
    assert np.array_equal(be.segment_max(data, live, empty=0)[0], data[:5].max(0))
    assert len(builds) == 4


def test_block_plans_go_with_their_offsets(uncompiled):
    import gc

    from lodtensor.backend.numpy import _backend as numpy_backend

    offsets = lengths_to_offsets([3, 5])
    offsets.setflags(write=False)
    get_backend("numpy").segment_max(np.ones((8, 32)), offsets, empty=0)
    assert any(key[0] == id(offsets) for key in numpy_backend._PLANS)
    key = id(offsets)
    del offsets
    gc.collect()
    assert not any(k[0] == key for k in numpy_backend._PLANS)


@settings(max_examples=60, deadline=None)
@given(lens=st.lists(st.integers(0, 40), min_size=1, max_size=30), width=st.sampled_from([16, 24, 64]),
       block=st.sampled_from([64, 512, 4096, 1 << 20]), threads=st.sampled_from([1, 3]))
def test_block_reductions_match_per_sequence_reductions(lens, width, block, threads):
    """Max and min of wide rows by sorted blocks (complex rows: padding repeats, one-sequence
    blocks, threads) equal the reductions of each sequence on its own, for any lengths and block size."""
    import lodtensor as lt

    saved = np_tuning.BLOCK_BYTES, np_tuning.MIN_PARALLEL_BYTES
    np_tuning.BLOCK_BYTES, np_tuning.MIN_PARALLEL_BYTES = block, 0
    lt.set_num_threads(threads)
    try:
        g = np.random.default_rng(sum(lens))
        data = (g.standard_normal((sum(lens), width)) + 1j * g.standard_normal((sum(lens), width))).astype(np.complex64)
        offsets = lengths_to_offsets(lens)
        segs = [data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        be = get_backend("numpy")
        assert np.array_equal(be.segment_max(data, offsets, empty=-5),
                              [s.max(0) if len(s) else np.full(width, -5, np.complex64) for s in segs])
        assert np.array_equal(be.segment_min(data, offsets, empty=7),
                              [s.min(0) if len(s) else np.full(width, 7, np.complex64) for s in segs])
    finally:
        np_tuning.BLOCK_BYTES, np_tuning.MIN_PARALLEL_BYTES = saved
        lt.set_num_threads(None)


@settings(max_examples=80, deadline=None)
@given(lens=st.lists(st.integers(0, 70), min_size=1, max_size=40), width=st.sampled_from([2, 5, 16, 64]),
       dtype=st.sampled_from(["float32", "float64", "int32", "uint8"]),
       chunk=st.sampled_from([64, 512, 4096, 1 << 20]), ratio=st.sampled_from([1.25, 1.5, 3.0]))
def test_chunk_reductions_threaded_match_one_thread_and_each_sequence(lens, width, dtype, chunk, ratio):
    """NumPy-only segment sum, max and min by chunks (classes padded with the identity, long
    sequences folded where they lie): the threaded result equals the one-thread result bit for bit
    (chunks are independent, each reduced in the same order), and both equal each sequence
    reduced on its own (max/min exactly; sums within float32/float64 tolerance of another order)."""
    import lodtensor as lt
    from lodtensor.backend.numpy import _chunks as _np_chunks

    saved = np_tuning.CHUNK_BYTES, np_tuning.CLASS_RATIO, np_tuning.CHUNK_PARALLEL_BYTES
    np_tuning.CHUNK_BYTES, np_tuning.CLASS_RATIO, np_tuning.CHUNK_PARALLEL_BYTES = chunk, ratio, 0
    try:
        g = np.random.default_rng(sum(lens) + width)
        data = (g.standard_normal((sum(lens), width)) * 50).astype(dtype)
        offsets = lengths_to_offsets(lens)
        segs = [data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        results = {}
        for threads in (1, 3):
            lt.set_num_threads(threads)
            results[threads] = [_np_chunks.chunk_reduce(u, data, offsets, f) for u, f in
                                ((np.add, 0), (np.maximum, 3), (np.minimum, 7))] if len(data) else None
        if not len(data):
            return
        for one, many in zip(results[1], results[3]):
            assert one.dtype == data.dtype and np.array_equal(one, many)
        total, peak, low = results[1]
        fill = lambda v: np.full(width, v, dtype)  # noqa: E731
        assert np.array_equal(peak, [s.max(0) if len(s) else fill(3) for s in segs])
        assert np.array_equal(low, [s.min(0) if len(s) else fill(7) for s in segs])
        expected = np.array([s.sum(0, dtype=dtype) if len(s) else fill(0) for s in segs])
        if data.dtype.kind == "f":  # another summation order: a few ulps of the magnitudes summed
            tol = np.finfo(dtype).eps * 8 * max(lens) * (np.abs(data).max() + 1)
            assert np.allclose(total, expected, rtol=0, atol=tol)
        else:
            assert np.array_equal(total, expected)  # integers wrap identically in any order
    finally:
        np_tuning.CHUNK_BYTES, np_tuning.CLASS_RATIO, np_tuning.CHUNK_PARALLEL_BYTES = saved
        lt.set_num_threads(None)
