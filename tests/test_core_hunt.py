"""Bugs found by a hunt through the core LoDTensor API (tensor, indexing, factories, lod, places, padding).

Each test failed before its fix; the expected behaviour is NumPy's, torch's or Paddle's
(Paddle's side is checked against real Paddle in tests/paddle/test_paddle_core_hunt.py).
"""

import copy
import warnings

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.fluid as fluid
from lodtensor import LoD, LoDTensor
from lodtensor.place import as_place


# -- lists of arrays keep the arrays' dtype (Paddle: np.array of the rows it iterates) ------------
@pytest.mark.parametrize("dtype", ["int32", "float16", "float32", "uint8", "int8", "complex64", "bool"])
def test_create_lod_tensor_from_a_list_of_arrays_keeps_their_dtype(dtype):
    data = [np.array([1, 0], dtype=dtype), np.array([1], dtype=dtype)]
    t = lt.create_lod_tensor(data, [[2, 1]], lt.CPUPlace())
    assert t.dtype == np.dtype(dtype) and t.shape() == [3, 1] and t.lod() == [[0, 2, 3]]
    assert t.data.ravel().tolist() == np.concatenate(data).tolist()
    assert lt.from_nested_list(data, lod_level=1).dtype == np.dtype(dtype)


def test_arrays_in_lists_promote_as_numpy_promotes_their_rows():
    f32, i32 = np.array([1.0, 2.0], np.float32), np.array([3], np.int32)
    assert lt.from_nested_list([f32, f32[:1]], lod_level=1).dtype == np.float32
    assert lt.from_nested_list([np.array([1], np.int8), np.array([2], np.int16)], lod_level=1).dtype == np.int16
    assert lt.from_nested_list([i32, np.array([3.5], np.float32)], lod_level=1).dtype == np.float64
    assert lt.from_nested_list([i32, [4]], lod_level=1).dtype == np.int64  # a Python int among them: int64
    # an empty array adds no row, so neither its dtype nor its shape counts
    assert lt.from_nested_list([np.zeros(0, np.float64), i32], lod_level=1).dtype == np.int32
    two_d = lt.from_nested_list([np.ones((2, 3), np.float32), np.zeros((0, 4))], lod_level=1)
    assert two_d.dtype == np.float32 and two_d.shape() == [2, 3]
    nested = lt.from_nested_list([[i32], [i32, i32[:0]]], lod_level=2)
    assert nested.dtype == np.int32 and nested.lod() == [[0, 1, 3], [0, 1, 2, 2]]


def test_arrays_in_lists_with_a_dtype_are_checked_value_by_value():
    got = lt.from_nested_list([np.array([1, 2], np.int32), np.array([3], np.int32)], lod_level=1, dtype="float32")
    assert got.dtype == np.float32 and got.data.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="does not fit in int8"):
        lt.from_nested_list([np.array([300]), np.array([3])], lod_level=1, dtype="int8")
    with pytest.raises(ValueError, match="does not fit in uint8"):
        lt.from_nested_list([np.array([-1]), np.array([3])], lod_level=1, dtype="uint8")
    with pytest.raises(TypeError, match="must hold numbers"):
        lt.from_nested_list([np.array(["a"]), np.array(["b"])], lod_level=1)
    with pytest.raises(TypeError, match="must hold numbers"):
        lt.from_nested_list([np.array(["2020-01-01"], "M8[D]")], lod_level=1)


def test_a_zero_d_array_where_a_sequence_belongs_is_named():
    with pytest.raises(ValueError, match="item 1 is the 0-d array"):
        lt.from_nested_list([np.array([1]), np.array(2)], lod_level=1)
    with pytest.raises(ValueError, match="0-d array"):
        lt.create_lod_tensor([np.array([1, 2]), np.array(3)], [[2, 1]], lt.CPUPlace())


