"""The NumPy backend's pool of large output buffers (``lodtensor.backend._np_pool``).

A buffer must never be handed out again while anything refers to its memory
(a view, a slice, ``np.asarray``, a memoryview, a DLPack or torch export, an
out-of-band pickle buffer, a LoDTensor); the pool must stay within its bound,
work across threads and in a forked child, and kernels writing into reused
(dirty) buffers must give the results of fresh ones. The size thresholds are
lowered so that small arrays take the pooled path.
"""

import gc
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend import buffer_pool_info, set_buffer_pool, trim_buffer_pool
from lodtensor.backend.numpy import _pool as _np_pool
from lodtensor.backend.numpy import _tuning as np_tuning

pytestmark = pytest.mark.usefixtures("frozen_heap")  # gc.collect() scans only what the tests make

KIB = 1 << 10


@pytest.fixture
def small_pool(monkeypatch):
    """Pool arrays of 1 KiB and more, in 1 KiB grains, with a 1 MiB bound; emptied after."""
    monkeypatch.setattr(np_tuning, "POOL_MIN_BYTES", KIB)
    monkeypatch.setattr(np_tuning, "POOL_GRAIN", KIB)
    set_buffer_pool(1 << 20)
    trim_buffer_pool()
    yield
    gc.collect()
    set_buffer_pool(None)
    trim_buffer_pool()
    lt.set_num_threads(None)


def _addr(a):
    return a.__array_interface__["data"][0]


def _churn(n=6, shape=(64, 16)):
    """Take every block the pool would hand out for ``shape`` and scribble over it."""
    held = [_np_pool.empty(shape, np.float32) for _ in range(n)]
    for a in held:
        a.fill(-7.0)
    return held


def _exports(a):
    """Objects that refer to ``a``'s memory, each with a function reading it back as an array."""
    out = [
        ("view", a[1:], lambda v: np.concatenate([a_first, v])),
        ("slice step", a[::1], lambda v: v),
        ("asarray", np.asarray(a), lambda v: v),
        ("reshape", a.reshape(-1), lambda v: v.reshape(a_shape)),
        ("view dtype", a.view(np.int32), lambda v: v.view(np.float32)),
        ("memoryview", memoryview(a), np.asarray),
        ("dlpack", np.from_dlpack(a), lambda v: v),
        ("pickle buffer", pickle.PickleBuffer(a), lambda v: np.frombuffer(v.raw(), np.float32).reshape(a_shape)),
        ("lodtensor", lt.LoDTensor(a, [[0, 1, a.shape[0]]]), lambda v: v.data),
        ("subclass view", a.view(np.recarray), lambda v: v.view(np.ndarray)),
    ]
    a_first, a_shape = a[:1].copy(), a.shape
    return out


@pytest.mark.parametrize("kind", [e[0] for e in _exports(np.zeros((2, 2), np.float32))])
def test_a_buffer_is_not_reused_while_any_export_lives(small_pool, kind):
    a = _np_pool.empty((64, 16), np.float32)
    assert type(a) is np.ndarray and not a.flags.owndata
    a[...] = np.arange(a.size, dtype=np.float32).reshape(a.shape)
    expect = a.copy()
    name, ref, read = next(e for e in _exports(a) if e[0] == kind)
    addr = _addr(a)
    del a
    gc.collect()
    held = _churn()
    assert all(_addr(h) != addr for h in held)
    np.testing.assert_array_equal(read(ref), expect, err_msg=name)
    del ref, read
    gc.collect()
    assert buffer_pool_info()["idle_blocks"] >= 1  # the block came back once the export died
    again = [_np_pool.empty((64, 16), np.float32) for _ in range(8)]
    assert addr in {_addr(b) for b in again}, "the freed block is handed out again"
    del held, again


def test_a_block_reached_through_the_base_chain_is_not_reused(small_pool):
    """Code that walks ``.base`` to the memory's owner and keeps it (as some serializers and memory
    accounting do) holds the raw block itself: the pool must not hand it out again."""
    a = _np_pool.empty((64, 16), np.float32)
    a.fill(2.5)
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    owner = np.asarray(root).view(np.uint8)  # what such code keeps: the owner's memory
    del a
    gc.collect()
    held = _churn(8)
    assert not any(np.shares_memory(owner, h) for h in held)
    np.testing.assert_array_equal(owner[: 64 * 16 * 4].view(np.float32), np.full(64 * 16, 2.5, np.float32))
    del owner, root, held
    gc.collect()
    again = _churn(2)  # the pool goes on working once the block has been let go
    assert buffer_pool_info()["leased_bytes"] >= 2 * 64 * 16 * 4
    del again


