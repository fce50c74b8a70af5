"""Where data lives: moving or copying arrays to a place (host, GPU, pinned host memory)."""

import numpy as np

from .backend import backend_of, get_backend
from .place import CUDAPinnedPlace, CUDAPlace, place_of

__all__ = ["to_place", "pinned_copy"]


def to_place(data, place, *, copy):
    """``data`` moved (or copied, when ``copy``) to ``place``; returns (array, place)."""
    backend = backend_of(data)
    if place is None:
        place = place_of(data, backend)
        return (backend.asarray(data, copy=True) if copy else data), place
    if isinstance(place, CUDAPinnedPlace):
        return pinned_copy(backend.to_numpy(data)), place
    if backend.name == "torch":
        return get_backend("torch").to_device(data, place.device, copy=copy), place
    if isinstance(place, CUDAPlace):
        target = get_backend("cupy")
        return target.to_device(data, place.device, copy=copy), place
    if backend.name == "numpy":
        return (np.array(data, copy=True) if copy else data), place
    return backend.to_numpy(data), place


def pinned_copy(array):
    """Copy a NumPy array into page-locked host memory (needs CUDA through cupy or torch)."""
    try:
        import cupyx  # noqa: PLC0415 - optional, imported on first use

        out = cupyx.empty_pinned(array.shape, dtype=array.dtype)
        out[...] = array
        return out
    except Exception:  # noqa: BLE001 - fall through to torch, then to the error below
        pass
    try:
        import torch  # noqa: PLC0415 - optional, imported on first use

        if torch.cuda.is_available():
            pinned = torch.from_numpy(np.ascontiguousarray(array)).pin_memory()
            return pinned.numpy()
    except ImportError:
        pass
    raise RuntimeError(
        "CUDAPinnedPlace needs CUDA to allocate page-locked memory, and no CUDA device is "
        "available here (cupy or torch with CUDA); use CPUPlace() instead"
    )
