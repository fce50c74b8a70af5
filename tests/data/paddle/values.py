"""The values of the Paddle-written fixtures in this folder (see make_fixtures.py)."""

import zlib

import numpy as np


def expected(name, dtype, shape):
    """A deterministic array for ``name``: small integers from a hash of the name, in ``dtype``."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    values = (np.arange(count) * 7 + zlib.crc32(name.encode())) % 11 - 3
    if dtype.kind == "b":
        values = values > 0
    elif dtype.kind == "u":
        values = np.abs(values)
    return values.astype(dtype).reshape(shape)
