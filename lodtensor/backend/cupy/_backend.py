"""CuPy kernels (GPU). cupy is imported only here, on first use of the backend.

The segment reductions, segment softmax, pad and unpad are the CUDA C kernels of
``lodtensor/backend/cuda/*.cu``, loaded with ``cupy.RawModule`` and picked by
name expression per dtype (``lodtensor.backend.cuda.kernel_name``); the same
instantiations are compiled and resource-checked offline by ``make gpu-check``.
They are written for skewed LoDs: a warp per piece of at most a few hundred rows
(many short sequences per block, long ones split over many warps and combined
by a block-level tree), loads coalesced along the row for any width, empty
sequences defined. Offsets are validated on the host before they reach a
kernel (see ``lodtensor.lod``); here they are only copied to the device, and
sizes come from host shapes, so no op reads the device back (except
``unpad`` and ``segment_ids`` without ``total``, which read the row count).
"""

import functools

import cupy
import numpy as np

from .._contract import Backend
from . import _tuning
from . import cuda as _cuda
from ._arrays import CupyArrayKernels

__all__ = ["CupyBackend", "make_backend"]

_MODULES = {}
_MAX_GRID_X = 2**31 - 1
_MAX_GRID_Y = 65535


def _kernel(module, name):
    """The kernel ``name`` (a name expression of ``module``), compiled once per process."""
    mod = _MODULES.get(module)
    if mod is None:
        mod = cupy.RawModule(code=_cuda.source_text(module), options=("-std=c++14",),
                             name_expressions=_cuda.name_expressions(module))
        _MODULES[module] = mod
    return mod.get_function(name)


