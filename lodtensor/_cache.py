"""A small thread-safe LRU cache bounded by bytes, for plans derived from a LoD.

Plans (padding indices, reduction blocks) cost memory in proportion to the
rows they index; caching every one ever asked for (a new ``maxlen`` per batch)
grows without end. :class:`ByteLRU` keeps the most recently used entries
whose sizes add up to at most ``budget`` bytes (one entry larger than the
budget is returned but not kept), and is safe to share between threads (also
with a weak reference's callback that pops an entry from inside a garbage
collection that one of its own calls started: the lock is reentrant). A
forked child starts every cache empty with a fresh lock: a lock that another
thread of the parent held at the fork would never be released in the child.
"""

import os
import threading
import weakref
from collections import OrderedDict

__all__ = ["ByteLRU", "nbytes_of"]


def nbytes_of(value):
    """Bytes held by ``value``: arrays, and tuples / lists / dicts of them (others count 64)."""
    size = getattr(value, "nbytes", None)
    if size is not None:
        return int(size)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return 64 + sum(nbytes_of(v) for v in value)
    return 64


class ByteLRU:
    """Least-recently-used cache holding at most ``budget`` bytes.

    >>> import numpy as np
    >>> cache = ByteLRU(budget=100)
    >>> cache.put("a", np.zeros(8))      # 64 bytes
    array([0., 0., 0., 0., 0., 0., 0., 0.])
    >>> _ = cache.put("b", np.zeros(8))  # 128 > 100: "a" goes
    >>> cache.get("a") is None, cache.get("b") is not None, cache.nbytes
    (True, True, 64)
    """

    __slots__ = ("_entries", "_lock", "budget", "nbytes", "__weakref__")

    def __init__(self, budget):
        self._entries = OrderedDict()
        # reentrant: a garbage collection inside a locked section may run a weak reference's callback that
        # pops an entry (the plan cache's, when a LoD in a reference cycle dies) on this very thread
        self._lock = threading.RLock()
        self.budget = int(budget)
        self.nbytes = 0
        _CACHES.add(self)

    def get(self, key):
        """The value for ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key, value, nbytes=None):
        """Keep ``value`` under ``key`` if it fits the budget, evicting the oldest; return it."""
        size = nbytes_of(value) if nbytes is None else int(nbytes)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            if size > self.budget:
                return value
            self._entries[key] = (value, size)
            self.nbytes += size
            while self.nbytes > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.nbytes -= dropped
        return value

    def pop(self, key):
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        """The keys, oldest first (a snapshot: safe while other threads use the cache)."""
        with self._lock:
            return iter(list(self._entries))

    def __contains__(self, key):
        return key in self._entries


_CACHES = weakref.WeakSet()  # every ByteLRU, for the fork handler


def _after_fork_in_child():
    for cache in list(_CACHES):
        cache._lock = threading.RLock()
        cache._entries = OrderedDict()  # (a parent's thread may have been half way through changing it)
        cache.nbytes = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
