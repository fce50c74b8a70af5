"""A bounded pool of large output buffers for lodtensor's NumPy kernels.

Why: a fresh array of more than a few MiB is a fresh ``mmap`` from the C
allocator, and the kernel zeroes every page of it on first touch. For a
memory-bound kernel (``relu``, unpadding) those page faults cost as much as
the work itself: on the 2-core benchmark VM a fresh ``np.maximum(x, 0)`` of
173 MB takes 20 ms against 10 ms into a buffer written before. TensorFlow's
and torch's allocators keep the memory they freed; this pool does the same
for the large outputs of the NumPy backend (elementwise ufuncs, unpadding,
padding, softmax, ``linear``).

How: :func:`empty` hands out an ordinary ``np.ndarray`` whose ``.base`` is a
private lease object over one raw block. Every view, slice, ``np.asarray``,
memoryview, DLPack capsule or torch tensor of the array keeps the array (and
so the lease) alive, since NumPy stops collapsing ``.base`` chains at the
lease's type; when the lease dies, its block goes back to the pool instead of
to the C allocator. A block is handed out again only after that, so a buffer
is never reused while anything still refers to it (also not a block whose
owner someone reached by walking ``.base`` past the lease and kept). Handed-out
memory is uninitialised, as from ``np.empty``. Unlike ``np.empty``'s arrays,
these do not own their data (``arr.resize`` raises), and a raw address
(``arr.ctypes.data``) kept after the array dies may see a later output.

Bound: the idle blocks kept hold at most ``get_buffer_pool()`` bytes
(default: 256 MiB, or 1/16 of the machine's memory if that is less); blocks
beyond it are freed at once (least recently returned first), and only
outputs of 16 MiB or more are pooled. ``LODTENSOR_BUFFER_POOL`` (bytes,
with an optional ``K``/``M``/``G`` suffix; ``0`` or ``off`` turns the pool
off) sets the bound at import; :func:`set_buffer_pool` changes it at run
time and :func:`trim_buffer_pool` frees every idle block. Thread safe; a
forked child starts with an empty pool.

>>> from lodtensor.backend import buffer_pool_info, set_buffer_pool
>>> set_buffer_pool("256M")
>>> a = empty((4096, 4096), np.float32)      # 64 MiB: pooled
>>> a.shape, a.dtype, buffer_pool_info()["leased_bytes"] >= a.nbytes
((4096, 4096), dtype('float32'), True)
>>> del a                                     # the block goes back to the pool
>>> buffer_pool_info()["idle_bytes"] >= 64 << 20
True
>>> trim_buffer_pool(); buffer_pool_info()["idle_bytes"]
0
>>> set_buffer_pool(None)                     # back to LODTENSOR_BUFFER_POOL or the default
"""

import collections
import math
import os
import sys
import threading

import numpy as np

from . import _tuning

__all__ = ["empty", "pools", "get_buffer_pool", "set_buffer_pool", "trim_buffer_pool", "buffer_pool_info"]

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class _Block(np.ndarray):
    """A raw uint8 block (a subclass, so that views of a lease never collapse past the lease)."""


class _Lease(np.ndarray):
    """The ``.base`` of one handed-out array: gives its block back when it dies."""

    def __del__(self):
        block = self.__dict__.pop("_pool_block", None)
        if block is not None and _give_back is not None:  # None at interpreter shutdown
            _give_back(block)


def _parse(value, where):
    text = str(value).strip().upper().removesuffix("B").removesuffix("I")
    if text in ("OFF", "NONE", "FALSE", "NO"):
        return 0
    number, unit = text, ""
    if text and text[-1] in _UNITS:
        number, unit = text[:-1], text[-1]
    try:
        result = int(float(number) * _UNITS[unit])
    except (ValueError, OverflowError):  # "abc", "nan"; "inf", "1e400"
        raise ValueError(
            f"{where} must be a size in bytes (e.g. 268435456, 256M, 1G) or 0/off, got {value!r}"
        ) from None
    if result < 0:
        raise ValueError(f"{where} must be >= 0 bytes, got {value!r}")
    return result


def _default_bytes():
    value = os.environ.get("LODTENSOR_BUFFER_POOL")
    if value:
        return _parse(value, "LODTENSOR_BUFFER_POOL")
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        ram = 0
    return min(_tuning.POOL_DEFAULT_BYTES, ram // 16) if ram > 0 else _tuning.POOL_DEFAULT_BYTES


_lock = threading.Lock()
_state = {"limit": None, "idle_bytes": 0, "leased_bytes": 0, "hits": 0, "misses": 0}
_idle = []  # idle blocks, least recently returned first
_pending = collections.deque()  # blocks given back while the lock was held (drained by its holder)
_probe = [object()]
_IDLE_REFS = sys.getrefcount(_probe[0])  # references to an idle block held by the pool alone (the list, the call)
del _probe


def get_buffer_pool():
    """Bytes of idle blocks the pool may keep (0: the pool is off).

    >>> set_buffer_pool("1G"); get_buffer_pool()
    1073741824
    >>> set_buffer_pool(None)  # back to LODTENSOR_BUFFER_POOL or the default
    """
    limit = _state["limit"]
    if limit is None:  # read once: LODTENSOR_BUFFER_POOL, or the default
        limit = _state["limit"] = _default_bytes()
    return limit


def set_buffer_pool(max_bytes):
    """Keep at most ``max_bytes`` of idle output buffers (``0`` turns the pool off).

    ``max_bytes`` is an integer or a string such as ``"512M"``;
    ``set_buffer_pool(None)`` goes back to ``LODTENSOR_BUFFER_POOL`` (or the
    default). Idle blocks beyond the new bound are freed at once; arrays
    handed out before stay valid.

    >>> set_buffer_pool("64M"); get_buffer_pool()
    67108864
    >>> set_buffer_pool(None)
    >>> set_buffer_pool(-1)
    Traceback (most recent call last):
    ...
    ValueError: set_buffer_pool(): max_bytes must be >= 0 bytes, got -1
    """
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, str, np.integer)):
            raise TypeError(
                f"set_buffer_pool(): max_bytes must be an integer, a size string or None, "
                f"got {type(max_bytes).__name__} {max_bytes!r}"
            )
        max_bytes = _parse(max_bytes, "set_buffer_pool(): max_bytes")
    limit = _default_bytes() if max_bytes is None else max_bytes
    with _lock:
        _state["limit"] = limit
        freed = _evict_locked(limit)
    del freed  # the blocks are freed here, outside the lock
    _settle()