def _blocks(items, per_block, cap=_MAX_GRID_X):
    return int(max(1, min(-(-int(items) // per_block), cap)))


class _Layout:
    """Launch geometry of the segment kernels for ``rows`` x ``width`` data in ``n`` sequences."""

    def __init__(self, rows, width, n):
        self.log2cw = _cuda.lanes_log2(width)
        cw = 1 << self.log2cw
        self.chunk = _cuda.CHUNK_STEPS * (32 >> self.log2cw)  # rows per piece (one warp)
        warps = _cuda.BLOCK // 32
        pieces = n + rows // self.chunk + 1  # bound on sum(max(1, ceil(len / chunk)))
        self.grid = (_blocks(pieces, warps), int(min(-(-width // cw), _MAX_GRID_Y)), 1)
        self.multi = rows > self.chunk  # else no sequence has two pieces: no combine pass
        self.slots = 2 * (rows // self.chunk) + 1  # bound on the pieces of multi-piece sequences
        self.combine_grid = (int(min(max(n, 1), _tuning.COMBINE_BLOCKS)), int(min(-(-width // 32), _MAX_GRID_Y)), 1)


def _on_data_device(method):
    """Run ``method`` with the first array's device current (kernels launch on the current device)."""

    @functools.wraps(method)  # keeps the signature the contract test reads
    def run(self, data, *args, **kwargs):
        with data.device:
            return method(self, data, *args, **kwargs)

    return run


def _plan(offsets, n, chunk):
    """Device prefix sums of the pieces (see segment.cu): two launches, no sync."""
    counts = cupy.empty(2 * (n + 1), dtype=cupy.int64)
    _kernel("segment", "lt_piece_counts")(
        (_blocks(n + 1, _cuda.BLOCK, 4096),), (_cuda.BLOCK,), (offsets, np.int64(n), np.int64(chunk), counts))
    return cupy.cumsum(counts.reshape(2, n + 1), axis=1).ravel()


class CupyBackend(CupyArrayKernels, Backend):  # CupyArrayKernels: the functions beyond the kernel set
    name = "cupy"
    xp = cupy
    uses_segment_ids = False  # the kernels find each piece's sequence themselves

    # -- arrays and transfer -----------------------------------------------------------------
    def asarray(self, obj, dtype=None, *, copy=False):
        if copy:
            return cupy.array(obj, dtype=dtype, copy=True)
        return cupy.asarray(obj, dtype=dtype)

    def to_numpy(self, x):
        return cupy.asnumpy(x)

    def device_of(self, x):
        return f"cuda:{x.device.id}"

    def to_device(self, x, device, *, copy=False):
        if device == "cpu":
            return cupy.asnumpy(x)
        index = int(device.partition(":")[2] or 0)
        with cupy.cuda.Device(index):
            if copy:
                return cupy.array(x, copy=True)
            return cupy.asarray(x)

    def apply_ufunc(self, ufunc, method, *args, **kwargs):
        return getattr(ufunc, method)(*args, **kwargs)  # cupy implements __array_ufunc__

    def is_c_contiguous(self, x):
        return x.flags.c_contiguous

    def _index(self, offsets):
        return cupy.ascontiguousarray(cupy.asarray(offsets, dtype=cupy.int64))

    # -- index helpers -----------------------------------------------------------------------
    def segment_ids(self, offsets, *, total=None):
        offsets = self._index(offsets)
        if total is None:
            total = int(offsets[-1])  # one sync; callers pass total to avoid it
        rows = cupy.arange(total, dtype=cupy.int64)
        return cupy.searchsorted(offsets[1:], rows, side="right")

    def repeat_interleave(self, values, repeats, *, total=None):
        repeats = self._index(repeats)
        offsets = cupy.concatenate([cupy.zeros(1, cupy.int64), cupy.cumsum(repeats)])
        return cupy.take(values, self.segment_ids(offsets, total=total), axis=0)

    def cumsum(self, x, *, exclusive=False):
        out = cupy.cumsum(x, axis=0)
        if exclusive:
            out = cupy.concatenate([cupy.zeros_like(out[:1]), out[:-1]])
        return out

    def gather(self, data, index):
        return cupy.take(data, self._index(index), axis=0)

    def scatter(self, out, index, values):
        out[self._index(index)] = values
        return out

    def scatter_add(self, out, index, values):
        import cupyx  # noqa: PLC0415 - part of cupy

        out = out.copy()
        cupyx.scatter_add(out, self._index(index), values)
        return out

    def concat(self, arrays):
        return cupy.concatenate(list(arrays), axis=0)

    def fill_rows(self, x, mask, value):
        shape = (-1,) + (1,) * (x.ndim - 1)
        mask = cupy.asarray(np.asarray(mask, dtype=bool)).reshape(shape)
        return cupy.where(mask, cupy.asarray(value, dtype=x.dtype), x)

    def astype(self, x, dtype):
        return x.astype(np.dtype(dtype), copy=False)

    def arange(self, n, *, like=None):
        return cupy.arange(n, dtype=cupy.int64)

    # -- segment reductions ------------------------------------------------------------------
    def _reduce(self, op, data, offsets, empty):
        with data.device:
            return self._reduce_here(op, data, offsets, empty)

    def _reduce_here(self, op, data, offsets, empty):
        offsets = self._index(offsets)
        n = int(offsets.size) - 1
        row_shape = tuple(data.shape[1:])
        native = _cuda.compute_dtype(data.dtype)
        acc = np.dtype(_cuda.accumulator(op, native))
        result = data.dtype if op != "mean" or data.dtype.kind == "f" else np.dtype(np.float64)
        rows, width = int(data.shape[0]), int(np.prod(row_shape, dtype=np.int64))
        if n <= 0 or width == 0:
            return cupy.empty((max(n, 0),) + row_shape, dtype=result)
        x = cupy.ascontiguousarray(data, dtype=native)
        out = cupy.empty((n, width), dtype=acc)
        lay = _Layout(rows, width, n)
        plan = _plan(offsets, n, lay.chunk)
        partial = cupy.empty((lay.slots if lay.multi else 1, width), dtype=acc)
        fill = acc.type(empty)
        _kernel("segment", _cuda.kernel_name("reduce", op=op, dtype=native))(
            lay.grid, (_cuda.BLOCK,),
            (x, offsets, plan, out, partial, np.int64(n), np.int64(width), np.int32(lay.log2cw),
             np.int64(lay.chunk), fill))
        if lay.multi:
            _kernel("segment", _cuda.kernel_name("combine", op=op, dtype=native))(
                lay.combine_grid, (_cuda.BLOCK,), (offsets, plan, partial, out, np.int64(n), np.int64(width), fill))
        return out.reshape((n,) + row_shape).astype(result, copy=False)

    def segment_sum(self, data, offsets, *, ids=None):
        return self._reduce("sum", data, offsets, 0)

    def segment_mean(self, data, offsets, *, empty=0, ids=None):
        return self._reduce("mean", data, offsets, empty)

    def segment_max(self, data, offsets, *, empty, ids=None):
        return self._reduce("max", data, offsets, empty)

    def segment_min(self, data, offsets, *, empty, ids=None):
        return self._reduce("min", data, offsets, empty)

    @_on_data_device
    def segment_softmax(self, data, offsets, *, ids=None):
        offsets = self._index(offsets)
        n = int(offsets.size) - 1
        result = data.dtype if data.dtype.kind == "f" else np.result_type(data.dtype, np.float32)
        rows, width = int(data.shape[0]), int(np.prod(data.shape[1:], dtype=np.int64))
        if rows == 0 or width == 0 or n <= 0:
            return data.astype(result, copy=True)
        native = _cuda.compute_dtype(data.dtype)
        acc = np.dtype(_cuda.accumulator("softmax", native))
        x = cupy.ascontiguousarray(data, dtype=native)
        lay = _Layout(rows, width, n)
        plan = _plan(offsets, n, lay.chunk)
        stats = cupy.empty((2, n, width), dtype=acc)  # running max, sum of exp
        partial = cupy.empty((2, lay.slots if lay.multi else 1, width), dtype=acc)
        geometry = (np.int64(n), np.int64(width), np.int32(lay.log2cw), np.int64(lay.chunk))
        _kernel("segment", _cuda.kernel_name("softmax_stats", dtype=native))(
            lay.grid, (_cuda.BLOCK,), (x, offsets, plan, stats[0], stats[1], partial[0], partial[1]) + geometry)
        if lay.multi:
            _kernel("segment", _cuda.kernel_name("softmax_combine", dtype=native))(
                lay.combine_grid, (_cuda.BLOCK,),
                (plan, partial[0], partial[1], stats[0], stats[1], np.int64(n), np.int64(width)))
        out = cupy.empty((rows, width), dtype=acc)
        _kernel("segment", _cuda.kernel_name("softmax_apply", dtype=native))(
            lay.grid, (_cuda.BLOCK,), (x, offsets, plan, stats[0], stats[1], out) + geometry)
        return out.reshape(data.shape).astype(result, copy=False)

    # -- dense <-> flat ----------------------------------------------------------------------
    def place_rows(self, data, index, shape, pad_value, *, out=None):
        full = tuple(shape) + tuple(data.shape[1:])
        if out is None:
            out = cupy.empty(full, dtype=data.dtype)
        out[...] = cupy.asarray(pad_value, dtype=data.dtype)
        if data.shape[0]:
            out.reshape((-1,) + tuple(data.shape[1:]))[self._index(index)] = data
        return out

    @staticmethod
    def _words(dtype, width):
        """(word dtype, words per row) to copy rows of ``dtype`` as; None when no word fits."""
        size = np.dtype(dtype).itemsize
        if size in _cuda.WORDS:
            return np.dtype(f"u{size}"), width
        return None  # complex128, strings: the generic gather/scatter path

    @_on_data_device
    def pad(self, data, offsets, maxlen, pad_value, *, out=None, plan=None):
        offsets = self._index(offsets)
        n = int(offsets.size) - 1
        row_shape = tuple(data.shape[1:])
        full = (n, int(maxlen)) + row_shape
        width = int(np.prod(row_shape, dtype=np.int64))
        words = self._words(data.dtype, width)
        if words is None or n <= 0 or width == 0 or maxlen == 0:
            index = self._pad_index(offsets, maxlen, int(data.shape[0]))
            return self.place_rows(data, index, (n, maxlen), pad_value, out=out)
        word, _ = words
        target = out if out is not None and out.flags.c_contiguous and out.dtype == data.dtype else None
        dense = cupy.empty(full, dtype=data.dtype) if target is None else target
        x = cupy.ascontiguousarray(data).view(word)
        # the pad row on the device (a device pad_value stays there: no sync)
        fill = cupy.ascontiguousarray(cupy.broadcast_to(cupy.asarray(pad_value, dtype=data.dtype), row_shape))
        log2cw = _cuda.lanes_log2(width)
        per_block = _cuda.BLOCK >> log2cw
        _kernel("dense", _cuda.kernel_name("pad", itemsize=word.itemsize))(
            (_blocks(n * int(maxlen), per_block, 1 << 20),), (_cuda.BLOCK,),
            (x, offsets, dense.view(word), np.int64(n), np.int64(maxlen), np.int64(width), np.int32(log2cw),
             fill.reshape(width).view(word)))
        if out is not None and target is None:
            out[...] = dense
            return out
        return dense

    def _pad_index(self, offsets, maxlen, n_rows):
        lengths = offsets[1:] - offsets[:-1]
        shift = cupy.arange(lengths.size, dtype=cupy.int64) * maxlen - offsets[:-1]
        ids = self.segment_ids(offsets, total=n_rows)
        return cupy.arange(n_rows, dtype=cupy.int64) + shift[ids]

    @_on_data_device
    def unpad(self, padded, offsets, *, plan=None, total=None):
        offsets = self._index(offsets)
        n, maxlen = int(padded.shape[0]), int(padded.shape[1])
        row_shape = tuple(padded.shape[2:])
        # the row count: from a host plan when given, else one 8-byte read of the device offsets
        if total is not None:
            n_rows = int(total)
        else:
            n_rows = int(plan[0].size) if plan is not None else (int(offsets[-1]) if offsets.size else 0)
        width = int(np.prod(row_shape, dtype=np.int64))
        words = self._words(padded.dtype, width)
        if words is None or n_rows == 0 or width == 0:
            index = self._pad_index(offsets, maxlen, n_rows)
            flat = cupy.ascontiguousarray(padded).reshape((n * maxlen,) + row_shape)
            return cupy.take(flat, index, axis=0)
        word, _ = words
        out = cupy.empty((n_rows,) + row_shape, dtype=padded.dtype)
        lay = _Layout(n_rows, width, n)
        pieces = _plan(offsets, n, lay.chunk)
        _kernel("dense", _cuda.kernel_name("unpad", itemsize=word.itemsize))(
            lay.grid, (_cuda.BLOCK,),
            (cupy.ascontiguousarray(padded).view(word), offsets, pieces, out.view(word), np.int64(n),
             np.int64(maxlen), np.int64(width), np.int32(lay.log2cw), np.int64(lay.chunk)))
        return out


def make_backend():
    return CupyBackend()
