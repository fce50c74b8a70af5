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

import ctypes
import operator

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
    strides = getattr(data, "strides", None)  # (NumPy and CuPy, in bytes; torch's are never negative)
    if strides is not None and any(s < 0 for s in strides):
        raise BufferError(
            f"__dlpack__(): the data has negative strides {tuple(strides)} (a reversed view); DLPack "
            f"consumers differ on them (torch.from_dlpack aborts the process), so it is not exported: "
            f"give the LoDTensor a copy (t.data.copy()) first")
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


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = (ctypes.py_object, ctypes.c_char_p)
_CAPSULE_NAMES = (b"dltensor", b"dltensor_versioned")  # unused capsules; a consumer renames what it takes


def _check_capsule(capsule, what):
    """Refuse what is not a DLPack capsule (TypeError), or one that a consumer took already (ValueError)."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"from_dlpack(): {what} must be a DLPack capsule, got {type(capsule).__name__}")
    if not any(_capsule_is_valid(capsule, name) for name in _CAPSULE_NAMES):
        raise ValueError(
            f"from_dlpack(): {what} is not an unused DLPack tensor capsule (consumed already, or "
            f"another kind of capsule)"
        )


def _ragged_parts(data):
    """``data.__dlpack_ragged__()`` checked: ``(values_capsule, [offsets_capsule, ...])``.

    Asked for DLPack 1.0 capsules first, then, where that raises TypeError, for the unversioned ones, as
    NumPy and torch ask a producer: ``__dlpack__`` of torch 2.4 and of NumPy < 2.1 takes no ``max_version``.
    """
    try:
        got = data.__dlpack_ragged__(max_version=(1, 0))
    except TypeError:  # a producer (or the data of a LoDTensor) from before DLPack 1.0
        got = data.__dlpack_ragged__()
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], (tuple, list))):
        shown = type(got).__name__
        if isinstance(got, (tuple, list)):
            shown = f"a {shown} of ({', '.join(type(part).__name__ for part in got[:3])}{', ...' * (len(got) > 3)})"
        raise TypeError(
            f"from_dlpack(): data.__dlpack_ragged__() must return (values_capsule, (offsets_capsule, ...)), "
            f"got {shown}"
        )
    values, levels = got
    _check_capsule(values, "the values of data.__dlpack_ragged__()")
    for k, level in enumerate(levels):
        _check_capsule(level, f"lod level {k} of data.__dlpack_ragged__()")
    return values, list(levels)


class _Producer:
    """A capsule plus its device, presented as a DLPack producer (consumers want objects)."""

    __slots__ = ("_capsule", "_device", "_what")

    def __init__(self, capsule, device, what="the capsule"):
        self._capsule, self._device, self._what = capsule, device, what

    def __dlpack__(self, **kwargs):
        # handed out again on a second call: a consumer that refused it (NumPy, for a dtype it lacks)
        # left it unused for the next one; one that took it renamed it, so a second taker refuses it
        _check_capsule(self._capsule, self._what)
        return self._capsule

    def __dlpack_device__(self):
        return self._device


def _device(obj, what="data"):
    """``obj.__dlpack_device__()`` checked: ``(device_type, device_id)`` ints, or None without the method."""
    method = getattr(obj, "__dlpack_device__", None)
    if method is None:
        return None
    device = method()
    try:
        kind, index = device
        return operator.index(kind), operator.index(index)
    except (TypeError, ValueError):
        pass
    raise TypeError(
        f"from_dlpack(): {what}.__dlpack_device__() must return (device_type, device_id), two ints, "
        f"got {device!r:.80}"
    )


def _device_type(obj, what="data"):
    device = _device(obj, what)
    return None if device is None else device[0]


def _cuda_torch(what):
    """torch, when it can hold CUDA memory; a clear error when no library here can."""
    try:
        import torch  # noqa: PLC0415 - GPU data without cupy: torch, if present
    except ImportError:
        raise ImportError(
            "from_dlpack(): GPU data needs cupy or torch; install lodtensor[cuda] or lodtensor[torch]"
        ) from None
    if not torch.cuda.is_available():  # torch.from_dlpack would fail an internal assertion
        raise ValueError(
            f"from_dlpack(): {what} is on a CUDA device, but cupy is not installed and this torch "
            f"({torch.__version__}) has no CUDA device to hold it"
        )
    return torch


def _import_data(obj, what="data"):
    """A backend array for the DLPack producer ``obj`` (shared): NumPy on the host, CuPy (or torch) on a GPU."""
    if backend_name_of(obj) in _KNOWN:
        return obj
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack(): {what} must be a DLPack producer (has __dlpack__), got {type(obj).__name__}")
    kind = _device_type(obj, what)
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
        return _cuda_torch(what).from_dlpack(obj)  # else torch, if present
    raise ValueError(f"from_dlpack(): {what} on DLPack device type {kind} is not supported (CPU and CUDA are)")


def _host_level(level, k):
    """One level of offsets as host integers: lists and NumPy as they are, DLPack producers imported."""
    if isinstance(level, (list, tuple, range, np.ndarray)):
        return level
    name = backend_name_of(level)
    if name == "torch":
        level = level.detach().cpu()
        try:
            return level.numpy()
        except TypeError:  # bfloat16, float8...: no NumPy dtype (and no integers either)
            raise TypeError(
                f"from_dlpack(): lod level {k} must hold integers, got a torch tensor of {level.dtype}"
            ) from None
    if name == "cupy":
        return level.get()
    if hasattr(level, "__dlpack__"):
        if _device_type(level, f"lod level {k}") in (_CPU, _CUDA_HOST):
            return np.from_dlpack(level)
        data = _import_data(level, f"lod level {k}")
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
        ``data`` is not a DLPack producer, or a level is neither ints nor an array;
        a producer whose ``__dlpack_device__()`` is not two ints, or whose
        ``__dlpack_ragged__()`` is not ``(capsule, (capsule, ...))``.
    ValueError
        GPU data with neither cupy nor a CUDA build of torch to hold it; a
        ragged producer's capsule that was consumed already.
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
    if getattr(data, "is_nested", False) is True:  # its __dlpack__ lends values() alone: the components would be lost
        raise TypeError(f"from_dlpack(): data is a nested tensor ({type(data).__name__}); DLPack carries its values() "
                        f"only, not its components (nor holes). A nested tensor ragged in its first component dim is "
                        f"a LoDTensor already: nt.to_lod_tensor()")
    if lod is None and hasattr(data, "__dlpack_ragged__"):
        device = _device(data)
        values, levels = _ragged_parts(data)
        data = _Producer(values, device, "the values of data.__dlpack_ragged__()")
        lod = [_Producer(level, (_CPU, 0), f"lod level {k} of data.__dlpack_ragged__()")
               for k, level in enumerate(levels)]
    array = _import_data(data)
    if getattr(array, "ndim", 1) == 0:
        raise ValueError(f"from_dlpack(): data must have at least 1 dimension (axis 0 holds the rows), got a 0-d "
                         f"{type(array).__name__}; wrap it as [value]")
    if lod is None:
        return LoDTensor(array)
    if isinstance(lod, (str, bytes)) or not hasattr(lod, "__iter__"):
        raise TypeError(f"from_dlpack(): lod must be a list of levels, got {type(lod).__name__}")
    return LoDTensor(array, [_host_level(level, k) for k, level in enumerate(lod)])
