"""Segment reductions of narrow rows with NumPy alone: chunks in data order, position-major scratch.

NumPy reduces fast only along long contiguous runs; a sequence of narrow rows
(16 floats) summed where it lies costs one inner-loop call per row, and
``ufunc.reduceat`` over axis 0 walks the data once per column. The kernel
here reads the data once, in address order:

1. the sequences are cut into *chunks* of consecutive sequences holding about
   ``_tuning.CHUNK_BYTES`` of rows (the scratch of a chunk stays in cache);
2. within a chunk, sequences fall into *length classes* (lengths within a
   factor ``_tuning.CLASS_RATIO``); a class of ``c`` sequences padded to its longest,
   ``L``, owns an ``(L, c, *row)`` position-major region of the scratch;
3. one ``put`` moves the chunk's rows (a contiguous, sequential read) to their
   slots, one more fills the padding slots with the ufunc's identity (0 for a
   sum, -inf for a max...), and one reduction over axis 0 per class gives
   ``c`` results from long contiguous inner loops;
4. a sequence of a chunk's size or more is reduced where it lies, viewed as
   ``(rows / k, k * row)`` so the inner loop is long, then folded.

The plan (slots, padding slots, classes) is cached per LoD; chunks are
independent, so large inputs share them among the threads of
``lodtensor.set_num_threads`` (``put`` and reductions release the GIL).
"""

import math

import numpy as np

from .._threads import get_num_threads, run_together
from . import _tuning
from ._util import _as_rows, _cached_plan, _scratch

__all__ = ["chunk_reduce", "identity_of"]

_INT64 = np.dtype(np.int64)


def identity_of(ufunc, dtype):
    """The value padding slots get: no effect on ``ufunc`` (None: not one of add, maximum, minimum)."""
    dtype = np.dtype(dtype)
    if ufunc is np.add:
        return dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(-np.inf if ufunc is np.maximum else np.inf)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(info.min if ufunc is np.maximum else info.max)
    return None


def _chunk_plan(offsets, chunk_rows):
    """The chunks of :func:`chunk_reduce` for chunks of ``chunk_rows`` rows.

    Returns ``(empty, tasks, slots, pads, order)``: ``empty`` the empty
    sequences; ``slots[r]`` the scratch slot (relative to its chunk) of row
    ``r`` of a short sequence; ``pads`` the padding slots, chunk after chunk;
    ``order`` the short sequences, chunk-major, class by class; ``tasks``
    holds ``("chunk", r0, r1, p0, p1, k0, k1, size, classes)`` (rows
    ``r0:r1``, pads ``p0:p1``, sequences ``order[k0:k1]``, ``size`` scratch
    rows, ``classes`` of ``(slot, length, count)``) and ``("long", j, start,
    length)`` for a sequence reduced where it lies.
    """
    lengths = np.diff(offsets)
    total = int(offsets[-1])
    empty = np.flatnonzero(lengths == 0)
    long_ids = np.flatnonzero(lengths >= chunk_rows)
    short = np.flatnonzero((lengths > 0) & (lengths < chunk_rows))
    tasks = [("long", int(j), int(offsets[j]), int(lengths[j])) for j in long_ids]
    slots = np.zeros(total, dtype=_INT64)
    if short.size == 0:
        return empty, tasks, slots, np.zeros(0, dtype=_INT64), np.zeros(0, dtype=_INT64)
    lens = lengths[short]
    chunk = offsets[short] // chunk_rows
    classes = np.floor(np.log(lens) / math.log(_tuning.CLASS_RATIO) + 1e-9).astype(_INT64)
    ncls = int(classes.max()) + 1
    key = chunk * ncls + (ncls - 1 - classes)  # chunk-major, longest class first
    sort = np.argsort(key, kind="stable")
    order = short[sort]
    key, lens, chunk = key[sort], lens[sort], chunk[sort]
    m = order.size
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # the first sequence of each class
    count = np.diff(np.r_[first, m])
    longest = np.maximum.reduceat(lens, first)
    size = count * longest
    cls_chunk = chunk[first]
    chunk_first = np.flatnonzero(np.r_[True, cls_chunk[1:] != cls_chunk[:-1]])  # first class of each chunk
    ends = np.cumsum(size)
    starts = ends - size
    base_of_chunk = np.repeat(starts[chunk_first], np.diff(np.r_[chunk_first, first.size]))
    slot0 = starts - base_of_chunk  # a class's region within its chunk's scratch
    cls = np.repeat(np.arange(first.size), count)  # the class of each sorted sequence
    rank = np.arange(m) - first[cls]
    base = slot0[cls] + rank  # slot of position 0; position p is base + p * count
    stride = count[cls]
    # slots of every row of a short sequence, position p of sequence order[k] at base[k] + p * stride[k]
    seq_rows = np.repeat(np.arange(m), lens)
    row_start = np.repeat(offsets[order], lens)
    rows = row_start + (np.arange(seq_rows.size) - np.repeat(np.cumsum(lens) - lens, lens))
    slots[rows] = base[seq_rows] + (rows - row_start) * stride[seq_rows]
    # padding: positions lens[k]..longest-1 of each sequence
    pad_count = longest[cls] - lens
    pad_seq = np.repeat(np.arange(m), pad_count)
    pad_pos = np.repeat(lens, pad_count) + (np.arange(pad_seq.size) - np.repeat(np.cumsum(pad_count) - pad_count,
                                                                                 pad_count))
    pads = base[pad_seq] + pad_pos * stride[pad_seq]
    pad_ends = np.cumsum(pad_count)
    # per chunk: row range, pad range, sequence range, scratch size and its classes
    seq_first = first[chunk_first]
    seq_end = np.r_[seq_first[1:], m]
    cls_end = np.r_[chunk_first[1:], first.size]
    chunk_sizes = ends[cls_end - 1] - starts[chunk_first]
    k_first = seq_first.tolist()
    k_end = seq_end.tolist()
    row_lo = offsets[order].copy()
    row_hi = row_lo + lens
    for c in range(chunk_first.size):
        k0, k1 = k_first[c], k_end[c]
        r0, r1 = int(row_lo[k0:k1].min()), int(row_hi[k0:k1].max())
        p0 = int(pad_ends[k0 - 1]) if k0 else 0
        p1 = int(pad_ends[k1 - 1])
        members = range(int(chunk_first[c]), int(cls_end[c]))
        tasks.append(("chunk", r0, r1, p0, p1, k0, k1, int(chunk_sizes[c]),
                      [(int(slot0[g]), int(longest[g]), int(count[g])) for g in members]))
    return empty, tasks, slots, pads, order


