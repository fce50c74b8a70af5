"""Bugs found by a second hunt through the LoD core (lod, validation, indexing, tensor, Paddle methods).

Each test failed before its fix; the expected behaviour is NumPy's or the documented guarantee
("fit is derived, never stored": data changed in place makes every op raise LoDError and
``has_valid_recursive_sequence_lengths()`` False). Paddle's side: tests/paddle/test_paddle_core_hunt2.py.
"""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import LoD, LoDTensor
from lodtensor.errors import LoDError

torch = pytest.importorskip("torch")


# -- data made 0-d in place (torch resize_ / squeeze_, NumPy shape = ()) is an unfit lod ------------
def _zero_d_tensors():
    d = torch.arange(3.0)
    t = LoDTensor(d, [[0, 1, 3]])
    d.resize_(())  # torch: the tensor now has no axis 0
    yield "torch resize_", t
    d = torch.arange(1.0)
    t = LoDTensor(d, [[0, 1]])
    d.squeeze_()
    yield "torch squeeze_", t
    d = np.arange(1.0)
    t = LoDTensor(d, [[0, 1]])
    d.shape = ()  # NumPy: reshaped in place
    yield "numpy shape", t


@pytest.mark.parametrize("name", ["torch resize_", "torch squeeze_", "numpy shape"])
def test_data_made_zero_d_in_place_is_an_unfit_lod(name):
    t = dict(_zero_d_tensors())[name]
    lod = t.lod()
    assert t.has_valid_recursive_sequence_lengths() is False  # was IndexError: tuple index out of range
    assert t.num_rows == 0 and t.shape() == [] and len(t) == len(lod[0]) - 1
    for op in (lambda: t[0], lambda: t[-1], lambda: t[:1], lambda: t[[0]], t.tolist, t.unbind,
               lambda: t * 2, t.to_padded):
        with pytest.raises(LoDError, match="the lod does not fit the data: the data is 0-d"):
            op()  # was IndexError (tuple index out of range) or TypeError (len() of unsized object)
    for setter, value in ((t.set_lod, [[0, 1]]), (t.set_recursive_sequence_lengths, [[1]])):
        with pytest.raises(LoDError, match="0-d"):
            setter(value)
        assert t.lod() == lod  # a failed setter leaves the lod as it was
    t.set_lod([])  # no level: nothing to fit, as for any data
    assert t.lod() == [] and t.has_valid_recursive_sequence_lengths() is True
    t.set(np.arange(2.0), lt.CPUPlace())
    t.set_lod([[0, 2]])
    assert t[0].tolist() == [0.0, 1.0]


# -- an empty float index array is refused, as NumPy and torch refuse it -----------------------
def test_empty_float_index_arrays_are_refused_as_numpy_refuses_them():
    t = LoDTensor(np.arange(6), [[0, 2, 3], [0, 1, 1, 6]])
    for index in (np.array([], dtype=np.float64), np.array([], dtype=np.complex64), torch.tensor([])):
        with pytest.raises(IndexError):
            np.arange(2)[np.asarray(index)]  # NumPy: arrays used as indices must be of integer (or boolean) type
        with pytest.raises(IndexError, match="1-D array of sequence indices"):
            t[index]  # was an empty selection
    with pytest.raises(IndexError):
        torch.arange(2)[torch.tensor([])]
    # an empty list is NumPy's empty selection (np.asarray([]) is float64, but NumPy reads it as no index)
    assert np.arange(2)[[]].tolist() == [] and t[[]].tolist() == [] and t[[]].lod() == [[0], [0]]


# -- a 1-D torch tensor is one level, as a 1-D NumPy array is -----------------------------------
def test_a_one_d_tensor_is_one_level_as_a_one_d_numpy_array():
    assert LoD(np.array([0, 2, 5]))() == [[0, 2, 5]]
    assert LoD(torch.tensor([0, 2, 5]))() == [[0, 2, 5]]  # was: "must be 1-D ..., got an array of shape ()"
    assert LoD.from_lengths(torch.tensor([2, 3]))() == [[0, 2, 5]]
    with pytest.raises(TypeError, match="integer dtype"):
        LoD(torch.tensor([0.0, 2.0]))
    with pytest.raises(TypeError, match="booleans"):
        LoD(torch.tensor([False, True]))


# -- a LoD compares with an array as with the lists it holds, from either side --------------------
def test_lod_equals_an_array_of_its_offsets_from_either_side():
    lod = LoD([[0, 2, 3], [0, 1, 1, 4]])
    one = LoD([[0, 2, 5]])
    assert (one == np.array([[0, 2, 5]])) is True  # was array([[False, False, False]])
    assert (np.array([[0, 2, 5]]) == one) is True  # was NumPy's entry-by-entry comparison with the object
    assert (np.array([[0, 2, 4]]) != one) is True and (one == np.array([0, 2, 5])) is True
    assert (lod == np.array([[0, 2, 3], [0, 1, 1]])) is False
    assert lod == [np.array([0, 2, 3]), np.array([0, 1, 1, 4])] and lod == lod()
    assert (LoD([]) == np.zeros((0, 3), dtype=np.int64)) is True
