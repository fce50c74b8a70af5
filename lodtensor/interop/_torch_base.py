"""What every torch conversion shares: torch itself, the data as a torch tensor, and the offsets
tensors that jagged conversions share (one per LoD, level and device) with the check that they are
still the LoD's."""

import weakref

import numpy as np

from ..backend import backend_name_of
from ._lazy import require

__all__ = []


def _torch(what):
    return require("torch", "torch", what)


# id(offsets tensor made by to_nested_jagged) -> (weak reference, the frozen host level it copies, its version)
_OWN_OFFSETS = {}


def _offsets_on(torch, offsets, device):
    """The frozen host ``offsets`` as a torch int64 tensor on ``device``, torch's own (torch ignores
    read-only memory: a tensor over the LoD's would let a write reach the LoD). One per LoD, level and
    device, shared by every conversion: torch ties a jagged tensor's nested int to its offsets tensor,
    so jagged tensors of one LoD combine. Remembered for :func:`_intact`."""
    tensor = torch.from_numpy(np.array(offsets)).to(device)
    key = id(tensor)
    _OWN_OFFSETS[key] = (weakref.ref(tensor, lambda _ref, key=key, own=_OWN_OFFSETS: own.pop(key, None)), offsets,
                         _version(tensor))
    return tensor


def _version(tensor):
    """torch's count of the writes in place into ``tensor``; None for an inference tensor (none kept)."""
    try:
        return tensor._version
    except RuntimeError:
        return None


def _intact(offsets):
    """The frozen host level that ``offsets`` (a tensor :func:`_offsets_on` made) still holds, else None.
    A write in place shows in torch's version counter; on the host the values are compared too (one
    pass, no copy), which also catches writes through ``.data`` or ``.numpy()``. On a GPU the counter
    alone decides (comparing there would wait for the device)."""
    hit = _OWN_OFFSETS.get(id(offsets))
    if hit is None or hit[0]() is not offsets:
        return None
    if _version(offsets) != hit[2]:  # (an inference tensor keeps no count: None both times)
        return None
    if offsets.device.type == "cpu" and not np.array_equal(offsets.detach().numpy(), hit[1]):
        return None
    return hit[1]


def _torch_data(t, what):
    """The data as a torch tensor: torch data as is, host NumPy data shared (read-only data copied)."""
    data = t._check_fits(what)
    if backend_name_of(data) == "torch":
        return data
    return t.to_torch().data
