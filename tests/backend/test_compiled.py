"""The compiled segment kernel (``lodtensor/backend/_csegment.c``) against NumPy reductions of each
sequence, its argument checks, and its switch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.backend import compiled_kernels, get_backend, set_compiled_kernels
from lodtensor.backend.numpy import _compiled as _np_compiled
from lodtensor.backend.numpy import _tuning as np_tuning
from lodtensor.backend.torch import _tuning as torch_tuning
from lodtensor.lod import lengths_to_offsets

needs_kernel = pytest.mark.skipif(_np_compiled._kernel is None, reason="the compiled kernel was not built")

UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}
# widths in values: tiles of 8, 4, 2 and 1 vectors, the scalar tail, and rows wider than a tile
WIDTHS = [8, 9, 12, 16, 17, 31, 40, 64, 65, 100, 256, 300]


def _instruction_sets():
    """The SIMD instruction sets either kernel module can run here, widest first (the baseline too)."""
    sets = []
    for module in (_np_compiled._kernel, _np_compiled._relu):
        if module is not None:
            import importlib

            sets.append(importlib.import_module(module.__module__).simd()[1])
    union = [name for names in sets for name in names]
    return sorted(set(union), key=union.index) or ["none"]  # a kernel without the set keeps its widest


@pytest.fixture(autouse=True, params=_instruction_sets())
def instruction_set(request):
    """Every test of the compiled kernels runs on each instruction set's build of them (the widest the
    CPU runs is what users get; the 16-byte baseline is what SSE2-only and arm64 machines run)."""
    import importlib

    modules = [importlib.import_module(k.__module__) for k in (_np_compiled._kernel, _np_compiled._relu)
               if k is not None]
    saved = [m.simd()[0] for m in modules]
    for m in modules:
        if request.param in m.simd()[1]:
            m.select_simd(request.param)
    yield request.param
    for m, name in zip(modules, saved):
        m.select_simd(name)


@pytest.fixture
def compiled(monkeypatch):
    if _np_compiled._kernel is None:
        pytest.skip("the compiled kernel was not built")
    monkeypatch.setattr(_np_compiled, "_enabled", True)


def _expected(ufunc, data, offsets, fill):
    out = np.full((offsets.size - 1,) + data.shape[1:], fill, dtype=data.dtype)
    for j, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        if b > a:
            out[j] = ufunc.reduce(data[a:b], axis=0)
    return out


def _values(dtype, shape, seed):
    g = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (g.standard_normal(shape) * 10).astype(dtype)
    info = np.iinfo(dtype)
    return g.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@needs_kernel
@settings(max_examples=80, deadline=None)
@given(lens=st.lists(st.integers(0, 70), min_size=1, max_size=25), width=st.sampled_from(WIDTHS),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64", "uint32", "uint64"]),
       op=st.sampled_from(sorted(UFUNCS)), seed=st.integers(0, 2**16))
def test_compiled_reductions_equal_numpy_per_sequence(lens, width, dtype, op, seed):
    """Every op, type and width: the same values as NumPy's reduction of each sequence. Each column
    is reduced in row order, as NumPy's reduction over axis 0, so even float sums agree bit for bit;
    int sums wrap around as NumPy's do."""
    ufunc = UFUNCS[op]
    offsets = lengths_to_offsets(lens)
    data = _values(dtype, (sum(lens), width), seed)
    saved = set_compiled_kernels(True)
    try:
        got = _np_compiled.compiled_reduce(ufunc, data, offsets, 7)
    finally:
        set_compiled_kernels(saved)
    if dtype.startswith("uint") and op != "sum":
        assert got is None  # unsigned max and min go NumPy's way
        return
    with np.errstate(over="ignore"):
        want = _expected(ufunc, data, offsets, 7)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, want)


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(lens=st.lists(st.integers(0, 300), min_size=1, max_size=12),
       dtype_width=st.sampled_from([("float32", 1), ("float32", 2), ("float32", 4), ("float64", 1),
                                    ("float64", 2), ("int32", 4), ("int64", 2)]),
       op=st.sampled_from(sorted(UFUNCS)), seed=st.integers(0, 2**16), nan=st.booleans())
