"""A recording stand-in for cupy, backed by NumPy, to test the CuPy backend without a GPU.

``install(monkeypatch)`` puts the stub in ``sys.modules["cupy"]``, loads a fresh copy
of ``lodtensor/backend/cupy/_backend.py`` against it and registers it as the "cupy" backend.
Arrays are a NumPy subclass whose type lives in module "cupy" (so lodtensor routes
them to the CuPy backend). Every ``RawModule`` kernel launch is recorded in
``stub.launches`` as ``(name, grid, block, args)`` and does nothing else: the stub
checks how the backend calls kernels; ``tests/backend/cuda_emu.py`` adds running them.
cuBLAS GEMMs by address (``cupy.cuda.cublas.sgemm``/``dgemm``) are recorded in ``stub.blas_calls``
as ``(name, args)`` after cuBLAS's own argument checks, and computed (NumPy, on the addresses as
host memory, column-major as cuBLAS reads them) where launches run.
"""

import ctypes
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
        # CUDA refuses a launch with a zero grid or block dimension (an invalid configuration): the
        # host code must skip the launch where there is nothing to do (no sequence, no row)
        assert 0 not in tuple(grid) and 0 not in tuple(block), f"{self.name}: launch of grid {grid}, block {block}"
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


def _wrap_all(out):
    if isinstance(out, np.ndarray) and not isinstance(out, ndarray):
        return _wrap(out)
    if isinstance(out, tuple):
        return tuple(_wrap_all(o) for o in out)
    if isinstance(out, list):
        return [_wrap_all(o) for o in out]
    return out


def _plain(obj):
    if isinstance(obj, ndarray):
        return obj.view(np.ndarray)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(o) for o in obj)
    return obj


def make_stub():
    """A module named cupy: NumPy's functions on stub arrays, a recording RawModule, a cuda namespace."""
    stub = types.ModuleType("cupy")
    stub.launches, stub.modules, stub.calls, stub.execute = [], [], [], None
    stub.__version__ = "14.0.0"  # (what the backend reads of it: cuBLAS's scalars by address, CuPy 10 on)
    stub.ndarray = ndarray

    def delegate(name):
        fn = getattr(np, name)
        if not callable(fn) or isinstance(fn, type):
            return fn  # dtypes, constants

        def call(*args, **kwargs):
            stub.calls.append(name)
            return _wrap_all(fn(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()}))

        call.__name__ = name
        if isinstance(fn, np.ufunc):  # cupy.add.at and the like (CuPy 13+), in place as NumPy's
            call.at = lambda a, index, *values: fn.at(a, _plain(index), *_plain(values))
        return call

    stub.__getattr__ = delegate  # PEP 562: any other name is NumPy's, returning stub arrays

    def own(fn):
        def call(*args, **kwargs):
            stub.calls.append(fn.__name__)
            return fn(*args, **kwargs)

        call.__name__ = fn.__name__
        setattr(stub, fn.__name__, call)

    @own
    def asarray(obj, dtype=None):
        return _wrap(np.asarray(_plain(obj), dtype=dtype))

    @own
    def array(obj, dtype=None, copy=True):
        return _wrap(np.array(_plain(obj), dtype=dtype, copy=copy))

    @own
    def asnumpy(a):
        return np.array(a).view(np.ndarray)

    @own
    def empty(shape, dtype=np.float64):
        return _wrap(np.zeros(shape, dtype))  # zeros: a kernel that writes nothing shows as zeros

    @own
    def empty_like(a, dtype=None):
        return _wrap(np.zeros_like(a, dtype=dtype))

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

    stub.blas_calls = []
    cublas = types.SimpleNamespace(sgemm=_gemm(stub, "sgemm", np.float32), dgemm=_gemm(stub, "dgemm", np.float64))
    stub.cuda = types.SimpleNamespace(Device=_DeviceCtx, runtime=types.SimpleNamespace(getDeviceCount=lambda: 0),
                                      cublas=cublas, get_cublas_handle=lambda: 0)
    return stub


