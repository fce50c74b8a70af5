"""Workloads of the sequence-op benchmark, built from NumPy only (the Paddle worker rebuilds them).

- ``two_level(width)``: 256 documents x 1..16 sentences x 1..64 words, float32 rows of ``width``;
- ``one_level_big()``: about 2.7M rows of width 16 in sequences of 1..63 rows.
"""

import numpy as np

SEED = 20240611


def two_level(width, seed_offset=0):
    g = np.random.default_rng(SEED + 100 + seed_offset)
    sents = g.integers(1, 17, size=256)
    words = g.integers(1, 65, size=int(sents.sum()))
    data = g.random((int(words.sum()), width), dtype=np.float32)
    return data, [sents.tolist(), words.tolist()]


def one_level_big(width=16, seed_offset=0):
    g = np.random.default_rng(SEED + 200 + seed_offset)
    lengths = g.integers(1, 64, size=84_000)
    data = g.random((int(lengths.sum()), width), dtype=np.float32)
    return data, [lengths.tolist()]


WORKLOADS = {
    "2-level D=256": lambda: two_level(256),
    "2-level D=16": lambda: two_level(16),
    "1-level 2.7M rows D=16": lambda: one_level_big(16),
}
