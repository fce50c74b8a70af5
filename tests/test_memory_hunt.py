"""Memory hunt: reference counts and allocations of the compiled kernels, leaks of the hot ops, bounded
caches, reference cycles, and what views keep alive.

Found and fixed:

- ``_csegment.softmax_grad`` / ``extreme_grad`` allocated their scratch row (``width`` values) before
  looking for rows: a call over sequences without a row and a wide row shape asked for ``width *
  itemsize`` bytes (4 TiB at width 2**40: a MemoryError for a call with nothing to do). They return at
  once now when the sequences hold no row.
- The torch backend's SpMM segment sum kept its column indices and ones for the largest input ever
  summed, for the rest of the process (one sum over 20M rows of width 5 left 228 MiB held that
  ``trim_buffer_pool`` could not free). Kept now up to ``_tuning.SPMM_KEPT_BYTES`` a dtype; larger inputs
  get buffers of their own, for the call.

The sanitizer and valgrind runs (marked ``slow``) drive every compiled function through
``tests/_memory_drive.py``; they skip where gcc, libasan or valgrind is missing.
"""

import gc
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
import lodtensor.sequence as seq

try:
    from lodtensor.backend.numpy import _cpointwise, _csegment
except ImportError:  # installed without a C compiler
    _csegment = _cpointwise = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVE = os.path.join(ROOT, "tests", "_memory_drive.py")
SOURCES = os.path.join(ROOT, "lodtensor", "backend", "numpy")
compiled = pytest.mark.skipif(_csegment is None, reason="the compiled kernels were not built")
LOD = [[0, 3, 10, 10, 30, 50]]


pytestmark = pytest.mark.usefixtures("frozen_heap")  # gc.collect() scans only what the tests make


