import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lodtensor import LoD, LoDError
from lodtensor.lod import (
    as_lengths,
    as_offsets,
    lengths_to_offsets,
    offsets_to_lengths,
    offsets_to_segment_ids,
)

from .reference import offsets_from_lengths
from .strategies import lengths, lengths_levels


def test_offsets_and_lengths_of_each_level():
    lod = LoD([[0, 2, 3], [0, 2, 2, 6]])
    assert lod() == [[0, 2, 3], [0, 2, 2, 6]]
    assert lod.to_lengths_list() == [[2, 1], [2, 0, 4]]
    assert lod.num_levels == len(lod) == 2
    assert lod.num_rows == 6
    assert lod.num_sequences(0) == 2 and lod.num_sequences(1) == 3
    assert lod.offsets(0).dtype == np.int64
    assert lod.lengths(-1).tolist() == [2, 0, 4]
    assert lod.absolute_offsets(0).tolist() == [0, 2, 6]
    assert lod.absolute_offsets(1).tolist() == [0, 2, 2, 6]
    assert lod.segment_ids(0).tolist() == [0, 0, 1, 1, 1, 1]
    assert lod.segment_ids(1).tolist() == [0, 0, 2, 2, 2, 2]


def test_lod_arrays_are_read_only_copies():
    level = np.array([0, 2, 5])
    lod = LoD([level])
    level[1] = 1
    assert lod.offsets(0).tolist() == [0, 2, 5]
    assert level.flags.writeable
    with pytest.raises(ValueError):
        lod.offsets(0)[1] = 3


def test_empty_lod():
    lod = LoD()
    assert lod() == [] and lod.num_rows is None and lod.fits(7)
    with pytest.raises(IndexError, match="empty"):
        lod.offsets(0)


@pytest.mark.parametrize(
    "levels, exc, pattern",
    [
        ([[1, 2, 5]], LoDError, r"must start at 0, got offsets\[0\]=1"),
        ([[0, 3, 2, 5]], LoDError, r"non-decreasing, but offsets\[1\]=3 > offsets\[2\]=2"),
        ([[0, 1], [0]], LoDError, r"level 0 must end at the number of sequences in level 1 \(0\)"),
        ([[]], LoDError, r"at least 1 offset \(offsets \[0\] for no sequence\)"),
        ([[0, 1], [0, 2, 5]], LoDError,
         r"level 0 must end at the number of sequences in level 1 \(2\), got offsets\[-1\]=1"),
        ([[0, 2.0, 5]], TypeError, r"integer dtype .* got float64"),
        ([[0, True]], TypeError, r"booleans"),
        ([[0, np.True_, 2]], TypeError, r"booleans"),  # NumPy's bool too: np.asarray would make it 1
        ([[0, 2**63]], ValueError, r"holds values beyond int64: \[0, 9223372036854775808\]"),
        ([[0, 2**64]], ValueError, r"holds values beyond int64"),
        ([[0, 10**30]], ValueError, r"holds values beyond int64"),
        ([[0, [1], 2]], TypeError, r"ragged"),
        ([[[0, 1], [0, 1]]], ValueError, r"must be 1-D"),
        ([0, 2, 5], TypeError, r"did you mean \[\[0, 2, 5\]\]"),
        ("abc", TypeError, r"integer dtype|flat list|offset lists"),
        (5, TypeError, r"list of offset lists"),
    ],
    ids=["not-zero", "decreasing", "hollow-under-rows", "no-entry", "level-mismatch", "float", "bool", "numpy-bool",
         "int64-max-plus-one", "uint64-overflow", "huge", "ragged", "2d-level", "flat", "string", "int"],
)
def test_invalid_offsets(levels, exc, pattern):
    with pytest.raises(exc, match=pattern):
        LoD(levels)


def test_error_attributes():
    with pytest.raises(LoDError) as info:
        LoD([[0, 1], [0, 4, 3]])
    assert info.value.level == 1 and info.value.index == 2
    with pytest.raises(LoDError) as info:
        LoD([[0, 2, 5]], num_rows=6)
    assert info.value.level == 0
    assert "must end at len(data)=6, got offsets[-1]=5" in str(info.value)


@pytest.mark.parametrize(
    "lengths, exc, pattern",
    [
        ([[2, -1]], LoDError, r"non-negative, got lengths\[1\]=-1"),
        ([[2.5, 2]], TypeError, r"integer dtype"),
        ([[True, False]], TypeError, r"booleans"),
        ([[np.True_, 1]], TypeError, r"booleans"),
        ([[1, 2**64]], ValueError, r"holds values beyond int64"),
        ([[1], []], LoDError, r"level 0 must add up to the number of sequences in level 1 \(0\), got sum=1"),
        ([[1, 1], [2, 3, 4]], LoDError, r"level 0 must add up to the number of sequences in level 1 \(3\), got sum=2"),
        ([[2, [1]]], TypeError, r"ragged"),
    ],
    ids=["negative", "float", "bool", "numpy-bool", "beyond-int64", "hollow-under-rows", "mismatch", "ragged"],
)
def test_invalid_lengths(lengths, exc, pattern):
    with pytest.raises(exc, match=pattern):
        LoD.from_lengths(lengths)


