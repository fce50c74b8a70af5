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


def sentences(width=256, seed_offset=32):
    """The 2,266-sentence batch of ``bench/nested.py``: 2,266 sequences of 1..64 rows, float32
    standard normal rows of ``width`` (about 74K rows)."""
    g = np.random.default_rng(SEED + seed_offset)
    lengths = g.integers(1, 65, size=2266).astype(np.int64)
    data = g.standard_normal((int(lengths.sum()), width), dtype=np.float32)
    return data, [lengths.tolist()]


def layer_weights(kind, width, hidden):
    """Parameters of the layer benchmark in Paddle's shapes, float32 (the same in every process).

    ``lstm``: input projection ``[width, 4H]``, recurrent ``[H, 4H]``, bias ``[1, 4H]``;
    ``gru``: ``[width, 3H]``, ``[H, 3H]``, ``[1, 3H]``; ``sequence_conv``: filter ``[3 * width, H]``.
    """
    g = np.random.default_rng(SEED + 300)
    gates = {"lstm": 4, "gru": 3}.get(kind)
    if gates is None:
        return {"filter": g.uniform(-0.05, 0.05, (3 * width, hidden)).astype(np.float32)}
    return {
        "w_ih": g.uniform(-0.05, 0.05, (width, gates * hidden)).astype(np.float32),
        "w_hh": g.uniform(-0.05, 0.05, (hidden, gates * hidden)).astype(np.float32),
        "bias": g.uniform(-0.05, 0.05, (1, gates * hidden)).astype(np.float32),
    }
