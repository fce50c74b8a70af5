"""DLPack: the flat data through the standard protocol, the LoD through the ragged convention.

``t.__dlpack__()`` / ``t.__dlpack_device__()`` export the flat data, so
``np.from_dlpack(t)``, ``torch.from_dlpack(t)`` and ``cupy.from_dlpack(t)``
share it. :func:`from_dlpack` takes any DLPack producer for the data and lists
or DLPack producers for the offsets.

The ragged convention (proposed in ``docs/interop.md``): a ragged producer adds
``__dlpack_ragged__(**kwargs) -> (values_capsule, (offsets_capsule, ...))``,
one int64 host offsets capsule per level, outermost first; the values capsule
lives on ``__dlpack_device__()``. :func:`from_dlpack` consumes it when no lod
is given.

>>> import lodtensor as lt
>>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
>>> np.shares_memory(np.from_dlpack(t), t.data)
True
>>> lt.from_dlpack(t).lod(), lt.from_dlpack(np.arange(3), [[0, 1, 3]]).tolist()
([[0, 2, 5]], [[0], [1, 2]])
"""

import numpy as np

from ..backend import backend_name_of
from ..tensor import LoDTensor

__all__ = ["from_dlpack", "dlpack", "dlpack_device", "dlpack_ragged"]

# DLDeviceType codes (dlpack.h)
_CPU, _CUDA, _CUDA_HOST = 1, 2, 3
_KNOWN = ("numpy", "torch", "cupy")


def dlpack(t, **kwargs):
    """``t.__dlpack__(...)``: a capsule over the flat data (shared); keywords go to the data's own ``__dlpack__``.

    Read-only data (e.g. loaded from a memory-mapped file) needs a consumer
    that asks for DLPack >= 1.0 (``max_version=(1, 0)``, as NumPy 2 does), which
    can flag it read-only.

    >>> import torch
    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    >>> shared = torch.from_dlpack(t)  # calls t.__dlpack__()
    >>> shared[0] = 7.0
    >>> t.data.tolist()
    [7.0, 1.0, 2.0, 3.0, 4.0]
    """
    data = t._require_data("__dlpack__()")
    return data.__dlpack__(**kwargs)


def dlpack_device(t):
    """``t.__dlpack_device__()``: ``(device_type, device_id)`` of the flat data.

    >>> import lodtensor as lt
    >>> lt.LoDTensor(np.arange(5.0), [[0, 2, 5]]).__dlpack_device__()  # kDLCPU, device 0
    (1, 0)
    """
    return t._require_data("__dlpack_device__()").__dlpack_device__()


def _offsets_capsule(offsets, kwargs):
    """A capsule over a small copy of a LoD level: consumers that ignore DLPack 1.0's read-only flag
    (torch 2.13 does) would otherwise write the LoD's own memory."""
    max_version = kwargs.get("max_version")
    copy = np.array(offsets)
    if max_version is not None and tuple(max_version) >= (1, 0):
        return copy.__dlpack__(max_version=(1, 0))
    return copy.__dlpack__()


def dlpack_ragged(t, **kwargs):
    """``t.__dlpack_ragged__(...)``: ``(values_capsule, (offsets_capsule, ...))`` (the ragged convention).

    The values capsule is the data's (shared); each offsets capsule is one
    int64 host level, outermost first: a small copy, so a consumer that writes
    it cannot reach the LoD.

    >>> from torch.utils.dlpack import from_dlpack as torch_from_capsule
    >>> import lodtensor as lt
    >>> values, (offsets,) = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]]).__dlpack_ragged__()
    >>> torch_from_capsule(values).tolist(), torch_from_capsule(offsets).tolist()
    ([0.0, 1.0, 2.0, 3.0, 4.0], [0, 2, 5])
    """
    t._check_fits("__dlpack_ragged__()")  # the offsets must describe the values' rows
    values = dlpack(t, **kwargs)
    return values, tuple(_offsets_capsule(level, kwargs) for level in t.lod.levels)


