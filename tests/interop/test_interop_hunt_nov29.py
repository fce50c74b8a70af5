"""Findings of a probe of the interop layer against pyarrow, awkward and torch (2026-11-29).

Each test fails on the code before its fix: offsets shared with memory their owner still writes,
Arrow extension types read as their storage (tensor rows flattened, bool8 as int8, awkward's ``ak:``
export refused), a holed nested tensor lent to DLPack as its whole buffer, conjugate/negative torch
views crashing the writers and pickle, and argument handling in read_parquet.
"""

import io
import os
import pickle

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor.interop.parquet import column_layouts

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_offsets_over_memory_their_owner_writes_are_copied():
    offsets = np.array([0, 2, 5])
    arr = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(np.arange(5.0)))
    assert np.frombuffer(arr.buffers()[1], np.int64).flags.writeable  # pa.array lies over the NumPy memory
    t = lt.from_arrow(arr)
    offsets[1] = 7  # the owner writes after the check
    assert t.lod() == [[0, 2, 5]]
    assert lt.sequence.sequence_pool(t, "sum").data.tolist() == [1.0, 9.0]


def test_fixed_shape_tensor_rows_keep_their_shape():
    x = np.arange(12, dtype=np.int32).reshape(2, 2, 3)
    arr = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    t = lt.from_arrow(arr)
    assert t.shape() == [2, 2, 3] and t.data.tolist() == x.tolist()
    permuted = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int32(), [2, 3], permutation=[1, 0]),
                                              pa.array([list(range(6))], pa.list_(pa.int32(), 6)))
    assert lt.from_arrow(permuted).data.tolist() == permuted.to_numpy_ndarray().tolist()  # pyarrow's reading
    nested = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), arr)
    t = lt.from_arrow(nested)
    assert t.lod() == [[0, 1, 2]] and t.shape() == [2, 2, 3]
    assert lt.from_arrow(nested.slice(1)).tolist() == [x[1:].tolist()]
    assert lt.from_arrow(arr.slice(0, 0)).shape() == [0, 2, 3]


def test_bool8_reads_as_booleans():
    arr = pa.ExtensionArray.from_storage(pa.bool8(), pa.array([0, 1, 2], pa.int8()))
    t = lt.from_arrow(arr)
    assert t.dtype == np.bool_ and t.data.tolist() == [False, True, True]


def test_pyarrow_written_extension_columns_read_and_describe_alike(tmp_path):
    fst = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(12, dtype=np.int32).reshape(2, 2, 3))
    permuted = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int32(), [2, 3], permutation=[1, 0]),
                                              pa.array([list(range(6))] * 2, pa.list_(pa.int32(), 6)))
    path = os.fspath(tmp_path / "ext.parquet")
    pq.write_table(pa.table({"fst": fst, "perm": permuted,
                             "b8": pa.ExtensionArray.from_storage(pa.bool8(), pa.array([0, 3], pa.int8()))}), path)
    layouts = column_layouts(path, ["fst", "perm", "b8"])
    read = lt.read_parquet(path)
    for name, (level, dtype, shape) in layouts.items():
        assert (read[name].lod_level, read[name].dtype, tuple(read[name].shape()[1:])) == (level, dtype, shape)
    assert layouts["perm"][2] == (3, 2)


def test_awkward_default_arrow_export_is_read():
    ak = pytest.importorskip("awkward")
    for value in ([[1, 2], [3]], [[[1.5], []], [[3.0]]]):
        assert lt.from_arrow(ak.to_arrow(ak.Array(value))).tolist() == value
    assert lt.from_arrow(ak.to_arrow(ak.Array(np.zeros((2, 3))))).shape() == [2, 3]
    with pytest.raises(TypeError, match="ak.Record"):
        lt.from_awkward(ak.Record({"x": [1, 2]}))


def test_from_dlpack_refuses_a_nested_tensor_rather_than_drop_its_components():
    holed = ln.narrow(np.arange(12.0).reshape(3, 4), 1, np.array([0, 1, 2]), np.array([2, 1, 2]), layout="jagged")
    for nt in (holed, ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))])):
        with pytest.raises(TypeError, match="to_lod_tensor"):
            lt.from_dlpack(nt)
    assert np.from_dlpack(holed).tolist() == list(range(12))  # DLPack itself lends values(), as documented
    assert lt.from_dlpack(holed.contiguous().values()).tolist() == [0.0, 1.0, 5.0, 10.0, 11.0]


def test_dlpack_and_torch_messages_name_the_call():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="from_dlpack"):
        lt.from_dlpack(torch.tensor(3.0))
    with pytest.raises(TypeError, match="to_lod_tensor"):
        lt.from_torch(ln.nested_tensor([np.ones(2)]))


def test_conjugate_and_negative_torch_views_save_write_and_pickle(tmp_path):
    torch = pytest.importorskip("torch")
    neg = lt.LoDTensor(torch.tensor([1 + 2j, 3 - 4j, 5 + 6j]).conj().imag, [[0, 1, 3]])
    path = os.fspath(tmp_path / "neg")
    lt.save(path, neg)
    assert lt.load(path).tolist() == [[-2.0], [4.0, -6.0]]
    lt.write_parquet(path + ".parquet", {"x": neg})
    assert lt.read_parquet(path + ".parquet")["x"].tolist() == [[-2.0], [4.0, -6.0]]
    conj = lt.LoDTensor(torch.tensor([1 + 2j, 3 - 4j]).conj(), [[0, 2]])
    assert pickle.loads(pickle.dumps(conj)).data.tolist() == [1 - 2j, 3 + 4j]
    buf = io.BytesIO()
    torch.save(conj, buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=False).data.tolist() == [1 - 2j, 3 + 4j]
    nt = ln.nested_tensor([torch.tensor([1 + 2j]), torch.tensor([3 + 1j, 2j])]).conj()
    assert [c.tolist() for c in pickle.loads(pickle.dumps(nt)).unbind()] == [[1 - 2j], [3 - 1j, -2j]]


def test_read_parquet_arguments(tmp_path):
    path = os.fspath(tmp_path / "a.parquet")
    lt.write_parquet(path, {"a": lt.LoDTensor(np.arange(3.0), [[0, 1, 3]]), "b": lt.LoDTensor(np.arange(2))})
    assert list(lt.read_parquet(path, columns=(c for c in ["a"]))) == ["a"]  # an iterable, read once
    batches = lt.read_parquet(path, columns=iter(["a"]), batch_size=np.int64(1))
    assert [b["a"].lod() for b in batches] == [[[0, 1]], [[0, 2]]]
    assert column_layouts(path, (c for c in ["a"])) == {"a": (1, np.dtype("float64"), ())}
    for bad in (True, 0, 1.5):
        with pytest.raises(ValueError, match="batch_size"):
            lt.read_parquet(path, batch_size=bad)
    with pytest.raises(TypeError, match="columns"):
        lt.read_parquet(path, columns="a")
    twice = os.fspath(tmp_path / "twice.parquet")
    pq.write_table(pa.Table.from_arrays([pa.array([[1]]), pa.array([[2]])], names=["a", "a"]), twice)
    with pytest.raises(ValueError, match=r"read_parquet\(\).*several columns named \['a'\]"):
        lt.read_parquet(twice)
    dates = os.fspath(tmp_path / "d.parquet")
    pq.write_table(pa.table({"d": pa.array([1], pa.date32())}), dates)
    with pytest.raises(ValueError, match="column 'd' holds Arrow type date32") as err:
        column_layouts(dates, ["d"])
    assert "not a valid Parquet file" not in str(err.value)  # a valid file, a column lodtensor cannot read
