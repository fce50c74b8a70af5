"""A small run of every CUDA kernel for ``compute-sanitizer`` (memcheck, racecheck) on a GPU:

    compute-sanitizer --tool memcheck python bench/_gpu_sanitize.py

CuPy and torch CUDA data, skewed lengths (empty, short, long), packed and narrow rows.
"""

import numpy as np

import lodtensor as lt
from lodtensor import sequence as S


def main():
    import cupy  # noqa: PLC0415
    import torch  # noqa: PLC0415

    rng = np.random.default_rng(0)
    lens = np.concatenate([rng.integers(0, 9, 300), [0, 40, 9000]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    for width in (1, 3, 8, 130):
        host = rng.standard_normal((offsets[-1], width)).astype(np.float32)
        for data in (cupy.asarray(host), torch.from_numpy(host).cuda().requires_grad_()):
            t = lt.LoDTensor(data, [offsets])
            for kind in ("sum", "average", "max", "min"):
                S.sequence_pool(t, kind)
            _train(t)
            padded, lengths = S.sequence_pad(t, 0.0)
            S.sequence_unpad(padded, np.asarray(lens))
    # a plan of two rounds of lt_piece_plan's block (2,048 sequences a round)
    lens = np.concatenate([rng.integers(0, 9, 2300), [700]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    host = rng.standard_normal((offsets[-1], 8)).astype(np.float32)
    for data in (cupy.asarray(host), torch.from_numpy(host).cuda()):
        t = lt.LoDTensor(data, [offsets])
        S.sequence_pool(t, "sum")
        S.sequence_softmax(t)
    # softmax and pools by blocks (sequences of many rows) beside the pieces (a sequence of several),
    # in both tile orders; planned by the count kernel and scans
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    lens = np.concatenate([rng.integers(30, 300, 64), [0, 2000]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    saved = _tuning.REDUCE_BLOCK_STEPS, _tuning.TILES_FIRST, _tuning.PLAN_ONE_BLOCK
    _tuning.REDUCE_BLOCK_STEPS, _tuning.PLAN_ONE_BLOCK = 4, 0
    try:
        for width, first in ((8, False), (128, False), (130, True), (300, False)):
            _tuning.TILES_FIRST = first
            host = rng.standard_normal((offsets[-1], width)).astype(np.float32)
            for data in (cupy.asarray(host), torch.from_numpy(host).cuda().requires_grad_()):
                t = lt.LoDTensor(data, [offsets])
                _train(t)
                S.sequence_pool(t, "max")
    finally:
        _tuning.REDUCE_BLOCK_STEPS, _tuning.TILES_FIRST, _tuning.PLAN_ONE_BLOCK = saved
    _recurrences(cupy, torch, rng)
    cupy.cuda.Device().synchronize()
    torch.cuda.synchronize()
    print("sanitize run: done")


def _train(t):
    """Segment softmax and max; on torch data also their backward passes (the fused kernels)."""
    for y in (S.sequence_softmax(t).data, S.sequence_pool(t, "max").data):
        if getattr(y, "requires_grad", False):
            (y * y.detach()).sum().backward()


def _recurrences(cupy, torch, rng):
    """The fused LSTM and GRU steps: torch CUDA forward and backward, CuPy forward."""
    from lodtensor.nn import functional as F  # noqa: PLC0415

    lens = np.concatenate([rng.integers(1, 30, 40), [0]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    d, rows = 16, int(np.sum(lens))
    for kind, gates, bias in (("lstm", 4, 7), ("gru", 3, 3)):
        host = [rng.uniform(-0.5, 0.5, shape).astype(np.float32) for shape in
                ((rows, gates * d), (d, gates * d), (1, bias * d), (lens.size, d))]
        tensors = [torch.from_numpy(a).cuda().requires_grad_() for a in host]
        for arrays in (tensors, [cupy.asarray(a) for a in host]):
            x, w, b, h0 = arrays
            t = lt.LoDTensor(x, [offsets])
            out = F.dynamic_lstm(t, w, b, h0, h0)[0] if kind == "lstm" else F.dynamic_gru(t, w, b, h0)
            if arrays is tensors:
                out.data.sum().backward()


if __name__ == "__main__":
    main()
