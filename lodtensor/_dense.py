"""Index algebra between flat rows + LoD and dense padded arrays.

The positions are computed on the host from the LoD (vectorised, one pass per
level); the backend's ``place_rows`` kernel then moves every row once.
"""

import math
import numbers
import operator

import numpy as np

from .backend import backend_name_of, dtype_kind, dtype_name, get_backend
from .lod import LoD, offsets_to_segment_ids

__all__ = ["pad_level", "pad_all", "pad_plan", "check_pad_value", "check_fill"]

_MAX_BYTES = int(np.iinfo(np.intp).max)  # the most bytes any array (NumPy's, torch's) can span


def pad_plan(lod, level, maxlen):
    """Host plan for padding ``level`` of ``lod`` to ``maxlen``: ``(index, groups)``, cached on the LoD.

    ``index[r]`` is the flat position (``sequence * maxlen + position``) of
    data row ``r``; ``groups`` lists ``(length, sequence ids)`` for every
    distinct length shorter than ``maxlen`` (the padded tails to fill). The
    LoD keeps its plans in a byte-bounded LRU, so a new ``maxlen`` per batch
    does not grow memory without end.
    """

    def build():
        offsets = lod.absolute_offsets(level)
        lengths = np.diff(offsets)
        shift = np.arange(lengths.size, dtype=np.int64) * maxlen - offsets[:-1]
        index = np.arange(int(offsets[-1]), dtype=np.int64) + np.repeat(shift, lengths)
        index.setflags(write=False)
        order = np.argsort(lengths, kind="stable")
        order.setflags(write=False)
        sorted_lengths = lengths[order]
        bounds = [0, *(np.flatnonzero(np.diff(sorted_lengths)) + 1).tolist(), lengths.size]
        groups = tuple(
            (int(sorted_lengths[a]), order[a:b])
            for a, b in zip(bounds, bounds[1:])
            if a < b and sorted_lengths[a] < maxlen  # a < b: no group at all when there is no sequence
        )
        return index, groups

    return lod._plan(("pad", lod_level(lod, level), maxlen), build)


def lod_level(lod, level):
    """``level`` as a non-negative index into ``lod``'s levels."""
    if isinstance(level, (bool, np.bool_)):  # (operator.index takes True as 1)
        raise TypeError(f"level must be an integer, got bool {level!r}")
    level = operator.index(level)  # a 0-d integer array or tensor is a level too (and a hashable cache key)
    return level % lod.num_levels if level < 0 else level


def check_pad_value(pad_value, row_shape, where, dtype=None):
    """Raise unless ``pad_value`` broadcasts to ``row_shape`` and, where ``dtype`` is given, can be stored
    in it exactly (:func:`check_fill`)."""
    shape = tuple(np.shape(pad_value))
    if shape and any(s != 1 for s in shape) and (len(shape) > len(row_shape) or any(
        s not in (1, r) for s, r in zip(shape[::-1], row_shape[::-1])
    )):
        raise ValueError(
            f"{where}: pad_value must be a scalar or broadcast to the row shape "
            f"{tuple(row_shape)}, got shape {shape}"
        )
    if dtype is not None:
        check_fill(pad_value, dtype, where)


def _limits(dtype):
    info = np.iinfo(np.dtype(str(dtype).replace("torch.", "")))
    return int(info.min), int(info.max)


def _host_values(value):
    """``value`` (an array or array-like) as a host array, or None for an array on a device (its values
    are not read: that would wait for the device)."""
    name = backend_name_of(value)
    if name is None:
        try:
            return np.asarray(value)
        except (TypeError, ValueError, RuntimeError):  # an array of an unknown library on a device
            return None
    be = get_backend(name)
    return be.to_numpy(value) if be.device_of(value) == "cpu" else None