def _held():
    """Bytes traced in blocks allocated under a frame of this file (this thread's calls, not what Python threads
    other tests left running allocate meanwhile: pytest-xdist runs any test before these) or in a native
    thread without a Python frame (a threaded kernel's workers, ``<unknown>``)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, __file__, all_frames=True), tracemalloc.Filter(True, "<unknown>")])
    return sum(trace.size for trace in snapshot.traces)


def _traced_growth(fn, n=None, windows=4, warm=10, seconds=0.1):
    """Bytes traced by tracemalloc that each of ``windows`` runs of ``n`` calls left behind (gc'd);
    ``n`` None: as many calls as take about ``seconds`` (15 to 2000)."""
    for _ in range(warm):
        fn()
    gc.collect()
    tracemalloc.start(64)
    try:
        if n is None:
            start = time.perf_counter()
            for _ in range(5):
                fn()
            n = int(min(2000, max(15, seconds * 5 / max(time.perf_counter() - start, 1e-7))))
            gc.collect()
        sizes = [_held()]
        for _ in range(windows):
            for _ in range(n):
                fn()
            gc.collect()
            sizes.append(_held())
    finally:
        tracemalloc.stop()
    return [b - a for a, b in zip(sizes, sizes[1:])]


def _assert_plateau(growth):
    """A leak grows every window alike; a cache that fills (torch's, CPython's) grows less and less."""
    assert min(growth[1:]) < 16 << 10, growth


# -- the compiled kernels: references, allocations, arguments -------------------------------------------
def _c_calls():
    d = np.random.default_rng(0).random((50, 8)).astype(np.float32)
    off = np.array([0, 10, 30, 50], np.int64)
    o, m, g = np.zeros((3, 8), np.float32), np.zeros((3, 8), np.float32), d.copy()
    out = np.zeros_like(d)
    args = [d, off, o, m, g, out]
    calls = {
        "segment_reduce": (_csegment.segment_reduce, (0, 0, d, off, o, 8, 0, 3)),
        "segment_reduce threads": (_csegment.segment_reduce, (1, 0, d, off, o, 8, 0, 3, 3)),
        "segment_reduce short out": (_csegment.segment_reduce, (0, 0, d, off, o[:1], 8, 0, 3)),
        "segment_reduce int32 offsets": (_csegment.segment_reduce, (0, 0, d, off.astype(np.int32), o, 8, 0, 3)),
        "segment_reduce bad kind": (_csegment.segment_reduce, (0, 1, d, off, o, 8, 0, 3)),
        "segment_reduce bad order": (_csegment.segment_reduce, (0, 0, d, off[::-1].copy(), o, 8, 0, 3)),
        "segment_reduce strided out": (_csegment.segment_reduce, (0, 0, d, off, d.T, 8, 0, 3)),
        "softmax_grad": (_csegment.softmax_grad, (0, g, d, off, out, 8, 0, 3)),
        "softmax_grad unlike": (_csegment.softmax_grad, (0, g, d[:3], off, out, 8, 0, 3)),
        "softmax_grad bad range": (_csegment.softmax_grad, (0, g, d, off, out, 8, 0, 9)),
        "extreme_grad": (_csegment.extreme_grad, (0, d, m, g[:3], off, out, 8, 0, 3)),
        "extreme_grad short m": (_csegment.extreme_grad, (0, d, m[:1], g[:1], off, out, 8, 0, 3)),
        "relu": (_cpointwise.relu, (d, out)),
        "relu_torch threads": (_cpointwise.relu_torch, (d, out, True, 2)),
        "gelu_f32": (_cpointwise.gelu_f32, (d, out)),
        "relu unlike": (_cpointwise.relu, (d, o)),
        "gelu_f32 float64": (_cpointwise.gelu_f32, (d.astype(np.float64), out)),
        "simd": (_csegment.simd, ()),
        "select_simd bad": (_csegment.select_simd, ("nope",)),
    }
    return calls, args


C_CALLS = ["segment_reduce", "segment_reduce threads", "segment_reduce short out", "segment_reduce int32 offsets",
           "segment_reduce bad kind", "segment_reduce bad order", "segment_reduce strided out", "softmax_grad",
           "softmax_grad unlike", "softmax_grad bad range", "extreme_grad", "extreme_grad short m", "relu",
           "relu_torch threads", "gelu_f32", "relu unlike", "gelu_f32 float64", "simd", "select_simd bad"]


@compiled
@pytest.mark.parametrize("name", C_CALLS)
def test_compiled_entry_releases_every_reference_and_allocation(name):
    """5,000 calls (also of the error paths) leave the arguments' reference counts as they were (every
    buffer released) and allocate nothing that stays (PyMem is traced: the private offsets copy). The
    smallest block pymalloc keeps is 16 bytes, 80,000 over 5,000 calls; the 4 KiB allowed is tracemalloc's
    own first use in a process (1.8 KiB) and its steady noise (144 bytes)."""
    calls, args = _c_calls()
    assert sorted(calls) == sorted(C_CALLS)
    fn, call_args = calls[name]

    def call():
        try:
            fn(*call_args)
        except (ValueError, BufferError):
            pass

    call()
    before = [sys.getrefcount(a) for a in args]
    growth = _traced_growth(call, 5_000, windows=1, warm=0)
    assert [sys.getrefcount(a) for a in args] == before
    assert growth[0] < 4096, growth


@compiled
def test_backward_kernels_without_rows_allocate_no_scratch():
    """Sequences without a row need no scratch row: before, a width of 2**40 asked for 4 TiB (MemoryError)."""
    z = np.zeros(0, np.float32)
    wide = 2**40
    assert _csegment.softmax_grad(0, z, z, np.zeros(2, np.int64), z, wide, 0, 1) is None
    assert _csegment.softmax_grad(0, z, z, np.zeros(3, np.int64), z, wide, 0, 2, 4) is None
    assert _csegment.extreme_grad(0, z, z, z, np.zeros(1, np.int64), z, wide, 0, 0) is None
    # rows still go through the kernels
    g = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 4.0]], np.float32)
    y = np.full((3, 2), 0.5, np.float32)
    out = np.zeros_like(y)
    _csegment.softmax_grad(0, g, y, np.array([0, 2, 2, 3]), out, 2, 0, 3)
    assert out.tolist() == [[-0.5, 0.0], [0.5, 0.0], [0.5, 1.0]]


@compiled
def test_compiled_kernels_edge_inputs_installed_build():
    """The driver's edge inputs (quick set) on the built modules: results match NumPy, bad arguments
    are refused."""
    proc = subprocess.run([sys.executable, DRIVE, "installed", "--quick"], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=ROOT), check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


# -- the torch backend's SpMM buffers ---------------------------------------------------------------------
def test_spmm_segment_sum_keeps_bounded_buffers(monkeypatch):
    """Buffers for more rows than SPMM_KEPT_BYTES allows are the call's own: before, the largest input
    ever summed set what the process kept (228 MiB after 20M rows)."""
    torch = pytest.importorskip("torch")
    from lodtensor.backend.torch import _cpu, _tuning

    monkeypatch.setattr(_tuning, "SPMM_KEPT_BYTES", 64 << 10, raising=False)
    monkeypatch.setattr(_cpu, "_spmm_buffers", {})

    def kept():
        return sum(a.nbytes + b.nbytes for a, b in _cpu._spmm_buffers.values())

    rows = 100_000
    flat = torch.randn(rows, 5)
    offsets = torch.tensor([0, 1, 40_000, 40_000, rows])
    got = _cpu._spmm_segment_sum(flat, offsets)
    ids = torch.repeat_interleave(torch.arange(4), offsets.diff())
    want = torch.zeros(4, 5).index_add_(0, ids, flat)
    torch.testing.assert_close(got.to_dense() if got.is_sparse else got, want, rtol=1e-4, atol=1e-3)
    assert kept() <= 64 << 10
    # small inputs still reuse one kept pair
    small = torch.randn(1000, 5)
    a = _cpu._spmm_parts(1000, torch.float32)
    b = _cpu._spmm_parts(900, torch.float32)
    assert a[0].data_ptr() == b[0].data_ptr() and 0 < kept() <= 64 << 10
    torch.testing.assert_close(_cpu._spmm_segment_sum(small, torch.tensor([0, 1000])), small.sum(0, keepdim=True),
                               rtol=1e-4, atol=1e-4)
    # through the public op (width 5 float32: the SpMM path where MKL is there)
    x = lt.LoDTensor(torch.randn(rows, 5), [[0, 5, rows]])
    torch.testing.assert_close(seq.sequence_pool(x, "sum").data[1], x.data[5:].sum(0), rtol=1e-4, atol=1e-2)
    assert kept() <= 64 << 10


# -- the hot ops plateau ----------------------------------------------------------------------------------
def _numpy_ops():
    rng = np.random.default_rng(0)
    x = lt.LoDTensor(rng.random((50, 16)).astype(np.float32), LOD)
    x2 = lt.LoDTensor(rng.random((50, 16)).astype(np.float32), [[0, 2, 5], *LOD])
    col = lt.LoDTensor(rng.random((50, 1)), LOD)
    nt = ln.nested_tensor([rng.random((3, 8)).astype(np.float32), rng.random((5, 8)).astype(np.float32)])
    return {
        "sequence_pool sum": lambda: seq.sequence_pool(x, "sum"),
        "sequence_pool max": lambda: seq.sequence_pool(x, "max"),
        "sequence_pool average": lambda: seq.sequence_pool(x2, "average"),
        "sequence_softmax": lambda: seq.sequence_softmax(col),
        "sequence_pad/unpad": lambda: seq.sequence_unpad(*seq.sequence_pad(x, np.float32(0))),
        "to_padded/from_padded": lambda: lt.from_padded(*x.to_padded()),
        "to_padded_all": x2.to_padded_all,
        "getitem": lambda: (x[1], x2[1][0]),
        "ufunc": lambda: np.exp(x) * 2 + x,
        "new LoD": lambda: seq.sequence_pool(lt.LoDTensor(x.data, [[0, 7, 50]]), "max"),
        "nested": lambda: (ln.softmax(ln.relu(nt + nt), -1), ln.to_padded_tensor(nt, 0.0), nt.unbind()),
    }


#: one op a family in make test (each plateau check takes about 5 s: four traced windows of about 0.1 s of
#: untraced calls); the others in make test-slow
_QUICK_PLATEAU = {"sequence_pool sum", "sequence_pool max", "nested"}


@pytest.mark.parametrize("name", [n if n in _QUICK_PLATEAU else pytest.param(n, marks=pytest.mark.slow)
                                  for n in _numpy_ops()])
def test_numpy_hot_ops_plateau(name):
    _assert_plateau(_traced_growth(_numpy_ops()[name]))


def _torch_ops():
    torch = pytest.importorskip("torch")
    from lodtensor import nn as lnn

    torch.manual_seed(0)
    x = lt.LoDTensor(torch.randn(50, 16, requires_grad=True), LOD)
    col = lt.LoDTensor(torch.randn(50, 1, requires_grad=True), LOD)
    emb, ids = lnn.Embedding(100, 8), lt.LoDTensor(torch.randint(0, 100, (50, 1)), LOD)
    nt = ln.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)], requires_grad=True)
    return {
        "sequence_pool max": lambda: seq.sequence_pool(x, "max").data.sum().backward(),
        "sequence_softmax": lambda: seq.sequence_softmax(col).data.sum().backward(),
        "sequence_pad/unpad": lambda: seq.sequence_unpad(*seq.sequence_pad(x, torch.tensor(0.0))).data.sum().backward(),
        "Embedding": lambda: emb(ids).data.sum().backward(),
        "to_nested_jagged": x.to_nested_jagged,
        "nested softmax": lambda: ln.to_padded_tensor(ln.softmax(nt * 2, -1), 0.0).sum().backward(),
    }


@pytest.mark.parametrize("name", ["sequence_pool max", "Embedding", *(
    pytest.param(n, marks=pytest.mark.slow)
    for n in ("sequence_softmax", "sequence_pad/unpad", "to_nested_jagged", "nested softmax"))])
def test_torch_hot_ops_forward_backward_plateau(name):
    _assert_plateau(_traced_growth(_torch_ops()[name]))


def test_save_load_and_text_plateau(tmp_path):
    pytest.importorskip("pyarrow")
    from lodtensor.text import Vocab, batch

    x = lt.LoDTensor(np.random.default_rng(0).random((50, 4)).astype(np.float32), [[0, 2, 5], *LOD])
    path = str(tmp_path / "x.arrow")
    docs = [[["the", "cat"], ["sat"]], [["a", "dog"]]]
    vocab = Vocab.build(docs)

    def round_trip():
        lt.save(path, x)
        lt.load(path).tolist()
        batch(docs, vocab=vocab)

    _assert_plateau(_traced_growth(round_trip))


# -- caches stay bounded over many distinct LoDs -----------------------------------------------------------
def _tables():
    from lodtensor import _validate
    from lodtensor.backend import _placement
    from lodtensor.backend.numpy import _util
    from lodtensor.interop import _torch_base
    from lodtensor.nested import _symbolic

    return {"frozen": len(_placement._FROZEN), "facts": len(_placement._FACTS), "checked": len(_validate._CHECKED),
            "live sizes": len(_symbolic._LIVE), "jagged offsets": len(_torch_base._OWN_OFFSETS),
            "plans": len(_util._PLANS)}


def test_caches_do_not_grow_with_distinct_lods():
    """1,000 distinct LoDs through the ops that cache per LoD or per offsets: the process-wide tables come
    back to where they were once the LoDs are gone, and the plan cache stays within its budget meanwhile."""
    torch = pytest.importorskip("torch")
    from lodtensor.backend.numpy import _util

    rng = np.random.default_rng(0)
    data = rng.random((200, 8)).astype(np.float32)
    tdata = torch.from_numpy(data.copy())
    gc.collect()
    before = _tables()
    alive = []
    for i in range(1000):
        cuts = np.sort(rng.choice(np.arange(1, 200), size=1 + i % 40, replace=False))
        lod = [np.concatenate([[0], cuts, [200]])]
        t = lt.LoDTensor(data, lod)
        seq.sequence_pool(t, "max")
        seq.sequence_pad(t, np.float32(0))
        tt = lt.LoDTensor(tdata, lod)
        seq.sequence_pool(tt, "sum")
        tt.to_nested_jagged()
        assert t.to_nested().shape[0] == len(lod[0]) - 1
        if i % 10 == 0:
            alive.append(t)
        assert _util._PLANS.nbytes <= _util._PLANS.budget
    del t, tt, alive
    gc.collect()
    after = _tables()
    assert all(after[k] <= before[k] for k in before), (before, after)  # (fewer: older plans evicted)


# -- reference cycles: data dies with the last reference, without the garbage collector --------------------
def _cycle_cases():
    torch = pytest.importorskip("torch")
    from lodtensor import nn as lnn

    lstm = lnn.DynamicLSTM(4)

    def grad(fn):
        def use(d):
            y = fn(lt.LoDTensor(d, LOD))
            (y[0] if isinstance(y, tuple) else y).data.sum().backward()
            return y
        return use

    np16 = lambda: np.random.default_rng(0).random((50, 16)).astype(np.float32)  # noqa: E731
    leaf = lambda: torch.randn(50, 16, requires_grad=True)  # noqa: E731
    return {
        "sequence_pool": (np16, lambda d: seq.sequence_pool(lt.LoDTensor(d, LOD), "max")),
        "sequence_pad": (np16, lambda d: seq.sequence_pad(lt.LoDTensor(d, LOD), np.float32(0))),
        "getitem": (np16, lambda d: lt.LoDTensor(d, LOD)[1]),
        "ufunc": (np16, lambda d: np.exp(lt.LoDTensor(d, LOD))),
        "to_nested unbind": (np16, lambda d: lt.LoDTensor(d, LOD).to_nested().unbind()),
        "to_nested_jagged": (np16, lambda d: lt.LoDTensor(d, LOD).to_nested_jagged()),
        "to_arrow": (np16, lambda d: lt.LoDTensor(d, LOD).to_arrow()),
        "torch pool max backward": (leaf, grad(lambda t: seq.sequence_pool(t, "max"))),
        "torch pad backward": (leaf, grad(lambda t: seq.sequence_pad(t, torch.tensor(0.0)))),
        "lstm backward": (leaf, grad(lambda t: lstm(t)[0])),
        "nested backward": (leaf, lambda d: ln.to_padded_tensor(ln.softmax(ln.as_nested_tensor([d[:3], d[3:]]), -1),
                                                                0.0).sum().backward()),
    }


@pytest.mark.parametrize("name", ["sequence_pool", "sequence_pad", "getitem", "ufunc", "to_nested unbind",
                                  "to_nested_jagged", "to_arrow", "torch pool max backward", "torch pad backward",
                                  "lstm backward", "nested backward"])
def test_data_dies_without_the_garbage_collector(name):
    if name == "to_arrow":
        pytest.importorskip("pyarrow")
    make, use = _cycle_cases()[name]
    use(make())  # first calls import lazily (a frame held by an import's cycle is not ours)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        data = make()
        ref = weakref.ref(data)
        out = use(data)
        del out, data
        assert ref() is None, [type(r).__name__ for r in gc.get_referrers(ref())]
    finally:
        if enabled:
            gc.enable()


# -- views: shared (and kept alive) where the docs say view, fresh memory where they say copy ---------------
def test_views_share_and_keep_their_buffer():
    big = np.arange(6000, dtype=np.float32).reshape(2000, 3)
    t = lt.LoDTensor(big.copy(), [[0, 500, 2000]])
    t2 = lt.LoDTensor(big.copy(), [[0, 1, 2], [0, 500, 2000]])
    views = {"t[1]": t[1].data, "t[0:1]": t[0:1].data, "t2[1][0]": t2[1][0].data,
             "unbind": t.to_nested().unbind()[1], "to_tensor_list": t.to_nested().to_tensor_list()[1],
             "numpy()": t.numpy()}
    sources = {"t2[1][0]": t2.data}
    for name, v in views.items():
        assert np.shares_memory(v, sources.get(name, t.data)), name
    expect = {name: v.copy() for name, v in views.items()}
    del t, t2, sources
    gc.collect()
    junk = [np.ones(3000, np.float32) for _ in range(100)]  # memory freed too soon would be reused here
    for name, v in views.items():
        assert np.array_equal(v, expect[name]), name
    del junk


def test_copies_neither_share_nor_keep_the_input():
    rng = np.random.default_rng(0)
    n = 5_000
    offsets = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), 99, replace=False)), [n]])
    copies = {
        "to_padded": lambda t: t.to_padded()[0],
        "sequence_pad": lambda t: seq.sequence_pad(t, np.float32(0))[0],
        "sequence_pool first": lambda t: seq.sequence_pool(t, "first").data,
        "sequence_last_step": lambda t: seq.sequence_last_step(t).data,
        "sequence_slice": lambda t: seq.sequence_slice(t, np.zeros((100, 1), np.int64),
                                                       np.ones((100, 1), np.int64)).data,
        "deepcopy": lambda t: __import__("copy").deepcopy(t).data,
        "nested_tensor": lambda t: ln.nested_tensor(t.to_nested().unbind()).to_packed()[0],
        "clone": lambda t: t.to_nested().clone().to_packed()[0],
    }
    for name, fn in copies.items():
        data = rng.random((n, 4)).astype(np.float32)
        ref = weakref.ref(data)
        out = fn(lt.LoDTensor(data, [offsets]))
        assert not np.shares_memory(out, data), name
        del data
        gc.collect()
        assert ref() is None, name  # a small result keeps no reference to the input's buffer
        del out


# -- sanitizers and valgrind (slow; skipped without the tools) ----------------------------------------------
def _gcc_runtime(name):
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    path = subprocess.run([gcc, f"-print-file-name={name}"], capture_output=True, text=True, check=False).stdout
    path = path.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


@pytest.mark.slow
def test_compiled_kernels_clean_under_address_sanitizer(tmp_path):
    """The current sources built with ``-fsanitize=address,undefined`` (out of the tree) run every edge input
    of tests/_memory_drive.py without an out-of-bounds access, undefined behaviour or an oversized allocation."""
    asan, ubsan = _gcc_runtime("libasan.so"), _gcc_runtime("libubsan.so")
    include = sysconfig.get_paths()["include"]
    if asan is None or ubsan is None or not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("needs gcc with libasan and libubsan, and Python's headers")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    flags = (sysconfig.get_config_var("CFLAGS") or "").split()
    for name in ("_csegment", "_cpointwise"):
        cmd = ["gcc", *flags, "-fPIC", "-O3", "-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-I",
               include, "-shared", os.path.join(SOURCES, f"{name}.c"), "-o", str(tmp_path / f"{name}{suffix}"),
               "-lpthread"]
        built = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
        assert built.returncode == 0, built.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONMALLOC="malloc", LD_PRELOAD=f"{asan}:{ubsan}",
               ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    proc = subprocess.run([sys.executable, DRIVE, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=900, check=False)
    report = proc.stderr[-6000:]
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), report
    assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, report


_SUPPRESSIONS = """{
   cpython_address_in_range
   Memcheck:Cond
   fun:address_in_range
}
{
   cpython_address_in_range_value
   Memcheck:Value8
   fun:address_in_range
}
"""


@pytest.mark.slow
@compiled
def test_compiled_kernels_clean_under_valgrind(tmp_path):
    """The built modules under memcheck: no invalid access, uninitialised read or lost block with a frame in
    them (CPython's own reports are filtered out by frame)."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    supp = tmp_path / "python.supp"
    supp.write_text(_SUPPRESSIONS)
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONMALLOC="malloc")
    proc = subprocess.run(["valgrind", "--tool=memcheck", f"--suppressions={supp}", "--leak-check=full",
                           "--show-leak-kinds=definite", "--num-callers=40", sys.executable, DRIVE, "installed",
                           "--quick"], capture_output=True, text=True, env=env, timeout=1800, check=False)
    blocks, block = [], []
    for line in proc.stderr.splitlines():
        body = line.split("== ", 1)[-1] if line.startswith("==") else line
        if body.strip():
            block.append(body)
        elif block:
            blocks.append("\n".join(block))
            block = []
    ours = [b for b in blocks if ("_csegment" in b or "_cpointwise" in b) and ("Invalid" in b or "uninitialised" in b
                                                                              or "definitely lost" in b)]
    assert not ours, "\n\n".join(ours)[:6000]
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-4000:]
