"""Segment sums of narrow float rows with NumPy alone: block pieces by one batched product.

The chunk kernel (:mod:`._chunks`) moves every row into a scratch before it
reduces; here most rows are read once, where they lie:

1. the rows are cut into blocks of ``k`` rows on a global grid; a block is cut
   into two *pieces*: its rows before its first sequence boundary and its rows
   from its last boundary on (a block without a boundary is one piece);
2. one ``np.matmul`` of a 0/1 matrix ``(blocks, 2, k)`` with the
   ``(blocks, k, width)`` view of the data gives the piece sums: a single
   pass over the data;
3. the pieces are in row order, so each sequence owns a contiguous run of
   them (empty pieces are zeros and harmless in a sum), and the chunk kernel
   reduces the ``2 * blocks`` piece rows per sequence;
4. the rows of sequences that lie strictly between the first and the last
   boundary of one block, and the rows past the last full block, are
   gathered with one ``take`` and reduced by the chunk kernel too; one add
   combines the two results.

Sums only (NumPy has no max-plus product), of float32 and float64 rows; the
plan (the 0/1 matrix, piece offsets, gathered rows) is cached per LoD.
"""

import numpy as np

from .._threads import get_num_threads, run_together
from . import _tuning
from ._chunks import chunk_reduce
from ._util import _cached_plan

__all__ = ["pieces_fits", "pieces_sum", "pieces_reduce", "_pieces_plan"]

_INT64 = np.dtype(np.int64)


def _pieces_plan(offsets, k, dtype):
    """``(blocks, matrix, piece_offsets, rows, row_offsets)`` for blocks of ``k`` rows.

    ``matrix[b, 0]`` selects the rows of block ``b`` before its first boundary
    (all of them when it has none), ``matrix[b, 1]`` those from its last
    boundary on; sequence ``j`` owns pieces ``piece_offsets[j]:piece_offsets[j
    + 1]`` of the ``2 * blocks`` and gathered rows ``rows[row_offsets[j]:
    row_offsets[j + 1]]``.
    """
    offsets = np.asarray(offsets, dtype=_INT64)
    n = offsets.size - 1
    total = int(offsets[-1])
    blocks = total // k
    grid_end = blocks * k
    s, e = offsets[:-1], offsets[1:]
    # the boundaries inside blocks: starts of non-empty sequences off the block starts
    cut = (e > s) & (s % k != 0) & (s < grid_end)
    pos, blk = s[cut] % k, s[cut] // k
    first = np.full(blocks, k, dtype=_INT64)
    last = np.full(blocks, -1, dtype=_INT64)
    np.minimum.at(first, blk, pos)
    np.maximum.at(last, blk, pos)
    last[last < 0] = k  # no boundary: the second piece is empty
    at = np.arange(k, dtype=_INT64)
    matrix = np.empty((blocks, 2, k), dtype=dtype)
    matrix[:, 0] = at < first[:, None]
    matrix[:, 1] = at >= last[:, None]
    # piece start of each sequence: 2b at a block start, 2b + 1 at its block's last boundary;
    # an inner sequence (strictly inside one block, after its first boundary, before its last),
    # an empty one and one past the grid take the piece start of the next sequence that has one
    b = s // k
    at_start = (s % k == 0) & (s < grid_end) & (e > s)
    at_last = cut.copy()
    if blocks:
        at_last &= s % k == last[np.minimum(b, blocks - 1)]
    starts = np.where(at_start, 2 * b, np.where(at_last, 2 * b + 1, 2 * blocks))
    starts = np.minimum.accumulate(starts[::-1])[::-1]
    piece_offsets = np.r_[starts, 2 * blocks].astype(_INT64)
    piece_offsets[0] = 0
    # gathered rows: all rows of inner sequences, and rows at or past the grid's end
    inner = cut & ~at_last
    lo = np.where(inner, s, np.maximum(s, grid_end))
    hi = np.where(inner, e, np.maximum(e, grid_end))
    count = hi - lo
    row_offsets = np.r_[0, np.cumsum(count)].astype(_INT64)
    seq = np.repeat(np.arange(n), count)
    rows = lo[seq] + (np.arange(seq.size, dtype=_INT64) - row_offsets[seq])
    for array in (matrix, piece_offsets, rows, row_offsets):
        array.flags.writeable = False
    return blocks, matrix, piece_offsets, rows, row_offsets


