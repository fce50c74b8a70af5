"""A differential bug hunt against real PaddlePaddle 2.6.2 (Nov 28): the sequence ops on 2- and
3-level lods with empty sequences at the start, middle and end, all-empty batches, single rows,
int32/int64/float16/float64 data and rows of shape (N,), (N, 1), (N, D), (N, D1, D2); argument
corners (pool type case, ``win_size``, ``new_dim``, ``maxlen``, ``ref_level``, NaN/inf pad values);
the LoDTensor core (``set_lod`` / ``set_recursive_sequence_lengths`` validation, ``np.array``,
``shape()``, numpy-integer and array lods); ``embedding``, ``row_conv``, ``sequence_conv``,
``dynamic_lstm`` / ``dynamic_gru`` (``is_reverse``, ``h_0``, float32 and float64, NumPy forward)
and the rank-table family on random 1- to 3-level lods. lodtensor agreed with Paddle wherever
Paddle's result is meaningful; the two differences recorded here are where it is not:

- ``sequence_reshape`` with ``new_dim=0`` kills Paddle (SIGFPE in its InferShape); lodtensor raises
  ``ValueError`` naming ``new_dim``.
- ``row_conv`` of a 2-level input: Paddle reads the FIRST level as row offsets, so it convolves the
  wrong rows and leaves the rows past that level's end uninitialised; lodtensor convolves within the
  last-level sequences, as Paddle does for the 1-level tensor of that level.
"""

import signal

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from _raw import run as run_raw  # noqa: E402
from _static import crash_signal  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.fluid import layers as L  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.mark.parametrize("lod", [[[0, 2, 2, 5]], [[0, 1, 3], [0, 2, 2, 5]]], ids=["1level", "2level"])
def test_difference_reshape_new_dim_zero_crashes_paddle(lod):
    """Paddle's sequence_reshape InferShape divides by ``new_dim``: 0 kills the process (SIGFPE).
    lodtensor refuses it with a ValueError that names the argument and its value, and leaves the
    input as it was."""
    x = lt.LoDTensor(np.arange(10.0, dtype="float32").reshape(5, 2), lod)
    if len(lod) == 1:  # (Paddle refuses a 2-level input before reaching the division)
        assert crash_signal("sequence_reshape", {"input": x}, {"new_dim": 0}) == signal.SIGFPE
    before = (x.numpy().copy(), x.lod())
    with pytest.raises(ValueError, match=r"new_dim must be >= 1, got 0"):
        L.sequence_reshape(x, 0)
    np.testing.assert_array_equal(x.numpy(), before[0])
    assert x.lod() == before[1]


def _paddle_row_conv(x, w):
    (data, lod), = run_raw(lambda v, op: op("row_conv", {"X": v["x"], "Filter": v["w"]}, {"Out": "float32"})["Out"],
                           {"x": x}, {"w": w})
    return data, lod


def test_difference_row_conv_two_levels():
    """Paddle's row_conv takes a 2-level input without complaint but uses ``lod[0]`` (offsets of the
    sub-sequences) as row offsets: its first rows are the convolution of the rows grouped by level 0,
    and the rows past ``lod[0][-1]`` are never written. lodtensor convolves within the last-level
    sequences, which is Paddle's result for the 1-level tensor of the last level."""
    rows = np.arange(1.0, 6.0, dtype="float32").reshape(5, 1) * np.array([[1.0, -2.0]], "float32")
    lod = [[0, 1, 3], [0, 2, 3, 5]]  # (no empty sequence: Paddle's row_conv refuses those)
    w = np.array([[1.0, 0.5], [10.0, 3.0]], "float32")
    x = lt.LoDTensor(rows, lod)
    ours = F.row_conv(x, w)
    assert ours.lod() == lod
    last_level, last_lod = _paddle_row_conv(lt.LoDTensor(rows, lod[-1:]), w)
    assert last_lod == lod[-1:]
    np.testing.assert_allclose(ours.numpy(), last_level, rtol=1e-6)
    # Paddle on the 2-level tensor: rows 0..2 convolved as if level 0 [0, 1, 3] were row offsets
    theirs, their_lod = _paddle_row_conv(x, w)
    level0_as_rows, _ = _paddle_row_conv(lt.LoDTensor(rows[:3], lod[:1]), w)
    assert their_lod == lod
    np.testing.assert_allclose(theirs[:3], level0_as_rows, rtol=1e-6)
    assert not np.allclose(theirs[:3], last_level[:3])
