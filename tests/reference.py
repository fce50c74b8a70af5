"""Slow list-of-lists oracles, used only by tests."""

import numpy as np


def offsets_from_lengths(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def nest(rows, lengths_levels):
    """Group ``rows`` by the lengths levels, innermost first."""
    out = list(rows)
    for lengths in reversed(lengths_levels):
        grouped, pos = [], 0
        for n in lengths:
            grouped.append(out[pos : pos + n])
            pos += n
        out = grouped
    return out


def flatten_levels(nested, n_levels):
    """(rows, lengths per level) of ``n_levels`` list levels, by plain loops."""
    levels = []
    items = list(nested)
    for _ in range(n_levels):
        levels.append([len(x) for x in items])
        items = [y for x in items for y in x]
    return items, levels


def pad(sequences, pad_value, maxlen, row_shape, dtype):
    out = np.full((len(sequences), maxlen) + tuple(row_shape), pad_value, dtype=dtype)
    for i, seq in enumerate(sequences):
        for j, row in enumerate(seq):
            out[i, j] = row
    return out
