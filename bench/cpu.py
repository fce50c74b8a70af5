"""CPU kernels side by side, interleaved: lodtensor's NumPy backend (NumPy alone, and with SciPy)
against Paddle 2.6.2, TensorFlow, torch, NumPy by hand, awkward and the memory-copy limit.

The rows of issue #16: ``sequence_pool`` sum/average (the ``make bench`` workloads of
``bench/sequence.py``), segment max/mean on short sequences (2,266 x 1..64 rows, D=256),
relu, ``linear`` on the flat buffer, softmax over the ragged dim and ``from_padded``
(see ``_cpudata`` for the workloads). The machine is shared and noisy, so every row is
timed in ``BENCH_CPU_ROUNDS`` rounds (default 3): each round runs every contender once
(Paddle and TensorFlow in their own interpreters: ``BENCH_PADDLE_PYTHON``, default
``.venv-paddle``; ``BENCH_TF_PYTHON``, default ``.venv-tf``), and the ratio lodtensor /
best peer is taken within each round. The table gives each contender's best time, the
median ratio and its spread (min..max over rounds).

``BENCH_CPU_ROWS`` narrows the run: ``|``-separated patterns, a row runs when one of them
occurs in its ``"op, workload"`` (``BENCH_CPU_ROWS="sum|mean|max"`` for the segment reductions,
``BENCH_CPU_ROWS="sum, docs D=16"`` for one row).

"NumPy alone" runs lodtensor with SciPy hidden from it: what ``pip install lodtensor`` gives,
its compiled segment kernel (built at install) doing the segment reductions; "NumPy-only kernels"
switches that kernel off too (the chunk and block-piece kernels, as where no C compiler was found
at install). torch, TensorFlow and lodtensor use their default threads
(2 on the benchmark machine); Paddle's CPU kernels run on one thread.
"""

import contextlib
import os
import sys

import _common
import _cpudata
import numpy as np

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend import compiled_kernels

TITLE = "CPU kernels: lodtensor vs Paddle, TensorFlow, torch, NumPy by hand, awkward (interleaved)"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(os.environ.get("BENCH_CPU_ROUNDS", "3"))
BUDGET = float(os.environ.get("BENCH_CPU_BUDGET", "0.15"))
OURS = "lodtensor (NumPy alone)"

# (op, workload): the rows of the summary table
ROWS = [
    ("sum", "docs D=256"), ("sum", "docs D=16"), ("sum", "2.7M rows D=16"),
    ("mean", "docs D=256"), ("mean", "docs D=16"), ("mean", "2.7M rows D=16"),
    ("max", "2266 x 1-64 D=256"), ("mean", "2266 x 1-64 D=256"),
    ("relu", "2266 x 1-64 D=256"), ("relu", "2.7M rows D=16"),
    ("linear", "2266 x 1-64 D=256"),
    ("softmax", "docs D=16"), ("softmax", "2.7M rows D=16"),
    ("unpad", "2266 x 1-64 D=256"),
    # issue #27's small-batch rows: 256 documents, D=16, ~75K rows (a fixed cost per call shows here)
    ("relu", "docs D=16"), ("linear", "docs D=16"), ("pad", "docs D=16"), ("unpad", "docs D=16"),
]


def _selected(rows, spec):
    """The rows of ``rows`` whose ``"op, workload"`` contains one of the ``|``-separated patterns of ``spec``.

    >>> rows = [("sum", "docs D=16"), ("mean", "docs D=16"), ("relu", "docs D=16")]
    >>> _selected(rows, "sum|mean")
    [('sum', 'docs D=16'), ('mean', 'docs D=16')]
    >>> _selected(rows, "mean, docs")
    [('mean', 'docs D=16')]
    >>> len(_selected(rows, ""))
    3
    """
    patterns = [p.strip() for p in spec.split("|") if p.strip()]
    if not patterns:
        return list(rows)
    chosen = [(op, w) for op, w in rows if any(p in f"{op}, {w}" for p in patterns)]
    if not chosen:
        raise SystemExit(f"BENCH_CPU_ROWS={spec!r} matches no row of bench/cpu.py")
    return chosen


