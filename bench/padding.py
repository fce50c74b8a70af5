"""Padding: flat rows + offsets <-> dense (num_sequences, maxlen, D).

Workloads (float32, one lod level, lengths uniform in 1..127, mean 64, fixed seed):

- ``D=16``:  about 2.7M rows in 42K sequences (data 164 MiB, padded 327 MiB);
- ``D=256``: about 75K rows in 1.2K sequences (data 73 MiB, padded 145 MiB).

``to_padded`` is compared with the memory-copy limit (``np.copyto`` of as many
bytes as the padded output), NumPy by hand (boolean-mask assignment),
``torch.nested.to_padded_tensor`` (strided and jagged layouts), awkward
(``pad_none`` + ``fill_none`` + ``to_numpy``) and TensorFlow
(``RaggedTensor.from_row_lengths(...).to_tensor()``, run in a subprocess; set
``BENCH_TF_PYTHON`` to a Python that has TensorFlow when it lives in another
venv). ``from_padded`` is compared with the copy of its output bytes and of its
input bytes, ``padded[mask]`` in NumPy and torch, torch.nested.narrow, awkward and
``RaggedTensor.from_tensor(padded, lengths=...)``.

Goal: ``t.to_padded(out=preallocated)`` at least as fast as TensorFlow (which
uses every core; NumPy uses one).
"""

import contextlib
import os
import sys

import _common
import numpy as np

TITLE = "padding: to_padded / from_padded"

CASES = [
    {"name": "D=16", "rows": 2_700_000, "width": 16, "mean_len": 64, "seed_offset": 1},
    {"name": "D=256", "rows": 75_000, "width": 256, "mean_len": 64, "seed_offset": 2},
]

LIMIT = "memory-copy limit (np.copyto)"


def run_tensorflow():
    """TensorFlow timings from the worker subprocess, or ``(None, reason)``."""
    python = os.environ.get("BENCH_TF_PYTHON") or sys.executable
    return _common.run_worker(python, "_tf_worker.py", {"cases": CASES, "budget": _common.BUDGET},
                              "not installed (pip install tensorflow-cpu, or set BENCH_TF_PYTHON)", timeout=300)


