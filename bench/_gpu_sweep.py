"""The host-side launch choices of the CUDA piece kernels, measured side by side (part of bench/gpu.py).

The choices the host makes without recompiling a kernel: whether a LoD keeps its piece plan
for the next op (``_tuning.CACHE_PLANS``), whether a plan of few sequences is one launch
(``_tuning.PLAN_ONE_BLOCK``: timed where the plan is made every call, on a training-sized batch),
from what mean sequence length softmax goes by blocks
(``_tuning.SOFTMAX_BLOCK_STEPS``; 0: three passes always), in which order blocks cover the column
tiles of wide rows (``_tuning.TILES_FIRST``), how many threads a block of the piece kernels has
(``_tuning.PIECE_THREADS``: a block's warp slots free together), how many blocks the piece kernels launch
(``_tuning.MAX_PIECE_BLOCKS``; fewer blocks means each warp strides over more pieces, which might
even out the warps of a block when sequence lengths vary) and how many warp steps make a piece
(``cuda.CHUNK_STEPS``: shorter pieces spread a long sequence over more warps, longer ones cost fewer
partials). Each configuration is timed on the workloads issue 24 measures, in one table per op with
``torch.segment_reduce`` beside them, so the defaults come from measured numbers (docs/gpu.md).
"""

import contextlib

#: (label, overrides of ``_tuning`` and ``cuda``[, the ops it concerns]). The second is the default.
#: (64 and 1024 steps a piece measured 1.53x and 1.04x the default's time on the uniform sum, H100,
#: 2026-11-26: no longer swept; docs/gpu.md has the figures.)
CONFIGS = (
    ("2112 blocks", {"MAX_PIECE_BLOCKS": 2112}),
    ("default: 16384 blocks, 256 steps a piece", {}),
    ("528 blocks", {"MAX_PIECE_BLOCKS": 528}),
    ("128 steps a piece", {"CHUNK_STEPS": 128}),
    ("512 steps a piece", {"CHUNK_STEPS": 512}),
    ("plan made every call", {"CACHE_PLANS": False}),
    ("plan made every call by a count kernel and scans", {"CACHE_PLANS": False, "PLAN_ONE_BLOCK": 0}),
    ("64 threads a block", {"PIECE_THREADS": 64}),
    ("128 threads a block", {"PIECE_THREADS": 128}),
    ("tiles first", {"TILES_FIRST": True}),
    ("sum and max by blocks", {"REDUCE_BLOCK_STEPS": 4}, ("sum", "max")),
    ("softmax in three passes", {"SOFTMAX_BLOCK_STEPS": 0}, ("softmax",)),
    ("softmax by blocks from 1 block step", {"SOFTMAX_BLOCK_STEPS": 1}, ("softmax",)),
)
@contextlib.contextmanager
def _tuned(overrides):
    from lodtensor.backend.cupy import _tuning, cuda  # noqa: PLC0415

    where = {k: (cuda if k == "CHUNK_STEPS" else _tuning) for k in overrides}
    saved = {k: getattr(where[k], k) for k in overrides}
    for k, v in overrides.items():
        setattr(where[k], k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(where[k], k, v)


def _configured(fn, overrides):
    def call():
        with _tuned(overrides):
            return fn()

    return call


def sweep(report, S, cupy, torch, device, workloads, timing):
    """``workloads``: (label, LoDTensor on CuPy, torch data or None, torch offsets or None, ops)."""
    for label, t, tdata, toffsets, ops in workloads:
        for op in ops:
            table = report.table(f"launch sweep: {op}, {label}", f"{label}; CuPy backend",
                                 reference=f"lodtensor ({CONFIGS[1][0]})")
            fn = ((lambda t=t, op=op: S.sequence_pool(t, op).data) if op in ("sum", "max")
                  else (lambda t=t: S.sequence_softmax(t).data))
            for name, overrides, *concerns in CONFIGS:
                if not concerns or op in concerns[0]:
                    table.add(f"lodtensor ({name})", device.timed(_configured(fn, overrides)), **timing)
            if tdata is not None and op in ("sum", "max"):
                table.add("torch.segment_reduce", device.timed(
                    lambda op=op, x=tdata, o=toffsets: torch.segment_reduce(x, op, offsets=o, axis=0)), **timing)
            table.finish()
