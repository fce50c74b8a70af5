"""Places (Paddle's names for devices) and their mapping to backends.

``CPUPlace()`` keeps data in host memory (NumPy, or torch on the CPU when the
data is torch), ``CUDAPlace(i)`` on GPU ``i`` (CuPy, or torch on CUDA when the
data is torch), ``CUDAPinnedPlace()`` in page-locked host memory. Device
strings (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"gpu:0"``) and ``torch.device``
objects are accepted wherever a place is.
"""

import operator

__all__ = ["Place", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace", "DevicePlace", "as_place", "place_of"]


class Place:
    """Base class of the places; compare and hash by value.

    >>> isinstance(CPUPlace(), Place), CUDAPlace(0) == CUDAPlace(0), CUDAPlace(0) == CUDAPlace(1)
    (True, True, False)
    >>> len({CPUPlace(), CPUPlace(), CUDAPinnedPlace()})
    2
    """

    __slots__ = ()
    kind = "abstract"

    @property
    def device(self):
        """The device string (``"cpu"`` or ``"cuda:<i>"``)."""
        raise NotImplementedError  # pragma: no cover - every concrete place overrides it

    def _key(self):
        return (self.kind,)

    def __eq__(self, other):
        return isinstance(other, Place) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def is_cpu_place(self):
        """Whether this is host memory, ``CPUPlace()`` (Paddle).

        >>> CPUPlace().is_cpu_place(), CUDAPlace(0).is_cpu_place()
        (True, False)
        """
        return self.kind == "cpu"

    def is_gpu_place(self):
        """Whether this is a GPU, ``CUDAPlace(i)`` (Paddle).

        >>> CUDAPlace(1).is_gpu_place(), CUDAPinnedPlace().is_gpu_place()
        (True, False)
        """
        return self.kind == "gpu"

    def is_cuda_pinned_place(self):
        """Whether this is page-locked host memory, ``CUDAPinnedPlace()`` (Paddle).

        >>> CUDAPinnedPlace().is_cuda_pinned_place(), CPUPlace().is_cuda_pinned_place()
        (True, False)
        """
        return self.kind == "gpu_pinned"

    def __reduce__(self):
        return (type(self), ())

    def __setstate__(self, state):  # a place pickles through its constructor (__reduce__), never so
        raise TypeError(f"unpickling a {type(self).__name__}: refusing to set its state directly "
                        f"({type(state).__name__}); a place unpickles through its constructor, which checks it")


class CPUPlace(Place):
    """Host memory. ``str(CPUPlace())`` is ``'Place(cpu)'`` as in Paddle.

    >>> CPUPlace()
    Place(cpu)
    """

    __slots__ = ()
    kind = "cpu"
    device = "cpu"

    def __repr__(self):
        return "Place(cpu)"


class CUDAPinnedPlace(Place):
    """Page-locked host memory (for fast host-to-GPU copies); needs CUDA to allocate.

    >>> CUDAPinnedPlace()
    Place(gpu_pinned)
    """

    __slots__ = ()
    kind = "gpu_pinned"
    device = "cpu"

    def __repr__(self):
        return "Place(gpu_pinned)"


class CUDAPlace(Place):
    """GPU ``device_id``. ``str(CUDAPlace(0))`` is ``'Place(gpu:0)'`` as in Paddle.

    >>> CUDAPlace(1), CUDAPlace(1).device
    (Place(gpu:1), 'cuda:1')
    >>> CUDAPlace(-1)
    Traceback (most recent call last):
    ...
    ValueError: CUDAPlace(): device_id must be a non-negative integer, got -1
    """

    __slots__ = ("_id",)
    kind = "gpu"

    def __new__(cls, device_id=0):  # (not __init__: a pickle's NEWOBJ, torch.load's too, is checked alike)
        try:
            device_id = operator.index(device_id)
        except TypeError:
            raise TypeError(
                f"CUDAPlace(): device_id must be an integer, got {type(device_id).__name__} {device_id!r}"
            ) from None
        if device_id < 0:
            raise ValueError(f"CUDAPlace(): device_id must be a non-negative integer, got {device_id}")
        self = super().__new__(cls)
        self._id = device_id
        return self

    def get_device_id(self):
        """The GPU's index (Paddle).

        >>> CUDAPlace(1).get_device_id()
        1
        """
        return self._id

    @property
    def device(self):
        return f"cuda:{self._id}"

    def _key(self):
        return (self.kind, self._id)

    def __repr__(self):
        return f"Place(gpu:{self._id})"

    def __reduce__(self):
        return (CUDAPlace, (self._id,))


class DevicePlace(Place):
    """Another device of the array library (torch's ``meta``, ``mps``, ``xpu``...): where data on
    such a device lives. It has no Paddle name.

    >>> DevicePlace("meta"), DevicePlace("meta").device
    (Place(meta), 'meta')
    """

    __slots__ = ("_device",)
    kind = "device"

    def __new__(cls, device):  # (not __init__: a pickle's NEWOBJ is checked alike)
        if not isinstance(device, str):
            raise TypeError(f"DevicePlace(): device must be a str, got {type(device).__name__}")
        self = super().__new__(cls)
        self._device = device
        return self

    @property
    def device(self):
        return self._device

    def _key(self):
        return (self.kind, self._device)

    def __repr__(self):
        return f"Place({self._device})"

    def __reduce__(self):
        return (DevicePlace, (self._device,))


_CPU = CPUPlace()
_DEVICE_PLACES = {}  # device string -> its Place (immutable: shared by the arrays there)
#: device types of torch that no Paddle place names (``place_of`` gives them a DevicePlace)
_OTHER_DEVICES = ("meta", "mps", "xpu", "hpu", "privateuseone")


def as_place(place, name="place"):
    """A :class:`Place` from a place, a device string or a ``torch.device``; None -> None.

    >>> as_place("cuda:1"), as_place("cpu"), as_place("gpu")
    (Place(gpu:1), Place(cpu), Place(gpu:0))
    >>> as_place("tpu")
    Traceback (most recent call last):
    ...
    ValueError: place must be a Place, 'cpu', 'cuda', 'cuda:<i>' or 'gpu:<i>', got 'tpu'
    """
    if place is None or isinstance(place, Place):
        return place
    text = place if isinstance(place, str) else None
    if text is None and hasattr(place, "type") and hasattr(place, "index"):  # a torch.device
        text = str(place)
    if text is None:
        raise TypeError(
            f"{name} must be a Place (CPUPlace(), CUDAPlace(i), CUDAPinnedPlace()) or a device "
            f"string, got {type(place).__name__} {place!r}"
        )
    kind, _, index = text.strip().lower().partition(":")  # an index of ASCII digits only ("²".isdigit())
    if kind == "cpu" and not index:
        return _CPU
    if kind in ("cuda", "gpu") and (not index or (index.isascii() and index.isdigit())):
        return CUDAPlace(int(index or 0))
    if kind in ("gpu_pinned", "cuda_pinned", "pinned") and not index:
        return CUDAPinnedPlace()
    if kind in _OTHER_DEVICES and (not index or (index.isascii() and index.isdigit())):
        return DevicePlace(text.strip().lower())
    raise ValueError(f"{name} must be a Place, 'cpu', 'cuda', 'cuda:<i>' or 'gpu:<i>', got {place!r}")


def place_of(array, backend):
    """The place an array of ``backend`` lives in.

    >>> import numpy as np
    >>> from lodtensor import get_backend
    >>> place_of(np.zeros(3), get_backend("numpy"))
    Place(cpu)
    """
    device = backend.device_of(array)
    if device == "cpu":
        return _CPU
    place = _DEVICE_PLACES.get(device)
    if place is None:  # (as_place parses the string: once per device, not once per op result)
        place = _DEVICE_PLACES[device] = as_place(device)
    return place

