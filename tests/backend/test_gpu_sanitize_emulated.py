"""bench/_gpu_sanitize.py, the small run ``compute-sanitizer`` watches on a GPU (bench/gpu_runbook.sh),
run on the emulated kernels (tests/backend/cuda_emu.py): it finishes, and it launches every kernel
the sources define (so memcheck sees each one). Likewise bench/_gpu_profile.py, Nsight Compute's
run, at a small scale: it launches the kernels it is there to profile. Skipped without g++."""

import os
import shutil
import sys

import pytest

torch = pytest.importorskip("torch")

from lodtensor.backend.cupy import cuda as kernels  # noqa: E402
from lodtensor.backend.torch import _backend as torch_backend  # noqa: E402
from lodtensor.backend.torch import _cuda  # noqa: E402

from . import cuda_emu  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")

_BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def _emulated(monkeypatch):
    stub = cuda_emu.install(monkeypatch)
    monkeypatch.setattr(_cuda, "_EMULATED", True)  # CPU tensors stand in for CUDA ones
    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", False)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self: self)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.syspath_prepend(os.path.abspath(_BENCH))
    for name in ("_gpu_sanitize", "_gpu_profile"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return stub


@pytest.mark.slow  # about a minute: every kernel of the runbook's sanitizer script, emulated
def test_the_sanitizer_run_launches_every_kernel(monkeypatch, capsys):
    stub = _emulated(monkeypatch)
    import _gpu_sanitize  # noqa: PLC0415

    _gpu_sanitize.main()
    assert "sanitize run: done" in capsys.readouterr().out
    launched = {name.split("<")[0] for name, *_ in stub.launches}
    defined = {name.split("<")[0] for module in kernels.SOURCES
               for name in kernels.name_expressions(module) + list(kernels.EXTERN_C[module])}
    assert defined <= launched, sorted(defined - launched)


def test_the_profile_run_launches_what_it_profiles(monkeypatch, capsys):
    stub = _emulated(monkeypatch)
    import _gpu_profile  # noqa: PLC0415

    _gpu_profile.main(scale=4000)
    assert "profile run: done" in capsys.readouterr().out
    names = [name.split("<")[0] for name, *_ in stub.launches]
    for kernel in ("lt_segment_reduce", "lt_softmax_block", "lt_softmax_stats", "lt_softmax_apply"):
        assert kernel in names, kernel
    grids = [grid for name, grid, *_ in stub.launches if name.startswith("lt_segment_reduce<")]
    # the skewed D=4096 sum in both tile orders: its 32 column tiles along y, then along x
    assert any(grid[1] == 32 for grid in grids) and any(grid[0] == 32 for grid in grids), grids
