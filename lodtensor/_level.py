"""One offsets level on the host: lengths <-> offsets <-> segment ids, and ranges; no validation.

The helpers behind :class:`~lodtensor.lod.LoD` and the ops, for arrays that are
already valid (a LoD's own levels, lengths computed from them). They are
public as ``lodtensor.lod.<name>``; data from outside goes through ``LoD``.
"""

import operator

import numpy as np

__all__ = ["lengths_to_offsets", "offsets_to_lengths", "offsets_to_segment_ids", "concat_ranges"]

_INT64 = np.dtype(np.int64)


def lengths_to_offsets(lengths):
    """Offsets ``[0, l0, l0 + l1, ...]`` (int64) from lengths; no validation.

    >>> lengths_to_offsets([2, 0, 3]).tolist()
    [0, 2, 2, 5]
    """
    lengths = np.asarray(lengths, dtype=_INT64)
    offsets = np.empty(lengths.size + 1, dtype=_INT64)
    offsets[0] = 0
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def offsets_to_lengths(offsets):
    """Per-sequence lengths from offsets; no validation.

    >>> offsets_to_lengths([0, 2, 2, 5]).tolist()
    [2, 0, 3]
    """
    return np.diff(np.asarray(offsets, dtype=_INT64))


def offsets_to_segment_ids(offsets, total=None):
    """For each item below the level, the index of its sequence.

    >>> offsets_to_segment_ids([0, 2, 2, 5]).tolist()
    [0, 0, 2, 2, 2]
    """
    offsets = np.asarray(offsets, dtype=_INT64)
    lengths = np.diff(offsets)
    return np.repeat(np.arange(lengths.size, dtype=_INT64), lengths)


def concat_ranges(starts, stops):
    """Concatenated ``arange(s, e)`` for each pair, vectorised: ``(index, counts)``.

    >>> concat_ranges(np.array([5, 0]), np.array([7, 3]))[0].tolist()
    [5, 6, 0, 1, 2]
    """
    counts = stops - starts
    total = int(counts.sum())
    shift = np.repeat(starts - lengths_to_offsets(counts)[:-1], counts)
    return np.arange(total, dtype=_INT64) + shift, counts


def _normalize_level(level, num_levels):
    """``level`` as 0..num_levels-1 (negative counts from the finest), with a clear error."""
    try:
        if isinstance(level, (bool, np.bool_)):  # (operator.index takes True as 1)
            raise TypeError
        level = operator.index(level)
    except TypeError:
        raise TypeError(f"level must be an integer, got {type(level).__name__} {level!r}") from None
    if not -num_levels <= level < num_levels:
        raise IndexError(
            f"level {level} is out of range for a LoD with {num_levels} level(s); "
            f"expected -{num_levels} <= level < {num_levels}"
            if num_levels
            else f"level {level} is out of range: the LoD is empty (lod_level 0)"
        )
    return level % num_levels
