"""The backend variants of the hollow-LoD tests (``test_hollow_backends.py``, ``tests/nn/test_hollow_nn.py``):
torch on CPU, its device-generic code, the torch-CUDA route and the CuPy backend (both with their
kernels emulated), as a ``variant`` fixture. A test module imports ``variant`` and the fixtures it
asks for (``_emulator``, ``emulated``, ``route``)."""

import shutil

import numpy as np
import pytest

import lodtensor as lt

from .conftest import _emulator, emulated, route  # noqa: F401 - fixtures the variants ask for

torch = pytest.importorskip("torch")

__all__ = ["VARIANTS", "Variant", "variant", "torch_tensors", "_emulator", "emulated", "route"]

VARIANTS = ["torch", "torch-generic", "torch-cuda-route", "cupy-emulated",
            pytest.param("torch-cuda", marks=pytest.mark.gpu), pytest.param("cupy", marks=pytest.mark.gpu)]


class Variant:
    """A backend variant: ``T`` puts a NumPy LoDTensor on it (floating data tracked by autograd on
    torch, unless ``grad=False``; kept in ``leaves``), ``A`` a NumPy array (``A(a, grad=True)``: a
    tracked parameter); ``stub`` is the cupy stub of the emulated ones (its ``launches``)."""

    def __init__(self, name, request, monkeypatch):
        self.name, self.stub, self.leaves = name, None, []
        if name in ("torch-cuda-route", "cupy-emulated"):
            if shutil.which("g++") is None:
                pytest.skip("needs g++ to build the CUDA stand-in")
            got = request.getfixturevalue("route" if name == "torch-cuda-route" else "emulated")
            self.stub = got if name == "torch-cuda-route" else got.stub
        self.device = self.cupy = None
        if name == "torch-cuda":  # real kernels on a GPU (marked gpu)
            if not torch.cuda.is_available():
                pytest.skip("needs a CUDA device")
            self.device = "cuda"
        if name == "cupy":
            self.stub = None
            self.cupy = pytest.importorskip("cupy")
        if name == "torch-generic":
            from lodtensor.backend.torch import _backend as torch_backend  # noqa: PLC0415

            monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", False)
        self.be = lt.get_backend("cupy" if name in ("cupy-emulated", "cupy") else "torch")
        self.autograd = name not in ("cupy-emulated", "cupy")

    def A(self, values, grad=False):
        values = np.ascontiguousarray(values)
        if not self.autograd:
            return (self.stub or self.cupy).asarray(values.copy())
        out = torch.from_numpy(values.copy())
        if self.device is not None:
            out = out.to(self.device)
        if grad and out.is_floating_point():
            out.requires_grad_(True)
            self.leaves.append(out)
        return out

    def T(self, x, grad=True):
        return lt.LoDTensor(self.A(x.data, grad=grad), x.lod() or None)

    def no_empty_launch(self):
        """No kernel launch with an empty grid or block (CUDA refuses them: an invalid configuration)."""
        if self.stub is not None:
            bad = [(name, grid, block) for name, grid, block, _ in self.stub.launches
                   if 0 in tuple(grid) or 0 in tuple(block)]
            assert not bad, f"launches with an empty grid or block: {bad}"


@pytest.fixture(params=VARIANTS)
def variant(request, monkeypatch):
    return Variant(request.param, request, monkeypatch)


def torch_tensors(res):
    """The torch tensors of a result: a LoDTensor's data, a tensor, or those inside tuples and lists."""
    if isinstance(res, lt.LoDTensor):
        return [res.data]
    if isinstance(res, (tuple, list)):
        return [d for r in res for d in torch_tensors(r)]
    return [res] if isinstance(res, torch.Tensor) else []
