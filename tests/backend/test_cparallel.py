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
