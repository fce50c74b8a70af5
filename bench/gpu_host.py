"""Host time per call on the GPU routes, measured without a GPU (issue #24).

On an H100 our segment-sum kernel times equal to ``torch.segment_reduce``'s under Nsight Compute;
what kept the op 4-10% behind was host time: Python dispatch, the LoD's checks, the launch. A
step of ``dynamic_lstm`` is likewise a GEMM and a kernel launch whose device work is tens of
microseconds. This module times that host side alone: the CuPy backend on the cupy stand-in of
the tests (``tests/backend/cupy_stub.py``) and the torch-CUDA route with CPU tensors sent down it
(``_cuda._EMULATED``), both with kernel launches recorded and not run, so what is timed is the
host code a GPU run executes (the GEMMs of the recurrences run on the CPU, on tiny operands).

Absolute microseconds, best of many calls: compare a run with another run of another tree on the
same machine (interleaved), not with device times.
"""

import os
import sys

import _common
import _gpu_sweep
import numpy as np

import lodtensor as lt
from lodtensor import sequence as S

TITLE = "Host time per call on the GPU routes (CuPy stub and torch-CUDA route, launches off)"
TIMING = {"budget": 0.3, "min_repeat": 50, "max_repeat": 5000}
SEQUENCES, WIDTH, STEPS = 1000, 16, 64


def _stubbed():
    """The cupy stand-in installed with launches off, and the torch-CUDA route on; returns (stub, undo)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from _pytest.monkeypatch import MonkeyPatch  # noqa: PLC0415
    from backend import cupy_stub  # noqa: PLC0415

    patch = MonkeyPatch()
    stub = cupy_stub.install(patch)
    stub.execute = None
    torch = _common.optional("torch")
    if torch is not None:
        from lodtensor.backend.torch import _backend, _cuda  # noqa: PLC0415

        patch.setattr(_cuda, "_EMULATED", True)
        patch.setattr(_backend, "_CPU_SHORTCUTS", False)
    return stub, torch, patch.undo


def _calls(stub, data, offsets):
    """The pool and softmax calls on ``data`` (the LoD made once, or anew each call)."""
    reused = lt.LoDTensor(data, [offsets])

    def op(fn, fresh=False):
        def call():
            stub.launches.clear()
            return fn(lt.LoDTensor(data, [offsets]) if fresh else reused)
        return call

    return {
        "sequence_pool sum": op(lambda x: S.sequence_pool(x, "sum")),
        "sequence_pool max": op(lambda x: S.sequence_pool(x, "max")),
        "sequence_pool average": op(lambda x: S.sequence_pool(x, "average")),
        "sequence_softmax": op(S.sequence_softmax),
        "sequence_pool sum, a new LoD each call": op(lambda x: S.sequence_pool(x, "sum"), fresh=True),
        "the same, planned by a count kernel and scans": _gpu_sweep._configured(
            op(lambda x: S.sequence_pool(x, "sum"), fresh=True), {"PLAN_ONE_BLOCK": 0}),
    }


def _recurrences(stub, torch):
    from lodtensor.nn import functional as F  # noqa: PLC0415

    g = _common.rng(24)
    lengths = g.integers(1, STEPS + 1, size=SEQUENCES)
    lengths[0] = STEPS
    offsets = _common.offsets_of(lengths)
    calls = {}
    for kind, gates in (("lstm", 4), ("gru", 3)):
        x = torch.randn(int(offsets[-1]), gates * 4)
        w, b = torch.randn(4, gates * 4, requires_grad=True), torch.randn(1, gates * 4, requires_grad=True)

        def call(kind=kind, x=x, w=w, b=b):
            stub.launches.clear()
            xg = lt.LoDTensor(x.detach().requires_grad_(), [offsets])  # a new LoD each call, as in training
            out = F.dynamic_lstm(xg, w, b, use_peepholes=False)[0] if kind == "lstm" else F.dynamic_gru(xg, w, b)
            out.data.sum().backward()

        calls[f"dynamic_{kind} forward+backward, {STEPS} steps"] = call
    return calls


def run(report):
    g = _common.rng(7)
    lengths = g.integers(1, 9, size=SEQUENCES).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    host = g.standard_normal((int(offsets[-1]), WIDTH), dtype=np.float32)
    workload = f"[{host.shape[0]}, {WIDTH}] float32 in {SEQUENCES} sequences of 1..8 rows"
    stub, torch, undo = _stubbed()
    try:
        table = report.table("host time per call, CuPy (stub, launches off)", workload,
                             reference="sequence_pool sum", unit="us")
        for name, fn in _calls(stub, stub.asarray(host), offsets).items():
            table.add(name, fn, **TIMING)
        table.finish()
        if torch is None:
            return
        torch.set_num_threads(1)
        table = report.table("host time per call, torch-CUDA route (launches off)", workload,
                             reference="sequence_pool sum", unit="us")
        for name, fn in _calls(stub, torch.from_numpy(host), offsets).items():
            table.add(name, fn, **TIMING)
        table.finish()
        table = report.table("host time per call, recurrences on the torch-CUDA route (launches off)",
                             f"{SEQUENCES} sequences of 1..{STEPS} rows, hidden 4 (the GEMMs on the CPU, tiny)",
                             reference=f"dynamic_lstm forward+backward, {STEPS} steps", unit="us")
        for name, fn in _recurrences(stub, torch).items():
            row = table.add(name, fn, budget=1.0, min_repeat=5, max_repeat=200)
            if row["best"] is not None:
                row["note"] = f"{row['best'] * 1e6 / STEPS:.1f} us a step (the whole call over its {STEPS} steps)"
        table.finish()
    finally:
        undo()
