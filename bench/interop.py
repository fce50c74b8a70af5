"""lodtensor.interop: conversion cost against the memory-copy limit and the libraries' own paths.

Workload (fixed seed): a corpus of 10,000 documents -> sentences (1..40 each)
-> tokens (1..26 each), about 2.7M int64 token ids: a 2-level LoDTensor.

Tables:

- Arrow: ``to_arrow`` / ``from_arrow`` against pyarrow building the same
  nested ``LargeListArray`` from the buffers by hand and awkward's
  ``ak.to_arrow`` / ``ak.from_arrow``; ``from_arrow`` of a foreign array
  (its offsets checked, one pass each) and of one lodtensor made (recognised).
- torch: ``to_nested_jagged`` / ``from_torch(njt)`` against
  ``torch.nested.nested_tensor_from_jagged`` by hand (one level: the sentences).
- sparse: ``to_sparse_csr`` against ``torch.sparse_csr_tensor`` from parts
  already built (the column indices are computed once per LoD and kept).
- Parquet: ``read_parquet`` against ``pyarrow.parquet.read_table`` plus the
  conversion by hand, and ``ak.from_parquet``.
- IPC: ``lt.load(mmap=True)`` of a 1 GiB file against pyarrow's own
  memory-mapped read (no checks) and ``np.load(mmap_mode="r")``.

The memory-copy limit is ``np.copyto`` of the token ids (21 MiB): a
conversion that shares buffers should be far below it, whatever the size.

Goals (issue #10): to_arrow / from_arrow / to_nested_jagged / from_torch(njt) under 50 us;
to_sparse_csr no slower than torch from parts with its own index copies (torch has no read-only
tensors, so it hands over copies); read_parquet >= 0.95x the speed of read_table plus the conversion
by hand, and faster than ak.from_parquet; load of 1 GiB under 10 ms.
"""

import os
import shutil
import tempfile
import warnings

import _common
import numpy as np

import lodtensor as lt

TITLE = "interop: Arrow, Parquet, IPC, torch and sparse conversions"

FAST = {"budget": 0.3}
SLOW = {"budget": 0.6, "min_repeat": 3}
DOCS = 10_000


def corpus():
    """The 2-level corpus LoDTensor (documents -> sentences -> int64 tokens)."""
    g = _common.rng(101)
    sents = g.integers(1, 41, size=DOCS)
    tokens = g.integers(1, 27, size=int(sents.sum()))
    ids = g.integers(0, 50_000, size=int(tokens.sum()), dtype=np.int64)
    return lt.LoDTensor(ids, recursive_sequence_lengths=[sents, tokens])


def _arrow_by_hand(pa, t):
    arr = pa.array(t.data)  # zero-copy for int64 NumPy
    for offsets in reversed(t.lod.levels):
        arr = pa.LargeListArray.from_arrays(pa.array(offsets), arr)
    return arr


def _foreign_arrow(pa, t):
    """The same corpus as an Arrow array that lodtensor did not make (fresh offsets buffers)."""
    arr = pa.array(t.data.copy())
    for offsets in reversed(t.lod.levels):
        arr = pa.LargeListArray.from_arrays(pa.array(offsets.copy()), arr)
    return arr


