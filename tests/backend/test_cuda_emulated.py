"""The CuPy backend's CUDA kernels, run on the CPU (tests/backend/cuda_emu.py), against NumPy.

The real host code of lodtensor/backend/cupy.py and the real .cu sources (compiled
with g++ against a small CUDA stand-in) compute every segment kernel, pad and unpad,
and every sequence op, on the cases the GPU suite runs. Skipped without g++.
"""

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..strategies import lengths
from .test_kernels import _kernels_agree
from .test_ops_on_backends import CASES, check_op, check_skewed

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")


@pytest.mark.parametrize("case", list(CASES))
def test_sequence_op(emulated, case):
    check_op(emulated, case)


@pytest.mark.parametrize("width", [1, 3, 32, 40])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
def test_skewed_segments(emulated, width, dtype):
    check_skewed(emulated, width, dtype)
    names = {name for name, *_ in emulated.stub.launches}
    assert any(n.startswith("lt_segment_combine") for n in names)  # the long sequence took the combine pass


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=lengths(min_size=1), row=st.sampled_from([(), (3,), (4, 5)]))
def test_kernels_agree_with_reference(emulated, lens, row):
    _kernels_agree(emulated, lens, row)


def test_nan_and_infinities_follow_numpy(emulated):
    from lodtensor import get_backend  # noqa: PLC0415

    host = np.array([[1.0, -np.inf], [np.nan, -np.inf], [3.0, 2.0], [np.inf, 1.0]])
    offsets = np.array([0, 2, 2, 4])
    ref = get_backend("numpy")
    for name, kw in (("segment_max", {"empty": -1}), ("segment_min", {"empty": -1}), ("segment_sum", {})):
        got = emulated.numpy(getattr(emulated.be, name)(emulated.array(host), emulated.array(offsets), **kw))
        np.testing.assert_array_equal(got, getattr(ref, name)(host, offsets, **kw), err_msg=name)


def test_many_sequences_and_wide_rows(emulated):
    """Over a thousand pieces (the warp search takes several ballot rounds) and rows wider than a warp."""
    from lodtensor import get_backend  # noqa: PLC0415

    ref = get_backend("numpy")
    rng = np.random.default_rng(3)
    for count, width in ((1100, 2), (40, 300)):
        lens = rng.integers(0, 6, size=count)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        host = rng.standard_normal((int(offsets[-1]), width))
        data, off = emulated.array(host), emulated.array(offsets)
        np.testing.assert_allclose(emulated.numpy(emulated.be.segment_sum(data, off)), ref.segment_sum(host, offsets))
        np.testing.assert_array_equal(emulated.numpy(emulated.be.segment_max(data, off, empty=0)),
                                      ref.segment_max(host, offsets, empty=0))
        np.testing.assert_allclose(emulated.numpy(emulated.be.segment_softmax(data, off)),
                                   ref.segment_softmax(host, offsets))
        padded = emulated.be.pad(data, off, int(lens.max()), -1.0)
        np.testing.assert_array_equal(emulated.numpy(padded), ref.pad(host, offsets, int(lens.max()), -1.0))
        np.testing.assert_array_equal(emulated.numpy(emulated.be.unpad(padded, off)), host)


def test_long_softmax_takes_the_combine_pass(emulated):
    lens = [3, 9000, 0, 1]  # width 1: 8192 rows per piece
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = np.random.default_rng(5).standard_normal(int(offsets[-1])) * 10
    got = emulated.numpy(emulated.be.segment_softmax(emulated.array(host), emulated.array(offsets)))
    from lodtensor import get_backend  # noqa: PLC0415

    np.testing.assert_allclose(got, get_backend("numpy").segment_softmax(host, offsets), rtol=1e-12)
    assert "lt_softmax_combine<double>" in {name for name, *_ in emulated.stub.launches}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("width", [1, 2, 4, 8, 12, 128])
