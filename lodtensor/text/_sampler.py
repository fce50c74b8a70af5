"""BucketBatchSampler: batches of sample indices of similar lengths, drawn per epoch without a Python
loop over samples (a loop over batches only, to hand DataLoader its lists)."""

import operator

import numpy as np

__all__ = ["BucketBatchSampler"]


class BucketBatchSampler:
    """Batches of sample indices with similar lengths (a ``batch_sampler`` for DataLoader).

    The indices are shuffled, cut into buckets of ``batch_size * bucket_factor``
    samples, sorted by length inside each bucket (ties in shuffled order) and cut
    into batches; the batches are shuffled again. Padding waste drops to near zero
    while every epoch still sees a new order. An epoch is drawn when its first batch
    is asked for, as torch's samplers draw theirs (DataLoader with workers calls
    ``iter()`` twice an epoch and drops the first iterator unread): workers or not,
    a seed gives the same batches.

    Parameters
    ----------
    lengths : sequence of int
        One length per sample (for documents: e.g. number of words); >= 0.
    batch_size : int
    shuffle : bool
        False gives batches of a fully length-sorted order, deterministically.
    bucket_factor : int
    drop_last : bool
    seed : int, optional
        Seed (>= 0) of the sampler's own random generator (``numpy.random.default_rng``); each epoch draws anew.

    >>> sampler = BucketBatchSampler([5, 1, 4, 2, 3, 6], batch_size=2, shuffle=False)
    >>> list(sampler), len(sampler)
    ([[1, 3], [4, 2], [0, 5]], 3)
    """

    def __init__(self, lengths, batch_size, shuffle=True, bucket_factor=50, drop_last=False, seed=None):
        self.lengths = np.asarray(lengths)
        if self.lengths.ndim != 1 or (self.lengths.size and self.lengths.dtype.kind not in "iu"):
            raise TypeError(f"BucketBatchSampler(): lengths must be a 1-D sequence of integers, got {lengths!r}")
        if self.lengths.size and self.lengths.min() < 0:
            bad = int(np.flatnonzero(self.lengths < 0)[0])
            raise ValueError(f"BucketBatchSampler(): lengths must be >= 0, got lengths[{bad}]={self.lengths[bad]}")
        batch_size = operator.index(batch_size)
        if batch_size < 1:
            raise ValueError(f"BucketBatchSampler(): batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.shuffle = shuffle
        bucket_factor = operator.index(bucket_factor)
        if bucket_factor < 1:
            raise ValueError(f"BucketBatchSampler(): bucket_factor must be >= 1, got {bucket_factor}")
        self.bucket_factor = bucket_factor
        self.drop_last = drop_last
        if seed is not None:  # (numpy's own errors name neither the argument nor the value)
            if isinstance(seed, bool) or not hasattr(seed, "__index__"):
                raise TypeError(f"BucketBatchSampler(): seed must be None or an int >= 0, got {type(seed).__name__} "
                                f"{seed!r:.80}")
            seed = operator.index(seed)
            if seed < 0:
                raise ValueError(f"BucketBatchSampler(): seed must be None or an int >= 0, got {seed}")
        self._rng = np.random.default_rng(seed)

    def __iter__(self):
        yield from self._batches()  # a generator: the epoch is drawn at the first batch asked for

    def _batches(self):
        n, size = self.lengths.size, self.batch_size
        if self.shuffle:
            order, bucket = self._rng.permutation(n), size * self.bucket_factor
        else:
            order, bucket = np.arange(n), max(n, 1)
        position = np.arange(n)
        lengths, buckets = self.lengths[order], position // bucket
        # by bucket, then by length inside it; a stable sort, so ties keep the shuffled order (one int64 key
        # where it fits: 3x faster than lexsort's two)
        top = int(lengths.max()) + 1 if n else 1
        if (n // bucket + 1) * top < 1 << 62:
            order = order[np.argsort(buckets * top + lengths.astype(np.int64), kind="stable")]
        else:
            order = order[np.lexsort((lengths, buckets))]
        starts = np.flatnonzero(position % bucket % size == 0)  # every batch_size samples of each bucket
        ends = np.append(starts[1:], n)
        if self.drop_last:
            keep = ends - starts == size
            starts, ends = starts[keep], ends[keep]
        if self.shuffle:
            pick = self._rng.permutation(starts.size)
            starts, ends = starts[pick], ends[pick]
        return [order[a:b].tolist() for a, b in zip(starts.tolist(), ends.tolist())]

    def __len__(self):
        n = self.lengths.size
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
