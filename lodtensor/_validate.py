"""Validation of offsets and lengths: one level at a time, then the rules between levels.

This is the one gate every LoD passes. Every check is one vectorised pass;
the search for the offending index runs only on failure. Messages name the
level, the index, the value and what was expected.

Validated offsets are *frozen*: copied once into memory owned by an immutable
``bytes`` object, so no NumPy call (``setflags(write=True)`` on the array or
on any of its bases included) can make them writable again. A frozen level is
remembered by its address, so handing it back (``from_arrow(t.to_arrow())``,
whose buffers Arrow keeps immutable) is recognised in O(1) instead of being
checked again: the memory is the very memory that was checked. (torch ignores
read-only memory: ``torch.from_numpy`` and ``torch.from_dlpack`` of a frozen
level give a writable tensor. So lodtensor never hands a frozen level to torch
or to a DLPack consumer; they get copies.)
"""

import sys
import weakref

import numpy as np

from ._format import preview
from .errors import LoDError

__all__ = ["as_offsets", "as_lengths", "check_levels", "freeze", "is_frozen", "offsets_from_lengths"]

_INT64 = np.dtype(np.int64)
_INT64_MAX = np.iinfo(np.int64).max

# (address, entries) -> a frozen level that passed as_offsets (alive as long as that array is)
_CHECKED = weakref.WeakValueDictionary()
# Levels this short are checked again rather than remembered (checking them costs less).
_REMEMBER_FROM = 64


def is_frozen(arr):
    """True when ``arr``'s memory belongs to a ``bytes`` object (no NumPy path can write it).

    >>> is_frozen(freeze(np.arange(3))), is_frozen(np.arange(3))
    (True, False)
    """
    base = arr
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return type(base) is bytes


def freeze(arr):
    """``arr`` in immutable memory: a copy into a ``bytes`` object unless it already is there.

    >>> a = freeze(np.arange(3))
    >>> a.flags.writeable, a.tolist()
    (False, [0, 1, 2])
    >>> a.setflags(write=True)
    Traceback (most recent call last):
    ...
    ValueError: cannot set WRITEABLE flag to True of this array
    """
    if is_frozen(arr):
        return arr
    arr = np.ascontiguousarray(arr)
    return np.frombuffer(arr.tobytes(), dtype=arr.dtype).reshape(arr.shape)


def _key(arr):
    return (arr.__array_interface__["data"][0], arr.size)


def _remember(arr):
    if arr.size >= _REMEMBER_FROM:
        _CHECKED[_key(arr)] = arr


def _recognised(arr):
    """The frozen checked level whose memory ``arr`` is exactly, or None. A writable array is never looked up
    (the common fresh offsets): no NumPy call makes a writable view of frozen memory, and an array that
    something else made so is checked as new, which is the safe side."""
    flags = arr.flags
    if arr.size < _REMEMBER_FROM or flags.writeable or arr.dtype != _INT64 or not flags.c_contiguous:
        return None
    return _CHECKED.get(_key(arr))


