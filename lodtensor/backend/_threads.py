"""The one thread pool of lodtensor's NumPy kernels.

NumPy releases the GIL inside its loops, so large memory-bound kernels
(padding, unpadding, activations) split their work over a few threads. One
setting governs them all: the ``LODTENSOR_NUM_THREADS`` environment variable,
or :func:`set_num_threads`; by default the number of cores, at most 8. The
pool starts on first use and is forgotten in forked children (DataLoader
workers), whose copies of the parent's threads do not run.
"""

import os
from concurrent.futures import ThreadPoolExecutor

__all__ = ["get_num_threads", "set_num_threads", "pool"]

_state = {"threads": None, "pool": None}


def _default():
    value = os.environ.get("LODTENSOR_NUM_THREADS")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"LODTENSOR_NUM_THREADS must be a positive integer, got {value!r}") from None
    return max(1, min(os.cpu_count() or 1, 8))


def get_num_threads():
    """Threads the NumPy kernels use for large arrays (1: the caller's thread only)."""
    threads = _state["threads"]
    return _default() if threads is None else threads


def set_num_threads(n):
    """Use ``n`` threads (>= 1) for large NumPy kernels; overrides ``LODTENSOR_NUM_THREADS``.

    ``set_num_threads(None)`` goes back to the environment variable (or the default).

    >>> set_num_threads(1); get_num_threads()
    1
    >>> set_num_threads(None)
    >>> set_num_threads(0)
    Traceback (most recent call last):
    ...
    ValueError: set_num_threads(): n must be >= 1, got 0
    """
    if n is not None:
        n = int(n)
    if n is not None and n < 1:
        raise ValueError(f"set_num_threads(): n must be >= 1, got {n}")
    _state["threads"] = n
    old, _state["pool"] = _state["pool"], None
    if old is not None:
        old.shutdown(wait=False)


def pool():
    """The shared worker pool (``get_num_threads() - 1`` workers: the caller works too)."""
    current = _state["pool"]
    workers = max(1, get_num_threads() - 1)
    if current is None or current._max_workers != workers:
        if current is not None:
            current.shutdown(wait=False)
        current = _state["pool"] = ThreadPoolExecutor(workers, thread_name_prefix="lodtensor")
    return current


def _forget_pool_after_fork():
    _state["pool"] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)
