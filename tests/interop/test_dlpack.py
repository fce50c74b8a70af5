"""DLPack: LoDTensor and NestedTensor export, from_dlpack, the ragged convention."""

import numpy as np
import pytest
from hypothesis import given

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor.errors import LoDError
from tests.strategies import lod_tensors


@given(t=lod_tensors())
def test_numpy_round_trip_shares(t):
    arr = np.from_dlpack(t)
    assert arr.shape == t.data.shape and (np.shares_memory(arr, t.data) or t.num_rows == 0)
    back = lt.from_dlpack(t, t.lod.levels)
    assert back.lod() == t.lod()
    assert np.shares_memory(back.data, t.data) or t.num_rows == 0
    ragged = lt.from_dlpack(t)  # the ragged convention carries the lod
    assert ragged.lod() == t.lod() and ragged.tolist() == t.tolist()


def test_ragged_convention_shares_data_and_copies_offsets():
    t = lt.LoDTensor(np.arange(300.0), [np.arange(0, 301, 3)])
    values, levels = t.__dlpack_ragged__(max_version=(1, 0))
    assert len(levels) == 1
    back = lt.from_dlpack(t)
    assert np.shares_memory(back.data, t.data) and back.lod == t.lod
    # a consumer may ignore the read-only flag (torch does): the LoD's own memory is never handed out
    assert not np.shares_memory(back.lod.levels[0], t.lod.levels[0])


def test_read_only_data_exports_with_dlpack_1(tmp_path):
    pytest.importorskip("pyarrow")
    lt.save(tmp_path / "x.arrow", lt.LoDTensor(np.arange(4.0), [[0, 1, 4]]))
    t = lt.load(tmp_path / "x.arrow")
    arr = np.from_dlpack(t)
    assert not arr.flags.writeable and arr.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_torch_consumers_and_producers():
    torch = pytest.importorskip("torch")
    t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.data.__array_interface__["data"][0]
    y = torch.arange(5)
    back = lt.from_dlpack(y, [torch.tensor([0, 2, 5])])
    assert isinstance(back.data, torch.Tensor) and back.data.data_ptr() == y.data_ptr() and back.lod() == [[0, 2, 5]]
    tt = lt.from_torch(torch.arange(4.0), [[0, 4]])
    assert tt.__dlpack_device__() == (1, 0) and torch.from_dlpack(tt).data_ptr() == tt.data.data_ptr()


def test_foreign_producer_imports_as_numpy():
    class Producer:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kwargs):
            return self.arr.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    base = np.arange(5)
    t = lt.from_dlpack(Producer(base), [Producer(np.array([0, 2, 5]))])
    assert type(t.data) is np.ndarray and np.shares_memory(t.data, base) and t.lod() == [[0, 2, 5]]


def test_nested_tensor_exports_its_buffer():
    nt = ln.nested_tensor([np.ones((2, 3)), np.zeros((1, 3))])
    arr = np.from_dlpack(nt)
    assert arr.shape == (3, 3) and np.shares_memory(arr, nt.values())
    assert nt.__dlpack_device__() == (1, 0)


def test_bad_input():
    with pytest.raises(TypeError, match="must be a DLPack producer"):
        lt.from_dlpack([1, 2, 3], [[0, 3]])
    with pytest.raises(LoDError, match="must end at len"):
        lt.from_dlpack(np.arange(3), [[0, 2]])
    with pytest.raises(TypeError, match="lod level 0 must be a list of ints or a DLPack array"):
        lt.from_dlpack(np.arange(3), [object()])
    with pytest.raises(ValueError, match="holds no data"):
        lt.LoDTensor().__dlpack__()
