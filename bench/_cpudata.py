"""Workloads of the CPU-kernel comparison (``bench/cpu.py``), from NumPy only: the workers
(Paddle, TensorFlow) rebuild them from the same seeds, so only timings cross processes.

Each workload is ``(data, offsets)``: float32 rows and the offsets of the sequences reduced.

- ``docs D=256`` / ``docs D=16``: the last level of ``_seqdata.two_level`` (256 documents x
  1..16 sentences x 1..64 words: 2,242 sentences, about 74K rows);
- ``2.7M rows D=16``: ``_seqdata.one_level_big`` (84,000 sequences of 1..63 rows);
- ``2266 x 1-64 D=256`` / ``256 x 1-672 D=256``: the cases of ``bench/nested.py``.
"""

import _common
import _seqdata
import numpy as np


def _last_level(make):
    data, lengths = make()
    return data, _common.offsets_of(np.asarray(lengths[-1], dtype=np.int64))


def _nested(sequences, max_len, seed_offset, width=256):
    g = _common.rng(seed_offset)
    lengths = g.integers(1, max_len + 1, size=sequences).astype(np.int64)
    data = g.standard_normal((int(lengths.sum()), width), dtype=np.float32)
    return data, _common.offsets_of(lengths)


WORKLOADS = {
    "docs D=256": lambda: _last_level(lambda: _seqdata.two_level(256)),
    "docs D=16": lambda: _last_level(lambda: _seqdata.two_level(16)),
    "2.7M rows D=16": lambda: _last_level(_seqdata.one_level_big),
    "2266 x 1-64 D=256": lambda: _nested(2266, 64, 32),
    "256 x 1-672 D=256": lambda: _nested(256, 672, 31),
}
# Paddle's workload names (``_seqdata.WORKLOADS``) for ours.
PADDLE_NAMES = {"docs D=256": "2-level D=256", "docs D=16": "2-level D=16", "2.7M rows D=16": "1-level 2.7M rows D=16"}


def linear_weights(width=256, seed_offset=40):
    g = _common.rng(seed_offset)
    w = (g.standard_normal((width, width), dtype=np.float32) / np.float32(np.sqrt(width)))
    return w, g.standard_normal(width, dtype=np.float32)


def padded_of(data, offsets):
    """The zero-padded ``(n, maxlen, D)`` array and the mask of real rows."""
    lengths = np.diff(offsets)
    mask = np.arange(int(lengths.max())) < lengths[:, None]
    out = np.zeros(mask.shape + data.shape[1:], dtype=data.dtype)
    out[mask] = data
    return out, mask
