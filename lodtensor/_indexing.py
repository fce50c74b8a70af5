"""LoDTensor indexing beyond the fast paths: slices, negative and array indices, errors.

``LoDTensor.__getitem__`` answers one top-level sequence of a fitting tensor
itself (the common case, kept in ``tensor.py``); everything else comes here.
"""

import numpy as np

from ._format import preview

__all__ = ["getitem"]


def getitem(t, index):
    """``t[index]`` for slices, ints, 1-D int or bool arrays; clear errors for the rest."""
    levels = t._lod._levels
    data = t._check_fits("indexing")
    if not levels:
        return data[index]
    n = levels[0].shape[0] - 1
    if isinstance(index, slice):
        start, stop, step = index.indices(n)
        if step == 1:
            stop = max(start, stop)
            if start == stop:
                raise IndexError(
                    f"slice {index} selects no sequence of {n}; a LoD level needs at least one"
                )
            lod, a, b = t._lod.slice(start, stop)
            return t._new(data[a:b], lod)
        index = np.arange(start, stop, step)
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(
            f"LoDTensor indices must be an int, a slice or a 1-D array of sequence indices, "
            f"got the boolean {index!r}"
        )
    if isinstance(index, (int, np.integer)):
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
    """Copy of the top-level sequences ``index`` (1-D ints or bools)."""
    idx = np.asarray(index)
    if idx.dtype == bool:
        if idx.shape != (n,):
            raise IndexError(f"boolean index must have shape ({n},), got {idx.shape}")
        idx = np.flatnonzero(idx)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise IndexError(f"index must be a 1-D array of sequence indices, got {preview(idx)} ({idx.dtype})")
    if idx.size == 0:
        raise IndexError("index selects no sequence; a LoD level needs at least one")
    idx = idx.astype(np.int64)
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise IndexError(f"index[{j}]={idx[j]} is out of range for {n} top-level sequences")
    idx = np.where(idx < 0, idx + n, idx)
    lod, rows = t._lod.select(idx)
    be = t.backend
    return t._new(be.gather(t._data, be.from_host(rows, like=t._data)), lod)