def test_narrow_rows_read_as_one_run_per_sequence(lens, dtype_width, op, seed, nan):
    """Rows of 4-16 bytes: a sequence of at least four vectors is one run, its lanes folded per
    column at the end (shorter ones go column by column). Max, min and int sums equal NumPy's per
    sequence; float sums add in another order, so they agree to float rounding; a NaN anywhere in
    a column of a sequence makes that column NaN."""
    dtype, width = dtype_width
    ufunc = UFUNCS[op]
    offsets = lengths_to_offsets(lens)
    data = _values(dtype, (sum(lens), width), seed)
    if nan and dtype.startswith("float") and data.size:
        data.reshape(-1)[seed % data.size] = np.nan
    out = np.full((len(lens), width), 7, dtype=data.dtype)
    kind = {"float32": 0, "float64": 1, "int32": 2, "int64": 3}[dtype]
    _np_compiled._kernel({"sum": 0, "max": 1, "min": 2}[op], kind, data, offsets, out, width, 0, len(lens))
    with np.errstate(over="ignore", invalid="ignore"):
        want = _expected(ufunc, data, offsets, 7)
    if op == "sum" and dtype.startswith("float"):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-3 * np.sqrt(max(lens)))
    else:
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_nan_propagates_and_inf_is_a_value(compiled, dtype, op):
    """A NaN anywhere in a column of a sequence makes that column NaN, as np.maximum / np.minimum;
    infinities are ordinary values."""
    width = 20  # two vectors of float32 or five of float64, plus a tail for float32
    data = _values(dtype, (30, width), 3)
    data[0, 0] = np.nan  # first row of sequence 0
    data[9, 5] = np.nan  # last row of sequence 0
    data[12, 19] = np.nan  # middle of sequence 1 (the tail column)
    data[20, 3] = np.inf
    data[21, 3] = -np.inf
    offsets = lengths_to_offsets([10, 15, 5])
    got = _np_compiled.compiled_reduce(UFUNCS[op], data, offsets, 0)
    np.testing.assert_array_equal(got, _expected(UFUNCS[op], data, offsets, 0))  # NaN == NaN here
    assert np.isnan(got[0, [0, 5]]).all() and np.isnan(got[1, 19]) and not np.isnan(got[2]).any()


@needs_kernel
def test_long_sequences_span_blocks_and_threads_agree(monkeypatch):
    """Sequences longer than a block of rows (32 KiB) are reduced block after block into the same
    result; split over threads, every result is bit for bit the single-threaded one."""
    monkeypatch.setattr(_np_compiled, "_enabled", True)
    lens = [5000, 0, 1, 4097, 3, 1024, 1025]
    offsets = lengths_to_offsets(lens)
    for width in (8, 24, 64):
        data = _values("float32", (sum(lens), width), width)
        one = _np_compiled.compiled_reduce(np.add, data, offsets, 0)
        np.testing.assert_array_equal(one, _expected(np.add, data, offsets, 0))
        monkeypatch.setattr(np_tuning, "COMPILED_PARALLEL_BYTES", 0)
        lt.set_num_threads(3)
        try:
            for ufunc in UFUNCS.values():
                single = _expected(ufunc, data, offsets, 0)
                np.testing.assert_array_equal(_np_compiled.compiled_reduce(ufunc, data, offsets, 0), single)
        finally:
            lt.set_num_threads(None)
            monkeypatch.setattr(np_tuning, "COMPILED_PARALLEL_BYTES", 16 << 20)


def test_views_and_multi_dim_rows(compiled):
    """Strided views are read as they are (the caller's array untouched); rows of several dims
    keep their shape."""
    base = _values("float64", (40, 6, 4), 9)
    before = base.copy()
    view = base[::2, :, 1:]  # (20, 6, 3): 18 values of 8 bytes a row, not contiguous
    offsets = lengths_to_offsets([7, 0, 13])
    got = get_backend("numpy").segment_max(view, offsets, empty=-1)
    assert got.shape == (3, 6, 3)
    np.testing.assert_array_equal(got, _expected(np.maximum, view, offsets, -1))
    np.testing.assert_array_equal(base, before)


@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i4", ">i8"])
def test_non_native_byte_order_goes_numpy_s_way(compiled, dtype):
    """Big-endian rows (from a file, say) are not read as native ones: NumPy's kernels serve them,
    with NumPy's values."""
    data = np.arange(64 * 8).reshape(64, 8).astype(dtype)
    offsets = lengths_to_offsets([3, 0, 61])
    assert _np_compiled.compiled_reduce(np.add, data, offsets, 0) is None
    be = get_backend("numpy")
    np.testing.assert_array_equal(be.segment_sum(data, offsets), _expected(np.add, data, offsets, 0))
    np.testing.assert_array_equal(be.segment_max(data, offsets, empty=0), _expected(np.maximum, data, offsets, 0))