def check_fill(value, dtype, where, name="pad_value"):
    """Raise unless ``value`` (a number, or an array of numbers) can be stored in ``dtype`` exactly:
    integer and bool results hold no NaN, fractions or out-of-range numbers, and nothing holds None
    or a string. A device array's values stay unread: its dtype must then be one ``dtype`` holds."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{where}: {name} must be a number or an array of numbers, got {type(value).__name__} "
                        f"{value!r}")
    kind = dtype_kind(dtype)
    if kind in "fc" and type(value) in (float, int, bool):  # a Python number in a float result: nothing to refuse
        return  # (the common case, every pool and pad: no dtype name, no array of the value)
    dtype = dtype_name(dtype)  # "int64" for NumPy, torch and CuPy alike
    if isinstance(value, numbers.Integral):  # exact, however large
        low, high = (0, 1) if kind == "b" else _limits(dtype) if kind in "iu" else (int(value), int(value))
        if not low <= int(value) <= high:
            raise ValueError(f"{where}: {name}={value!r} is out of range for the {dtype} result ({low}..{high})")
        return
    if isinstance(value, (numbers.Number, np.generic)):
        try:
            number = complex(value)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: {name} must be a number, got {type(value).__name__} {value!r}") from None
        host = np.asarray(number.real if not number.imag else number)
    else:
        host = _host_values(value)
    if host is None:
        source = dtype_kind(value.dtype)
        lossy = kind not in "fc" and (source in "fc" or (kind == "b" and source != "b"))
        if lossy or (kind != "c" and source == "c"):
            raise TypeError(f"{where}: {name} of dtype {value.dtype} cannot be stored in the {dtype} result; "
                            f"pass a scalar or an array of the data's dtype")
        return
    if host.dtype.kind == "O":  # numbers in an object array: as NumPy would read them
        try:
            host = np.array(host.tolist())
        except (TypeError, ValueError, OverflowError):
            pass
    if kind != "c" and (host.dtype.kind == "c" or isinstance(value, (complex, np.complexfloating))):
        # (NumPy refuses a Python complex here and drops the imaginary part of its own complex numbers)
        shown = repr(value) if host.ndim == 0 else f"of dtype {host.dtype}"
        raise TypeError(f"{where}: {name} {shown} is complex, but the {dtype} result holds real numbers; "
                        f"pass a real {name}")
    if host.dtype.kind not in "biufc":
        raise TypeError(f"{where}: {name} must hold numbers of a NumPy dtype, got {host.dtype} "
                        f"{host.ravel()[:4].tolist()}")
    if kind in "fc" or host.dtype.kind == "b" or not host.size:
        return
    real = host.real if host.dtype.kind == "c" else host
    low, high = (0, 1) if kind == "b" else _limits(dtype)
    if host.dtype.kind in "fc":
        bad = (np.imag(host) != 0) | ~np.isfinite(real) | (real != np.floor(real))
        if bad.any():
            raise ValueError(
                f"{where}: {name}={_first(value, host, bad)} cannot be stored in the {dtype} result; pass an "
                f"integer {'0 or 1' if kind == 'b' else 'value'} (or convert the input to a floating dtype first)"
            )
    bad = (real < low) | (real >= high + 1)  # (high + 1 is a power of two, exact as a float: high is not)
    if bad.any():
        raise ValueError(f"{where}: {name}={_first(value, host, bad)} is out of range for the {dtype} result "
                         f"({low}..{high})")


def _first(value, host, bad):
    """``value`` itself where it is one number, else its first offending element."""
    return repr(value) if host.ndim == 0 else f"{host.ravel()[np.flatnonzero(np.ravel(bad))[0]].item()!r} (an element)"


def _check_out(be, out, shape, dtype, where):
    if backend_name_of(out) != be.name:
        raise TypeError(f"{where}: out must be a {be.name} array like the data, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{where}: out must have shape {tuple(shape)}, got {tuple(out.shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{where}: out must have dtype {dtype}, got {out.dtype}")
    if not be.is_c_contiguous(out):
        raise ValueError(f"{where}: out must be C-contiguous")


def pad_level(be, data, lod, level, pad_value, maxlen, out, where="to_padded()", exact=True):
    """``(padded, lengths)`` for the sequences of ``level`` (counted in rows). ``exact``: refuse a
    ``pad_value`` the data's dtype cannot hold (:func:`check_fill`); else it is cast, as torch casts
    ``to_padded_tensor``'s padding."""
    offsets = lod.absolute_offsets(level)
    lengths = np.diff(offsets)
    longest = int(lengths.max()) if lengths.size else 0
    if maxlen is None:
        maxlen = longest
    else:
        try:
            if isinstance(maxlen, (bool, np.bool_)):
                raise TypeError
            maxlen = operator.index(maxlen)
        except TypeError:
            raise TypeError(f"{where}: maxlen must be an integer, got {type(maxlen).__name__} {maxlen!r}") from None
        if maxlen < 0:
            raise ValueError(f"{where}: maxlen must be >= 0 (or None for the longest sequence), got {maxlen}")
        if maxlen < longest:
            raise ValueError(
                f"{where}: maxlen={maxlen} is shorter than the longest sequence ({longest}); "
                f"truncation is not supported"
            )
    row_shape = tuple(data.shape[1:])
    check_pad_value(pad_value, row_shape, where, data.dtype if exact else None)
    shape = (lengths.size, maxlen) + row_shape
    # Python ints: the check cannot wrap; a 0 dim counts as 1, as NumPy checks the other dims all the same
    if math.prod(max(d, 1) for d in shape) * data.dtype.itemsize > _MAX_BYTES:
        raise ValueError(f"{where}: maxlen={maxlen} makes the padded result {shape} of {data.dtype}, "
                         f"larger than any array can be")
    if out is not None:
        _check_out(be, out, shape, data.dtype, where)
    plan = pad_plan(lod, level, maxlen) if be.wants_host_plan(data) else None
    padded = be.pad(data, lod.on(be, "absolute_offsets", level, like=data), maxlen, pad_value, out=out, plan=plan)
    # the caller's own copy of the LoD's device lengths (a device copy: no host-to-device transfer)
    return padded, be.clone(lod.on(be, "absolute_lengths", level, like=data))


