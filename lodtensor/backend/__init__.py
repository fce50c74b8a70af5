"""Array backends: one small kernel set per array library.

``backend_of(*arrays)`` picks the backend from the arrays' types without
importing optional libraries (it looks at the type's module name);
``get_backend(name)`` returns a backend by name, importing its library lazily.

The NumPy backend keeps a bounded pool of large output buffers
(``set_buffer_pool``, ``get_buffer_pool``, ``trim_buffer_pool``,
``buffer_pool_info``; the ``LODTENSOR_BUFFER_POOL`` environment variable):
see ``lodtensor.backend.numpy._pool`` and docs/backends.md. Its segment
reductions run in a compiled kernel where one was built at install
(``compiled_kernels``, ``set_compiled_kernels``; ``LODTENSOR_COMPILED=0``
switches it off): see ``lodtensor.backend.numpy._compiled``.
"""

import numpy as np

from ..errors import BackendMismatchError
from ._contract import KERNELS, Backend
from ._registry import _BACKENDS, get_backend  # noqa: F401 - _BACKENDS: tests register stubs there
from .numpy._compiled import compiled_kernels, set_compiled_kernels
from .numpy._pool import buffer_pool_info, get_buffer_pool, set_buffer_pool, trim_buffer_pool

__all__ = ["Backend", "KERNELS", "backend_of", "dtype_kind", "dtype_name", "get_backend", "backend_name_of",
           "available_backends", "set_buffer_pool", "get_buffer_pool", "trim_buffer_pool", "buffer_pool_info",
           "compiled_kernels", "set_compiled_kernels"]

_TYPE_CACHE = {}

_MODULE_PREFIX = {"numpy": "numpy", "cupy": "cupy", "torch": "torch"}


def backend_name_of(array):
    """``"numpy"``, ``"cupy"`` or ``"torch"`` for an array, None for anything else.

    Looks only at the type's module, so it never imports cupy or torch. NumPy
    scalars and Python numbers are None: they combine with any backend.

    >>> import torch
    >>> backend_name_of(np.zeros(3)), backend_name_of(torch.zeros(3)), backend_name_of(2.5), backend_name_of([1, 2])
    ('numpy', 'torch', None, None)
    """
    kind = type(array)
    name = _TYPE_CACHE.get(kind, False)
    if name is False:
        # str(): under torch.compile, dynamo traces no str method on the __module__ of torch.nn.Parameter
        # (fc(x) with fullgraph=True failed on its first call with a Parameter weight)
        root = str(kind.__module__).split(".", 1)[0]
        name = root if root in _MODULE_PREFIX else None
        if name == "numpy" and not issubclass(kind, np.ndarray):
            name = None
        _TYPE_CACHE[kind] = name
    return name


def backend_of(*arrays):
    """The one backend shared by ``arrays`` (scalars and Python values are neutral).

    Raises
    ------
    BackendMismatchError
        Arrays of two different libraries were given.

    >>> be = backend_of(np.zeros(3), 2.5)
    >>> be.name, be.segment_sum(np.arange(5.0), np.array([0, 2, 5]), ids=None).tolist()
    ('numpy', [1.0, 9.0])
    >>> import torch
    >>> backend_of(np.zeros(3), torch.zeros(3))
    Traceback (most recent call last):
    ...
    lodtensor.errors.BackendMismatchError: cannot combine 'numpy' and 'torch' arrays; convert one first ...
    """
    if len(arrays) == 1:  # one array (a tensor's own data, the common case): no set to build
        return get_backend(backend_name_of(arrays[0]) or "numpy")
    names = {name for name in map(backend_name_of, arrays) if name is not None}
    if len(names) > 1:
        first, second = sorted(names)[:2]
        raise BackendMismatchError(
            f"cannot combine {first!r} and {second!r} arrays; convert one first (a LoDTensor: t.to_torch() or "
            f"lt.LoDTensor(t.numpy(), t.lod); an array: torch.as_tensor(a), a.numpy(), cupy.asarray(a))"
        )
    return get_backend(names.pop() if names else "numpy")


def dtype_kind(dtype):
    """NumPy's kind letter (``b i u f c``...) of a NumPy, CuPy or torch dtype (or a dtype name).

    The one place that decides what kind a dtype is: the backend of the dtype's
    library answers (:meth:`Backend.dtype_kind`), without importing a library
    the dtype does not come from.

    >>> dtype_kind("float32"), dtype_kind(np.dtype("uint8")), dtype_kind(bool)
    ('f', 'u', 'b')
    """
    if isinstance(dtype, np.dtype):  # (a NumPy dtype, the common case: its own kind)
        return dtype.kind
    root = type(dtype).__module__.split(".", 1)[0]
    if root in _MODULE_PREFIX and root != "numpy":
        return get_backend(root).dtype_kind(dtype)
    return np.dtype(dtype).kind


def dtype_name(dtype):
    """The name of a NumPy, CuPy or torch dtype (or a dtype name), without the library's prefix.

    >>> import torch
    >>> dtype_name(torch.bfloat16), dtype_name("f4"), dtype_name(np.int64)
    ('bfloat16', 'float32', 'int64')
    """
    root = type(dtype).__module__.split(".", 1)[0]
    if root in _MODULE_PREFIX and root != "numpy":
        return str(dtype).rsplit(".", 1)[-1]
    return np.dtype(dtype).name


def available_backends():
    """Names of the backends whose library imports here.

    >>> available_backends()[0], set(available_backends()) <= {"numpy", "cupy", "torch"}
    ('numpy', True)
    """
    names = ["numpy"]
    for name in ("cupy", "torch"):
        try:
            get_backend(name)
        except ImportError:
            continue
        names.append(name)
    return names
