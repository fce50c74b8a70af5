"""Helpers for the host-side ops (decoding, beam search, rank tables).

These ops move integer ids and a few scores; they run on host NumPy and give
their results back on the input's backend and device.
"""

import numpy as np

from ..backend import backend_of
from ..ops._common import require_lod
from ..tensor import LoDTensor

__all__ = ["host", "like", "make", "require_lod", "ids_column"]


def host(x):
    """The data of a LoDTensor (or an array) as a host NumPy array."""
    data = x.data if isinstance(x, LoDTensor) else x
    return np.asarray(backend_of(data).to_numpy(data))


def like(array, ref):
    """Host ``array`` on the backend and device of ``ref`` (a LoDTensor or an array)."""
    data = ref.data if isinstance(ref, LoDTensor) else ref
    return backend_of(data).from_host(array, like=data)


def make(array, levels, ref):
    """A LoDTensor of host ``array`` (moved to ``ref``'s backend) with offsets ``levels``,
    through the LoD validation gate."""
    return LoDTensor(like(array, ref), [np.asarray(level, dtype=np.int64) for level in levels])


def ids_column(x, where, name="input"):
    """The ids of an ``[N]`` or ``[N, 1]`` integer LoDTensor as a flat host int64 array."""
    x = require_lod(x, where, name)
    data = host(x)
    if data.ndim == 2 and data.shape[1] != 1 or data.ndim > 2:
        raise ValueError(f"{where}: {name} must have shape [N, 1] or [N], got {list(data.shape)}")
    if data.size and data.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} must hold integer ids, got dtype {data.dtype}")
    return data.reshape(-1).astype(np.int64, copy=False)
