"""One call of each kernel the GPU figures hinge on, for Nsight Compute (bench/gpu_runbook.sh):

    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
        -k regex:"segment_reduce|lt_softmax" python bench/_gpu_profile.py

On the uniform ``[8M, 128]`` float32 batch of bench/gpu.py: lodtensor's segment sum (CuPy),
``torch.segment_reduce``'s sum, and lodtensor's softmax by blocks and in three passes; then the
skewed D=4096 sum, both tile orders, and ``torch.segment_reduce`` on it; as a script at a quarter
of that size (``PROFILE_SCALE``). The report says what the
wall-clock figures cannot: achieved memory throughput, occupancy, and where warps stall.
"""


import lodtensor as lt
from lodtensor import sequence as S


def main(scale=1):
    """``scale``: the workloads at 1/scale of their size (the test's emulated run)."""
    import _common  # noqa: PLC0415
    import cupy  # noqa: PLC0415
    import gpu  # noqa: PLC0415
    import torch  # noqa: PLC0415

    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    data, _, offsets = gpu._workload(scale)
    t = lt.LoDTensor(cupy.asarray(data), [offsets])
    S.sequence_pool(t, "sum")
    torch.segment_reduce(torch.from_numpy(data).cuda(), "sum", offsets=torch.from_numpy(offsets).cuda(), axis=0)
    S.sequence_softmax(t)
    _tuning.SOFTMAX_BLOCK_STEPS, saved = 0, _tuning.SOFTMAX_BLOCK_STEPS
    S.sequence_softmax(t)
    _tuning.SOFTMAX_BLOCK_STEPS = saved
    del t
    wide, _, woffsets = gpu._skewed_workload(scale, 4096)
    w = lt.LoDTensor(cupy.asarray(wide), [woffsets])
    for first in (False, True):
        _tuning.TILES_FIRST = first
        S.sequence_pool(w, "sum")
    _tuning.TILES_FIRST = False
    torch.segment_reduce(torch.from_numpy(wide).cuda(), "sum", offsets=torch.from_numpy(woffsets).cuda(), axis=0)
    cupy.cuda.Device().synchronize()
    torch.cuda.synchronize()
    print("profile run: done", _common.SEED)


if __name__ == "__main__":
    import os

    # Nsight Compute replays each kernel about 18 times, saving and restoring the memory it writes
    # between passes: at full size softmax's 4 GB output made one kernel's profile outlast the
    # runbook's limit. A quarter of the batch still fills the H100 many times over.
    main(int(os.environ.get("PROFILE_SCALE", "4")))
