"""DistributedBucketSampler: every index once per epoch over all ranks, budgets, equal counts, determinism."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from lodtensor.distributed import DistributedBucketSampler


def plans(lengths, batch_tokens, replicas, epoch=0, **kw):
    out = []
    for rank in range(replicas):
        s = DistributedBucketSampler(lengths, batch_tokens, num_replicas=replicas, rank=rank, **kw)
        s.set_epoch(epoch)
        out.append((len(s), list(s)))
    return out


@given(
    lengths=st.lists(st.integers(0, 40), max_size=200),
    batch_tokens=st.integers(40, 200),
    replicas=st.integers(1, 8),
    epoch=st.integers(0, 3),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_every_index_once_per_epoch_within_budget_same_count_on_every_rank(
    lengths, batch_tokens, replicas, epoch, shuffle, seed
):
    try:
        per_rank = plans(lengths, batch_tokens, replicas, epoch, shuffle=shuffle, seed=seed)
    except ValueError as err:  # documented: too few samples to split evenly without repeating one
        assert "without repeating a sample" in str(err)
        assume(False)
    counts = {n for n, _ in per_rank}
    assert len(counts) == 1  # the same number of batches on every rank
    assert all(len(batches) == n for n, batches in per_rank)
    seen = [i for _, batches in per_rank for b in batches for i in b]
    assert sorted(seen) == list(range(len(lengths)))  # each index exactly once
    arr = np.asarray(lengths, dtype=np.int64)
    for _, batches in per_rank:
        for b in batches:
            assert b and arr[b].sum() <= batch_tokens


@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=150),
    batch_tokens=st.integers(30, 100),
    replicas=st.integers(1, 6),
    epoch=st.integers(0, 3),
)
def test_drop_last_leaves_out_whole_batches_only(lengths, batch_tokens, replicas, epoch):
    per_rank = plans(lengths, batch_tokens, replicas, epoch, drop_last=True)
    assert len({n for n, _ in per_rank}) == 1
    seen = [i for _, batches in per_rank for b in batches for i in b]
    assert len(seen) == len(set(seen))  # never twice
    full = plans(lengths, batch_tokens, 1, epoch, drop_last=True)[0][0]  # batches before the split over ranks
    assert per_rank[0][0] == full // replicas


def test_deterministic_per_epoch_and_different_across_epochs():
    lengths = np.random.default_rng(0).integers(1, 50, size=500)
    a = plans(lengths, 200, 3, epoch=1, seed=7)
    assert a == plans(lengths, 200, 3, epoch=1, seed=7)
    assert a != plans(lengths, 200, 3, epoch=2, seed=7)
    assert a != plans(lengths, 200, 3, epoch=1, seed=8)
    assert plans(lengths, 200, 3, epoch=1, shuffle=False) == plans(lengths, 200, 3, epoch=5, shuffle=False)
    assert len({plans(lengths, 200, 3, epoch=e)[0][0] for e in range(4)}) == 1  # len() stable


def test_batches_are_length_buckets():
    lengths = np.random.default_rng(1).integers(1, 100, size=2000)
    ((_, batches),) = plans(lengths, 400, 1)
    spread = [lengths[b].max() - lengths[b].min() for b in batches]
    assert np.mean(spread) < 5  # sorted by length: a batch holds near-equal lengths


def test_is_a_dataloader_batch_sampler():
    torch = pytest.importorskip("torch")
    data = list(range(10))
    sampler = DistributedBucketSampler([3, 1, 2, 5, 4, 1, 2, 3, 4, 5], 6, num_replicas=2, rank=1, seed=3)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=list)
    assert list(loader) == list(sampler) and len(loader) == len(sampler)


@pytest.mark.parametrize(
    ("kwargs", "kind", "match"),
    [
        ({"lengths": [[1, 2]]}, TypeError, r"lengths must be a 1-D sequence of integers"),
        ({"lengths": [1.5, 2.0]}, TypeError, r"lengths must be a 1-D sequence of integers"),
        ({"lengths": [1, -2]}, ValueError, r"lengths must be >= 0, got lengths\[1\]=-2"),
        ({"batch_tokens": 0}, ValueError, r"batch_tokens must be >= 1, got 0"),
        ({"batch_tokens": "8"}, TypeError, r"batch_tokens must be an int, got '8'"),
        ({"lengths": [3, 9, 2]}, ValueError, r"sample 1 has length 9 > batch_tokens=8"),
        ({"rank": 2}, ValueError, r"rank must be in \[0, 2\), got 2"),
        ({"num_replicas": 0, "rank": 0}, ValueError, r"num_replicas must be >= 1, got 0"),
        ({"lengths": [1, 1, 1], "num_replicas": 4, "rank": 0}, ValueError, r"cannot give each of 4 replicas"),
    ],
)
def test_bad_arguments(kwargs, kind, match):
    args = {"lengths": [1, 2, 3], "batch_tokens": 8, "num_replicas": 2, "rank": 0} | kwargs
    with pytest.raises(kind, match=match):
        DistributedBucketSampler(**args)


def test_defaults_need_an_initialised_group():
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        import torch.distributed as dist

        if dist.is_initialized():
            pytest.skip("a process group is initialised in this process")
    with pytest.raises(ValueError, match=r"pass num_replicas=1, rank=0 for one process"):
        DistributedBucketSampler([1, 2], 4)