def _arrow_table(report, t, copy_s):
    pa = _common.optional("pyarrow")
    ak = _common.optional("awkward")
    table = report.table(
        "to_arrow: LoDTensor -> nested LargeListArray",
        f"{DOCS:,} docs, {len(t.lod.levels[1]) - 1:,} sentences, {t.num_rows:,} int64 tokens",
        reference="lodtensor t.to_arrow()",
        limit="memory-copy limit (np.copyto of the tokens)",
        unit="us",
        goal="under 50 us, O(levels)",
    )
    if pa is None:
        table.missing("lodtensor t.to_arrow()", "pyarrow not installed")
        return None
    table.add_result("memory-copy limit (np.copyto of the tokens)", copy_s)
    table.add("lodtensor t.to_arrow()", t.to_arrow, **FAST)
    table.add("pyarrow LargeListArray.from_arrays by hand", lambda: _arrow_by_hand(pa, t), **FAST)
    if ak is not None:
        a = t.to_awkward()
        table.add("awkward ak.to_arrow(ak.Array)", lambda: ak.to_arrow(a, extensionarray=False), **FAST)
    else:
        table.missing("awkward ak.to_arrow(ak.Array)")
    ours = t.to_arrow()
    foreign = _foreign_arrow(pa, t)
    back = report.table(
        "from_arrow: nested LargeListArray -> LoDTensor",
        "the same corpus; 'foreign': an array lodtensor did not make (each offsets level checked once)",
        reference="lodtensor lt.from_arrow (its own array: recognised)",
        limit="memory-copy limit (np.copyto of the tokens)",
        unit="us",
        goal="under 50 us, O(levels), for an array from to_arrow",
    )
    back.add_result("memory-copy limit (np.copyto of the tokens)", copy_s)
    back.add("lodtensor lt.from_arrow (its own array: recognised)", lambda: lt.from_arrow(ours), **FAST)
    back.add("lodtensor lt.from_arrow (foreign array: offsets checked)", lambda: lt.from_arrow(foreign), **FAST)
    back.add(
        "pyarrow by hand: buffers to NumPy, no checks",
        lambda: (foreign.values.values.to_numpy(), foreign.values.offsets.to_numpy(), foreign.offsets.to_numpy()),
        **FAST,
    )
    if ak is not None:
        back.add("awkward ak.from_arrow", lambda: ak.from_arrow(foreign), **FAST)
    else:
        back.missing("awkward ak.from_arrow")
    return table, back


def _torch_tables(report, t, copy_s):
    torch = _common.optional("torch")
    sentences = lt.LoDTensor(t.data, [t.lod.levels[1]])
    if torch is None:
        report.notes.append("torch not installed: torch tables skipped")
        return None
    values = torch.from_numpy(t.data)
    offsets = torch.from_numpy(t.lod.levels[1].copy())
    lengths = np.diff(t.lod.levels[1])
    lo, hi = int(lengths.min()), int(lengths.max())
    to = report.table(
        "to_nested_jagged / from_torch(njt): one level (sentences)",
        f"{len(lengths):,} sentences, {t.num_rows:,} tokens",
        reference="lodtensor t.to_nested_jagged()",
        limit="memory-copy limit (np.copyto of the tokens)",
        unit="us",
        goal="under 50 us each way",
    )
    to.add_result("memory-copy limit (np.copyto of the tokens)", copy_s)
    to.add("lodtensor t.to_nested_jagged()", sentences.to_nested_jagged, **FAST)
    # torch data the caller holds: torch's view op (autograd and version checks as torch's own)
    held = lt.from_torch(values, sentences.lod)
    to.add("lodtensor t.to_nested_jagged() (torch data: torch's view op)", held.to_nested_jagged, **FAST)
    to.add(
        "torch nested_tensor_from_jagged by hand",
        lambda: torch.nested.nested_tensor_from_jagged(values, offsets, min_seqlen=lo, max_seqlen=hi),
        **FAST,
    )
    njt = sentences.to_nested_jagged()
    foreign = torch.nested.nested_tensor_from_jagged(values, offsets, min_seqlen=lo, max_seqlen=hi)
    to.add("lodtensor lt.from_torch(njt) (its own njt: recognised)", lambda: lt.from_torch(njt), **FAST)
    to.add(
        "lodtensor lt.from_torch(njt) (foreign njt: offsets copied, checked)", lambda: lt.from_torch(foreign), **FAST
    )
    to.add(
        "torch by hand: njt.values(), njt.offsets() (no checks)", lambda: (foreign.values(), foreign.offsets()), **FAST
    )

    data32 = torch.from_numpy(t.data.astype(np.float32))
    dense = lt.LoDTensor(data32.numpy(), [t.lod.levels[1]])
    crow = torch.from_numpy(t.lod.levels[1].copy())
    dense.to_sparse_csr()  # the column indices, built once per LoD
    seq = np.repeat(np.arange(len(lengths)), lengths)
    cols = torch.from_numpy(np.arange(t.num_rows) - t.lod.levels[1][:-1][seq])
    shape = (len(lengths), hi)
    sp = report.table(
        "to_sparse_csr (torch): sentences x positions, float32 values",
        f"{len(lengths):,} rows, {t.num_rows:,} stored values; column indices kept with the LoD after the first call",
        reference="lodtensor t.to_sparse_csr()",
        limit="memory-copy limit (np.copyto of the tokens)",
        unit="us",
        goal="no slower than torch from parts with its own index copies (torch has no read-only tensors)",
    )
    sp.add_result("memory-copy limit (np.copyto of the tokens)", copy_s)
    sp.add("lodtensor t.to_sparse_csr()", dense.to_sparse_csr, **FAST)

    def by_hand():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(crow, cols, data32, size=shape, check_invariants=False)

    sp.add("torch sparse_csr_tensor from prebuilt parts", by_hand, **FAST)

    def by_hand_copies():  # what to_sparse_csr hands over: index arrays of the caller's own
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(crow.clone(), cols.clone(), data32, size=shape, check_invariants=False)

    sp.add("torch sparse_csr_tensor from parts, indices copied", by_hand_copies, **FAST)
    return to, sp


