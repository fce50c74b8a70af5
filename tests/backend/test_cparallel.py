"""The compiled kernels' own thread pool (lodtensor/backend/numpy/_cparallel.h), through the pointwise kernels.

A call cut into parts gives the bits of one call on one thread for every length, thread count and
alignment; calls from many Python threads at once, calls right after a fork (in the child, whose pool
has no workers) and calls whose thread count changes from one to the next all finish with those bits.
"""

import os
import sys
import threading

import numpy as np
import pytest

from lodtensor.backend.numpy import _compiled

kernels = pytest.importorskip("lodtensor.backend.numpy._cpointwise", reason="the compiled kernels were not built")

#: values a part holds at least (PART_BYTES in _cpointwise.c) / 4
PART_VALUES = 64 * 1024 // 4


def _data(n, seed=0, dtype=np.float32):
    x = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    x[: min(n, 5)] = [np.inf, -np.inf, np.nan, -0.0, 1e-40][: min(n, 5)]
    return x


def _single(name, x, stream=False):
    out = np.empty_like(x)
    getattr(kernels, name)(x, out, stream, 1)
    return out


@pytest.mark.parametrize("name", ["gelu_f32", "relu", "relu_torch"])
@pytest.mark.parametrize("n", [0, 1, 17, PART_VALUES - 1, PART_VALUES * 2 + 3, PART_VALUES * 9 + 15, 600_001])
def test_parts_on_any_number_of_threads_give_the_bits_of_one_call(name, n):
    x = _data(n, seed=n)
    want = _single(name, x)
    for threads in (2, 3, 4, 7, 64):
        out = np.full(n, 7.0, np.float32)
        getattr(kernels, name)(x, out, False, threads)
        np.testing.assert_array_equal(out, want, err_msg=f"{name}, {threads} threads")


def test_streaming_stores_from_an_address_off_the_grid_on_threads():
    x = _data(PART_VALUES * 11 + 5, seed=3)
    want = _single("relu", x)
    for offset in (1, 3):
        buf = np.full(x.size + offset, 7.0, np.float32)
        kernels.relu(x, buf[offset:], True, 3)
        np.testing.assert_array_equal(buf[offset:], want)
        assert (buf[:offset] == 7.0).all()  # nothing written before the output
    x64 = _data(PART_VALUES * 5 + 1, seed=4, dtype=np.float64)
    out = np.empty_like(x64)
    kernels.relu(x64, out, True, 2)
    np.testing.assert_array_equal(out, _single("relu", x64))


def test_threads_is_checked():
    x = np.zeros(4, np.float32)
    for bad in (0, -1, 65):
        with pytest.raises(ValueError, match=f"gelu_f32: threads must be 1 to 64, got {bad}"):
            kernels.gelu_f32(x, x, False, bad)
    with pytest.raises(TypeError):
        kernels.relu(x, x, False, 2.0)


