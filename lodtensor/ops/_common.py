"""Argument checks shared by the ops."""

import operator

import numpy as np

from ..backend import backend_of
from ..lod import LoD
from ..place import place_of
from ..tensor import LoDTensor, _wrap, coerce_data


def snapshot(x):
    """A LoDTensor holding ``x``'s data and LoD as they are now (the same objects, no copy).

    An op reads its operand through this: another thread's ``x.set_lod()`` or ``x.set()`` midway
    would otherwise give it the data of one state and the lod of another (sums under the old lod
    wrapped in the new outer levels). The two attributes are read with no call between them, where
    the interpreter never switches threads; each is replaced in one store.
    """
    return _wrap(x._data, x._lod, x._where)


def require_lod(x, where, name="input", min_level=1):
    """A snapshot of ``x`` (:func:`snapshot`), checked to be a LoDTensor with data and at least ``min_level``
    lod levels whose lod fits its rows. Ops use what it returns, never ``x`` again."""
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: {name} must be a LoDTensor, got {type(x).__name__}")
    x = snapshot(x)
    x._require_data(where)
    if x.lod_level < min_level:
        raise ValueError(
            f"{where}: {name} must have lod_level >= {min_level}, got lod_level {x.lod_level}"
        )
    x._check_fits()
    return x


def level_index(x, level, where):
    """``level`` normalised to 0..lod_level-1, with a clear error."""
    try:
        level = operator.index(level)
    except TypeError:
        raise TypeError(f"{where}: level must be an integer, got {type(level).__name__} {level!r}") from None
    n = x.lod_level
    if not -n <= level < n:
        raise IndexError(f"{where}: level {level} is out of range for lod_level {n}; expected -{n} <= level < {n}")
    return level % n


def int_arg(value, where, name, minimum=None):
    """``value`` as a Python int (a NumPy or 0-d integer too; not a float or a string), at least
    ``minimum`` where given, with a clear error."""
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: {name} must be an integer, got {type(value).__name__} {value!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{where}: {name} must be >= {minimum}, got {value}")
    return value


def flag_arg(value, where, name):
    """``value`` as a Python bool: a bool (NumPy's too) or the integers 0 and 1; a string such as
    ``"False"`` (truthy) or anything else is refused rather than read by its truth."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{where}: {name} must be True or False, got {type(value).__name__} {value!r}")


def host_ints(values, where, name):
    """Integer values (list, array, LoDTensor) as a flat host int64 array."""
    if isinstance(values, LoDTensor):
        values = values.numpy()
    elif hasattr(values, "__dlpack__") or hasattr(values, "__array__"):
        try:
            values = np.asarray(values)
        except Exception:  # torch CUDA, cupy: bring the small index array to the host
            values = np.asarray(values.tolist())
    arr = np.asarray(values)
    if arr.dtype == bool or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{where}: {name} must hold integers, got {arr.dtype} {arr.ravel()[:8].tolist()}")
    if arr.size and arr.dtype.kind == "u" and arr.max() > np.iinfo(np.int64).max:  # int64 would wrap it negative
        j = int(np.argmax(arr.ravel() > np.iinfo(np.int64).max))
        raise ValueError(f"{where}: {name}[{j}]={int(arr.ravel()[j])} is too large (at most 2**63 - 1)")
    return arr.astype(np.int64).ravel()


def int_extremes(be, values):
    """``(least, at_least, greatest, at_greatest)`` of the non-empty flat integer array ``values`` of
    backend ``be``, as Python ints (``at_*``: a position holding that value), compared as int64
    (an unsigned value above 2**63 - 1 comes back negative).

    Made on the array's device and read back together: four scalars in one device-to-host copy (one
    synchronisation), not a copy of ``values``, for the ops that check device indices.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> int_extremes(lt.get_backend("numpy"), np.array([3, -1, 7, 7]))
    (-1, 1, 7, 2)
    """
    return read_ints(be, extremes_on_device(be, values))


def extremes_on_device(be, values):
    """The four device scalars :func:`int_extremes` reads (to read them with others in one copy)."""
    as64 = be.astype(values, "int64")
    least, at_least = be.extreme_with_index(as64, "min", 0, False)
    greatest, at_greatest = be.extreme_with_index(as64, "max", 0, False)
    return least, at_least, greatest, at_greatest


def read_ints(be, scalars):
    """Python ints of the integer or boolean device scalars of backend ``be``, read back together: one
    device-to-host copy (one synchronisation) however many there are.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> read_ints(lt.get_backend("numpy"), [np.int64(3), np.bool_(True)])
    (3, 1)
    """
    return tuple(int(a) for a in be.to_numpy(be.concat([be.astype(a, "int64").reshape(1) for a in scalars])))


def wrap(data, lod_arrays):
    """A LoDTensor around new data with the given (valid) offsets arrays."""
    lod = lod_arrays if isinstance(lod_arrays, LoD) else LoD._from_valid(tuple(lod_arrays))
    return _wrap(data, lod, place_of(data, backend_of(data)))


def as_data(x, where, name):
    """Backend array from an array-like or a LoDTensor."""
    return coerce_data(x, name=f"{where}: {name}")