def test_a_block_given_back_while_its_array_still_lives_is_not_reused(small_pool):
    """A lease finalized but still alive (a garbage-collection finalizer that resurrected it, run here by
    hand) has given its block back: the pool must see the live views and not hand the block out."""
    a = _np_pool.empty((64, 16), np.float32)
    a.fill(4.0)
    a.base.__del__()
    assert buffer_pool_info()["idle_blocks"] == 1
    held = _churn(4)
    assert not any(np.shares_memory(a, h) for h in held)
    assert (a == 4.0).all()
    del held


def test_bad_sizes_are_named():
    for bad in ("inf", "-inf", "nan", "1e400"):
        with pytest.raises(ValueError, match=r"set_buffer_pool\(\): max_bytes must be"):
            set_buffer_pool(bad)


def test_torch_exports_keep_the_buffer(small_pool):
    torch = pytest.importorskip("torch")
    for make in (torch.from_numpy, torch.from_dlpack, torch.as_tensor):
        a = _np_pool.empty((64, 16), np.float32)
        a[...] = 3.5
        t = make(a)
        addr = _addr(a)
        del a
        gc.collect()
        held = _churn()
        assert all(_addr(h) != addr for h in held)
        assert bool((t == 3.5).all()), make.__name__
        del t, held


def test_pickle_copies_and_round_trips(small_pool):
    a = _np_pool.empty((64, 16), np.float32)
    a[...] = 1.25
    back = pickle.loads(pickle.dumps(a, protocol=5))
    del a
    _churn()
    assert back.flags.owndata or back.base is not None
    np.testing.assert_array_equal(back, np.full((64, 16), 1.25, np.float32))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["new", "view", "drop", "write"]), st.integers(0, 50),
                          st.integers(1, 5)), min_size=1, max_size=40))
def test_live_arrays_never_share_memory(ops):
    """Random programs of allocations, views, drops and writes: every live array keeps its contents."""
    saved = (np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN)
    np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN = KIB, KIB
    set_buffer_pool(64 * KIB)
    try:
        shadows, live = {}, []  # shadows: root -> a plain copy; live: (array, root, its slice of the root)
        for step, (op, pick, rows) in enumerate(ops):
            if op == "new" or not live:
                a = _np_pool.empty((rows * 64, 4), np.float32)
                a.fill(step)
                shadows[step] = np.full(a.shape, step, np.float32)
                live.append((a, step, lambda s: s))
            elif op == "view":
                a, root, part = live[pick % len(live)]
                if len(a) > 1:
                    live.append((a[1:], root, lambda s, part=part: part(s)[1:]))
                else:
                    live.append((a.reshape(-1), root, lambda s, part=part: part(s).reshape(-1)))
            elif op == "drop":
                live.pop(pick % len(live))
            else:
                a, root, part = live[pick % len(live)]
                a[...] = step + 0.5
                part(shadows[root])[...] = step + 0.5
            for a, root, part in live:
                np.testing.assert_array_equal(a, part(shadows[root]))
        for i, (a, root_a, _) in enumerate(live):
            for b, root_b, _ in live[i + 1:]:
                if root_a != root_b:
                    assert not np.shares_memory(a, b)
    finally:
        del live
        gc.collect()
        np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN = saved
        set_buffer_pool(None)
        trim_buffer_pool()


