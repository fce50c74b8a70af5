"""Run in a subprocess by test_files.py: load every corrupted variant of a saved file.

Prints one line per variant: ``ok`` (loaded and equal to the original), ``error``
(a ValueError naming the file) or ``WRONG <detail>``. A crash kills the process,
which the test sees as a non-zero exit.
"""

import os
import sys

import numpy as np

import lodtensor as lt


def variants(blob, offsets_at):
    n = len(blob)
    for k in range(8):
        yield f"truncate {k}/8", blob[: n * k // 8]
    yield "truncate -1", blob[:-1]
    for pos in [0, 3, 6, 8, 12, 16, 40, 64, 100, n - 10, n - 6, n - 1, *offsets_at]:
        if 0 <= pos < n:
            for bit in (0x01, 0x80, 0xFF):
                b = bytearray(blob)
                b[pos] ^= bit
                yield f"flip {pos}^{bit:#x}", bytes(b)
    rng = np.random.default_rng(0)
    for i in range(int(os.environ.get("CORRUPT_RANDOM", "200"))):
        b = bytearray(blob)
        for pos in rng.integers(0, n, size=rng.integers(1, 4)):
            b[pos] = rng.integers(0, 256)
        yield f"random {i}", bytes(b)


def _ipc_readers(t, path):
    return [(f"mmap={m}", lambda m=m: lt.load(path, mmap=m), True) for m in (True, False)]


def _parquet_readers(t, path):
    def streamed():
        batches = [b["t"] for b in lt.read_parquet(path, batch_size=2)]
        assert all(b.has_valid_recursive_sequence_lengths() for b in batches)
        return batches[0] if batches else t

    # Parquet stores no checksum of our offsets: a flipped length may load as another valid LoD,
    # so for Parquet "ok" means a valid tensor (the gate held), not the original
    return [("whole", lambda: lt.read_parquet(path)["t"], False), ("streamed", streamed, False)]


def main(directory, kind):
    t = lt.LoDTensor(np.arange(60, dtype=np.float32).reshape(20, 3), [[0, 2, 5], [0, 3, 3, 9, 15, 20]])
    path = os.path.join(directory, f"orig.{kind}")
    if kind == "arrow":
        lt.save(path, t)
    else:
        lt.write_parquet(path, {"t": t}, compression="none")
    blob = open(path, "rb").read()
    offsets_at = [blob.find(t.lod.levels[1].tobytes()) + 8 * i for i in range(6)]
    bad = os.path.join(directory, f"bad.{kind}")
    readers = (_ipc_readers if kind == "arrow" else _parquet_readers)(t, bad)
    for label, variant in variants(blob, offsets_at):
        with open(bad, "wb") as f:
            f.write(variant)
        for name, read, exact in readers:
            try:
                got = read()
            except ValueError as err:
                status = "error" if f"bad.{kind}" in str(err) else f"WRONG unnamed {err}"
            except Exception as err:  # noqa: BLE001 - anything else is a failure to report
                status = f"WRONG {type(err).__name__}: {err}"
            else:
                same = got.lod() == t.lod() and got.shape() == t.shape() and got.dtype == t.dtype
                valid = got.has_valid_recursive_sequence_lengths() and isinstance(got.lod, lt.LoD)
                # a flipped value byte loads as a different value: allowed, the LoD is what must hold
                status = "ok" if (same if exact else valid) else f"WRONG loaded {got.lod()} {got.shape()} {got.dtype}"
            print(label, name, status, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "arrow")
