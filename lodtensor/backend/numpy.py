"""NumPy kernels: the reference implementation, always available.

Row-moving kernels view each row as one opaque item (``np.void`` of the row's
bytes) so that gathers and scatters move whole rows with one index lookup each
instead of one per element.
"""

import numpy as np

from ._base import Backend
from ._threads import get_num_threads, pool

__all__ = ["NumpyBackend"]

_INT64 = np.dtype(np.int64)
# Rows with at least this many elements are reduced by length groups, not reduceat (measured crossover).
_WIDE_ROW = 16
# Wide-row reductions step over positions when no sequence is longer than this (else: length groups),
# in blocks of sequences whose accumulators take about this many bytes (two such buffers stay in L2).
_POSITION_MAX_LEN = 1024
_POSITION_BLOCK_BYTES = 256 * 1024
# Sums of rows with at least this many elements use SciPy's CSR product when SciPy is installed.
_CSR_ROW = 8
_SPARSE = None  # scipy.sparse once imported; False when it is not installed
# Outputs at least this large are moved by several threads.
_MIN_PARALLEL_BYTES = 16 * 2**20


def _scipy_sparse():
    """scipy.sparse, imported on first use; None when SciPy is not installed."""
    global _SPARSE  # noqa: PLW0603 - a lazily filled module cache
    if _SPARSE is None:
        try:
            import scipy.sparse as sparse  # noqa: PLC0415 - optional accelerator

            _SPARSE = sparse
        except ImportError:
            _SPARSE = False
    return _SPARSE or None


def _as_rows(a):
    """View a C-contiguous array as a 1-D array of row items (no copy)."""
    if a.ndim == 1 or a.dtype.hasobject:
        return a
    row_bytes = a.dtype.itemsize * int(np.prod(a.shape[1:]))
    if row_bytes == 0:
        return None
    row_items = row_bytes // a.dtype.itemsize
    return a.reshape(a.shape[0], row_items).view(np.dtype((np.void, row_bytes))).reshape(a.shape[0])