def test_bound_trim_and_off(small_pool):
    set_buffer_pool(100 * KIB)
    arrays = [_np_pool.empty((40 * KIB // 4,), np.float32) for _ in range(5)]
    assert buffer_pool_info()["leased_bytes"] == 5 * 40 * KIB
    del arrays
    info = buffer_pool_info()
    assert info["idle_bytes"] <= 100 * KIB and info["idle_blocks"] == 2 and info["leased_bytes"] == 0
    set_buffer_pool(50 * KIB)  # lowering the bound frees blocks at once
    assert buffer_pool_info()["idle_bytes"] == 40 * KIB
    trim_buffer_pool()
    assert buffer_pool_info()["idle_bytes"] == 0
    set_buffer_pool(0)  # off: plain np.empty
    a = _np_pool.empty((40 * KIB,), np.float32)
    assert a.flags.owndata and buffer_pool_info()["leased_bytes"] == 0
    set_buffer_pool("2M")
    assert _np_pool.get_buffer_pool() == 2 << 20
    small = _np_pool.empty((16,), np.float32)  # under POOL_MIN_BYTES: never pooled
    assert small.flags.owndata


def test_block_larger_than_the_bound_is_freed(small_pool):
    set_buffer_pool(4 * KIB)
    a = _np_pool.empty((8 * KIB,), np.uint8)
    del a
    assert buffer_pool_info()["idle_bytes"] == 0


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match=r"set_buffer_pool\(\): max_bytes must be a size in bytes.*'lots'"):
        set_buffer_pool("lots")
    with pytest.raises(TypeError, match=r"set_buffer_pool\(\): max_bytes must be an integer.*float 1.5"):
        set_buffer_pool(1.5)
    with pytest.raises(ValueError, match=r"max_bytes must be >= 0 bytes, got -1"):
        set_buffer_pool(-1)
    assert _np_pool.get_buffer_pool() == _np_pool._default_bytes()


@pytest.mark.parametrize("value,expect", [("off", "0"), ("0", "0"), ("512M", str(512 << 20)), ("1g", str(1 << 30)),
                                          ("1048576", "1048576"), ("1.5K", "1536")])
def test_environment_variable(value, expect):
    code = "from lodtensor.backend import get_buffer_pool; print(get_buffer_pool())"
    env = dict(os.environ, LODTENSOR_BUFFER_POOL=value, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expect


def test_bad_environment_variable_is_named():
    code = "from lodtensor.backend import get_buffer_pool; get_buffer_pool()"
    env = dict(os.environ, LODTENSOR_BUFFER_POOL="huge", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "LODTENSOR_BUFFER_POOL must be a size in bytes" in out.stderr


def test_threads_allocate_and_free_concurrently(small_pool):
    errors = []

    def worker(k):
        try:
            for step in range(200):
                a = _np_pool.empty((64 + k % 3, 16), np.float32)
                a.fill(k * 1000 + step)
                b = a[::2]
                threading.Event().wait(0) if step % 7 == 0 else None
                if not (a == k * 1000 + step).all() or not (b == k * 1000 + step).all():
                    errors.append((k, step))
                del a, b
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    info = buffer_pool_info()
    assert info["leased_bytes"] == 0 and info["idle_bytes"] <= info["limit"]


def test_a_block_freed_while_the_lock_is_held_waits_and_comes_back(small_pool):
    a = _np_pool.empty((64, 16), np.float32)
    with _np_pool._lock:  # as when a garbage collection runs inside the pool's own critical section
        del a
        assert len(_np_pool._pending) == 1
    assert buffer_pool_info()["idle_blocks"] == 1 and not _np_pool._pending


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_pool_works_in_a_forked_child(small_pool):
    keep = _np_pool.empty((64, 16), np.float32)
    keep.fill(2.0)
    spare = _np_pool.empty((64, 16), np.float32)
    del spare  # an idle block at fork time
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = buffer_pool_info()["idle_blocks"] == 0
        arrays = [_np_pool.empty((64, 16), np.float32) for _ in range(3)]
        for i in range(3):
            arrays[i].fill(i)
        ok = ok and (keep == 2.0).all() and all((arrays[i] == i).all() for i in range(3))
        del arrays, keep
        ok = ok and buffer_pool_info()["leased_bytes"] == 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (keep == 2.0).all()


# -- kernels writing into reused (dirty) buffers ------------------------------------------------
def _kernels(data, lengths):
    import lodtensor.nested as ln  # noqa: PLC0415

    t = lt.LoDTensor(data, recursive_sequence_lengths=[lengths])
    padded, _ = t.to_padded()
    w = np.linspace(-1, 1, data.shape[1] * 3, dtype=np.float32).reshape(3, data.shape[1])
    nt = ln.nested_tensor_from_jagged(data, np.concatenate([[0], np.cumsum(lengths)]))
    return {
        "relu": lambda: np.maximum(t, 0).data,
        "exp": lambda: np.exp(t).data,
        "add": lambda: (t + t).data,
        "softmax": lambda: S.sequence_softmax(lt.LoDTensor(data[:, :1].copy(), t.lod)).data,
        "softmax wide span": lambda: S.sequence_softmax(lt.LoDTensor(data[:, :1] * 100, t.lod)).data,
        "unpad": lambda: lt.from_padded(padded, lengths).data,
        "pad": lambda: t.to_padded()[0],
        "pad -1": lambda: t.to_padded(pad_value=-1.0)[0],
        "pad maxlen": lambda: t.to_padded(maxlen=12)[0],
        "linear": lambda: np.asarray(ln.linear(nt, w, np.float32([1, 2, 3])).values()),
        "nested relu": lambda: np.asarray(ln.relu(nt).values()),
        "nested gelu": lambda: np.asarray(ln.gelu(nt).values()),
        "nested exp": lambda: np.asarray(np.exp(nt).values()),
        "nested sigmoid": lambda: np.asarray(ln.sigmoid(nt).values()),
        "nested layer_norm": lambda: np.asarray(ln.layer_norm(nt, (data.shape[1],)).values()),
    }


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=30), st.integers(1, 6))
def test_kernels_into_dirty_pooled_buffers_equal_fresh_ones_bit_for_bit(lens, width):
    """Every pooled kernel, threaded (3 threads) and on one thread, pool on and off: the same bits."""
    saved = (np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN, np_tuning.UFUNC_PARALLEL_BYTES,
             np_tuning.SPECIAL_PARALLEL_MIN, np_tuning.MIN_PARALLEL_BYTES, np_tuning.SOFTMAX_PARALLEL_BYTES,
             np_tuning.UFUNC_BLOCK_ELEMENTS)
    np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN = 64, 64
    np_tuning.UFUNC_PARALLEL_BYTES = np_tuning.MIN_PARALLEL_BYTES = np_tuning.SOFTMAX_PARALLEL_BYTES = 0
    np_tuning.SPECIAL_PARALLEL_MIN = 0
    np_tuning.UFUNC_BLOCK_ELEMENTS = 7
    try:
        data = np.random.default_rng(len(lens) * 7 + width).standard_normal((sum(lens), width)).astype(np.float32)
        results = {}
        for pool_bytes, threads in [(0, 1), (1 << 20, 1), (1 << 20, 3), (0, 3)]:
            set_buffer_pool(pool_bytes)
            lt.set_num_threads(threads)
            for name, call in _kernels(data, lens).items():
                first = call()
                like = (first.shape, first.dtype)
                del first
                for _ in range(2):  # into blocks of the result's size, scribbled over
                    dirty = [_np_pool.empty(*like) for _ in range(2)]
                    for d in dirty:
                        d.fill(np.nan)
                    del dirty
                    got = np.array(call(), copy=True)
                    ref = results.setdefault(name, got)
                    assert got.dtype == ref.dtype and np.array_equal(got, ref), (name, pool_bytes, threads)
    finally:
        (np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN, np_tuning.UFUNC_PARALLEL_BYTES, np_tuning.SPECIAL_PARALLEL_MIN,
         np_tuning.MIN_PARALLEL_BYTES,
         np_tuning.SOFTMAX_PARALLEL_BYTES, np_tuning.UFUNC_BLOCK_ELEMENTS) = saved
        lt.set_num_threads(None)
        set_buffer_pool(None)
        trim_buffer_pool()


def test_large_relu_uses_the_pool_and_gives_the_block_back():
    trim_buffer_pool()
    x = lt.LoDTensor(np.ones((1 << 16, 64), np.float32), [[0, 1 << 16]])  # 16 MiB
    before = buffer_pool_info()
    y = np.maximum(x, 0)
    assert buffer_pool_info()["leased_bytes"] >= before["leased_bytes"] + y.data.nbytes
    del y
    assert buffer_pool_info()["idle_bytes"] >= x.data.nbytes
    z = np.maximum(x, 0)
    assert buffer_pool_info()["hits"] > before["hits"]
    np.testing.assert_array_equal(z.data, x.data)
    del z
    trim_buffer_pool()


# -- softmax of narrow rows with one shared shift ----------------------------------------------
def _softmax_reference(x, offsets):
    out = np.empty(x.shape, np.float64)
    for a, b in zip(offsets[:-1], offsets[1:]):  # a loop over sequences: a reference, not a kernel
        e = np.exp(x[a:b].astype(np.float64) - x[a:b].astype(np.float64).max(axis=0))
        out[a:b] = e / e.sum(axis=0)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=20), st.integers(1, 3),
       st.sampled_from([0.1, 5.0, 7.9, 20.0, 31.9, 40.0, 300.0]), st.sampled_from([np.float32, np.float64]))
