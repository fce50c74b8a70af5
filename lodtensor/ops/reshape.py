"""Ops that change the shape of the rows or of the sequences: pad, unpad,
reshape, enumerate, mask."""

import numpy as np

from .. import _dense
from .._dense import check_fill
from ..backend import backend_name_of, backend_of
from ..errors import LoDError
from ..factories import _unpadded
from ..lod import LoD, as_lengths, lengths_to_offsets, offsets_to_segment_ids
from ..tensor import LoDTensor
from ._common import as_data, host_ints, int_arg, require_lod, wrap
from ._rows import on_host, per_row

__all__ = ["pad", "unpad", "reshape_rows", "enumerate_windows", "mask"]


def pad(x, pad_value=0, maxlen=None, where="sequence_pad()"):
    """Pad the last-level sequences: ``(padded, lengths)`` as LoDTensors keeping the outer levels."""
    x = require_lod(x, where)
    if isinstance(pad_value, LoDTensor):
        pad_value = pad_value.data
    be = x.backend
    padded, lengths = _dense.pad_level(be, x.data, x.lod, -1, pad_value, maxlen, None, where=where)
    outer = x.lod.head(x.lod_level - 1)  # the LoD's cached outer levels: no LoD built per result
    return wrap(padded, outer), wrap(lengths, outer)


def unpad(x, length, where="sequence_unpad()"):
    """Inverse of :func:`pad`: the first ``length[i]`` rows of every padded sequence."""
    data = as_data(x, where, "x")
    lens = as_lengths(host_ints(length, where, "length"), name=f"{where}: length")
    if data.ndim < 2:
        raise ValueError(f"{where}: x must have shape (sequences, maxlen, ...), got {tuple(data.shape)}")
    n, maxlen = int(data.shape[0]), int(data.shape[1])
    if lens.size != n:
        raise ValueError(f"{where}: length must have one entry per padded sequence of x ({n}), got {lens.size}")
    if lens.size and lens.max() > maxlen:
        j = int(np.argmax(lens > maxlen))
        raise ValueError(f"{where}: length[{j}]={int(lens[j])} exceeds x's padded length {maxlen} (its axis 1)")
    result = _unpadded(data, lens)  # data and lens checked above
    if isinstance(x, LoDTensor) and x.lod_level:
        lod = LoD._from_valid(x.lod.levels + result.lod.levels)
        return wrap(result.data, lod)
    return result


def reshape_rows(x, new_dim, where="sequence_reshape()"):
    """Rows of width ``D`` re-cut to width ``new_dim`` inside every sequence.

    A sequence of ``L`` rows becomes ``L * D / new_dim`` rows; every sequence
    must hold a multiple of ``new_dim`` values.
    """
    x = require_lod(x, where)
    new_dim = int_arg(new_dim, where, "new_dim", 1)
    if x.data.ndim != 2:
        raise ValueError(f"{where}: input must be 2-D (rows, width), got shape {tuple(x.data.shape)}")
    width = int(x.data.shape[1])
    values = x.lod.lengths(-1) * width
    bad = values % new_dim != 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where}: new_dim={new_dim} must divide the values of every sequence, but sequence {i} "
            f"holds {x.lod.lengths(-1)[i]} rows x {width} = {values[i]} values"
        )
    lengths = values // new_dim
    return wrap(x.data.reshape(-1, new_dim), x.lod.levels[:-1] + (lengths_to_offsets(lengths),))


def enumerate_windows(x, win_size, pad_value=0, where="sequence_enumerate()"):
    """Row ``r`` becomes the ``win_size`` ids starting at ``r`` within its sequence,
    ``pad_value`` past the end; same lod."""
    x = require_lod(x, where)
    win_size = int_arg(win_size, where, "win_size", 1)
    data = x.data
    if data.ndim > 2 or (data.ndim == 2 and data.shape[1] != 1):
        raise ValueError(f"{where}: input must have shape (rows,) or (rows, 1), got {tuple(data.shape)}")
    check_fill(pad_value, data.dtype, where)
    n = int(data.shape[0])
    be = x.backend
    flat = data.reshape(-1)
    if n == 0:  # before the (rows, win_size) index: no window to build, whatever win_size
        return x.with_data(flat.reshape(0, win_size))
    offsets = x.lod.offsets(-1)
    if on_host(be, flat):
        ends = offsets[1:][offsets_to_segment_ids(offsets)]
        index = np.arange(n, dtype=np.int64)[:, None] + np.arange(win_size, dtype=np.int64)
        outside = index >= ends[:, None]
        picked = be.gather(flat, be.from_host(np.minimum(index, n - 1).ravel(), like=flat)).reshape(n, win_size)
        outside = be.from_host(outside, like=picked)
    else:  # on the device: no host pass over the rows of a fresh LoD (a row outside reads its own row)
        rows = be.arange(n, like=flat)
        index = rows[:, None] + be.from_host(np.arange(win_size, dtype=np.int64), like=flat)
        outside = index >= per_row(be, offsets[1:], x.lod.lengths(-1), flat)[:, None]
        picked = be.gather(flat, be.where(outside, rows[:, None], index).reshape(-1)).reshape(n, win_size)
    return x.with_data(be.astype(be.where(outside, pad_value, picked), picked.dtype))


def mask(x, maxlen=None, dtype="int64", where="sequence_mask()"):
    """``out[..., j] = j < x[...]`` with ``maxlen`` columns (default ``max(x)``).

    A 0-d ``x`` (one length, as Paddle takes it) gives one mask row of shape ``(maxlen,)``.
    """
    data = _zero_d_lengths(x)
    if data is None:
        data = as_data(x, where, "x")
    be = backend_of(data)
    host = be.to_numpy(data)
    if host.dtype.kind not in "iu":
        raise TypeError(f"{where}: x must hold integer lengths, got {host.dtype}")
    if host.size and host.min() < 0:
        raise LoDError(f"{where}: lengths must be non-negative, got {host.ravel()[np.argmin(host.ravel())]}")
    if maxlen is None:
        maxlen = int(host.max()) if host.size else 0
    else:
        maxlen = int_arg(maxlen, where, "maxlen", 0)
    if host.size:
        if host.dtype.kind == "u":  # in int64 (torch compares no uint16/32/64 with it); past maxlen is as long
            data = be.from_host(np.minimum(host, maxlen).astype(np.int64), like=data)
        out = be.astype(be.arange(maxlen, like=data) < data[..., None], dtype)
    else:  # no lengths: an empty mask of maxlen columns, without an arange of maxlen values
        out = be.astype(be.zeros(tuple(host.shape) + (maxlen,), bool, like=data), dtype)
    if isinstance(x, LoDTensor):
        return x.with_data(out)
    return out


def _zero_d_lengths(x):
    """``x`` as an array when it is one 0-d length (a 0-d array or a Python number), else None: a mask
    has no rows axis, so the rule that axis 0 holds the rows does not apply to a single length."""
    if isinstance(x, (LoDTensor, str, bytes)):
        return None
    if backend_name_of(x) is not None:
        return x if getattr(x, "ndim", None) == 0 else None
    return np.asarray(x) if np.ndim(x) == 0 else None
