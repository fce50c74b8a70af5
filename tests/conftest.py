"""Shared fixtures: backends, hypothesis profiles, the gpu marker."""

import gc
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from ._torch_range import older_oracle_skips

settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _gpu_available():
    """A CUDA device seen by cupy or by torch (each gpu case skips itself when its library is missing)."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return True
    except Exception:
        pass
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    older_oracle_skips(items)  # tests whose oracle is a newer torch than the installed one (_torch_range.py)
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (cupy or torch); none here")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # not `"gpu" in keywords`: a folder named gpu matches it
            item.add_marker(skip)


@pytest.fixture(scope="module")
def frozen_heap():
    """What the session made before a module's tests is moved out of the collector's sight
    (``gc.freeze``): each ``gc.collect()`` there then scans only what the tests make (in a whole
    ``make test`` process a full collection takes 0.1-0.3 s); what they make is collected as before."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# LT_CUPY_EMULATED=1: the "cupy" cases run without a GPU, the real CUDA kernels emulated on the
# CPU behind a cupy stub (tests/backend/cuda_emu.py; needs g++), e.g. `LT_CUPY_EMULATED=1 pytest -k cupy`
CUPY_EMULATED = os.environ.get("LT_CUPY_EMULATED") == "1"

BACKENDS = [
    "numpy",
    "numpy-uncompiled",  # numpy with its compiled segment kernel off: the NumPy-only kernels
    "torch",
    "torch-generic",  # torch on CPU without its CPU-only kernels: the code CUDA runs
    pytest.param("cupy", marks=() if CUPY_EMULATED else pytest.mark.gpu),
    pytest.param("torch-cuda", marks=pytest.mark.gpu),
]


class BackendCase:
    """A backend plus the device its test arrays go to."""

    def __init__(self, name):
        from lodtensor import get_backend

        self.label = name
        lib = name.split("-", 1)[0]
        try:
            self.be = get_backend(lib)
        except ImportError as err:
            pytest.skip(f"backend {lib!r} unavailable: {err}")
        self.device = "cuda" if name in ("cupy", "torch-cuda") else "cpu"
        self.generic = name == "torch-generic"
        self.uncompiled = name == "numpy-uncompiled"

    def __enter__(self):
        """Switch the torch backend's CPU-only kernels off while a "torch-generic" case runs, the
        NumPy backend's compiled kernel while a "numpy-uncompiled" one does."""
        if self.generic:
            from lodtensor.backend.torch import _backend as torch_backend

            self._saved = torch_backend._CPU_SHORTCUTS
            torch_backend._CPU_SHORTCUTS = False
        if self.uncompiled:
            from lodtensor.backend import set_compiled_kernels

            self._saved_compiled = set_compiled_kernels(False)
        return self

    def __exit__(self, *exc):
        if self.generic:
            from lodtensor.backend.torch import _backend as torch_backend

            torch_backend._CPU_SHORTCUTS = self._saved
        if self.uncompiled:
            from lodtensor.backend import set_compiled_kernels

            set_compiled_kernels(self._saved_compiled)

    def array(self, values, dtype=None):
        arr = np.asarray(values, dtype=dtype)
        if self.be.name == "numpy":
            return arr
        return self.be.to_device(self.be.asarray(arr.copy()), self.device)

    def numpy(self, x):
        return self.be.to_numpy(x)

    def __getattr__(self, name):
        return getattr(self.be, name)


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "cupy" and CUPY_EMULATED:
        from .backend import cuda_emu

        cuda_emu.install(request.getfixturevalue("monkeypatch"))
    with BackendCase(request.param) as case:
        yield case
