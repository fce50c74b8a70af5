"""Softmax and segment reductions by blocks (``lt_softmax_block``, ``lt_segment_reduce_block``) beside
the piece kernels, run on the CPU (tests/backend/cuda_emu.py) against NumPy: which route the host
takes, and the values of both.

The host sends every one-piece sequence to one block when the sequences average at least
``_tuning.SOFTMAX_BLOCK_STEPS`` (``REDUCE_BLOCK_STEPS``) block steps of rows; the piece kernels
then take only the multi-piece sequences (their pieces numbered by the plan's partial slots).
Skipped without g++.
"""

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lodtensor import get_backend

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")


def _softmax(emulated, host, lens, via_lod=True):
    """The emulated softmax of ``host`` in sequences of ``lens`` rows, and NumPy's. ``via_lod``: as
    on a LoD's device offsets (``LoD.on``: they carry the longest sequence, so the host knows whether
    any sequence has two pieces, as for ``sequence_softmax``); else offsets handed over directly."""
    import lodtensor as lt  # noqa: PLC0415

    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    data = emulated.array(host)
    lod = lt.LoD([offsets.tolist()])
    off = lod.on(emulated.be, "offsets", like=data) if via_lod else emulated.array(offsets)
    emulated.stub.launches.clear()
    got = emulated.be.segment_softmax(data, off)
    ref = host if host.dtype.kind == "f" else host.astype(np.float64)  # integers: float64, as the kernels
    return emulated.numpy(got), get_backend("numpy").segment_softmax(ref, offsets), offsets


def _kinds(emulated):
    return [name.split("<")[0] for name, *_ in emulated.stub.launches]


@pytest.mark.parametrize("dtype, width", [("float32", 128), ("float32", 160), ("float32", 6), ("float64", 40),
                                          ("int32", 9), ("int64", 3), ("float32", 1)])
def test_long_sequences_go_by_blocks(emulated, dtype, width):
    """Sequences averaging several block steps: every one goes by blocks, no three-pass launch;
    empty sequences among them; several column tiles (160 float32 = 40 packs) and packs of one value."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    rng = np.random.default_rng(width)
    steps = 8 * (32 >> min(5, (max(width // (4 if dtype == "float32" and width % 4 == 0 else 1), 1) - 1).bit_length()))
    mean = _tuning.SOFTMAX_BLOCK_STEPS * steps
    lens = rng.integers(mean, 2 * mean, size=7)
    lens[[1, 4]] = 0
    lens[2] = 2 * mean + 5 * (rng.integers(0, 10) + 1)
    host = (rng.standard_normal((int(lens.sum()), width)) * 8).astype(dtype)
    got, want, _ = _softmax(emulated, host, lens)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-7)
    kinds = _kinds(emulated)
    assert "lt_softmax_block" in kinds, kinds
    assert "lt_softmax_apply" not in kinds, kinds  # no sequence of several pieces: nothing else


def test_offsets_of_unknown_lengths_launch_the_multi_piece_passes(emulated):
    """Offsets handed over directly (no longest sequence known): the three passes are launched for
    the multi-piece sequences there might be, find none, and the values are NumPy's."""
    rng = np.random.default_rng(14)
    lens = rng.integers(32, 64, size=20)
    host = rng.standard_normal((int(lens.sum()), 128)).astype(np.float32)
    got, want, _ = _softmax(emulated, host, lens, via_lod=False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    kinds = _kinds(emulated)
    assert "lt_softmax_block" in kinds and "lt_softmax_apply" in kinds, kinds


def test_multi_piece_sequences_take_three_passes_beside_blocks(emulated):
    """A sequence longer than a piece (256 rows of float32 D = 128) takes stats, combine and apply,
    which see only the multi-piece sequences; the others go by blocks: all NumPy's values."""
    rng = np.random.default_rng(11)
    lens = np.array([40, 700, 0, 90, 256, 257, 33, 1300, 64])
    host = (rng.standard_normal((int(lens.sum()), 128)) * 5).astype(np.float32)
    got, want, _ = _softmax(emulated, host, lens)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    kinds = _kinds(emulated)
    assert {"lt_softmax_block", "lt_softmax_stats", "lt_softmax_combine", "lt_softmax_apply"} <= set(kinds), kinds
    # (its arguments end with multi_only, tiles_first)
    multi_only = [args[-2] for name, _, _, args in emulated.stub.launches if name.startswith("lt_softmax_stats")]
    assert [int(m) for m in multi_only] == [1]


def test_short_sequences_keep_three_passes(emulated):
    """Sequences averaging under SOFTMAX_BLOCK_STEPS block steps: the three passes, as before."""
    rng = np.random.default_rng(12)
    lens = rng.integers(0, 9, size=50)
    host = rng.standard_normal((int(lens.sum()), 128))
    got, want, _ = _softmax(emulated, host, lens)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    kinds = _kinds(emulated)
    assert "lt_softmax_block" not in kinds and "lt_softmax_stats" in kinds, kinds


def test_nan_and_infinities_follow_numpy_by_blocks(emulated):
    rng = np.random.default_rng(13)
    lens = np.array([140, 150, 145])  # float64 D = 8: 32 rows a block step
    host = rng.standard_normal((435, 8))
    host[3, 0], host[160, 1], host[161, 1] = np.nan, np.inf, np.inf
    host[290:435, 2] = -np.inf
    host[300, 3] = np.inf
    got, want, _ = _softmax(emulated, host, lens)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert "lt_softmax_block" in _kinds(emulated)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=st.lists(st.integers(0, 300), min_size=1, max_size=12), width=st.sampled_from([1, 3, 8, 40, 132]),
       dtype=st.sampled_from(["float32", "float64"]), by_block=st.sampled_from([0, 1]), via_lod=st.booleans())
