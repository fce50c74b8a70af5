"""Every LoD the level algebra builds without checks (slices, one sequence, selections, the split
parts, dropped levels) is one the gate accepts: no object exists that ``LoD(levels)`` would refuse,
so pickling, copying and rebuilding never fail on a tensor an op handed out."""

import copy
import pickle

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.lod import LoD


@st.composite
def lods(draw):
    """Multi-level LoDs whose sequences are often empty, down to levels of no sequence."""
    depth = draw(st.integers(1, 4))
    levels = [draw(st.lists(st.integers(0, 3), min_size=0, max_size=5))]
    for _ in range(depth - 1):
        count = sum(levels[-1])
        levels.append(draw(st.lists(st.integers(0, 3), min_size=count, max_size=count)))
    return LoD.from_lengths(levels)


def _through_the_gate(lod, num_rows):
    again = LoD(lod(), num_rows=num_rows)
    assert again == lod and again() == lod()
    assert LoD.from_lengths(lod.to_lengths_list(), num_rows=num_rows) == lod


@given(lods(), st.data())
def test_algebra_makes_only_lods_the_gate_accepts(lod, data):
    n = lod.num_sequences(0)
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    part, a, b = lod.slice(start, stop)
    _through_the_gate(part, b - a)
    if n:
        child, a, b = lod.child(data.draw(st.integers(0, n - 1)))
        _through_the_gate(child, b - a)
    picks = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=6)) if n else []
    chosen, rows = lod.select(picks)
    _through_the_gate(chosen, rows.size)
    if lod.num_levels > 1:
        sublods, bounds = lod.split()
        for sub, x, y in zip(sublods, bounds[:-1], bounds[1:]):
            _through_the_gate(sub, int(y - x))
        for level in range(lod.num_levels):
            _through_the_gate(lod.drop_level(level), lod.num_rows)


@given(lods(), st.data())
def test_tensors_from_indexing_pickle_copy_and_rebuild(lod, data):
    t = lt.LoDTensor(np.arange(lod.num_rows, dtype=np.float32), lod=lod())
    n = len(t)
    start = data.draw(st.integers(0, n))
    parts = [t[start : data.draw(st.integers(0, n))], t[np.zeros(n, dtype=bool)], *t.unbind()]
    for part in parts:
        for again in (pickle.loads(pickle.dumps(part)), copy.deepcopy(part), lt.LoDTensor(part.data, part.lod())):
            assert again.lod() == part.lod() and again.tolist() == part.tolist()
