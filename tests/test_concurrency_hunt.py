"""Thread schedules and processes against the kernels, caches and loaders.

Every check that could hang runs in a subprocess with a timeout, or joins its threads with a timeout
and asserts they finished, so a hang fails instead of blocking the suite.
"""

import copy
import gc
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend import _threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code, timeout=60):
    """Run ``code`` in a fresh interpreter (so first uses are real); its stdout, failing on a hang or an error."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"hung (killed after {timeout} s): {err.stdout!r} {err.stderr!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _join(threads, timeout):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "threads still running: a hang"


# -- the plan cache: a weak reference's callback inside a garbage collection ------------------------------

def test_plan_cache_callback_during_gc_in_a_locked_section_does_not_deadlock():
    # A LoD's offsets array that dies in a garbage collection started inside the plan cache's own locked section
    # (any allocation there may start one) pops its plan from the cache on the same thread: with a plain Lock
    # that waited for itself for ever (two threads, 3000 plans each: hung every run).
    out = _run("""
        import gc, threading, numpy as np
        from lodtensor.backend.numpy._util import _cached_plan

        class Holder:  # a reference cycle, so the offsets die in a collection
            pass

        def churn(seed):
            for i in range(3000):
                h = Holder(); h.self = h
                h.off = np.array([0, 2, 5 + i], dtype=np.int64)
                _cached_plan(h.off, ("k", seed), lambda o: o.copy())
                del h

        gc.set_threshold(3)
        ts = [threading.Thread(target=churn, args=(s,), daemon=True) for s in range(2)]
        for t in ts: t.start()
        for t in ts: t.join(20)
        print("hung" if any(t.is_alive() for t in ts) else "ok")
    """)
    assert out.split() == ["ok"]


def test_lod_offsets_die_with_their_lod():
    # LoD.on() recorded the "longest" fact of its NumPy offsets array in a closure over the array itself, kept in
    # a module table that drops an entry only when the array dies: every LoD's offsets ever pooled lived for ever
    # (3000 batches: 3000 arrays and table entries left).
    from lodtensor.backend import _placement

    gc.collect()
    before = len(_placement._FACTS)
    refs = []
    for i in range(50):
        t = lt.LoDTensor(np.ones((9 + i, 2), np.float32), recursive_sequence_lengths=[[3, 6 + i]])
        S.sequence_pool(t, "max")
        refs.append(weakref.ref(t.lod.absolute_offsets(0)))
        del t
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    assert len(_placement._FACTS) <= before
    # the fact itself still answers while the array lives
    lod = lt.LoD([[0, 2, 7, 7]])
    offsets = lod.on(lt.get_backend("numpy"), "offsets")
    assert _placement.frozen_fact(offsets, "longest") == 5


# -- set_lod on one thread while others read the tensor ----------------------------------------------------

_A = [[0, 2, 3], [0, 4, 4, 12]]
_B = [[0, 1, 2, 3, 4], [0, 1, 3, 6, 12]]


def _readers():
    as_pair = lambda u: (u.lod(), u.numpy().tolist())  # noqa: E731
    return {
        "int": lambda t: as_pair(t[1]),
        "negative": lambda t: as_pair(t[-1]),
        "slice": lambda t: as_pair(t[0:3]),
        "step": lambda t: as_pair(t[::2]),
        "array": lambda t: as_pair(t[np.array([-1, 0])]),
        "unbind": lambda t: [as_pair(u) for u in t.unbind()],
        "tolist": lambda t: t.tolist(),
        "pool": lambda t: as_pair(S.sequence_pool(t, "sum")),
        "ufunc": lambda t: as_pair(np.add(t, 1)),
        "pickle": lambda t: as_pair(pickle.loads(pickle.dumps(t))),
    }


def test_readers_see_the_old_or_the_new_lod_never_a_mix():
    # t[i] (its cached split), t[a:b], t[::k], t[array] and unbind() read the lod more than once: a set_lod() on
    # another thread in between gave rows of one lod under the other (t[0:3] as 3 of B's sequences cut by A's
    # count), or IndexError from numpy inside LoD.select.
    data = np.arange(24, dtype=np.float32).reshape(12, 2)
    readers = _readers()
    expected = {k: (repr(f(lt.LoDTensor(data, _A))), repr(f(lt.LoDTensor(data, _B)))) for k, f in readers.items()}
    shared = lt.LoDTensor(data, _A)
    stop = time.monotonic() + 2.5
    bad = []

    def writer():
        i = 0
        while time.monotonic() < stop:
            if i % 4 < 2:
                shared.set_lod(_B if i % 2 else _A)
            else:
                shared.set_recursive_sequence_lengths([[1, 1, 1, 1], [1, 2, 3, 6]] if i % 2 else [[2, 1], [4, 0, 8]])
            i += 1

    def reader(name):
        f = readers[name]
        while time.monotonic() < stop and len(bad) < 10:
            try:
                got = repr(f(shared))
            except Exception as err:  # noqa: BLE001 - collected and reported below
                bad.append((name, repr(err)))
                continue
            if got not in expected[name]:
                bad.append((name, got))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=writer, daemon=True)]
        threads += [threading.Thread(target=reader, args=(k,), daemon=True) for k in readers]
        for t in threads:
            t.start()
        _join(threads, 30)
    finally:
        sys.setswitchinterval(interval)
    assert not bad, bad[:3]


# -- the Python thread pool: interrupts and callbacks --------------------------------------------------------

class _Interrupt(Exception):
    pass


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals: the main thread")
def test_run_together_waits_for_its_helpers_when_the_wait_is_interrupted():
    # A signal (Ctrl-C) while the caller waited for its helpers raised at once, the helpers still running and
    # writing the output: "no thread still writes an output once the caller sees the error" did not hold.
    finished = []

    def helper():
        time.sleep(0.8)
        finished.append(1)

    def handler(signum, frame):
        raise _Interrupt

    previous_threads = lt.get_num_threads()
    old = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        lt.set_num_threads(3)
        timer.start()
        with pytest.raises(_Interrupt):
            _threads.run_together(lambda: None, [helper, lambda: None])
            time.sleep(2)  # (a slow machine: the signal came after the call; the test then checks nothing more)
        assert finished == [1]
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, old)
        lt.set_num_threads(previous_threads)


def test_error_callback_running_a_threaded_op_does_not_deadlock():
    # np.errstate(call=fn) runs fn on the pool's threads (the error state travels with the task); an fn that ran a
    # large lodtensor op split over the pool waited on the pool from its only worker: for ever.
    out = _run("""
        import threading, numpy as np
        import lodtensor as lt
        from lodtensor.backend.numpy import _tuning
        _tuning.UFUNC_PARALLEL_BYTES = 4096; _tuning.UFUNC_BLOCK_ELEMENTS = 256
        lt.set_num_threads(2)
        x = lt.LoDTensor(-np.ones((4000, 4)), [[0, 1000, 4000]])
        y = lt.LoDTensor(np.ones((4000, 4)), [[0, 1000, 4000]])
        sums = []
        def callback(kind, flag):
            sums.append(float(np.sqrt(y).numpy().sum()))
        def main():
            with np.errstate(invalid="call", call=callback):
                np.sqrt(x)
        t = threading.Thread(target=main, daemon=True); t.start(); t.join(20)
        print("hung" if t.is_alive() else "ok", len(sums) > 0 and set(sums) == {16000.0})
    """)
    assert out.split() == ["ok", "True"]


# -- kernels on many threads while the thread count changes -----------------------------------------------

_STRESS = """
    import random, sys, threading, time
    import numpy as np
    import lodtensor as lt
    from lodtensor import sequence as S
    from lodtensor.backend.numpy import _tuning
    # small thresholds: the C pool and the Python pool serve these small inputs
    for name in ("COMPILED_PARALLEL_BYTES", "MIN_PARALLEL_BYTES", "CHUNK_PARALLEL_BYTES", "PIECES_PARALLEL_BYTES",
                 "RELU_PARALLEL_BYTES", "GELU_PARALLEL_BYTES", "SOFTMAX_PARALLEL_BYTES", "UFUNC_PARALLEL_BYTES",
                 "SPECIAL_PARALLEL_MIN"):
        setattr(_tuning, name, 2048)
    _tuning.UFUNC_BLOCK_ELEMENTS = 512; _tuning.SPECIAL_BLOCK = 1024
    sys.setswitchinterval(1e-6)
    be = lt.get_backend("numpy")
    def make(seed):
        r = np.random.default_rng(seed)
        lens = r.integers(0, 40, size=60)
        data = r.standard_normal((int(lens.sum()), 24)).astype(np.float32)
        return lt.LoDTensor(data, recursive_sequence_lengths=[lens.tolist()])
    floats = [make(s) for s in range(3)]
    ints = [lt.LoDTensor((t.numpy()[:, :3] * 50).astype(np.int32), lod=t.lod()) for t in floats]
    doubles = [lt.LoDTensor(t.numpy()[:, :5].astype(np.float64), lod=t.lod()) for t in floats]
    def ops(i):
        t, ti, td = floats[i], ints[i], doubles[i]
        out = [S.sequence_pool(t, p).numpy() for p in ("sum", "max", "min", "average", "sqrt", "first", "last")]
        out += [S.sequence_pool(ti, "sum").numpy(), S.sequence_pool(ti, "max").numpy(),
                S.sequence_pool(td, "max").numpy(), S.sequence_pool(td, "sum").numpy()]
        out.append(S.sequence_softmax(lt.LoDTensor(t.numpy()[:, :1].copy(), lod=t.lod())).numpy())
        out += [be.relu(t.numpy()), be.gelu(t.numpy(), "none"), be.gelu(t.numpy(), "tanh"),
                np.maximum(t, 0).numpy(), np.exp(t.numpy())]
        padded, lengths = S.sequence_pad(t, np.float32(0))
        out += [np.asarray(padded.numpy()), S.sequence_unpad(padded, lengths).numpy()]
        return [a.tobytes() for a in out]
    lt.set_num_threads(1)
    ref = [ops(i) for i in range(3)]
