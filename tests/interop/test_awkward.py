"""awkward-array: round trips, shared buffers, the layouts awkward builds, bad arrays."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from tests.strategies import lod_tensors

ak = pytest.importorskip("awkward")


@given(t=lod_tensors(), dtype=st.sampled_from(["float64", "float32", "int64", "bool"]))
def test_round_trip_shares(t, dtype):
    t = t.with_data(t.data.astype(dtype))
    a = t.to_awkward()
    assert a.tolist() == t.tolist()
    layout = a.layout
    for offsets in t.lod.levels:
        assert np.shares_memory(np.asarray(layout.offsets.data), offsets)
        layout = layout.content
    assert np.shares_memory(np.asarray(layout.data), t.data) or t.num_rows == 0
    back = lt.from_awkward(a)
    assert back.lod() == t.lod() and back.shape() == t.shape() and back.dtype == t.dtype
    assert np.shares_memory(back.data, t.data) or t.num_rows == 0
    for mine, theirs in zip(back.lod.levels, t.lod.levels):
        if theirs.size >= 64:  # the gate recognises its own memory from this size on
            assert np.shares_memory(mine, theirs)


def test_awkward_built_arrays():
    a = ak.Array([[[1.0, 2.0], []], [[3.0]], [[4.0, 5.0]]])
    t = lt.from_awkward(a)
    assert t.tolist() == a.tolist()
    assert lt.from_awkward(a[1:]).tolist() == a[1:].tolist()  # sliced: offsets rebased
    assert lt.from_awkward(a[[2, 0]]).tolist() == a[[2, 0]].tolist()  # ListArray (gathered)
    reg = ak.to_regular(ak.Array(np.arange(12.0).reshape(2, 3, 2)), axis=2)
    got = lt.from_awkward(ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(np.array([0, 1, 2])), reg.layout)))
    assert got.shape() == [2, 3, 2]
    assert lt.from_awkward(ak.Array([1, 2, 3])).lod_level == 0
    src = ak.Array([[1, 2], [3]])
    t = lt.from_awkward(src)
    np.asarray(src.layout.offsets.data)[1] = 7  # writing awkward's offsets cannot reach the LoD
    assert t.lod() == [[0, 2, 3]]


@pytest.mark.parametrize(
    "obj,exc,match",
    [
        (ak.Array([[1, None]]), ValueError, "missing values"),
        (ak.Array([["a", "b"]]), TypeError, "strings"),
        (ak.Array([[{"x": 1}]]), TypeError, "expected lists of numbers"),
    ],
    ids=["none", "strings", "records"],
)
def test_bad_arrays(obj, exc, match):
    with pytest.raises(exc, match=match):
        lt.from_awkward(obj)
