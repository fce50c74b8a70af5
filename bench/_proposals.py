"""Prototypes of proposed lodtensor kernels, timed beside the real ones.

Nothing here changes lodtensor: these are scratch copies of what the
benchmark report proposes for ``lodtensor/_nested_list.py``,
``lodtensor/backend/numpy.py`` / ``lodtensor/_dense.py`` and
``lodtensor/tensor.py``. They only appear in the tables with
``python bench/run.py --proposals`` (or ``BENCH_PROPOSALS=1``), as rows named
``[proposed] ...``. They use lodtensor internals (``LoD._cache``, ``_wrap``)
exactly as the core versions would; delete a prototype once the core adopts it.
"""

import array
import collections
import functools
import operator
import os

import numpy as np

_INT64 = np.dtype(np.int64)
_FLOAT64 = np.dtype(np.float64)


def enabled():
    return os.environ.get("BENCH_PROPOSALS", "") not in ("", "0")


# -- 1. construction: flatten without per-leaf Python type checks --------------------------
_NUMBER_TYPES = frozenset({int, float})


def _fast_leaves(lists, first, dtype):
    """The scalars in ``lists`` (a list of lists) as one 1-D array, or None for the careful path.

    Ints (the token-id case): ``array.array('q').fromlist`` converts in C and
    raises TypeError on anything that is not an integer (a float, list, str,
    None) and OverflowError past int64, so no per-leaf ``set(map(type, ...))``
    pass is needed (today's code runs it twice: once in the level loop, once
    in ``_leaves_to_array``). Floats: one type pass (not two), then
    ``np.fromiter`` as today. On any error the careful path runs and produces
    today's result or error message.
    """
    if first is int and (dtype is None or dtype == _INT64):
        buf = array.array("q")
        try:
            collections.deque(map(buf.fromlist, lists), 0)  # C loop over the sublists, no flat list
        except (TypeError, ValueError, OverflowError):
            return None
        return np.frombuffer(buf, dtype=_INT64)
    if first is float or first is int:
        if dtype is None:
            dtype = _FLOAT64
        elif dtype.kind not in "fc":
            return None
        flat = functools.reduce(operator.iadd, lists, [])
        types = set(map(type, flat))
        if not types <= _NUMBER_TYPES or (dtype is _FLOAT64 and types == {int}):
            return None
        return np.fromiter(flat, dtype=dtype, count=len(flat))
    return None


def proposed_flatten(nested, lod_level=None, dtype=None, name="nested"):
    from lodtensor._nested_list import flatten as careful_flatten  # noqa: PLC0415

    if lod_level is not None or type(nested) is not list or not nested:
        return careful_flatten(nested, lod_level, dtype, name)
    if dtype is not None:
        dtype = np.dtype(dtype)
    items = nested
    lengths = []
    while True:
        if set(map(type, items)) != {list}:
            break
        lens = np.fromiter(map(len, items), dtype=_INT64, count=len(items))
        lengths.append(lens)
        probe = next(filter(None, items), None)  # first non-empty sublist
        if probe is None:
            break
        first = type(probe[0])
        if first is not list:
            arr = _fast_leaves(items, first, dtype)
            if arr is not None:
                return arr, lengths
            break
        items = functools.reduce(operator.iadd, items, [])
    return careful_flatten(nested, lod_level, dtype, name)


def proposed_from_nested_list(nested, dtype=None):
    from lodtensor.lod import LoD  # noqa: PLC0415
    from lodtensor.place import CPUPlace  # noqa: PLC0415
    from lodtensor.tensor import _wrap  # noqa: PLC0415

    rows, lengths = proposed_flatten(nested, dtype=dtype)
    return _wrap(rows, LoD.from_lengths(lengths, validate=False), CPUPlace())