def trim_buffer_pool():
    """Free every idle block now (arrays still in use are untouched).

    >>> trim_buffer_pool()
    >>> buffer_pool_info()["idle_bytes"]
    0
    """
    with _lock:
        freed = _evict_locked(0)
    del freed


def buffer_pool_info():
    """``{"limit", "idle_bytes", "idle_blocks", "leased_bytes", "hits", "misses"}`` of the pool.

    >>> set_buffer_pool("64M")
    >>> info = buffer_pool_info()
    >>> info["limit"], sorted(info)
    (67108864, ['hits', 'idle_blocks', 'idle_bytes', 'leased_bytes', 'limit', 'misses'])
    >>> set_buffer_pool(None)
    """
    with _lock:
        _drain_locked()
        return {"limit": get_buffer_pool(), "idle_bytes": _state["idle_bytes"], "idle_blocks": len(_idle),
                "leased_bytes": _state["leased_bytes"], "hits": _state["hits"], "misses": _state["misses"]}


def pools(shape, dtype):
    """True where :func:`empty` would hand out an array of ``shape`` and ``dtype`` from the pool."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * math.prod(shape)
    return nbytes >= _tuning.POOL_MIN_BYTES and not dtype.hasobject and get_buffer_pool() > 0


def empty(shape, dtype):
    """An uninitialised C-contiguous array, from the pool when it is large (see the module doc)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in (shape if isinstance(shape, tuple) else (shape,)))
    nbytes = dtype.itemsize * math.prod(shape)  # (not np.prod: a reduction costs a microsecond a call)
    if nbytes < _tuning.POOL_MIN_BYTES or dtype.hasobject or get_buffer_pool() == 0:
        return np.empty(shape, dtype=dtype)
    size = -(-nbytes // _tuning.POOL_GRAIN) * _tuning.POOL_GRAIN
    block = None
    with _lock:
        _drain_locked()
        block = _take_locked(size)
        _state["hits" if block is not None else "misses"] += 1
        _state["leased_bytes"] += size if block is None else block.size
    _settle()
    if block is None:
        block = _Block((size,), np.uint8)  # owns its memory: the end of every .base chain
    lease = block[:nbytes].view(_Lease)
    lease.__dict__["_pool_block"] = block
    return np.ndarray(shape, dtype=dtype, buffer=lease)


def _give_back(block):
    """Return a block from a dead lease (any thread, also inside a garbage collection)."""
    if not _lock.acquire(blocking=False):  # held: maybe by this very thread, collecting garbage
        _pending.append(block)
        return
    try:
        _put_locked(block)
        freed = _evict_locked(get_buffer_pool())
    finally:
        _lock.release()
    del freed
    _settle()


def _settle():
    """Take in blocks given back while the lock was held (a race leaves at most a few until the next call)."""
    while _pending and _lock.acquire(blocking=False):
        try:
            freed = _evict_locked(get_buffer_pool())
        finally:
            _lock.release()
        del freed


def _take_locked(size):
    """Pop the oldest idle block of ``size`` to ``size * 1.25`` bytes (None if none).

    A block that something besides the pool still refers to (code that walked
    the ``.base`` chain past the lease to the memory's owner and kept it) is
    never handed out: it leaves the pool, and its memory is freed when that
    reference goes. A few blocks at most: the bound over 16 MiB each.
    """
    i = 0
    while i < len(_idle):
        if sys.getrefcount(_idle[i]) > _IDLE_REFS:
            _state["idle_bytes"] -= _idle.pop(i).size
        elif size <= _idle[i].size <= size + size // 4:
            block = _idle.pop(i)
            _state["idle_bytes"] -= block.size
            return block
        else:
            i += 1
    return None


def _put_locked(block):
    _state["leased_bytes"] -= block.size
    _idle.append(block)
    _state["idle_bytes"] += block.size


def _drain_locked():
    while _pending:
        _put_locked(_pending.popleft())


def _evict_locked(limit):
    """Drop idle blocks (oldest first) until at most ``limit`` bytes are idle; returns them to be freed."""
    _drain_locked()
    freed = []
    while _idle and _state["idle_bytes"] > limit:
        block = _idle.pop(0)
        _state["idle_bytes"] -= block.size
        freed.append(block)
    return freed


def _forget_after_fork():
    global _lock  # noqa: PLW0603 - a lock held by another thread at fork time would never be released
    _lock = threading.Lock()
    _idle.clear()
    _pending.clear()
    _state.update(idle_bytes=0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
