"""The LoD core against real Paddle 2.6.2, from a second bug hunt (tests/test_core_hunt2.py).

A tensor whose data has no axis 0 (Paddle: ``set()`` of a 0-d array; lodtensor refuses that in
``set()``, a documented difference, so here the data is made 0-d in place): without a lod it is
valid in both, ``shape()`` is ``[]``, and the lod can still be set to no level.
"""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from paddle.base import core  # noqa: E402

import lodtensor as lt  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _paddle_zero_d():
    t = core.LoDTensor()
    t.set(np.array(3.0, dtype=np.float32), core.CPUPlace())
    return t


def _ours_zero_d():
    data = np.array([3.0], dtype=np.float32)
    t = lt.LoDTensor(data)
    data.shape = ()  # in place, after the tensor took it
    return t


def test_zero_d_data_without_a_lod_is_valid_in_both():
    p, o = _paddle_zero_d(), _ours_zero_d()
    assert p.shape() == o.shape() == []
    # was IndexError (tuple index out of range) here
    assert p.has_valid_recursive_sequence_lengths() is o.has_valid_recursive_sequence_lengths() is True
    assert p.lod() == o.lod() == [] and p.recursive_sequence_lengths() == o.recursive_sequence_lengths() == []
    p.set_lod([])
    o.set_lod([])  # was IndexError: no level asks for rows
    p.set_recursive_sequence_lengths([])
    o.set_recursive_sequence_lengths([])
    assert p.lod() == o.lod() == [] and o.has_valid_recursive_sequence_lengths() is True
    assert np.array(p).tolist() == np.array(o).tolist() == 3.0
