"""Ops on the LoD alone: reset it, append a level. The data is shared, not copied."""

import numpy as np

from ..errors import LoDError
from ..lod import LoD
from ..tensor import LoDTensor
from ._common import host_ints, snapshot, wrap

__all__ = ["reset", "append"]


def _require_tensor(x, where):
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: x must be a LoDTensor, got {type(x).__name__}")
    return x._require_data(where)


def _checked(build, where, name=None):
    try:
        return build()
    except LoDError as err:
        raise LoDError(f"{where}: {err}", level=err.level, index=err.index) from None
    except TypeError as err:  # not integers (floats, booleans): name the argument that held them
        raise TypeError(f"{where}: {name}: {err}" if name else f"{where}: {err}") from None


def reset(x, y=None, target_lod=None, where="lod_reset()"):
    """``x``'s data with a new lod: ``y``'s lod, else ``y``'s data as offsets, else ``target_lod``."""
    data = _require_tensor(x, where)
    rows = int(data.shape[0])
    if y is not None:
        if isinstance(y, LoDTensor) and y.lod_level:
            new = _checked(lambda: LoD(y.lod, num_rows=rows), where)
        else:
            offsets = host_ints(y, where, "y")
            new = _checked(lambda: LoD([offsets], num_rows=rows), where)
    elif target_lod is not None:
        if isinstance(target_lod, (str, bytes, dict)) or not hasattr(target_lod, "__iter__"):
            raise TypeError(
                f"{where}: target_lod must be offsets such as [0, 2, 5] (or a list of levels), got "
                f"{type(target_lod).__name__} {target_lod!r}"
            )
        levels = list(target_lod)
        nested = bool(levels) and isinstance(levels[0], (list, tuple, np.ndarray))
        new = _checked(lambda: LoD(levels if nested else [levels], num_rows=rows), where, "target_lod")
    else:
        raise ValueError(f"{where}: give y or target_lod (offsets such as [0, 2, 5]); both are None")
    return wrap(data, new)


def append(x, level, where="lod_append()"):
    """``x`` with ``level`` (offsets into the rows) appended as its finest lod level."""
    data = _require_tensor(x, where)
    x = snapshot(x)  # one data/lod pair (another thread's set_lod midway)
    data = x._data
    offsets = host_ints(level, where, "level")
    rows = int(data.shape[0])
    if x.lod_level:
        new = _checked(lambda: x.lod.append_level(offsets, num_rows=rows), where)
    else:
        new = _checked(lambda: LoD([offsets], num_rows=rows), where)
    return wrap(data, new)