def test_narrow_rows_and_other_dtypes_go_numpy_s_way(compiled):
    offsets = lengths_to_offsets([2, 3])
    assert _np_compiled.compiled_reduce(np.add, np.ones((5, 7), np.float32), offsets, 0) is None  # 28 bytes
    assert _np_compiled.compiled_reduce(np.add, np.ones((5, 8), np.float16), offsets, 0) is None
    assert _np_compiled.compiled_reduce(np.multiply, np.ones((5, 8), np.float32), offsets, 0) is None
    assert _np_compiled.compiled_reduce(np.maximum, np.ones((5, 8), np.complex64), offsets, 0) is None
    assert _np_compiled.compiled_reduce(np.add, np.ones((5, 0), np.float32), offsets, 0) is None  # empty rows


@needs_kernel
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((3, 0), "op must be"),
        ((0, 9), "kind must be"),
        ((0, 0, "width", 0), "width must be"),
        ((0, 0, "offsets", np.array([0, 4, 2], np.int64)), "must not decrease"),
        ((0, 0, "offsets", np.array([0, 2, 9], np.int64)), "data has 5 rows"),
        ((0, 0, "offsets", np.array([-1, 2, 5], np.int64)), "offsets span rows -1:5"),
        ((0, 0, "offsets", np.array([0, 2, 5], np.int32)), "offsets must be native int64, got 4-byte items"),
        # the same item size, another format: read as it is, the bits would be other numbers
        ((0, 0, "offsets", np.array([0.0, 5e-324, 1e-323])), "offsets must be native int64, got 8-byte items of "
                                                               "format 'd'"),
        ((0, 0, "offsets", np.array([0, 2, 5], ">i8")), "offsets must be native int64, .* format '>q'"),
        ((0, 1, "data", np.ones((5, 8), np.int64)), "data must be native float64, got 8-byte items of format"),
        ((0, 0, "data", np.ones((5, 8), np.int32)), "data must be native float32, got 4-byte items of format"),
        ((0, 3, "data", np.ones((5, 8), np.float64)), "data must be native int64, got 8-byte items of format 'd'"),
        ((0, 0, "data", np.ones((5, 8), ">f4")), "data must be native float32, .* format '>f'"),
        ((0, 0, "out", np.empty((1, 8), np.float32)), "out holds 1 rows"),
        ((0, 0, "out", np.empty((2, 8), np.float64)), "out must be native float32, got 8-byte items"),
        ((0, 0, "out", np.empty((2, 8), np.int32)), "out must be native float32, got 4-byte items of format"),
        ((0, 0, "hi", 3), "out of range"),
        ((0, 0, "lo", 3), "out of range"),
    ],
)
def test_the_kernel_checks_its_arguments(args, message):
    """Wrong arguments raise a ValueError naming what is wrong; nothing is read or written out of
    bounds."""
    kernel = _np_compiled._kernel
    call = {"data": np.ones((5, 8), np.float32), "offsets": np.array([0, 2, 5], np.int64),
            "out": np.zeros((2, 8), np.float32), "width": 8, "lo": 0, "hi": 2}
    op, kind = args[:2]
    if len(args) > 2:
        call[args[2]] = args[3]
    out_before = call["out"].copy()
    with pytest.raises(ValueError, match=message):
        kernel(op, kind, call["data"], call["offsets"], call["out"], call["width"], call["lo"], call["hi"])
    np.testing.assert_array_equal(call["out"], out_before)


@needs_kernel
def test_the_kernel_refuses_read_only_and_strided_buffers():
    kernel = _np_compiled._kernel
    offsets = np.array([0, 2, 5], np.int64)
    out = np.zeros((2, 8), np.float32)
    out.setflags(write=False)
    with pytest.raises((BufferError, ValueError)):
        kernel(0, 0, np.ones((5, 8), np.float32), offsets, out, 8, 0, 2)
    with pytest.raises((BufferError, ValueError)):
        kernel(0, 0, np.ones((5, 16), np.float32)[:, ::2], offsets, np.zeros((2, 8), np.float32), 8, 0, 2)


