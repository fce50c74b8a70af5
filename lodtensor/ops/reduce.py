"""Segment reductions over the sequences of one lod level: pool, softmax."""

import numpy as np

from .._compile import mark_rows_dynamic
from .._dense import check_fill
from ..backend import dtype_kind
from ._common import level_index, require_lod, wrap

__all__ = ["pool", "softmax", "POOL_TYPES"]


def _edge_rows(be, data, offsets, n, pad_value, pick):
    if data.shape[0] == 0:  # every sequence is empty
        return be.place_rows(data, be.from_host(np.zeros(0, np.int64), like=data), (n,), pad_value)
    index = np.clip(pick(offsets), 0, data.shape[0] - 1)
    return be.gather(data, be.from_host(index, like=data))


def _sqrt(be, data, offsets, n, pad_value, dev):
    """Paddle's SQRT pool: the sum over the square root of the length, divided in place on NumPy and
    CuPy (a second result array cost page faults: 2x the sum's time on 2,242 x 256 floats)."""
    total = be.segment_sum(data, dev["offsets"], ids=dev["ids"])
    return be.divide_rows(total, dev.lod_array("sqrt_lengths", total.dtype))  # cached per LoD and dtype


# pool_type -> kernel(be, data, host offsets, number of sequences, pad_value, device arrays)
_POOLS = {
    "sum": lambda be, data, offsets, n, pad, dev: be.segment_sum(data, dev["offsets"], ids=dev["ids"]),
    "average": lambda be, data, offsets, n, pad, dev: be.segment_mean(data, dev["offsets"], ids=dev["ids"]),
    "sqrt": _sqrt,
    "max": lambda be, data, offsets, n, pad, dev: be.segment_max(data, dev["offsets"], empty=pad, ids=dev["ids"]),
    "min": lambda be, data, offsets, n, pad, dev: be.segment_min(data, dev["offsets"], empty=pad, ids=dev["ids"]),
    "first": lambda be, data, offsets, n, pad, dev: _edge_rows(be, data, offsets, n, pad, lambda o: o[:-1]),
    "last": lambda be, data, offsets, n, pad, dev: _edge_rows(be, data, offsets, n, pad, lambda o: o[1:] - 1),
}


class _DeviceArrays(dict):
    """The LoD's offsets and segment ids of one level on the data's backend, fetched when first used."""

    def __init__(self, lod, be, level, like):  # (dict's own __init__ has nothing to do: not called)
        self._args = (lod, be, level, like)

    def lod_array(self, what, dtype):
        """``LoD.on(what)`` of this level, on the data's device with ``dtype`` (cached per LoD)."""
        lod, be, level, like = self._args
        return lod.on(be, what, level, like=like, dtype=dtype)

    def __missing__(self, key):
        lod, be, level, like = self._args
        if key == "ids" and not be.wants_segment_ids(like):
            value = None  # this backend's kernels work from the offsets alone
        else:
            value = lod.on(be, "absolute_offsets" if key == "offsets" else "segment_ids", level, like=like)
        self[key] = value
        return value
POOL_TYPES = tuple(_POOLS)
_NUMBERS = (float, int, bool)  # Python scalars: 0-d
# The dtype a pool of integer or bool rows computes in (the others keep the input's): sums as
# torch.sum and np.sum do (int64; bools count), averages as the float mean (NumPy's float64).
_INT_POOL_DTYPE = {"sum": "int64", "average": "float64", "sqrt": "float64"}


def _require_float(x, where):
    if dtype_kind(x.dtype) not in "fc":
        raise TypeError(f"{where}: input must have a floating dtype, got {x.dtype}")


def pool(x, pool_type="sum", *, level=-1, pad_value=0.0, where="sequence_pool()"):
    """One row per sequence of ``level``: the reduction of its rows.

    Empty sequences give ``pad_value``. The result keeps the levels above
    ``level``; ``level`` and the levels below it are gone.
    """
    x = require_lod(x, where)
    kind = pool_type.lower() if isinstance(pool_type, str) else pool_type
    if kind not in _POOLS:
        raise ValueError(f"{where}: pool_type must be one of {', '.join(POOL_TYPES)}, got {pool_type!r}")
    if type(pad_value) not in _NUMBERS and np.ndim(pad_value) != 0:  # (np.ndim: a microsecond a call)
        raise ValueError(f"{where}: pad_value must be a scalar, got shape {np.shape(pad_value)}")
    k = level_index(x, level, where)
    offsets = x.lod.absolute_offsets(k)
    n = offsets.size - 1
    be = x.backend
    data = x.data
    letter = dtype_kind(data.dtype)
    if letter in "biu" and kind in _INT_POOL_DTYPE:  # the same dtype with or without empty sequences
        target = _INT_POOL_DTYPE[kind]
        if kind == "sum" and letter == "u" and data.dtype.itemsize == 8:
            target = "uint64"  # 2**64 - 1 stays itself (int64 would make it -1); native byte order
        data = be.astype(data, target)
    half = letter == "f" and data.dtype.itemsize < 4 and kind == "sqrt"
    if half:  # float16/bfloat16: the sum over the root in float32, one rounding at the end
        data = be.astype(data, "float32")
    check_fill(pad_value, data.dtype, where)
    out = _POOLS[kind](be, data, offsets, n, pad_value, _DeviceArrays(x.lod, be, k, data))
    if half:
        out = be.astype(out, x.data.dtype)
    if kind not in ("max", "min") and x.lod.empty_rows(k):  # cached per LoD: no pass over the offsets per call
        out = be.fill_rows(out, x.lod.on(be, "empty", k, like=out), pad_value)
    return wrap(out, x.lod.head(k))


def softmax(x, *, level=-1, where="sequence_softmax()"):
    """Softmax over the rows of each sequence of ``level`` (per column); same lod."""
    x = require_lod(x, where)
    _require_float(x, where)
    k = level_index(x, level, where)
    be = x.backend
    dev = _DeviceArrays(x.lod, be, k, x.data)
    data = x.data
    if data.dtype.itemsize == 2:  # float16/bfloat16: exp and sums in float32, one rounding at the end (as torch)
        out = be.astype(be.segment_softmax(be.astype(data, "float32"), dev["offsets"], ids=dev["ids"]), data.dtype)
    else:
        out = be.segment_softmax(data, dev["offsets"], ids=dev["ids"])
    # the kernel's rows under x's LoD (x.with_data's checks of outside data: a microsecond a call); rows marked
    # dynamic for torch.compile as with_data marks them
    return wrap(mark_rows_dynamic(out), x.lod)
