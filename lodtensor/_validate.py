"""Validation of offsets and lengths: one level at a time, then the rules between levels.

Every check is one vectorised pass; the search for the offending index runs
only on failure. Messages name the level, the index, the value and what was
expected.
"""

import numpy as np

from ._format import preview
from .errors import LoDError

__all__ = ["as_offsets", "as_lengths", "check_levels"]

_INT64 = np.dtype(np.int64)


def _integer_array(values, name):
    """``values`` as a fresh 1-D int64 array; reject floats, bools, ragged and N-d input."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be integers, got {type(values).__name__} {values!r}")
    if isinstance(values, np.ndarray):
        arr = values
    elif hasattr(values, "__array__") or hasattr(values, "__dlpack__"):
        try:
            arr = np.asarray(values)
        except Exception as err:  # torch CUDA tensors, cupy arrays
            raise TypeError(
                f"{name} must be host integers (a list or a NumPy array), got "
                f"{type(values).__name__}; move it to the CPU first"
            ) from err
    else:
        try:
            arr = np.asarray(values)
        except ValueError:
            arr = None
        if arr is None or arr.dtype == object:
            raise TypeError(
                f"{name} must be a flat sequence of integers, got the ragged or mixed "
                f"value {_short(values)}"
            ) from None
        if arr.size == 0:
            arr = arr.astype(_INT64)
    if isinstance(values, (list, tuple)) and bool in set(map(type, values)):
        raise TypeError(f"{name} must hold integers, got booleans in {_short(values)}")
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one list of integers per level), got an array of "
            f"shape {tuple(arr.shape)}: {_short(values)}"
        )
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"{name} must hold integers, got booleans {preview(arr)}")
    if kind not in "iu":
        raise TypeError(
            f"{name} must have an integer dtype (int32 or int64), got {arr.dtype} {preview(arr)}"
        )
    if kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds values beyond int64: {preview(arr)}")
    return np.array(arr, dtype=_INT64, copy=True)


def _is_scalar(value):
    return not isinstance(value, (list, tuple, range, np.ndarray)) and not hasattr(value, "__len__")


def _per_level(levels, name, kind):
    """``levels`` as a list with one entry per lod level; a 1-D array counts as one level."""
    if isinstance(levels, np.ndarray) and levels.ndim == 1:
        return [levels]
    try:
        levels = list(levels)
    except TypeError:
        raise TypeError(f"{name} must be a list of {kind} lists (one per level), got {type(levels).__name__}") from None
    if levels and _is_scalar(levels[0]):
        raise TypeError(
            f"{name} must be a list of {kind} lists (one per level), got a flat list "
            f"{_short(levels)}; did you mean [{_short(levels)}]?"
        )
    return levels


def _short(values):
    text = repr(values)
    return text if len(text) <= 80 else text[:77] + "..."


def as_offsets(values, *, level=None, name="offsets"):
    """Validate one level of offsets on its own and return it as a fresh int64 array.

    Checks the rules that need no other level: integers, 1-D, at least 2
    entries, starts at 0, never decreases. One vectorised pass; the slow search
    for the offending index runs only on failure.

    >>> as_offsets([0, 2, 5]).tolist()
    [0, 2, 5]
    >>> as_offsets([0, 3, 2])
    Traceback (most recent call last):
    ...
    lodtensor.errors.LoDError: lod level must be non-decreasing, but offsets[1]=3 > offsets[2]=2
    """
    where = name if level is None else f"{name} (lod level {level})"
    arr = _integer_array(values, where)
    label = "lod level" if level is None else f"lod level {level}"
    if arr.size < 2:
        raise LoDError(
            f"{label} must have at least 2 offsets (one sequence), got {preview(arr)}",
            level=level,
            index=0,
        )
    if arr[0] != 0:
        raise LoDError(f"{label} must start at 0, got offsets[0]={arr[0]}", level=level, index=0)
    steps = np.diff(arr)
    if steps.size and steps.min() < 0:
        j = int(np.flatnonzero(steps < 0)[0])
        raise LoDError(
            f"{label} must be non-decreasing, but offsets[{j}]={arr[j]} > offsets[{j + 1}]={arr[j + 1]}",
            level=level,
            index=j + 1,
        )
    arr.setflags(write=False)
    return arr


def as_lengths(values, *, level=None, name="lengths"):
    """Validate one level of sequence lengths and return it as a fresh int64 array.

    >>> as_lengths([2, 0, 3]).tolist()
    [2, 0, 3]
    >>> as_lengths([2, -1])
    Traceback (most recent call last):
    ...
    lodtensor.errors.LoDError: lengths must be non-negative, got lengths[1]=-1
    """
    where = name if level is None else f"{name} level {level}"
    arr = _integer_array(values, where)
    if arr.size == 0:
        raise LoDError(f"{where} must hold at least one sequence length, got []", level=level, index=0)
    if arr.min() < 0:
        j = int(np.flatnonzero(arr < 0)[0])
        raise LoDError(f"{where} must be non-negative, got lengths[{j}]={arr[j]}", level=level, index=j)
    return arr


def check_levels(arrays, num_rows=None, *, name="lod"):
    """Check the rules between levels (each level already valid on its own)."""
    for k in range(len(arrays) - 1):
        expected = arrays[k + 1].size - 1
        got = int(arrays[k][-1])
        if got != expected:
            raise LoDError(
                f"{name} level {k} must end at the number of sequences in level {k + 1} "
                f"({expected}), got offsets[-1]={got}"
                if name == "lod"
                else f"{name} level {k} must add up to the number of sequences in level {k + 1} "
                f"({expected}), got sum={got}",
                level=k,
                index=arrays[k].size - 1,
            )
    if num_rows is not None and arrays:
        got = int(arrays[-1][-1])
        if got != num_rows:
            last = len(arrays) - 1
            raise LoDError(
                f"{name} level {last} must end at len(data)={num_rows}, got offsets[-1]={got}"
                if name == "lod"
                else f"{name} level {last} must add up to len(data)={num_rows}, got sum={got}",
                level=last,
                index=arrays[-1].size - 1,
            )
