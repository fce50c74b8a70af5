"""The one thread pool of lodtensor's NumPy kernels.

NumPy releases the GIL inside its loops, so large memory-bound kernels
(padding, unpadding, activations) split their work over a few threads. One
setting governs them all: the ``LODTENSOR_NUM_THREADS`` environment variable,
or :func:`set_num_threads`; by default the number of cores, at most 8. The
pool starts on first use and is forgotten in forked children (DataLoader
workers), whose copies of the parent's threads do not run.
"""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["get_num_threads", "set_num_threads", "pool", "run_split", "run_together", "split_bounds"]

_state = {"threads": None, "pool": None}
_lock = threading.Lock()


def _default():
    value = os.environ.get("LODTENSOR_NUM_THREADS")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"LODTENSOR_NUM_THREADS must be a positive integer, got {value!r}") from None
    return max(1, min(os.cpu_count() or 1, 8))


def get_num_threads():
    """Threads the NumPy kernels use for large arrays (1: the caller's thread only).

    >>> get_num_threads() >= 1
    True
    """
    threads = _state["threads"]
    return _default() if threads is None else threads


def set_num_threads(n):
    """Use ``n`` threads (>= 1) for large NumPy kernels; overrides ``LODTENSOR_NUM_THREADS``.

    ``set_num_threads(None)`` goes back to the environment variable (or the default).
    Safe while other threads run kernels: they finish on the pool they started
    with, which is let go (not shut down) once the last of them is done.

    >>> set_num_threads(1); get_num_threads()
    1
    >>> set_num_threads(None)
    >>> set_num_threads(0)
    Traceback (most recent call last):
    ...
    ValueError: set_num_threads(): n must be >= 1, got 0
    >>> set_num_threads("4")
    Traceback (most recent call last):
    ...
    TypeError: set_num_threads(): n must be an integer or None, got str '4'
    """
    if n is not None:
        if isinstance(n, bool) or not hasattr(n, "__index__"):
            raise TypeError(f"set_num_threads(): n must be an integer or None, got {type(n).__name__} {n!r}")
        n = int(n)
        if n < 1:
            raise ValueError(f"set_num_threads(): n must be >= 1, got {n}")
    with _lock:
        _state["threads"] = n


def pool():
    """The shared worker pool (``get_num_threads() - 1`` workers: the caller works too).

    A pool of the wrong size is replaced, never shut down: a kernel running on
    another thread may still submit to it. An executor nobody references any
    more ends its idle workers by itself.
    """
    workers = max(1, get_num_threads() - 1)
    current = _state["pool"]
    if current is None or current._max_workers != workers:
        with _lock:
            current = _state["pool"]
            if current is None or current._max_workers != workers:
                current = _state["pool"] = _Executor(workers, thread_name_prefix="lodtensor")
    return current


def split_bounds(offsets, parallel):
    """Sequence bounds ``[0, ..., n]`` cutting the rows into about equal runs: one per thread (at
    most 4) when ``parallel``, else one run.

    >>> split_bounds(np.array([0, 5, 6, 10]), False)
    [0, 3]
    """
    n = offsets.size - 1
    threads = min(get_num_threads(), 4) if parallel else 1
    if threads == 1 or n < 2:
        return [0, n]
    total = int(offsets[-1])
    cuts = np.searchsorted(offsets, [total * k // threads for k in range(1, threads)]).tolist()
    return [0, *cuts, n]


def run_split(work, offsets, parallel):
    """``work(lo, hi)`` over runs of sequences with about equal row counts: one run per thread (at
    most 4) when ``parallel``, else ``work(0, n)``. Each run must write disjoint bytes.

    >>> runs = []
    >>> run_split(lambda lo, hi: runs.append((lo, hi)), np.array([0, 5, 6, 10]), False)
    >>> runs
    [(0, 3)]
    """
    bounds = split_bounds(offsets, parallel)
    if len(bounds) == 2:
        work(0, bounds[1])
        return
    run_together(lambda: work(bounds[0], bounds[1]),
                 [lambda lo=lo, hi=hi: work(lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])])


def run_together(first, helpers):
    """``first()`` in the calling thread while the pool runs each callable of ``helpers``; returns when
    all have finished, raising the first error (the caller's own first). The helpers are waited for
    even when ``first`` raises, so no thread still writes an output once the caller sees the error.

    >>> done = []
    >>> run_together(lambda: done.append("caller"), [lambda: done.append("helper")])
    >>> sorted(done)
    ['caller', 'helper']
    """
    if getattr(_worker, "busy", False):  # called from a helper (an error callback of np.errstate runs there):
        first()  # waiting on the pool from one of its own threads could wait for ever; all here, in order
        for fn in helpers:
            fn()
        return
    futures = []
    errors = []
    try:
        executor = pool()
        for fn in helpers:
            futures.append(executor.submit(fn))
        first()
    finally:
        interrupted = _wait_all(futures, errors)
    if interrupted is not None:  # (a KeyboardInterrupt that came while waiting: raised once nothing runs)
        raise interrupted
    if errors:
        raise errors[0]


def _wait_all(futures, errors):
    """Wait for every future, appending their errors to ``errors``; returns an exception that interrupted
    the waiting (a KeyboardInterrupt from a signal), after waiting on: raising it at once would give the
    caller control while a helper still writes into an output."""
    interrupted = None
    for future in futures:
        while True:
            try:
                error = future.exception()
                break
            except BaseException as err:  # noqa: BLE001 - the wait itself was interrupted: wait on
                interrupted = interrupted or err
        if error is not None:
            errors.append(error)
    return interrupted


class _Executor(ThreadPoolExecutor):
    """A thread pool whose tasks run under the submitting thread's NumPy error state.

    ``np.errstate`` is per thread: without this a kernel split over threads would
    warn (or not raise) where the same call on one thread is quiet (or raises).
    The error callback travels too: ``errstate(invalid="call", call=fn)`` (or
    ``"log"``) on the caller's thread must not be a NameError on a worker.
    """

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(_under_errstate, np.geterr(), np.geterrcall(), fn, args, kwargs)


def _under_errstate(err, call, fn, args, kwargs):
    _worker.busy = True
    try:
        with np.errstate(call=call, **err):
            return fn(*args, **kwargs)
    finally:
        _worker.busy = False


_worker = threading.local()  # .busy: this thread runs a task of the pool (see run_together)


def _forget_pool_after_fork():
    global _lock  # noqa: PLW0603 - a lock held by another thread at fork time would never be released
    _lock = threading.Lock()
    _state["pool"] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)
