"""Where data lives: moving or copying arrays to a place (host, GPU, pinned host memory).

Which library holds data at a place is the backend's rule (``backend._placement``).
"""

from .backend import backend_of
from .backend._placement import move, pinned_copy
from .place import CUDAPinnedPlace, place_of

__all__ = ["to_place", "pinned_copy"]


def to_place(data, place, *, copy):
    """``data`` moved (or copied, when ``copy``) to ``place``; returns (array, place)."""
    backend = backend_of(data)
    if place is None:
        place = place_of(data, backend)
        return (backend.asarray(data, copy=True) if copy else data), place
    if isinstance(place, CUDAPinnedPlace):
        return pinned_copy(backend.to_numpy(data)), place
    return move(data, place.device, copy=copy), place