def pad_all(be, data, lod, pad_value):
    """Dense array over every level and one boolean mask per level."""
    levels = lod.levels
    row_shape = tuple(data.shape[1:])
    check_pad_value(pad_value, row_shape, "to_padded_all()", data.dtype)
    dims = [levels[0].size - 1]
    flat = np.arange(dims[0], dtype=np.int64)  # flat position of each level-0 sequence
    masks = []
    for k, offsets in enumerate(levels):
        lengths = lod.lengths(k)
        width = int(lengths.max()) if lengths.size else 0
        seg = offsets_to_segment_ids(offsets)
        pos = np.arange(seg.size, dtype=np.int64) - offsets[seg]
        flat = flat[seg] * width + pos
        dims.append(width)
        mask = np.zeros(int(np.prod(dims)), dtype=bool)
        mask[flat] = True
        masks.append(mask.reshape(dims))
    padded = be.place_rows(data, be.from_host(flat, like=data), tuple(dims), pad_value)
    return padded, [be.from_host(m, like=data) for m in masks]


def lod_from_masks(masks, where="from_padded_all()"):
    """The LoD (and row mask) described by per-level masks from :func:`pad_all`."""
    if not isinstance(masks, (list, tuple)):  # one mask alone would be read as its rows (or its truth)
        raise TypeError(f"{where}: masks must be a list of boolean masks, one per lod level (as to_padded_all() "
                        f"returns), got {type(masks).__name__}; wrap a single mask as [mask]")
    if not masks:
        raise ValueError(f"{where}: masks must hold one boolean mask per lod level, got none")
    arrays = []
    parent = None
    for k, mask in enumerate(masks):
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.ndim != k + 2:
            raise ValueError(
                f"{where}: masks[{k}] must be a boolean array of rank {k + 2}, got "
                f"{mask.dtype} of shape {mask.shape}"
            )
        if parent is not None and mask.shape[:-1] != parent.shape:
            raise ValueError(
                f"{where}: masks[{k}] must have shape {parent.shape} + (width,), got {mask.shape}"
            )
        selected = mask if parent is None else mask[parent]
        if parent is not None and (mask[~parent]).any():
            raise ValueError(f"{where}: masks[{k}] marks items inside sequences that masks[{k - 1}] leaves out")
        counts = selected.sum(axis=1)
        prefix_ok = (np.cumsum(selected, axis=1) == np.arange(1, selected.shape[1] + 1)) | ~selected
        if not prefix_ok.all():
            raise ValueError(f"{where}: masks[{k}] must mark a prefix of each sequence (True then False)")
        arrays.append(counts)
        parent = mask
    return LoD.from_lengths(arrays), parent