def test_the_switch(monkeypatch):
    """set_compiled_kernels returns the previous setting and checks its argument; without a built
    kernel, switching it on is an error that says why, and the NumPy kernels give the same sums."""
    with pytest.raises(TypeError, match="enabled must be True or False, got 'yes'"):
        set_compiled_kernels("yes")
    monkeypatch.setattr(_np_compiled, "_kernel", None)
    monkeypatch.setattr(_np_compiled, "_enabled", False)
    assert not compiled_kernels()
    with pytest.raises(RuntimeError, match="no C compiler"):
        set_compiled_kernels(True)
    assert set_compiled_kernels(False) is False
    data = _values("float32", (9, 16), 4)
    offsets = lengths_to_offsets([4, 0, 5])
    np.testing.assert_allclose(get_backend("numpy").segment_sum(data, offsets), _expected(np.add, data, offsets, 0),
                               rtol=1e-6, atol=1e-5)


needs_gelu = pytest.mark.skipif(_np_compiled._gelu_f32 is None, reason="the compiled GELU was not built")


@needs_gelu
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 300_001])
def test_compiled_gelu_matches_the_exact_function_and_the_numpy_kernel(monkeypatch, n):
    """Against GELU in float64 (math.erf): within 4e-7 absolute plus one rounding, as the NumPy kernel of the same
    formula, for every length (whole vectors and the padded tail); NaN and -inf give NaN and +inf gives +inf
    in both, as torch 2.13; a large input split over threads gives the same bits as one call."""
    import math

    from lodtensor.backend.numpy import _special

    g = np.random.default_rng(n)
    x = (g.standard_normal(n) * 5).astype(np.float32)
    if n >= 6:
        x[:6] = [np.inf, -np.inf, np.nan, -0.0, 0.0, -30.0]
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64).tolist()])
    out = np.full(n, 7.0, np.float32)
    _np_compiled._gelu_f32(x, out)
    streamed = np.full(n + 1, 7.0, np.float32)
    _np_compiled._gelu_f32(x, streamed[1:], True)  # streaming stores, from an address off the 64-byte grid
    np.testing.assert_array_equal(streamed[1:], out)
    finite = np.isfinite(x)
    assert (np.abs(out[finite] - exact[finite]) <= 4e-7 + 1.2e-7 * np.abs(exact[finite])).all()
    assert np.isnan(out[~finite & (x != np.inf)]).all() and (out[x == np.inf] == np.inf).all()
    monkeypatch.setattr(_np_compiled, "_enabled", True)
    monkeypatch.setattr(_special._tuning, "GELU_PARALLEL_BYTES", 0)  # blocks over threads at any size
    lt.set_num_threads(2)
    try:
        threaded = _special.gelu(x)
    finally:
        lt.set_num_threads(None)
    np.testing.assert_array_equal(threaded, out)
    monkeypatch.setattr(_np_compiled, "_enabled", False)
    with np.errstate(invalid="ignore"):  # the NumPy kernel's inf * 0 on the infinities
        numpy_kernel = _special.gelu(x)
    assert np.abs(numpy_kernel[finite] - out[finite]).max(initial=0) < 6e-7
    np.testing.assert_array_equal(numpy_kernel[~finite], out[~finite])  # the same NaN and inf


@needs_gelu
def test_compiled_gelu_checks_its_arguments():
    with pytest.raises(ValueError, match="float32"):
        _np_compiled._gelu_f32(np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="they must match"):
        _np_compiled._gelu_f32(np.ones(4, np.float32), np.ones(5, np.float32))
    with pytest.raises((BufferError, ValueError)):
        _np_compiled._gelu_f32(np.ones(8, np.float32)[::2], np.ones(4, np.float32))


needs_relu = pytest.mark.skipif(_np_compiled._relu is None, reason="the compiled relu was not built")


def _relu_input(dtype, n, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    x[::7] = -0.0
    x[1::11] = np.nan
    x[2::11] = -np.nan  # a NaN with its sign bit set: kept as it is
    x[3::13] = -np.inf
    return x


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@needs_relu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 16, 17, 100, 1027])
@pytest.mark.parametrize("shift", [0, 1, 5])
@pytest.mark.parametrize("stream", [False, True])
def test_compiled_relu_has_numpys_bits(dtype, n, shift, stream):
    """np.maximum(x, 0) bit for bit: -0.0 gives +0.0, NaN keeps its sign bit; every length and start
    address (the head before a 64-byte boundary when streaming, whole vectors, the tail); nothing
    written outside out."""
    x = _relu_input(dtype, n + shift, n)[shift:]
    buf = np.full(n + 2 * shift + 1, 5, dtype)
    out = buf[shift : shift + n]
    _np_compiled._relu(x, out, stream)
    assert _same_bits(out, np.maximum(x, 0))
    assert (buf[:shift] == 5).all() and (buf[shift + n :] == 5).all()
    inplace = x.copy()
    _np_compiled._relu(inplace, inplace, stream)
    assert _same_bits(inplace, np.maximum(x, 0))
    _np_compiled._relu_torch(x, out, stream)  # torch.relu's: -0.0 kept
    assert _same_bits(out, np.where(x < 0, np.zeros_like(x), x))


