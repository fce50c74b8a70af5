"""Thread schedules against lodtensor's shared state: no schedule may crash, hang or silently corrupt.

Each scenario lines its threads up (``threading.Barrier``) or runs them against a thread that
changes shared state, many times over, and compares every result with a one-thread run. The
interpreter's switch interval is cut to a microsecond (``fast_switching``) so that races across
GIL releases and check-then-act sequences in Python code show within a few hundred calls. First
uses (of a backend, of a lazily built class or table, of torch._dynamo) run in a fresh interpreter.
"""

import gc
import os
import pickle
import queue
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import sequence as S
from lodtensor.backend import buffer_pool_info, get_backend, set_buffer_pool, set_compiled_kernels, trim_buffer_pool
from lodtensor.backend.numpy import _chunks
from lodtensor.backend.numpy import _pool as _np_pool
from lodtensor.backend.numpy import _tuning as np_tuning
from lodtensor.nn import functional as NF
from lodtensor.ops import reduce as _reduce

_LOW = ("UFUNC_PARALLEL_BYTES", "MIN_PARALLEL_BYTES", "SOFTMAX_PARALLEL_BYTES", "CHUNK_PARALLEL_BYTES",
        "SPECIAL_PARALLEL_MIN", "COMPILED_PARALLEL_BYTES", "RELU_PARALLEL_BYTES", "PIECES_PARALLEL_BYTES")


@pytest.fixture
def fast_switching():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.fixture
def low_thresholds(monkeypatch):
    """Every NumPy kernel takes its threaded path, even on small inputs."""
    for name in _LOW:
        monkeypatch.setattr(np_tuning, name, 0)
    monkeypatch.setattr(np_tuning, "UFUNC_BLOCK_ELEMENTS", 97)
    yield
    lt.set_num_threads(None)


def _run_threads(target, n, *args):
    """``target(k, *args)`` on ``n`` threads; the errors they raised."""
    errors = []

    def run(k):
        try:
            target(k, *args)
        except BaseException as err:  # noqa: BLE001 - reported to the test
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    return errors


