"""Drive every function of the compiled kernels (``_csegment``, ``_cpointwise``) with edge inputs.

Run by tests/test_memory_hunt.py in a child process under AddressSanitizer (a build of the current
sources) or valgrind (the built modules): empty inputs, one row, widths around every vector and tile
size, huge widths without rows, views at the ends of buffers, every dtype the kernels take, float
specials, each instruction set the CPU runs, one and several threads, and arguments that must be
refused. Each input sits in a buffer of exactly its size, so a read or write past it is seen; the
results are compared with NumPy's. Prints ``ok`` at the end.

    python tests/_memory_drive.py DIR [--quick]

DIR holds the two built modules (``installed``: the package's own).
"""

import importlib.util
import itertools
import os
import sys

import numpy as np


def _load(folder, name):
    if folder == "installed":
        return importlib.import_module(f"lodtensor.backend.numpy.{name}")
    path = next(os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(name + ".") and f.endswith(".so"))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


S = _load(sys.argv[1], "_csegment")
P = _load(sys.argv[1], "_cpointwise")
QUICK = "--quick" in sys.argv
rng = np.random.default_rng(0)
DT = {0: np.float32, 1: np.float64, 2: np.int32, 3: np.int64}
OPS = {0: np.add, 1: np.maximum, 2: np.minimum}
REFUSED = (ValueError, BufferError, TypeError, OverflowError)


def specials(dtype, n):
    if np.dtype(dtype).kind == "f":
        pool = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 3e38, -3e38, 1.0, -2.5], dtype)
    else:
        info = np.iinfo(dtype)
        pool = np.array([0, -1, 1, info.max, info.min, 7], dtype)
    return rng.choice(pool, size=n)


def exact(a):
    """A copy of ``a`` in a buffer of exactly its size (a read past its end leaves the allocation)."""
    b = np.empty_like(a)
    b[...] = a
    return b


def refused(fn, *args):
    try:
        fn(*args)
    except REFUSED:
        return
    raise AssertionError(f"{fn.__name__} accepted {[getattr(a, 'shape', a) for a in args]}")


def offsets_for(n_seq, rows):
    cuts = np.sort(rng.integers(0, rows + 1, size=max(n_seq - 1, 0)))
    return np.concatenate([[0], cuts, [rows]]).astype(np.int64)


WIDTHS = [1, 3, 8, 17, 65] if QUICK else [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 129, 257, 1000]
SHAPES = [(0, 0), (1, 0), (1, 1), (3, 1), (1, 33), (5, 40), (2, 130)]

for variant in S.simd()[1]:
    S.select_simd(variant)
    for kind, op, w in itertools.product(range(4), range(3), WIDTHS):
        dt = DT[kind]
        for n_seq, rows in SHAPES:
            off = exact(offsets_for(n_seq, rows))
            data = exact(specials(dt, rows * w).reshape(rows, w))
            for lo, hi in {(0, n_seq), (n_seq, n_seq), (0, min(1, n_seq)), (max(n_seq - 1, 0), n_seq)}:
                for threads in (1, 3):
                    S.segment_reduce(op, kind, data, off, exact(np.full((n_seq, w), -1, dt)), w, lo, hi, threads)
            out = exact(np.full((n_seq, w), -1, dt))
            S.segment_reduce(op, kind, data, off, out, w, 0, n_seq)
            for j in range(n_seq):
                s, e = off[j], off[j + 1]
                if e > s:
                    with np.errstate(all="ignore"):
                        ref = OPS[op].reduce(data[s:e], axis=0, dtype=dt)
                        scale = np.abs(data[s:e]).astype(np.float64).sum(axis=0)
                        miss = np.abs(out[j].astype(np.float64) - ref)
                    if kind < 2 and op == 0:  # float sums may add in another order: within rounding of sum |x|
                        sure = np.isfinite(ref) & np.isfinite(scale)
                        assert np.all(miss[sure] <= 1e-5 * scale[sure]), (variant, kind, w, j)
                    else:
                        assert np.array_equal(out[j], ref, equal_nan=kind < 2), (variant, kind, op, w, j)
    for kind, w in itertools.product(range(2), WIDTHS):
        dt = DT[kind]
        for n_seq, rows in SHAPES:
            off = exact(offsets_for(n_seq, rows))
            g, y, x = (exact(specials(dt, rows * w).reshape(rows, w)) for _ in range(3))
            m = np.zeros((n_seq, w), dt)
            with np.errstate(all="ignore"):
                for j in range(n_seq):
                    if off[j + 1] > off[j]:
                        m[j] = x[off[j] : off[j + 1]].max(axis=0)
            m, gm = exact(m), exact(specials(dt, n_seq * w).reshape(n_seq, w))
            for threads in (1, 2):
                S.softmax_grad(kind, g, y, off, exact(np.zeros_like(y)), w, 0, n_seq, threads)
                S.softmax_grad(kind, g, y, off, exact(np.zeros_like(y)), w, n_seq, n_seq, threads)
                S.extreme_grad(kind, x, m, gm, off, exact(np.zeros_like(x)), w, 0, n_seq, threads)

# views at the ends of larger buffers: offsets, data and out
for kind in range(4):
    dt = DT[kind]
    off = exact(np.array([99, 0, 2, 2, 7, 7], np.int64))[1:]
    data = exact(specials(dt, 27).reshape(9, 3))[2:]
    out = exact(np.zeros((5, 3), dt))
    for op in range(3):
        S.segment_reduce(op, kind, data, off, out[1:], 3, 0, 4)
    refused(S.segment_reduce, 0, kind, data, off, out[2:], 3, 0, 4)
    refused(S.segment_reduce, 0, kind, data[1:], off, out[1:], 3, 0, 4)
    if kind < 2:
        S.softmax_grad(kind, data, data, off, exact(np.zeros_like(data)), 3, 0, 4)
        m = exact(np.zeros((4, 3), dt))
        S.extreme_grad(kind, data, m, m, off, exact(np.zeros_like(data)), 3, 0, 4)
        refused(S.extreme_grad, kind, data, m[1:], m[1:], off, np.zeros_like(data), 3, 0, 4)