def _column_major(address, dtype, rows, cols, ld):
    """The ``rows`` x ``cols`` column-major matrix at host ``address`` with leading dimension ``ld``."""
    item = np.dtype(dtype).itemsize
    span = ((cols - 1) * ld + rows) * item
    buffer = (ctypes.c_char * span).from_address(address)
    return np.ndarray((rows, cols), dtype=dtype, buffer=buffer, strides=(item, ld * item))


def _gemm(stub, name, dtype):
    """cuBLAS's ``<t>gemm``: ``C = alpha op(A) op(B) + beta C``, column-major, every operand an address, the
    scalars by address (host pointer mode); its argument checks give CUBLAS_STATUS_INVALID_VALUE."""

    def gemm(handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        args = (handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        assert all(isinstance(v, int) for v in args), f"{name}: arguments {args}"
        stub.blas_calls.append((name, args))
        a_rows, b_rows = (m if transa == 0 else k), (k if transb == 0 else n)
        if (transa not in (0, 1, 2) or transb not in (0, 1, 2) or min(m, n, k) < 0 or lda < max(1, a_rows)
                or ldb < max(1, b_rows) or ldc < max(1, m)):
            raise RuntimeError(f"CUBLAS_STATUS_INVALID_VALUE: {name}{args}")
        if stub.execute is None or m == 0 or n == 0:
            return
        scalar = _column_major(alpha, dtype, 1, 1, 1)[0, 0], _column_major(beta, dtype, 1, 1, 1)[0, 0]
        op_a = _column_major(a, dtype, a_rows, m + k - a_rows, lda) if k else np.zeros((m, 0), dtype)
        op_b = _column_major(b, dtype, b_rows, n + k - b_rows, ldb) if k else np.zeros((0, n), dtype)
        out = _column_major(c, dtype, m, n, ldc)
        product = scalar[0] * ((op_a if transa == 0 else op_a.T) @ (op_b if transb == 0 else op_b.T))
        out[...] = product if scalar[1] == 0 else product + scalar[1] * out  # (beta 0: C is not read)

    gemm.__name__ = name
    return gemm


def _cupyx():
    """The few cupyx names lodtensor uses, on NumPy/SciPy."""
    cupyx = types.ModuleType("cupyx")
    cupyx.scatter_add = lambda a, index, values: np.add.at(a, _plain(index), _plain(values))
    cupyx.empty_pinned = lambda shape, dtype=np.float64: np.empty(shape, dtype)
    scipy = types.ModuleType("cupyx.scipy")
    special = types.ModuleType("cupyx.scipy.special")

    def erf(x):
        from scipy.special import erf as host_erf  # noqa: PLC0415

        return _wrap_all(host_erf(_plain(x)))

    special.erf = erf

    def on_host(name):  # a few of cupyx.scipy.special's functions (not airy: CuPy has none)
        def fn(*args):
            import scipy.special as host  # noqa: PLC0415

            return _wrap_all(getattr(host, name)(*[_plain(a) for a in args]))

        return fn

    for name in ("j0", "i0e", "ndtr", "erfcx", "zeta", "gammainc", "gammaln", "polygamma"):
        setattr(special, name, on_host(name))
    cupyx.scipy, scipy.special = scipy, special
    return {"cupyx": cupyx, "cupyx.scipy": scipy, "cupyx.scipy.special": special}


def install(monkeypatch):
    """Swap cupy for a fresh stub and the "cupy" backend for one built on it; return the stub."""
    import lodtensor.backend as backend_pkg  # noqa: PLC0415

    stub = make_stub()
    monkeypatch.setitem(sys.modules, "cupy", stub)
    for name, module in _cupyx().items():
        monkeypatch.setitem(sys.modules, name, module)
    path = os.path.join(os.path.dirname(backend_pkg.__file__), "cupy", "_backend.py")
    spec = importlib.util.spec_from_file_location("lodtensor.backend.cupy._backend_on_stub", path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "lodtensor.backend.cupy"
    spec.loader.exec_module(module)
    monkeypatch.setitem(backend_pkg._BACKENDS, "cupy", module.make_backend())
    monkeypatch.setattr(backend_pkg, "_TYPE_CACHE", {})
    return stub
