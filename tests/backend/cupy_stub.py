"""A recording stand-in for cupy, backed by NumPy, to test the CuPy backend without a GPU.

``install(monkeypatch)`` puts the stub in ``sys.modules["cupy"]``, loads a fresh copy
of ``lodtensor/backend/cupy.py`` against it and registers it as the "cupy" backend.
Arrays are a NumPy subclass whose type lives in module "cupy" (so lodtensor routes
them to the CuPy backend). Every ``RawModule`` kernel launch is recorded in
``stub.launches`` as ``(name, grid, block, args)`` and does nothing else: the stub
checks how the backend calls kernels; ``tests/backend/cuda_emu.py`` adds running them.
"""

import importlib.util
import os
import sys
import types

import numpy as np


class ndarray(np.ndarray):  # noqa: N801 - cupy's name
    class _Device:
        id = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    device = _Device()


ndarray.__module__ = "cupy"


def _wrap(a):
    a = np.asarray(a)
    return a.view(ndarray) if a.ndim else ndarray.__new__(ndarray, (), a.dtype, buffer=np.array(a))


class _Function:
    def __init__(self, stub, name, module):
        self.stub, self.name, self.module = stub, name, module

    def __call__(self, grid, block, args):
        self.stub.launches.append((self.name, tuple(grid), tuple(block), tuple(args)))
        if self.stub.execute is not None:  # tests/backend/cuda_emu.py: run the real kernel on the CPU
            self.stub.execute(self.name, grid, block, args)


class _RawModule:
    def __init__(self, stub, code, options=(), name_expressions=()):
        self.stub, self.code, self.names = stub, code, tuple(name_expressions)
        stub.modules.append(self)

    def get_function(self, name):
        if name not in self.names and 'extern "C" __global__' not in self.code:
            raise KeyError(name)
        return _Function(self.stub, name, self)


def make_stub():
    stub = types.ModuleType("cupy")
    stub.launches, stub.modules, stub.calls, stub.execute = [], [], [], None
    stub.ndarray = ndarray
    for name in ("int64", "int32", "float32", "float64", "bool_", "uint8"):
        setattr(stub, name, getattr(np, name))

    def record(fn):
        def call(*args, **kwargs):
            stub.calls.append(fn.__name__)
            return fn(*args, **kwargs)

        call.__name__ = fn.__name__
        return call

    def asarray(obj, dtype=None):
        return _wrap(np.asarray(obj, dtype=dtype))

    def array(obj, dtype=None, copy=True):
        return _wrap(np.array(obj, dtype=dtype, copy=copy))

    def ascontiguousarray(a, dtype=None):
        return _wrap(np.ascontiguousarray(a, dtype=dtype))

    def asnumpy(a):
        return np.array(a).view(np.ndarray)

    def empty(shape, dtype=np.float64):
        return _wrap(np.zeros(shape, dtype))  # zeros: the stub's kernels write nothing

    def zeros(shape, dtype=np.float64):
        return _wrap(np.zeros(shape, dtype))

    def zeros_like(a):
        return _wrap(np.zeros_like(a))

    def empty_like(a):
        return _wrap(np.zeros_like(a))

    def arange(*args, dtype=None):
        return _wrap(np.arange(*args, dtype=dtype))

    def cumsum(a, axis=None):
        return _wrap(np.cumsum(a, axis=axis))

    def concatenate(arrays, axis=0):
        return _wrap(np.concatenate([np.asarray(a) for a in arrays], axis=axis))

    def take(a, index, axis=None):
        return _wrap(np.take(a, index, axis=axis))

    def searchsorted(a, v, side="left"):
        return _wrap(np.searchsorted(a, v, side=side))

    def where(c, x, y):
        return _wrap(np.where(c, x, y))

    def maximum(a, b):
        return _wrap(np.maximum(a, b))

    def broadcast_to(a, shape):
        return _wrap(np.broadcast_to(a, shape))

    for fn in (broadcast_to, asarray, array, ascontiguousarray, asnumpy, empty, zeros, zeros_like, empty_like,
               arange, cumsum, concatenate, take, searchsorted, where, maximum):
        setattr(stub, fn.__name__, record(fn))
    stub.RawModule = lambda code, options=(), name_expressions=(): _RawModule(stub, code, options, name_expressions)

    class _DeviceCtx:
        def __init__(self, index=0):
            self.id = index

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    stub.cuda = types.SimpleNamespace(Device=_DeviceCtx,
                                      runtime=types.SimpleNamespace(getDeviceCount=lambda: 0))
    return stub


def install(monkeypatch):
    """Swap cupy for a fresh stub and the "cupy" backend for one built on it; return the stub."""
    import lodtensor.backend as backend_pkg  # noqa: PLC0415

    stub = make_stub()
    monkeypatch.setitem(sys.modules, "cupy", stub)
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(scatter_add=np.add.at))
    path = os.path.join(os.path.dirname(backend_pkg.__file__), "cupy.py")
    spec = importlib.util.spec_from_file_location("lodtensor.backend._cupy_on_stub", path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "lodtensor.backend"
    spec.loader.exec_module(module)
    monkeypatch.setitem(backend_pkg._BACKENDS, "cupy", module.make_backend())
    monkeypatch.setattr(backend_pkg, "_TYPE_CACHE", {})
    return stub