PADDLE_OPS = {"sum": "sum", "mean": "average", "max": "max", "softmax": "softmax"}
TF_OPS = {"sum", "mean", "max", "relu", "linear", "unpad", "pad"}


@contextlib.contextmanager
def _numpy_alone():
    """lodtensor's NumPy backend as if SciPy were not installed."""
    from lodtensor.backend.numpy import _routes  # noqa: PLC0415

    saved = _routes._SPARSE
    _routes._SPARSE = False
    try:
        yield
    finally:
        _routes._SPARSE = saved


def _alone(fn):
    def call():
        with _numpy_alone():
            return fn()
    return call


def _uncompiled(fn):
    """``fn`` with lodtensor's compiled segment kernel off (its NumPy-only kernels, without SciPy)."""
    from lodtensor.backend import set_compiled_kernels  # noqa: PLC0415

    def call():
        saved = set_compiled_kernels(False)
        try:
            with _numpy_alone():
                return fn()
        finally:
            set_compiled_kernels(saved)
    return call


def _pool_off(fn):
    """``fn`` with lodtensor's output buffer pool off (every large output a fresh allocation)."""
    from lodtensor.backend import get_buffer_pool, set_buffer_pool  # noqa: PLC0415

    def call():
        saved = get_buffer_pool()
        set_buffer_pool(0)
        try:
            return fn()
        finally:
            set_buffer_pool(saved)
    return call


def _python(env, venv):
    return os.environ.get(env) or os.path.join(ROOT, venv, "bin", "python")


def _workers(budget, rows):
    """One round of Paddle and TensorFlow timings for ``rows``: ``{(op, workload): (name, seconds)}`` and notes."""
    found, notes = {}, []
    paddle_python = _python("BENCH_PADDLE_PYTHON", ".venv-paddle")
    wanted = sorted({_cpudata.PADDLE_NAMES[w] for op, w in rows if op in PADDLE_OPS and w in _cpudata.PADDLE_NAMES})
    if not wanted:
        pass  # no row of this run has a Paddle counterpart
    elif os.path.exists(paddle_python):
        spec = {"workloads": wanted, "ops": sorted(set(PADDLE_OPS.values())), "budget": budget}
        result, reason = _common.run_worker(paddle_python, "_paddle_worker.py", spec, "not installed")
        if result is None:
            notes.append(f"Paddle: {reason}")
        else:
            back = {v: k for k, v in _cpudata.PADDLE_NAMES.items()}
            for case in result["cases"]:
                for op, res in case["ops"].items():
                    mine = next(k for k, v in PADDLE_OPS.items() if v == op)
                    if "time" in res:
                        found.setdefault((mine, back[case["name"]]), {})["Paddle 2.6.2"] = res["time"]["best"]
    else:
        notes.append("Paddle: not installed (make test-paddle, or BENCH_PADDLE_PYTHON)")
    tf_python = _python("BENCH_TF_PYTHON", ".venv-tf")
    if not os.path.exists(tf_python):
        tf_python = sys.executable
    ops = {}
    for op, w in rows:
        if op in TF_OPS:
            ops.setdefault(w, []).append(op)
    if not ops:
        return found, notes
    spec = {"budget": budget, "cpu": {"workloads": sorted(ops), "ops": ops}}
    result, reason = _common.run_worker(tf_python, "_tf_worker.py", spec,
                                        "not installed (pip install tensorflow-cpu, or set BENCH_TF_PYTHON)")
    if result is None:
        notes.append(f"TensorFlow: {reason}")
    else:
        for w, res in result["cpu"].items():
            for op, t in res.items():
                found.setdefault((op, w), {})[f"TensorFlow {result['version']}"] = t["best"]
    return found, notes


