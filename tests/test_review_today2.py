"""Second reading of the changes merged on 2026-11-27 (commits 2531566..86b7530): each test failed before its fix.

- The compiled kernels' own C pool (lodtensor/backend/numpy/_cparallel.h) refused thread counts above 64, so
  ``set_num_threads(100)`` (or LODTENSOR_NUM_THREADS=100) made every large relu / GELU / segment reduction
  raise ValueError; and a call asking for fewer threads than the pool held ran on all of its workers (after
  ``set_num_threads(8)`` then ``set_num_threads(2)`` every call still ran on 8 threads).
- np.copyto / np.putmask checked the destination's lod only with every argument by position: np.copyto(dst=t,
  src=u) and np.copyto(t, src=u) wrote u's rows under t's lod.
- The CUDA segment softmax gave 0 (not NaN, as NumPy and torch) for the finite rows of a column holding +inf
  where one lane read the whole column.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.backend.numpy import _compiled
from lodtensor.sequence import sequence_pool


@pytest.fixture
def threads_restored():
    yield
    lt.set_num_threads(None)


# -- the C pool: thread counts ----------------------------------------------------------------------------------


@pytest.mark.skipif(not _compiled.compiled_kernels(), reason="the compiled kernels are switched off")
def test_more_threads_than_the_c_pool_takes_are_capped_not_refused(threads_restored):
    """np.maximum(t, 0) (compiled relu), GELU and sequence_pool's compiled sum under set_num_threads(100):
    the results of one thread (before: ValueError 'relu: threads must be 1 to 64, got 100')."""
    g = np.random.default_rng(0)
    x = g.standard_normal(1 << 20).astype(np.float32)  # 4 MiB: past RELU_PARALLEL_BYTES and GELU's
    lengths = [4] * (x.size // 64)
    t = lt.LoDTensor(x.reshape(-1, 16), recursive_sequence_lengths=[lengths])
    big = lt.LoDTensor(g.standard_normal(((17 << 20) // 64, 16)).astype(np.float32),  # 17 MiB of input
                       recursive_sequence_lengths=[[4] * ((17 << 20) // 256)])
    lt.set_num_threads(1)
    want_relu = np.maximum(t, 0).data.copy()
    want_gelu = lt.get_backend("numpy").gelu(x, "none").copy()
    want_sum = sequence_pool(big, "sum").data.copy()
    lt.set_num_threads(100)
    np.testing.assert_array_equal(np.maximum(t, 0).data, want_relu)
    np.testing.assert_array_equal(lt.get_backend("numpy").gelu(x, "none"), want_gelu)
    np.testing.assert_array_equal(sequence_pool(big, "sum").data, want_sum)


_HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "_cparallel.h"

static pthread_t ran[PARALLEL_MAX_PARTS];
static _Atomic int hits[PARALLEL_MAX_PARTS];

static void part(void *ctx, int p, int nparts) {
    (void)ctx; (void)nparts;
    ran[p] = pthread_self();
    atomic_fetch_add(&hits[p], 1);
    usleep(1000); /* a part that leaves the core: every thread allowed in gets to claim one */
}

static int distinct(int nparts) {
    int count = 0;
    for (int i = 0; i < nparts; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= pthread_equal(ran[i], ran[j]);
        count += !seen;
    }
    return count;
}

int main(void) {
    pool_init();
    parallel_run(part, NULL, 16, 8); /* starts 7 workers */
    int most = 0, bad = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 16; i++) atomic_store(&hits[i], 0);
        parallel_run(part, NULL, 16, round % 2 ? 2 : 3);
        for (int i = 0; i < 16; i++) bad += atomic_load(&hits[i]) != 1;
        int d = distinct(16);
        if (d > (round % 2 ? 2 : 3)) most = d > most ? d : most;
    }
    printf("%d %d\n", most, bad);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None or sys.platform != "linux", reason="needs a C compiler (Linux)")
def test_a_call_on_fewer_threads_than_the_pool_holds_runs_on_that_many(tmp_path):
    """_cparallel.h itself, in a small C program: after a call on 8 threads (7 workers started), calls on 2
    and 3 threads run their parts on at most 2 and 3 threads, each part once (before: on all 8 threads, so
    set_num_threads(2) after set_num_threads(8) still ran every large kernel on 8)."""
    source = tmp_path / "harness.c"
    source.write_text(_HARNESS)
    header_dir = os.path.join(os.path.dirname(_compiled.__file__))
    exe = tmp_path / "harness"
    subprocess.run(["cc", "-O2", "-pthread", "-I", header_dir, str(source), "-o", str(exe)], check=True,
                   capture_output=True, timeout=120)
    most, bad = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=120).stdout.split()
    assert bad == "0", "a part ran other than once"
    assert most == "0", f"a call on 2 or 3 threads ran its parts on {most} threads"


# -- np.copyto / np.putmask: the destination by name ------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda t, u: np.copyto(dst=t, src=u),
    lambda t, u: np.copyto(t, src=u),
    lambda t, u: np.putmask(t, mask=np.ones((4, 1), bool), values=u),
], ids=["copyto-dst-src-by-name", "copyto-src-by-name", "putmask-mask-values-by-name"])
def test_copyto_and_putmask_check_the_lod_however_the_arguments_are_passed(call):
    """np.copyto(t, u) was refused (LoDError) but np.copyto(dst=t, src=u) and np.copyto(t, src=u) wrote u's
    rows under t's lod silently; likewise np.putmask(t, mask=..., values=u)."""
    t = lt.LoDTensor(np.zeros((4, 1)), [[0, 1, 4]])
    u = lt.LoDTensor(np.arange(4.0).reshape(4, 1), [[0, 3, 4]])
    with pytest.raises(lt.errors.LoDError, match=r"numpy\.(copyto: dst|putmask: a)= holds lod"):
        call(t, u)
    np.testing.assert_array_equal(t.data, np.zeros((4, 1)))  # nothing written