# huge widths without a row: nothing to do, and no scratch row of that width to allocate
z32, one, two = np.zeros(0, np.float32), np.zeros(1, np.int64), np.zeros(2, np.int64)
for w in [2**31, 2**40, 2**60 - 1]:
    S.segment_reduce(0, 0, z32, one, z32, w, 0, 0)
    S.softmax_grad(0, z32, z32, two, z32, w, 0, 1)
    S.softmax_grad(0, z32, z32, one, z32, w, 0, 0)
    S.extreme_grad(0, z32, z32, z32, one, z32, w, 0, 0)
    refused(S.segment_reduce, 0, 0, z32, two, z32, w, 0, 1)

# arguments that must be refused
d, o = np.zeros((4, 3), np.float32), np.zeros((2, 3), np.float32)
good = np.array([0, 2, 4], np.int64)
for bad in [np.array([0, 2, 5]), np.array([0, 3, 2]), np.array([-1, 2, 4]), np.array([0, 2, 4], np.int32),
            np.array([], np.int64), good[::2], good.astype(">i8")]:
    n = max(len(bad) - 1, 0)
    refused(S.segment_reduce, 0, 0, d, bad, o, 3, 0, n)
    refused(S.softmax_grad, 0, d, d, bad, np.zeros_like(d), 3, 0, n)
    refused(S.extreme_grad, 0, d, o, o, bad, np.zeros_like(d), 3, 0, n)
for lo, hi in [(-1, 2), (0, 3), (2, 1), (0, 2**62), (-(2**62), 0)]:
    refused(S.segment_reduce, 0, 0, d, good, o, 3, lo, hi)
    refused(S.softmax_grad, 0, d, d, good, np.zeros_like(d), 3, lo, hi)
    refused(S.extreme_grad, 0, d, o, o, good, np.zeros_like(d), 3, lo, hi)
for w in [0, -1, 2**61, 2**63 - 1, 5]:
    refused(S.segment_reduce, 0, 0, d, good, o, w, 0, 2)
    refused(S.softmax_grad, 0, d, d, good, np.zeros_like(d), w, 0, 2)
    refused(S.extreme_grad, 0, d, o, o, good, np.zeros_like(d), w, 0, 2)
read_only = np.zeros((2, 3), np.float32)
read_only.flags.writeable = False
for args in [(0, 0, d, good, o[:1]), (0, 0, d, good, o.T), (0, 0, d[:, ::2], good, o), (0, 1, d, good, o),
             (3, 0, d, good, o), (0, 4, d, good, o), (0, 0, d, good, o.view(">f4")), (0, 0, d, good, read_only),
             (0, 0, b"abc", good, o), (0, 0, d, good, bytearray(24))]:
    refused(S.segment_reduce, *args, 3, 0, 2)
refused(S.segment_reduce, 0, 0, d, good, o, 3, 0, 2, 0)
refused(S.segment_reduce, 0, 0, d, good, o, 3, 0, 2, 65)
refused(S.extreme_grad, 0, d, o[:1], o[:1], good, np.zeros_like(d), 3, 0, 2)
refused(S.extreme_grad, 0, d, o, o[:1], good, np.zeros_like(d), 3, 0, 2)
refused(S.softmax_grad, 0, d, d[:3], good, np.zeros_like(d), 3, 0, 2)
refused(S.select_simd, "nope")

# the pointwise kernels: every length around the vector sizes, streamed or not, unaligned, in place
LENGTHS = [0, 1, 3, 15, 16, 17, 63, 64, 65, 200, 4099] if QUICK else [0, 1, 2, 3, 7, 15, 16, 17, 31, 63, 64, 65,
                                                                       127, 200, 1000, 4099, 70000]
for variant in P.simd()[1]:
    P.select_simd(variant)
    for fn in (P.gelu_f32, P.relu, P.relu_torch):
        for dt in [np.float32] if fn is P.gelu_f32 else [np.float32, np.float64]:
            for n in LENGTHS:
                x = exact(specials(dt, n))
                for stream, threads in [(0, 1), (1, 1), (1, 3), (0, 4)]:
                    out = exact(np.empty_like(x))
                    fn(x, out, stream, threads)
                    if fn is P.relu:
                        with np.errstate(all="ignore"):
                            assert np.array_equal(out.view(np.uint8), np.maximum(x, 0).view(np.uint8)), (variant, n)
                    raw = exact(np.zeros(n * x.itemsize + 8, np.uint8))
                    for shift in (1, 4, 8):
                        unaligned = raw[shift : shift + n * x.itemsize].view(dt)
                        unaligned[...] = x
                        fn(unaligned, unaligned, stream, threads)
            x = np.zeros(10, dt)
            refused(fn, x[::2], np.zeros(5, dt))
            refused(fn, x, np.zeros(9, dt))
            refused(fn, x, np.zeros(10, np.int32))
            refused(fn, x.astype(x.dtype.newbyteorder()), x)
            refused(fn, x, x, 0, 0)
            refused(fn, x, x, 0, 65)
        refused(fn, np.zeros(4, np.float16), np.zeros(4, np.float16))
print("ok")