@needs_relu
def test_compiled_relu_checks_its_arguments():
    with pytest.raises(ValueError, match="float32 .'f'. or float64"):
        _np_compiled._relu(np.ones(4, np.int32), np.ones(4, np.int32))
    with pytest.raises(ValueError, match="'d' and 'f'"):
        _np_compiled._relu(np.ones(4), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="'>f'"):
        _np_compiled._relu(np.ones(4, ">f4"), np.ones(4, ">f4"))
    with pytest.raises(ValueError, match="they must match"):
        _np_compiled._relu(np.ones(4), np.ones(5))
    with pytest.raises((BufferError, ValueError)):
        _np_compiled._relu(np.ones(8)[::2], np.ones(4))


@needs_relu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_threaded_and_streamed_same_bits(monkeypatch, dtype):
    from lodtensor.backend.numpy import _special

    x = _relu_input(dtype, 600_001, 3).reshape(-1, 1)
    monkeypatch.setattr(_np_compiled, "_enabled", True)
    monkeypatch.setattr(np_tuning, "STREAM_BYTES", 1 << 20)  # this input is streamed
    monkeypatch.setattr(np_tuning, "RELU_PARALLEL_BYTES", 1 << 20)  # and split over the threads
    lt.set_num_threads(2)
    try:
        assert _same_bits(_special.relu(x), np.maximum(x, 0))
        assert _same_bits(_special.relu(x[::2]), np.maximum(x[::2], 0))  # strided: copied flat first
    finally:
        lt.set_num_threads(None)


@pytest.mark.parametrize("on", [True, False])
def test_maximum_with_zero_on_a_lodtensor(monkeypatch, on):
    """``np.maximum(t, 0)`` takes the relu kernel where it is exactly NumPy's: the same bits and dtype
    either way; the other spellings keep NumPy's own results."""
    if on and _np_compiled._relu is None:
        pytest.skip("the compiled relu was not built")
    monkeypatch.setattr(_np_compiled, "_enabled", on)
    x = _relu_input(np.float32, 4000, 5).reshape(1000, 4)
    t = lt.LoDTensor(x, [[0, 400, 1000]])
    got = np.maximum(t, 0)
    assert isinstance(got, lt.LoDTensor) and got.lod == t.lod
    assert _same_bits(np.asarray(got), np.maximum(x, 0))
    assert _same_bits(np.asarray(np.maximum(t, 0.0)), np.maximum(x, 0.0))
    assert _same_bits(np.asarray(np.maximum(0, t)), np.maximum(0, x))  # -0.0 stays -0.0 in this order
    assert _same_bits(np.asarray(np.maximum(t, -0.0)), np.maximum(x, -0.0))
    assert _same_bits(np.asarray(np.maximum(t, np.float64(0))), np.maximum(x, np.float64(0)))  # float64
    out = np.empty_like(x)
    assert np.maximum(t, 0, out=out) is out and _same_bits(out, np.maximum(x, 0))
    inplace = x.copy()
    np.maximum(inplace, 0, out=inplace)
    assert _same_bits(inplace, np.maximum(x, 0))
    shifted = x.copy()
    np.maximum(lt.LoDTensor(shifted[:-1], [[0, 999]]), 0, out=shifted[1:])  # overlapping: NumPy copies first
    expected = x.copy()
    np.maximum(x[:-1], 0, out=expected[1:])
    assert _same_bits(shifted, expected)
    assert x.tobytes() == _relu_input(np.float32, 4000, 5).tobytes()  # the input untouched


def _unaligned(values):
    raw = np.frombuffer(b"\0" + values.tobytes(), np.uint8)[1:]
    return raw.view(values.dtype)  # unaligned: NumPy's buffer format is "=f" here, not "f"


