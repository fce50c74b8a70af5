"""LoDTensor indexing beyond the fast paths: slices, negative and array indices, errors.

``LoDTensor.__getitem__`` answers one top-level sequence of a fitting tensor
itself (the common case, kept in ``tensor.py``); everything else comes here.
An index is read as NumPy reads one: a NumPy integer and a 0-d integer array
or tensor (``t[torch.tensor(1)]``, ``t[np.array(1)]``) are ``t[1]``; a 0-d
float index raises IndexError, and a bool (Python, NumPy or a 0-d tensor)
raises TypeError, as a bool is never a sequence number here.
"""

import copy
import operator

import numpy as np

from ._format import preview
from .backend import backend_name_of, get_backend

# Integer indexing of a multi-level tensor builds the LoD's cached split after this many calls.
_SPLIT_AFTER = 8


def split_for_indexing(lod):
    """``lod``'s split for integer indexing, built once indexing has been repeated; else None. (The caller's
    snapshot of the lod: a tensor's ``_lod`` read again could be another thread's ``set_lod()`` since.)"""
    cache = lod._cached()
    calls = cache.get("int_index_calls", 0) + 1
    cache["int_index_calls"] = calls
    return lod.split_cached() if calls > _SPLIT_AFTER else None

__all__ = ["getitem", "scalar_index", "split_for_indexing"]


def _dtype_kind(x):
    """``'b'``, ``'i'``/``'u'``, ``'f'``, ``'c'`` for a NumPy, CuPy or torch dtype (torch is never imported)."""
    dtype = x.dtype
    kind = getattr(dtype, "kind", None)
    if kind is not None:
        return kind
    name = str(dtype)  # torch: torch.bool, torch.int64, torch.uint8, torch.float32, torch.complex64...
    if name == "torch.bool":
        return "b"
    if getattr(dtype, "is_complex", False):
        return "c"
    if getattr(dtype, "is_floating_point", False):
        return "f"
    return "i"


def scalar_index(index, what="index"):
    """``index`` as a Python int when it is one integer (int, NumPy integer, 0-d integer array or tensor).

    Anything that is not a single value is returned unchanged (slices, lists,
    1-D arrays). A bool, a 0-d bool array or tensor, raises TypeError; a float
    or 0-d float array or tensor raises IndexError, as NumPy's indexing does.

    >>> import numpy as np
    >>> scalar_index(np.array(2)), scalar_index(np.int32(-1)), scalar_index(slice(1, 2))
    (2, -1, slice(1, 2, None))
    >>> scalar_index(np.array(1.0))
    Traceback (most recent call last):
    ...
    IndexError: only integers, slices and integer or boolean arrays are valid indices, got a 0-d float64 index 1.0
    """
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(
            f"LoDTensor indices must be an int, a slice or a 1-D array of sequence indices, "
            f"got the boolean {index!r}"
        )
    if isinstance(index, (int, np.integer)):
        return int(index)
    if isinstance(index, (float, np.floating)):
        raise IndexError(
            f"only integers, slices and integer or boolean arrays are valid indices, got the float {index!r}"
        )
    if getattr(index, "ndim", None) != 0 or not hasattr(index, "dtype"):
        return index
    kind = _dtype_kind(index)
    value = index.item() if hasattr(index, "item") else index
    if kind == "b":
        raise TypeError(
            f"LoDTensor indices must be an int, a slice or a 1-D array of sequence indices, "
            f"got a 0-d boolean {what} {value!r}"
        )
    if kind not in "iu":
        raise IndexError(
            f"only integers, slices and integer or boolean arrays are valid indices, got a 0-d "
            f"{str(index.dtype).replace('torch.', '')} {what} {value!r}"
        )
    return operator.index(index)


def getitem(t, index):
    """``t[index]`` for slices, ints, 1-D int or bool arrays; clear errors for the rest."""
    t = copy.copy(t)  # the data and lod read once: another thread's set_lod() midway must not mix two lods
    levels = t._lod._levels
    data = t._check_fits("indexing")
    if not levels:
        return data[index]
    n = levels[0].shape[0] - 1
    if isinstance(index, slice):
        start, stop, step = index.indices(n)
        if step == 1:
            stop = max(start, stop)
            lod, a, b = t._lod.slice(start, stop)
            return t._new(data[a:b], lod)
        index = np.arange(start, stop, step)
    index = scalar_index(index)
    if isinstance(index, int):
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for {n} top-level sequences")
        lod, a, b = t._lod.child(i % n)
        return t._new(data[a:b], lod)
    if isinstance(index, tuple):
        raise TypeError(
            f"LoDTensor indices must be an int, a slice or a 1-D array of sequence "
            f"indices, got the tuple {index!r}; index one level at a time: t[i][j]"
        )
    return _select(t, index, n)


def _select(t, index, n):
    """Copy of the top-level sequences ``index`` (1-D ints or bools; a device array is read to the host)."""
    library = backend_name_of(index)
    idx = np.asarray(index) if library in (None, "numpy") else get_backend(library).to_numpy(index)
    if idx.dtype == bool:
        if idx.shape != (n,):
            raise IndexError(f"boolean index must have shape ({n},), got {idx.shape}")
        idx = np.flatnonzero(idx)
    # an empty list reads as float64 in NumPy and selects nothing; an empty float array is refused, as NumPy does
    if idx.ndim != 1 or (idx.dtype.kind not in "iu" and (idx.size or library is not None)):
        raise IndexError(f"index must be a 1-D array of sequence indices, got {preview(idx)} ({idx.dtype})")
    # checked before the cast: uint64 past int64 would wrap to a negative, in-range index
    bad = (idx >= n) if idx.dtype.kind == "u" else (idx < -n) | (idx >= n)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise IndexError(f"index[{j}]={idx[j]} is out of range for {n} top-level sequences")
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + n, idx)
    lod, rows = t._lod.select(idx)
    be = t.backend
    return t._new(be.gather(t._data, be.from_host(rows, like=t._data)), lod)
