"""Ops that pick rows: expand, expand_as, concat, reverse, slice, scatter.

Each computes a row index from the LoD (vectorised, no loop over sequences; on the host for CPU
data, on the data's device for the others: ``_rows``) and moves the data once with the backend's
``gather``.
"""

import numpy as np

from ..backend import backend_name_of, backend_of, dtype_kind
from ..errors import LoDError
from ..lod import LoD, lengths_to_offsets, offsets_to_segment_ids
from ..tensor import LoDTensor
from ._common import as_data, host_ints, int_extremes, level_index, require_lod, snapshot, wrap
from ._rows import on_host, per_row, ranges

__all__ = ["expand", "expand_as", "concat", "reverse", "slice_sequences", "scatter"]


def _gather(x_data, rows, be):
    return be.gather(x_data, be.from_host(rows, like=x_data))


def _repeat_rows(data, repeats, be):
    """Row ``i`` of ``data`` ``repeats[i]`` times: the backend's ``repeat_interleave``, which copies
    runs of equal rows without a row index (1.2x faster than a gather on NumPy)."""
    return be.repeat_interleave(data, be.from_host(repeats, like=data), total=int(repeats.sum()))


def expand(x, y, ref_level=-1, where="sequence_expand()"):
    """Repeat each top-level sequence of ``x`` (each row when ``x`` has no lod)
    as often as the lengths of ``y``'s ``ref_level`` say; copies are separate sequences."""
    y = require_lod(y, where, name="y")
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: x must be a LoDTensor, got {type(x).__name__}")
    x = snapshot(x)
    data = x._require_data(where)
    k = level_index(y, ref_level, where)
    repeats = y.lod.lengths(k)
    n = len(x)
    if repeats.size != n:
        unit = "sequences" if x.lod_level else "rows"
        raise LoDError(
            f"{where}: y's lod level {k} has {repeats.size} sequences but x has {n} {unit}; "
            f"they must match (one repeat count per x item)",
            level=k,
        )
    be = x.backend
    if not x.lod_level:  # rows repeated; no repeats at all gives an empty result, as in Paddle
        return wrap(_repeat_rows(data, repeats, be), ())
    picks = np.repeat(np.arange(n, dtype=np.int64), repeats)  # one per output top-level sequence
    x._check_fits()
    # no picks at all: an empty batch (lod [[0]]), as Paddle returns; the row index made where the data live
    lod, starts, stops = x.lod.select(picks, rows=False)
    return wrap(be.gather(data, ranges(be, starts, stops, data)), lod)


def expand_as(x, y, where="sequence_expand_as()"):
    """Row ``i`` of ``x`` repeated ``len(y's last-level sequence i)`` times; the result takes ``y``'s lod."""
    y = require_lod(y, where, name="y")
    data = as_data(x, where, "x")
    lengths = y.lod.lengths(-1)
    if data.shape[0] != lengths.size:
        raise LoDError(
            f"{where}: x has {data.shape[0]} rows but y's last lod level has {lengths.size} sequences; "
            f"they must match",
            level=y.lod_level - 1,
        )
    return wrap(_repeat_rows(data, lengths, backend_of(data)), y.lod)


