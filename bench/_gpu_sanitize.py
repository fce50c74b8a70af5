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
        for data in (cupy.asarray(host), torch.from_numpy(host).cuda()):
            t = lt.LoDTensor(data, [offsets])
            for kind in ("sum", "average", "max", "min"):
                S.sequence_pool(t, kind)
            S.sequence_softmax(t)
            padded, lengths = S.sequence_pad(t, 0.0)
            S.sequence_unpad(padded, np.asarray(lens))
    cupy.cuda.Device().synchronize()
    torch.cuda.synchronize()
    print("sanitize run: done")


if __name__ == "__main__":
    main()