def test_copyto_by_name_under_the_same_lod_writes_and_returns_none_as_numpy():
    t = lt.LoDTensor(np.zeros((4, 1)), [[0, 1, 4]])
    v = lt.LoDTensor(np.arange(4.0).reshape(4, 1), [[0, 1, 4]])
    assert np.copyto(dst=t, src=v) is None  # as NumPy's copyto
    np.testing.assert_array_equal(t.data, v.data)
    plain = np.zeros((4, 1))
    assert np.copyto(dst=plain, src=lt.LoDTensor(np.ones((4, 1)), [[0, 3, 4]])) is None  # a plain dst: as before
    np.testing.assert_array_equal(plain, np.ones((4, 1)))


# -- the CUDA softmax (emulated): a +inf in a column -----------------------------------------------------------


@pytest.mark.skipif(os.environ.get("LT_CUPY_EMULATED") != "1", reason="emulated CUDA off (LT_CUPY_EMULATED=1)")
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")
@pytest.mark.parametrize("route_name", ["short", "pieces", "blocks", "combine", "combine_blocks"])
def test_cuda_softmax_of_a_column_holding_inf_is_nan_as_numpy_and_torch(monkeypatch, route_name):
    """torch.softmax([1, inf, 2]) and NumPy's are NaN everywhere (exp(inf - inf) is in the sum); the CUDA
    kernels gave 0 for the finite rows where one lane read the whole column (the short kernel, a piece's
    partial merged in the combine pass): lt_online.add set z = 1 for a +inf."""
    from lodtensor.backend.cupy import _tuning

    from .backend import cuda_emu
    from .backend.test_gpu_hunt_emulated import ROUTES, _numpy_softmax

    cuda_emu.library()
    emulated = cuda_emu.EmulatedCase(cuda_emu.install(monkeypatch))
    lengths, width, steps = ROUTES[route_name]
    lengths = np.array(lengths)
    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    host = (np.random.default_rng(1).standard_normal((int(offsets[-1]), width)) * 3).astype(np.float32)
    host[offsets[1] + 2, 0] = np.inf  # one +inf in a column of the long second sequence
    host[offsets[4] + 1] = np.inf  # a row of +inf
    got = emulated.numpy(emulated.be.segment_softmax(emulated.array(host), emulated.array(offsets)))
    want = _numpy_softmax(host, lengths)
    assert np.isnan(want[offsets[1] : offsets[2], 0]).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