@needs_relu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unaligned_buffers_are_taken(dtype):
    x = _unaligned(_relu_input(dtype, 1001, 6))
    assert not x.flags.aligned
    out = np.empty_like(x)
    _np_compiled._relu(x, out)
    assert _same_bits(out, np.maximum(x, 0))
    t = lt.LoDTensor(x.reshape(-1, 1), [[0, 400, 1001]])
    assert _same_bits(np.asarray(np.maximum(t, 0)), np.maximum(x, 0).reshape(-1, 1))
    if dtype == np.float32:
        import lodtensor.nested as ln

        nt = ln.nested_tensor_from_jagged(x.reshape(-1, 1), np.array([0, 400, 1001]))
        np.testing.assert_allclose(ln.gelu(nt).values(), ln.gelu(ln.nested_tensor_from_jagged(
            x.reshape(-1, 1).copy(), np.array([0, 400, 1001]))).values())


@needs_relu
def test_relu_of_denormals_does_not_follow_a_threads_flush_setting(monkeypatch):
    """The masks come from the bits: with the calling thread flushing denormals (DAZ) and the pool's
    threads not, every thread still keeps positive denormals and clears negative ones."""
    torch = pytest.importorskip("torch")
    from lodtensor.backend.numpy import _special

    monkeypatch.setattr(torch_tuning, "RELU_CPU_MIN_BYTES", 0)  # the torch backend's kernel too
    monkeypatch.setattr(np_tuning, "RELU_PARALLEL_BYTES", 1 << 20)  # on both threads
    bits = np.tile(np.array([0x5, 0x80000005, 0x80000000, 0x1], np.uint32), 300_000)
    x = bits.view(np.float32)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    lt.set_num_threads(2)
    try:
        from lodtensor.backend.numpy import _special

        got = _special.relu(x).view(np.uint32)
        torch_bits = get_backend("torch").relu(torch.from_numpy(x)).numpy().view(np.uint32)
    finally:
        torch.set_flush_denormal(False)
        lt.set_num_threads(None)
    assert set(np.unique(got).tolist()) == {0x0, 0x5, 0x1}
    assert (got == np.tile(np.array([0x5, 0x0, 0x0, 0x1], np.uint32), 300_000)).all()
    assert (torch_bits == np.tile(np.array([0x5, 0x0, 0x80000000, 0x1], np.uint32), 300_000)).all()


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_maximum_with_zero_keeps_subclasses_and_scalars():
    """The backend's maximum(x, 0) fast path answers as NumPy for subclasses (a LoDTensor's own data is never
    a matrix or a masked array: tests/test_numpy_protocol_hunt.py)."""
    be = get_backend("numpy")
    m = np.matrix([[-1.0, 2.0], [3.0, -4.0]])
    got = be.apply_ufunc(np.maximum, "__call__", m, 0)
    assert type(got) is np.matrix and (got == np.maximum(m, 0)).all()
    masked = np.ma.array([[-1.0, 2.0], [3.0, -4.0]], mask=[[0, 0], [0, 1]])
    got = be.apply_ufunc(np.maximum, "__call__", masked, 0)
    assert isinstance(got, np.ma.MaskedArray) and got.mask.tolist() == [[False, False], [False, True]]
    got = np.maximum(lt.LoDTensor(m, [[0, 1, 2]]), 0)
    assert type(got.data) is np.ndarray and (got.data == np.maximum(m, 0)).all()
    scalar = get_backend("numpy").apply_ufunc(np.maximum, "__call__", np.array(-1.5, np.float32), 0)
    assert type(scalar) is np.float32 and scalar == 0


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [1, 2, 4])
@pytest.mark.parametrize("op", ["max", "min"])
def test_narrow_rows_keep_numpys_ties(compiled, dtype, width, op):
    """Narrow float rows read as one run (long sequences): of +0.0 and -0.0, and of NaNs with other
    signs, the one NumPy's row-order reduction keeps comes out, bit for bit, on every instruction set
    (the run's accumulators meet rows out of order, so such results take the row-order path)."""
    g = np.random.default_rng(width)
    choices = np.array([0.0, -0.0, np.nan, -np.nan, -1.0, 1.0], dtype)
    lengths = g.integers(20, 90, size=40)
    offsets = lengths_to_offsets(lengths)
    for trial in range(5):
        pick = g.integers(0, 6 if trial else 2, size=(int(offsets[-1]), width))
        data = choices[pick] if trial != 4 else choices[g.integers(0, 2, size=pick.shape)] - 0.0 * pick
        got = getattr(get_backend("numpy"), f"segment_{op}")(data, offsets, empty=0)
        assert got.tobytes() == _expected(UFUNCS[op], data, offsets, 0).tobytes()


