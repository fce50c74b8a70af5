"""Probe (not a benchmark of a shipped path): segment reductions by k-row grid blocks, against the chunk kernel.

The measurements behind docs/backends.md, "Wide rows (D=256): reducing k-row
grid blocks where they lie". Sequence ``j`` (rows ``s:e``) owns the full grid
blocks ``ceil(s/k):e//k`` and its head and tail rows in partial blocks; the
block reductions are one pass over the ``(rows/k, k, w)`` view, each
sequence's block rows and partial rows are reduced by the chunk kernel, and
one ufunc call combines the two. The grid path was slower everywhere, so it
lives here only::

    PYTHONPATH=$PWD python bench/_probe_grid.py [pairs] [threads]

prints, per workload, ufunc and k, the medians of both and the per-pair ratio
``grid / chunk`` with its 10th-90th percentiles (pairs interleaved in one
process), then where the grid path's time goes and the one read of the
next lead (block pieces by one batched product).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _cpudata  # noqa: E402
import numpy as np  # noqa: E402

import lodtensor  # noqa: E402
from lodtensor.backend.numpy._chunks import chunk_reduce, identity_of  # noqa: E402


def grid_plan(offsets, k):
    """``(blocks, block_offsets, partial_rows, partial_offsets)`` for the grid of ``k`` rows.

    ``block_offsets`` cut the block rows into a gap segment (partial blocks
    between sequences) and a real one per sequence, then a last gap: the
    results of sequence ``j`` are at segment ``2j + 1``.
    """
    s, e = offsets[:-1], offsets[1:]
    n = s.size
    blocks = int(offsets[-1]) // k
    first, last = -(-s // k), e // k
    has = first < last
    ends = np.maximum.accumulate(np.where(has, last, 0))
    before = np.r_[0, ends[:-1]]
    block_offsets = np.empty(2 * n + 2, dtype=np.int64)
    block_offsets[0], block_offsets[-1] = 0, blocks
    block_offsets[1:-1:2] = np.where(has, first, before)
    block_offsets[2:-1:2] = np.where(has, last, before)
    head_end = np.where(has, first * k, e)
    tail_start = np.where(has, last * k, e)
    heads, tails = head_end - s, e - tail_start
    partial_offsets = np.r_[0, np.cumsum(heads + tails)]
    seq = np.repeat(np.arange(n), heads + tails)
    pos = np.arange(seq.size) - partial_offsets[seq]
    rows = np.where(pos < heads[seq], s[seq] + pos, tail_start[seq] + pos - heads[seq])
    return blocks, block_offsets, rows, partial_offsets


def grid_reduce(ufunc, data, k, plan):
    """``ufunc`` over each sequence's rows by grid blocks (no empty sequences in the workloads)."""
    blocks, block_offsets, rows, partial_offsets = plan
    width = data.shape[1]
    grid = data[: blocks * k].reshape(blocks, k, width)
    sums = np.einsum("bkw->bw", grid) if ufunc is np.add else ufunc.reduce(grid, axis=1)
    identity = identity_of(ufunc, data.dtype)
    out = chunk_reduce(ufunc, sums, block_offsets, identity)[1:-1:2]
    partial = chunk_reduce(ufunc, data.take(rows, axis=0), partial_offsets, identity)
    return ufunc(out, partial, out=out)


def _ratios(ufunc, data, offsets, k, plan, pairs):
    old, new = [], []
    for _ in range(pairs):
        t = time.perf_counter()
        chunk_reduce(ufunc, data, offsets, 0)
        old.append(time.perf_counter() - t)
        t = time.perf_counter()
        grid_reduce(ufunc, data, k, plan)
        new.append(time.perf_counter() - t)
    ratio = np.array(new) / np.array(old)
    return np.median(old) * 1e3, np.median(new) * 1e3, np.percentile(ratio, [10, 50, 90])


def _parts(name, data, offsets, k):
    """Where the grid sum's time goes: medians of 9 (and max's block pass, for comparison)."""
    blocks, block_offsets, rows, partial_offsets = grid_plan(offsets, k)
    grid = data[: blocks * k].reshape(blocks, k, data.shape[1])
    sums, partial = np.einsum("bkw->bw", grid), data.take(rows, axis=0)
    parts = {
        "whole chunk kernel": lambda: chunk_reduce(np.add, data, offsets, 0),
        "einsum": lambda: np.einsum("bkw->bw", grid, out=sums),
        "maximum.reduce(axis=1)": lambda: np.maximum.reduce(grid, axis=1, out=sums),
        "block rows": lambda: chunk_reduce(np.add, sums, block_offsets, 0),
        "take": lambda: data.take(rows, axis=0, out=partial, mode="clip"),
        "partial rows": lambda: chunk_reduce(np.add, partial, partial_offsets, 0),
    }
    print(f"  {name} k={k} (partial rows {rows.size / data.shape[0]:.0%}) ms: {_medians(parts, 9)}", flush=True)


def _medians(calls, rounds):
    """``"name median-ms, ..."`` of ``calls`` (a dict of callables), timed interleaved over ``rounds``."""
    times = {key: [] for key in calls}
    for _ in range(rounds):
        for key, f in calls.items():
            t = time.perf_counter()
            f()
            times[key].append(time.perf_counter() - t)
    return ", ".join(f"{key} {np.median(v) * 1e3:.2f}" for key, v in times.items())


def _product_pass(name, data, offsets):
    """Timing only: the one read of the next lead (docs), block pieces by ``np.matmul`` of a 0/1
    ``(blocks, c, k)`` matrix (random here: its values do not change the time)."""
    rng = np.random.default_rng(0)
    for k, c in ((8, 2), (16, 2), (16, 3), (32, 3)):
        blocks = data.shape[0] // k
        grid = data[: blocks * k].reshape(blocks, k, data.shape[1])
        pieces = (rng.random((blocks, c, k)) < 0.5).astype(data.dtype)
        out = np.empty((blocks, c, data.shape[1]), dtype=data.dtype)
        calls = {
            "whole chunk kernel": lambda: chunk_reduce(np.add, data, offsets, 0),
            "einsum": lambda: np.einsum("bkw->bw", grid),  # noqa: B023 - called in this iteration
            "matmul": lambda: np.matmul(pieces, grid, out=out),  # noqa: B023
        }
        print(f"  {name} pieces k={k} c={c} ms: {_medians(calls, 5)}", flush=True)


def main(pairs=21, threads=1):
    lodtensor.set_num_threads(threads)
    print("| ufunc | workload | k | chunk kernel (ms) | grid (ms) | grid / chunk |")
    for name in ["2266 x 1-64 D=256", "docs D=256", "2.7M rows D=16"]:
        data, offsets = _cpudata.WORKLOADS[name]()
        for ufunc in (np.add, np.maximum):
            for k in (4, 8) if data.shape[1] == 256 else (8, 16):
                plan = grid_plan(offsets, k)
                want = chunk_reduce(ufunc, data, offsets, 0)
                got = grid_reduce(ufunc, data, k, plan)
                if ufunc is np.add:
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
                else:
                    np.testing.assert_array_equal(got, want)
                old, new, (lo, mid, hi) = _ratios(ufunc, data, offsets, k, plan, pairs)
                print(f"| {ufunc.__name__} | {name} | {k} | {old:.1f} | {new:.1f} | {mid:.2f}x [{lo:.2f}-{hi:.2f}] |",
                      flush=True)
        for k in (4, 8) if data.shape[1] == 256 else (8, 16):
            _parts(name, data, offsets, k)
        _product_pass(name, data, offsets)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