def pieces_sum(data, offsets, owner=None):
    """Sum over the rows of each sequence of ``data`` (C-contiguous float32/float64, 2-d).

    >>> data = np.arange(40, dtype=np.float32).reshape(20, 2)
    >>> pieces_sum(data, np.array([0, 3, 3, 19, 20])).tolist()
    [[6.0, 9.0], [0.0, 0.0], [336.0, 352.0], [38.0, 39.0]]
    """
    n = offsets.size - 1
    k = _tuning.PIECE_ROWS
    width = data.shape[1]
    blocks, matrix, piece_offsets, rows, row_offsets = _cached_plan(
        offsets, ("pieces", k, data.dtype.str), lambda o: _pieces_plan(o, k, data.dtype), owner
    )
    pieces = np.empty((blocks, 2, width), dtype=data.dtype)
    grid = data[: blocks * k].reshape(blocks, k, width)
    threads = min(get_num_threads(), 4) if data.nbytes >= _tuning.PIECES_PARALLEL_BYTES else 1
    if threads > 1 and blocks >= threads:
        cuts = np.linspace(0, blocks, threads + 1).astype(np.int64).tolist()

        def part(a, b):
            with np.errstate(invalid="ignore", over="ignore"):  # non-finite data: see below
                np.matmul(matrix[a:b], grid[a:b], out=pieces[a:b])

        run_together(lambda: part(cuts[0], cuts[1]),
                     [lambda t=t: part(cuts[t], cuts[t + 1]) for t in range(1, threads)])
    elif blocks:
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite data: see below
            np.matmul(matrix, grid, out=pieces)
    if blocks:
        out = chunk_reduce(np.add, pieces.reshape(2 * blocks, width), piece_offsets, 0)
    else:
        out = np.zeros((n, width), dtype=data.dtype)
    if rows.size:
        with np.errstate(invalid="ignore"):  # inf + -inf: see below
            np.add(out, chunk_reduce(np.add, data.take(rows, axis=0), row_offsets, 0), out=out)
    if not np.isfinite(out).all():
        # an inf or NaN row times 0 makes NaN in a piece of another sequence: such data (and sums
        # that overflow) go the chunk kernel's way, which adds each row to its own sequence only
        return chunk_reduce(np.add, data, offsets, 0, owner)
    return out


def pieces_fits(ufunc, data):
    """Whether :func:`pieces_reduce` serves: a sum of float32/float64 rows of 32-64 bytes and at
    least two blocks of rows."""
    width = int(np.prod(data.shape[1:], dtype=np.int64))
    row_bytes = width * data.dtype.itemsize
    low, high = _tuning.PIECES_ROW_BYTES
    return (ufunc is np.add and data.dtype.char in "fd" and low <= row_bytes <= high
            and data.shape[0] >= 2 * _tuning.PIECE_ROWS)


def pieces_reduce(ufunc, data, offsets, fill, owner=None):
    """:func:`pieces_sum` where it applies (:func:`pieces_fits`), with ``fill`` for empty
    sequences; else None."""
    if not pieces_fits(ufunc, data):
        return None
    width = int(np.prod(data.shape[1:], dtype=np.int64))
    flat = np.ascontiguousarray(data).reshape(data.shape[0], width)
    out = pieces_sum(flat, offsets, owner)
    if fill != 0:
        out[offsets[1:] == offsets[:-1]] = fill
    return out.reshape((offsets.size - 1,) + data.shape[1:])
