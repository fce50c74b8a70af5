"""Issue #15's repros, one test each: a clear error or the right result, never a crash or garbage.

Repros that crashed the process run in a subprocess, so a regression fails
the test instead of killing the run.
"""

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.lod import _rebuild_lod
from lodtensor.sequence import lod_reset, sequence_pool, sequence_slice
from lodtensor.tensor import _rebuild

ROOT = Path(__file__).resolve().parents[1]


def run_isolated(code, timeout=120):
    """Run ``code`` in a fresh interpreter; return its stdout, failing on a crash or a hang."""
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode} (negative: a signal)\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_lengths_whose_sum_wraps_past_int64_are_refused():
    with pytest.raises(lt.LoDError, match="add up beyond int64"):
        lt.LoDTensor(np.arange(2.0), recursive_sequence_lengths=[[2**63 - 1, 2**63 - 1, 4]])
    with pytest.raises(lt.LoDError, match="add up beyond int64"):
        lt.LoD.from_lengths([[2**62, 2**62, 2**62, 2**62, 2]])


def test_offsets_at_the_edges_of_int64_are_refused():
    for level in ([0, 2**63 - 1, 2], [0, 2, -(2**63)], [0, 2**63 - 1, -2, 2]):
        with pytest.raises(lt.LoDError):
            lt.LoDTensor(np.arange(2.0), [level])
    with pytest.raises(ValueError, match="beyond int64"):
        lt.LoDTensor(np.arange(2.0), [np.array([0, 2**64 - 1, 2], dtype=np.uint64)])


class _Crafted:
    """Pickles as whatever ``reduce`` says: a hand-made pickle of a LoDTensor."""

    def __init__(self, reduce):
        self.reduce = reduce

    def __reduce__(self):
        return self.reduce


def _crafted_tensor(data, levels, fits=True):
    return pickle.dumps(_Crafted((_rebuild, (lt.LoDTensor, data, _Crafted((_rebuild_lod, (levels,))),
                                             lt.CPUPlace(), fits))))


def test_unpickling_validates_the_lod_and_ignores_a_stored_fits_flag():
    with pytest.raises(lt.LoDError, match="must end at the number|non-decreasing"):
        pickle.loads(_crafted_tensor(np.arange(5.0), [[0, 10**6, 5]]))
    t = pickle.loads(_crafted_tensor(np.arange(5.0), [[0, 2, 6]], fits=True))  # a valid lod, 6 rows over 5
    assert not t.has_valid_recursive_sequence_lengths()
    with pytest.raises(lt.LoDError, match="does not fit"):
        sequence_pool(t, "max")


def test_crafted_pickles_do_not_hang_or_crash():
    run_isolated("""
        import pickle, numpy as np, torch, lodtensor as lt
        from lodtensor.sequence import sequence_pool
        from tests.test_hardening import _crafted_tensor
        for data, levels in ((np.arange(5.0), [[0, 10**6, 5]]), (torch.ones(5, 8), [[0, 2, 5000]])):
            try:
                t = pickle.loads(_crafted_tensor(data, levels))
            except ValueError:
                continue
            for kind in ("max", "sum"):
                try:
                    sequence_pool(t, kind)
                except ValueError:
                    pass
                else:
                    raise SystemExit("an unfit lod reached a kernel")
    """)


def test_bit_flipped_pickles_never_load_a_broken_lod():
    out = run_isolated("""
        import pickle, numpy as np, lodtensor as lt
        from tests.fuzz.oracle import check_tensor
        t = lt.from_nested_list([[[1.0, 2.0], [3.0]], [[4.0, 5.0, 6.0]], [[7.0], [], [8.0, 9.0]]])
        blob = pickle.dumps(t, protocol=4)
        loaded = 0
        # every bit but those of the last opcodes, which assemble the outer call: flipped, they
        # make pickle itself build unrelated large objects (one flip takes 35 s in pickle alone)
        for i in range(len(blob) - 16):
            for bit in range(8):
                flipped = bytearray(blob)
                flipped[i] ^= 1 << bit
                try:
                    out = pickle.loads(bytes(flipped))
                except Exception:
                    continue
                if isinstance(out, lt.LoDTensor):
                    check_tensor(out, ops=False)
                    loaded += 1
        print(loaded, (len(blob) - 16) * 8)
    """, timeout=300)
    loaded, total = map(int, out.split())
    assert 0 < loaded < total