def _contenders(op, workload, data, offsets, torch, ak):
    """``[(name, fn, is_ours)]`` for one row; every fn computes the same result (checked once)."""
    lengths = np.diff(offsets)
    n, width = lengths.size, data.shape[1]
    t = lt.LoDTensor(data, recursive_sequence_lengths=[lengths.tolist()])
    out = []
    if op in ("sum", "mean", "max"):
        kind = {"sum": "sum", "mean": "average", "max": "max"}[op]
        out.append((OURS, _alone(lambda: S.sequence_pool(t, kind).data), True))
        if compiled_kernels():
            out.append(("lodtensor (NumPy-only kernels, compiled kernel off)",
                        _uncompiled(lambda: S.sequence_pool(t, kind).data), True))
        elif op != "max":
            out.append(("lodtensor (NumPy + SciPy)", lambda: S.sequence_pool(t, kind).data, True))
        if op == "max":
            out.append(("NumPy by hand (reduceat)", lambda: np.maximum.reduceat(data, offsets[:-1], axis=0), False))
        else:
            by_hand = (lambda: np.add.reduceat(data, offsets[:-1], axis=0)) if op == "sum" else (
                lambda: np.add.reduceat(data, offsets[:-1], axis=0) / lengths[:, None].astype(np.float32))
            out.append(("NumPy by hand (reduceat)", by_hand, False))
        if torch is not None:
            td = torch.from_numpy(data)
            ids = torch.from_numpy(np.repeat(np.arange(n), lengths))
            tids = ids[:, None].expand(-1, width)
            reduce = {"sum": "sum", "mean": "mean", "max": "amax"}[op]
            out.append((f"torch scatter_reduce_ ({reduce})",
                        lambda: torch.zeros(n, width).scatter_reduce_(0, tids, td, reduce, include_self=False), False))
            if op == "sum":
                out.append(("torch index_add_", lambda: torch.zeros(n, width).index_add_(0, ids, td), False))
            toffs = torch.from_numpy(offsets)
            out.append(("torch.segment_reduce", lambda: torch.segment_reduce(td, reduce.replace("amax", "max"),
                                                                             offsets=toffs, axis=0), False))
        if ak is not None:
            arr = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), ak.contents.NumpyArray(data)))
            fn = {"sum": ak.sum, "mean": ak.mean, "max": ak.max}[op]
            out.append((f"awkward ak.{fn.__name__}(axis=1)", lambda: ak.to_numpy(fn(arr, axis=1)), False))
    elif op == "relu":
        buf = np.empty_like(data)
        out.append((OURS, lambda: np.maximum(t, 0).data, True))
        out.append(("lodtensor (out=)", lambda: np.maximum(t, 0, out=buf), True))
        out.append(("lodtensor (buffer pool off)", _pool_off(lambda: np.maximum(t, 0).data), True))
        out.append(("NumPy by hand (np.maximum)", lambda: np.maximum(data, 0), False))
        if torch is not None:
            td = torch.from_numpy(data)
            out.append(("torch.relu", lambda: torch.relu(td), False))
        if ak is not None:
            arr = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), ak.contents.NumpyArray(data)))
            out.append(("awkward np.maximum", lambda: np.maximum(arr, 0), False))
    elif op == "linear":
        import lodtensor.nested as ln  # noqa: PLC0415

        w, b = _cpudata.linear_weights(width)
        nt = ln.nested_tensor_from_jagged(data, offsets)
        out.append((OURS, lambda: ln.linear(nt, w, b), True))
        out.append(("lodtensor (buffer pool off)", _pool_off(lambda: ln.linear(nt, w, b)), True))
        out.append(("NumPy by hand (x @ w.T + b)", lambda: data @ w.T + b, False))
        if torch is not None:
            td, tw, tb = torch.from_numpy(data), torch.from_numpy(w), torch.from_numpy(b)
            out.append(("torch F.linear", lambda: torch.nn.functional.linear(td, tw, tb), False))
    elif op == "softmax":
        scores = lt.LoDTensor(np.ascontiguousarray(data[:, :1]), t.lod)
        s = scores.data

        def by_hand():
            peak = np.maximum.reduceat(s, offsets[:-1], axis=0)
            e = np.exp(s - np.repeat(peak, lengths, axis=0))
            return e / np.repeat(np.add.reduceat(e, offsets[:-1], axis=0), lengths, axis=0)

        out.append((OURS, lambda: S.sequence_softmax(scores).data, True))
        out.append(("NumPy by hand (reduceat, exp, repeat)", by_hand, False))
    elif op == "pad":
        _, mask = _cpudata.padded_of(data, offsets)

        def by_hand():
            out = np.zeros(mask.shape + data.shape[1:], dtype=data.dtype)
            out[mask] = data
            return out

        out.append((OURS, lambda: t.to_padded(pad_value=0.0)[0], True))
        out.append(("lodtensor (buffer pool off)", _pool_off(lambda: t.to_padded(pad_value=0.0)[0]), True))
        out.append(("NumPy by hand (zeros, out[mask] = rows)", by_hand, False))
        if torch is not None:
            td, tm = torch.from_numpy(data), torch.from_numpy(mask)
            out.append(("torch zeros + masked_scatter_",
                        lambda: torch.zeros(tuple(mask.shape) + (width,)).masked_scatter_(tm[..., None], td), False))
            parts = list(torch.split(td, lengths.tolist()))
            out.append(("torch pad_sequence", lambda: torch.nn.utils.rnn.pad_sequence(parts, batch_first=True), False))
    elif op == "unpad":
        padded, mask = _cpudata.padded_of(data, offsets)
        out.append((OURS, lambda: lt.from_padded(padded, lengths).data, True))
        out.append(("lodtensor (buffer pool off)", _pool_off(lambda: lt.from_padded(padded, lengths).data), True))
        out.append(("NumPy by hand (padded[mask])", lambda: padded[mask], False))
        if torch is not None:
            tp, tm = torch.from_numpy(padded), torch.from_numpy(mask)
            out.append(("torch padded[mask]", lambda: tp[tm], False))
    return out