def _run_split(work, offsets, nbytes):
    """``work(lo, hi)`` over runs of sequences with about equal row counts, in parallel
    for large outputs. Each run writes disjoint bytes."""
    threads = min(get_num_threads(), 4) if nbytes >= _MIN_PARALLEL_BYTES else 1
    n = offsets.size - 1
    if threads == 1 or n < 2:
        work(0, n)
        return
    total = int(offsets[-1])
    cuts = np.searchsorted(offsets, [total * k // threads for k in range(1, threads)]).tolist()
    bounds = [0, *cuts, n]
    workers = pool()
    futures = [workers.submit(work, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    work(bounds[0], bounds[1])
    for future in futures:
        future.result()


def _fill_tails(out, groups, lo, hi, pad_value, zero):
    """``out[i, length:] = pad_value`` for the sequences ``lo <= i < hi``, one assignment per length."""
    n, maxlen = out.shape[:2]
    if zero:  # a byte view writes every tail as one contiguous block
        row_bytes = out.dtype.itemsize * int(np.prod(out.shape[2:], dtype=np.int64))
        target = out.reshape(n, maxlen * row_bytes // out.dtype.itemsize).view(np.uint8)
    for length, ids in groups:
        if lo > 0 or hi < n:
            ids = ids[(ids >= lo) & (ids < hi)]
        if zero:
            target[ids, length * row_bytes :] = 0
        else:
            out[ids, length:] = pad_value


class NumpyBackend(Backend):
    name = "numpy"
    xp = np
    uses_host_plans = True

    # -- arrays and transfer -----------------------------------------------------------------
    def asarray(self, obj, dtype=None, *, copy=False):
        if copy:
            return np.array(obj, dtype=dtype, copy=True)
        return np.asarray(obj, dtype=dtype)

    def to_numpy(self, x):
        return np.asarray(x)

    def device_of(self, x):
        return "cpu"

    def to_device(self, x, device, *, copy=False):
        if device != "cpu":
            raise ValueError(f"NumPy data lives on the host; use the cupy or torch backend for {device!r}")
        return np.array(x, copy=True) if copy else x

    def apply_ufunc(self, ufunc, method, *args, **kwargs):
        return getattr(ufunc, method)(*args, **kwargs)

    # -- index helpers -----------------------------------------------------------------------
    def segment_ids(self, offsets, *, total=None):
        lengths = np.diff(offsets)
        return np.repeat(np.arange(lengths.size, dtype=_INT64), lengths)

    def repeat_interleave(self, values, repeats, *, total=None):
        return np.repeat(values, repeats, axis=0)

    def cumsum(self, x, *, exclusive=False):
        if not exclusive:
            return np.cumsum(x, axis=0)
        out = np.zeros_like(x)
        np.cumsum(x[:-1], axis=0, out=out[1:])
        return out

    def gather(self, data, index):
        data = np.ascontiguousarray(data)
        rows = _as_rows(data)
        if rows is None:
            return np.empty((len(index),) + data.shape[1:], dtype=data.dtype)
        return rows.take(index).view(data.dtype).reshape((len(index),) + data.shape[1:])

    def scatter(self, out, index, values):
        rows = _as_rows(out) if out.flags.c_contiguous else None
        if rows is None or out.ndim == 1:
            out[index] = values
        else:
            rows.put(index, _as_rows(np.ascontiguousarray(values, dtype=out.dtype)))
        return out

    def scatter_add(self, out, index, values):
        out = np.array(out, copy=True)
        np.add.at(out, index, values)
        return out

    def fill_rows(self, x, mask, value):
        shape = (-1,) + (1,) * (x.ndim - 1)
        return np.where(np.asarray(mask).reshape(shape), np.asarray(value, dtype=x.dtype), x)

    def concat(self, arrays):
        return np.concatenate(arrays, axis=0)

    def astype(self, x, dtype):
        return x.astype(np.dtype(dtype), copy=False)

    def arange(self, n, *, like=None):
        return np.arange(n, dtype=_INT64)

    # -- segment reductions ------------------------------------------------------------------
    def _reduceat(self, ufunc, data, offsets, fill):
        """``ufunc`` over the rows of each sequence; empty sequences get ``fill``.

        ``ufunc.reduceat`` pays one inner-loop call per (sequence, column), so
        it is fast only for narrow rows. Wide rows are reduced by groups of
        sequences of equal length instead: one gather into a
        ``(count, length, *row)`` block and one reduction over axis 1 per
        distinct length (the loop runs over distinct lengths, not sequences).
        """
        lengths = np.diff(offsets)
        n = lengths.size
        nonempty = lengths > 0
        all_nonempty = bool(nonempty.all())
        row_size = int(np.prod(data.shape[1:], dtype=np.int64))
        if row_size < _WIDE_ROW and all_nonempty and data.shape[0]:
            return ufunc.reduceat(data, offsets[:-1], axis=0)  # no empty sequence to mask
        out = np.full((n,) + data.shape[1:], fill, dtype=data.dtype)
        if data.shape[0] == 0 or not nonempty.any():
            return out
        if row_size < _WIDE_ROW:
            out[nonempty] = ufunc.reduceat(data, offsets[:-1][nonempty], axis=0)
            return out
        longest = int(lengths.max())
        if longest <= _POSITION_MAX_LEN:
            return self._reduce_by_position(ufunc, data, offsets, lengths, fill)
        order = np.argsort(lengths, kind="stable")
        sorted_lengths = lengths[order]
        groups = np.split(order, np.flatnonzero(np.diff(sorted_lengths)) + 1)
        starts = offsets[:-1]
        row_shape = data.shape[1:]

        def reduce_groups(chosen):  # every group writes its own rows of ``out``
            for group in chosen:
                length = int(lengths[group[0]])
                if length == 0:
                    continue
                if group.size == 1:
                    s = int(starts[group[0]])
                    out[group[0]] = ufunc.reduce(data[s : s + length], axis=0)
                    continue
                index = (starts[group][:, None] + np.arange(length)).ravel()
                block = self.gather(data, index).reshape((group.size, length) + row_shape)
                out[group] = ufunc.reduce(block, axis=1)

        threads = min(get_num_threads(), 4) if data.nbytes >= _MIN_PARALLEL_BYTES else 1
        if threads == 1 or len(groups) < 2:
            reduce_groups(groups)
            return out
        # deal the groups out by size (largest first), so every thread gets about the same rows
        work = sorted(groups, key=lambda g: -g.size * int(lengths[g[0]]))
        shares = [work[k::threads] for k in range(threads)]
        futures = [pool().submit(reduce_groups, share) for share in shares[1:]]
        reduce_groups(shares[0])
        for future in futures:
            future.result()
        return out

    def _reduce_by_position(self, ufunc, data, offsets, lengths, fill):
        """``ufunc`` over each sequence, one step per position, in cache-sized blocks.

        The sequences are sorted by length and cut into blocks whose accumulators
        fit in L2. In a block, step ``p`` gathers row ``p`` of the ``k`` sequences
        longer than ``p`` (one row-sized ``take`` into a scratch buffer) and folds
        it into the first ``k`` accumulators, a contiguous prefix. The loops run
        over blocks and positions (at most the longest length), never over
        sequences; large inputs share the blocks among threads.
        """
        n = lengths.size
        order = np.argsort(-lengths, kind="stable")
        sorted_lengths = lengths[order]
        starts = offsets[:-1][order]
        m = int(np.count_nonzero(sorted_lengths))
        row_shape = data.shape[1:]
        out = np.empty((n,) + row_shape, dtype=data.dtype)
        out[order[m:]] = fill
        data = np.ascontiguousarray(data)
        src = _as_rows(data)
        row_bytes = max(1, data.dtype.itemsize * int(np.prod(row_shape, dtype=np.int64)))
        block = max(32, _POSITION_BLOCK_BYTES // row_bytes)
        blocks = [(a, min(m, a + block)) for a in range(0, m, block)]

        def work(share):
            acc = np.empty((block,) + row_shape, dtype=data.dtype)
            buf = np.empty_like(acc)
            acc_rows, buf_rows = _as_rows(acc), _as_rows(buf)
            for a, b in share:
                first = starts[a:b]
                size = b - a
                src.take(first, out=acc_rows[:size], mode="clip")
                block_lengths = sorted_lengths[a:b]
                # active[p - 1]: how many sequences of the block are longer than p
                steps = -np.arange(1, int(block_lengths[0]))
                for p, k in enumerate(np.searchsorted(-block_lengths, steps, side="left").tolist(), 1):
                    src.take(first[:k] + p, out=buf_rows[:k], mode="clip")
                    ufunc(acc[:k], buf[:k], out=acc[:k])
                out[order[a:b]] = acc[:size]

        threads = min(get_num_threads(), 4, len(blocks)) if data.nbytes >= _MIN_PARALLEL_BYTES else 1
        if threads <= 1:
            work(blocks)
            return out
        shares = [blocks[k::threads] for k in range(threads)]  # heavy (long) blocks spread round-robin
        futures = [pool().submit(work, share) for share in shares[1:]]
        work(shares[0])
        for future in futures:
            future.result()
        return out

    def segment_sum(self, data, offsets, *, ids=None):
        """Sum per sequence. Wide rows with SciPy: one CSR x dense product, a single
        pass over the data (the CSR ``indptr`` is the offsets array itself)."""
        row_size = int(np.prod(data.shape[1:], dtype=np.int64))
        sparse = _scipy_sparse() if row_size >= _CSR_ROW and data.dtype.kind in "iufc" else None
        if sparse is None or data.shape[0] == 0:
            return self._reduceat(np.add, data, offsets, 0)
        n_rows = data.shape[0]
        n = offsets.size - 1
        rows = np.ascontiguousarray(data).reshape(n_rows, row_size)
        # int32 indices when they fit: SciPy would otherwise convert int64 ones on every call
        index_dtype = np.int32 if n_rows < 2**31 - 1 else np.int64
        indptr = offsets.astype(index_dtype, copy=False)
        out = np.empty((n, row_size), dtype=data.dtype)

        def work(lo, hi):  # SciPy's CSR product releases the GIL: parts run on the shared pool
            a, b = int(offsets[lo]), int(offsets[hi])
            part = sparse.csr_matrix(
                (np.ones(b - a, dtype=data.dtype), np.arange(b - a, dtype=index_dtype), indptr[lo : hi + 1] - a),
                shape=(hi - lo, b - a),
            )
            out[lo:hi] = part @ rows[a:b]

        _run_split(work, offsets, data.nbytes)
        return out.reshape((n,) + data.shape[1:])

    def segment_mean(self, data, offsets, *, empty=0, ids=None):
        lengths = np.diff(offsets)
        total = self.segment_sum(data, offsets)
        dtype = total.dtype if total.dtype.kind in "fc" else np.float64
        shape = (-1,) + (1,) * (data.ndim - 1)
        out = total.astype(dtype, copy=False) / np.maximum(lengths, 1).reshape(shape).astype(dtype)
        if empty != 0:
            out[lengths == 0] = empty
        return out

    def segment_max(self, data, offsets, *, empty, ids=None):
        return self._reduceat(np.maximum, data, offsets, empty)

    def segment_min(self, data, offsets, *, empty, ids=None):
        return self._reduceat(np.minimum, data, offsets, empty)

    def segment_softmax(self, data, offsets, *, ids=None):
        lengths = np.diff(offsets)
        if data.shape[0] == 0:
            return data.astype(np.result_type(data.dtype, np.float32), copy=True)
        if lengths.all() and data.size // data.shape[0] < _CSR_ROW:
            # the common case (a few scores per row, no empty sequence): reduceat straight
            starts = offsets[:-1]
            shifted = data - np.repeat(np.maximum.reduceat(data, starts, axis=0), lengths, axis=0)
            np.exp(shifted, out=shifted)
            shifted /= np.repeat(np.add.reduceat(shifted, starts, axis=0), lengths, axis=0)
            return shifted
        peak = self._reduceat(np.maximum, data, offsets, 0)
        shifted = data - np.repeat(peak, lengths, axis=0)
        np.exp(shifted, out=shifted)
        shifted /= np.repeat(self.segment_sum(shifted, offsets), lengths, axis=0)
        return shifted

    # -- dense <-> flat ----------------------------------------------------------------------
    def _pad_index(self, offsets, maxlen):
        """Flat position (sequence * maxlen + position) of every row."""
        lengths = np.diff(offsets)
        shift = np.arange(lengths.size, dtype=_INT64) * maxlen - offsets[:-1]
        return np.arange(int(offsets[-1]), dtype=_INT64) + np.repeat(shift, lengths)

    def place_rows(self, data, index, shape, pad_value, *, out=None):
        full = tuple(shape) + tuple(data.shape[1:])
        if out is None:
            if np.ndim(pad_value) == 0 and pad_value == 0:
                out = np.zeros(full, dtype=data.dtype)
            else:
                out = np.empty(full, dtype=data.dtype)
                out[...] = pad_value
        else:
            out[...] = pad_value
        if data.shape[0] == 0:
            return out
        flat = out.reshape((-1,) + tuple(data.shape[1:]))
        rows = _as_rows(flat)
        if rows is not None:
            rows.put(index, _as_rows(np.ascontiguousarray(data)))
        return out

    def pad(self, data, offsets, maxlen, pad_value, *, out=None, plan=None):
        """Rows into ``(n, maxlen, *row)``: one ``put`` of whole rows, then only the tails
        are filled (a fresh zero-padded result comes zeroed from the allocator).

        ``plan`` (from ``LoD.pad_plan``) caches the index and the length groups.
        Outputs of 16 MiB or more are split by rows over ``LODTENSOR_NUM_THREADS``
        threads (up to 4; ``lodtensor.set_num_threads``); ``put`` and the tail fills release the GIL.
        """
        n = offsets.size - 1
        row_shape = data.shape[1:]
        shape = (n, maxlen) + row_shape
        index, groups = plan if plan is not None else (self._pad_index(offsets, maxlen), None)
        zero = np.ndim(pad_value) == 0 and pad_value == 0
        if out is None:
            out = np.zeros(shape, dtype=data.dtype) if zero else np.empty(shape, dtype=data.dtype)
            tails_done = zero
        else:
            tails_done = False
        if not tails_done and groups is None:
            out[...] = pad_value
            tails_done = True
        dst = _as_rows(out.reshape((n * maxlen,) + row_shape))
        if data.shape[0] == 0 or dst is None:
            if not tails_done:
                out[...] = pad_value
            return out
        src = _as_rows(np.ascontiguousarray(data))

        def work(lo, hi):
            r0, r1 = int(offsets[lo]), int(offsets[hi])
            dst.put(index[r0:r1], src[r0:r1], mode="clip")  # index is valid by construction
            if not tails_done:
                _fill_tails(out, groups, lo, hi, pad_value, zero)

        _run_split(work, offsets, out.nbytes)
        return out

    def unpad(self, padded, offsets, *, plan=None):
        n, maxlen = padded.shape[:2]
        row_shape = padded.shape[2:]
        index = plan[0] if plan is not None else self._pad_index(offsets, maxlen)
        flat = np.ascontiguousarray(padded).reshape((n * maxlen,) + row_shape)
        out = np.empty((index.size,) + row_shape, dtype=padded.dtype)
        src, dst = _as_rows(flat), _as_rows(out)
        if dst is None or index.size == 0:
            return out

        def work(lo, hi):
            r0, r1 = int(offsets[lo]), int(offsets[hi])
            src.take(index[r0:r1], out=dst[r0:r1], mode="clip")

        _run_split(work, offsets, out.nbytes)
        return out

    def is_c_contiguous(self, x):
        return x.flags.c_contiguous