@contextlib.contextmanager
def _one_thread():
    """lodtensor's NumPy kernels on one thread (LODTENSOR_NUM_THREADS=1) inside the block."""
    old = os.environ.get("LODTENSOR_NUM_THREADS")
    os.environ["LODTENSOR_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["LODTENSOR_NUM_THREADS"]
        else:
            os.environ["LODTENSOR_NUM_THREADS"] = old


def _on_one_thread(fn):
    """``fn`` made to run on one thread at every call (the table may time it again later)."""
    def call():
        with _one_thread():
            return fn()

    return call


def add_copy_limit(table, name, like, note):
    """Time ``np.copyto`` between two preallocated arrays shaped like ``like`` (freed afterwards)."""
    src = np.ones_like(like)
    dst = np.empty_like(like)
    table.add(name, lambda: np.copyto(dst, src), note=note)


def _torch_contenders(torch, data, lengths, offsets, maxlen):
    """(name, fn, note) for torch.nested.to_padded_tensor on strided and jagged nested tensors."""
    values = torch.from_numpy(data)
    out = []
    strided = torch.nested.nested_tensor(list(values.split(lengths.tolist())), layout=torch.strided)
    out.append(("torch.nested strided to_padded_tensor", lambda: torch.nested.to_padded_tensor(strided, 0.0),
                f"{torch.get_num_threads()} threads"))
    # Without max_seqlen, to_padded_tensor of this jagged tensor fails on torch 2.13 CPU (it tries to
    # allocate terabytes); with the (known) max and min lengths passed in, it works.
    jagged = torch.nested.nested_tensor_from_jagged(values, torch.from_numpy(offsets), max_seqlen=maxlen,
                                                    min_seqlen=int(lengths.min()))
    out.append(("torch.nested jagged to_padded_tensor", lambda: torch.nested.to_padded_tensor(jagged, 0.0),
                f"{torch.get_num_threads()} threads; max_seqlen given"))
    return out


def run_case(report, case, tf_case, tf_note, tf_threads):
    import lodtensor  # noqa: PLC0415

    data, lengths = _common.ragged_rows(case["rows"], case["width"], case["mean_len"], case["seed_offset"])
    offsets = _common.offsets_of(lengths)
    n, maxlen, width = lengths.size, int(lengths.max()), data.shape[1]
    t = lodtensor.LoDTensor.from_lengths(data, lengths)
    ref, _ = t.to_padded()
    workload = (
        f"{case['name']}: {data.shape[0]} rows x {width} float32 in {n} sequences "
        f"(lengths 1..{2 * case['mean_len'] - 1}, maxlen {maxlen}); "
        f"data {_common.describe_sizes(data.nbytes)}, padded {_common.describe_sizes(ref.nbytes)}"
    )
    report.facts[case["name"]] = {"rows": int(data.shape[0]), "width": width, "sequences": int(n), "maxlen": maxlen,
                                  "data_bytes": int(data.nbytes), "padded_bytes": int(ref.nbytes)}

    def same(x):
        x = x[0] if isinstance(x, tuple) else x
        x = x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x
        assert x.shape == ref.shape and np.array_equal(x, ref), "wrong padded result"

    # -- to_padded -----------------------------------------------------------------------------
    table = report.table(f"to_padded, {case['name']}", workload, reference="lodtensor to_padded(out=)",
                         limit=LIMIT, goal="to_padded(out=) at least as fast as TensorFlow")
    add_copy_limit(table, LIMIT, ref, "output bytes, preallocated")
    out = np.empty_like(ref)
    table.add("lodtensor to_padded(out=)", lambda: t.to_padded(out=out), check=same)
    table.add("lodtensor to_padded()", t.to_padded, check=same, note="fresh output")

    def by_hand():
        mask = np.arange(maxlen) < lengths[:, None]
        res = np.zeros(ref.shape, dtype=data.dtype)
        res[mask] = data
        return res

    def by_hand_out():
        mask = np.arange(maxlen) < lengths[:, None]
        out[...] = 0
        out[mask] = data
        return out

    table.add("NumPy by hand: zeros, out[mask] = data", by_hand, check=same)
    table.add("NumPy by hand, out=: out[...] = 0; out[mask] = data", by_hand_out, check=same)

    torch = _common.optional("torch")
    if torch is None:
        table.missing("torch.nested to_padded_tensor")
    else:
        for name, fn, note in _torch_contenders(torch, data, lengths, offsets, maxlen):
            table.add(name, fn, check=same, note=note)

    ak = _common.optional("awkward")
    if ak is None:
        table.missing("awkward pad_none + fill_none + to_numpy")
    else:
        arr = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), ak.contents.NumpyArray(data)))
        zero_row = np.zeros(width, dtype=data.dtype)

        def awkward_pad():
            padded = ak.pad_none(arr, maxlen, axis=1, clip=True)
            return ak.to_numpy(ak.fill_none(padded, zero_row, axis=1))

        table.add("awkward pad_none + fill_none + to_numpy", awkward_pad, check=same)

    if tf_case is None:
        table.missing("tensorflow from_row_lengths(...).to_tensor()", tf_note)
    else:
        assert tf_case["padded_shape"] == list(ref.shape)
        assert np.isclose(tf_case["padded_sum"], ref.sum(dtype=np.float64), rtol=1e-9)
        r = tf_case["to_padded"]
        table.add_result("tensorflow from_row_lengths(...).to_tensor()", r["best"], r["median"], r["n"],
                         note=f"{tf_threads} threads; subprocess")
        r = tf_case["to_tensor_only"]
        table.add_result("tensorflow ragged.to_tensor() (prebuilt ragged)", r["best"], r["median"], r["n"],
                         note=f"{tf_threads} threads")

    def fresh():
        return lodtensor.LoDTensor.from_lengths(data, lengths)

    table.add("lodtensor to_padded(out=), fresh LoD each call", lambda: fresh().to_padded(out=out), check=same,
              note="no cached plan: index built per call")
    table.add("lodtensor to_padded(out=), 1 thread", _on_one_thread(lambda: t.to_padded(out=out)), check=same,
              note="LODTENSOR_NUM_THREADS=1")

    table.finish()
    lod_best = table._best("lodtensor to_padded(out=)")
    tf_best = table._best("tensorflow from_row_lengths(...).to_tensor()")
    if tf_best is None:
        report.goal(f"{case['name']}: to_padded(out=) <= TensorFlow", None, tf_note or "TensorFlow not measured")
    else:
        report.goal(f"{case['name']}: to_padded(out=) <= TensorFlow", lod_best <= tf_best,
                    f"lodtensor / TF = {lod_best / tf_best:.2f}")

    # -- from_padded ---------------------------------------------------------------------------
    padded = ref
    table = report.table(f"from_padded, {case['name']}", workload, reference="lodtensor from_padded",
                         limit=LIMIT, goal="close to the memory-copy limit")

    def same_flat(x):
        if isinstance(x, lodtensor.LoDTensor):
            assert np.array_equal(x.lengths(0), lengths)
            x = x.data
        x = x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x
        assert x.shape == data.shape and np.array_equal(x, data), "wrong flat result"

    add_copy_limit(table, LIMIT, data, "output bytes (the flat rows)")
    add_copy_limit(table, "np.copyto of the input bytes", padded, "padded bytes")
    table.add("lodtensor from_padded", lambda: lodtensor.from_padded(padded, lengths), check=same_flat)
    table.add("lodtensor from_padded, 1 thread", _on_one_thread(lambda: lodtensor.from_padded(padded, lengths)),
              check=same_flat, note="LODTENSOR_NUM_THREADS=1")
    table.add("NumPy by hand: padded[mask]", lambda: padded[np.arange(maxlen) < lengths[:, None]], check=same_flat)
    if torch is None:
        table.missing("torch padded[mask]")
    else:
        pt = torch.from_numpy(padded)
        lt = torch.from_numpy(lengths)
        table.add("torch padded[mask]", lambda: pt[torch.arange(maxlen)[None, :] < lt[:, None]], check=same_flat,
                  note=f"{torch.get_num_threads()} threads")
        zeros = torch.zeros(n, dtype=torch.int64)
        table.add("torch.nested.narrow(jagged).contiguous()",
                  lambda: torch.nested.narrow(pt, 1, zeros, lt, layout=torch.jagged).contiguous().values(),
                  check=same_flat)
    if ak is None:
        table.missing("awkward")
    else:
        def awkward_unpad():
            starts = np.arange(n, dtype=np.int64) * maxlen
            view = ak.contents.ListArray(ak.index.Index64(starts), ak.index.Index64(starts + lengths),
                                         ak.contents.NumpyArray(padded.reshape((n * maxlen, width))))
            return ak.to_packed(ak.Array(view))

        # (a[ak.local_index(a, axis=1) < lengths] on the D=256 case exhausts 23 GB of memory)
        table.add("awkward ListArray(starts, stops) + to_packed", awkward_unpad,
                  check=lambda r: same_flat(ak.to_numpy(ak.flatten(r, axis=1))), note="jagged result")
    if tf_case is None:
        table.missing("tensorflow RaggedTensor.from_tensor(lengths=).flat_values", tf_note)
    else:
        assert tf_case["flat_shape"] == list(data.shape)
        r = tf_case["from_padded"]
        table.add_result("tensorflow RaggedTensor.from_tensor(lengths=).flat_values", r["best"], r["median"],
                         r["n"], note=f"{tf_threads} threads")


def run(report):
    before = _common.parallel_speedup()
    tf_result, tf_note = run_tensorflow()
    tf_threads = None
    if tf_result is not None:
        report.facts["tensorflow"] = tf_result["version"]
        tf_threads = tf_result["intra_op_threads"]
    for k, case in enumerate(CASES):
        tf_case = tf_result["cases"][k] if tf_result is not None else None
        run_case(report, case, tf_case, tf_note, tf_threads)
    after = _common.parallel_speedup()
    report.facts["two_thread_speedup"] = {"before": before, "after": after}
    report.notes.append(
        f"2-thread speedup of a GIL-free compute probe: {before:.2f}x before, {after:.2f}x after this module "
        f"(2.0 = a second core was free; threaded contenders are only comparable when it is)"
    )