def test_with_data_checks_the_rows():
    t = lt.LoDTensor(np.arange(6.0), [[0, 2, 5, 6]])
    with pytest.raises(lt.LoDError, match="with_data"):
        t.with_data(np.arange(3.0))
    torch = pytest.importorskip("torch")
    with pytest.raises(lt.LoDError, match="with_data"):
        t.with_data(torch.ones(3, 8))
    assert t.with_data(torch.ones(6, 2)).lod() == [[0, 2, 5, 6]]


def test_torch_resize_after_construction_is_caught():
    torch = pytest.importorskip("torch")
    t = lt.LoDTensor(torch.arange(6.0), [[0, 2, 5, 6]])
    t.data.resize_(3)
    assert not t.has_valid_recursive_sequence_lengths()
    for fn in (lambda: sequence_pool(t, "sum"), t.to_padded, t.tolist, lambda: t[0], t.to_nested):
        with pytest.raises(lt.LoDError, match="does not fit"):
            fn()


def test_lod_returns_fresh_lists():
    t = lt.LoDTensor(np.arange(5), [[0, 2, 5]])
    t.lod()[0][1] = 4
    assert t.lod() == [[0, 2, 5]] and t[0].tolist() == [0, 1]
    t.recursive_sequence_lengths()[0][0] = 9
    assert t.recursive_sequence_lengths() == [[2, 3]]


def test_offsets_handed_out_cannot_be_made_writable():
    t = lt.from_nested_list([[[1, 2], [3]], [[4, 5, 6], [7]], [[8], [9, 10]]])
    for _ in range(20):  # past the point where indexing builds the LoD's cached split
        t[1]
    arrays = [t.offsets(0), t.offsets(1), t.lengths(0), t[1].offsets(), t.lod.segment_ids(0), t.lod.absolute_offsets(0)]
    for arr in arrays:
        with pytest.raises(ValueError):
            arr[0] = 0
        base = arr
        while isinstance(base, np.ndarray):
            with pytest.raises(ValueError, match="WRITEABLE"):
                base.setflags(write=True)
            base = base.base
    assert t[1].tolist() == [[4, 5, 6], [7]]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_integer_and_bool_pooling(backend):
    torch = pytest.importorskip("torch") if backend == "torch" else None

    def tensor(values, dtype, lod):
        arr = np.array(values, dtype=dtype)
        return lt.LoDTensor(torch.from_numpy(arr) if torch else arr, lod)

    def host(x):
        return np.asarray(lt.LoDTensor(x.data).numpy())

    for lod, want_sum, want_avg in (([[0, 3]], [300], [100.0]), ([[0, 3, 3]], [300, 0], [100.0, 0.0])):
        x = tensor([100, 100, 100], "int8", lod)
        total, avg = host(sequence_pool(x, "sum")), host(sequence_pool(x, "average"))
        assert total.tolist() == want_sum and total.dtype == np.int64
        assert avg.tolist() == want_avg and avg.dtype == np.float64
    b = tensor([True, False, True], "bool", [[0, 3]])
    assert host(sequence_pool(b, "sum")).tolist() == [2]
    assert host(sequence_pool(b, "average")).tolist() == pytest.approx([2 / 3])
    assert host(sequence_pool(b, "max")).tolist() == [True]
    ints = tensor([1, 2, 3], "int64", [[0, 3, 3]])
    with pytest.raises(ValueError, match="pad_value=nan cannot be stored"):
        sequence_pool(ints, "max", pad_value=float("nan"))
    assert host(sequence_pool(ints, "max", pad_value=-1)).tolist() == [3, -1]


def test_bfloat16_repr_and_tolist():
    torch = pytest.importorskip("torch")
    t = lt.LoDTensor(torch.tensor([1.5, 2.0, 3.0], dtype=torch.bfloat16), [[0, 1, 3]])
    assert t.tolist() == [[1.5], [2.0, 3.0]] and "bfloat16" in repr(t)


def test_numpy_binary_ufuncs_take_python_numbers_on_torch_data():
    torch = pytest.importorskip("torch")
    t = lt.LoDTensor(torch.tensor([0.0, 1.0, 2.0]), [[0, 3]])
    assert np.maximum(t, 0.5).tolist() == [[0.5, 1.0, 2.0]]
    assert np.minimum(t, 0.5).data.dtype == torch.float32
    assert np.arctan2(t, 1.0).tolist()[0] == pytest.approx(np.arctan2([0.0, 1.0, 2.0], 1.0).tolist())


