"""Arrow: round trips, zero-copy claims, every accepted input kind, bad input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor._validate import _REMEMBER_FROM
from lodtensor.errors import LoDError
from tests.strategies import lod_tensors

pa = pytest.importorskip("pyarrow")

DTYPES = ["float64", "float32", "float16", "int64", "int32", "int8", "uint8", "bool"]


def _addr(buf):
    return buf.address


def _leaf(arr):
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        arr = arr.values
    return arr


@given(t=lod_tensors(), dtype=st.sampled_from(DTYPES), backend=st.sampled_from(["numpy", "torch"]))
def test_round_trip(t, dtype, backend):
    t = t.with_data(t.data.astype(dtype))
    if backend == "torch":
        pytest.importorskip("torch")
        tt = t.to_torch()
        arr = tt.to_arrow()
        if t.num_rows and dtype != "bool":  # Arrow bit-packs booleans: that one copies
            assert _leaf(arr).buffers()[1].address == tt.data.data_ptr()
    else:
        arr = t.to_arrow()
    assert arr.to_pylist() == t.tolist()
    back = lt.from_arrow(arr)
    assert back.lod() == t.lod()
    assert back.dtype == t.dtype and back.shape() == t.shape()
    np.testing.assert_array_equal(back.data, t.data)


@given(t=lod_tensors())
def test_to_arrow_shares_values_and_offsets(t):
    arr = t.to_arrow()
    level = arr
    for k, offsets in enumerate(t.lod.levels):
        assert level.buffers()[1].address == offsets.__array_interface__["data"][0], k
        level = level.values
    while pa.types.is_fixed_size_list(level.type):
        level = level.values
    if t.num_rows:
        assert level.buffers()[1].address == t.data.__array_interface__["data"][0]
    back = lt.from_arrow(arr)
    assert np.shares_memory(back.data, t.data) or t.num_rows == 0
    for mine, theirs in zip(back.lod.levels, t.lod.levels):  # a checked level is recognised; small ones copied
        assert np.shares_memory(mine, theirs) or (theirs.size < _REMEMBER_FROM and np.array_equal(mine, theirs))


def test_from_arrow_shares_foreign_buffers():
    arr = pa.array([[[1.0, 2.0], []], [[3.0, 4.0, 5.0]]], type=pa.large_list(pa.large_list(pa.float64())))
    t = lt.from_arrow(arr)
    assert t.tolist() == arr.to_pylist()
    assert t.data.__array_interface__["data"][0] == arr.values.values.buffers()[1].address
    # foreign offsets are copied into the LoD's frozen memory (their owner may still write them)
    assert t.lod.levels[0].__array_interface__["data"][0] != arr.buffers()[1].address
    assert t.lod.levels[1].__array_interface__["data"][0] != arr.values.buffers()[1].address
    assert not t.data.flags.writeable  # Arrow's memory: read-only


def test_int32_list_offsets_are_widened():
    arr = pa.array([[1, 2], [], [3]], type=pa.list_(pa.int64()))
    t = lt.from_arrow(arr)
    assert t.lod.levels[0].dtype == np.int64 and t.lod() == [[0, 2, 2, 3]]
    assert np.shares_memory(t.data, np.frombuffer(arr.values.buffers()[1], np.int64))


@given(t=lod_tensors(), data=st.data())
def test_sliced_arrays(t, data):
    arr = t.to_arrow()
    n = len(arr)
    start = data.draw(st.integers(0, n))  # empty slices too: every level of no sequence, as t[start:start]
    stop = data.draw(st.integers(start, n))
    for view in (arr.slice(start, stop - start), arr.cast(_narrow(arr.type)).slice(start, stop - start)):
        back = lt.from_arrow(view)  # only empty outer lists: inner levels of no sequence ([0]), as the slice
        assert back.tolist() == t.tolist()[start:stop] and back.lod() == t[start:stop].lod()


def _narrow(typ):
    if pa.types.is_large_list(typ):
        return pa.list_(_narrow(typ.value_type))
    return typ


def test_fixed_size_trailing_dims():
    data = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    t = lt.LoDTensor(data, [[0, 4, 6]])
    arr = t.to_arrow()
    assert arr.type == pa.large_list(pa.list_(pa.list_(pa.float32(), 2), 2))
    back = lt.from_arrow(arr)
    assert back.shape() == [6, 2, 2] and np.shares_memory(back.data, data)
    # a sliced fixed-size list array from Arrow directly
    fsl = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12.0)), 3).slice(1, 2)
    assert lt.from_arrow(fsl).data.tolist() == [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]


def test_chunked_table_and_dataset_columns():
    t = lt.LoDTensor(np.arange(5), [[0, 2, 2, 5]])
    chunked = pa.chunked_array([t.to_arrow().slice(0, 2), t.to_arrow().slice(2, 1)])
    assert lt.from_arrow(chunked).tolist() == t.tolist()
    single = pa.chunked_array([t.to_arrow()])
    assert np.shares_memory(lt.from_arrow(single).data, t.data)
    table = pa.table({"ids": t.to_arrow(), "label": pa.array([1, 2, 3])})
    assert lt.from_arrow(table["ids"]).tolist() == t.tolist()
    assert lt.from_arrow(table, column="label").tolist() == [1, 2, 3]
    with pytest.raises(TypeError, match="column="):
        lt.from_arrow(table)
    with pytest.raises(KeyError, match="nope"):
        lt.from_arrow(table, column="nope")
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset(table)
    assert lt.from_arrow(ds, column="ids").tolist() == t.tolist()
    assert lt.from_arrow(ds["ids"]).tolist() == t.tolist()  # a datasets Column
    assert np.shares_memory(lt.from_arrow(ds["ids"]).data, t.data)  # no indices mapping: shared
    picked = ds.select([2, 0])  # an indices mapping: rows in the dataset's order
    assert lt.from_arrow(picked["ids"]).tolist() == [t.tolist()[2], t.tolist()[0]]
    with pytest.raises(KeyError, match="nope"):
        lt.from_arrow(ds, column="nope")


def test_plain_array_has_no_lod():
    t = lt.from_arrow(pa.array([3, 1, 2]))
    assert t.lod_level == 0 and t.tolist() == [3, 1, 2]


def test_torch_data():
    torch = pytest.importorskip("torch")
    x = torch.arange(5.0, requires_grad=True)
    t = lt.from_torch(x, [[0, 2, 5]])
    arr = t.to_arrow()
    assert arr.to_pylist() == [[0.0, 1.0], [2.0, 3.0, 4.0]]
    assert arr.values.buffers()[1].address == x.data_ptr()


BAD = [
    ("null-outer", pa.array([[1], None]), ValueError, r"list level 0 holds 1 null\(s\), first at index 1"),
    ("null-inner", pa.array([[[1], None]]), ValueError, r"list level 1 holds 1 null"),
    ("null-value", pa.array([[1, None]]), ValueError, r"values holds 1 null"),
    ("strings", pa.array([["a"]]), TypeError, r"must be numbers or booleans.*string"),
    ("struct", pa.array([[{"x": 1}]]), TypeError, r"struct"),
    ("not-arrow", [[1, 2]], TypeError, r"expected a pyarrow Array"),
    (
        "decreasing",
        pa.LargeListArray.from_buffers(
            pa.large_list(pa.int64()),
            2,
            [None, pa.py_buffer(np.array([0, 3, 2], np.int64))],
            children=[pa.array([1, 2, 3])],
        ),
        ValueError,
        r"runs from|non-decreasing",
    ),
    (
        "negative",
        pa.LargeListArray.from_buffers(
            pa.large_list(pa.int64()),
            2,
            [None, pa.py_buffer(np.array([0, -1, 2], np.int64))],
            children=[pa.array([1, 2])],
        ),
        LoDError,
        r"non-decreasing",
    ),
]


@pytest.mark.parametrize("obj,exc,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input(obj, exc, match):
    with pytest.raises(exc, match=match):
        lt.from_arrow(obj)


def test_gpu_like_and_complex_data_raise():
    with pytest.raises(TypeError, match="complex"):
        lt.LoDTensor(np.ones(2, np.complex64), [[0, 2]]).to_arrow()


def test_missing_pyarrow_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"lodtensor\[arrow\]"):
        lt.LoDTensor(np.arange(2), [[0, 2]]).to_arrow()


# -- issue #25: rows of width 0, nesting limits, byte order ----------------------------------------
@pytest.mark.parametrize("row_shape", [(0,), (0, 3), (3, 0), (2, 0, 2)], ids=str)
@pytest.mark.parametrize("lod", [None, [[0, 2, 5]], [[0, 1, 2], [0, 2, 5]]], ids=["no-lod", "1-level", "2-level"])
@pytest.mark.parametrize("dtype", ["float32", "bool", "int64"])
def test_rows_of_width_zero_keep_their_rows(tmp_path, row_shape, lod, dtype):
    # before: to_arrow() raised (FixedSizeListArray of size 0 from an empty array), from_arrow divided by 0
    t = lt.LoDTensor(np.zeros((5, *row_shape), dtype=dtype), lod)
    arr = t.to_arrow()
    assert arr.type == lt.interop.arrow.arrow_type_of(t)
    arr.validate(full=True)
    backs = (lt.from_arrow(arr), lt.from_arrow(arr.slice(0)), _saved(tmp_path, t, True), _saved(tmp_path, t, False))
    for back in backs:
        assert back.lod() == t.lod() and back.shape() == t.shape() and back.dtype == t.dtype


def _saved(tmp_path, t, mmap):
    lt.save(tmp_path / "w0.arrow", t)
    return lt.load(tmp_path / "w0.arrow", mmap=mmap)


def test_width_zero_rows_of_a_slice():
    arr = lt.LoDTensor(np.zeros((5, 0)), [[0, 2, 5]]).to_arrow().slice(1, 1)
    back = lt.from_arrow(arr)
    assert back.lod() == [[0, 3]] and back.shape() == [3, 0]


def test_nesting_limits():
    from lodtensor.interop.arrow import ARROW_MAX_NESTING

    ok = lt.LoDTensor(np.zeros((1,) * 32, np.float32), [[0, 1]] * 32)  # 32 levels + 31 row dims = 63
    assert lt.from_arrow(ok.to_arrow()).shape() == ok.shape()
    too_deep = lt.LoDTensor(np.zeros((1,) * 33, np.float32), [[0, 1]] * 32)
    match = rf"to_arrow\(\): the tensor nests 64 list levels .*at most {ARROW_MAX_NESTING}"
    with pytest.raises(ValueError, match=match):
        too_deep.to_arrow()


def test_foreign_arrays_deeper_than_a_lod_are_refused_from_the_type():
    arr = pa.array([1.0])
    offsets = pa.py_buffer(np.array([0, 1], np.int64))
    for _ in range(40):
        arr = pa.LargeListArray.from_buffers(pa.large_list(arr.type), 1, [None, offsets], children=[arr])
    with pytest.raises(ValueError, match=r"from_arrow\(\): the Arrow array nests more than 32 list levels"):
        lt.from_arrow(arr)


def test_other_byte_order_is_swapped_not_reinterpreted():
    # before: '>f4' data went into Arrow as raw bytes, so 1.0 read back as 4.6e-41
    t = lt.LoDTensor(np.arange(6, dtype=">f4").reshape(3, 2), [[0, 1, 3]])
    assert t.to_arrow().to_pylist() == [[[0.0, 1.0]], [[2.0, 3.0], [4.0, 5.0]]]
    assert lt.from_arrow(t.to_arrow()).dtype == np.float32
    assert lt.LoDTensor(np.arange(3, dtype=">i8")).to_arrow().to_pylist() == [0, 1, 2]


def test_save_refuses_rows_load_cannot_read(tmp_path):
    # found by the deep_lods fuzz target: lt.load caps rows at 31 dims (NumPy 1.x's 32 with the rows),
    # lt.save wrote 32-dim rows it then refused to load
    lt.save(tmp_path / "ok.arrow", lt.LoDTensor(np.zeros((1,) * 32), [[0, 1]]))
    assert lt.load(tmp_path / "ok.arrow").shape() == [1] * 32
    with pytest.raises(ValueError, match=r"save\(\): t has 32 row dimensions; lt.load reads at most 31"):
        lt.save(tmp_path / "no.arrow", lt.LoDTensor(np.zeros((1,) * 33), [[0, 1]]))
    assert not (tmp_path / "no.arrow").exists()
