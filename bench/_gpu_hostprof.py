"""Where the host time of a GPU op call goes, on a real device (bench/gpu_runbook.sh's ``hostprof`` part):

    python bench/_gpu_hostprof.py          # on a GPU: CuPy arrays and torch CUDA tensors
    python bench/_gpu_hostprof.py cpu      # the lodtensor calls on NumPy and torch CPU (a dry run)

On a small batch a call's time is its host time: the kernels take microseconds. For each call it prints
the host time per call (calls queued back to back, then one sync), the time per call with a sync after
each (what bench/gpu.py's tables count), and then cProfile's top functions by their own time over
many calls of the two routes (CuPy, torch CUDA) beside ``torch.segment_reduce``. Last, the costs of the
pieces every launch on the torch route takes (the stream, the device, a CuPy view of a tensor, a
launch with arrays or with plain addresses), which cProfile splits among C functions it cannot name.
"""

import sys
import time

import _common
import _gpu_trace
import numpy as np

SMALL = (64, 16, 32)  # sequences, most rows, width: the kernels' time is nothing beside the host's
BATCH = (512, 128, 256)  # bench/gpu.py's small batch


def _per_call(fn, sync, n):
    """(host us a call, queued back to back; us a call with a sync after each, best of ``n``)."""
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    queued = time.perf_counter() - start
    sync()
    return queued / n * 1e6, _gpu_trace._wall(fn, sync, n) * 1e6


