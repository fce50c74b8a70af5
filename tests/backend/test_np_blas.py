"""``linear``'s bias folded into NumPy's BLAS GEMM (``lodtensor/backend/_np_blas.py``): the same bits as
``x @ w.T + b``, and the two-step way wherever BLAS cannot take the arrays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor.nested as ln
from lodtensor.backend.numpy import _blas as _np_blas
from lodtensor.backend.numpy import _compiled as _np_compiled
from lodtensor.backend.numpy import _tuning as np_tuning

needs_blas = pytest.mark.skipif(not _np_blas._load(), reason="NumPy's wheel BLAS (scipy-openblas) not found")


@pytest.fixture
def folded(monkeypatch):
    """The folded path on, whatever the switch (it follows ``set_compiled_kernels``)."""
    if not _np_blas._load():
        pytest.skip("NumPy's wheel BLAS (scipy-openblas) not found")
    monkeypatch.setattr(_np_compiled, "_enabled", True)


def _case(n, k, m, dtype, seed=0):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, k)).astype(dtype)
    w = g.standard_normal((m, k)).astype(dtype)
    b = g.standard_normal(m).astype(dtype)
    return x, w, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(300, 256, 256), (1000, 7, 33), (129, 1, 300), (40000, 16, 2)])
def test_same_bits_as_matmul_then_add(folded, dtype, shape):
    x, w, b = _case(*shape, dtype)
    out = np.empty((shape[0], shape[2]), dtype)
    assert _np_blas.gemm_bias(x, w, b, out) is out
    np.testing.assert_array_equal(out, x @ w.T + b)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 700), k=st.integers(1, 70), m=st.integers(1, 300), pad=st.integers(0, 5),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_strided_rows_same_bits(n, k, m, pad, dtype):
    # rows apart (a column slice of a wider array) are read through the leading dimension
    if not _np_blas._load():
        pytest.skip("NumPy's wheel BLAS not found")
    saved = _np_compiled._enabled
    _np_compiled._enabled = True
    try:
        wide_x, wide_w, b = _case(n, k + pad, m, dtype, seed=n * 7 + k)
        x, w = wide_x[:, :k], wide_w[:, pad:]
        out = np.full((n, m), np.nan, dtype)
        got = _np_blas.gemm_bias(x, w, b, out)
        if n * m < np_tuning.BLAS_MIN_VALUES or min(n, m) == 1:
            assert got is None and np.isnan(out).all()  # small: the two-step way, out untouched
        else:
            assert got is out
            np.testing.assert_array_equal(out, x @ w.T + b)
    finally:
        _np_compiled._enabled = saved


def _refused(x, w, b, out):
    before = out.copy()
    assert _np_blas.gemm_bias(x, w, b, out) is None
    np.testing.assert_array_equal(out, before)  # untouched


def test_refuses_what_blas_cannot_take(folded):
    x, w, b = _case(400, 64, 128, np.float32)
    out = np.zeros((400, 128), np.float32)
    _refused(x.astype(np.float16), w.astype(np.float16), b.astype(np.float16), out.astype(np.float16))
    _refused(x.astype(np.int32), w.astype(np.int32), b.astype(np.int32), out.astype(np.int32))
    _refused(x.astype(">f4"), w, b, out)  # byte-swapped input
    _refused(x, w, b.astype(np.float64), out)  # a bias of another dtype: matmul then += casts it
    _refused(x[:, ::2], w[:, ::2], b, out)  # columns apart
    _refused(x[::-1], w, b, out)  # rows backwards
    _refused(x, w, b[:64], out)  # a bias of the wrong length
    _refused(x, w, b, np.zeros((400, 128), np.float32, order="F"))
    raw = np.zeros(400 * 128 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(400, 128)  # unaligned out
    _refused(x, w, b, raw)
    shared = np.zeros((400, 128), np.float32)
    _refused(shared[:, :64], w[:, :64], b, shared)  # out overlapping an input
    _refused(x[:10], w, b, out[:10])  # small: the two-step way
    x1, w1, b1 = _case(40000, 16, 1, np.float32)
    _refused(x1, w1, b1, np.zeros((40000, 1), np.float32))  # one column: matmul's GEMV


def test_switch_off_takes_the_two_step_way(monkeypatch):
    monkeypatch.setattr(_np_compiled, "_enabled", False)
    x, w, b = _case(400, 64, 128, np.float32)
    _refused(x, w, b, np.zeros((400, 128), np.float32))


def test_no_wheel_blas_takes_the_two_step_way(folded, monkeypatch):
    monkeypatch.setattr(_np_blas, "_GEMM", {})  # NumPy built against another BLAS
    x, w, b = _case(400, 64, 128, np.float32)
    _refused(x, w, b, np.zeros((400, 128), np.float32))
    t = ln.nested_tensor_from_jagged(x, np.array([0, 100, 400]))
    np.testing.assert_array_equal(ln.linear(t, w, b).values(), x @ w.T + b)


@needs_blas
@pytest.mark.parametrize("on", [True, False])
def test_nested_linear_either_way(monkeypatch, on):
    monkeypatch.setattr(_np_compiled, "_enabled", on)
    x, w, b = _case(3000, 32, 48, np.float32)
    t = ln.nested_tensor_from_jagged(x, np.array([0, 1000, 1000, 3000]))
    got = ln.linear(t, w, b)
    np.testing.assert_array_equal(got.values(), x @ w.T + b)
    np.testing.assert_array_equal(ln.linear(t, w).values(), x @ w.T)
    assert got.offsets().tolist() == [0, 1000, 1000, 3000]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [255, 256, 257, 512, 1500])
def test_deep_products_keep_the_two_step_bits(folded, dtype, k):
    # OpenBLAS adds a product deeper than its block depth into the result block by block: the bias
    # would go in first, so deeper than _MAX_DEPTH takes the two-step way
    x, w, b = _case(300, k, 200, dtype, seed=k)
    out = np.empty((300, 200), dtype)
    got = _np_blas.gemm_bias(x, w, b, out)
    assert (got is None) == (k > np_tuning.BLAS_MAX_DEPTH)
    t = ln.nested_tensor_from_jagged(x, np.array([0, 120, 300]))
    assert ln.linear(t, w, b).values().tobytes() == (x @ w.T + b).tobytes()


def test_the_probe_sees_a_split_product(folded, monkeypatch):
    monkeypatch.setattr(np_tuning, "BLAS_MAX_DEPTH", 4096)  # deeper than any OpenBLAS block depth
    fn = _np_blas._load()[np.dtype(np.float32)][0]
    assert not _np_blas._probe(np.float32, fn)


def test_mismatched_or_read_only_arguments_are_refused(folded):
    x, w, b = _case(300, 64, 200, np.float32)
    out = np.zeros((300, 200), np.float32)
    _refused(x, w[:, :32], b, out)  # k differs: NumPy's matmul raises, BLAS would read past w
    _refused(x[:, :32], w, b, out)
    _refused(x[None], w, b, out)
    readonly = np.zeros((300, 200), np.float32)
    readonly.flags.writeable = False
    assert _np_blas.gemm_bias(x, w, b, readonly) is None
    from lodtensor.backend.numpy._backend import NumpyBackend

    with pytest.raises(ValueError, match="mismatch"):
        NumpyBackend().linear(x, w[:, :32], b)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 700), cols=st.integers(0, 40), add=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64, np.int64]))
def test_broadcast_row_equals_numpys_broadcast(rows, cols, add, dtype):
    """Narrow rows done as wide ones (the bias of a linear layer): NumPy's values, every row, any
    row count (the remainder past the last whole tile included)."""
    from lodtensor.backend.numpy._util import broadcast_row  # noqa: PLC0415

    rng = np.random.default_rng(rows * 41 + cols)
    out = (rng.standard_normal((rows, cols)) * 100).astype(dtype)
    row = (rng.standard_normal(cols) * 100).astype(dtype)
    want = out + row if add else np.broadcast_to(row, out.shape).copy()
    broadcast_row(out, row, np.add if add else None)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("fold", [True, False])
def test_linear_with_a_narrow_bias_matches_two_steps(monkeypatch, fold):
    """The D=16 linear of bench/cpu.py's small batch: the bias (folded into the GEMM or added by
    broadcast_row) gives the bits of ``x @ w.T + b``."""
    from lodtensor import get_backend  # noqa: PLC0415

    rng = np.random.default_rng(7)
    x = rng.standard_normal((9000, 16)).astype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    monkeypatch.setattr(_np_compiled, "_enabled", fold)  # off: matmul, then the bias by broadcast_row
    np.testing.assert_array_equal(get_backend("numpy").linear(x, w, b), x @ w.T + b)
