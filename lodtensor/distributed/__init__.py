"""LoD batches across processes: collectives over torch.distributed and a bucket sampler.

Over an initialised ``torch.distributed`` process group (gloo on CPU, NCCL on
GPU), :func:`all_gather`, :func:`gather`, :func:`broadcast`, :func:`scatter`
and :func:`all_to_all` move LoDTensors of any lengths (empty ones included)
with one collective for the sizes and one for the data, never padding to the
longest. Ranks whose tensors disagree in lod depth, dtype or row shape, or
that call different collectives or roots, all raise the same ValueError (the
first exchange has one size for every collective, so gloo never sees
mismatched sizes); a rank that fails or leaves makes the others raise
:class:`CollectiveError` within the timeout instead of hanging.

:class:`DistributedBucketSampler` cuts a data set into length-bucketed batches
under a token budget, the same number on every rank, each index once per epoch.

torch is imported on first use, not by ``import lodtensor.distributed``.

>>> import os, tempfile
>>> import numpy as np
>>> import torch.distributed as dist
>>> import lodtensor as lt
>>> import lodtensor.distributed as ld
>>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
>>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
>>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
>>> [x.lod() for x in ld.all_gather(t)], ld.broadcast(t, src=0) is t
([[[0, 2, 5]]], True)
>>> ld.all_gather(np.arange(3))
Traceback (most recent call last):
...
TypeError: all_gather(): on rank 0: t must be a LoDTensor, got ndarray
>>> dist.destroy_process_group()
"""

from ._collectives import CollectiveError, all_gather, all_to_all, broadcast, gather, last_call, scatter
from ._sampler import DistributedBucketSampler

__all__ = [
    "all_gather",
    "gather",
    "broadcast",
    "scatter",
    "all_to_all",
    "CollectiveError",
    "DistributedBucketSampler",
    "last_call",
]