def test_clear_errors_for_odd_arguments():
    with pytest.raises(TypeError, match="got dict"):
        lt.LoDTensor(np.arange(3), {0: [0, 3]})
    with pytest.raises(TypeError, match="target_lod must be offsets"):
        lod_reset(lt.LoDTensor(np.arange(6), [[0, 6]]), target_lod=6)
    t = lt.LoDTensor(np.arange(6.0), [[0, 3, 6]])
    with pytest.raises(TypeError, match="boolean"):
        t[True]
    with pytest.raises(TypeError, match="boolean"):
        t[np.bool_(False)]
    with pytest.raises(IndexError, match="offset \\+ length"):
        sequence_slice(t, np.array([[1], [1]]), np.array([[2**63 - 1], [1]]))


def test_to_nested_refuses_an_unfit_lod():
    t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    t.set(np.arange(4.0), lt.CPUPlace())
    with pytest.raises(lt.LoDError, match="to_nested"):
        t.to_nested()


def test_pad_plans_are_bounded_by_bytes():
    t = lt.LoDTensor(np.zeros((100_000, 1), np.float32), recursive_sequence_lengths=[[50_000, 50_000]])
    for maxlen in range(50_000, 50_200):
        t.to_padded(maxlen=maxlen)
    plans = t.lod._plans
    assert plans.nbytes <= plans.budget and len(plans) < 200


def test_set_num_threads_while_kernels_run():
    lengths = [300] * 200
    x = lt.LoDTensor(np.random.default_rng(0).random((sum(lengths), 128)), recursive_sequence_lengths=[lengths])
    want = sequence_pool(x, "max").data
    errors = []

    def work():
        try:
            for _ in range(4):
                assert np.array_equal(sequence_pool(x, "max").data, want)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    workers = [threading.Thread(target=work) for _ in range(3)]
    for w in workers:
        w.start()
    for n in [1, 3, 2, None] * 10:
        lt.set_num_threads(n)
    for w in workers:
        w.join()
    lt.set_num_threads(None)
    assert not errors, errors


def test_collate_pickles_for_spawned_workers():
    from lodtensor.text import make_collate

    collate = pickle.loads(pickle.dumps(make_collate(backend="numpy")))
    assert collate([[[1, 2], [3]], [[4]]]).lod() == [[0, 2, 3], [0, 2, 3, 4]]


def test_frozen_offsets_are_recognised_without_a_copy():
    t = lt.LoDTensor(np.arange(1000.0), recursive_sequence_lengths=[[10] * 100])
    again = lt.LoD([t.offsets(0)], num_rows=1000)
    assert again.offsets(0) is t.offsets(0)
    writable = np.array(t.offsets(0))
    copied = lt.LoD([writable], num_rows=1000)
    assert not np.shares_memory(copied.offsets(0), writable)
    shared = lt.LoD([t.offsets(0).copy()], num_rows=1000, copy=False)
    assert not shared.offsets(0).flags.writeable


def test_pickles_never_reach_the_array_libraries_loaders():
    """Data pickles as checked raw bytes: no numpy dtype state or torch.load inside (both crash on flipped bytes)."""
    import pickle

    import lodtensor.nested as ln
    from lodtensor.backend._pickle import array_from_bytes

    torch = pytest.importorskip("torch")
    objs = [
        lt.LoDTensor(np.arange(6.0), [[0, 2, 6]]),
        lt.LoDTensor(torch.arange(6.0), [[0, 2, 6]]),
        ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))]),
        ln.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)], layout=torch.jagged),
    ]
    for obj in objs:
        blob = pickle.dumps(obj)
        assert b"_reconstruct" not in blob and b"_rebuild_tensor" not in blob and b"_load_from_bytes" not in blob
        again = pickle.loads(blob)
        assert type(again) is type(obj)
    with pytest.raises(TypeError, match="numeric or bool NumPy dtype, got 'm8'"):
        array_from_bytes("numpy", b"\0" * 8, "m8", (1,), "cpu", False)
    with pytest.raises(ValueError, match=r"needs 16 bytes, the pickle holds 8"):
        array_from_bytes("numpy", b"\0" * 8, "<i8", (2,), "cpu", False)
    with pytest.raises(ValueError, match="shape must be a tuple of non-negative ints"):
        array_from_bytes("torch", b"", "float32", (-1,), "cpu", False)
    with pytest.raises(TypeError, match="must name a numeric or bool torch dtype"):
        array_from_bytes("torch", b"", "Tensor", (0,), "cpu", False)