def _reduce_long(ufunc, rows, out):
    """``ufunc`` over the rows of one long sequence ``rows`` (2-d), into ``out`` (1-d)."""
    length, width = rows.shape
    k = max(1, _tuning.FOLD_ELEMENTS // max(width, 1))
    q = length // k
    if k == 1 or q == 0:
        ufunc.reduce(rows, axis=0, out=out)
        return
    folded = ufunc.reduce(rows[: q * k].reshape(q, k * width), axis=0)
    ufunc.reduce(folded.reshape(k, width), axis=0, out=out)
    if q * k < length:
        ufunc(out, ufunc.reduce(rows[q * k :], axis=0), out=out)


def chunk_reduce(ufunc, data, offsets, fill, owner=None):
    """``ufunc`` (add, maximum, minimum) over the rows of each sequence; empty sequences get ``fill``.

    ``data`` is C-contiguous with at least one row; see the module docstring.
    """
    n = offsets.size - 1
    row_shape = data.shape[1:]
    width = int(np.prod(row_shape, dtype=np.int64))
    row_bytes = max(1, data.dtype.itemsize * width)
    chunk_rows = max(2, _tuning.CHUNK_BYTES // row_bytes)
    empty, tasks, slots, pads, order = _cached_plan(
        offsets, ("chunks", chunk_rows), lambda o: _chunk_plan(o, chunk_rows), owner
    )
    out = np.empty((n,) + row_shape, dtype=data.dtype)
    if empty.size:
        out[empty] = fill
    flat = data.reshape(data.shape[0], width)
    out2 = out.reshape(n, width)
    src, dst = _as_rows(flat), _as_rows(out2)
    pad_row = _as_rows(np.full((1, width), identity_of(ufunc, data.dtype), dtype=data.dtype))
    biggest = max((t[7] for t in tasks if t[0] == "chunk"), default=0)
    most = max((t[6] - t[5] for t in tasks if t[0] == "chunk"), default=0)
    queue = iter(tasks)  # shared: each thread takes the next chunk when free

    def work():
        buf = _scratch("chunk_rows", (biggest, width), data.dtype)
        acc = _scratch("chunk_results", (most, width), data.dtype)
        buf_rows, acc_rows = _as_rows(buf), _as_rows(acc)
        for task in queue:
            if task[0] == "long":
                _, j, start, length = task
                _reduce_long(ufunc, flat[start : start + length], out2[j])
                continue
            _, r0, r1, p0, p1, k0, k1, _size, classes = task
            buf_rows.put(slots[r0:r1], src[r0:r1], mode="clip")  # slots are in range by construction
            if p1 > p0:
                buf_rows.put(pads[p0:p1], pad_row, mode="clip")
            k = 0
            for slot, length, count in classes:
                ufunc.reduce(buf[slot : slot + length * count].reshape(length, count * width), axis=0,
                             out=acc[k : k + count].reshape(-1))
                k += count
            dst.put(order[k0:k1], acc_rows[: k1 - k0], mode="clip")

    threads = min(get_num_threads(), 4) if data.nbytes >= _tuning.CHUNK_PARALLEL_BYTES else 1
    threads = min(threads, len(tasks))
    run_together(work, [work] * (threads - 1))
    return out
