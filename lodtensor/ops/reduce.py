"""Segment reductions over the sequences of one lod level: pool, softmax."""

import numpy as np

from ._common import level_index, require_lod, wrap

__all__ = ["pool", "softmax", "POOL_TYPES"]


def _edge_rows(be, data, offsets, n, pad_value, pick):
    if data.shape[0] == 0:  # every sequence is empty
        return be.place_rows(data, be.asarray(np.zeros(0, np.int64)), (n,), pad_value)
    index = np.clip(pick(offsets), 0, data.shape[0] - 1)
    return be.gather(data, be.asarray(index))


def _sqrt(be, data, offsets, n, pad_value):
    mean = be.segment_mean(data, be.asarray(offsets))
    scale = np.sqrt(np.diff(offsets)).reshape((-1,) + (1,) * (data.ndim - 1))
    return mean * be.astype(be.asarray(scale), mean.dtype)


# pool_type -> kernel(be, data, host offsets, number of sequences, pad_value)
_POOLS = {
    "sum": lambda be, data, offsets, n, pad: be.segment_sum(data, be.asarray(offsets)),
    "average": lambda be, data, offsets, n, pad: be.segment_mean(data, be.asarray(offsets)),
    "sqrt": _sqrt,
    "max": lambda be, data, offsets, n, pad: be.segment_max(data, be.asarray(offsets), empty=pad),
    "min": lambda be, data, offsets, n, pad: be.segment_min(data, be.asarray(offsets), empty=pad),
    "first": lambda be, data, offsets, n, pad: _edge_rows(be, data, offsets, n, pad, lambda o: o[:-1]),
    "last": lambda be, data, offsets, n, pad: _edge_rows(be, data, offsets, n, pad, lambda o: o[1:] - 1),
}
POOL_TYPES = tuple(_POOLS)


def _require_float(x, where):
    dtype = x.dtype
    floating = dtype.kind in "fc" if hasattr(dtype, "kind") else (dtype.is_floating_point or dtype.is_complex)
    if not floating:
        raise TypeError(f"{where}: input must have a floating dtype, got {dtype}")


def pool(x, pool_type="sum", *, level=-1, pad_value=0.0, where="sequence_pool()"):
    """One row per sequence of ``level``: the reduction of its rows.

    Empty sequences give ``pad_value``. The result keeps the levels above
    ``level``; ``level`` and the levels below it are gone.
    """
    require_lod(x, where)
    kind = pool_type.lower() if isinstance(pool_type, str) else pool_type
    if kind not in _POOLS:
        raise ValueError(f"{where}: pool_type must be one of {', '.join(POOL_TYPES)}, got {pool_type!r}")
    if np.ndim(pad_value) != 0:
        raise ValueError(f"{where}: pad_value must be a scalar, got shape {np.shape(pad_value)}")
    k = level_index(x, level, where)
    offsets = x.lod.absolute_offsets(k)
    n = offsets.size - 1
    be = x.backend
    out = _POOLS[kind](be, x.data, offsets, n, pad_value)
    empty = offsets[1:] == offsets[:-1]
    if kind not in ("max", "min") and empty.any():
        out = be.fill_rows(out, empty, pad_value)
    return wrap(out, x.lod.levels[:k])


def softmax(x, *, level=-1, where="sequence_softmax()"):
    """Softmax over the rows of each sequence of ``level`` (per column); same lod."""
    require_lod(x, where)
    _require_float(x, where)
    k = level_index(x, level, where)
    be = x.backend
    return x.with_data(be.segment_softmax(x.data, be.asarray(x.lod.absolute_offsets(k))))
