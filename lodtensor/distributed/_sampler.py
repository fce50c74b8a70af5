"""DistributedBucketSampler: length-bucketed batches under a token budget, split evenly over ranks."""

import operator

import numpy as np

from .._format import preview

__all__ = ["DistributedBucketSampler"]


class DistributedBucketSampler:
    """Batches of indices of similar length whose lengths add up to at most ``batch_tokens``.

    A ``batch_sampler`` for ``torch.utils.data.DataLoader``, one per rank. The
    samples are sorted by length (ties in a random order each epoch) and cut
    greedily into batches within the token budget; the batch order is shuffled
    each epoch and rank ``r`` takes batches ``r, r + R, r + 2R, ...`` of the
    ``R`` replicas. Every rank gets the same number of batches: when the count
    does not divide evenly, the batches with the most samples are split in two
    (never an index repeated, as ``DistributedSampler`` would); with
    ``drop_last`` the surplus batches are left out instead. The batch
    boundaries depend only on the lengths, so ``len()`` is the same every epoch.

    Parameters
    ----------
    lengths : 1-D sequence of int
        One length (e.g. tokens) per sample; zeros allowed.
    batch_tokens : int
        Budget of summed lengths per batch. A sample longer than that is an error.
    num_replicas, rank : int, optional
        Default: the world size and rank of the initialised torch.distributed group.
    shuffle : bool
        Shuffle ties and the batch order every epoch (default); False keeps
        length order, deterministically.
    seed : int
        The same on every rank: all ranks must draw the same plan. A negative
        seed (or epoch) counts modulo 2**64, as ``torch.Generator.manual_seed``
        takes it.
    drop_last : bool
        Leave out the surplus batches instead of splitting batches.

    Raises
    ------
    ValueError
        Bad lengths, budget or rank; a sample longer than ``batch_tokens``; or
        too few samples to give every rank the same number of batches.

    Examples
    --------
    >>> s0 = DistributedBucketSampler([5, 1, 4, 2, 3, 6, 2], batch_tokens=6, num_replicas=2, rank=0, shuffle=False)
    >>> s1 = DistributedBucketSampler([5, 1, 4, 2, 3, 6, 2], batch_tokens=6, num_replicas=2, rank=1, shuffle=False)
    >>> list(s0), list(s1), len(s0)
    ([[1], [4], [0]], [[3, 6], [2], [5]], 3)
    """

    def __init__(self, lengths, batch_tokens, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        name = "DistributedBucketSampler()"
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
            raise TypeError(f"{name}: lengths must be a 1-D sequence of integers, got {preview(lengths)}")
        lengths = lengths.astype(np.int64, copy=True)
        if (lengths < 0).any():
            i = int(np.flatnonzero(lengths < 0)[0])
            raise ValueError(f"{name}: lengths must be >= 0, got lengths[{i}]={lengths[i]}")
        try:
            batch_tokens = operator.index(batch_tokens)
        except TypeError:
            raise TypeError(f"{name}: batch_tokens must be an int, got {batch_tokens!r}") from None
        if batch_tokens < 1:
            raise ValueError(f"{name}: batch_tokens must be >= 1, got {batch_tokens}")
        too_long = lengths > batch_tokens
        if too_long.any():
            i = int(np.flatnonzero(too_long)[0])
            raise ValueError(
                f"{name}: sample {i} has length {lengths[i]} > batch_tokens={batch_tokens}; "
                f"raise batch_tokens or leave out (or cut) the {int(too_long.sum())} sample(s) that long"
            )
        num_replicas, rank = _world(num_replicas, rank, name)
        self.lengths = lengths
        self.batch_tokens = batch_tokens
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = bool(shuffle)
        try:
            self.seed = operator.index(seed)
        except TypeError:
            raise TypeError(f"{name}: seed must be an int, got {seed!r}") from None
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self._bounds = self._boundaries()
        self._cache = None

    def _boundaries(self):
        """Start positions of the batches in length order, plus the end: the same every epoch."""
        n = self.lengths.size
        csum = np.concatenate(([0], np.cumsum(np.sort(self.lengths, kind="stable"))))
        starts = []
        s = 0
        while s < n:  # one step per batch, not per sample
            starts.append(s)
            s = int(np.searchsorted(csum, csum[s] + self.batch_tokens, side="right")) - 1
        bounds = np.asarray([*starts, n], dtype=np.int64)
        batches, replicas = len(starts), self.num_replicas
        surplus = batches % replicas
        if surplus and self.drop_last:
            return bounds  # the surplus batches are dropped after the epoch's shuffle
        if surplus:
            need = replicas - surplus
            if n < batches + need:
                raise ValueError(
                    f"DistributedBucketSampler(): cannot give each of {replicas} replicas the same number of "
                    f"batches without repeating a sample: {n} samples form {batches} batches under "
                    f"batch_tokens={self.batch_tokens}; pass drop_last=True, a smaller batch_tokens or fewer replicas"
                )
            for _ in range(need):  # split the batch with the most samples (fewer than `replicas` steps)
                sizes = np.diff(bounds)
                j = int(np.argmax(sizes))
                bounds = np.insert(bounds, j + 1, bounds[j] + sizes[j] // 2)
        return bounds

    def set_epoch(self, epoch):
        """Use the plan of ``epoch`` (the same on every rank for the same seed).

        >>> sampler = DistributedBucketSampler([5, 1, 4, 2, 3, 6, 2], batch_tokens=6, num_replicas=1, rank=0, seed=0)
        >>> sampler.set_epoch(0)
        >>> first = list(sampler)
        >>> sampler.set_epoch(1)
        >>> list(sampler) != first, sorted(i for batch in sampler for i in batch)  # a new order, each index once
        (True, [0, 1, 2, 3, 4, 5, 6])
        >>> sampler.set_epoch(0)
        >>> list(sampler) == first
        True
        """
        self.epoch = operator.index(epoch)

    def _plan(self):
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        lengths = self.lengths
        bounds = self._bounds
        if self.shuffle:
            rng = np.random.default_rng([_entropy(self.seed), _entropy(self.epoch)])
            perm = rng.permutation(lengths.size)
            order = perm[np.argsort(lengths[perm], kind="stable")]
            batch_order = rng.permutation(bounds.size - 1)
        else:
            order = np.argsort(lengths, kind="stable")
            batch_order = np.arange(bounds.size - 1)
        total = batch_order.size - batch_order.size % self.num_replicas
        mine = batch_order[self.rank : total : self.num_replicas]
        plan = [order[bounds[j] : bounds[j + 1]].tolist() for j in mine]
        self._cache = (self.epoch, plan)
        return plan

    def __iter__(self):
        return iter(self._plan())

    def __len__(self):
        return (self._bounds.size - 1) // self.num_replicas

    def __repr__(self):
        return (
            f"DistributedBucketSampler(samples={self.lengths.size}, batch_tokens={self.batch_tokens}, "
            f"num_replicas={self.num_replicas}, rank={self.rank}, batches_per_rank={len(self)}, epoch={self.epoch})"
        )


def _entropy(value):
    """A seed or epoch as NumPy's seed entropy (which must be >= 0): a negative one wraps modulo 2**64,
    as ``torch.Generator.manual_seed`` takes it; others are unchanged."""
    return value if value >= 0 else value % (1 << 64)


def _world(num_replicas, rank, name):
    if num_replicas is None or rank is None:
        try:
            import torch.distributed as dist
        except ImportError:
            dist = None
        if dist is None or not dist.is_available() or not dist.is_initialized():
            raise ValueError(
                f"{name}: num_replicas and rank default to torch.distributed's world, which is not initialised; "
                f"call init_process_group() first, or pass num_replicas=1, rank=0 for one process"
            )
        num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
        rank = dist.get_rank() if rank is None else rank
    num_replicas, rank = operator.index(num_replicas), operator.index(rank)
    if num_replicas < 1:
        raise ValueError(f"{name}: num_replicas must be >= 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"{name}: rank must be in [0, {num_replicas}), got {rank}")
    return num_replicas, rank
