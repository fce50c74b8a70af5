"""LoD collectives on CUDA tensors over NCCL (issue #24 item 4): marked gpu, skipped without CUDA.

A world of one rank on one GPU (NCCL puts one rank per GPU) and, where two GPUs exist, two ranks:
every collective's results are on each rank's GPU with exactly what each rank held.
"""

import pytest

from ._harness import run_ranks, values
from ._workers import CONFIGS, random_tensor

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


def _nccl_world(n):
    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        pytest.skip("needs CUDA and torch's NCCL")
    if torch.cuda.device_count() < n:
        pytest.skip(f"needs {n} GPUs for {n} NCCL ranks, found {torch.cuda.device_count()}")


@pytest.mark.parametrize("world", [1, 2])
def test_collectives_over_nccl_on_cuda_tensors(world, tmp_path):
    _nccl_world(world)
    results = values(run_ranks("tests.distributed._workers:cuda_collectives", world, tmp_path, backend="nccl"))
    held = [[random_tensor(7, r, k, *c) for k, c in enumerate(CONFIGS) if c[3] == "torch"] for r in range(world)]
    for out in results:
        for k in range(len(held[0])):
            want = [(t[k].lod(), t[k].numpy().tolist()) for t in held]
            assert out[f"all_gather{k}"] == want
            assert out[f"broadcast{k}"] == want[0]
            assert out[f"all_to_all{k}"] == want  # every rank sent its own tensor to each
