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
import math

import cupy
import numpy as np

from .._contract import Backend
from . import _launch
from . import cuda as _cuda
from ._arrays import CupyArrayKernels

__all__ = ["CupyBackend", "make_backend"]

def _on_data_device(method):
    """Run ``method`` with the first array's device current (kernels launch on the current device)."""

    @functools.wraps(method)  # keeps the signature the contract test reads
    def run(self, data, *args, **kwargs):
        with data.device:
            return method(self, data, *args, **kwargs)

    return run


def _alloc(shape, dtype):
    return cupy.empty(shape, dtype=dtype)


_INT64 = np.dtype(np.int64)
_NATIVE = {}  # a dtype name -> its dtype (native byte order, as the kernels read it)


def _rows(data, native, rows, width):
    """``data`` as the kernels' contiguous ``[rows, width]`` of dtype name ``native``: ``data`` itself where
    it is one (``ascontiguousarray`` and ``reshape`` would give a new array object of the same memory,
    shape and strides). (The dtype compared, not its name: ">f4" is named "float32" too.)"""
    dtype = _NATIVE.get(native)
    if dtype is None:
        dtype = _NATIVE[native] = np.dtype(native)
    if data.ndim == 2 and data.dtype == dtype and data.flags.c_contiguous:
        return data
    return cupy.ascontiguousarray(data, dtype=native).reshape(rows, width)


def _shaped(out, shape, dtype):
    """``out.reshape(shape).astype(dtype, copy=False)``, with no new array object where it is both already."""
    if out.shape == shape and out.dtype == dtype:
        return out
    return out.reshape(shape).astype(dtype, copy=False)


class CupyBackend(CupyArrayKernels, Backend):  # CupyArrayKernels: the functions beyond the kernel set
    name = "cupy"
    xp = cupy

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
        if type(offsets) is cupy.ndarray and offsets.dtype == _INT64 and offsets.flags.c_contiguous:
            return offsets  # (what the two calls below return for it: a LoD's device offsets, every op)
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
        out = out.copy()
        add_at = getattr(cupy.add, "at", None)  # CuPy 13+: cupyx.scatter_add is deprecated there
        if add_at is None:
            import cupyx  # noqa: PLC0415 - part of cupy

            add_at = cupyx.scatter_add
        add_at(out, self._index(index), values)
        return out

    def concat(self, arrays):
        return cupy.concatenate(list(arrays), axis=0)

    def divide_rows(self, x, divisor):
        x /= divisor.reshape((-1,) + (1,) * (x.ndim - 1))
        return x

    def fill_rows(self, x, mask, value):
        shape = (-1,) + (1,) * (x.ndim - 1)
        mask = cupy.asarray(mask).reshape(shape)
        return cupy.where(mask, cupy.asarray(value, dtype=x.dtype), x)

    def astype(self, x, dtype):
        return x.astype(np.dtype(dtype), copy=False)

    def arange(self, n, *, like=None):
        return cupy.arange(n, dtype=cupy.int64)

    # -- segment reductions ------------------------------------------------------------------
    def wants_segment_ids(self, like):
        return False  # the kernels find each piece's sequence themselves

    def wants_host_plan(self, like):
        return False  # the kernels plan on the device

    def _reduce(self, op, data, offsets, empty):
        with data.device:
            return self._reduce_here(op, data, offsets, empty)

    def _reduce_here(self, op, data, offsets, empty):
        owner, offsets = offsets, self._index(offsets)  # (a LoD's frozen copy keeps its plan: _launch.plan)
        n = int(offsets.size) - 1
        row_shape = tuple(data.shape[1:])
        native = _cuda.compute_dtype(data.dtype)
        result = data.dtype if op != "mean" or data.dtype.kind == "f" else np.dtype(np.float64)
        rows, width = int(data.shape[0]), math.prod(row_shape)  # (np.prod: microseconds per call)
        if n <= 0 or width == 0:
            return cupy.empty((max(n, 0),) + row_shape, dtype=result)
        out = _launch.segment_reduce(cupy, op, _rows(data, native, rows, width), offsets, n, empty, _alloc, owner)
        return _shaped(out, (n,) + row_shape, result)

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
        owner, offsets = offsets, self._index(offsets)
        n = int(offsets.size) - 1
        result = data.dtype if data.dtype.kind == "f" else np.result_type(data.dtype, np.float32)
        rows, width = int(data.shape[0]), math.prod(data.shape[1:])
        if rows == 0 or width == 0 or n <= 0:
            return data.astype(result, copy=True)
        x = _rows(data, _cuda.compute_dtype(data.dtype), rows, width)
        out = _launch.segment_softmax(cupy, x, offsets, n, _alloc, owner)
        return _shaped(out, data.shape, result)

    # -- dense <-> flat ----------------------------------------------------------------------
    def place_rows(self, data, index, shape, pad_value, *, out=None):
        full = tuple(shape) + tuple(data.shape[1:])
        if out is None:
            out = cupy.empty(full, dtype=data.dtype)
        out[...] = cupy.asarray(pad_value, dtype=data.dtype)
        if data.shape[0]:
            out.reshape((math.prod(shape),) + tuple(data.shape[1:]))[self._index(index)] = data  # rows may be empty
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
        x = cupy.ascontiguousarray(data).reshape(-1, width).view(word)
        # the pad row on the device (a device pad_value stays there: no sync)
        fill = cupy.ascontiguousarray(cupy.broadcast_to(cupy.asarray(pad_value, dtype=data.dtype), row_shape))
        _launch.pad(cupy, x, offsets, n, int(maxlen), fill.reshape(width).view(word),
                    dense.reshape(n, int(maxlen), width).view(word))
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
        owner, offsets = offsets, self._index(offsets)
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
        flat = cupy.ascontiguousarray(padded).reshape(n, maxlen, width).view(word)
        out = _launch.unpad(cupy, flat, offsets, n, n_rows, _alloc, owner)
        return out.view(padded.dtype).reshape((n_rows,) + row_shape)


def make_backend():
    return CupyBackend()
