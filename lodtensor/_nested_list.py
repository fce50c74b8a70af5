"""Nested Python lists <-> flat rows + per-level lengths.

Construction from nested lists is a hot path: each level is flattened in one
C-speed pass (``functools.reduce(operator.iadd, ...)`` concatenates the lists
without a Python-level loop), its lengths are counted with ``map(len, ...)``,
and the leaves become one array with a single ``np.fromiter`` call. No array
is created per item.
"""

import array
import collections
import functools
import operator

import numpy as np

from .lod import MAX_LOD_LEVELS, _check_depth

_LIST_TYPES = (list, tuple)
_NUMBER_TYPES = frozenset({int, float})
_INT64 = np.dtype(np.int64)
_FLOAT64 = np.dtype(np.float64)
_INT_TYPES = frozenset({int})
_FLOAT_TYPES = frozenset({float, int})


def _is_listlike_types(types, arrays_too=False):
    kinds = _LIST_TYPES + (np.ndarray,) if arrays_too else _LIST_TYPES
    return all(issubclass(t, kinds) for t in types)


def _first_mismatch(items, want_list):
    for i, item in enumerate(items):
        if isinstance(item, _LIST_TYPES) != want_list:
            return i, item
    return None, None  # pragma: no cover - only called when a mismatch exists


def _unsized(items, depth, name):
    """Raise for a 0-d array where a sequence is expected (``len()`` would say only "unsized object")."""
    for i, item in enumerate(items):
        if isinstance(item, np.ndarray) and item.ndim == 0:
            raise ValueError(
                f"{name} has inconsistent depth: at depth {depth + 1}, item {i} is the 0-d array {item!r} "
                f"but the lod levels need a sequence there (a list or an array of at least 1 dimension)"
            )


def _join_arrays(items, dtype):
    """The rows of the arrays ``items`` as one array of their own dtype (NumPy's promotion, as if
    their rows were listed one by one), or None where the careful path must decide."""
    rows = [x for x in items if x.shape[0]]  # an empty array adds no row, whatever its dtype or shape
    if not rows:
        return None
    try:
        joined = np.concatenate(rows)
    except (ValueError, TypeError):  # rows of different shapes, dtypes with no common one (int and datetime,
        return None  # structured): the careful path words the error
    if joined.dtype.kind not in "biufc":  # strings, objects, datetimes: the careful path reads or refuses them
        return None
    if dtype is not None:
        if not np.can_cast(joined.dtype, dtype, casting="safe"):  # else each value is checked on the careful path
            return None
        joined = joined.astype(dtype, copy=False)
    return joined


def flatten_lists(nested, lod_level=None, name="nested", keep_dtypes=False, dtype=None):
    """Flatten nested lists into ``(leaves, lengths_per_level)``; ``leaves`` is a flat list.

    ``lod_level=None`` takes every list level above the scalars as a lod level;
    a smaller ``lod_level`` keeps the inner lists as row dimensions. With
    ``keep_dtypes``, arrays among the lists keep their dtype: their items stay
    NumPy scalars or rows unless ``dtype`` is given (and where the last lod
    level holds only arrays, ``leaves`` is their rows joined into one array,
    cast to ``dtype`` where that cast is safe).
    """
    if not isinstance(nested, _LIST_TYPES):
        raise TypeError(f"{name} must be a (nested) list or tuple, got {type(nested).__name__}")
    if lod_level is not None:
        if isinstance(lod_level, (bool, np.bool_)):
            raise TypeError(f"lod_level must be an integer, got bool {lod_level!r}")
        lod_level = operator.index(lod_level)
        if lod_level < 0:
            raise ValueError(f"lod_level must be >= 0, got {lod_level}")
        _check_depth(lod_level, "lod_level")
    items = nested
    lengths = []
    depth = 0
    while lod_level is None or depth < lod_level:
        if depth == MAX_LOD_LEVELS and any(isinstance(x, _LIST_TYPES) for x in items):
            _check_depth(depth + 1, name)  # deeper than any LoD, or a list that holds itself: refused, not walked
        types = set(map(type, items))
        if not types:  # no lists left: the levels still asked for hold no sequence (offsets [0])
            if lod_level is not None:
                lengths.extend(np.zeros(0, dtype=np.int64) for _ in range(lod_level - depth))
            break
        # with an explicit lod_level, arrays inside the lists are sequences too (as in Paddle)
        if not _is_listlike_types(types, arrays_too=lod_level is not None):
            if any(issubclass(t, _LIST_TYPES) for t in types):
                i, item = _first_mismatch(items, want_list=True)
                raise ValueError(
                    f"{name} has inconsistent depth: at depth {depth + 1}, item {i} is "
                    f"{type(item).__name__} {item!r} but other items there are lists"
                )
            if lod_level is not None:
                raise ValueError(
                    f"lod_level={lod_level} is deeper than the nesting of {name} "
                    f"({depth} list level(s) above the values)"
                )
            break
        if np.ndarray in types:
            _unsized(items, depth, name)
        lengths.append(np.fromiter(map(len, items), dtype=np.int64, count=len(items)))
        if np.ndarray in types:  # `list += ndarray` would broadcast instead of extending
            if keep_dtypes and types == {np.ndarray} and depth + 1 == lod_level:
                joined = _join_arrays(items, dtype)
                if joined is not None:
                    return joined, lengths
            # list(x): NumPy scalars (or rows) that keep the array's dtype; tolist(): Python numbers, which
            # a given dtype checks one by one (NumPy casts its own scalars unchecked: int64 -1 -> uint8 255)
            keep = keep_dtypes and dtype is None
            items = [(list(x) if keep else x.tolist()) if isinstance(x, np.ndarray) else x for x in items]
        items = functools.reduce(operator.iadd, items, [])
        depth += 1
    return items, lengths