def _batch(shape, seed=5):
    n, most, width = shape
    g = np.random.default_rng(seed)
    lengths = g.integers(1, most + 1, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return g.standard_normal((int(offsets[-1]), width), dtype=np.float32), offsets


def _calls(torch, cupy, where):
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415

    calls = {}
    for shape in (SMALL, BATCH):
        data, offsets = _batch(shape)
        listed = offsets.tolist()  # a new LoD's offsets as a user's list
        label = f"{shape[0]} seqs, D={shape[2]}"
        routes = {"torch": torch.from_numpy(data).to(where)}
        if cupy is not None:
            routes["cupy"] = cupy.asarray(data)
        elif where == "cpu":
            routes["numpy"] = data
        for route, x in routes.items():
            t = lt.LoDTensor(x, [offsets])
            calls[f"{route}: pool sum, {label}"] = lambda t=t: S.sequence_pool(t, "sum")
            calls[f"{route}: pool sum, a new LoD, {label}"] = (
                lambda x=x, o=listed: S.sequence_pool(lt.LoDTensor(x, [o]), "sum"))
            calls[f"{route}: softmax, {label}"] = lambda t=t: S.sequence_softmax(t)
            calls[f"{route}: to_padded, {label}"] = lambda t=t: t.to_padded(pad_value=0.0)
        tx, toffs = routes["torch"], torch.from_numpy(offsets).to(where)
        calls[f"torch.segment_reduce sum, {label}"] = lambda x=tx, o=toffs: torch.segment_reduce(x, "sum", offsets=o)
        calls[f"torch x.sum(0) (one launch), {label}"] = lambda x=tx: x.sum(0)
        xg = tx.clone().requires_grad_()

        def grad_step(xg=xg, o=listed):
            S.sequence_pool(lt.LoDTensor(xg, [o]), "sum").data.sum().backward()

        calls[f"torch: pool sum forward+backward, a new LoD, {label}"] = grad_step
    if cupy is not None:
        calls.update(_uploads(torch, cupy))
    return calls


def _uploads(torch, cupy):
    """A new LoD's offsets (65 int64) sent to the device behind queued work (a 128 MB sum, about 40 us of GPU
    time): does the upload make the host wait for the device? Queued, a call that waits costs the GPU's time;
    one that does not costs its launches (the "alone" rows). torch: through pinned memory (``from_host``: the
    caching host allocator reuses a block only once its copy is done) or straight from pageable memory with
    ``non_blocking`` (the driver stages it); CuPy: ``asarray`` (its pinned pool) or ``copy_from_host_async``
    from pageable memory."""
    from lodtensor.backend import get_backend  # noqa: PLC0415

    offsets = np.arange(0, 65 * 8, 8, dtype=np.int64)
    tx = torch.zeros((1 << 20, 32), device="cuda")
    cx = cupy.zeros((1 << 20, 32), dtype=np.float32)
    be = get_backend("torch")
    target = cupy.empty(65, dtype=np.int64)

    def cupy_pageable():
        cx.sum(0)
        target.data.copy_from_host_async(offsets.ctypes.data, offsets.nbytes)

    return {
        "torch: 128 MB sum alone": lambda: tx.sum(0),
        "torch: 128 MB sum, then from_host(65 offsets) (pinned)": lambda: (tx.sum(0), be.from_host(offsets, like=tx)),
        "torch: 128 MB sum, then .to(cuda, non_blocking) from pageable": lambda: (
            tx.sum(0), torch.from_numpy(offsets).to("cuda", non_blocking=True)),
        "cupy: 128 MB sum alone": lambda: cx.sum(0),
        "cupy: 128 MB sum, then asarray(65 offsets)": lambda: (cx.sum(0), cupy.asarray(offsets)),
        "cupy: 128 MB sum, then copy_from_host_async from pageable": cupy_pageable,
    }


def _pieces(torch, cupy):
    """us a call of each piece of a torch-route launch (best of 5 rounds of 2,000)."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor.backend import get_backend  # noqa: PLC0415
    from lodtensor.backend.torch import _cuda, _launching  # noqa: PLC0415

    dev = torch.device("cuda", 0)
    t = torch.zeros((64, 32), device=dev)
    rows = torch.zeros((512, 32), device=dev)
    kern = cupy.RawKernel('extern "C" __global__ void lt_nop(const float* a, float* b, long long n) {}', "lt_nop")
    a, b = cupy.zeros(8, dtype=np.float32), cupy.zeros(8, dtype=np.float32)
    pa, pb, n64 = np.uint64(a.data.ptr), np.uint64(b.data.ptr), np.int64(8)
    device = _cuda._Device(dev)
    offsets = np.arange(0, 65 * 8, 8, dtype=np.int64)
    listed = offsets.tolist()
    be, cbe = get_backend("torch"), get_backend("cupy")
    crows = cupy.zeros((512, 32), dtype=np.float32)

    def enter_launching():
        with device.launching():
            pass

    # a recurrence step's GEMM, [64, 32] @ [32, 128] into 64 rows of a [512, 384] gates buffer: torch's addmm_
    # (what the fused steps did) against one cuBLAS call by address through CuPy's binding on torch's handle
    # (what they do since: backend/cupy/_steps.py, _Steps.gemm)
    gates, h, w = (torch.rand(shape, device=dev) for shape in ((512, 384), (64, 32), (32, 128)))
    step_rows = gates[64:128, :128]
    one = np.ones(1, dtype=np.float32)
    gemm_args = (torch.cuda.current_blas_handle(), 0, 0, 128, 64, 32, one.ctypes.data, w.data_ptr(), 128,
                 h.data_ptr(), 32, one.ctypes.data, gates[64:].data_ptr(), 384)

    def enter_device():
        with cupy.cuda.Device(0):
            pass

    pieces = {
        "torch.cuda.current_stream(device)": lambda: torch.cuda.current_stream(dev),
        "torch._C._cuda_getCurrentRawStream(0)": lambda: _launching._RAW_STREAM(0),
        "stream_of (CuPy's stream of torch's, cached)": lambda: _launching.stream_of(cupy.cuda, 0),
        "with cupy.cuda.Device(0)": enter_device,
        "cupy.cuda.Device().id": lambda: cupy.cuda.Device().id,
        "_Device(device)": lambda: _cuda._Device(dev),
        "_Device.launching() entered": enter_launching,
        "_Device.view(tensor)": lambda: device.view(t),
        "torch.empty((64, 32), cuda)": lambda: torch.empty((64, 32), device=dev),
        "cupy.empty(195, int64)": lambda: cupy.empty(195, dtype=np.int64),
        "t.data_ptr()": t.data_ptr,
        "launch, cupy arrays": lambda: kern((1,), (32,), (a, b, n64)),
        "launch, np.uint64 addresses": lambda: kern((1,), (32,), (pa, pb, n64)),
        "step GEMM: torch addmm_ into gates rows": lambda: step_rows.addmm_(h, w),
        "step GEMM: cuBLAS sgemm by address (torch's handle)": lambda: cupy.cuda.cublas.sgemm(*gemm_args),
        "torch.cuda.current_blas_handle()": torch.cuda.current_blas_handle,
        "be.from_host(65 offsets, like=cuda)": lambda: be.from_host(offsets, like=t),
        "torch.from_numpy(65 offsets).to(cuda)": lambda: torch.from_numpy(offsets).to(dev),
        "cupy.asarray(65 offsets)": lambda: cupy.asarray(offsets),
        "lt.LoDTensor(cuda tensor, [list of 65])": lambda: lt.LoDTensor(rows, [listed]),
        "a new LoD's offsets on the device": lambda: lt.LoD([listed]).on(be, "offsets", like=rows),
        "CuPy backend: from_host(65 offsets)": lambda: cbe.from_host(offsets, like=crows),
        "CuPy backend: a new LoD's offsets on the device": lambda: lt.LoD([listed]).on(cbe, "offsets", like=crows),
        "lt.LoD([list of 65]) alone": lambda: lt.LoD([listed]),
    }
    print("\n== the pieces of a launch on the torch route, us a call (best of 5 x 2,000)")
    for name, fn in pieces.items():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a piece this torch or CuPy lacks: say so, time the rest
            print(f"   {'-':>8}  {name}: {type(exc).__name__}: {exc}")
            continue
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(2000):
                fn()
            best = min(best, (time.perf_counter() - start) / 2000)
        print(f"   {best * 1e6:8.2f}  {name}")
    torch.cuda.synchronize()


def main(where="cuda", n=2000):
    import torch  # noqa: PLC0415

    cupy = None
    if where == "cuda":
        import cupy  # noqa: PLC0415
    sync = torch.cuda.synchronize if where == "cuda" else (lambda: None)
    calls = _calls(torch, cupy, where)
    print(f"== host us a call (queued, {n} calls then one sync) and us a call with a sync after each (best)")
    for name, fn in calls.items():
        try:
            queued, synced = _per_call(fn, sync, n)
        except Exception as exc:  # noqa: BLE001 - a call this torch or CuPy lacks: say so, time the rest
            print(f"   {'-':>8} {'-':>8}  {name}: {type(exc).__name__}: {exc}")
            sync()
            continue
        print(f"   {queued:8.1f} {synced:8.1f}  {name}")
    profiled = ("pool sum, 64", "pool sum, a new LoD, 64", "forward+backward, a new LoD, 64", "segment_reduce")
    for name in [k for k in calls if k.endswith(f"D={SMALL[2]}") and any(p in k for p in profiled)]:
        print(f"\n== cProfile, {n} calls: {name}")
        print(_common.profile_text(calls[name], n, 28))
        sync()
    if cupy is not None:
        _pieces(torch, cupy)
    print("hostprof run: done")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cuda", n=2000 if len(sys.argv) <= 1 else 50)