def test_torch_never_gets_a_writable_alias_of_a_lod():
    """torch ignores read-only memory (``from_numpy``, and DLPack 1.0's read-only flag in
    ``from_dlpack``), so every export to torch hands over copies of the LoD's levels: writing them
    cannot reach the LoD, the tensors sharing it, or what the gate recognises without a check."""
    torch = pytest.importorskip("torch")
    from lodtensor.interop.dlpack import _Producer

    t = lt.LoDTensor(np.arange(500.0), recursive_sequence_lengths=[[5] * 100])
    lod = t.lod()
    _, (capsule,) = t.__dlpack_ragged__(max_version=(1, 0))
    torch.from_dlpack(_Producer(capsule, (1, 0)))[1] = 70
    njt = t.to_nested_jagged()
    njt.offsets()[1] = 71
    csr = t.to_sparse_csr()
    csr.crow_indices()[1] = 72
    csr.col_indices()[0] = 73
    assert t.lod() == lod and t.to_sparse_csr().col_indices()[0] == 0
    assert t.to_nested_jagged().offsets()[:3].tolist() == [0, 5, 10]  # made anew: the written copy is not reused
    njt.offsets()[2] = 3  # now decreasing: the written offsets are checked again, not recognised
    with pytest.raises(lt.LoDError, match="non-decreasing|decreas"):
        lt.from_torch(njt)
    again = lt.from_torch(t.to_nested_jagged())  # unwritten: known in O(1), the LoD's own level
    assert again.lod.levels[0] is t.lod.levels[0]
    with torch.inference_mode():  # inference tensors keep no version: converted and checked every time
        assert lt.from_torch(t.to_nested_jagged()).lod() == lod


def test_torch_dtypes_that_hold_no_numbers_are_refused():
    """qint8, bits8 and sub-byte dtypes: no op computes with them (repr, tolist and the kernels fail
    inside torch), so the LoDTensor gate refuses them, as NumPy's void and object dtypes."""
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        odd = [torch.empty(2, dtype=torch.qint8), torch.zeros(2, dtype=torch.uint8).view(torch.bits8)]
        odd += [torch.empty(2, dtype=getattr(torch, name)) for name in ("uint1", "int4") if hasattr(torch, name)]
    for x in odd:
        with pytest.raises(TypeError, match=f"data must have a numeric or bool dtype .* got {x.dtype}"):
            lt.LoDTensor(x, [[0, 2]])
    for dtype in (torch.int8, torch.int64, torch.uint8, torch.bool, torch.float16, torch.complex64):
        assert lt.LoDTensor(torch.zeros(2, dtype=dtype), [[0, 2]]).dtype == dtype


def test_unpickled_nested_buffers_pass_the_dtype_gate():
    from lodtensor.nested._tensor import _rebuild

    for buf in (np.array([1, "a", None], dtype=object), np.array(["a", "b", "c"]), np.zeros(3, "V8")):
        with pytest.raises(TypeError, match="unpickling a NestedTensor: the buffer must have a numeric or bool"):
            _rebuild(buf, np.array([[1], [2]]), "strided")
    assert _rebuild(np.arange(3.0), np.array([[1], [2]]), "strided").to_lod_tensor().lod() == [[0, 1, 3]]