def flatten(nested, lod_level=None, dtype=None, name="nested"):
    """Flatten nested lists into ``(rows, lengths_per_level)``, rows as one array.

    ``dtype=None`` infers like NumPy (ints -> int64, floats -> float64). Plain
    lists of Python numbers take a fast path; anything else (tuples, arrays,
    mixed depths, bad leaves) takes the careful one, which also words the errors.
    """
    if lod_level is None and type(nested) is list and nested:
        fast = _flatten_fast(nested, None if dtype is None else np.dtype(dtype))
        if fast is not None:
            return fast
    dtype = None if dtype is None else np.dtype(dtype)
    items, lengths = flatten_lists(nested, lod_level, name, keep_dtypes=True, dtype=dtype)
    if isinstance(items, np.ndarray):  # the rows of arrays, joined in their dtype (or cast to ``dtype``)
        return items, lengths
    return _leaves_to_array(items, dtype, name), lengths


def _flatten_fast(items, dtype):
    """``flatten`` for lists of lists of Python numbers, or None to take the careful path."""
    lengths = []
    while set(map(type, items)) == {list}:
        if len(lengths) == MAX_LOD_LEVELS:  # deeper than any LoD (or a list that holds itself): the careful
            return None  # path says so
        lengths.append(np.fromiter(map(len, items), dtype=_INT64, count=len(items)))
        probe = next(filter(None, items), None)  # the first non-empty sublist
        if probe is None:
            return None
        first = type(probe[0])
        if first is not list:
            rows = _fast_leaves(items, first, dtype)
            return None if rows is None else (rows, lengths)
        items = functools.reduce(operator.iadd, items, [])
    return None


def _fast_leaves(lists, first, dtype):
    """The scalars of ``lists`` (a list of lists) as one array, or None for the careful path.

    Ints (token ids): ``array.array('q').fromlist`` converts in C and raises on
    anything that is not an int (float, list, str, None) or past int64, so no
    per-leaf type pass is needed. Floats: one type pass, then ``np.fromiter``.
    """
    if first is int and (dtype is None or dtype == _INT64):
        buf = array.array("q")
        try:
            collections.deque(map(buf.fromlist, lists), 0)  # a C loop over the sublists
        except (TypeError, ValueError, OverflowError):
            return None
        return np.frombuffer(buf, dtype=_INT64)
    if first is float or first is int:
        dtype = _FLOAT64 if dtype is None else dtype
        if dtype.kind not in "fc":
            return None
        flat = functools.reduce(operator.iadd, lists, [])
        types = set(map(type, flat))
        if not types <= _NUMBER_TYPES or (dtype is _FLOAT64 and types == {int}):
            return None
        try:
            return np.fromiter(flat, dtype=dtype, count=len(flat))
        except OverflowError:  # an int past the float range: the careful path names it
            return None
    return None


def _leaves_to_array(items, dtype, name):
    """One array from a flat list of leaves (scalars, or row-shaped lists/arrays)."""
    if dtype is not None:
        dtype = np.dtype(dtype)
    types = set(map(type, items))
    n = len(items)
    if types and types <= _FLOAT_TYPES and (dtype is None or dtype.kind in "biufc"):
        inferred = dtype is None
        if inferred:
            dtype = np.dtype(np.int64) if types <= _INT_TYPES else np.dtype(np.float64)
        try:
            return np.fromiter(items, dtype=dtype, count=n)
        except OverflowError as err:
            if inferred and types <= _INT_TYPES:  # ints past int64: NumPy's choice (uint64, or float64 beside
                arr = np.asarray(items)  # negative ones); past both, an object array, refused below
                if arr.dtype != object:
                    return arr
            raise ValueError(f"{name}: a value does not fit in {dtype}: {err}") from None
        except ValueError as err:  # NaN or infinity as an integer
            raise ValueError(f"{name}: a value cannot be stored in {dtype}: {err}") from None
    if not items:
        return np.empty(0, dtype=dtype or np.float64)
    try:
        arr = np.asarray(items, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as err:
        if dtype is not None and "sequence" not in str(err) and "inhomogeneous" not in str(err):
            raise ValueError(f"{name}: a value cannot be stored in {dtype}: {err}") from None
        raise ValueError(
            f"{name}: the rows below the lod levels must all have the same shape "
            f"({err}); pass a larger lod_level for ragged inner lists"
        ) from None
    if arr.dtype.kind not in "biufc":
        bad = next((x for x in items if isinstance(x, (str, bytes)) or x is None), items[0])
        raise TypeError(
            f"{name} must hold numbers, got {type(bad).__name__} {bad!r} (array dtype {arr.dtype})"
        )
    return arr


def to_nested_list(rows, levels):
    """Nested Python lists from rows (a list) and offsets levels (outermost first)."""
    out = rows
    for offsets in reversed(levels):
        offs = offsets.tolist()
        out = [out[s:e] for s, e in zip(offs, offs[1:])]
    return out