def test_both_routes_give_numpys_values(emulated, monkeypatch, lens, width, dtype, by_block, via_lod):
    """Any LoD and width, the block route forced on (one block step suffices) or off, the offsets a
    LoD's (longest sequence known) or the caller's."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", by_block)
    host = (np.random.default_rng(len(lens) * 31 + width).standard_normal((sum(lens), width)) * 4).astype(dtype)
    got, want, _ = _softmax(emulated, host, np.array(lens), via_lod)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-7)
    if not by_block:
        assert "lt_softmax_block" not in _kinds(emulated)


@pytest.mark.parametrize("via_lod", [True, False])
def test_a_lods_longest_sequence_spares_the_combine_pass(emulated, via_lod):
    """Sums over many one-piece sequences: a LoD's offsets say none has two pieces (no combine
    launch); offsets of unknown lengths launch it (it finds nothing to do). NumPy's values both ways."""
    import lodtensor as lt  # noqa: PLC0415

    rng = np.random.default_rng(15)
    lens = rng.integers(100, 250, size=12)  # float32 D = 128: 256 rows a piece
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = rng.standard_normal((int(offsets[-1]), 128)).astype(np.float32)
    data = emulated.array(host)
    lod = lt.LoD([offsets.tolist()])
    off = lod.on(emulated.be, "offsets", like=data) if via_lod else emulated.array(offsets)
    emulated.stub.launches.clear()
    got = emulated.numpy(emulated.be.segment_sum(data, off))
    np.testing.assert_allclose(got, get_backend("numpy").segment_sum(host, offsets), rtol=1e-5, atol=1e-5)
    assert ("lt_segment_combine" in _kinds(emulated)) is not via_lod, _kinds(emulated)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=st.lists(st.integers(0, 300), min_size=1, max_size=12), width=st.sampled_from([1, 3, 8, 40, 132]),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64"]), steps=st.sampled_from([0, 1, 4]),
       tiles_first=st.booleans())
def test_reductions_by_blocks_give_numpys_values(emulated, monkeypatch, lens, width, dtype, steps, tiles_first):
    """Sum, mean, max and min of any LoD and width, by blocks from 1 or 4 block steps or never, in
    either tile order, on a LoD's offsets (the longest sequence known)."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "REDUCE_BLOCK_STEPS", steps)
    monkeypatch.setattr(_tuning, "TILES_FIRST", tiles_first)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = (np.random.default_rng(len(lens) * 13 + width).standard_normal((int(offsets[-1]), width)) * 9).astype(dtype)
    data = emulated.array(host)
    off = lt.LoD([offsets.tolist()]).on(emulated.be, "offsets", like=data)
    ref = get_backend("numpy")
    emulated.stub.launches.clear()
    exact = {"rtol": 0} if dtype.startswith("int") else {"rtol": 1e-5 if dtype == "float32" else 1e-12, "atol": 1e-3}
    np.testing.assert_allclose(emulated.numpy(emulated.be.segment_sum(data, off)), ref.segment_sum(host, offsets),
                               **exact)
    np.testing.assert_allclose(emulated.numpy(emulated.be.segment_mean(data, off, empty=-1)),
                               ref.segment_mean(host, offsets, empty=-1), rtol=1e-5, atol=1e-5)
    for name in ("segment_max", "segment_min"):
        np.testing.assert_array_equal(emulated.numpy(getattr(emulated.be, name)(data, off, empty=7)),
                                      getattr(ref, name)(host, offsets, empty=7), err_msg=name)
    if not steps:
        assert "lt_segment_reduce_block" not in _kinds(emulated)


def test_a_uniform_batch_of_long_sequences_goes_by_blocks_alone(emulated, monkeypatch):
    """Sequences of 40..200 float32 rows of 128 and REDUCE_BLOCK_STEPS 4: one block kernel a reduction,
    no piece kernel and no combine pass (the LoD's longest sequence is one piece)."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "REDUCE_BLOCK_STEPS", 4)
    rng = np.random.default_rng(17)
    lens = rng.integers(40, 200, size=16)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    host = rng.standard_normal((int(offsets[-1]), 128)).astype(np.float32)
    data = emulated.array(host)
    off = lt.LoD([offsets.tolist()]).on(emulated.be, "offsets", like=data)
    emulated.stub.launches.clear()
    got = emulated.numpy(emulated.be.segment_max(data, off, empty=0))
    np.testing.assert_array_equal(got, get_backend("numpy").segment_max(host, offsets, empty=0))
    assert _kinds(emulated) == ["lt_piece_plan", "lt_segment_reduce_block"]
