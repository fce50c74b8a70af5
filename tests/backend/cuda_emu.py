"""Run the CuPy backend's real CUDA C kernels on the CPU, through the recording cupy stub.

``cuda_emu/emu.h`` stands in for the CUDA runtime (thread and block indices, warp
shuffles, __syncthreads, __shared__) so g++ compiles ``lodtensor/backend/cupy/cuda/*.cu``
unchanged; every name expression the backend can launch gets an ``extern "C"``
launcher taking the kernel arguments the way cuLaunchKernel does. ``install``
then makes the stub's ``RawModule`` run launches through that library, so the
real host code of ``lodtensor/backend/cupy/_backend.py`` drives the real kernels, one
block at a time, on NumPy buffers. It checks what the kernels compute (indexing,
pieces, combine pass, empty sequences, dtypes), not GPU timing or memory model.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from lodtensor.backend.cupy import cuda as kernels

from . import cupy_stub

_HERE = os.path.dirname(os.path.abspath(__file__))
_COOPERATIVE = ("lt_segment_", "lt_softmax_", "lt_extreme_", "lt_unpad", "lt_piece_plan")  # shuffles, ballots, barriers


def _names():
    out = []
    for module in kernels.SOURCES:
        out += [(module, name) for name in kernels.name_expressions(module) + list(kernels.EXTERN_C[module])]
    return out


def _source():
    parts = ['#include "emu.h"']
    for file in kernels.SOURCES.values():
        parts.append(f'#include "{os.path.join(kernels.include_dir(), file)}"')
    for i, (_, name) in enumerate(_names()):
        coop = "true" if name.startswith(_COOPERATIVE) else "false"
        parts.append(f'extern "C" void lt_emu_{i}(unsigned gx, unsigned gy, unsigned bx, void** args) '
                     f"{{ emu::launch(&{name}, gx, gy, bx, args, {coop}); }}")
    return "\n".join(parts) + "\n"


_LIB = {}


def library():
    """The compiled launchers (built once per source version, cached in the temp folder)."""
    if _LIB:
        return _LIB
    compiler = shutil.which("g++")
    if compiler is None:
        raise RuntimeError("g++ not found")
    source = _source()
    digest = hashlib.sha256(source.encode())
    folder = kernels.include_dir()
    sources = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith((".cu", ".cuh"))]
    for file in [os.path.join(_HERE, "cuda_emu", "emu.h"), *sources]:
        with open(file, "rb") as f:
            digest.update(f.read())
    target = os.path.join(tempfile.gettempdir(), f"lodtensor-cuda-emu-{digest.hexdigest()[:16]}.so")
    if not os.path.exists(target):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "emu.cpp")
            with open(src, "w", encoding="utf-8") as f:
                f.write(source)
            subprocess.run([compiler, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w",
                            f"-I{os.path.join(_HERE, 'cuda_emu')}", f"-I{kernels.include_dir()}", src,
                            "-o", target + ".tmp"], check=True, capture_output=True, text=True)
        os.replace(target + ".tmp", target)
    lib = ctypes.CDLL(target)
    table = {}
    for i, (_, name) in enumerate(_names()):
        fn = getattr(lib, f"lt_emu_{i}")
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]
        table[name] = fn
    _LIB.update(table)
    return _LIB


def _launch(table, name, grid, block, args):
    keep, pointers = [], []
    for arg in args:
        if isinstance(arg, np.ndarray) and arg.ndim >= 0 and not isinstance(arg, np.generic) and arg.shape != ():
            assert arg.flags.c_contiguous, f"{name}: a non-contiguous array argument"
            cell = ctypes.c_void_p(arg.ctypes.data)
        elif isinstance(arg, np.ndarray):  # a 0-d stub array: device memory of one element
            cell = ctypes.c_void_p(arg.ctypes.data)
        elif isinstance(arg, np.generic):
            cell = ctypes.create_string_buffer(arg.tobytes(), max(arg.itemsize, 1))
        else:
            raise TypeError(f"{name}: kernel argument of type {type(arg).__name__} (use NumPy scalars)")
        keep.append(cell)
        pointers.append(ctypes.cast(ctypes.pointer(cell), ctypes.c_void_p))
    grid = tuple(grid) + (1, 1)
    assert grid[2] == 1 and tuple(block)[1:] in ((), (1,), (1, 1)), (grid, block)
    argv = (ctypes.c_void_p * len(pointers))(*pointers)
    table[name](grid[0], grid[1], block[0], argv)


def install(monkeypatch):
    """The cupy stub, with kernel launches executed by the emulated kernels; returns the stub."""
    table = library()
    stub = cupy_stub.install(monkeypatch)
    stub.execute = lambda name, grid, block, args: _launch(table, name, grid, block, args)
    return stub


class EmulatedCase:
    """A BackendCase for the CuPy backend on the stub, kernels emulated."""

    label = "cupy (emulated)"
    device = "cuda"
    generic = False

    def __init__(self, stub):
        from lodtensor import get_backend  # noqa: PLC0415

        self.stub = stub
        self.be = get_backend("cupy")

    def array(self, values, dtype=None):
        return self.stub.asarray(np.asarray(values, dtype=dtype).copy())

    def numpy(self, x):
        return np.asarray(self.be.to_numpy(x))

    def __getattr__(self, name):
        return getattr(self.be, name)