def _parquet_table(report, t, tmp):
    pa = _common.optional("pyarrow")
    ak = _common.optional("awkward")
    if pa is None:
        return None
    import pyarrow.parquet as pq  # noqa: PLC0415 - optional

    path = os.path.join(tmp, "corpus.parquet")
    lt.write_parquet(path, {"tokens": t})
    size = os.path.getsize(path)

    def by_hand():
        col = pq.read_table(path)["tokens"].combine_chunks()
        sent = col.values
        data = sent.values.to_numpy()
        return lt.LoDTensor(data, [col.offsets.to_numpy(), sent.offsets.to_numpy()])

    table = report.table(
        "read_parquet: a Parquet file of the corpus -> LoDTensor",
        f"{_common.describe_sizes(size)} file (snappy), one list<list<int64>> column",
        reference="lodtensor lt.read_parquet",
        unit="ms",
        goal=">= 0.95x the speed of read_table + conversion by hand; faster than ak.from_parquet",
    )
    check = lambda cols: np.testing.assert_array_equal(cols["tokens"].data, t.data)  # noqa: E731
    table.add("lodtensor lt.read_parquet", lambda: lt.read_parquet(path), check=check, **SLOW)
    table.add("pyarrow read_table + conversion by hand", by_hand, **SLOW)
    table.add("pyarrow read_table alone", lambda: pq.read_table(path), **SLOW)
    if ak is not None:
        table.add("awkward ak.from_parquet", lambda: ak.from_parquet(path), **SLOW)
    else:
        table.missing("awkward ak.from_parquet")
    return table