def test_accepts_any_integer_arrays():
    for dtype in [np.int8, np.int32, np.uint16, np.uint64, np.int64]:
        lod = LoD([np.array([0, 2, 5], dtype=dtype)])
        assert lod() == [[0, 2, 5]] and lod.offsets(0).dtype == np.int64
    assert LoD.from_lengths([np.array([2, 3], dtype=np.int32)])() == [[0, 2, 5]]
    assert LoD((range(0, 3),))() == [[0, 1, 2]]


def test_slice_rebases_every_level():
    lod = LoD([[0, 1, 3, 4], [0, 2, 2, 5, 6]])
    sub, a, b = lod.slice(1, 3)
    assert sub() == [[0, 2, 3], [0, 0, 3, 4]] and (a, b) == (2, 6)
    sub, a, b = lod.slice(0, 1)
    assert sub() == [[0, 1], [0, 2]] and (a, b) == (0, 2)


def test_select_gathers_sequences_in_any_order():
    lod = LoD([[0, 1, 3], [0, 2, 2, 5]])
    sub, rows = lod.select([1, 0, 1])
    assert sub() == [[0, 2, 3, 5], [0, 0, 3, 5, 5, 8]]
    assert rows.tolist() == [2, 3, 4, 0, 1, 2, 3, 4]


def test_split_matches_slice():
    lod = LoD([[0, 1, 3, 3, 4], [0, 2, 2, 5, 6], [0, 1, 2, 3, 3, 4, 6]])
    subs, rows = lod.split()
    for i, sub in enumerate(subs):
        ref, a, b = lod.slice(i, i + 1)
        assert sub == ref.drop_level(0)
        assert (rows[i], rows[i + 1]) == (a, b)


def test_drop_and_append_levels():
    lod = LoD([[0, 1, 3], [0, 2, 2, 5]])
    assert lod.drop_level(0)() == [[0, 2, 2, 5]]
    assert lod.drop_level(1)() == [[0, 2, 5]]
    assert lod.append_level([0, 1, 1, 2, 3, 5], num_rows=5)() == [[0, 1, 3], [0, 2, 2, 5], [0, 1, 1, 2, 3, 5]]
    with pytest.raises(LoDError, match="level 1 must end at the number of sequences in level 2"):
        lod.append_level([0, 1, 2])


def test_equality_hash_pickle():
    import pickle

    a = LoD([[0, 2, 3], [0, 1, 2, 4]])
    b = LoD.from_lengths([[2, 1], [1, 1, 2]])
    assert a == b and hash(a) == hash(b) and a == [[0, 2, 3], [0, 1, 2, 4]]
    assert a != LoD([[0, 3], [0, 1, 2, 4]])
    assert pickle.loads(pickle.dumps(a)) == a
    assert repr(a) == "LoD([[0, 2, 3], [0, 1, 2, 4]])"


@given(lengths())
def test_lengths_offsets_round_trip(lens):
    offsets = lengths_to_offsets(np.asarray(lens, dtype=np.int64))
    assert offsets.tolist() == offsets_from_lengths(lens)
    assert offsets_to_lengths(offsets).tolist() == lens
    assert as_offsets(offsets).tolist() == offsets.tolist()
    assert as_lengths(lens).tolist() == lens


@given(lengths())
def test_segment_ids_invariant(lens):
    offsets = lengths_to_offsets(lens)
    ids = offsets_to_segment_ids(offsets)
    assert ids.tolist() == [i for i, n in enumerate(lens) for _ in range(n)]
    assert np.bincount(ids, minlength=len(lens)).tolist() == lens


@given(lengths_levels())
def test_lod_lengths_round_trip_and_last_offset(levels):
    lod = LoD.from_lengths(levels)
    assert lod.to_lengths_list() == levels
    assert LoD(lod()) == lod
    assert lod.num_rows == sum(levels[-1])
    assert lod.absolute_offsets(0)[-1] == lod.num_rows


@given(lengths_levels(min_levels=2), st.data())
def test_slices_concatenate_back(levels, data):
    lod = LoD.from_lengths(levels)
    n = lod.num_sequences(0)
    cut = data.draw(st.integers(0, n))
    if cut == n:
        assert lod.slice(0, n)[0] == lod and lod.slice(n, n)[0]() == [[0]] * lod.num_levels
        return
    left, a0, b0 = lod.slice(0, cut)
    right, a1, b1 = lod.slice(cut, n)
    assert (a0, b1, b0) == (0, lod.num_rows, a1)
    joined = [ll + rl for ll, rl in zip(left.to_lengths_list(), right.to_lengths_list())]
    assert joined == levels


@pytest.mark.parametrize(
    "levels, lengths",
    [([[0]], [[]]), ([[0], [0]], [[], []]), ([[0, 0, 0], [0]], [[0, 0], []]), ([[0, 0], [0], [0]], [[0], [], []])],
    ids=["batch0", "batch0x2", "docs-without-sentences", "three-levels"],
)
def test_levels_of_no_sequence(levels, lengths):
    """``[0]`` is a level of no sequence: an empty batch, or the level under parents that are all empty
    (as torch's empty nested tensor, TensorFlow's row_splits [0], awkward's empty list array)."""
    lod = LoD(levels, num_rows=0)
    assert lod() == levels and lod.to_lengths_list() == lengths
    assert LoD.from_lengths(lengths, num_rows=0) == lod
    assert lod.num_sequences(len(levels) - 1) == 0 and lod.num_rows == 0
    with pytest.raises(LoDError, match="must end at len"):
        LoD(levels, num_rows=1)
