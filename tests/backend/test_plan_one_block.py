"""The piece plan in one launch (``lt_piece_plan``) against the count kernel and three scans.

For fewer than ``_tuning.PLAN_ONE_BLOCK`` sequences ``_launch.plan`` launches one block that counts
each sequence's pieces and scans the three counts (2,048 sequences a round, the totals carried), where
it launched ``lt_piece_counts`` and three ``cupy.cumsum`` calls (each a few launches and allocations of
host time, on every call with a new LoD: a training step's). Both paths run here on the emulated kernels
(``cuda_emu``), with the same offsets; their plans must be equal, value for value, across round
boundaries, empty sequences, sequences of many pieces and narrow rows' short sequences (no piece).
"""

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend.cupy import _launch, _tuning

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")

ROUND = 256 * 8  # sequences per round of the block


def _plans(emulated, monkeypatch, lens, chunk, short_max):
    """The plan by one block and by the count kernel and scans, as host arrays, and the launches of each."""
    offsets = emulated.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
    out = []
    for limit in (len(lens) + 1, 0):
        monkeypatch.setattr(_tuning, "PLAN_ONE_BLOCK", limit)
        start = len(emulated.stub.launches)
        plan = _launch.plan(emulated.stub, offsets, len(lens), chunk, short_max)
        out.append((emulated.numpy(plan), [name for name, *_ in emulated.stub.launches[start:]]))
    return out


def _expected(lens, chunk, short_max):
    lens = np.asarray(lens, dtype=np.int64)
    pieces = np.where(lens <= short_max, 0, np.maximum(1, -(-lens // chunk)))
    thirds = (pieces, np.where(pieces > 1, pieces, 0), (pieces > 1).astype(np.int64))
    return np.concatenate([np.concatenate([[0], np.cumsum(c)]) for c in thirds])


@pytest.mark.parametrize("n", [0, 1, 31, 255, 256, ROUND - 2, ROUND - 1, ROUND, 2 * ROUND + 37])
@pytest.mark.parametrize("short_max", [-1, 32])
def test_one_block_plan_equals_counts_and_scans(emulated, monkeypatch, n, short_max):
    rng = np.random.default_rng(n)
    lens = rng.integers(0, 60, n)
    lens[rng.uniform(size=n) < 0.05] = 500  # several pieces of 64 rows
    (one, one_launched), (scans, scans_launched) = _plans(emulated, monkeypatch, lens, 64, short_max)
    np.testing.assert_array_equal(one, _expected(lens, 64, short_max))
    np.testing.assert_array_equal(one, scans)
    assert one_launched == ["lt_piece_plan"]  # one launch, not a count kernel and scans
    assert scans_launched[0] == "lt_piece_counts" and "lt_piece_plan" not in scans_launched


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 300), max_size=2 * ROUND + 50), st.sampled_from([1, 8, 256]),
       st.sampled_from([-1, 0, 4]))
def test_property_one_block_plan(emulated, monkeypatch, lens, chunk, short_max):
    (one, _), (scans, _) = _plans(emulated, monkeypatch, np.asarray(lens, dtype=np.int64), chunk, short_max)
    np.testing.assert_array_equal(one, _expected(lens, chunk, short_max))
    np.testing.assert_array_equal(one, scans)


@pytest.mark.parametrize("width", [1, 40])
def test_ops_on_a_one_block_plan(emulated, width):
    """Pool and softmax over a plan of two rounds and more, with sequences of several pieces."""
    rng = np.random.default_rng(5)
    lens = rng.integers(0, 12, ROUND + 300)
    lens[[3, 2100]] = [9000, 20000] if width == 1 else [600, 1100]  # several pieces each (8192 or 256 rows)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    host = rng.standard_normal((offsets[-1], width))
    ref = lt.LoDTensor(host, [offsets])
    t = lt.LoDTensor(emulated.array(host), [offsets])
    for kind in ("sum", "max", "average"):
        np.testing.assert_allclose(emulated.numpy(S.sequence_pool(t, kind).data), S.sequence_pool(ref, kind).data,
                                   rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(emulated.numpy(S.sequence_softmax(t).data), S.sequence_softmax(ref).data,
                               rtol=1e-12, atol=1e-15)
    launched = [name for name, *_ in emulated.stub.launches]
    assert "lt_piece_plan" in launched and "lt_piece_counts" not in launched
    assert any(name.startswith("lt_segment_combine") for name in launched)  # the long sequences' pieces