# -- 2. padding: cached index, zero only the tails -----------------------------------------
def _rows(a):
    n = a.shape[0]
    row_bytes = a.dtype.itemsize * (a.size // n if n else 0)
    return a.reshape(n, -1).view(np.dtype((np.void, row_bytes))).reshape(n)


def _pad_index(offsets, maxlen):
    lengths = np.diff(offsets)
    shift = np.arange(lengths.size, dtype=_INT64) * maxlen - offsets[:-1]
    return np.arange(int(offsets[-1]), dtype=_INT64) + np.repeat(shift, lengths)


def _cached(lod, key, make):
    cache = _cache_of(lod)
    out = cache.get(key)
    if out is None:
        out = make()
        if isinstance(out, np.ndarray):
            out.setflags(write=False)
        cache[key] = out
    return out


def _length_groups(lengths):
    """Sequence ids grouped by length: [(length, ids), ...], one group per distinct length."""
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    cuts = np.flatnonzero(np.diff(sorted_lengths)) + 1
    bounds = [0, *cuts.tolist(), sorted_lengths.size]
    return [(int(sorted_lengths[a]), order[a:b]) for a, b in zip(bounds, bounds[1:])]


def zero_tails(lod, out, lengths, maxlen, level=-1, cache=True):
    """``out[i, lengths[i]:] = 0`` for every sequence, never touching the data part.

    One fancy-index assignment per distinct length on a ``(n, maxlen * row_bytes)``
    uint8 view: ``u8[ids, L * row_bytes:] = 0`` writes each tail as one contiguous
    byte block (a memset-like inner loop; on float32 rows the same assignment
    runs a 4-byte loop per row and is 1.1-3x slower). The loop is over distinct
    lengths (<= maxlen), not sequences.
    """
    n = lengths.size
    row_bytes = out.dtype.itemsize * int(np.prod(out.shape[2:], dtype=np.int64))
    groups = _cached(lod, ("length_groups", level), lambda: _length_groups(lengths)) if cache \
        else _length_groups(lengths)
    u8 = out.reshape(n, maxlen * row_bytes // out.dtype.itemsize).view(np.uint8)
    for length, ids in groups:
        if length < maxlen:
            u8[ids, length * row_bytes :] = 0
    return out


_STATE = {}


def _pool():
    """One lazily started worker thread (NumPy's put/take/fill release the GIL)."""
    pool = _STATE.get("pool")
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        pool = _STATE["pool"] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lodtensor-pad")
    return pool


def _parts(offsets, parts):
    """Split the sequences into ``parts`` runs of about equal row counts: [(seq_lo, seq_hi), ...]."""
    total = int(offsets[-1])
    cuts = np.searchsorted(offsets, [total * k // parts for k in range(1, parts)]).tolist()
    bounds = [0, *cuts, offsets.size - 1]
    return list(zip(bounds, bounds[1:]))


def _fill_part(out, index, src, offsets, lengths, maxlen, lo, hi, groups):
    """Rows and tails of sequences [lo, hi): put the rows, zero the tails (disjoint bytes per part)."""
    n = lengths.size
    r0, r1 = int(offsets[lo]), int(offsets[hi])
    rows_out = _rows(out.reshape((n * maxlen,) + out.shape[2:]))
    rows_out.put(index[r0:r1], src[r0:r1], mode="clip")
    row_bytes = out.dtype.itemsize * int(np.prod(out.shape[2:], dtype=np.int64))
    u8 = out.reshape(n, -1).view(np.uint8)
    for length, ids in groups:
        if length < maxlen:
            u8[ids, length * row_bytes :] = 0


def proposed_to_padded(t, out=None, cache=True, threads=1):
    """``t.to_padded(out=out)`` for pad_value=0 on the last level, with the proposed kernel.

    out=None: ``np.zeros`` (the kernel zeroes pages on first touch) + one put.
    out given: put the rows, then zero only the tails; with ``threads=2`` the
    sequences are split in two runs of equal row counts and each thread does
    put + tails for its run (disjoint bytes; put and the fancy assignment
    release the GIL).
    """
    lod = t.lod
    level = lod.num_levels - 1
    data = t.data
    offsets = lod.absolute_offsets(level)
    lengths = lod.lengths(level)
    maxlen = int(lengths.max())
    n = lengths.size
    shape = (n, maxlen) + data.shape[1:]
    index = _cached(lod, ("pad_index", level, maxlen), lambda: _pad_index(offsets, maxlen)) if cache \
        else _pad_index(offsets, maxlen)
    src = _rows(data)
    if out is None:
        out = np.zeros(shape, dtype=data.dtype)
        _rows(out.reshape((n * maxlen,) + data.shape[1:])).put(index, src, mode="clip")
        return out, lengths

    def make_parts():
        parts = []
        for lo, hi in _parts(offsets, threads):
            parts.append((lo, hi, [(length, ids + lo) for length, ids in _length_groups(lengths[lo:hi])]))
        return parts

    parts = _cached(lod, ("pad_parts", level, threads), make_parts) if cache else make_parts()
    futures = [_pool().submit(_fill_part, out, index, src, offsets, lengths, maxlen, lo, hi, groups)
               for lo, hi, groups in parts[1:]]
    lo, hi, groups = parts[0]
    _fill_part(out, index, src, offsets, lengths, maxlen, lo, hi, groups)
    for f in futures:
        f.result()
    return out, lengths


def proposed_from_padded(padded, lengths, threads=1):
    """``from_padded`` with the gather split over ``threads`` (take into a preallocated result)."""
    from lodtensor.lod import LoD  # noqa: PLC0415
    from lodtensor.place import CPUPlace  # noqa: PLC0415
    from lodtensor.tensor import _wrap  # noqa: PLC0415

    lengths = np.asarray(lengths, dtype=_INT64)
    n, maxlen = padded.shape[:2]
    lod = LoD.from_lengths([lengths], validate=False)
    offsets = lod.offsets(0)
    index = _pad_index(offsets, maxlen)
    rows = int(offsets[-1])
    data = np.empty((rows,) + padded.shape[2:], dtype=padded.dtype)
    src = _rows(np.ascontiguousarray(padded).reshape((n * maxlen,) + padded.shape[2:]))
    dst = _rows(data)
    cuts = [rows * k // threads for k in range(threads + 1)]
    futures = [_pool().submit(src.take, index[a:b], out=dst[a:b], mode="clip")
               for a, b in zip(cuts[1:-1], cuts[2:])]
    src.take(index[: cuts[1]], out=dst[: cuts[1]], mode="clip")
    for f in futures:
        f.result()
    return _wrap(data, lod, CPUPlace())


def proposed_memset_to_padded(t, out):
    """Variant: keep fill-then-put but zero with memset (a uint8 view) instead of a typed fill."""
    lod = t.lod
    data = t.data
    offsets = lod.absolute_offsets(-1)
    lengths = lod.lengths(-1)
    n, maxlen = out.shape[:2]
    out.reshape(-1).view(np.uint8).fill(0)
    _rows(out.reshape((n * maxlen,) + data.shape[1:])).put(_pad_index(offsets, maxlen), _rows(data))
    return out, lengths


# -- 3. indexing: cheaper t[i], split cached on the LoD ------------------------------------
def _cache_of(lod):
    """The LoD's cache dict (``LoD._cached()`` where the LoD creates it lazily)."""
    make = getattr(lod, "_cached", None)
    return make() if make is not None else lod._cache


def _split_cached(lod):
    """(sublods or None, row offsets as a list) of every top-level sequence, cached on the LoD."""
    cache = _cache_of(lod)
    hit = cache.get("split")
    if hit is None:
        if len(lod._levels) == 1:
            hit = (None, lod._levels[0].tolist())
        else:
            sublods, rows = lod.split()
            hit = (sublods, rows.tolist())
        cache["split"] = hit
    return hit


def proposed_view(t):
    """``t`` re-classed as a LoDTensor subclass with the proposed ``__getitem__``/``unbind``/``__iter__``.

    Same data and LoD objects (no copy); the subclass adds no slots, so
    ``__class__`` assignment is allowed and ``t2[i]`` goes through real dispatch.
    """
    from lodtensor.tensor import _EMPTY_LOD, LoDTensor  # noqa: PLC0415

    if "class" not in _STATE:
        new = object.__new__

        class ProposedLoDTensor(LoDTensor):
            __slots__ = ()

            def __getitem__(self, index):
                if type(index) is int and self._fits:
                    cache = self._lod._cache
                    hit = cache.get("split") if cache is not None else None
                    if hit is None:
                        hit = _split_cached(self._lod)
                    sublods, rows = hit
                    if index < 0:
                        index += len(rows) - 1
                    if 0 <= index < len(rows) - 1:
                        out = new(LoDTensor)
                        out._data = self._data[rows[index] : rows[index + 1]]
                        out._lod = _EMPTY_LOD if sublods is None else sublods[index]
                        out._where = self._where
                        out._fits = True
                        return out
                return LoDTensor.__getitem__(self, index)

            def unbind(self):
                if not self._fits or not self._lod._levels:
                    return LoDTensor.unbind(self)
                sublods, rows = _split_cached(self._lod)
                data = self._data
                place = self._where
                out = []
                append = out.append
                if sublods is None:
                    for a, b in zip(rows, rows[1:]):
                        t = new(LoDTensor)
                        t._data, t._lod, t._where, t._fits = data[a:b], _EMPTY_LOD, place, True
                        append(t)
                else:
                    for sub, a, b in zip(sublods, rows, rows[1:]):
                        t = new(LoDTensor)
                        t._data, t._lod, t._where, t._fits = data[a:b], sub, place, True
                        append(t)
                return out

            def __iter__(self):
                return iter(self.unbind())

        _STATE["class"] = ProposedLoDTensor
    from lodtensor.tensor import _rebuild  # noqa: PLC0415

    return _rebuild(_STATE["class"], t._data, t._lod, t._where, t._fits)
