"""Run in a child process by test_parquet.py: read a Parquet file with every single bit flipped.

``python tests/interop/_parquet_flips.py DIR LAYOUT STRIDE``: writes a small file
with ``lt.write_parquet`` (layout ``"nested"``: a 2-level LoD over rows of 3
float32, plus a plain label column; ``"width0"``: rows of width 0 and an int64
column), flips bit ``i`` for every ``i`` that is a multiple of ``STRIDE``, and
reads the result whole and streamed. Prints one JSON object: counts of each
outcome per read mode, and the flips that loaded a different LoD (``wrong``).
An outcome is ``error`` (a ValueError naming the file), ``same`` (the original
LoD, rows and values), ``values`` (the original LoD and rows, other values) or
``WRONG`` (anything else: another LoD, another shape, an unnamed error, a
stream that ended short). A crash kills the process, which the test sees.
"""

import json
import os
import sys

import numpy as np

import lodtensor as lt


def _columns(layout):
    if layout == "nested":
        t = lt.LoDTensor(np.arange(60, dtype=np.float32).reshape(20, 3), [[0, 2, 5], [0, 3, 3, 9, 15, 20]])
        return {"t": t, "label": lt.LoDTensor(np.array([7, 9], dtype=np.int16))}
    t = lt.LoDTensor(np.zeros((6, 0), dtype=np.float64), [[0, 1, 3], [0, 2, 2, 6]])
    return {"t": t, "ids": lt.LoDTensor(np.arange(12, dtype=np.int64), [[0, 5, 12]])}


def _same(got, want):
    """``same``, ``values`` or ``WRONG ...`` for dicts of tensors."""
    if sorted(got) != sorted(want):
        return f"WRONG columns {sorted(got)}"
    status = "same"
    for name, t in want.items():
        g = got[name]
        if g.lod() != t.lod() or g.shape() != t.shape() or g.dtype != t.dtype:
            return f"WRONG {name}: {g.lod()} {g.shape()} {g.dtype}"
        if not np.array_equal(np.asarray(g.numpy()), np.asarray(t.numpy())):
            status = "values"
    return status


def _join(batches, want):
    """The streamed batches joined back into whole columns (documents concatenated)."""
    if not batches:
        raise RuntimeError("the stream ended with no batch")
    out = {}
    for name in want:
        parts = [b[name] for b in batches]
        data = np.concatenate([np.asarray(p.numpy()) for p in parts])
        levels = []
        for k in range(parts[0].lod_level):
            lengths = np.concatenate([np.diff(p.lod.levels[k]) for p in parts])
            levels.append(np.concatenate(([0], np.cumsum(lengths))))
        out[name] = lt.LoDTensor(data, levels or None)
    return out


def main(directory, layout, stride):
    want = _columns(layout)
    path = os.path.join(directory, "orig.parquet")
    lt.write_parquet(path, want, compression="none")
    blob = open(path, "rb").read()
    bad = os.path.join(directory, "bad.parquet")
    counts = {"whole": {}, "streamed": {}}
    wrong = []
    for i in range(0, 8 * len(blob), stride):
        flipped = bytearray(blob)
        flipped[i // 8] ^= 1 << (i % 8)
        with open(bad, "wb") as f:
            f.write(flipped)
        for mode, tally in counts.items():
            try:
                if mode == "whole":
                    got = lt.read_parquet(bad)
                else:
                    got = _join(list(lt.read_parquet(bad, batch_size=1)), want)
                status = _same(got, want)
            except ValueError as err:
                status = "error" if "bad.parquet" in str(err) else f"WRONG unnamed {type(err).__name__}: {err}"
            except Exception as err:  # noqa: BLE001 - anything else is a failure to report
                status = f"WRONG {type(err).__name__}: {err}"
            key = status.split(" ", 1)[0]
            tally[key] = tally.get(key, 0) + 1
            if key == "WRONG":
                wrong.append([i // 8, i % 8, mode, status[:300]])
    print(json.dumps({"bits": 8 * len(blob), "counts": counts, "wrong": wrong[:50]}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