def test_narrow_softmax_matches_the_per_sequence_shift(lens, width, scale, dtype):
    """Values spanning less than the shared-shift limit (16 for float32, 64 for float64) and more:
    within the rounding of ``x - shift`` of the float64 per-sequence result, even for sequences far
    below the largest value."""
    g = np.random.default_rng(len(lens) * 31 + width)
    x = (g.uniform(-1, 1, (sum(lens), width)) * scale).astype(dtype)
    t = lt.LoDTensor(x, recursive_sequence_lengths=[lens])
    got = S.sequence_softmax(t).data
    offsets = np.concatenate([[0], np.cumsum(lens)])
    ref = _softmax_reference(x, offsets)
    # x - shift rounds to half an ulp of the span, for the per-sequence shift and the shared one alike
    tol = 4 * np.finfo(dtype).eps * (1 + float(x.max() - x.min()))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=tol, atol=4 * np.finfo(dtype).tiny)  # below: 0 for any method


def test_narrow_softmax_with_nan_and_inf_keeps_other_sequences_exact():
    x = np.array([[1.0], [np.nan], [2.0], [1000.0], [-np.inf], [0.0], [3.0], [3.0]], np.float32)
    t = lt.LoDTensor(x, [[0, 2, 4, 6, 8]])
    got = S.sequence_softmax(t).data[:, 0]
    assert np.isnan(got[:2]).all()
    np.testing.assert_allclose(got[2:], [0.0, 1.0, 0.0, 1.0, 0.5, 0.5], rtol=1e-6, atol=1e-30)