def test_many_python_threads_calling_at_once_each_get_their_bits():
    """One call holds the pool; the others run their parts themselves: every result is exact."""
    inputs = [_data(PART_VALUES * 6 + i, seed=i) for i in range(6)]
    wants = [_single("gelu_f32", x) for x in inputs]
    errors = []

    def work(i):
        out = np.empty_like(inputs[i])
        for round_ in range(60):
            kernels.gelu_f32(inputs[i], out, False, 2 + (i + round_) % 3)
            if not np.array_equal(out, wants[i], equal_nan=True):
                errors.append((i, round_))
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a call did not return"
    assert errors == []


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork (Linux)")
def test_a_forked_child_starts_its_own_workers():
    """The child has none of the parent's workers (and maybe a lock a gone thread held): its calls finish."""
    x = _data(PART_VALUES * 8, seed=5)
    want = _single("gelu_f32", x)
    out = np.empty_like(x)
    kernels.gelu_f32(x, out, False, 4)  # the parent's workers are running (spinning) now
    stop = threading.Event()
    def keep_busy():
        while not stop.is_set():
            kernels.gelu_f32(x, np.empty_like(x), False, 3)

    busy = threading.Thread(target=keep_busy)
    busy.start()  # another thread of the parent keeps the pool busy while it forks
    try:
        pid = os.fork()
        if pid == 0:  # the child: only this thread exists
            code = 1
            try:
                child = np.empty_like(x)
                for threads in (4, 2, 4):
                    kernels.gelu_f32(x, child, False, threads)
                code = 0 if np.array_equal(child, want, equal_nan=True) else 2
            finally:
                os._exit(code)
        for _ in range(600):  # up to 60 s
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            threading.Event().wait(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's call hung")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        stop.set()
        busy.join(timeout=60)


def test_the_wrapper_passes_the_thread_count():
    kernel = _compiled.compiled_pointwise("gelu_f32", 0)
    if kernel is None:
        pytest.skip("the compiled kernels are switched off")
    x = _data(PART_VALUES * 4, seed=6)
    out = np.empty_like(x)
    kernel(x, out, 3)
    np.testing.assert_array_equal(out, _single("gelu_f32", x))


segment = pytest.importorskip("lodtensor.backend.numpy._csegment", reason="the compiled kernels were not built")


def _lod(rows, seed, long_one=False):
    g = np.random.default_rng(seed)
    lengths = g.integers(0, 9, size=max(rows // 3, 1))
    if long_one:  # one sequence of most rows beside empty ones: a part may hold nothing
        lengths[len(lengths) // 2] += rows
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return offsets, int(offsets[-1])


@pytest.mark.parametrize("width", [1, 5, 64])
@pytest.mark.parametrize("long_one", [False, True])
def test_segment_kernels_cut_into_runs_of_sequences_give_the_bits_of_one_call(width, long_one):
    """segment_reduce (sum, max, min; 4 dtypes), softmax_grad and extreme_grad on 2-64 threads: each
    sequence is reduced whole by one thread, so the results are one call's bits."""
    offsets, rows = _lod(6000, seed=width, long_one=long_one)
    n = offsets.size - 1
    g = np.random.default_rng(width)
    for kind, dtype in enumerate((np.float32, np.float64, np.int32, np.int64)):
        data = (g.standard_normal((rows, width)) * 100).astype(dtype)
        for op in (0, 1, 2):
            want = np.zeros((n, width), dtype)
            segment.segment_reduce(op, kind, data, offsets, want, width, 0, n, 1)
            for threads in (2, 3, 64):
                got = np.zeros((n, width), dtype)
                segment.segment_reduce(op, kind, data, offsets, got, width, 0, n, threads)
                np.testing.assert_array_equal(got, want, err_msg=f"op {op}, {dtype.__name__}, {threads} threads")
    for kind, dtype in enumerate((np.float32, np.float64)):
        y = np.abs(g.standard_normal((rows, width))).astype(dtype)
        grad = g.standard_normal((rows, width)).astype(dtype)
        want = np.empty_like(y)
        segment.softmax_grad(kind, grad, y, offsets, want, width, 0, n, 1)
        m = np.zeros((n, width), dtype)
        segment.segment_reduce(1, kind, y, offsets, m, width, 0, n, 1)
        gm = g.standard_normal((n, width)).astype(dtype)
        want_x = np.empty_like(y)
        segment.extreme_grad(kind, y, m, gm, offsets, want_x, width, 0, n, 1)
        for threads in (2, 5):
            got = np.empty_like(y)
            segment.softmax_grad(kind, grad, y, offsets, got, width, 0, n, threads)
            np.testing.assert_array_equal(got, want)
            segment.extreme_grad(kind, y, m, gm, offsets, got, width, 0, n, threads)
            np.testing.assert_array_equal(got, want_x)


def test_segment_kernels_check_threads_and_a_sub_range():
    offsets, rows = _lod(300, seed=1)
    data = np.ones((rows, 4), np.float32)
    out = np.full((offsets.size - 1, 4), -1.0, np.float32)
    with pytest.raises(ValueError, match="segment_reduce: threads must be 1 to 64, got 0"):
        segment.segment_reduce(0, 0, data, offsets, out, 4, 0, 10, 0)
    segment.segment_reduce(0, 0, data, offsets, out, 4, 20, 60, 3)  # only sequences 20:60 are written
    lengths = np.diff(offsets)
    j = np.arange(lengths.size)
    written = (j >= 20) & (j < 60) & (lengths > 0)  # empty sequences' rows are left as they are
    expect = np.where(written, lengths, -1).astype(np.float32)
    np.testing.assert_array_equal(out, np.repeat(expect[:, None], 4, axis=1))


def test_the_backend_splits_segment_work_on_the_pool(monkeypatch):
    """From COMPILED_PARALLEL_BYTES the backend asks the kernels for every thread; results are unchanged."""
    from lodtensor.backend.numpy import _tuning

    if not _compiled.compiled_kernels():
        pytest.skip("the compiled kernels are switched off")
    offsets, rows = _lod(9000, seed=2)
    data = np.random.default_rng(2).standard_normal((rows, 8)).astype(np.float32)
    want = _compiled.compiled_reduce(np.add, data, offsets, 0.0)
    monkeypatch.setattr(_tuning, "COMPILED_PARALLEL_BYTES", 0)
    calls = []
    real = _compiled._kernel
    monkeypatch.setattr(_compiled, "_kernel", lambda *args: calls.append(args[-1]) or real(*args))
    np.testing.assert_array_equal(_compiled.compiled_reduce(np.add, data, offsets, 0.0), want)
    assert calls == [_compiled.get_num_threads()]


def test_passive_wait_policy_gives_the_same_bits_in_a_fresh_process():
    """OMP_WAIT_POLICY=passive (idle workers sleep at once, as torch's OpenMP pool does) changes no result."""
    import subprocess

    code = ("import numpy as np; from lodtensor.backend.numpy import _cpointwise as c\n"
            "x = np.linspace(-6, 6, 200_001, dtype=np.float32); a = np.empty_like(x); b = np.empty_like(x)\n"
            "c.gelu_f32(x, a, False, 1)\n"
            "for _ in range(50): c.gelu_f32(x, b, False, 3); assert np.array_equal(a, b)\n"
            "print('ok')")
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