def test_writers_refuse_a_lod_that_does_not_fit_the_rows(tmp_path):
    from lodtensor.fluid import io

    t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    t.set(np.arange(3.0))  # three rows under a lod of five
    for call, where in ((lambda: io.save_lod_tensor(t, tmp_path / "a"), "save_lod_tensor"),
                        (lambda: io.save_combine({"w": t}, tmp_path / "b"), "save_combine\\(\\): 'w'"),
                        (t.__dlpack_ragged__, "__dlpack_ragged__")):
        with pytest.raises(lt.LoDError, match=f"{where}.*the lod does not fit the data"):
            call()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_unpickled_torch_arrays_name_what_is_wrong():
    torch = pytest.importorskip("torch")
    from lodtensor.backend._pickle import array_from_bytes

    cases = [(("torch", b"\0" * 2, "qint8", (2,), "cpu", False), TypeError, "numeric or bool torch dtype, got 'qint8'"),
             (("torch", b"\0" * 8, "int32", (2,), "cpu", True), ValueError,
              "requires_grad=True needs a floating or complex dtype, got 'int32'"),
             (("torch", b"\0" * 2, "int8", (2,), "meta", False), ValueError, "device 'meta' holds no data")]
    if not torch.cuda.is_available():
        cases.append((("torch", b"\0" * 2, "int8", (2,), "cuda", False), ValueError,
                      "device 'cuda' is not available here"))
    for args, exc, message in cases:
        with pytest.raises(exc, match=message):
            array_from_bytes(*args)
    assert array_from_bytes("torch", b"\0" * 8, "float32", (2,), "cpu", True).requires_grad


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_child_forked_while_a_cache_lock_is_held_does_not_hang():
    """A lock another thread holds at the fork is never released in the child: every plan cache (and
    the SpMM buffers' lock) starts over there."""
    from lodtensor import _cache
    from lodtensor.backend.numpy import _util

    t = lt.LoDTensor(np.arange(10.0), [[0, 4, 10]])
    caches = list(_cache._CACHES)
    assert _util._PLANS in caches
    for cache in caches:
        cache._lock.acquire()  # as a parent's thread in the middle of a get
    try:
        pid = os.fork()
        if pid == 0:  # the child: one op through the caches, then out without running the parent's atexit
            code = 0 if sequence_pool(t, "sum").data.tolist() == [6.0, 39.0] else 1
            os._exit(code)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on a cache lock")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        for cache in caches:
            cache._lock.release()


def test_threaded_work_has_finished_when_an_error_reaches_the_caller():
    from lodtensor.backend._threads import run_together

    finished = []

    def helper():
        time.sleep(0.2)
        finished.append(True)

    def caller():
        raise FloatingPointError("the caller's part failed")

    with pytest.raises(FloatingPointError, match="the caller's part"):
        run_together(caller, [helper, helper])
    assert finished == [True, True]  # both helpers were waited for


def test_ufunc_where_and_copy_false_on_a_lodtensor():
    t = lt.LoDTensor(np.arange(1.0, 11.0).reshape(5, 2), [[0, 2, 5]])
    out = lt.LoDTensor(np.zeros((5, 2)), t.lod)
    np.add(t, 1, out=out, where=(t > 4))  # a LoDTensor mask: recursed without end before
    assert out.data.tolist() == [[0, 0], [0, 0], [6, 7], [8, 9], [10, 11]]
    with pytest.raises(lt.LoDError, match="where= has lod"):
        np.add(t, 1, out=out, where=lt.LoDTensor(np.ones((5, 2), bool), [[0, 1, 5]]))
    assert np.shares_memory(np.array(t, copy=False), t.data)
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        with pytest.raises(ValueError, match="Unable to avoid copy"):
            np.array(t, dtype=np.float32, copy=False)  # as NumPy's own arrays: "never copy" refuses


def test_writes_into_jagged_offsets_that_torch_does_not_count_are_caught_too():
    pytest.importorskip("torch")
    t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    njt = t.to_nested_jagged()
    assert t.to_nested_jagged().offsets() is njt.offsets()  # one per LoD: the njts share a nested int
    njt.offsets().numpy()[1] = 3  # no version bump: torch does not see a write through .numpy()
    assert lt.from_torch(njt).lod() == [[0, 3, 5]]  # the njt's own offsets, not the LoD's
    assert t.lod() == [[0, 2, 5]] and t.to_nested_jagged().offsets().tolist() == [0, 2, 5]  # made anew


def test_negative_strides_reach_torch_as_a_copy():
    torch = pytest.importorskip("torch")
    reversed_rows = lt.LoDTensor(np.arange(6.0)[::-1], [[0, 2, 6]])  # torch refuses negative strides itself
    assert reversed_rows.to_torch().data.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    assert lt.get_backend("torch").asarray(np.arange(4)[::-2]).tolist() == [3, 1]
    assert torch.equal(lt.LoDTensor(torch.arange(3.0), [[0, 3]]).data, torch.arange(3.0))
