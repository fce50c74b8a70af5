"""Where data lives: moving or copying arrays to a place (host, GPU, pinned host memory).

Which library holds data at a place is the backend's rule (``backend._placement``).
"""

import warnings

import numpy as np

from .backend import backend_of
from .backend._placement import move, pinned_copy
from .place import CUDAPinnedPlace, place_of

__all__ = ["to_place", "pinned_copy", "host_array", "plain_array"]


def _ragged_warning():
    """The warning NumPy gives for ragged nested lists where it makes an object array of them (NumPy <
    1.24, ``VisibleDeprecationWarning``); None where it raises ValueError (NumPy >= 1.24)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            np.asarray([[0], [0, 0]])
        except ValueError:
            return None
    return caught[0].category if caught else None


_RAGGED_WARNING = _ragged_warning()


def host_array(data):
    """Python data (numbers, nested lists) as a NumPy array; ragged nested lists raise ValueError.

    NumPy < 1.24 warns and makes an object array of them instead: its warning is that ValueError here,
    so every NumPy refuses ragged data alike (and the caller's message, not NumPy's warning, reaches the
    user).

    >>> host_array([[1, 2], [3, 4]]).shape
    (2, 2)
    >>> host_array([[1, 2], [3]])
    Traceback (most recent call last):
    ...
    ValueError: ...
    """
    if _RAGGED_WARNING is None:
        return np.asarray(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", _RAGGED_WARNING)
        try:
            return np.asarray(data)
        except _RAGGED_WARNING as err:
            raise ValueError(str(err)) from None


def plain_array(data, name="data"):
    """``data``, an ``np.matrix`` as a plain ndarray of the same memory (its ``*`` is a matrix product and its
    rows stay 2-D; a LoDTensor's rows are plain rows); a masked array is refused, since no read of a LoDTensor
    keeps a mask. Other ndarray subclasses (``np.memmap``...) are kept.

    >>> type(plain_array(np.matrix([[1, 2]]))).__name__
    'ndarray'
    >>> plain_array(np.ma.masked_array([1, 2], mask=[0, 1]))
    Traceback (most recent call last):
    ...
    TypeError: data is a NumPy masked array: ...
    """
    if type(data) is np.ndarray or not isinstance(data, np.ndarray):
        return data
    if isinstance(data, np.ma.MaskedArray):
        raise TypeError(f"{name} is a NumPy masked array: a LoDTensor holds no mask, and every read would drop it "
                        f"silently; pass <masked>.filled(<value>) or np.ma.getdata(<masked>)")
    return data.view(np.ndarray) if isinstance(data, np.matrix) else data


def to_place(data, place, *, copy):
    """``data`` moved (or copied, when ``copy``) to ``place``; returns (array, place)."""
    backend = backend_of(data)
    if place is None:
        place = place_of(data, backend)
        return (backend.asarray(data, copy=True) if copy else data), place
    if isinstance(place, CUDAPinnedPlace):
        return pinned_copy(backend.to_numpy(data)), place
    return move(data, place.device, copy=copy), place
