"""Helpers shared by the NumPy kernels: cached per-LoD plans, per-thread scratch, row views."""

import math
import threading
import weakref

import numpy as np

from ..._cache import ByteLRU, nbytes_of
from ...errors import ShapeError
from . import _tuning

__all__ = ["_PLANS", "_cached_plan", "_scratch", "_as_rows", "broadcast_row", "truncation"]


# -- cached plans -------------------------------------------------------------------------------
# (id(offsets or owner), key) -> (weak reference, snapshot of writable offsets or None, plan);
# bounded by bytes, least recently used first out, and an entry goes when its array does.
_PLANS = ByteLRU(_tuning.PLAN_CACHE_BYTES)


def _cached_plan(offsets, key, build, owner=None):
    """``build(offsets)``, cached for ``offsets`` (or for ``owner``, the object they are a view of).

    A LoD's offset arrays are frozen and live as long as it does, so a plan
    made for one serves every later call on the same LoD. A writable array
    may change in place: its plan is reused only while its values are those
    the plan was made from (one comparison, far cheaper than a plan). It is
    made from a private copy, the one kept to compare with: another thread
    writing the array meanwhile cannot leave a plan kept for values it was
    not made from.
    """
    holder = offsets if owner is None else owner
    slot = (id(holder), key)
    entry = _PLANS.get(slot)
    if entry is not None and entry[0]() is holder:
        if entry[1] is None or np.array_equal(entry[1], offsets):
            return entry[2]
    frozen = owner is None and not offsets.flags.writeable
    snapshot = None if frozen else offsets.copy()
    plan = build(offsets if frozen else snapshot)
    # _PLANS bound now: at interpreter exit this module's globals may be None when the holder goes
    ref = weakref.ref(holder, lambda _ref, slot=slot, plans=_PLANS: plans.pop(slot))
    _PLANS.put(slot, (ref, snapshot, plan), nbytes_of(plan) + nbytes_of(snapshot))
    return plan


# -- per-thread scratch buffers -----------------------------------------------------------------
_SCRATCH = threading.local()


def _scratch(name, shape, dtype):
    """An uninitialised array for this thread's own use, reused between calls.

    Fresh memory costs page faults on first touch (about 0.2 ms per MiB on the
    2-core benchmark machine, as much as the work it holds); blocks of a
    kernel reuse one buffer per thread instead.
    """
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * math.prod(shape)  # Python ints: exact, and no NumPy call per block
    store = getattr(_SCRATCH, name, None)
    if store is None or store.nbytes < nbytes:
        store = np.empty(max(nbytes, 1), dtype=np.uint8)
        if nbytes <= _tuning.SCRATCH_KEPT_BYTES:
            setattr(_SCRATCH, name, store)
    return store[:nbytes].view(dtype).reshape(shape)


_MAX_ROW_BYTES = 2**31 - 1  # NumPy's largest void item


def _as_rows(a):
    """View a C-contiguous array as a 1-D array of row items (no copy)."""
    if a.ndim == 1 or a.dtype.hasobject:
        return a
    row_bytes = a.dtype.itemsize * math.prod(a.shape[1:])  # Python ints: no overflow, no NumPy call
    if row_bytes == 0:
        return None
    if a.shape[0] == 0:  # no rows to move, however wide (a void item holds at most 2 GiB)
        return np.empty(0, dtype=np.uint8)
    if row_bytes > _MAX_ROW_BYTES:
        raise ValueError(
            f"rows of shape {a.shape[1:]} ({row_bytes} bytes each) are wider than the kernels move as one item (2 GiB)"
        )
    row_items = row_bytes // a.dtype.itemsize
    return a.reshape(a.shape[0], row_items).view(np.dtype((np.void, row_bytes))).reshape(a.shape[0])


def broadcast_row(out, row, ufunc=None):
    """``out[i] = row`` (``ufunc`` None) or ``out[i] = ufunc(out[i], row)`` for every row of the
    C-contiguous 2-d ``out``: the same values as NumPy's broadcast, narrow rows done as wide ones.

    NumPy's broadcast runs its inner loop once per row, so ``out += bias`` over 16 columns cost
    344 us for 74K rows (bench/cpu.py's ``linear, docs D=16``), more than the GEMM before it. Here
    the row is tiled to about ``_tuning.BROADCAST_ROW_VALUES`` values and ``out`` viewed as rows of
    that width (the last few rows apart): 16 us.

    >>> out = np.zeros((7, 3)); broadcast_row(out, np.array([1.0, 2.0, 3.0]), np.add)
    >>> out[-1].tolist(), bool((out == [1, 2, 3]).all())
    ([1.0, 2.0, 3.0], True)
    """
    def apply(target, values):
        if ufunc is None:
            np.copyto(target, values)
        else:
            ufunc(target, values, out=target)

    n, m = out.shape
    reps = _tuning.BROADCAST_ROW_VALUES // m if m else 0
    rest = out
    if reps >= 2 and n >= 2 * reps and out.flags.c_contiguous:
        head = n - n % reps
        apply(out[:head].reshape(head // reps, reps * m), np.tile(row, reps))
        rest = out[head:]
    apply(rest, row)


def truncation(offsets, maxlen):
    """``(rows, offsets)`` that keep the first ``maxlen`` rows of each sequence of host ``offsets``:
    the row numbers kept (int64) and the offsets of the kept rows; None when no sequence is longer.

    >>> rows, kept = truncation(np.array([0, 3, 4, 9]), 2)
    >>> rows.tolist(), kept.tolist()
    ([0, 1, 3, 4, 5], [0, 2, 3, 5])
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if not lengths.size or int(lengths.max()) <= maxlen:
        return None
    keep = np.minimum(lengths, maxlen)
    kept = np.concatenate([np.zeros(1, np.int64), np.cumsum(keep)])
    rows = np.arange(int(kept[-1]), dtype=np.int64) + np.repeat(offsets[:-1] - kept[:-1], keep)
    return rows, kept


def _longest_fits(lengths, maxlen):
    """A ShapeError where a sequence is longer than ``maxlen`` (its rows past it were never padded)."""
    if lengths.size and int(lengths.max()) > maxlen:
        longest = int(lengths.max())
        raise ShapeError(f"unpad: padded holds {maxlen} rows per sequence (padded.shape[1]), fewer than "
                         f"the longest sequence of offsets ({longest} rows); expected padded.shape[1] >= {longest}")


def pad_index(offsets, maxlen, *, unpad=False):
    """Flat position (sequence * maxlen + position) of every row; for ``unpad``, a ShapeError where a
    sequence is longer than ``maxlen``.

    >>> pad_index(np.array([0, 2, 3]), 3).tolist()
    [0, 1, 3]
    """
    lengths = np.diff(offsets)
    if unpad:
        _longest_fits(lengths, maxlen)
    shift = np.arange(lengths.size, dtype=np.int64) * maxlen - offsets[:-1]
    return np.arange(int(offsets[-1]), dtype=np.int64) + np.repeat(shift, lengths)


def unpad_mask(offsets, maxlen):
    """``[n, maxlen]`` bool: which padded slots hold rows (the ShapeError of :func:`pad_index` first).

    >>> unpad_mask(np.array([0, 2, 3]), 3).astype(int).tolist()
    [[1, 1, 0], [1, 0, 0]]
    """
    lengths = np.diff(offsets)
    _longest_fits(lengths, maxlen)
    return np.arange(maxlen) < lengths[:, None]
