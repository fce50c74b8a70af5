"""NumPy kernels: the reference implementation, always available.

Row-moving kernels view each row as one opaque item (``np.void`` of the row's
bytes) so that gathers and scatters move whole rows with one index lookup each
instead of one per element.
"""

import math

import numpy as np

from .._contract import Backend
from .._threads import get_num_threads, run_split, run_together, split_bounds
from . import _pool, _routes, _tuning, _ufunc
from ._arrays import ArrayKernels
from ._chunks import chunk_reduce
from ._compiled import compiled_reduce
from ._pieces import pieces_reduce
from ._util import _PLANS, _as_rows, _cached_plan, _scratch, pad_index, truncation, unpad_mask  # noqa: F401 - _PLANS: tests look there

__all__ = ["NumpyBackend"]

_INT64 = np.dtype(np.int64)


def _block_plan(offsets, row_bytes, exact=False):
    """The blocks of :meth:`NumpyBackend._reduce_blocks` for rows of ``row_bytes`` bytes.

    Returns ``(order, m, blocks, singles, index)``: ``order`` sorts the
    sequences by decreasing length, the first ``m`` of them non-empty;
    ``blocks`` holds ``(a, b, length, i0, i1)``: sorted sequences ``a:b``,
    padded to ``length`` rows, whose position-major row numbers are
    ``index[i0:i1]``; ``singles`` holds ``(a, start, length)`` for sequences
    of a block's size or more, reduced where they lie. With ``exact``, a block
    holds sequences of one length only (no repeated rows: for sums).
    """
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    starts = offsets[:-1][order]
    m = int(np.count_nonzero(sorted_lengths))
    per_block = max(1, _tuning.BLOCK_BYTES // max(row_bytes, 1))
    blocks, singles, parts = [], [], []
    a = used = 0
    lengths_list = sorted_lengths[:m].tolist()
    while a < m:
        length = lengths_list[a]
        if length >= per_block:
            singles.append((a, int(starts[a]), length))
            a += 1
            continue
        b = min(m, a + per_block // length)
        if exact and lengths_list[b - 1] != length:
            b = a + int(np.searchsorted(-sorted_lengths[a:b], -length, side="right"))
        position = np.minimum(np.arange(length)[:, None], sorted_lengths[None, a:b] - 1)
        parts.append((starts[None, a:b] + position).ravel())
        blocks.append((a, b, length, used, used + parts[-1].size))
        used += parts[-1].size
        a = b
    index = np.concatenate(parts) if parts else np.zeros(0, dtype=_INT64)
    return order, m, blocks, singles, index


def _split_bounds(offsets, nbytes, min_bytes=None):
    """Sequence bounds ``[0, ..., n]`` cutting the rows into about equal runs, one per thread
    for outputs of ``min_bytes`` (default ``_tuning.MIN_PARALLEL_BYTES``) or more, else one run."""
    return split_bounds(offsets, nbytes >= (_tuning.MIN_PARALLEL_BYTES if min_bytes is None else min_bytes))


def _run_split(work, offsets, nbytes, min_bytes=None):
    """``work(lo, hi)`` over runs of sequences with about equal row counts, in parallel
    for outputs of ``min_bytes`` (default ``_tuning.MIN_PARALLEL_BYTES``) or more."""
    run_split(work, offsets, nbytes >= (_tuning.MIN_PARALLEL_BYTES if min_bytes is None else min_bytes))


def _csr_parts(sparse, offsets, dtype, bounds):
    """One CSR matrix of ones per run of sequences ``bounds[k]:bounds[k + 1]``, summing its rows.

    The column indices (int32 when they fit: SciPy would convert int64 ones on
    every call) and the ones are made once and cached with the LoD's plans.
    """
    total = int(offsets[-1])
    index_dtype = np.int32 if total < 2**31 - 1 else np.int64
    indptr = offsets.astype(index_dtype)
    columns = np.arange(total, dtype=index_dtype)
    ones = np.ones(total, dtype=dtype)
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        a, b = int(offsets[lo]), int(offsets[hi])
        parts.append(sparse.csr_matrix((ones[a:b], columns[: b - a], indptr[lo : hi + 1] - a), shape=(hi - lo, b - a)))
    return parts


def _zero_bits(value):
    """Whether a scalar pad value fills with zero bytes: 0 or False, not -0.0 (its sign bit is set)."""
    if np.ndim(value) != 0 or value != 0:
        return False
    value = complex(value)
    return math.copysign(1.0, value.real) > 0 and math.copysign(1.0, value.imag) > 0


def _fill_tails(out, groups, lo, hi, pad_value, zero):
    """``out[i, length:] = pad_value`` for the sequences ``lo <= i < hi``, one assignment per length."""
    n, maxlen = out.shape[:2]
    if zero:  # a byte view writes every tail as one contiguous block
        row_bytes = out.dtype.itemsize * math.prod(out.shape[2:])  # (an array's shape: no overflow)
        target = out.reshape(n, maxlen * row_bytes // out.dtype.itemsize).view(np.uint8)
    for length, ids in groups:
        if lo > 0 or hi < n:
            ids = ids[(ids >= lo) & (ids < hi)]
        if zero:
            target[ids, length * row_bytes :] = 0
        else:
            out[ids, length:] = pad_value


class NumpyBackend(ArrayKernels, Backend):  # ArrayKernels: the functions beyond the kernel set
    name = "numpy"
    xp = np

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
        return _ufunc.apply_ufunc(ufunc, method, args, kwargs)

    # -- index helpers -----------------------------------------------------------------------
    def segment_ids(self, offsets, *, total=None):
        lengths = np.diff(offsets)
        return np.repeat(np.arange(lengths.size, dtype=_INT64), lengths)

    def repeat_interleave(self, values, repeats, *, total=None):
        return np.repeat(values, repeats, axis=0)

    def cumsum(self, x, *, exclusive=False):
        if not exclusive:
            return np.cumsum(x, axis=0)
        out = np.zeros(x.shape, dtype=np.cumsum(x[:0], axis=0).dtype)  # np.cumsum's dtype (int8 -> int64), as
        np.cumsum(x[:-1], axis=0, out=out[1:])  # without exclusive and on torch and CuPy
        return out

    def gather(self, data, index):
        if not data.flags.c_contiguous and 4 * len(index) <= data.shape[0]:
            return data[index]  # a few rows of strided (or broadcast) data: read only those, copy no more
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

    def divide_rows(self, x, divisor):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.divide(x, divisor.reshape((-1,) + (1,) * (x.ndim - 1)), out=x)

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
    def wants_segment_ids(self, like):
        return False  # the kernels read the offsets alone

    def wants_host_plan(self, like):
        return True  # pad and unpad run by the LoD's cached plan

    def _reduceat(self, ufunc, data, offsets, fill, *, owner=None):
        """``ufunc`` over the rows of each sequence; empty sequences get ``fill``.

        The route is the first of ``_routes.ROUTES`` whose test holds (one
        decision table for every reduction: the compiled kernel, SciPy's CSR
        product for sums, ``reduceat``, block pieces, chunks in data order,
        sorted blocks). ``owner`` is the object ``offsets`` views, if any (it
        keys the plan cache).
        """
        route = _routes.choose(ufunc, data, offsets, owner)
        return getattr(self, f"_route_{route}")(ufunc, data, offsets, fill, owner)

    def _route_empty(self, ufunc, data, offsets, fill, owner):
        return np.full((offsets.size - 1,) + data.shape[1:], fill, dtype=data.dtype)

    def _route_compiled(self, ufunc, data, offsets, fill, owner):
        return compiled_reduce(ufunc, data, offsets, fill, checked=True)

    def _route_reduceat(self, ufunc, data, offsets, fill, owner):
        # dtype: the data's (np.add.reduceat alone widens bool and ints narrower than 64 bits to
        # int64/uint64, which the routes that mask empty sequences cast back: one dtype on every route)
        nonempty = offsets[1:] > offsets[:-1]
        if nonempty.all():
            return ufunc.reduceat(data, offsets[:-1], axis=0, dtype=data.dtype)  # no empty sequence to mask
        out = np.full((offsets.size - 1,) + data.shape[1:], fill, dtype=data.dtype)
        out[nonempty] = ufunc.reduceat(data, offsets[:-1][nonempty], axis=0, dtype=data.dtype)
        return out

    def _route_pieces(self, ufunc, data, offsets, fill, owner):
        return pieces_reduce(ufunc, data, offsets, fill, owner)

    def _route_chunks(self, ufunc, data, offsets, fill, owner):
        return chunk_reduce(ufunc, np.ascontiguousarray(data), offsets, fill, owner)

    def _route_blocks(self, ufunc, data, offsets, fill, owner):
        return self._reduce_blocks(ufunc, data, offsets, fill, owner)

    def _route_csr(self, ufunc, data, offsets, fill, owner):
        """Sum per sequence as one CSR x dense product (the CSR ``indptr`` is the offsets array
        itself): a single pass over the data; parts of it on the shared pool when large."""
        sparse = _routes.scipy_sparse()
        row_size = int(np.prod(data.shape[1:], dtype=np.int64))
        n = offsets.size - 1
        rows = np.ascontiguousarray(data).reshape(data.shape[0], row_size)
        bounds = _split_bounds(offsets, data.nbytes)
        parts = _cached_plan(offsets, ("csr", data.dtype.str, tuple(bounds)),
                             lambda o: _csr_parts(sparse, o, data.dtype, bounds))
        if len(parts) == 1:  # one product, straight into the result (over the rows the offsets span)
            out = (parts[0] @ rows[int(offsets[0]) : int(offsets[-1])]).reshape((n,) + data.shape[1:])
        else:
            out = np.empty((n, row_size), dtype=data.dtype)

            def work(k):  # SciPy's CSR product releases the GIL: parts run on the shared pool
                lo, hi = bounds[k], bounds[k + 1]
                a, b = int(offsets[lo]), int(offsets[hi])
                out[lo:hi] = parts[k] @ rows[a:b]

            run_together(lambda: work(0), [lambda k=k: work(k) for k in range(1, len(parts))])
            out = out.reshape((n,) + data.shape[1:])
        if fill != 0:
            out[offsets[1:] == offsets[:-1]] = fill
        return out

    def _reduce_blocks(self, ufunc, data, offsets, fill, owner=None):
        """``ufunc`` over each sequence of wide rows.

        The sequences are sorted by length and cut into blocks of about
        ``_tuning.BLOCK_BYTES`` of rows. One ``take`` copies a block's rows into a
        scratch buffer position-major, ``(length, sequences, *row)``, where a
        sequence shorter than the block's longest repeats its last row (a
        repeated row changes no max or min); one reduction over axis 0 then
        gives the block's results (for ``np.add``, which counts repeats, a block
        holds sequences of one length only). A block costs two calls on cache-resident
        memory however many sequences it holds, and a sequence longer than a
        block is reduced where it lies. The plan (:func:`_block_plan`) is cached
        per LoD; large inputs share the blocks among threads.
        """
        n = offsets.size - 1
        row_shape = data.shape[1:]
        data = np.ascontiguousarray(data)
        row_bytes = data.dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
        exact = ufunc is np.add
        order, m, blocks, singles, index = _cached_plan(
            offsets, ("blocks", row_bytes, exact), lambda o: _block_plan(o, row_bytes, exact), owner
        )
        out = np.empty((n,) + row_shape, dtype=data.dtype)
        out[order[m:]] = fill
        src, dst = _as_rows(data), _as_rows(out)
        widest = max((i1 - i0 for _, _, _, i0, i1 in blocks), default=0)
        most = max((b - a for a, b, _, _, _ in blocks), default=0)

        tasks = iter([*blocks, *singles])  # shared: each thread takes the next task when free

        def work():
            buf = _scratch("rows", (widest,) + row_shape, data.dtype)
            acc = _scratch("results", (most,) + row_shape, data.dtype)
            buf_rows, acc_rows = _as_rows(buf), _as_rows(acc)
            for task in tasks:
                if len(task) == 3:  # a sequence of a block's size or more, reduced where it lies
                    a, start, length = task
                    ufunc.reduce(data[start : start + length], axis=0, out=out[order[a]])
                    continue
                a, b, length, i0, i1 = task
                src.take(index[i0:i1], out=buf_rows[: i1 - i0], mode="clip")  # the plan's index is in range
                # as 2-D (positions, values): NumPy reduces that 1.8x faster than the 3-D view
                ufunc.reduce(buf[: i1 - i0].reshape(length, -1), axis=0, out=acc[: b - a].reshape(-1))
                dst.put(order[a:b], acc_rows[: b - a])

        threads = min(get_num_threads(), 4) if data.nbytes >= _tuning.MIN_PARALLEL_BYTES else 1
        threads = min(threads, len(blocks) + len(singles))
        run_together(work, [work] * (threads - 1))
        return out

    def segment_sum(self, data, offsets, *, ids=None):
        if data.dtype.kind == "f" and data.dtype.itemsize < 4:  # float16 adds up in float32 (as NumPy's
            total = self._reduceat(np.add, data.astype(np.float32), offsets, 0)  # sum and torch's do)
            with np.errstate(over="ignore"):  # a sum past float16's range is inf, as in torch
                return total.astype(data.dtype)
        return self._reduceat(np.add, data, offsets, 0)

    def segment_mean(self, data, offsets, *, empty=0, ids=None):
        lengths = np.diff(offsets)
        result = data.dtype if data.dtype.kind in "fc" else np.dtype(np.float64)
        if data.dtype.kind in "iub":  # the float64 mean, as np.mean: 64-bit sums would wrap around
            data = data.astype(np.float64)
        elif data.dtype.kind == "f" and data.dtype.itemsize < 4:  # float16: sums and lengths in float32
            data = data.astype(np.float32)
        total = self._reduceat(np.add, data, offsets, 0)
        shape = (-1,) + (1,) * (data.ndim - 1)
        out = total.astype(total.dtype if total.dtype.kind in "fc" else np.float64, copy=False)  # ours: in place
        np.divide(out, np.maximum(lengths, 1).reshape(shape).astype(out.dtype), out=out)
        if empty != 0:
            out[lengths == 0] = empty
        return out.astype(result, copy=False)

    def segment_max(self, data, offsets, *, empty, ids=None):
        return self._reduceat(np.maximum, data, offsets, empty)

    def segment_min(self, data, offsets, *, empty, ids=None):
        return self._reduceat(np.minimum, data, offsets, empty)

    def segment_softmax(self, data, offsets, *, ids=None):
        return self._softmax(data, offsets)

    def _softmax(self, data, offsets, owner=None):  # owner: the object offsets view (keys cached plans)
        lengths = np.diff(offsets)
        if data.dtype.kind in "biu":  # integers and bools as float (the CuPy backend's dtype: float64 from 32 bits)
            data = data.astype(np.result_type(data.dtype, np.float32))
        if data.shape[0] == 0:  # float16 stays float16, as with rows
            return data.copy()
        if lengths.all() and data.size // data.shape[0] < _tuning.CSR_ROW:
            # the common case (a few scores per row, no empty sequence): reduceat straight, into
            # one result, on a few threads from 1 MiB (reduceat and the ufuncs release the GIL)
            out = _pool.empty(data.shape, data.dtype)
            # softmax is shift-invariant per sequence: where all values span less than exp's range,
            # one shift serves every sequence (two SIMD passes instead of a reduceat and a repeat;
            # the same for any split over threads). NaN and inf fail the test.
            top = data.max() if data.size else 0
            with np.errstate(invalid="ignore"):  # (-inf - -inf: NaN, silently, as torch's; below too)
                shared = bool(data.size and top - data.min() <= _tuning.SOFTMAX_SPAN.get(data.dtype.char, -1))

            def work(lo, hi):
                a, b = int(offsets[lo]), int(offsets[hi])
                x, o, part = data[a:b], out[a:b], lengths[lo:hi]
                starts = offsets[lo:hi] - a
                with np.errstate(invalid="ignore"):
                    if shared:
                        np.subtract(x, top, out=o)
                    else:
                        np.subtract(x, np.repeat(np.maximum.reduceat(x, starts, axis=0), part, axis=0), out=o)
                np.exp(o, out=o)
                inverse = np.add.reduceat(o, starts, axis=0)  # one reciprocal per sequence, then a
                np.reciprocal(inverse, out=inverse)  # multiply per row (as torch): cheaper than a divide
                np.multiply(o, np.repeat(inverse, part, axis=0), out=o)

            _run_split(work, offsets, out.nbytes, min_bytes=_tuning.SOFTMAX_PARALLEL_BYTES)
            return out
        # wide rows: two passes over cache-sized blocks of rows, each block's segment values
        # gathered into a scratch buffer (no full-size temporaries of repeated maxima or sums)
        peak = self._reduceat(np.maximum, data, offsets, 0, owner=owner)
        ids = np.repeat(np.arange(lengths.size, dtype=_INT64), lengths)
        out = np.empty(data.shape, dtype=np.result_type(data.dtype, peak.dtype))
        row_bytes = max(1, out.itemsize * (out.size // out.shape[0]))
        step = max(1, _tuning.SOFTMAX_BLOCK_BYTES // row_bytes)

        def blocks(per_segment, lo, hi, apply):
            tmp = _scratch("softmax", (min(step, hi - lo),) + out.shape[1:], out.dtype)
            for a in range(lo, hi, step):
                b = min(hi, a + step)
                per_segment.take(ids[a:b], axis=0, out=tmp[: b - a])
                apply(a, b, tmp[: b - a])

        def shift_exp(a, b, tmp):
            with np.errstate(invalid="ignore"):  # (a column of -inf: -inf - -inf is NaN, silently, as torch's)
                np.subtract(data[a:b], tmp, out=out[a:b])
            np.exp(out[a:b], out=out[a:b])

        def scale(a, b, tmp):
            out[a:b] *= tmp

        _run_split(lambda lo, hi: blocks(peak, int(offsets[lo]), int(offsets[hi]), shift_exp), offsets, out.nbytes)
        wide = out.dtype.itemsize >= 4  # (float16 sums in float32: segment_sum's way)
        inverse = self._reduceat(np.add, out, offsets, 0, owner=owner) if wide else self.segment_sum(out, offsets)
        with np.errstate(divide="ignore"):  # only empty sequences sum to 0, and they have no rows
            np.reciprocal(inverse, out=inverse)
        _run_split(lambda lo, hi: blocks(inverse, int(offsets[lo]), int(offsets[hi]), scale), offsets, out.nbytes)
        return out

    # -- dense <-> flat ----------------------------------------------------------------------
    def place_rows(self, data, index, shape, pad_value, *, out=None):
        full = tuple(shape) + tuple(data.shape[1:])
        if out is None:
            if _zero_bits(pad_value):
                out = np.zeros(full, dtype=data.dtype)
            else:
                out = np.empty(full, dtype=data.dtype)
                out[...] = pad_value
        else:
            out[...] = pad_value
        if data.shape[0] == 0:
            return out
        flat = out.reshape((math.prod(shape),) + tuple(data.shape[1:]))  # not -1: rows may have no element
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
        cut = truncation(offsets, maxlen) if plan is None else None  # (a plan is made for a maxlen that fits)
        if cut is not None:  # a sequence longer than maxlen keeps its first maxlen rows (as the CuPy kernel)
            data, offsets, plan = self.gather(data, cut[0]), cut[1], None
        row_shape = data.shape[1:]
        shape = (n, maxlen) + row_shape
        index, groups = plan if plan is not None else (pad_index(offsets, maxlen), None)
        zero = _zero_bits(pad_value)
        if out is None and groups is not None and _pool.pools(shape, data.dtype):
            out, tails_done = _pool.empty(shape, data.dtype), False  # tails filled: no page faults
        elif out is None:
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

    def unpad(self, padded, offsets, *, plan=None, total=None):
        n, maxlen = padded.shape[:2]
        row_shape = padded.shape[2:]
        if plan is None and padded.nbytes <= _tuning.UNPAD_MASK_BYTES and not padded.dtype.hasobject:
            return padded[unpad_mask(offsets, maxlen)]  # small: NumPy's boolean index (no index, no rows view)
        index = plan[0] if plan is not None else pad_index(offsets, maxlen, unpad=True)
        flat = np.ascontiguousarray(padded).reshape((n * maxlen,) + row_shape)
        out = _pool.empty((index.size,) + row_shape, padded.dtype)
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

