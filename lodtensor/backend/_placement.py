"""Which library holds data at a place, and the move there.

The placement rule of the API: data on the host is NumPy, data on a GPU is
CuPy, unless it is torch data, which stays torch on any device; page-locked
host memory comes from whichever CUDA library is installed.

>>> import numpy as np
>>> a = np.arange(3)
>>> move(a, "cpu", copy=False) is a, move(a, "cpu", copy=True) is a
(True, False)
"""

import numpy as np

from ._registry import get_backend

__all__ = ["home_of", "move", "pinned_copy"]


def home_of(library, device):
    """The backend name that holds ``library``'s data on ``device``: torch keeps torch; otherwise
    NumPy on the host and CuPy on a GPU.

    >>> home_of("numpy", "cuda:1"), home_of("cupy", "cpu"), home_of("torch", "cuda:0")
    ('cupy', 'numpy', 'torch')
    """
    if library == "torch":
        return "torch"
    return "numpy" if device == "cpu" else "cupy"


def move(data, device, *, copy):
    """``data`` (an array of a backend) on ``device`` in the library :func:`home_of` names;
    a copy when ``copy``, else only when it must move."""
    from . import backend_of  # noqa: PLC0415 - the package imports this module

    source = backend_of(data)
    target = get_backend(home_of(source.name, device))
    if target is source:
        return source.to_device(data, device, copy=copy)
    if target.name == "numpy":
        return source.to_numpy(data)  # a device-to-host copy: always new memory
    return target.to_device(data, device, copy=copy)  # CuPy takes host NumPy data


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
