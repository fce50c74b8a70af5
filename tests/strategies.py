"""Hypothesis strategies: lengths (with zeros), multi-level LoDs, LoDTensors."""

import numpy as np
from hypothesis import strategies as st

import lodtensor as lt


def lengths(min_size=1, max_size=12, max_len=6):
    return st.lists(st.integers(0, max_len), min_size=min_size, max_size=max_size)


@st.composite
def lengths_levels(draw, min_levels=1, max_levels=3):
    """Per-level lengths, outermost first, consistent with each other. Empty batches and levels of no
    sequence (lengths ``[]`` under parents that are all empty) come up too: they are valid LoDs."""
    n_levels = draw(st.integers(min_levels, max_levels))
    levels = [draw(lengths(min_size=0, max_size=6, max_len=4))]
    for _ in range(n_levels - 1):
        count = sum(levels[-1])
        levels.append(draw(st.lists(st.integers(0, 4), min_size=count, max_size=count)))
    return levels


@st.composite
def lod_tensors(draw, min_levels=1, max_levels=3, row_shape=None, dtype="float64"):
    levels = draw(lengths_levels(min_levels, max_levels))
    rows = sum(levels[-1])
    if row_shape is None:
        row_shape = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    data = np.arange(rows * int(np.prod(row_shape)), dtype=dtype).reshape((rows,) + tuple(row_shape))
    return lt.LoDTensor(data, recursive_sequence_lengths=levels)