def concat(inputs, where="sequence_concat()"):
    """Sequence ``j`` of the result is sequence ``j`` of every input, one after another.

    Acts on the last level; the outer levels of all inputs must be equal and are kept.
    """
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(f"{where}: input must be a non-empty list of LoDTensors, got {inputs!r}")
    inputs = [require_lod(x, where, name=f"input[{i}]") for i, x in enumerate(inputs)]
    first = inputs[0]
    outer = first.lod.levels[:-1]
    counts = first.lod.num_sequences(-1)
    for i, x in enumerate(inputs[1:], 1):
        if tuple(x.data.shape[1:]) != tuple(first.data.shape[1:]):
            raise ValueError(
                f"{where}: input[{i}] has rows of shape {tuple(x.data.shape[1:])} but input[0] has "
                f"{tuple(first.data.shape[1:])}; the rows must have the same shape"
            )
        if x.dtype != first.dtype:
            raise TypeError(
                f"{where}: input[{i}] has dtype {x.dtype} but input[0] has {first.dtype}; convert one first"
            )
        if x.lod_level != first.lod_level:
            raise LoDError(
                f"{where}: input[{i}] has lod_level {x.lod_level} but input[0] has {first.lod_level}; they must match"
            )
        if x.lod.num_sequences(-1) != counts:
            raise LoDError(
                f"{where}: input[{i}] has {x.lod.num_sequences(-1)} sequences but input[0] has {counts}; "
                f"every input needs the same number of sequences"
            )
        if LoD._from_valid(x.lod.levels[:-1]) != LoD._from_valid(outer):
            raise LoDError(f"{where}: input[{i}] has other outer lod levels than input[0]; they must be equal")
    be = backend_of(*(x.data for x in inputs))
    bases = np.cumsum([0] + [x.num_rows for x in inputs[:-1]])
    starts = np.stack([x.lod.offsets(-1)[:-1] + b for x, b in zip(inputs, bases)], axis=1).ravel()
    stops = np.stack([x.lod.offsets(-1)[1:] + b for x, b in zip(inputs, bases)], axis=1).ravel()
    lengths = (stops - starts).reshape(counts, len(inputs)).sum(axis=1)
    joined = be.concat([x.data for x in inputs])
    data = be.gather(joined, ranges(be, starts, stops, joined))  # (device data: made on their device)
    return wrap(data, outer + (lengths_to_offsets(lengths),))


def reverse(x, where="sequence_reverse()"):
    """The rows of every last-level sequence in reverse order; same lod."""
    x = require_lod(x, where)
    offsets = x.lod.offsets(-1)
    be, data = x.backend, x.data
    if not on_host(be, data):  # on the device: row r of sequence [a, b) reads row a + b - 1 - r
        last = per_row(be, offsets[:-1] + offsets[1:] - 1, x.lod.lengths(-1), data)
        return x.with_data(be.gather(data, last - be.arange(int(offsets[-1]), like=data)))
    seg = offsets_to_segment_ids(offsets)
    rows = offsets[:-1][seg] + offsets[1:][seg] - 1 - np.arange(seg.size, dtype=np.int64)
    return x.with_data(_gather(data, rows, be))


def slice_sequences(x, offset, length, where="sequence_slice()"):
    """Sequence ``i`` becomes its rows ``offset[i] : offset[i] + length[i]``."""
    x = require_lod(x, where)
    n = x.lod.num_sequences(-1)
    off = host_ints(offset, where, "offset")
    size = host_ints(length, where, "length")
    for name, arr in (("offset", off), ("length", size)):
        if arr.size != n:
            raise ValueError(f"{where}: {name} must have one entry per sequence ({n}), got {arr.size}")
    lengths = x.lod.lengths(-1)
    bad = (off < 0) | (size < 0) | (off > lengths) | (size > lengths - off)  # no offset + length: it can wrap
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IndexError(
            f"{where}: sequence {i} has {lengths[i]} rows, so offset[{i}]={off[i]} and length[{i}]={size[i]} "
            f"must satisfy 0 <= offset, 0 <= length, offset + length <= {lengths[i]}"
        )
    starts = x.lod.offsets(-1)[:-1] + off
    be, data = x.backend, x.data
    rows = ranges(be, starts, starts + size, data)  # (device data: made on their device)
    return wrap(be.gather(data, rows), x.lod.levels[:-1] + (lengths_to_offsets(size),))