"""


def test_kernels_on_many_threads_while_set_num_threads_changes_are_bit_identical():
    out = _run(_STRESS + """
    stop = time.time() + 3
    bad = []
    def worker(k):
        r = random.Random(k)
        try:
            while time.time() < stop:
                i = r.randrange(3)
                if ops(i) != ref[i]:
                    bad.append(k)
        except BaseException as err:
            bad.append(repr(err))
    def toggler():
        r = random.Random(99)
        while time.time() < stop:
            lt.set_num_threads(r.choice([1, 2, 3, 4, 8, 16, 64, 100, None]))
            time.sleep(r.random() * 1e-3)
    ts = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(12)]
    ts.append(threading.Thread(target=toggler, daemon=True))
    for t in ts: t.start()
    for t in ts: t.join(60)
    print("alive", sum(t.is_alive() for t in ts), "bad", len(bad), bad[:3])
    """, timeout=120)
    assert out.split()[:4] == ["alive", "0", "bad", "0"], out


def test_fork_while_threads_run_kernels_then_kernels_in_the_child():
    out = _run(_STRESS + """
    import os
    lt.set_num_threads(4)
    stop = time.time() + 30
    def worker(k):
        while time.time() < stop:
            ops(k % 3)
    ts = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for t in ts: t.start()
    results = []
    for n in range(6):
        time.sleep(0.02 * n)
        pid = os.fork()
        if pid == 0:
            try:
                good = True
                for threads in (4, 64):
                    lt.set_num_threads(threads)
                    good = good and all(ops(i) == ref[i] for i in range(3))
            except BaseException:
                os._exit(2)
            os._exit(0 if good else 1)
        deadline = time.time() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                results.append(os.waitstatus_to_exitcode(status)); break
            if time.time() > deadline:
                os.kill(pid, 9); os.waitpid(pid, 0); results.append("hung"); break
            time.sleep(0.005)
    stop = 0
    print(results)
    """, timeout=180)
    assert out.strip() == str([0] * 6), out


# -- first use from many threads at once, in a fresh interpreter ---------------------------------------------

def test_first_use_from_many_threads_at_once():
    code = """
        import sys, threading
        sys.setswitchinterval(1e-6)
        import numpy as np
        import lodtensor as lt
        from lodtensor import sequence as S
        data = np.arange(40, dtype=np.float32).reshape(20, 2)
        def job(k):
            t = lt.LoDTensor(data, recursive_sequence_lengths=[[3, 0, 7, 10]])
            kind = k % 6
            if kind == 0:
                return S.sequence_pool(t.to_torch(), "max").data.numpy().tolist()
            if kind == 1:
                return S.sequence_softmax(lt.LoDTensor(data[:, :1].copy(), lod=t.lod())).numpy().tolist()
            if kind == 2:
                return [np.asarray(a).tolist() for a in t.to_padded()]
            if kind == 3:
                from lodtensor.text import Vocab, batch
                return batch([[["a", "b"], ["c"]]], vocab=Vocab(["a", "b", "c"])).tolist()
            if kind == 4:
                return S.sequence_pool(t, "sum").numpy().tolist()
            return lt.get_backend("torch").name
        N = 12
        if sys.argv[-1] == "one":
            print(repr([job(k) for k in range(N)])); sys.exit()
        barrier = threading.Barrier(N)
        res = [None] * N
        def run(k):
            barrier.wait()
            try:
                res[k] = job(k)
            except BaseException as err:
                res[k] = "error " + repr(err)
        ts = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(N)]
        for t in ts: t.start()
        for t in ts: t.join(60)
        print(repr(res))
    """
    alone = _run(code.replace('sys.argv[-1] == "one"', "True"), timeout=120)
    together = _run(code, timeout=120)
    assert together == alone


# -- DataLoader workers -------------------------------------------------------------------------------------

def _samples():
    r = random.Random(0)
    docs = [[[r.randrange(100) for _ in range(r.randrange(1, 6))] for _ in range(r.randrange(1, 4))]
            for _ in range(120)]
    return [(d, i % 3) for i, d in enumerate(docs)], [sum(map(len, d)) for d in docs]


def _loader_batches(workers, context=None, backend="numpy", epochs=1, persistent=False):
    torch_data = pytest.importorskip("torch.utils.data")
    from lodtensor.text import BucketBatchSampler, make_collate

    samples, lengths = _samples()
    loader = torch_data.DataLoader(
        samples, batch_sampler=BucketBatchSampler(lengths, 16, seed=3), collate_fn=make_collate(backend=backend),
        num_workers=workers, multiprocessing_context=context if workers else None,
        persistent_workers=persistent and workers > 0, timeout=60 if workers else 0)
    out = []
    for _ in range(epochs):
        for x, y in loader:
            out.append((x.lod(), np.asarray(x.data).tolist(), np.asarray(y).tolist(), type(x.data).__module__))
    return out


def test_bucket_sampler_gives_the_same_batches_with_worker_processes():
    # DataLoader with workers calls iter(batch_sampler) twice per epoch and reads only the second iterator; the
    # sampler drew its shuffle at iter() time, so with workers every epoch got other batches than with
    # num_workers=0 (torch's own samplers draw at the first next(), and agree).
    alone = _loader_batches(0, epochs=2)
    assert _loader_batches(2, "fork", epochs=2, persistent=True) == alone
    assert _loader_batches(2, "fork", epochs=2) == alone
    assert _loader_batches(2, "fork", backend="torch") == _loader_batches(0, backend="torch")


def test_bucket_sampler_draws_per_epoch_at_first_batch():
    from lodtensor.text import BucketBatchSampler

    sampler = BucketBatchSampler([5, 1, 4, 2, 3, 6, 7, 8], batch_size=2, seed=0)
    other = BucketBatchSampler([5, 1, 4, 2, 3, 6, 7, 8], batch_size=2, seed=0)
    iter(sampler)  # an iterator never read draws nothing
    first, second = list(sampler), list(sampler)
    assert first == list(other) and second == list(other)
    assert sorted(i for b in first for i in b) == list(range(8))


def test_worker_error_propagates_with_its_message():
    torch_data = pytest.importorskip("torch.utils.data")
    from lodtensor.text import make_collate

    samples, _ = _samples()
    bad = samples[:5] + [([[1]], 0, "extra")] + samples[5:10]
    loader = torch_data.DataLoader(bad, batch_size=4, collate_fn=make_collate(), num_workers=2,
                                   multiprocessing_context="fork", timeout=60)
    with pytest.raises(ValueError, match="every sample must have the same items"):
        list(loader)


@pytest.mark.slow
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_loader_workers_by_spawn_and_forkserver(context):
    assert _loader_batches(2, context, epochs=2, persistent=True) == _loader_batches(0, epochs=2)
    samples, _ = _samples()
    torch_data = pytest.importorskip("torch.utils.data")
    from lodtensor.text import make_collate

    loader = torch_data.DataLoader(samples[:3] + [([[1]], 0, "extra")], batch_size=4, collate_fn=make_collate(),
                                   num_workers=2, multiprocessing_context=context, timeout=60)
    with pytest.raises(ValueError, match="every sample must have the same items"):
        list(loader)


def _pool_then_index(t):
    return S.sequence_pool(t, "sum"), t[-1], t.lod()


@pytest.mark.slow
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_lodtensors_as_arguments_of_worker_processes(context):
    import multiprocessing

    tensors = [lt.LoDTensor(np.arange(24, dtype=np.float32).reshape(12, 2) * k, _A) for k in range(3)]
    tensors.append(lt.LoDTensor(np.arange(6.0)[::2], [[0, 1, 3]]))  # strided data
    pytest.importorskip("torch")
    tensors.append(copy.copy(tensors[0]).to_torch())
    with multiprocessing.get_context(context).Pool(2) as pool:
        got = pool.map_async(_pool_then_index, tensors).get(timeout=120)
    for (total, last, lod), t in zip(got, tensors):
        want_total, want_last, _ = _pool_then_index(t)
        assert lod == t.lod() and total.lod() == want_total.lod() and last.lod() == want_last.lod()
        assert type(total.data) is type(want_total.data)
        assert np.array_equal(np.asarray(total.data), np.asarray(want_total.data))
        assert np.array_equal(np.asarray(last.data), np.asarray(want_last.data))