def _functorch_wrapped(values):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(values, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(
        values)


def _integer_array(values, name):
    """``values`` as a fresh 1-D int64 array; reject floats, bools, ragged and N-d input."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be integers, got {type(values).__name__} {values!r}")
    if isinstance(values, np.ndarray):
        arr = values
    elif hasattr(values, "__array__") or hasattr(values, "__dlpack__"):
        try:
            arr = np.asarray(values)
        except Exception as err:  # torch CUDA tensors, cupy arrays, torch.func's wrapped tensors
            if _functorch_wrapped(values):
                raise TypeError(
                    f"{name} must be host integers, got a tensor batched or tracked by torch.func (vmap/grad): "
                    "offsets cannot vary per sample; expected the same LoD for every sample (vmap may batch "
                    "the data only)") from err
            raise TypeError(
                f"{name} must be host integers (a list or a NumPy array), got "
                f"{type(values).__name__}; move it to the CPU first"
            ) from err
    else:
        try:
            arr = np.asarray(values)
        except (ValueError, OverflowError):
            arr = None
        if isinstance(values, (list, tuple)) and (arr is None or arr.dtype.kind in "fO") and values and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            raise ValueError(f"{name} holds values beyond int64: {_short(values)}")  # (NumPy made floats or objects)
        if arr is None or arr.dtype == object:
            raise TypeError(
                f"{name} must be a flat sequence of integers, got the ragged or mixed "
                f"value {_short(values)}"
            ) from None
        if arr.size == 0:
            arr = arr.astype(_INT64)
    if isinstance(values, (list, tuple)) and not {bool, np.bool_}.isdisjoint(map(type, values)):
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
    if kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise ValueError(f"{name} holds values beyond int64: {preview(arr)}")
    return arr if arr.dtype == _INT64 else arr.astype(_INT64)


def _is_scalar(value):
    return not isinstance(value, (list, tuple, range, np.ndarray)) and not hasattr(value, "__len__")


def _per_level(levels, name, kind):
    """``levels`` as a list with one entry per lod level; a 1-D array counts as one level."""
    if getattr(levels, "ndim", None) == 1 and hasattr(levels, "dtype"):  # a NumPy, torch or CuPy array: one level
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


def as_offsets(values, *, level=None, name="offsets", copy=True):
    """Validate one level of offsets on its own and return it as a frozen int64 array.

    Checks the rules that need no other level: integers, 1-D, at least one
    entry, starts at 0, never decreases. ``[0]`` is a level of no sequence (an
    empty batch, or the level under parents that are all empty), as torch's
    empty nested tensor, TensorFlow's ``row_splits=[0]`` and awkward's empty
    list array. Paddle's ``CheckLoD`` refuses it in ``set_lod``, but Paddle's
    file reader and writer take it, and so does :mod:`lodtensor.fluid`. One vectorised pass; the slow search
    for the offending index runs only on failure. The values are copied into
    frozen memory first and checked there, so a writer racing on ``values``
    cannot slip past the check. With ``copy=False`` an int64 array is shared
    instead (the caller promises that nobody writes it: an Arrow buffer, say)
    and the result is a read-only view of it.

    >>> as_offsets([0, 2, 5]).tolist()
    [0, 2, 5]
    >>> as_offsets([0, 3, 2])
    Traceback (most recent call last):
    ...
    lodtensor.errors.LoDError: lod level must be non-decreasing, but offsets[1]=3 > offsets[2]=2
    """
    where = name if level is None else f"{name} (lod level {level})"
    arr = _integer_array(values, where)
    known = _recognised(arr)
    if known is not None:
        return known
    if copy or arr is not values:
        arr = freeze(arr)  # the one copy (none when already frozen); checked below, on the copy
    elif not is_frozen(arr):  # shared, as the caller asked, through a read-only buffer (no .base is writable)
        arr = np.ascontiguousarray(arr)
        arr = np.frombuffer(memoryview(arr).toreadonly(), dtype=arr.dtype).reshape(arr.shape)
    if arr.size < 1:
        raise LoDError(
            f"{_label(level)} must have at least 1 offset (offsets [0] for no sequence), got {preview(arr)}",
            level=level,
            index=0,
        )
    if arr[0] != 0:
        raise LoDError(f"{_label(level)} must start at 0, got offsets[0]={arr[0]}", level=level, index=0)
    down = arr[1:] < arr[:-1]  # a comparison, not np.diff: a difference of int64 values can wrap
    if down.any():
        j = int(np.flatnonzero(down)[0])
        raise LoDError(
            f"{_label(level)} must be non-decreasing, but offsets[{j}]={arr[j]} > offsets[{j + 1}]={arr[j + 1]}",
            level=level,
            index=j + 1,
        )
    if is_frozen(arr):
        _remember(arr)
    return arr


def _label(level):
    return "lod level" if level is None else f"lod level {level}"


def offsets_from_lengths(lengths, *, level=None, name="recursive_sequence_lengths"):
    """Frozen offsets from validated non-negative lengths; raise if the total passes int64.

    Lengths are checked one by one, so only their running sum can go wrong:
    a sum that wraps past int64 shows as a decrease of the offsets.

    >>> offsets_from_lengths(np.array([2, 0, 3])).tolist()
    [0, 2, 2, 5]
    >>> offsets_from_lengths(np.array([2**62, 2**62]))
    Traceback (most recent call last):
    ...
    lodtensor.errors.LoDError: recursive_sequence_lengths: the lengths add up beyond int64 (2**63 - 1) at ...
    """
    offsets = np.empty(lengths.size + 1, dtype=_INT64)
    offsets[0] = 0
    np.cumsum(lengths, out=offsets[1:])
    steps = offsets[1:] < offsets[:-1]
    if steps.any():
        j = int(np.flatnonzero(steps)[0])
        where = name if level is None else f"{name} level {level}"
        raise LoDError(
            f"{where}: the lengths add up beyond int64 (2**63 - 1) at lengths[{j}]={lengths[j]}",
            level=level,
            index=j,
        )
    offsets = freeze(offsets)
    _remember(offsets)
    return offsets


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
    if arr.size and arr.min() < 0:
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