def _value(x):
    if type(x).__module__.startswith("awkward"):  # a jagged result: its flat rows
        import awkward as ak  # noqa: PLC0415

        return ak.to_numpy(ak.flatten(x, axis=1))
    if type(x).__name__ == "NestedTensor":  # lodtensor.nested: the flat buffer
        return np.asarray(x.values())
    if hasattr(x, "detach"):
        return x.detach().numpy()
    return np.asarray(x)


def run(report):
    torch = _common.optional("torch")
    ak = _common.optional("awkward")
    budget = BUDGET
    times = {}  # (op, workload) -> name -> [seconds per round]
    notes = set()
    data_cache = {}
    rows = _selected(ROWS, os.environ.get("BENCH_CPU_ROWS", ""))
    for rnd in range(ROUNDS):
        found, round_notes = _workers(budget, rows)
        notes.update(round_notes)
        for key, peers in found.items():
            for name, sec in peers.items():
                times.setdefault(key, {}).setdefault(name, [None] * ROUNDS)[rnd] = sec
        for op, workload in rows:
            if workload not in data_cache:
                data_cache.clear()  # one workload in memory at a time
                data_cache[workload] = _cpudata.WORKLOADS[workload]()
            data, offsets = data_cache[workload]
            row = times.setdefault((op, workload), {})
            contenders = _contenders(op, workload, data, offsets, torch, ak)
            if rnd == 0:  # every contender computes the same thing
                ref = _value(contenders[0][1]())
                for name, fn, _ in contenders[1:]:
                    np.testing.assert_allclose(_value(fn()), ref, rtol=2e-4, atol=2e-4, err_msg=name)
            for name, fn, _ in contenders:
                row.setdefault(name, [None] * ROUNDS)[rnd] = _common.timeit(fn, budget=budget)["best"]
            dst = np.empty_like(data)
            row.setdefault("memory-copy limit (np.copyto)", [None] * ROUNDS)[rnd] = _common.timeit(
                lambda dst=dst, data=data: np.copyto(dst, data), budget=budget)["best"]
            report.facts.setdefault("ours", {})[f"{op} {workload}"] = [n for n, _, mine in contenders if mine]
        data_cache.clear()
    summary = []
    for op, workload in rows:
        row = times.get((op, workload), {})
        ours_names = report.facts["ours"][f"{op} {workload}"]
        table = report.table(f"{op}, {workload}", f"{ROUNDS} interleaved rounds; best of each contender",
                             reference=OURS, limit="memory-copy limit (np.copyto)")
        for name, secs in row.items():
            valid = [s for s in secs if s is not None]
            if valid:
                table.add_result(name, min(valid), sorted(valid)[len(valid) // 2], len(valid),
                                 note="ours" if name in ours_names else "")
        table.finish()
        peers = [name for name in row if name not in ours_names and not name.startswith("memory-copy")]
        ratios, best_names = [], []
        for rnd in range(ROUNDS):
            mine = row.get(OURS, [None] * ROUNDS)[rnd]
            theirs = [(row[p][rnd], p) for p in peers if row[p][rnd] is not None]
            if mine is None or not theirs:
                continue
            best, name = min(theirs)
            ratios.append(mine / best)
            best_names.append(name)
        if not ratios:
            continue
        ratios.sort()
        peer = max(set(best_names), key=best_names.count)
        paddle = sorted(row[OURS][r] / row["Paddle 2.6.2"][r] for r in range(ROUNDS)
                        if row.get("Paddle 2.6.2", [None] * ROUNDS)[r] and row[OURS][r])
        summary.append({"op": op, "workload": workload, "ours_ms": 1e3 * min(s for s in row[OURS] if s),
                        "peer": peer, "peer_ms": 1e3 * min(s for s in row[peer] if s),
                        "ratio_median": ratios[len(ratios) // 2], "ratio_min": ratios[0], "ratio_max": ratios[-1],
                        "paddle": [paddle[len(paddle) // 2], paddle[0], paddle[-1]] if paddle else None})
        if paddle:
            report.goal(f"{op}, {workload}: NumPy alone at or below Paddle", paddle[len(paddle) // 2] <= 1.0,
                        f"{paddle[len(paddle) // 2]:.2f}x [{paddle[0]:.2f}-{paddle[-1]:.2f}]")
        mid = ratios[len(ratios) // 2]
        report.goal(f"{op}, {workload}: NumPy alone at or below the best peer ({peer})", mid <= 1.0,
                    f"{mid:.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}]")
    report.facts["summary"] = summary
    report.notes.extend(sorted(notes))
    report.notes.append("summary (markdown):\n" + summary_markdown(summary))


def summary_markdown(summary):
    lines = ["| op | workload | lodtensor, NumPy alone (ms) | best peer | peer (ms) | ratio median [min-max] "
             "| ratio to Paddle |", "|---|---|---:|---|---:|---|---|"]
    for s in summary:
        pp = s.get("paddle")
        paddle = f"{pp[0]:.2f}x [{pp[1]:.2f}-{pp[2]:.2f}]" if pp else "-"
        lines.append(f"| {s['op']} | {s['workload']} | {s['ours_ms']:.3g} | {s['peer']} | {s['peer_ms']:.3g} | "
                     f"{s['ratio_median']:.2f}x [{s['ratio_min']:.2f}-{s['ratio_max']:.2f}] | {paddle} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - use bench/run.py
    sys.exit("run: python bench/run.py cpu")