class _Producer:
    """A capsule plus its device, presented as a DLPack producer (consumers want objects)."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule, device):
        self._capsule, self._device = capsule, device

    def __dlpack__(self, **kwargs):
        # handed out again on a second call: a consumer that refused it (NumPy, for a dtype it lacks)
        # left it unused for the next one; one that took it renamed it, so a second taker refuses it
        if self._capsule is None:
            raise BufferError("this DLPack capsule was consumed already")
        return self._capsule

    def __dlpack_device__(self):
        return self._device


def _device_type(obj):
    try:
        return int(obj.__dlpack_device__()[0])
    except AttributeError:
        return None


def _import_data(obj):
    """A backend array for the DLPack producer ``obj`` (shared): NumPy on the host, CuPy (or torch) on a GPU."""
    if backend_name_of(obj) in _KNOWN:
        return obj
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack(): data must be a DLPack producer (has __dlpack__), got {type(obj).__name__}")
    kind = _device_type(obj)
    if kind in (_CPU, _CUDA_HOST):
        try:
            return np.from_dlpack(obj)
        except RuntimeError as err:  # a dtype NumPy lacks (bfloat16, float8...): torch holds it, if present
            try:
                import torch  # noqa: PLC0415 - only for what NumPy cannot hold
            except ImportError:
                raise TypeError(
                    f"from_dlpack(): NumPy cannot hold this data ({err}); "
                    f"install lodtensor[torch] to import it as torch"
                ) from None
            return torch.from_dlpack(obj)
    if kind == _CUDA:
        try:
            import cupy  # noqa: PLC0415 - GPU data: cupy if present

            return cupy.from_dlpack(obj)
        except ImportError:
            pass
        try:
            import torch  # noqa: PLC0415 - else torch, if present

            return torch.from_dlpack(obj)
        except ImportError:
            raise ImportError(
                "from_dlpack(): GPU data needs cupy or torch; install lodtensor[cuda] or lodtensor[torch]"
            ) from None
    raise ValueError(f"from_dlpack(): data on DLPack device type {kind} is not supported (CPU and CUDA are)")


def _host_level(level, k):
    """One level of offsets as host integers: lists and NumPy as they are, DLPack producers imported."""
    if isinstance(level, (list, tuple, range, np.ndarray)):
        return level
    name = backend_name_of(level)
    if name == "torch":
        return level.detach().cpu().numpy()
    if name == "cupy":
        return level.get()
    if hasattr(level, "__dlpack__"):
        if _device_type(level) in (_CPU, _CUDA_HOST):
            return np.from_dlpack(level)
        data = _import_data(level)
        return data.get() if backend_name_of(data) == "cupy" else data.cpu().numpy()
    raise TypeError(
        f"from_dlpack(): lod level {k} must be a list of ints or a DLPack array, got {type(level).__name__}"
    )


def from_dlpack(data, lod=None):
    """A LoDTensor over any DLPack producer's memory (shared), with ``lod`` checked by the LoD gate.

    Parameters
    ----------
    data : DLPack producer (has ``__dlpack__``)
        NumPy, torch and CuPy arrays are kept as they are; other producers
        are imported as NumPy on the host and CuPy (else torch) on a GPU.
        A producer following the ragged convention (``__dlpack_ragged__``,
        e.g. a LoDTensor) brings its lod along when ``lod`` is None.
    lod : list of levels, optional
        Each level a list of ints or a 1-D integer DLPack producer (GPU
        offsets are copied to the host, where the LoD lives).

    Raises
    ------
    TypeError
        ``data`` is not a DLPack producer, or a level is neither ints nor an array.
    LoDError
        The offsets break a LoD rule or do not fit the data.

    Examples
    --------
    >>> import torch
    >>> t = from_dlpack(torch.arange(4), [torch.tensor([0, 1, 4])])  # data stays torch, offsets go to the host
    >>> t.tolist(), type(t.data).__module__
    ([[0], [1, 2, 3]], 'torch')
    >>> import lodtensor as lt
    >>> from_dlpack(lt.LoDTensor(np.arange(3.0), [[0, 3]])).lod()  # a LoDTensor brings its lod
    [[0, 3]]
    """
    if lod is None and hasattr(data, "__dlpack_ragged__"):
        device = data.__dlpack_device__()
        values, levels = data.__dlpack_ragged__(max_version=(1, 0))
        data = _Producer(values, device)
        lod = [_Producer(level, (_CPU, 0)) for level in levels]
    array = _import_data(data)
    if lod is None:
        return LoDTensor(array)
    if isinstance(lod, (str, bytes)) or not hasattr(lod, "__iter__"):
        raise TypeError(f"from_dlpack(): lod must be a list of levels, got {type(lod).__name__}")
    return LoDTensor(array, [_host_level(level, k) for k, level in enumerate(lod)])