def _load_table(report, tmp):
    pa = _common.optional("pyarrow")
    if pa is None:
        return None
    rows, width = 1 << 22, 64  # 4M rows x 64 float32 = 1 GiB
    data = np.zeros((rows, width), dtype=np.float32)  # calloc'd: no RAM until touched
    lengths = np.full(rows // 256, 256, dtype=np.int64)
    t = lt.LoDTensor(data, recursive_sequence_lengths=[lengths])
    path = os.path.join(tmp, "big.arrow")
    lt.save(path, t)
    npy = os.path.join(tmp, "big.npy")
    np.save(npy, data)
    del data, t
    size = os.path.getsize(path)

    def pyarrow_mmap():
        with pa.memory_map(path, "r") as source:
            return pa.ipc.open_file(source).get_batch(0)

    table = report.table(
        "load(mmap=True): a saved LoDTensor, memory-mapped",
        f"{size / 2**30:.2f} GiB file: {rows:,} rows x {width} float32, {len(lengths):,} sequences",
        reference="lodtensor lt.load(mmap=True)",
        unit="ms",
        goal="under 10 ms for 1 GiB",
    )
    table.add("lodtensor lt.load(mmap=True)", lambda: lt.load(path), **FAST)
    table.add("pyarrow memory_map + ipc.open_file + get_batch (no checks)", pyarrow_mmap, **FAST)
    table.add("numpy np.load(mmap_mode='r') of the same data as .npy", lambda: np.load(npy, mmap_mode="r"), **FAST)
    table.add(
        "lodtensor lt.load(mmap=False) (reads the file)", lambda: lt.load(path, mmap=False), budget=0.5, min_repeat=2
    )
    return table


def _goal_under(report, table, name, limit_s, text):
    best = table._best(name) if table is not None else None
    report.goal(text, None if best is None else best < limit_s, "" if best is None else f"{best * 1e6:.1f} us")


def run(report):
    t = corpus()
    scratch = np.empty_like(t.data)
    copy_s = _common.timeit(lambda: np.copyto(scratch, t.data), **FAST)["best"]
    report.facts.update({"documents": DOCS, "sentences": len(t.lod.levels[1]) - 1, "tokens": t.num_rows})
    tmp = tempfile.mkdtemp(prefix="lt-bench-interop-")
    try:
        arrow = _arrow_table(report, t, copy_s)
        torch_tables = _torch_tables(report, t, copy_s)
        parquet = _parquet_table(report, t, tmp)
        load = _load_table(report, tmp)
        for table in report.tables:  # the later timing passes, while the files exist
            table.finish()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if arrow is not None:
        _goal_under(report, arrow[0], "lodtensor t.to_arrow()", 50e-6, "to_arrow under 50 us")
        _goal_under(
            report,
            arrow[1],
            "lodtensor lt.from_arrow (its own array: recognised)",
            50e-6,
            "from_arrow (of to_arrow's array) under 50 us",
        )
    if torch_tables is not None:
        _goal_under(report, torch_tables[0], "lodtensor t.to_nested_jagged()", 50e-6, "to_nested_jagged under 50 us")
        _goal_under(
            report,
            torch_tables[0],
            "lodtensor lt.from_torch(njt) (its own njt: recognised)",
            50e-6,
            "from_torch(njt) (of to_nested_jagged's njt) under 50 us",
        )
        ours = torch_tables[1]._best("lodtensor t.to_sparse_csr()")
        hand = torch_tables[1]._best("torch sparse_csr_tensor from parts, indices copied")
        report.goal(
            "to_sparse_csr no slower than torch from parts with its index copies (1.1x)",
            None if None in (ours, hand) else ours <= 1.1 * hand,
            "" if None in (ours, hand) else f"{ours / hand:.2f}x",
        )
    if parquet is not None:
        ours = parquet._best("lodtensor lt.read_parquet")
        hand = parquet._best("pyarrow read_table + conversion by hand")
        akp = parquet._best("awkward ak.from_parquet")
        report.goal(
            "read_parquet >= 0.95x the speed of read_table + conversion by hand",
            None if None in (ours, hand) else hand / ours >= 0.95,
            "" if None in (ours, hand) else f"{hand / ours:.2f}x",
        )
        report.goal(
            "read_parquet faster than ak.from_parquet",
            None if None in (ours, akp) else ours < akp,
            "" if None in (ours, akp) else f"{akp / ours:.2f}x",
        )
    if load is not None:
        best = load._best("lodtensor lt.load(mmap=True)")
        report.goal(
            "load(mmap=True) of 1 GiB under 10 ms",
            None if best is None else best < 10e-3,
            "" if best is None else f"{best * 1e3:.2f} ms",
        )
