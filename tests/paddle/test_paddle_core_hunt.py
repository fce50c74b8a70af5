"""The core LoDTensor API against real Paddle 2.6.2, from a bug hunt: ``create_lod_tensor`` of a
list of arrays keeps their dtype, ``create_random_int_lodtensor`` without a level, and the truth
value of a tensor (a deliberate difference)."""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

import paddle.base as pbase  # noqa: E402
from paddle.base import core  # noqa: E402

import lodtensor.fluid as lfluid  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

A = np.array
LISTS_OF_ARRAYS = [
    ([A([1, 2], np.int32), A([3], np.int32)], [[2, 1]]),
    ([A([1, 2], np.float16), A([3], np.float16)], [[2, 1]]),
    ([A([1, 2], np.float32), A([3], np.float32)], [[2, 1]]),
    ([A([1, 2], np.uint8), A([3], np.uint8)], [[2, 1]]),
    ([A([1, 2], np.complex64), A([3], np.complex64)], [[2, 1]]),
    ([A([True, False]), A([True])], [[2, 1]]),
    ([A([], np.float32), A([3], np.int32)], [[0, 1]]),  # an empty array adds no row, nor its dtype
    ([A([], np.float32), A([], np.float32)], [[0, 0]]),  # no row at all: float64, as np.array([])
    ([A([1, 2], np.int32), [3]], [[2, 1]]),  # a Python int among them: int64
    ([[1.0, 2.0], A([3], np.float32)], [[2, 1]]),
    ([A([[1, 2], [3, 4]], np.float32), A([[5, 6]], np.float32)], [[2, 1]]),  # rows of shape (2,)
    ([A([1, 2], np.int32), A([3.5], np.float32)], [[2, 1]]),
    ([A([1, 2], np.int8), A([3], np.int16)], [[2, 1]]),
    ([A([1, 2], np.float32), A([3], np.float64)], [[2, 1]]),
]


def _observe(t):
    a = np.array(t)
    return a.dtype, a.shape, t.lod(), a.ravel().tolist()


@pytest.mark.parametrize("data, lengths", LISTS_OF_ARRAYS, ids=lambda v: repr(v).replace("\n", ""))
def test_create_lod_tensor_of_a_list_of_arrays_keeps_their_dtype(data, lengths):
    """Paddle iterates each array, so its rows keep their dtype; we made Python numbers of them (tolist):
    float32 came out float64, int32 int64, float16 float64."""
    theirs = _observe(pbase.create_lod_tensor(data, lengths, core.CPUPlace()))
    ours = _observe(lfluid.create_lod_tensor(data, lengths, lfluid.CPUPlace()))
    assert ours == theirs


def test_create_random_int_lodtensor_without_a_level_raises_in_both():
    """Paddle fails on ``recursive_seq_lens[-1]`` (IndexError); ours raised TypeError on None * int."""
    with pytest.raises(IndexError):
        pbase.create_random_int_lodtensor([], [1], core.CPUPlace(), 0, 1)
    with pytest.raises(ValueError, match="at least one level"):
        lfluid.create_random_int_lodtensor([], [1], lfluid.CPUPlace(), 0, 1)


def test_difference_truth_value():
    """Paddle's LoDTensor is always true (and ``==`` compares identity); ours is an array whose ``==``
    is elementwise, so its truth value is NumPy's: ambiguous unless it holds one element."""
    theirs = core.LoDTensor()
    theirs.set(np.zeros((3, 1), "float32"), core.CPUPlace())
    ours = lfluid.LoDTensor()
    ours.set(np.zeros((3, 1), "float32"), lfluid.CPUPlace())
    assert bool(theirs) and bool(core.LoDTensor())
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ours)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ours == ours + 1)
