"""bench/_gpu_sweep.py, the launch sweep of ``make bench-gpu``, run on the emulated CuPy backend
(tests/backend/cuda_emu.py) on a small LoD: every configuration runs, gives the default's values,
and leaves the tuning as it found it. (It runs only on a GPU otherwise: a mistake would cost a
device run.) Skipped without g++."""

import os
import shutil
import sys

import numpy as np
import pytest

from . import cuda_emu

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")

_BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


@pytest.mark.slow  # about 40 s: every configuration of the GPU sweep, emulated
def test_every_configuration_runs_and_agrees(monkeypatch):
    cuda_emu.library()
    stub = cuda_emu.install(monkeypatch)
    monkeypatch.syspath_prepend(os.path.abspath(_BENCH))
    monkeypatch.delitem(sys.modules, "_gpu_sweep", raising=False)
    import _common  # noqa: PLC0415
    import _gpu_sweep  # noqa: PLC0415

    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415
    from lodtensor.backend.cupy import cuda as kernels  # noqa: PLC0415

    rng = np.random.default_rng(16)
    lens = rng.integers(30, 300, size=6)
    offsets = np.concatenate([[0], np.cumsum(lens)]).tolist()
    host = rng.standard_normal((offsets[-1], 128)).astype(np.float32)
    t = lt.LoDTensor(stub.asarray(host), [offsets])
    want = {"sum": S.sequence_pool(t, "sum").data.copy(), "softmax": S.sequence_softmax(t).data.copy()}
    before = (vars(_tuning).copy(), kernels.CHUNK_STEPS)
    report = _common.Report("gpu", "sweep")
    results = {"sum": [], "softmax": []}

    class Recording:  # keeps what each timed call returns, by the op of the open table
        def timed(self, fn):
            op = "softmax" if "softmax" in report.tables[-1].title else "sum"

            def call():
                results[op].append(fn())
                return results[op][-1]

            return call

    _gpu_sweep.sweep(report, S, stub, None, Recording(), [("small", t, None, None, ("sum", "softmax"))],
                     {"budget": 0.0, "min_repeat": 1, "max_repeat": 1})
    assert (vars(_tuning), kernels.CHUNK_STEPS) == before
    labels = {op: [row["name"] for row in table.rows] for op, table in zip(("sum", "softmax"), report.tables)}
    assert "lodtensor (softmax in three passes)" in labels["softmax"]
    assert "lodtensor (softmax in three passes)" not in labels["sum"]
    assert len(labels["sum"]) == sum(1 for c in _gpu_sweep.CONFIGS if len(c) == 2 or "sum" in c[2])
    assert "lodtensor (sum and max by blocks)" in labels["sum"]
    for op in ("sum", "softmax"):
        assert results[op]
        for got in results[op]:
            # float32 sums in other piece sizes round otherwise
                np.testing.assert_allclose(np.asarray(got), np.asarray(want[op]), rtol=1e-5, atol=1e-4)
