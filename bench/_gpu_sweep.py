"""The host-side launch choices of the CUDA piece kernels, measured side by side (part of bench/gpu.py).

``lodtensor.backend.cupy._tuning`` holds the choices the host makes without recompiling a kernel:
whether the piece -> sequence table is written (``OWNER_MAX_SEQUENCES``; without it every warp
searches the plan for its piece's sequence) and how many blocks the piece kernels launch
(``MAX_PIECE_BLOCKS``; fewer blocks means each warp strides over more pieces, which evens out the
warps of a block when sequence lengths vary). Each configuration is timed on the workloads issue 24
measures, in one table per op with ``torch.segment_reduce`` beside them, so the defaults in
``_tuning.py`` come from this run's numbers.
"""

import contextlib

#: (label, _tuning overrides). The first is the previous default (a5a25c6): a search per piece.
CONFIGS = (
    ("search, 16384 blocks", {"OWNER_MAX_SEQUENCES": -1, "MAX_PIECE_BLOCKS": 1 << 14}),
    ("owner table, 16384 blocks", {"MAX_PIECE_BLOCKS": 1 << 14}),
    ("owner table, 2112 blocks", {"MAX_PIECE_BLOCKS": 2112}),
    ("owner table, 528 blocks", {"MAX_PIECE_BLOCKS": 528}),
    ("search, 2112 blocks", {"OWNER_MAX_SEQUENCES": -1, "MAX_PIECE_BLOCKS": 2112}),
)


@contextlib.contextmanager
def _tuned(overrides):
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    saved = {k: getattr(_tuning, k) for k in overrides}
    for k, v in overrides.items():
        setattr(_tuning, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(_tuning, k, v)


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
            for name, overrides in CONFIGS:
                table.add(f"lodtensor ({name})", device.timed(_configured(fn, overrides)), **timing)
            if tdata is not None and op in ("sum", "max"):
                table.add("torch.segment_reduce", device.timed(
                    lambda op=op, x=tdata, o=toffsets: torch.segment_reduce(x, op, offsets=o, axis=0)), **timing)
            table.finish()