def _fresh_python(code, timeout=240):
    """Run ``code`` in a new interpreter (first uses happen there); its stdout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


# -- first uses from many threads at once -------------------------------------------------------
def _first_use_on_eight_threads(setup, first_use, check):
    """Eight threads of a new interpreter make ``first_use`` (an expression) at once, after ``setup``;
    prints how many distinct objects they got and ``check`` (an expression over ``got``)."""
    return _fresh_python(f"""
        import threading
        {setup}
        bar = threading.Barrier(8)
        got = []
        def ask():
            bar.wait()
            got.append({first_use})
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(len({{id(x) for x in got}}), {check})
    """).split()


def test_first_get_backend_from_many_threads_gives_one_backend():
    """``get_backend("torch")`` builds the backend on first use: eight threads asking at once got eight
    different backends (``backend_of(w) is not be`` then held for two torch arrays)."""
    pytest.importorskip("torch")
    out = _first_use_on_eight_threads("from lodtensor import get_backend", 'get_backend("torch")',
                                      'all(b is get_backend("torch") for b in got)')
    assert out == ["1", "True"]


def test_parquet_corpus_class_made_once_when_threads_ask_at_once():
    """``lodtensor.text.ParquetCorpus`` is made on first use (it subclasses torch's IterableDataset):
    threads asking at once each made a class of their own, and all but one could not be pickled
    (a DataLoader with spawned workers pickles the dataset)."""
    pytest.importorskip("torch")
    out = _first_use_on_eight_threads("import pickle; import lodtensor.text as T", "T.ParquetCorpus",
                                      "all(pickle.loads(pickle.dumps(c)) is c for c in got)")
    assert out == ["1", "True"]


@pytest.mark.slow  # imports torch._dynamo in a fresh interpreter: seconds
def test_numpy_ops_in_other_threads_while_torch_dynamo_is_imported():
    """While a thread imports torch._dynamo (seconds), the module sits half made in ``sys.modules``: every
    lodtensor op on every other thread (NumPy data only) raised AttributeError "partially initialized
    module 'torch._dynamo' has no attribute 'is_compiling'".

    The workers pause a few milliseconds between calls: three threads calling without a pause starve the
    importing thread of the GIL (each of its thousands of file lookups gives the GIL up and waits a switch
    interval to get it back), and the import then took 90 s and more on two cores instead of 7 s. About a
    thousand calls still run while the import is half done."""
    pytest.importorskip("torch")
    out = _fresh_python("""
        import sys, threading, time, numpy as np
        import lodtensor as lt, lodtensor.nested as ln
        from lodtensor import sequence as S
        stop, errors, calls = False, [], [0]
        data = np.arange(12.0).reshape(6, 2)
        want = S.sequence_pool(lt.LoDTensor(data, [[0, 2, 6]]), "sum").data
        def work():
            while not stop:
                try:
                    t = lt.LoDTensor(data, [[0, 2, 6]])
                    assert np.array_equal(S.sequence_pool((t + 1) - 1, "sum").data, want)
                    nt = ln.nested_tensor_from_jagged(data, np.array([0, 2, 6]))
                    assert np.array_equal(np.asarray(ln.relu(nt + nt).values()), 2 * data)
                    calls[0] += 1
                except Exception as err:
                    errors.append(repr(err)[:200])
                time.sleep(0.005)
        sys.setswitchinterval(1e-4)
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads: t.start()
        import torch._dynamo
        stop = True
        for t in threads: t.join()
        print(len(errors), calls[0] > 100, errors[:1])
    """)
    count, worked = out.split()[:2]
    assert (count, worked) == ("0", "True"), out


def test_torch_dispatch_table_is_never_seen_half_built(fast_switching):
    """The torch-callable table of lodtensor.nested is built on first use; a thread that found it half
    filled refused a supported op (TypeError "torch.min is not supported for lodtensor NestedTensor")."""
    torch = pytest.importorskip("torch")
    from lodtensor.nested import _dispatch  # noqa: PLC0415

    _dispatch.torch_table()
    fn, impl = next(reversed(_dispatch._RESOLVED.items()))  # resolved last: the one most often missing
    nt = ln.nested_tensor_from_jagged(torch.arange(10.0).reshape(5, 2), torch.tensor([0, 2, 5]))
    for _ in range(5):
        _dispatch._RESOLVED.clear()
        bar = threading.Barrier(8)

        def look(k, bar=bar):
            bar.wait()
            assert _dispatch.torch_table().get(fn) is impl

        assert not _run_threads(look, 8)
    assert _dispatch.torch_table().get(fn) is impl
    assert _dispatch.torch_dispatch(torch.neg, (nt,), {}) is not None  # (fn may need more arguments than nt)


# -- NumPy's error state on the worker threads --------------------------------------------------
def test_threaded_kernels_call_the_callers_errcall(low_thresholds):
    """``np.errstate(invalid="call", call=f)`` (or ``"log"``): NumPy calls ``f`` on one thread; the pool's
    workers raised NameError ("python callback specified ... but no function found")."""
    t = lt.LoDTensor(-np.ones((640, 3), np.float32), recursive_sequence_lengths=[[200, 440]])

    class Log:
        def __init__(self):
            self.lines = []

        def write(self, text):
            self.lines.append(text)

    for threads in (1, 3):
        lt.set_num_threads(threads)
        seen = Log()
        with np.errstate(invalid="call", call=lambda kind, flag, seen=seen: seen.write(kind)):
            out = np.log(t)
        assert np.isnan(out.data).all() and seen.lines and set(seen.lines) == {"invalid value"}, threads
        log = Log()
        with np.errstate(invalid="log", call=log):
            np.log(t)
        assert log.lines and all("invalid value" in line for line in log.lines), threads


def test_user_threads_with_different_errstates_keep_their_own(low_thresholds, fast_switching):
    """Threads sharing the pool: one raises on invalid values, one calls back, one ignores them."""
    t = lt.LoDTensor(-np.ones((640, 3), np.float32), recursive_sequence_lengths=[[200, 440]])
    lt.set_num_threads(3)
    bar = threading.Barrier(3)

    def use(k):
        bar.wait()
        for _ in range(20):
            if k == 0:
                with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
                    np.log(t)
            elif k == 1:
                seen = []
                with np.errstate(invalid="call", call=lambda kind, flag, seen=seen: seen.append(kind)):
                    np.log(t)
                assert seen
            else:
                with np.errstate(invalid="ignore"):
                    assert np.isnan(np.log(t).data).all()

    assert not _run_threads(use, 3)


# -- cached plans of writable offsets -----------------------------------------------------------
def _segment_case():
    g = np.random.default_rng(1)
    lens_a = g.integers(0, 30, 200)
    lens_b = g.permutation(lens_a)
    a, b = (np.concatenate([[0], np.cumsum(x)]) for x in (lens_a, lens_b))
    return a, b, g.standard_normal((int(a[-1]), 8)).astype(np.float32)


def test_plan_of_offsets_written_while_it_is_made_is_not_kept(monkeypatch):
    """A plan was cached with a copy of the offsets taken after it was built: another thread writing
    the array between the two left a plan for the old values filed under the new ones, and every later
    call on those values (one thread, no race) got the old sequences' maxima."""
    set_compiled_kernels_was = set_compiled_kernels(False)  # the chunk route, which caches its plan
    try:
        be = get_backend("numpy")
        a, b, data = _segment_case()
        offs = a.copy()
        real = _chunks._chunk_plan

        def plan_then_written(offsets, chunk_rows):
            plan = real(offsets, chunk_rows)
            offs[:] = b  # another thread writes the caller's array now
            return plan

        monkeypatch.setattr(_chunks, "_chunk_plan", plan_then_written)
        be.segment_max(data, offs, empty=0.0)
        monkeypatch.setattr(_chunks, "_chunk_plan", real)
        assert np.array_equal(offs, b)
        np.testing.assert_array_equal(be.segment_max(data, offs, empty=0.0), be.segment_max(data, b.copy(), empty=0.0))
    finally:
        set_compiled_kernels(set_compiled_kernels_was)


def test_offsets_written_by_another_thread_leave_no_stale_plan(fast_switching):
    """The same with real threads: after the writer stops, each state's result is the fresh one."""
    was = set_compiled_kernels(False)
    try:
        be = get_backend("numpy")
        a, b, data = _segment_case()
        for _ in range(60):
            offs = a.copy()
            stop = threading.Event()

            def write(offs, stop):
                i = 0
                while not stop.is_set():
                    offs[:] = a if i % 2 else b
                    i += 1

            def call(offs, stop):
                try:
                    for _ in range(50):
                        try:
                            be.segment_max(data, offs, empty=0.0)
                        except (ValueError, IndexError):
                            pass  # offsets torn mid-call: an error is fine, a crash or a stale plan is not
                finally:
                    stop.set()

            assert not _run_threads(lambda k, *args: (call if k else write)(*args), 2, offs, stop)
            for state in (a, b):
                offs[:] = state
                np.testing.assert_array_equal(be.segment_max(data, offs, empty=0.0),
                                              be.segment_max(data, state.copy(), empty=0.0))
    finally:
        set_compiled_kernels(was)


# -- a tensor changed by one thread while others use it -----------------------------------------
_DATA = np.arange(36, dtype=np.float32).reshape(12, 3)
_LOD_A = [[0, 1, 3], [0, 4, 8, 12]]
_LOD_B = [[0, 2, 3], [0, 2, 8, 12]]  # same rows and sequence counts, other sequences


def _outcomes(fn):
    """``fn(tensor)`` under each lod, on one thread: the only results a racing call may give."""
    return [fn(lt.LoDTensor(_DATA, lod)) for lod in (_LOD_A, _LOD_B)]


def _same(a, b):
    if isinstance(a, lt.LoDTensor):
        return a.lod == b.lod and np.array_equal(a.data, b.data)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


def test_set_lod_in_the_middle_of_a_pool_gives_one_lods_result(monkeypatch):
    """``sequence_pool`` read ``x.lod`` again after pooling: a ``set_lod`` between gave sums under one lod
    wrapped in the other's outer level (a result of no state the tensor was ever in)."""
    x = lt.LoDTensor(_DATA, _LOD_A)
    want = _outcomes(lambda t: S.sequence_pool(t, "sum"))
    real = _reduce._POOLS["sum"]

    def sum_then_relod(*args):
        out = real(*args)
        x.set_lod(_LOD_B)  # another thread, midway
        return out

    monkeypatch.setitem(_reduce._POOLS, "sum", sum_then_relod)
    got = S.sequence_pool(x, "sum")
    assert _same(got, want[0])


def test_set_and_set_lod_in_the_middle_of_to_padded(monkeypatch):
    """``to_padded`` checked the lod against the rows, then read the lod again: another thread's
    ``set()`` + ``set_lod()`` between padded the old rows by the new lod."""
    x = lt.LoDTensor(_DATA, _LOD_A)
    want = x.to_padded()
    real = lt.LoDTensor._check_fits

    def check_then_replace(self, what="this operation"):
        data = real(self, what)
        x.set(np.arange(60, dtype=np.float32).reshape(20, 3))  # another thread, midway
        x.set_lod([[0, 1, 3], [0, 10, 15, 20]])
        return data

    monkeypatch.setattr(lt.LoDTensor, "_check_fits", check_then_replace)
    got = x.to_padded()
    assert _same(got, want)


def test_pickle_while_another_thread_replaces_data_and_lod(monkeypatch):
    """``pickle.dumps(t)`` read the lod after wrapping the data: a ``set()`` + ``set_lod()`` between
    pickled the old rows with the new lod."""
    from lodtensor import tensor as _tensor  # noqa: PLC0415

    x = lt.LoDTensor(_DATA, _LOD_A)
    real = _tensor.portable

    def wrap_then_replace(data):
        out = real(data)
        x.set(_DATA[::-1].copy())  # another thread, midway: the same rows, other values and lod
        x.set_lod(_LOD_B)
        return out

    monkeypatch.setattr(_tensor, "portable", wrap_then_replace)
    back = pickle.loads(pickle.dumps(x))
    assert back.lod == _LOD_A and np.array_equal(back.data, _DATA)


def test_ufunc_reads_data_and_lod_of_one_state(monkeypatch):
    """A ufunc read an operand's data, then its lod: another thread's set() + set_lod() in between gave
    the old rows under the new lod (made to happen here right after the data is read)."""
    x = lt.LoDTensor(_DATA, _LOD_A)
    real = lt.LoDTensor._check_fits

    def read_then_replace(self, where):
        out = real(self, where)
        x.set(_DATA[::-1].copy())  # another thread, midway: the same rows, other values and lod
        x.set_lod(_LOD_B)
        return out

    monkeypatch.setattr(lt.LoDTensor, "_check_fits", read_then_replace)
    got = np.exp(x * 0.01)
    assert got.lod == _LOD_A and np.allclose(got.data, np.exp(_DATA * 0.01))


OPS = {
    "pool sum": lambda t: S.sequence_pool(t, "sum"),
    "pool max": lambda t: S.sequence_pool(t, "max"),
    "pool first": lambda t: S.sequence_pool(t, "first"),
    "pool level 0": lambda t: S.sequence_pool(t, "average", level=0),
    "softmax": S.sequence_softmax,
    "reverse": S.sequence_reverse,
    "pad": lambda t: t.to_padded(),
    "pad level 0": lambda t: t.to_padded(level=0, pad_value=-1),
    "pad all": lambda t: t.to_padded_all(),
    "sequence_pad": lambda t: S.sequence_pad(t, np.float32(0)),
    "slice": lambda t: S.sequence_slice(t, np.zeros(3, np.int64), np.ones(3, np.int64)),
    "pickle": lambda t: pickle.loads(pickle.dumps(t)),
    "lod_append": lambda t: S.lod_append(t, list(range(13))),
    "nn sequence_conv": lambda t: NF.sequence_conv(t, np.ones((9, 2), np.float32), filter_size=3),
    "nn dynamic_gru": lambda t: NF.dynamic_gru(t, np.full((1, 3), 0.1, np.float32), np.zeros((1, 3), np.float32)),
}


def test_ops_racing_set_lod_give_one_lods_result(fast_switching):
    """Threads run the ops on one tensor while another flips its lod: every result is the op's result
    under one of the two lods (one thread, no race), never a mix, never an error."""
    x = lt.LoDTensor(_DATA, _LOD_A)
    want = {name: _outcomes(fn) for name, fn in OPS.items()}
    stop = threading.Event()

    def flip(k):
        i = 0
        while not stop.is_set():
            x.set_lod(_LOD_B if i % 2 else _LOD_A)
            i += 1

    def use(k):
        try:
            for i in range(300):
                name = list(OPS)[(i + k) % len(OPS)]
                got = OPS[name](x)
                assert any(_same(got, w) for w in want[name]), name
        finally:
            if k == 1:
                stop.set()

    assert not _run_threads(lambda k: (use if k else flip)(k), 4)


# -- caches of one LoD shared by threads --------------------------------------------------------
def test_lod_head_and_device_copies_are_one_object_across_threads(fast_switching):
    """``LoD.head(k)`` and ``LoD.on(...)`` are one object per LoD: threads asking first at once each
    kept their own (so results of one LoD pooled on two threads had two outer LoDs)."""
    be = get_backend("numpy")
    for _ in range(20):
        lod = lt.LoD([[0, 1, 3], [0, 2, 2, 5]])
        bar = threading.Barrier(6)
        heads, copies = [], []

        def ask(k, lod=lod, bar=bar, heads=heads, copies=copies):
            bar.wait()
            heads.append(lod.head(1))
            copies.append(lod.on(be, "segment_ids", 1))

        assert not _run_threads(ask, 6)
        assert all(h is lod.head(1) for h in heads)
        assert all(c is lod.on(be, "segment_ids", 1) for c in copies)


def test_jagged_views_of_one_lod_made_on_threads_combine(fast_switching):
    """``to_nested_jagged()`` keeps one torch offsets tensor per LoD, so jagged tensors of one LoD combine in
    torch; made first on several threads at once, each had its own and ``a + b`` raised."""
    pytest.importorskip("torch")
    for _ in range(10):
        base = lt.LoDTensor(np.zeros((6, 3), np.float32), [[0, 2, 5, 6]])
        parts = [base.with_data(np.full((6, 3), k, np.float32)) for k in range(6)]
        out = [None] * 6
        bar = threading.Barrier(6)

        def convert(k, bar=bar, parts=parts, out=out):
            bar.wait()
            out[k] = parts[k].to_nested_jagged()

        assert not _run_threads(convert, 6)
        total = out[0]
        for njt in out[1:]:
            total = total + njt
        assert float(total.values().sum()) == 15 * 18


# -- torch's one-time warnings, swallowed without touching other threads' filters ---------------
def test_to_sparse_csr_on_threads_leaves_the_warning_filters_alone(fast_switching):
    """``warnings.catch_warnings`` swaps the process-wide filter list: threads in it at once restored each
    other's lists, and an "ignore UserWarning" filter stayed for good (every later UserWarning lost)."""
    pytest.importorskip("torch")
    t = lt.LoDTensor(np.arange(1.0, 7.0).reshape(3, 2), [[0, 2, 2, 3]])
    before = list(warnings.filters)
    for _ in range(12):
        bar = threading.Barrier(6)

        def convert(k, bar=bar):
            bar.wait()
            for _ in range(60):
                assert t.to_sparse_csr().crow_indices().tolist() == [0, 2, 2, 3]

        assert not _run_threads(convert, 6)
        assert warnings.filters == before


# -- the kernels' worker threads ----------------------------------------------------------------
def _kernel_calls():
    g = np.random.default_rng(0)
    lens = g.integers(0, 40, 300)
    data = g.standard_normal((int(lens.sum()), 8)).astype(np.float32)
    t = lt.LoDTensor(data, recursive_sequence_lengths=[lens.tolist()])
    nt = ln.nested_tensor_from_jagged(data, np.concatenate([[0], np.cumsum(lens)]))
    return {
        "sum": lambda: S.sequence_pool(t, "sum").data,
        "max": lambda: S.sequence_pool(t, "max").data,
        "softmax": lambda: S.sequence_softmax(lt.LoDTensor(data[:, :1].copy(), t.lod)).data,
        "pad": lambda: t.to_padded()[0],
        "unpad": lambda: lt.from_padded(t.to_padded()[0], lens).data,
        "relu": lambda: np.maximum(t, 0).data,
        "exp": lambda: np.exp(t).data,
        "gelu": lambda: np.asarray(ln.gelu(nt).values()),
        "silu": lambda: np.asarray(ln.silu(nt).values()),
        "layer_norm": lambda: np.asarray(ln.layer_norm(nt, (8,)).values()),
    }


def test_set_num_threads_while_user_threads_run_threaded_kernels(low_thresholds, fast_switching):
    """Eight user threads share the kernels' pool while another thread keeps resizing it: every result
    is the one-thread result bit for bit, and nothing hangs."""
    calls = _kernel_calls()
    lt.set_num_threads(1)
    want = {name: np.array(fn(), copy=True) for name, fn in calls.items()}
    stop = threading.Event()

    def resize(k):
        i = 0
        while not stop.is_set():
            lt.set_num_threads(1 + i % 4)
            i += 1
            time.sleep(0.0005)

    def use(k):
        names = list(calls)
        try:
            for i in range(60):
                name = names[(i + k) % len(names)]
                np.testing.assert_array_equal(calls[name](), want[name], err_msg=name)
        finally:
            if k == 1:
                stop.set()

    assert not _run_threads(lambda k: (use if k else resize)(k), 9)


def test_pooled_buffers_handed_between_threads_keep_their_contents(fast_switching):
    """Views of pooled outputs travel to other threads and die there, while a third thread resizes
    and trims the pool: no live view ever sees another array's values."""
    saved = (np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN)
    np_tuning.POOL_MIN_BYTES = np_tuning.POOL_GRAIN = 1024
    set_buffer_pool(1 << 20)
    inbox = queue.Queue()
    done = threading.Event()
    producing = [4]
    count_lock = threading.Lock()
    try:
        def produce(k):
            for i in range(400):
                a = _np_pool.empty((64 + (i % 5) * 8, 16), np.float32)
                a.fill(k * 100000 + i)
                inbox.put((a[3:] if i % 2 else memoryview(a), k * 100000 + i))
                del a

        def consume(k):
            while not (done.is_set() and inbox.empty()):
                try:
                    view, value = inbox.get(timeout=0.01)
                except queue.Empty:
                    continue
                assert (np.asarray(view) == value).all()

        def knob(k):
            i = 0
            while not done.is_set():
                if i % 3 == 0:
                    trim_buffer_pool()
                elif i % 3 == 1:
                    set_buffer_pool((64 << 10) * (1 + i % 7))
                else:
                    buffer_pool_info()
                i += 1
                time.sleep(0.0002)

        def role(k):
            if k < 4:
                try:
                    produce(k)
                finally:
                    with count_lock:
                        producing[0] -= 1
                        if not producing[0]:
                            done.set()
            elif k < 7:
                consume(k)
            else:
                knob(k)

        assert not _run_threads(role, 8)
        gc.collect()
        info = buffer_pool_info()
        assert info["leased_bytes"] == 0 and info["idle_bytes"] <= info["limit"]
    finally:
        np_tuning.POOL_MIN_BYTES, np_tuning.POOL_GRAIN = saved
        set_buffer_pool(None)
        trim_buffer_pool()