# -- found by a second reading: each failed before its fix -----------------------------------------


@needs_kernel
def test_offsets_sharing_memory_with_out_are_read_as_checked():
    """The kernel reads a private copy of the offsets it checked: an ``out`` that overlaps them (or
    another thread writing them) cannot move a range out of bounds (this crashed)."""
    n = 64
    offsets = np.arange(n + 3, dtype=np.int64)
    data = np.full(n + 3, 10**12, dtype=np.int64)
    _np_compiled._kernel(0, 3, data, offsets, offsets[2:], 1, 0, n)  # out row j is offsets[j + 2]
    assert offsets[2 : n + 2].tolist() == [10**12] * n  # each sequence was the one row it was checked as


@needs_kernel
@pytest.mark.parametrize("width", [2**61, 2**62, 2**63 - 1])
def test_huge_widths_are_refused(width):
    d, o, out = np.zeros(4, np.int64), np.zeros(3, np.int64), np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="width must be in"):
        _np_compiled._kernel(0, 3, d, o, out, width, 0, 0)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int16"])
@pytest.mark.parametrize("on", [True, False], ids=["compiled", "uncompiled"])
def test_narrow_int_sums_and_int_means(monkeypatch, dtype, on):
    """Narrow int rows are summed in the data's dtype, wrapping around, as the contract says and the torch and
    CuPy backends do (NumPy's reduceat alone widened them), with the kernel on or off; means of ints add
    up in 64 bits whatever the row width. (The public pools sum ints as int64: they cast first.)"""
    if on and _np_compiled._kernel is None:
        pytest.skip("the compiled kernel was not built")
    monkeypatch.setattr(_np_compiled, "_enabled", on)
    be = get_backend("numpy")
    big = np.iinfo(dtype).max // 2
    offsets = np.array([0, 100])
    narrow = np.full((100, 1), big, dtype)
    got = be.segment_sum(narrow, offsets)
    assert got.dtype == np.dtype(dtype) and got.tolist() == [[np.array(100 * int(big)).astype(dtype).item()]]
    for width in (1, 16):
        values = np.full((100, width), big, dtype)
        np.testing.assert_allclose(be.segment_mean(values, offsets, empty=0), [[float(big)] * width])


@pytest.mark.parametrize("on", [True, False], ids=["compiled", "uncompiled"])
def test_signed_zero_ties_as_numpy(monkeypatch, on):
    """Of two equal values (+0.0, -0.0) max and min keep the later one, as np.maximum.reduce."""
    if on and _np_compiled._kernel is None:
        pytest.skip("the compiled kernel was not built")
    monkeypatch.setattr(_np_compiled, "_enabled", on)
    be = get_backend("numpy")
    for rows in ([[0.0] * 8, [-0.0] * 8], [[-0.0] * 8, [0.0] * 8]):
        d = np.array(rows, np.float32)
        for kernel, ufunc in (("segment_max", np.maximum), ("segment_min", np.minimum)):
            got = getattr(be, kernel)(d, np.array([0, 2]), empty=0)
            assert np.signbit(got).tolist() == [np.signbit(ufunc.reduce(d, axis=0)).tolist()]


def test_csr_sums_read_only_the_rows_the_offsets_span(monkeypatch):
    """Data with rows past the last offset: the CSR product sums the spanned rows (it raised)."""
    pytest.importorskip("scipy")
    monkeypatch.setattr(_np_compiled, "_enabled", False)
    be = get_backend("numpy")
    d = np.arange(5 * 64, dtype=np.float32).reshape(5, 64)
    np.testing.assert_allclose(be.segment_sum(d, np.array([0, 3])), [d[:3].sum(0)])


def test_torch_sums_of_tensors_with_the_negative_bit():
    torch = pytest.importorskip("torch")
    be = get_backend("torch")
    x = torch.randn(6, 16, dtype=torch.complex64).conj().imag  # float32 with the negative bit set
    assert x.is_neg()
    got = be.segment_sum(x, torch.tensor([0, 2, 6]))
    torch.testing.assert_close(got, torch.stack([x[:2].sum(0), x[2:].sum(0)]))