def scatter(x, index, updates, where="sequence_scatter()"):
    """``x`` (dense, one row per sequence) plus ``updates`` added at columns ``index``.

    ``out[i, index[i][j]] += updates[i][j]`` for every sequence ``i`` of ``index``. Device data with a
    device ``index`` get the flat index made on their device, and the columns checked there with one
    read of four scalars (``int_extremes``), not a copy of ``index`` (Paddle 2.6 checks nothing: a
    column past the row lands in the next row, a negative one corrupts the heap; an unchecked column
    in torch CUDA's ``index_add_`` fails a device-side assert, reported at a later synchronisation,
    after which the CUDA context is unusable).
    """
    data = as_data(x, where, "input")
    index = require_lod(index, where, name="index")
    updates = require_lod(updates, where, name="updates")
    if index.lod != updates.lod:
        raise LoDError(f"{where}: index and updates must have the same lod, got {index.lod!r} and {updates.lod!r}")
    n = index.lod.num_sequences(-1)
    if data.ndim < 2 or data.shape[0] != n:
        raise ValueError(
            f"{where}: input must have shape (sequences={n}, width, ...), got {tuple(data.shape)}"
        )
    width = int(data.shape[1])
    be = backend_of(data, updates.data)
    on_device = not on_host(be, data) and _on_device_of(index.data, data, be)
    cols = None if on_device else host_ints(index, where, "index")  # (elsewhere: read to the host, checked there)
    size = int(np.prod(index.data.shape, dtype=np.int64))
    if on_device and dtype_kind(index.data.dtype) not in "iu":
        raise TypeError(f"{where}: index must hold integers, got {index.data.dtype}")
    if size != index.num_rows:
        raise ValueError(f"{where}: index must hold one column per row, got shape {tuple(index.data.shape)}")
    if cols is not None:
        bad = (cols < 0) | (cols >= width)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise IndexError(f"{where}: index[{j}]={cols[j]} is out of range for input width {width}")
    if updates.dtype != data.dtype:
        raise TypeError(f"{where}: updates has dtype {updates.dtype} but input has {data.dtype}; they must match")
    row_shape = tuple(data.shape[2:])
    shape = tuple(updates.data.shape)
    if not shape or shape[0] != size or int(np.prod(shape[1:], dtype=np.int64)) != int(
            np.prod(row_shape, dtype=np.int64)):
        what = f"one row of input's row shape {row_shape}" if row_shape else "one value"
        expected = (size,) + (row_shape or (1,))
        raise ValueError(f"{where}: updates must hold {what} per index row, shape {expected}, got {shape}")
    if on_host(be, data):  # CPU data: the host index
        flat_index = be.from_host(index.lod.segment_ids(-1) * width + cols, like=data)
    else:  # device data: sequence i's columns start at i * width, made on the device (no pass over the rows)
        if cols is None:
            cols = be.astype(be.flat(index.data), "int64")
            _check_columns(be, cols, index.data.dtype, width, where)
        else:
            cols = be.from_host(cols, like=data)
        flat_index = per_row(be, np.arange(n, dtype=np.int64) * width, index.lod.lengths(-1), data) + cols
    values = updates.data.reshape((size,) + row_shape)
    flat = data.reshape((n * width,) + row_shape)
    out = be.scatter_add(flat, flat_index, values)
    return out.reshape(tuple(data.shape))


def _on_device_of(values, like, be):
    """Whether array ``values`` is of backend ``be`` and on ``like``'s device."""
    return backend_name_of(values) == be.name and be.device_of(values) == be.device_of(like)


def _check_columns(be, cols, dtype, width, where):
    """Raise the host path's error where a device column is outside ``[0, width)``: one read of the
    columns' extremes (an unsigned value above 2**63 - 1 reads back negative, as int64)."""
    if int(cols.shape[0]) == 0:
        return
    least, at_least, greatest, at_greatest = int_extremes(be, cols)
    if least < 0 and dtype_kind(dtype) == "u":
        raise ValueError(f"{where}: index[{at_least}]={least + 2 ** 64} is too large (at most 2**63 - 1)")
    if least < 0 or greatest >= width:
        j, value = (at_least, least) if least < 0 else (at_greatest, greatest)
        raise IndexError(f"{where}: index[{j}]={value} is out of range for input width {width}")
