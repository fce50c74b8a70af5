"""Pickling array data without trusting the array library's own loader.

Neither library's unpickling is safe against a flipped byte: torch pickles a
tensor through ``torch.load`` of an inner byte string, which can crash while
it reads, and NumPy rebuilds a dtype from a state tuple, where a ``'i8'``
flipped into ``'m8'`` without its datetime metadata crashes the process
(numpy 2.x). LoDTensors and NestedTensors therefore pickle their data as
:class:`Portable`: the raw bytes plus library, dtype name, shape, device and
``requires_grad``, rebuilt by :func:`array_from_bytes`, which checks every part
before it builds the array from a copy of the bytes. Only numeric and bool
dtypes travel this way (the only ones a LoDTensor holds); anything else
pickles as its library pickles it.

>>> import pickle, torch
>>> x = torch.arange(6.0).reshape(2, 3)
>>> y = pickle.loads(pickle.dumps(portable(x)))
>>> torch.equal(x, y), y.dtype
(True, torch.float32)
>>> a = pickle.loads(pickle.dumps(portable(np.arange(4, dtype=np.int8))))
>>> a.tolist(), a.dtype, a.flags.writeable
([0, 1, 2, 3], dtype('int8'), True)
"""

import math

import numpy as np

__all__ = ["portable", "Portable", "array_from_bytes", "unpickled_by", "UNPICKLERS"]

#: every function and class lodtensor's pickles call to rebuild an object (each checks what it is
#: given): what ``torch.load(..., weights_only=True)`` must admit (``interop.torch_safe_globals``)
UNPICKLERS = []


def unpickled_by(obj):
    """Register ``obj`` (a rebuild function or a class whose pickles call it) in :data:`UNPICKLERS`."""
    UNPICKLERS.append(obj)
    return obj


_NUMPY_KINDS = "biufc"
_WHERE = "unpickling array data"


def portable(data):
    """``data`` wrapped so that it pickles as checked raw bytes (NumPy and torch), else ``data`` itself."""
    lib = type(data).__module__.split(".")[0]
    if lib == "torch" or (isinstance(data, np.ndarray) and data.dtype.kind in _NUMPY_KINDS):
        return Portable(data)
    return data


class Portable:
    """An array that pickles as its raw bytes and unpickles as the plain array."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __reduce__(self):
        # No bytes pickle as None: protocol 2 (torch.save's) writes b"" as a call of builtins.bytes, which
        # torch.load(weights_only=True) refuses (and admitting bytes would let a file ask for bytes(2**40)).
        x = self.array
        if isinstance(x, np.ndarray):
            flat = np.ascontiguousarray(x)
            raw = flat.tobytes() if flat.size else None
            return (array_from_bytes, ("numpy", raw, x.dtype.str, tuple(x.shape), "cpu", False))
        import torch  # noqa: PLC0415 - only torch data gets here

        y = x.detach()
        flat = y.to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)  # a conj/neg view: its values
        raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else None
        name = str(y.dtype).split(".")[-1]
        return (array_from_bytes, ("torch", raw, name, tuple(y.shape), str(y.device), bool(x.requires_grad)))


def _check_common(raw, shape, requires_grad):
    if not isinstance(raw, (bytes, bytearray)):  # (None, for no bytes, is b"" by now)
        raise TypeError(f"{_WHERE}: the data must be bytes, got {type(raw).__name__}")
    if not isinstance(shape, tuple) or not all(type(n) is int and 0 <= n < 1 << 63 for n in shape):
        raise ValueError(f"{_WHERE}: shape must be a tuple of non-negative ints below 2**63, got {_short(shape)}")
    if not isinstance(requires_grad, bool):
        raise TypeError(f"{_WHERE}: requires_grad must be a bool, got {requires_grad!r}")


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _expect(raw, shape, itemsize, dtype):
    want = math.prod(shape) * itemsize
    if want != len(raw):
        raise ValueError(f"{_WHERE}: shape {shape} of {dtype} needs {want} bytes, the pickle holds {len(raw)}")


@unpickled_by
def array_from_bytes(lib, raw, dtype, shape, device, requires_grad):
    """The array :class:`Portable` pickled, after checking every part (ValueError/TypeError otherwise)."""
    raw = b"" if raw is None else raw  # no bytes (see Portable.__reduce__)
    _check_common(raw, shape, requires_grad)
    if lib == "numpy":
        try:
            kind = np.dtype(dtype) if isinstance(dtype, str) else None
        except TypeError:
            kind = None
        if kind is None or kind.kind not in _NUMPY_KINDS or kind.fields is not None:
            raise TypeError(f"{_WHERE}: dtype must name a numeric or bool NumPy dtype, got {dtype!r}")
        _expect(raw, shape, kind.itemsize, dtype)
        return np.frombuffer(raw, dtype=kind).reshape(shape).copy()
    if lib != "torch":
        raise ValueError(f"{_WHERE}: the array library must be 'numpy' or 'torch', got {lib!r}")
    import torch  # noqa: PLC0415

    from . import dtype_kind  # noqa: PLC0415 - the package's gate of dtypes (it imports this module)

    kind = getattr(torch, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(kind, torch.dtype) or dtype_kind(kind) not in _NUMPY_KINDS:
        raise TypeError(f"{_WHERE}: dtype must name a numeric or bool torch dtype, got {dtype!r}")
    if requires_grad and not (kind.is_floating_point or kind.is_complex):
        raise ValueError(f"{_WHERE}: requires_grad=True needs a floating or complex dtype, got {dtype!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"{_WHERE}: device must name a torch device, got {device!r}") from err
    if dev.type == "meta":
        raise ValueError(f"{_WHERE}: device 'meta' holds no data; expected a device with memory, such as 'cpu'")
    _expect(raw, shape, torch.empty((), dtype=kind).element_size(), dtype)
    if raw:
        out = torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy()).view(kind).reshape(shape)
    else:
        out = torch.empty(shape, dtype=kind)
    if dev.type != "cpu":
        try:
            out = out.to(dev)
        except Exception as err:  # noqa: BLE001 - torch asserts without CUDA, imports a module for some devices
            raise ValueError(f"{_WHERE}: device {device!r} is not available here: "
                             f"{type(err).__name__}: {str(err)[:200]}") from None
    return out.requires_grad_(requires_grad) if requires_grad else out
