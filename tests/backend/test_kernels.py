import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lodtensor import BackendMismatchError, backend_of, get_backend
from lodtensor.backend import KERNELS
from lodtensor.lod import lengths_to_offsets

from ..strategies import lengths


@pytest.fixture(params=["numpy"])
def be(request):
    return get_backend(request.param)


def test_every_kernel_is_implemented(be):
    for name in KERNELS:
        assert callable(getattr(be, name)), name


def ref_segments(data, lens):
    offs = lengths_to_offsets(lens)
    return [data[a:b] for a, b in zip(offs[:-1], offs[1:])]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_segment_reductions_with_empty_sequences(be, dtype):
    data = be.asarray(np.arange(1, 6), dtype=dtype)
    offsets = be.asarray(lengths_to_offsets([2, 0, 3]))
    assert be.segment_sum(data, offsets).tolist() == [3, 0, 12]
    assert be.segment_max(data, offsets, empty=-7).tolist() == [2, -7, 5]
    assert be.segment_min(data, offsets, empty=-7).tolist() == [1, -7, 3]
    assert be.segment_mean(data, offsets).tolist() == [1.5, 0, 4]


@given(lengths(min_size=1), st.sampled_from([(), (3,)]))
def test_kernels_agree_with_reference(lens, row):
    be = get_backend("numpy")
    n = sum(lens)
    data = np.random.default_rng(n).standard_normal((n,) + row)
    offsets = lengths_to_offsets(lens)
    segs = ref_segments(data, lens)
    zero = np.zeros(row)
    assert np.allclose(be.segment_sum(data, offsets), [s.sum(0) if len(s) else zero for s in segs])
    assert np.allclose(be.segment_max(data, offsets, empty=0), [s.max(0) if len(s) else zero for s in segs])
    assert np.allclose(be.segment_min(data, offsets, empty=0), [s.min(0) if len(s) else zero for s in segs])
    soft = be.segment_softmax(data, offsets)
    expected = np.concatenate([np.exp(s - s.max(0)) / np.exp(s - s.max(0)).sum(0) for s in segs if len(s)] or [data])
    assert np.allclose(soft, expected)
    ids = be.segment_ids(offsets, total=n)
    assert ids.tolist() == [i for i, k in enumerate(lens) for _ in range(k)]
    assert be.repeat_interleave(np.arange(len(lens)), np.asarray(lens)).tolist() == ids.tolist()
    assert be.cumsum(np.asarray(lens), exclusive=True).tolist() == offsets[:-1].tolist()
    idx = np.arange(n)[::-1].copy()
    assert np.array_equal(be.gather(data, idx), data[idx])
    expected = np.zeros_like(data)
    expected[idx] = data
    assert np.array_equal(be.scatter(np.zeros_like(data), idx, data), expected)
    maxlen = max(lens) if lens else 0
    padded = be.pad(data, offsets, maxlen, 0.0)
    assert np.array_equal(be.unpad(padded, offsets), data)


def test_backend_of_and_mismatch():
    assert backend_of(np.zeros(2), 3, np.float32(1)).name == "numpy"

    class FakeCupy:
        pass

    FakeCupy.__module__ = "cupy._core"
    with pytest.raises(BackendMismatchError, match="cannot combine 'cupy' and 'numpy'"):
        backend_of(np.zeros(2), FakeCupy())
    with pytest.raises(ValueError, match="must be one of"):
        get_backend("jax")