def test_values_a_dtype_cannot_hold_are_named():
    with pytest.raises(ValueError, match="nested: a value cannot be stored in int64"):
        lt.from_nested_list([[float("nan"), 2.0], [3.0]], dtype="int64")
    with pytest.raises(ValueError, match="nested: a value does not fit in float32"):
        lt.from_nested_list([[2**1100]], dtype="float32")
    with pytest.raises(ValueError, match="nested: a value does not fit in float64"):
        lt.from_nested_list([[1.0, 2**1100]])


# -- truth value: NumPy's and torch's, not len() > 0 --------------------------------------------
def test_the_truth_value_of_a_tensor_is_numpys():
    t = LoDTensor(np.arange(5), [[0, 2, 5]])
    u = t * 0
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t == u)  # len(t) == 2 made this True: `if t == u` passed for any two tensors
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t[0:0])
    with pytest.raises(ValueError, match="without data"):
        bool(LoDTensor())
    assert bool(LoDTensor(np.array([3]), [[0, 1]])) and not LoDTensor(np.array([[0]]), [[0, 1]])
    assert len(t) == 2  # len() still counts the sequences


# -- array indices past int64 -------------------------------------------------------------------
def test_uint64_indices_past_int64_are_out_of_range_not_wrapped():
    t = LoDTensor(np.arange(5), [[0, 2, 5]])
    with pytest.raises(IndexError, match=r"index\[0\]=18446744073709551615 is out of range"):
        t[np.array([2**64 - 1], dtype=np.uint64)]  # was t[-1]
    with pytest.raises(IndexError, match=r"index\[0\]=9223372036854775808 is out of range"):
        t[[2**63]]  # was reported as index[0]=-9223372036854775808
    with pytest.raises(IndexError, match="18446744073709551615 is out of range"):
        t[np.uint64(2**64 - 1)]  # the scalar path already refused it
    assert t[np.array([1, 0], np.uint8)].tolist() == [[2, 3, 4], [0, 1]]
    assert t[np.array([-2, 1], np.int8)].tolist() == [[0, 1], [2, 3, 4]]


# -- complex pad values -------------------------------------------------------------------------
@pytest.mark.parametrize("pad", [1 + 1j, np.complex64(1 + 1j), np.complex128(2 + 0j), 1 + 0j, np.array([1j])],
                         ids=repr)
