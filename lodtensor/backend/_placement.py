"""Which library holds data at a place, and the move there.

The placement rule of the API: data on the host is NumPy, data on a GPU is
CuPy, unless it is torch data, which stays torch on any device; page-locked
host memory comes from whichever CUDA library is installed.

>>> import numpy as np
>>> a = np.arange(3)
>>> move(a, "cpu", copy=False) is a, move(a, "cpu", copy=True) is a
(True, False)
"""

import weakref

import numpy as np

from ._registry import get_backend

__all__ = ["home_of", "move", "pinned_copy", "pin", "torch_view", "from_torch_view", "mark_frozen", "is_frozen",
           "frozen_fact"]

# id -> weak reference of the arrays marked frozen (their entries go with them); id -> their host facts
_FROZEN = {}
_FACTS = {}


def _forget(key, frozen=_FROZEN, facts=_FACTS):  # bound now: at interpreter exit the globals may be None
    frozen.pop(key, None)
    facts.pop(key, None)


def mark_frozen(a, **facts):
    """Declare ``a`` (an array of any backend) never written again: what is derived from its values
    may be cached against it. ``LoD.on`` marks the device copies of a LoD's host arrays it caches
    (the LoD's own arrays are read-only; a copy a kernel reads is the LoD's too), with ``facts``
    the host knows of their values (offsets: ``longest``, the most rows of a sequence), which
    :func:`frozen_fact` gives back without reading the device; a fact given as a function of no
    arguments is computed on first use (most arrays never need theirs). Arrays that take no weak
    reference are left unmarked.

    >>> import numpy as np
    >>> a = np.arange(3); mark_frozen(a, longest=lambda: 1); is_frozen(a), is_frozen(np.arange(3))
    (True, False)
    >>> frozen_fact(a, "longest"), frozen_fact(np.arange(3), "longest")
    (1, None)
    """
    key = id(a)
    try:
        _FROZEN[key] = weakref.ref(a, lambda _ref, key=key, forget=_forget: forget(key))
    except TypeError:
        return
    _FACTS.pop(key, None)
    if facts:
        _FACTS[key] = dict(facts)


def is_frozen(a):
    """Whether :func:`mark_frozen` declared ``a`` (this very object) never written again."""
    ref = _FROZEN.get(id(a))
    return ref is not None and ref() is a


def frozen_fact(a, name):
    """The host fact ``name`` :func:`mark_frozen` recorded with ``a``; None where it recorded none."""
    facts = _FACTS.get(id(a)) if is_frozen(a) else None
    if not facts or name not in facts:
        return None
    value = facts[name]
    if callable(value):
        value = facts[name] = value()
    return value


def home_of(library, device):
    """The backend name that holds ``library``'s data on ``device``: torch keeps torch; otherwise
    NumPy on the host and CuPy on a GPU.

    >>> home_of("numpy", "cuda:1"), home_of("cupy", "cpu"), home_of("torch", "cuda:0")
    ('cupy', 'numpy', 'torch')
    """
    if library == "torch":
        return "torch"
    if device == "cpu":
        return "numpy"
    if not str(device).startswith(("cuda", "gpu")):  # mps, meta, xpu...: devices only torch data reaches
        raise ValueError(f"{library} data cannot go to device {device!r}: only torch tensors live there; "
                         f"convert the data with .to_torch() first, or pick 'cpu' or 'cuda'")
    return "cupy"


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


def torch_view(data):
    """``data`` (an array of any backend) as a torch tensor over the same memory where the library
    allows it (NumPy through the buffer protocol, CuPy through the CUDA array interface), else a copy
    (a read-only NumPy array): what a torch transport (``torch.distributed``) sends.

    >>> a = np.arange(3.0)
    >>> t = torch_view(a); t[0] = 7.0
    >>> a.tolist()
    [7.0, 1.0, 2.0]
    """
    return get_backend("torch").asarray(data)


def from_torch_view(library, t, device=None):
    """Torch tensor ``t`` as an array of ``library`` (``"numpy"``, ``"cupy"``, ``"torch"``), on ``device``
    (None: where ``t`` is; the host for NumPy), sharing ``t``'s memory where it stays on its device.

    >>> import torch
    >>> from_torch_view("numpy", torch.arange(3)).tolist(), from_torch_view("torch", torch.ones(1)).dtype
    ([0, 1, 2], torch.float32)
    """
    if library == "torch":
        return t if device is None or str(t.device) == str(device) else t.to(device)
    if library == "numpy":
        return t.detach().cpu().numpy()
    import cupy  # noqa: PLC0415 - the CuPy backend is in use

    return cupy.from_dlpack(t if t.is_cuda else t.cuda())


def pin(array):
    """``array`` in page-locked host memory: a torch tensor pinned by torch (it stays torch), any other
    array as a pinned NumPy copy."""
    from . import backend_of  # noqa: PLC0415 - the package imports this module

    be = backend_of(array)
    if be.name == "torch":
        return array.pin_memory()
    return pinned_copy(be.to_numpy(array))


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
