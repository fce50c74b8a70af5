"""Token ids checked as ids: integers (never a bool, never a truncated float) that fit their dtype."""

import functools
import numbers
import operator

import numpy as np

from .._data import to_place
from .._format import preview
from .._nested_list import flatten_lists
from ..backend import backend_name_of, get_backend
from ..factories import from_nested_list
from ..lod import LoD
from ..place import as_place
from ..tensor import _wrap

__all__ = ["is_id", "first_non_id", "exact_ids", "id_array", "ids_as", "id_dtype", "batch_ids"]


def is_id(value):
    """Whether ``value`` is one integer id: a Python or NumPy integer, not a bool.

    >>> is_id(3), is_id(np.int32(3)), is_id(True), is_id(3.0)
    (True, True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def first_non_id(items):
    """``(position, item)`` of the first item that is not an integer id (the failure path only)."""
    return next(((i, v) for i, v in enumerate(items) if not is_id(v)), (None, None))


def exact_ids(items):
    """Integer ids as an exact array: int64, else uint64, else Python ints (object); never a float.

    NumPy makes ``float64`` of ``[1, 2**63]`` or of an int64 and a uint64 scalar together, which
    loses ids and would refuse them as "not integers"; here each id is kept as it is.

    >>> exact_ids([1, 2**63]).dtype, exact_ids([np.uint64(1), np.int64(-2)]).tolist()
    (dtype('uint64'), [1, -2])
    """
    ints = list(map(int, items))
    for dtype in (np.int64, np.uint64):
        try:
            return np.fromiter(ints, dtype=dtype, count=len(ints))
        except OverflowError:
            pass
    return np.array(ints, dtype=object)


def id_array(ids, where, name):
    """``ids`` as a 1-D NumPy integer array; a TypeError naming the first id that is not an integer."""
    library = backend_name_of(ids)
    if library is not None:  # a NumPy, torch or CuPy array (on any device)
        arr = get_backend(library).to_numpy(ids)
    elif hasattr(ids, "lod"):  # a LoDTensor: its flat data
        arr = np.asarray(ids)
    elif isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        raise TypeError(f"{where}: {name} must be a flat sequence of integer ids, got {type(ids).__name__} {ids!r}")
    else:
        try:
            arr = np.asarray(ids)
        except (ValueError, OverflowError):
            arr = np.asarray(ids, dtype=object)
        if arr.dtype.kind not in "iu" and arr.size:
            pos, item = first_non_id(list(ids) if arr.ndim == 1 else [])
            if pos is not None:
                raise TypeError(
                    f"{where}: {name} must be integer ids, got {type(item).__name__} {item!r} at position {pos}"
                )
            if arr.ndim == 1:  # ids NumPy made float or object of (beyond int64, int64 with uint64): exact
                return exact_ids(ids)
    if arr.size == 0:
        return np.zeros(0, np.int64)
    if arr.ndim != 1:
        raise TypeError(f"{where}: {name} must be a flat (1-D) sequence of ids, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} must be integer ids, got dtype {arr.dtype} ({preview(arr)})")
    return arr


def ids_as(ids, dtype, where):
    """Integer ids cast to the integer ``dtype``, refusing ids that do not fit it (no silent wraparound).

    >>> ids_as(np.array([1, 300]), np.dtype("int16"), "f()").dtype
    dtype('int16')
    >>> ids_as(np.array([1, 300]), np.dtype("uint8"), "f()")
    Traceback (most recent call last):
    ...
    ValueError: f(): id 300 (position 1) does not fit dtype uint8 (0 to 255)
    """
    if ids.dtype == dtype:
        return ids
    info = np.iinfo(dtype)
    if ids.size:
        bad = (ids < info.min) | (ids > info.max)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{where}: id {ids[pos]} (position {pos}) does not fit dtype {dtype} "
                             f"({info.min} to {info.max})")
    return ids.astype(dtype)


def id_dtype(dtype, where):
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: dtype must be an integer NumPy dtype for token ids, got {dtype!r}") from None
    if dtype.kind not in "iu":
        raise TypeError(f"{where}: dtype must be an integer dtype for token ids (int64, int32...), got {dtype}")
    return dtype


_SCALARS = (numbers.Number, str, bytes, np.generic)


def _leaves_and_types(nested, lod_level):
    """``(leaves, lengths per level, set of leaf types)``; for plain lists the leaves' type pass is the one
    that finds the bottom, so it costs nothing extra."""
    if lod_level is None and type(nested) is list:
        items, lengths = nested, []
        while True:
            types = set(map(type, items))
            if types != {list}:
                if not types & {list, tuple, np.ndarray}:
                    return items, lengths, types
                break  # mixed depths, tuples, arrays: the careful path words the errors
            lengths.append(np.fromiter(map(len, items), dtype=np.int64, count=len(items)))
            items = functools.reduce(operator.iadd, items, [])
    leaves, lengths = flatten_lists(nested, lod_level, name="nested")
    return leaves, lengths, set(map(type, leaves))


def batch_ids(nested, lod_level, dtype, place):
    """``batch`` of nested integer ids: refused unless every leaf is an integer (not a bool), then cast to ``dtype``.

    One pass per level, one C-speed type pass over the leaves (a bool would
    otherwise pass as 1 and a float be truncated), one ``np.fromiter``.
    """
    leaves, lengths, types = _leaves_and_types(nested, lod_level)
    if all(issubclass(t, _SCALARS) for t in types):
        pos, leaf = first_non_id(leaves) if not types <= {int} else (None, None)
        if pos is not None:
            raise TypeError(
                f"batch(): token ids must be integers, got {type(leaf).__name__} {leaf!r} (leaf {pos}); "
                f"pass vocab= to look tokens up"
            )
        if leaves and all(level.size for level in lengths):
            try:  # plain ints: one C pass; else (NumPy ints, ids beyond int64) each id kept exact
                ids = np.fromiter(leaves, dtype=np.int64, count=len(leaves)) if types <= {int} else np.array(leaves)
            except OverflowError:
                ids = exact_ids(leaves)
            if ids.dtype.kind not in "iu":  # int64 and uint64 scalars together: NumPy would make float64
                ids = exact_ids(leaves)
            data, where = to_place(ids_as(ids, dtype, "batch()"), as_place(place), copy=False)
            return _wrap(data, LoD._from_valid_lengths(lengths), where)
    t = from_nested_list(nested, lod_level=lod_level)  # NumPy integers, rows below the lod levels, empty lists
    if t.data.size and t.data.dtype.kind not in "iu":
        raise TypeError(f"batch(): token ids must be integers, got rows of dtype {t.data.dtype}")
    data, where = to_place(ids_as(t.data, dtype, "batch()"), as_place(place), copy=False)
    return _wrap(data, t.lod, where)