def test_a_complex_pad_value_for_real_data_is_refused(pad):
    t = LoDTensor(np.arange(3.0), [[0, 1, 3]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's ComplexWarning: the imaginary part was dropped silently
        with pytest.raises(TypeError, match="pad_value .*is complex, but the float64 result holds real numbers"):
            t.to_padded(pad_value=pad)
        with pytest.raises(TypeError, match="is complex"):
            t.to_padded_all(pad_value=pad)
        with pytest.raises(TypeError, match="the int64 result holds real numbers"):
            LoDTensor(np.arange(3), [[0, 1, 3]]).to_padded(pad_value=pad)


def test_complex_pad_values_fill_complex_data():
    t = LoDTensor(np.arange(3.0) + 0j, [[0, 1, 3]])
    assert t.to_padded(pad_value=1 + 1j)[0].tolist() == [[0j, 1 + 1j], [1 + 0j, 2 + 0j]]
    assert t.to_padded(pad_value=1.5)[0][0, 1] == 1.5


def test_a_complex_torch_pad_value_for_real_torch_data_is_refused():
    torch = pytest.importorskip("torch")
    t = LoDTensor(torch.arange(3.0), [[0, 1, 3]])
    with pytest.raises(TypeError, match="is complex"):
        t.to_padded(pad_value=torch.tensor(1 + 1j))
    with pytest.raises(TypeError, match="is complex"):
        t.to_padded(pad_value=1 + 1j)


# -- factories ----------------------------------------------------------------------------------
def test_create_random_int_lodtensor_needs_a_level():
    with pytest.raises(ValueError, match="recursive_seq_lens must hold at least one level"):
        lt.create_random_int_lodtensor([], [1], lt.CPUPlace(), 0, 1)  # was: TypeError NoneType * int


def test_from_padded_all_names_a_single_mask_passed_alone():
    padded, masks = lt.from_nested_list([[[1], [2, 3]], [[4]]]).to_padded_all()
    with pytest.raises(TypeError, match=r"masks must be a list of boolean masks.*\[mask\]"):
        lt.from_padded_all(padded, masks[0])  # was: "The truth value of an array ... is ambiguous"
    assert lt.from_padded_all(padded, tuple(masks)).tolist() == [[[1], [2, 3]], [[4]]]


# -- LoD, places, copies ------------------------------------------------------------------------
def test_offsets_list_of_an_empty_lod_names_the_level():
    with pytest.raises(IndexError, match="level 0 is out of range: the LoD is empty"):
        LoD([]).offsets_list(0)  # was: "tuple index out of range"
    assert LoD([[0, 1]]).offsets_list(0) == [0, 1]


@pytest.mark.parametrize("text", ["cuda:\u00b2", "cuda:\u0663", "gpu:\u0661", "meta:\u0663"])
def test_device_indices_are_ascii_digits(text):
    with pytest.raises(ValueError, match="place must be a Place"):
        as_place(text)  # "²" raised int()'s ValueError; Arabic-Indic "٣" became CUDAPlace(3)
    assert as_place("cuda:3") == lt.CUDAPlace(3)


def test_copy_keeps_the_subclass():
    t = fluid.LoDTensor([[2, 1]])
    t.set(np.arange(3.0), fluid.CPUPlace())
    shallow = copy.copy(t)
    assert type(shallow) is fluid.LoDTensor and type(copy.deepcopy(t)) is fluid.LoDTensor
    assert shallow.data is t.data and shallow.lod() == [[0, 2, 3]]


def test_repr_of_data_with_no_values_to_read():
    torch = pytest.importorskip("torch")
    t = LoDTensor(torch.empty(3, device="meta"), [[0, 3]])
    text = repr(t)  # was: NotImplementedError "Cannot copy out of meta tensor; no data!"
    assert "lod=[[0, 3]]" in text and "Place(meta)" in text and "device='meta'" in text
    assert str(t) == text


@pytest.mark.parametrize("dtype", [">i4", ">f8", "<f4" if np.little_endian else ">f4"])
def test_to_torch_of_the_other_byte_order_converts_the_values(dtype):
    """to_torch() of big-endian data raised torch's "byte order ... not supported"."""
    torch = pytest.importorskip("torch")
    data = np.arange(6).reshape(3, 2).astype(dtype)
    t = lt.LoDTensor(data, [[0, 1, 3]])
    u = t.to_torch()
    assert u.lod == [[0, 1, 3]] and u.data.tolist() == data.tolist()
    assert u.data.dtype == getattr(torch, np.dtype(dtype).newbyteorder("=").name)
    again = lt.LoDTensor(torch.as_tensor(np.zeros((3, 2), np.float32)), [[0, 1, 3]])
    assert np.array_equal(np.asarray(again.backend.asarray(data)), data)


def test_deepcopy_refuses_torch_data_with_autograd_history_as_torch():
    """deepcopy of a LoDTensor over a non-leaf torch tensor gave a new leaf, silently cut from its graph;
    torch (and lodtensor.nested) refuse: only graph leaves are deep-copied."""
    torch = pytest.importorskip("torch")
    x = torch.ones(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="graph leaf"):
        copy.deepcopy(lt.LoDTensor(x * 2, [[0, 1, 3]]))
    leaf = lt.LoDTensor(x, [[0, 1, 3]])
    d = copy.deepcopy(leaf)
    assert d.data is not x and d.data.requires_grad and d.data.is_leaf and d.lod == [[0, 1, 3]]
    both = copy.deepcopy([leaf, leaf])  # the memo: one copy for one object
    assert both[0] is both[1]
    n = copy.deepcopy(lt.LoDTensor(np.arange(3.0), [[0, 3]]))
    assert n.data.tolist() == [0.0, 1.0, 2.0]
