"""Every threaded path of the NumPy backend against its one-thread result.

The thresholds are lowered so small inputs take the threaded paths; each result
must equal the one-thread result bit for bit (elementwise work, moves and
reductions of independent chunks compute every element in the same order),
except sums computed in another order, checked within a stated tolerance.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import get_backend
from lodtensor.backend.numpy import _routes
from lodtensor.backend.numpy import _tuning as np_tuning
from lodtensor.backend.numpy import _ufunc as _np_ufunc
from lodtensor.lod import lengths_to_offsets


@pytest.fixture
def low_thresholds(monkeypatch):
    for name in ("UFUNC_PARALLEL_BYTES", "MIN_PARALLEL_BYTES", "SOFTMAX_PARALLEL_BYTES", "CHUNK_PARALLEL_BYTES"):
        monkeypatch.setattr(np_tuning, name, 0)
    monkeypatch.setattr(np_tuning, "UFUNC_BLOCK_ELEMENTS", 7)  # many blocks, ragged last one
    monkeypatch.setattr(np_tuning, "CHUNK_BYTES", 256)
    yield
    lt.set_num_threads(None)


def _both(fn):
    """``fn()`` with one thread and with three."""
    lt.set_num_threads(1)
    one = fn()
    lt.set_num_threads(3)
    return one, fn()


def _same(a, b):
    assert type(a) is type(b)
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


CALLS = [
    ("exp", lambda x, y: np.exp(x)),
    ("maximum scalar", lambda x, y: np.maximum(x, 0)),
    ("add", lambda x, y: x + y),
    ("multiply bias row", lambda x, y: x * np.float32([0.5, -2.0, 3.0])),
    ("true_divide float64 operand", lambda x, y: x / np.float64(3)),
    ("floor_divide int32 dtype", lambda x, y: np.floor_divide(x, 0.25, dtype=np.float64)),
    ("less", lambda x, y: x < y),
    ("power float64 dtype", lambda x, y: np.power(x, 2, dtype=np.float64)),
    ("sqrt nan", lambda x, y: np.sqrt(x)),
]


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_threaded_ufuncs_equal_one_thread(low_thresholds, monkeypatch, name, call):
    split = []
    real = _np_ufunc.threaded_ufunc
    monkeypatch.setattr(_np_ufunc, "threaded_ufunc", lambda *a: split.append(real(*a)) or split[-1])
    g = np.random.default_rng(3)
    x = lt.LoDTensor(g.standard_normal((40, 3)).astype(np.float32), recursive_sequence_lengths=[[10, 0, 30]])
    y = lt.LoDTensor(g.standard_normal((40, 3)).astype(np.float32), x.lod)
    with np.errstate(invalid="ignore"):
        one, many = _both(lambda: call(x, y))
    assert many.lod == x.lod
    assert split and split[-1] is not None  # the three-thread call took the split path
    _same(one.data, many.data)
    with np.errstate(invalid="ignore"):
        expected = call(x.data, y.data)  # plain NumPy, no lodtensor involved
    _same(one.data, expected)


def test_threaded_ufunc_writes_into_out(low_thresholds):
    x = lt.LoDTensor(np.linspace(-2, 2, 60, dtype=np.float32).reshape(20, 3), recursive_sequence_lengths=[[5, 15]])
    buf = np.full((20, 3), 7.0, np.float32)
    lt.set_num_threads(3)
    result = np.maximum(x, 0, out=buf)
    assert result is buf
    assert np.array_equal(buf, np.maximum(x.data, 0))
    out_t = lt.LoDTensor(np.zeros((20, 3), np.float32), x.lod)
    np.multiply(x, 2, out=(out_t,))
    assert np.array_equal(out_t.data, x.data * 2)


def test_threaded_ufunc_falls_back_where_it_cannot_split(low_thresholds):
    """``where=``, reductions, two outputs, gufuncs and object arrays run as one plain call."""
    be = get_backend("numpy")
    lt.set_num_threads(3)
    x = np.arange(12.0).reshape(6, 2)
    assert np.array_equal(be.apply_ufunc(np.add, "__call__", x, 1, where=x > 3, out=np.zeros_like(x)),
                          np.where(x > 3, x + 1, 0))
    assert be.apply_ufunc(np.add, "reduce", x, axis=0).tolist() == [30.0, 36.0]
    frac, whole = be.apply_ufunc(np.modf, "__call__", x / 4)
    assert np.array_equal(whole, np.floor(x / 4))
    w = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(be.apply_ufunc(np.matmul, "__call__", x, w), x @ w)  # a gufunc: not elementwise
    obj = np.array([[1, 2]] * 4, dtype=object)
    assert be.apply_ufunc(np.add, "__call__", obj, 1).tolist() == [[2, 3]] * 4


def test_threaded_ufunc_with_out_overlapping_an_input_gives_numpys_result(low_thresholds):
    """NumPy computes ``out=`` as if overlapping inputs were copied first; blocks written by threads
    must not feed later blocks (a reversed view, a shifted view, a broadcast row of ``out``)."""
    base = np.linspace(-3, 5, 90, dtype=np.float64).reshape(30, 3)
    cases = {
        "reversed": lambda a: (np.subtract, (a, a[::-1]), a),
        "shifted": lambda a: (np.add, (a[:-1], a[1:]), a[1:]),
        "broadcast row of out": lambda a: (np.multiply, (a, a[2]), a),
        "same array": lambda a: (np.add, (a, a), a),
    }
    lt.set_num_threads(3)
    for name, case in cases.items():
        want = base.copy()
        ufunc, args, out = case(want)
        ufunc(*args, out=out)
        got = base.copy()
        ufunc, args, out = case(got)
        get_backend("numpy").apply_ufunc(ufunc, "__call__", *args, out=(out,))
        np.testing.assert_array_equal(got, want, err_msg=name)
    t = lt.LoDTensor(base.copy(), recursive_sequence_lengths=[[10, 20]])
    np.subtract(t, t.data[::-1], out=(t,))
    np.testing.assert_array_equal(t.data, base - base[::-1])


def test_worker_threads_follow_the_callers_numpy_error_state(low_thresholds):
    """np.errstate is per thread: the pool's workers must use the caller's, so a threaded kernel is as
    quiet (log(-1) is nan, quietly, as in torch) or as strict (errstate(invalid="raise")) as one thread."""
    import warnings  # noqa: PLC0415

    import lodtensor.nested as ln  # noqa: PLC0415

    x = -np.ones((64, 3), np.float32)
    nt = ln.nested_tensor_from_jagged(x, np.array([0, 20, 64]))
    t = lt.LoDTensor(x, recursive_sequence_lengths=[[20, 44]])
    for threads in (1, 3):
        lt.set_num_threads(threads)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isnan(np.asarray(ln.log(nt).values())).all()  # the quiet op: no warning on any thread
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
            np.log(t)  # NumPy's own rules, honoured on every thread
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isnan(np.log(t).data).all()


@settings(max_examples=40, deadline=None)
@given(lens=st.lists(st.integers(0, 30), min_size=1, max_size=25), width=st.sampled_from([1, 4, 16, 40]))
def test_threaded_softmax_pad_unpad_equal_one_thread(lens, width):
    saved = (np_tuning.MIN_PARALLEL_BYTES, np_tuning.SOFTMAX_PARALLEL_BYTES,
             np_tuning.SOFTMAX_BLOCK_BYTES)
    np_tuning.MIN_PARALLEL_BYTES = np_tuning.SOFTMAX_PARALLEL_BYTES = 0
    np_tuning.SOFTMAX_BLOCK_BYTES = 64
    try:
        be = get_backend("numpy")
        offsets = lengths_to_offsets(lens)
        data = np.random.default_rng(sum(lens)).standard_normal((sum(lens), width)).astype(np.float32)
        maxlen = max(lens)
        for fn in (lambda: be.segment_softmax(data, offsets),
                   lambda: be.pad(data, offsets, maxlen, 0.0),
                   lambda: be.pad(data, offsets, maxlen, -1.5),
                   lambda: be.unpad(be.pad(data, offsets, maxlen, 0.0), offsets)):
            one, many = _both(fn)
            _same(one, many)
    finally:
        (np_tuning.MIN_PARALLEL_BYTES, np_tuning.SOFTMAX_PARALLEL_BYTES,
         np_tuning.SOFTMAX_BLOCK_BYTES) = saved
        lt.set_num_threads(None)


def test_threaded_segment_reductions_equal_one_thread(low_thresholds, monkeypatch):
    """Max and min bit for bit; sums too here (chunks reduce in the same order on any thread),
    and within float32 tolerance of another summation order (SciPy's CSR product, per-sequence sums)."""
    monkeypatch.setattr(_routes, "_SPARSE", False)
    be = get_backend("numpy")
    lens = [0, 3, 70, 1, 0, 12, 5, 33, 2, 2, 9]
    offsets = lengths_to_offsets(lens)
    data = np.random.default_rng(5).standard_normal((sum(lens), 16)).astype(np.float32)
    for fn in (lambda: be.segment_max(data, offsets, empty=-1), lambda: be.segment_min(data, offsets, empty=1),
               lambda: be.segment_sum(data, offsets), lambda: be.segment_mean(data, offsets)):
        one, many = _both(fn)
        _same(one, many)
    per_sequence = [data[a:b].sum(0) if b > a else np.zeros(16) for a, b in zip(offsets[:-1], offsets[1:])]
    # float32 sums of up to 70 values of magnitude < 5: another order differs by a few ulps of 350
    np.testing.assert_allclose(be.segment_sum(data, offsets), per_sequence, rtol=0, atol=70 * 5 * 2**-23 * 4)


def test_rows_of_no_values_reduce_to_rows_of_no_values(low_thresholds):
    be = get_backend("numpy")
    offsets = lengths_to_offsets([2, 0, 3])
    lt.set_num_threads(3)
    for fn in (be.segment_sum, lambda d, o: be.segment_max(d, o, empty=0), be.segment_mean):
        assert fn(np.zeros((5, 0), np.float32), offsets).shape == (3, 0)
        assert fn(np.zeros((5, 4, 0)), offsets).shape == (3, 4, 0)
