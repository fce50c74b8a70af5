"""Adversarial inputs: LoDs that are almost right, integers at the edges of int64, wrong types."""

import numpy as np
from hypothesis import strategies as st

EDGE_INTS = [
    -(2**63), -(2**31), -2, -1, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**6,
]
DTYPES = ["float64", "float32", "int64", "int8", "uint8", "bool"]


def ints(small=12):
    """Mostly small non-negative integers, sometimes one from the edges of the integer types."""
    return st.one_of(st.integers(0, small), st.integers(0, small), st.integers(-3, small), st.sampled_from(EDGE_INTS))


@st.composite
def valid_lengths(draw, max_levels=3, max_seqs=6, max_len=4):
    """Per-level lengths consistent with each other (the finest level counts rows)."""
    levels = [draw(st.lists(st.integers(0, max_len), min_size=1, max_size=max_seqs))]
    for _ in range(draw(st.integers(0, max_levels - 1))):
        count = sum(levels[-1])
        if count == 0 or count > 40:
            break
        levels.append(draw(st.lists(st.integers(0, max_len), min_size=count, max_size=count)))
    return levels


def to_offsets(lengths_levels):
    return [np.concatenate([[0], np.cumsum(lv)]).astype(int).tolist() for lv in lengths_levels]


@st.composite
def mutated(draw, levels):
    """``levels`` (offsets or lengths lists) with a few entries changed, added or dropped."""
    levels = [list(level) for level in levels]
    for _ in range(draw(st.integers(0, 3))):
        if not levels:
            break
        k = draw(st.integers(0, len(levels) - 1))
        action = draw(st.sampled_from(["set", "append", "drop", "swap", "level"]))
        level = levels[k]
        if action == "set" and level:
            level[draw(st.integers(0, len(level) - 1))] = draw(ints())
        elif action == "append":
            level.append(draw(ints()))
        elif action == "drop" and level:
            del level[draw(st.integers(0, len(level) - 1))]
        elif action == "swap" and len(level) > 1:
            i = draw(st.integers(0, len(level) - 2))
            level[i], level[i + 1] = level[i + 1], level[i]
        elif action == "level":
            if draw(st.booleans()) and len(levels) > 1:
                del levels[k]
            else:
                levels.insert(k, list(draw(st.lists(ints(), max_size=5))))
    return levels


def containers(levels):
    """The same levels as lists, tuples or arrays of several dtypes (some lossy or wrong)."""

    def as_array(dtype):
        def make(lv):
            try:
                return [np.array(level, dtype=dtype) for level in lv]
            except (OverflowError, ValueError):
                return lv
        return make

    return st.sampled_from(
        [
            lambda lv: lv,
            lambda lv: [tuple(level) for level in lv],
            as_array("int64"),
            as_array("int32"),
            as_array("uint64"),
            as_array("float64"),
            lambda lv: [[bool(v) for v in level] for level in lv],
            lambda lv: [[float(v) for v in level] for level in lv],
            lambda lv: lv[0] if lv else lv,  # a flat list: one level too few
            lambda lv: {k: level for k, level in enumerate(lv)},
            lambda lv: [[str(v) for v in level] for level in lv],
            lambda lv: [np.array(level, dtype=object) for level in lv],
            lambda lv: np.array(lv, dtype=object) if lv else np.zeros((0, 2), np.int64),
        ]
    ).map(lambda fn: fn(levels))


@st.composite
def lod_like(draw, rows=None, form="offsets"):
    """Offsets (or lengths) levels: valid for ``rows`` rows, mutated, or adversarial, in any container."""
    lengths = draw(valid_lengths())
    if rows is not None and draw(st.booleans()):  # make the finest level add up to rows
        lengths = [[rows]] if rows > 0 or draw(st.booleans()) else lengths
    levels = to_offsets(lengths) if form == "offsets" else lengths
    choice = draw(st.sampled_from(["valid", "mutated", "mutated", "random"]))
    if choice == "mutated":
        levels = draw(mutated(levels))
    elif choice == "random":
        levels = draw(st.lists(st.lists(ints(), max_size=6), max_size=3))
    return draw(containers(levels)) if draw(st.integers(0, 3)) == 0 else levels


@st.composite
def data_arrays(draw, rows=None):
    """A small data array of ``rows`` rows (drawn when None), any of :data:`DTYPES`, row shape 0-2 dims."""
    if rows is None:
        rows = draw(st.integers(0, 24))
    dtype = draw(st.sampled_from(DTYPES))
    row_shape = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    size = rows * int(np.prod(row_shape))
    values = np.random.default_rng(draw(st.integers(0, 2**16))).integers(-5, 6, size)
    return values.astype(dtype).reshape((rows,) + row_shape)