def test_packs_and_short_sequences(emulated, dtype, width):
    """Rows of a multiple of 16 bytes go as 16-byte packs; narrow rows (16 bytes or less) in short
    sequences go one per thread; long ones by pieces with the combine pass: all as NumPy."""
    from lodtensor import get_backend  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415
    from lodtensor.backend.cupy import cuda as kernels  # noqa: PLC0415

    ref = get_backend("numpy")
    rng = np.random.default_rng(width)
    lens = np.concatenate([rng.integers(0, 9, size=300), [_tuning.SHORT_ROWS, _tuning.SHORT_ROWS + 1, 9000 // width]])
    rng.shuffle(lens)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = (rng.standard_normal((int(offsets[-1]), width)) * 8).astype(dtype)
    data, off = emulated.array(host), emulated.array(offsets)
    emulated.stub.launches.clear()
    for name, kw in (("segment_sum", {}), ("segment_max", {"empty": -3}), ("segment_min", {"empty": 7}),
                     ("segment_mean", {"empty": 2})):
        got = emulated.numpy(getattr(emulated.be, name)(data, off, **kw))
        want = getattr(ref, name)(host, offsets, **kw)
        if host.dtype.kind == "f" or name == "segment_mean":
            tol = {"rtol": 1e-5, "atol": 2e-3} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-9}
            np.testing.assert_allclose(got, want, err_msg=name, **tol)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
    if host.dtype.kind == "f":
        np.testing.assert_allclose(emulated.numpy(emulated.be.segment_softmax(data, off)),
                                   ref.segment_softmax(host, offsets), rtol=1e-5 if dtype == "float32" else 1e-12)
    names = {name for name, *_ in emulated.stub.launches}
    pack = kernels.pack_of(dtype) if width % kernels.pack_of(dtype) == 0 else 1
    assert kernels.kernel_name("reduce", op="sum", dtype=dtype, pack=pack) in names
    narrow = width * np.dtype(dtype).itemsize <= _tuning.SHORT_ROW_BYTES
    assert (kernels.kernel_name("reduce_short", op="sum", dtype=dtype) in names) == narrow


def test_unaligned_rows_are_read_one_value_at_a_time(emulated):
    """A view starting off a 16-byte boundary cannot take 16-byte loads: the kernels read scalars."""
    from lodtensor import get_backend  # noqa: PLC0415

    buffer = emulated.stub.asarray(np.arange(4 * 9 + 1, dtype=np.float32))
    data = buffer[1:].reshape(9, 4)  # 4-byte offset: unaligned for a float4
    offsets = np.array([0, 4, 4, 9])
    emulated.stub.launches.clear()
    got = emulated.numpy(emulated.be.segment_sum(data, emulated.array(offsets)))
    np.testing.assert_allclose(got, get_backend("numpy").segment_sum(np.asarray(data), offsets))
    assert "lt_segment_reduce<0, float, float, 1>" in {name for name, *_ in emulated.stub.launches}


def _counted(stub):
    return sum(name in ("lt_piece_counts", "lt_piece_plan") for name, *_ in stub.launches)


def test_a_lods_plan_is_kept_for_its_next_op(emulated):
    """The piece plan (a count kernel, three scans) is made once per LoD and layout: a second op on
    the same LoD launches none of it and computes the same; another layout gets its own plan."""
    import gc  # noqa: PLC0415

    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415
    from lodtensor.backend.cupy import _launch  # noqa: PLC0415

    rng = np.random.default_rng(11)
    lens = [3, 0, 9000, 1, 40]  # the long one spans pieces (width 1: 8192 rows each)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = rng.standard_normal((int(offsets[-1]), 40))
    t = lt.LoDTensor(emulated.array(host), [offsets.tolist()])
    first = emulated.numpy(S.sequence_pool(t, "sum").data)
    assert _counted(emulated.stub) == 1
    again = emulated.numpy(S.sequence_pool(t, "max").data)  # same layout (width 40, float64)
    assert _counted(emulated.stub) == 1
    ref = lt.LoDTensor(host, [offsets.tolist()])
    np.testing.assert_allclose(first, S.sequence_pool(ref, "sum").data)
    np.testing.assert_allclose(again, S.sequence_pool(ref, "max").data)
    np.testing.assert_allclose(emulated.numpy(S.sequence_pool(t, "sum").data), S.sequence_pool(ref, "sum").data)
    assert _counted(emulated.stub) == 1
    narrow = lt.LoDTensor(emulated.array(host[:, :1].copy()), t.lod())  # another layout: its own plan
    np.testing.assert_allclose(emulated.numpy(S.sequence_softmax(narrow).data), S.sequence_softmax(
        lt.LoDTensor(host[:, :1].copy(), t.lod())).data, rtol=1e-12)
    assert _counted(emulated.stub) == 2
    held = len(_launch._PLANS)
    emulated.stub.launches.clear()  # (the stub's record of each launch holds its arrays; a device launch does not)
    del t, narrow, ref
    gc.collect()
    assert len(_launch._PLANS) < held  # a plan goes with its LoD


def test_offsets_a_caller_owns_are_planned_every_call(emulated):
    """Offsets handed to the backend directly may be rewritten between calls: never a kept plan."""
    from lodtensor import get_backend  # noqa: PLC0415

    host = np.arange(24.0).reshape(12, 2)
    off = emulated.array(np.array([0, 5, 12], np.int64))
    data = emulated.array(host)
    np.testing.assert_array_equal(emulated.numpy(emulated.be.segment_sum(data, off)),
                                  get_backend("numpy").segment_sum(host, np.array([0, 5, 12])))
    off[1] = 2  # the caller's array, changed in place
    np.testing.assert_array_equal(emulated.numpy(emulated.be.segment_sum(data, off)),
                                  get_backend("numpy").segment_sum(host, np.array([0, 2, 12])))
    assert _counted(emulated.stub) == 2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=st.lists(st.integers(0, 40), min_size=1, max_size=30), width=st.sampled_from([1, 3, 8, 40]),
       ops=st.lists(st.sampled_from(["sum", "max", "average", "softmax"]), min_size=2, max_size=5))
def test_kept_plans_give_what_fresh_plans_give(emulated, lens, width, ops):
    """Any run of ops on one LoD, its plan made by the first and kept for the rest: NumPy's values."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415

    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    host = np.random.default_rng(len(lens) * 7 + width).standard_normal((offsets[-1], width))
    t, ref = lt.LoDTensor(emulated.array(host), [offsets]), lt.LoDTensor(host, [offsets])
    for op in ops:
        got = S.sequence_softmax(t) if op == "softmax" else S.sequence_pool(t, op)
        want = S.sequence_softmax(ref) if op == "softmax" else S.sequence_pool(ref, op)
        np.testing.assert_allclose(emulated.numpy(got.data), want.data, rtol=1e-12, atol=1e-12, err_msg=op)


@pytest.mark.parametrize("tiles_first", [False, True])
@pytest.mark.parametrize("width, dtype", [(300, "float32"), (160, "float32"), (70, "float64"), (33, "int32")])
def test_both_tile_orders_give_numpys_values(emulated, monkeypatch, tiles_first, width, dtype):
    """Rows of several column tiles, with the tiles along grid x (``_tuning.TILES_FIRST``) or along y:
    sum, max, softmax (three passes and by blocks) and unpad, beside a sequence of several pieces."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import get_backend  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "TILES_FIRST", tiles_first)
    ref = get_backend("numpy")
    rng = np.random.default_rng(width)
    lens = np.concatenate([rng.integers(0, 60, size=12), [0, 600]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = (rng.standard_normal((int(offsets[-1]), width)) * 5).astype(dtype)
    data = emulated.array(host)
    off = lt.LoD([offsets.tolist()]).on(emulated.be, "offsets", like=data)
    emulated.stub.launches.clear()
    np.testing.assert_allclose(emulated.numpy(emulated.be.segment_sum(data, off)), ref.segment_sum(host, offsets),
                               rtol=1e-5, atol=1e-3)  # float32 sums of 600 values: their rounding
    np.testing.assert_array_equal(emulated.numpy(emulated.be.segment_max(data, off, empty=0)),
                                  ref.segment_max(host, offsets, empty=0))
    floats = host.astype(np.float64)
    for steps in (0, 1):  # three passes; by blocks beside them
        monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
        np.testing.assert_allclose(emulated.numpy(emulated.be.segment_softmax(data, off)),
                                   ref.segment_softmax(floats, offsets), rtol=1e-5, atol=1e-7)
    padded = emulated.be.pad(data, off, int(lens.max()), 0)
    np.testing.assert_array_equal(emulated.numpy(emulated.be.unpad(padded, off)), host)
    grids = {grid for name, grid, *_ in emulated.stub.launches if name.startswith(("lt_segment_reduce<", "lt_unpad"))}
    assert all((grid[0] > 1 and grid[1] >= 1) if tiles_first else grid[1] > 1 for grid in grids), grids


@pytest.mark.parametrize("threads", [32, 64, 128])
def test_piece_kernels_take_any_threads_per_block(emulated, monkeypatch, threads):
    """The piece kernels launched with 1, 2 or 4 warps a block (``_tuning.PIECE_THREADS``): sum, max,
    softmax in three passes, its backward over pieces and unpad give NumPy's values beside a sequence of
    several pieces; the launches have that many threads, and the warps over pieces are as many as with 256."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import get_backend  # noqa: PLC0415
    from lodtensor.backend.cupy import _launch, _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", 0)
    ref = get_backend("numpy")
    rng = np.random.default_rng(threads)
    lens = np.concatenate([rng.integers(0, 60, size=40), [0, 700]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = rng.standard_normal((int(offsets[-1]), 40)).astype(np.float32)
    data = emulated.array(host)
    off = lt.LoD([offsets.tolist()]).on(emulated.be, "offsets", like=data)
    monkeypatch.setattr(_tuning, "PIECE_THREADS", threads)
    emulated.stub.launches.clear()
    np.testing.assert_allclose(emulated.numpy(emulated.be.segment_sum(data, off)), ref.segment_sum(host, offsets),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(emulated.numpy(emulated.be.segment_max(data, off, empty=0)),
                                  ref.segment_max(host, offsets, empty=0))
    y = ref.segment_softmax(host.astype(np.float64), offsets)
    np.testing.assert_allclose(emulated.numpy(emulated.be.segment_softmax(data, off)), y, rtol=1e-5, atol=1e-7)
    g = rng.standard_normal(host.shape)
    got = _launch.segment_softmax_grad(emulated.stub, emulated.array(g), emulated.array(y), off, lens.size,
                                       emulated.stub.empty, off)
    dot = ref.segment_sum(g * y, offsets)
    np.testing.assert_allclose(emulated.numpy(got), y * (g - np.repeat(dot, lens, axis=0)), rtol=1e-10, atol=1e-12)
    padded = emulated.be.pad(data, off, int(lens.max()), 0)
    np.testing.assert_array_equal(emulated.numpy(emulated.be.unpad(padded, off)), host)
    pieces = [(name, grid, block) for name, grid, block, _ in emulated.stub.launches
              if name.startswith(("lt_segment_reduce<", "lt_softmax_stats", "lt_softmax_apply", "lt_segment_dot",
                                  "lt_softmax_grad_apply", "lt_unpad"))]
    assert len({name.split("<")[0] for name, *_ in pieces}) == 6, pieces
    assert all(block == (threads,) for *_, block in pieces), pieces
    monkeypatch.setattr(_tuning, "PIECE_THREADS", 256)
    wide = _launch.Layout(int(offsets[-1]), 40, lens.size)
    monkeypatch.setattr(_tuning, "PIECE_THREADS", threads)
    narrow = _launch.Layout(int(offsets[-1]), 40, lens.size)
    assert 0 <= wide.grid[0] * 256 - narrow.grid[0] * threads < 256  # the same warps, to within a block


@pytest.mark.parametrize("threads", [0, 48, 512, "64"])
def test_piece_threads_must_be_whole_warps(monkeypatch, threads):
    from lodtensor.backend.cupy import _launch, _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "PIECE_THREADS", threads)
    if threads == "64":  # a string of a valid count is read as it
        assert _launch.Layout(100, 8, 4).threads == 64
        return
    with pytest.raises(ValueError, match=f"PIECE_THREADS must be a multiple of 32 from 32 to 256, got {threads}"):
        _launch.Layout(100, 8, 4)


def test_scatter_add_takes_cupy_add_at(emulated, monkeypatch):
    """CuPy 13+ deprecates ``cupyx.scatter_add`` (a DeprecationWarning on the H100 run): the backend takes
    ``cupy.add.at`` where it exists, duplicates accumulating, the caller's array untouched."""
    import cupy  # noqa: PLC0415 - the stub the fixture installed
    import cupyx  # noqa: PLC0415

    def deprecated(*_args):
        raise AssertionError("cupyx.scatter_add called where cupy.add.at exists")

    from lodtensor import get_backend  # noqa: PLC0415

    monkeypatch.setattr(cupyx, "scatter_add", deprecated)
    be = get_backend("cupy")
    base = cupy.asarray(np.arange(4.0))
    out = be.scatter_add(base, np.array([0, 0, 3]), cupy.asarray(np.array([1.0, 2.0, 5.0])))
    np.testing.assert_array_equal(np.asarray(out), [3.0, 1.0, 2.0, 8.0])
    np.testing.assert_array_equal(np.asarray(base), np.arange(4.0))
