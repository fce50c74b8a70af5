"""CuPy kernels (GPU). cupy is imported only here, on first use of the backend.

Segment reductions are one elementwise-kernel launch each: one thread per
(sequence, column) walks the rows of its sequence, so neighbouring threads read
neighbouring columns (coalesced). Offsets are validated on the host before
they reach a kernel (see ``lodtensor.lod``); here they are only copied to the
device. No kernel reads a device scalar back to the host.
"""

import cupy
import numpy as np

from ._arrays import CupyArrayKernels
from ._base import Backend

__all__ = ["CupyBackend", "make_backend"]

_SEGMENT_BODY = """
    const long long s = i / D;
    const long long c = i % D;
    const long long a = off[s];
    const long long b = off[s + 1];
    if (a == b) {
        out = empty;
    } else {
        T acc = x[a * D + c];
        for (long long r = a + 1; r < b; ++r) {
            const T v = x[r * D + c];
            acc = REDUCE(acc, v);
        }
        out = acc;
    }
"""


def _segment_kernel(name, reduce):
    return cupy.ElementwiseKernel(
        "raw T x, raw int64 off, int64 D, T empty",
        "T out",
        _SEGMENT_BODY.replace("REDUCE(acc, v)", reduce),
        name,
    )


_KERNELS = {
    "sum": _segment_kernel("lodtensor_segment_sum", "acc + v"),
    "max": _segment_kernel("lodtensor_segment_max", "(v > acc ? v : acc)"),
    "min": _segment_kernel("lodtensor_segment_min", "(v < acc ? v : acc)"),
}


class CupyBackend(CupyArrayKernels, Backend):  # CupyArrayKernels: the functions beyond the kernel set
    name = "cupy"
    xp = cupy
    uses_segment_ids = True

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
        return cupy.asarray(offsets, dtype=cupy.int64)

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
    def _segment(self, kind, data, offsets, empty):
        offsets = self._index(offsets)
        n = offsets.size - 1
        row_shape = data.shape[1:]
        width = int(np.prod(row_shape, dtype=np.int64))
        out = cupy.empty((n,) + row_shape, dtype=data.dtype)
        if out.size == 0:
            return out
        x = cupy.ascontiguousarray(data)
        _KERNELS[kind](x, offsets, width, data.dtype.type(empty), out.reshape(n * width) if width else out)
        return out

    def segment_sum(self, data, offsets, *, ids=None):
        return self._segment("sum", data, offsets, 0)

    def segment_mean(self, data, offsets, *, empty=0, ids=None):
        offsets = self._index(offsets)
        total = self.segment_sum(data, offsets)
        if total.dtype.kind not in "fc":
            total = total.astype(cupy.float64)
        lengths = (offsets[1:] - offsets[:-1]).reshape((-1,) + (1,) * (data.ndim - 1))
        out = total / cupy.maximum(lengths, 1).astype(total.dtype)
        if empty != 0:
            out = cupy.where(lengths == 0, cupy.asarray(empty, dtype=out.dtype), out)
        return out

    def segment_max(self, data, offsets, *, empty, ids=None):
        return self._segment("max", data, offsets, empty)

    def segment_min(self, data, offsets, *, empty, ids=None):
        return self._segment("min", data, offsets, empty)

    def segment_softmax(self, data, offsets, *, ids=None):
        offsets = self._index(offsets)
        n_rows = data.shape[0]
        if n_rows == 0:
            return data.astype(np.result_type(data.dtype, np.float32), copy=True)
        if ids is None:
            ids = self.segment_ids(offsets, total=n_rows)
        peak = self.segment_max(data, offsets, empty=0)
        shifted = cupy.exp(data - peak[ids])
        total = self.segment_sum(shifted, offsets)
        return shifted / total[ids]

    # -- dense <-> flat ----------------------------------------------------------------------
    def _pad_index(self, offsets, maxlen, n_rows):
        lengths = offsets[1:] - offsets[:-1]
        shift = cupy.arange(lengths.size, dtype=cupy.int64) * maxlen - offsets[:-1]
        ids = self.segment_ids(offsets, total=n_rows)
        return cupy.arange(n_rows, dtype=cupy.int64) + shift[ids]

    def place_rows(self, data, index, shape, pad_value, *, out=None):
        full = tuple(shape) + tuple(data.shape[1:])
        if out is None:
            out = cupy.empty(full, dtype=data.dtype)
        out[...] = cupy.asarray(pad_value, dtype=data.dtype)
        if data.shape[0]:
            out.reshape((-1,) + tuple(data.shape[1:]))[self._index(index)] = data
        return out

    def pad(self, data, offsets, maxlen, pad_value, *, out=None, plan=None):
        offsets = self._index(offsets)
        index = self._pad_index(offsets, maxlen, data.shape[0])
        return self.place_rows(data, index, (offsets.size - 1, maxlen), pad_value, out=out)

    def unpad(self, padded, offsets, *, plan=None):
        offsets = self._index(offsets)
        n, maxlen = padded.shape[:2]
        n_rows = int(offsets[-1])
        index = self._pad_index(offsets, maxlen, n_rows)
        flat = cupy.ascontiguousarray(padded).reshape((n * maxlen,) + tuple(padded.shape[2:]))
        return cupy.take(flat, index, axis=0)


def make_backend():
    return CupyBackend()
