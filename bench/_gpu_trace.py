"""Host-bound or device-bound? torch.profiler over the calls whose GPU figures miss their goals
(bench/gpu_runbook.sh's ``trace`` part):

    python bench/_gpu_trace.py            # on a GPU: CUDA tensors
    python bench/_gpu_trace.py cpu        # the same calls on the CPU (a dry run of the script)

For ``dynamic_lstm`` / ``dynamic_gru`` forward+backward on the batch of bench/gpu.py (and the segment
sum on torch CUDA beside ``torch.segment_reduce``), each call is timed by wall clock (synchronised)
and profiled once: the device's busy time (the sum of the kernels' times), its share of the wall
time, the host time the profiler saw, and the ops and kernels that took the most. A loop whose
kernels keep the device busy most of its wall time is bound by them (then TF32 GEMMs or fewer
FLOPs help); one whose device is idle half the time is bound by the host (then fewer launches a
step help).
"""

import sys
import time

import numpy as np


def _wall(fn, sync, repeat=5):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def _calls(torch, where, scale):
    import _common  # noqa: PLC0415
    import _seqdata  # noqa: PLC0415
    import gpu  # noqa: PLC0415

    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415
    from lodtensor.nn import functional as F  # noqa: PLC0415

    g = _common.rng(90)
    lengths = g.integers(1, 65, size=max(gpu.RNN_SENTENCES // scale, 2)).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    host = g.standard_normal((int(offsets[-1]), gpu.RNN_WIDTH), dtype=np.float32)
    x = torch.from_numpy(host).to(where)
    calls = {}
    for kind in ("lstm", "gru"):
        w = {k: torch.from_numpy(v).to(where).requires_grad_() for k, v in
             _seqdata.layer_weights(kind, gpu.RNN_WIDTH, gpu.RNN_WIDTH).items()}

        def ours(kind=kind, w=w):
            xg = lt.LoDTensor(x.detach().requires_grad_(), [offsets])
            proj = F.fc(xg, w["w_ih"])
            out = (F.dynamic_lstm(proj, w["w_hh"], w["bias"], use_peepholes=False)[0] if kind == "lstm"
                   else F.dynamic_gru(proj, w["w_hh"], w["bias"]))
            out.data.sum().backward()

        calls[f"dynamic_{kind} forward+backward ({lengths.size} sequences of 1..64 rows)"] = ours
    data, _, offs = gpu._workload(scale * 16)
    t = torch.from_numpy(data).to(where)
    reused = lt.LoDTensor(t, [offs])
    toffs = torch.from_numpy(offs).to(where)
    calls[f"sequence_pool sum, torch {where} {list(data.shape)}"] = lambda: S.sequence_pool(reused, "sum")
    calls[f"torch.segment_reduce sum {list(data.shape)}"] = lambda: torch.segment_reduce(t, "sum", offsets=toffs)
    return calls


def main(where="cuda", scale=1):
    import torch  # noqa: PLC0415
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    cuda = where == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for name, fn in _calls(torch, where, scale).items():
        wall = _wall(fn, sync)
        with profile(activities=activities) as prof:
            fn()
            sync()
        events = prof.key_averages()
        device_us = sum(getattr(e, "self_device_time_total", 0) for e in events)
        host_us = sum(e.self_cpu_time_total for e in events)
        print(f"\n== {name}: wall {wall * 1e3:.3f} ms; kernels {device_us / 1e3:.3f} ms "
              f"({device_us / 1e3 / (wall * 1e3):.0%} of the wall time busy); ops' host time {host_us / 1e3:.3f} ms "
              f"under the profiler")
        sort = "self_device_time_total" if cuda else "self_cpu_time_total"
        print(events.table(sort_by=sort, row_limit=12, max_name_column_width=60))
    print("trace run: done")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cuda", scale=1 if len(sys.argv) <= 1 else 20)
