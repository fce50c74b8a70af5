"""Invalid LoDs never reach a CUDA kernel: the host-side gate is the only gate.

CuPy is replaced by a recording stub (tests/backend/cupy_stub.py), so this runs
without a GPU: every public entry point that takes CuPy data plus offsets or
lengths gets fuzzed invalid ones and must raise before any kernel launch. The
same entry points with valid LoDs do launch the expected kernels, which shows
the stub sees launches (the test would fail if the gate let one through).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend.cupy import _tuning
from lodtensor.backend.cupy import cuda as kernels

from . import cupy_stub

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def stub(monkeypatch):
    return cupy_stub.install(monkeypatch)


@st.composite
def bad_offsets(draw):
    """(rows, offsets) where offsets is not a valid LoD level for ``rows`` data rows."""
    lens = draw(st.lists(st.integers(0, 5), min_size=1, max_size=8))
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = int(offs[-1])
    how = draw(st.sampled_from(["start", "decrease", "end", "negative", "fraction", "empty", "nan", "huge", "2d"]))
    offs = offs.tolist()
    if how == "start":
        offs[0] = draw(st.integers(1, 3))
    elif how == "decrease":
        if len(offs) < 3:
            offs = [0, 2, 1]
        else:
            i = draw(st.integers(1, len(offs) - 2))
            offs[i] = offs[i + 1] + draw(st.integers(1, 3))
    elif how == "end":
        offs[-1] += draw(st.sampled_from([-1, 1, 7])) if offs[-1] else 1
    elif how == "negative":
        offs[draw(st.integers(1, len(offs) - 1))] = -draw(st.integers(1, 9))
    elif how == "fraction":
        offs = [float(o) for o in offs]
        offs[-1] += 0.5
    elif how == "empty":
        offs = []
    elif how == "nan":
        offs = [float(o) for o in offs]
        offs[-1] = float("nan")
    elif how == "huge":
        offs[-1] = 2**62
    else:
        offs = [offs, offs]
    return rows, offs


@st.composite
def bad_lengths(draw):
    lens = draw(st.lists(st.integers(0, 5), min_size=1, max_size=8))
    rows = sum(lens)
    how = draw(st.sampled_from(["negative", "sum", "fraction"]))
    if how == "negative":
        lens[draw(st.integers(0, len(lens) - 1))] = -draw(st.integers(1, 4))
    elif how == "sum":
        lens[-1] += draw(st.sampled_from([1, 3]))
    else:
        lens = [float(x) for x in lens]
        lens[0] += 0.25
    return rows, lens


def _data(stub, rows, width=3):
    return stub.asarray(np.arange(rows * width, dtype=np.float32).reshape(rows, width))


def _run_of_rows(rows, offs):
    """Integer offsets that never decrease and stay within the rows without starting at 0 or ending at
    ``rows``: no LoD level, but a valid ``nested_tensor_from_jagged`` (torch reads a run of the values)."""
    arr = np.asarray(offs)
    return (arr.ndim == 1 and arr.size > 0 and arr.dtype.kind in "iu" and bool((np.diff(arr) >= 0).all())
            and 0 <= arr[0] and arr[-1] <= rows and not (arr[0] == 0 and arr[-1] == rows))


def _entry_points(stub, rows, offs):
    """Every way to put CuPy data under a LoD given by these offsets."""
    import lodtensor.nested as ln  # noqa: PLC0415

    yield "LoDTensor(data, lod)", lambda: lt.LoDTensor(_data(stub, rows), [offs])
    yield "LoDTensor.from_offsets", lambda: lt.LoDTensor.from_offsets(_data(stub, rows), offs)

    def set_lod():
        t = lt.LoDTensor(_data(stub, rows), [[0, rows]])
        try:
            t.set_lod([offs])
        except Exception:
            assert t.lod() == [[0, rows]]  # a refused LoD leaves the tensor as it was
            raise

    yield "set_lod", set_lod
    if _run_of_rows(rows, offs):  # torch's nested_tensor_from_jagged reads these as a run of the rows
        return
    yield "nested_tensor_from_jagged(host offsets)", lambda: ln.nested_tensor_from_jagged(_data(stub, rows), offs)
    if np.asarray(offs).dtype.kind in "iu":  # offsets on the device, as torch users pass them
        yield "nested_tensor_from_jagged(device offsets)", lambda: ln.nested_tensor_from_jagged(
            _data(stub, rows), stub.asarray(np.asarray(offs)))


def _length_entry_points(stub, rows, lens):
    yield "LoDTensor(recursive_sequence_lengths)", lambda: lt.LoDTensor(
        _data(stub, rows), recursive_sequence_lengths=[lens])
    yield "LoDTensor.from_lengths", lambda: lt.LoDTensor.from_lengths(_data(stub, rows), lens)

    def set_lengths():
        t = lt.LoDTensor(_data(stub, rows), [[0, rows]])
        try:
            t.set_recursive_sequence_lengths([lens])
        except Exception:
            assert t.lod() == [[0, rows]]  # a refused LoD leaves the tensor as it was
            raise

    yield "set_recursive_sequence_lengths", set_lengths
    n, maxlen = len(lens), 4
    yield "from_padded", lambda: lt.from_padded(stub.asarray(np.zeros((n, maxlen, 2), np.float32)),
                                                [x if x <= maxlen else maxlen + 1 for x in lens])


def _refused(stub, name, call):
    with pytest.raises((ValueError, TypeError, OverflowError)):
        call()
    assert stub.launches == [], f"{name}: an invalid LoD reached a kernel: {stub.launches}"


@_SETTINGS
@given(case=bad_offsets())
def test_invalid_offsets_never_launch(stub, case):
    rows, offs = case
    for name, call in _entry_points(stub, rows, offs):
        _refused(stub, name, call)


@_SETTINGS
@given(case=bad_lengths())
def test_invalid_lengths_never_launch(stub, case):
    rows, lens = case
    for name, call in _length_entry_points(stub, rows, lens):
        if name == "from_padded" and all(isinstance(x, int) and 0 <= x <= 4 for x in lens):
            continue  # lengths that fit the padded batch are valid there (the row count comes from them)
        _refused(stub, name, call)


def _launched(stub):
    return [name for name, *_ in stub.launches]


def test_valid_lods_do_launch(stub):
    """The control: the same entry points with valid LoDs reach the expected kernels."""
    t = lt.LoDTensor(_data(stub, 5), [[0, 2, 2, 5]])
    assert type(t.data).__module__ == "cupy" and t.backend.name == "cupy"
    S.sequence_pool(t, "max")
    # rows of 12 bytes are narrow: sequences of a few rows go one per thread, longer ones by pieces
    assert _launched(stub) == ["lt_piece_plan", kernels.kernel_name("reduce_short", op="max", dtype="float32"),
                               kernels.kernel_name("reduce", op="max", dtype="float32")]
    name, grid, block, args = stub.launches[-1]
    assert block == (kernels.BLOCK,) and grid[1] == 1  # width 3: one column tile
    assert args[-6:-3] == (np.int64(3), np.int32(2), np.int64(kernels.CHUNK_STEPS * 8))  # D, log2cw, chunk
    stub.launches.clear()
    S.sequence_softmax(lt.LoDTensor(_data(stub, 5, 1)[:, 0].copy(), [[0, 2, 2, 5]]))
    assert _launched(stub) == ["lt_piece_plan", "lt_softmax_short<float, float>", "lt_softmax_stats<float, float, 1>",
                               "lt_softmax_apply<float, float, 1>"]
    stub.launches.clear()
    padded, _ = t.to_padded(pad_value=-1.0)
    assert _launched(stub) == ["lt_pad<unsigned int>"] and padded.shape == (3, 3, 3)
    stub.launches.clear()
    lt.from_padded(stub.asarray(np.zeros((2, 4, 2), np.float64)), [1, 3])
    assert _launched(stub) == ["lt_piece_plan", "lt_unpad<unsigned long long>"]


def test_long_sequences_take_the_combine_pass(stub, monkeypatch):
    """A sequence longer than one piece goes through the block-level combine kernel (the piece route
    alone: by blocks, ``_tuning.REDUCE_BLOCK_STEPS``, its one-piece sequences would take a block kernel
    first; tests/backend/test_cuda_by_blocks.py covers that route)."""
    monkeypatch.setattr(_tuning, "REDUCE_BLOCK_STEPS", 0)
    chunk = kernels.CHUNK_STEPS * 32  # width 1: 32 rows per warp step
    rows = chunk * 3 + 5
    t = lt.LoDTensor(stub.asarray(np.ones(rows, np.float64)), [[0, 1, 1, rows]])
    S.sequence_pool(t, "sum")
    assert _launched(stub) == ["lt_piece_plan", "lt_segment_reduce_short<0, double, double>",
                               "lt_segment_reduce<0, double, double, 1>", "lt_segment_combine<0, double>"]
    _, grid, _, args = stub.launches[2]
    partial = args[4]
    assert partial.shape[0] >= 4 and grid[0] * 8 >= 3 + rows // chunk  # room for every piece and every warp


@_SETTINGS
@given(lens=st.lists(st.integers(0, 5), min_size=1, max_size=8))
def test_every_entry_point_accepts_valid_lods(stub, lens):
    """So the refusals above come from the gate, not from the stub or the entry point failing anyway."""
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    rows = offs[-1]
    calls = list(_entry_points(stub, rows, offs))
    calls += [(name, fn) for name, fn in _length_entry_points(stub, rows, [min(x, 4) for x in lens])
              if name == "from_padded" or sum(min(x, 4) for x in lens) == rows]
    assert len(calls) >= 6
    for _name, call in calls:
        call()
    launched = set(_launched(stub))
    # only from_padded moves data
    assert launched <= {"lt_piece_plan"} | {f"lt_unpad<{w}>" for w in kernels.WORDS.values()}, launched
