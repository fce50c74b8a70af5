"""Fixtures of the backend tests."""

import shutil

import numpy as np
import pytest

from . import cuda_emu


@pytest.fixture
def uncompiled():
    """The NumPy backend with its compiled segment kernel off: its NumPy-only kernels serve."""
    from lodtensor.backend import set_compiled_kernels

    saved = set_compiled_kernels(False)
    yield
    set_compiled_kernels(saved)


@pytest.fixture(scope="module")
def _emulator():
    """The emulated CUDA kernels (tests/backend/cuda_emu.py), built once per module."""
    return cuda_emu.library()


@pytest.fixture
def emulated(_emulator, monkeypatch):
    """The CuPy backend on the cupy stub, its kernels emulated on the CPU (a BackendCase)."""
    return cuda_emu.EmulatedCase(cuda_emu.install(monkeypatch))


@pytest.fixture
def route(_emulator, monkeypatch):
    """The torch-CUDA route on: CPU tensors take the kernels (emulated); the CPU-only shortcuts off.
    Returns the cupy stub (its ``launches``)."""
    from lodtensor.backend.torch import _backend as torch_backend  # noqa: PLC0415
    from lodtensor.backend.torch import _cuda  # noqa: PLC0415

    stub = cuda_emu.install(monkeypatch)
    monkeypatch.setattr(_cuda, "_EMULATED", True)
    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", False)
    return stub


@pytest.fixture(params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def device_route(request):
    """The torch device of a test of the device route: "cpu" with the route on ("emulated": CPU tensors down
    the torch-CUDA route, its kernels emulated; needs g++), or "cuda" (marked gpu; needs a GPU)."""
    return _route_device(request, request.param)


@pytest.fixture(params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def enter_route(request):
    """As ``device_route``, entered later: a function that puts the test on the route when called (so that
    the test can first compute its reference on plain CPU tensors) and returns the route's torch device."""
    return lambda: _route_device(request, request.param)


def _route_device(request, where):
    if where == "emulated":
        if shutil.which("g++") is None:
            pytest.skip("needs g++ to build the CUDA stand-in")
        request.getfixturevalue("route")
        return "cpu"
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return "cuda"


@pytest.fixture(params=["cpu", "emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def torch_device(request):
    """The device of a torch-backend test: "cpu"; "emulated" (CPU tensors down the torch-CUDA route,
    its kernels emulated: the CUDA autograd Functions' own code runs; needs g++); "cuda" (marked gpu)."""
    if request.param == "emulated":
        if shutil.which("g++") is None:
            pytest.skip("needs g++ to build the CUDA stand-in")
        request.getfixturevalue("route")
        return "cpu"
    return request.param


def count_reads(monkeypatch, be):
    """The sizes of the arrays ``be.to_numpy`` reads from now on (a list that grows)."""
    reads = []
    cls = type(be)
    real = cls.to_numpy

    def counted(self, x):
        reads.append(int(np.prod(x.shape, dtype=np.int64)))
        return real(self, x)

    monkeypatch.setattr(cls, "to_numpy", counted)
    return reads
