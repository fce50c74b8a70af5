"""Shared pieces of the benchmark suite: timing, optional imports, workloads, tables.

Every benchmark module in ``bench/`` defines ``TITLE`` and ``run(report)``; it
adds tables to the :class:`Report` it is given. ``bench/run.py`` prints the
tables and writes ``bench/results/<module>.json``.

Timing is best-of-N with ``time.perf_counter`` after a warm-up call; N adapts
to the cost of one call so that each contender takes about ``budget`` seconds
(at least ``min_repeat`` and at most ``max_repeat`` timed calls). Results are
ratios first: every table names a reference contender (lodtensor) and, where
it makes sense, a memory-copy limit on the same bytes.
"""

import cProfile
import gc
import importlib
import io
import os
import platform
import pstats
import sys
import time

import numpy as np

SEED = 20240611

# Per-contender time budget (seconds) for the timed calls after the warm-up.
BUDGET = float(os.environ.get("BENCH_BUDGET", "0.6"))
# Each table times its contenders in this many passes, one after another, and keeps each
# contender's best: a contender that ran while the machine was busy (page faults after
# another library freed memory, BLAS threads waking) gets a second chance in other company.
PASSES = int(os.environ.get("BENCH_PASSES", "2"))
MIN_REPEAT = 3
MAX_REPEAT = 200
VERBOSE = os.environ.get("BENCH_VERBOSE", "") not in ("", "0")


# -- optional libraries ---------------------------------------------------------------------
_MISSING = {}


def optional(name):
    """The module ``name``, or None when it is not installed (or fails to import)."""
    if name in _MISSING:
        return None
    try:
        return importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 - any import failure means "not installed" here
        _MISSING[name] = f"{type(err).__name__}: {err}"
        return None


def versions():
    """Versions of the libraries in the comparison (None: not installed)."""
    out = {"python": platform.python_version()}
    for name in ("numpy", "lodtensor", "torch", "pyarrow", "awkward"):
        mod = optional(name)
        out[name] = getattr(mod, "__version__", None) if mod is not None else None
    torch = optional("torch")
    if torch is not None:
        out["torch_threads"] = torch.get_num_threads()
    return out


def machine():
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }


# -- timing ---------------------------------------------------------------------------------
class Skip(Exception):
    """Raised by a contender's setup to report it as skipped with a reason."""


def timeit(fn, *, budget=None, min_repeat=MIN_REPEAT, max_repeat=MAX_REPEAT, warmup=2):
    """Best and median seconds of ``fn()`` over N timed calls after the warm-up.

    The warm-up is ``warmup`` calls, and more (up to 10) until 0.1 s has
    passed: the first calls after a workload is built pay page faults for
    fresh memory (several times the steady cost on the benchmark VM), and
    they would otherwise count against whichever contender runs first.
    """
    budget = BUDGET if budget is None else budget
    t0 = time.perf_counter()
    calls = 0
    last = 0.0
    while calls < warmup or (calls < 10 and time.perf_counter() - t0 < 0.1):
        t = time.perf_counter()
        fn()
        last = time.perf_counter() - t
        calls += 1
    n = int(budget / last) if last > 0 else max_repeat
    n = max(min_repeat, min(max_repeat, n))
    times = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(n):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    finally:
        if gc_was:
            gc.enable()
    times.sort()
    return {"best": times[0], "median": times[len(times) // 2], "n": n}


# -- tables ---------------------------------------------------------------------------------
class Table:
    """One comparison: contenders timed on the same workload.

    ``reference`` is the row the "x lodtensor" ratios divide by; ``limit`` (optional)
    is the memory-copy row for the "x copy" ratios. ``per`` and ``unit`` turn
    seconds into e.g. microseconds per sequence.
    """

    def __init__(self, title, workload, *, reference, limit=None, per=None, unit="ms", goal=None):
        self.title = title
        self.workload = workload
        self.reference = reference
        self.limit = limit
        self.per = per
        self.unit = unit
        self.goal = goal
        self.rows = []

    def add(self, name, fn, *, note="", check=None, **timing):
        """Time ``fn`` (a callable, or a zero-arg factory raising Skip) as contender ``name``.

        ``fn`` may be None (then ``note`` says why, e.g. "not installed").
        ``check`` is called once with the result of ``fn()`` before timing; it
        raises AssertionError when the contender computes something else.
        """
        row = {"name": name, "note": note, "best": None, "median": None, "n": 0, "status": "ok", "fn": None}
        if VERBOSE:
            print(f"   ... {self.title}: {name}", file=sys.stderr, flush=True)
        if fn is None:
            row["status"] = note or "not installed"
        else:
            try:
                gc.collect()
                if check is not None:
                    check(fn())
                row.update(timeit(fn, **timing))
                row["fn"], row["timing"] = fn, timing
                self._refined = False
            except Skip as err:
                row["status"] = str(err)
            except Exception as err:  # noqa: BLE001 - a failing contender is reported, not fatal
                row["status"] = f"failed: {type(err).__name__}: {err}"[:200]
        self.rows.append(row)
        return row

    def add_result(self, name, best, median=None, n=1, note="", status="ok"):
        """A contender timed elsewhere (e.g. in a subprocess)."""
        row = {"name": name, "note": note, "best": best, "median": median if median is not None else best,
               "n": n, "status": status}
        self.rows.append(row)
        return row

    def missing(self, name, why="not installed"):
        return self.add(name, None, note=why)

    def _refine(self):
        """The later passes: every contender timed again, in table order; the best pass counts."""
        if getattr(self, "_refined", True):
            return
        self._refined = True
        for _ in range(PASSES - 1):
            for row in self.rows:
                if row.get("fn") is None:
                    continue
                gc.collect()
                again = timeit(row["fn"], **row["timing"])
                if again["best"] < row["best"]:
                    row.update(again)
        for row in self.rows:  # the workload's arrays may go now
            row["fn"] = row["timing"] = None

    def _best(self, name):
        self._refine()
        for row in self.rows:
            if row["name"] == name and row["best"] is not None:
                return row["best"]
        return None

    def finish(self):
        ref = self._best(self.reference)
        lim = self._best(self.limit) if self.limit else None
        for row in self.rows:
            best = row["best"]
            row["x_lodtensor"] = best / ref if best is not None and ref else None
            row["x_copy"] = best / lim if best is not None and lim else None
            row["per_item"] = best / self.per if best is not None and self.per else None
        return self

    def scale(self, seconds):
        if seconds is None:
            return None
        if self.per:
            seconds = seconds / self.per
        return seconds * {"s": 1.0, "ms": 1e3, "us": 1e6}[self.unit]

    def to_json(self):
        return {
            "title": self.title,
            "workload": self.workload,
            "reference": self.reference,
            "limit": self.limit,
            "per": self.per,
            "unit": self.unit,
            "goal": self.goal,
            "rows": self.rows,
        }

    def format(self):
        self.finish()
        unit = self.unit + ("/item" if self.per else "")
        if self.per:
            unit = f"{self.unit}/seq"
        head = ["contender", f"best {unit}", f"median {unit}", "x lodtensor"]
        if self.limit:
            head.append("x copy")
        head.append("note")
        lines = []
        for row in self.rows:
            if row["best"] is None:
                cells = [row["name"], "-", "-", "-"] + (["-"] if self.limit else []) + [row["status"]]
            else:
                cells = [
                    row["name"],
                    _fmt(self.scale(row["best"])),
                    _fmt(self.scale(row["median"])),
                    f"{row['x_lodtensor']:.2f}" if row["x_lodtensor"] is not None else "-",
                ]
                if self.limit:
                    cells.append(f"{row['x_copy']:.2f}" if row["x_copy"] is not None else "-")
                cells.append(row["note"])
            lines.append(cells)
        widths = [max(len(str(c)) for c in col) for col in zip(head, *lines)]
        out = [f"== {self.title}", f"   {self.workload}"]
        if self.goal:
            out.append(f"   goal: {self.goal}")

        def fmt_row(cells):
            last = len(cells) - 1
            return "  ".join(
                str(c).ljust(w) if i in (0, last) else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()

        out.append("   " + fmt_row(head))
        out.append("   " + "  ".join("-" * w for w in widths))
        out.extend("   " + fmt_row(cells) for cells in lines)
        return "\n".join(out)


def _fmt(x):
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


class Report:
    """The tables and facts one benchmark module produces."""

    def __init__(self, name, title):
        self.name = name
        self.title = title
        self.tables = []
        self.facts = {}
        self.goals = []
        self.notes = []
        self.stream = None  # called with each table once it is complete

    def table(self, *args, **kwargs):
        self.close()  # the tables are built one after another: the last one is complete
        t = Table(*args, **kwargs)
        t.started = time.perf_counter()
        self.tables.append(t)
        return t

    def close(self):
        """Finish the last table and hand it to ``stream`` (run.py prints each table as it is done, so a
        run stopped at its time limit keeps what it measured)."""
        if self.tables and not getattr(self.tables[-1], "streamed", False):
            last = self.tables[-1]
            last.finish()
            last.elapsed = time.perf_counter() - last.started
            last.streamed = True
            if self.stream is not None:
                self.stream(last)

    def abandon(self):
        """Stopped early: no more timing passes (the unfinished table keeps its first pass)."""
        for t in self.tables:
            t._refined = True
            for row in t.rows:
                row["fn"] = row["timing"] = None

    def goal(self, text, met, detail=""):
        """Record whether a stated goal is met (printed after the tables)."""
        self.goals.append({"goal": text, "met": None if met is None else bool(met), "detail": detail})

    def to_json(self):
        return {
            "name": self.name,
            "title": self.title,
            "seed": SEED,
            "machine": machine(),
            "versions": versions(),
            "facts": self.facts,
            "tables": [t.finish().to_json() for t in self.tables],
            "goals": self.goals,
            "notes": self.notes,
        }


def parallel_speedup(rounds=3):
    """How much faster 2 threads run a GIL-free compute job than 1 (2.0: two free cores).

    On shared VMs the second vCPU comes and goes; threaded contenders (torch,
    TensorFlow, 2-thread kernels) are only comparable with this in mind.
    """
    import hashlib  # noqa: PLC0415
    import threading  # noqa: PLC0415

    block = b"x" * (1 << 20)

    def work():
        h = hashlib.sha256()
        for _ in range(60):
            h.update(block)  # releases the GIL for large buffers

    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        work()
        work()
        one = time.perf_counter() - t
        threads = [threading.Thread(target=work) for _ in range(2)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        two = time.perf_counter() - t
        best = max(best, one / two)
    return best


# -- contenders in other interpreters -------------------------------------------------------
def run_worker(python, worker, spec, missing, timeout=600):
    """Run ``bench/<worker>`` with ``python`` (another venv's interpreter) on a JSON spec.

    Returns ``(result, None)`` or ``(None, reason)``; ``missing`` is the reason
    given when the worker reports its library as not installed.
    """
    import json  # noqa: PLC0415 - only the worker runners need these
    import subprocess  # noqa: PLC0415

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), worker)
    try:
        proc = subprocess.run([python, path, json.dumps(spec)], capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"failed: {type(err).__name__}: {err}"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return None, f"failed: worker exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
    result = json.loads(lines[-1])
    if not result.get("installed"):
        return None, missing
    return result, None


# -- workloads ------------------------------------------------------------------------------
def profile_text(fn, calls, limit):
    """cProfile's table of ``calls`` calls of ``fn``, the ``limit`` functions of most own time first."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(limit)
    return out.getvalue()


def rng(offset=0):
    return np.random.default_rng(SEED + offset)


def token_batch(num_docs=256, max_sents=16, max_tokens=64, vocab=30000, seed_offset=0):
    """Documents -> sentences -> token ids, as nested Python lists of ints.

    Sentences per document uniform in 1..max_sents, tokens per sentence uniform
    in 1..max_tokens, ids uniform in 0..vocab-1.
    """
    g = rng(seed_offset)
    sents = g.integers(1, max_sents + 1, size=num_docs)
    tokens = g.integers(1, max_tokens + 1, size=int(sents.sum()))
    ids = g.integers(0, vocab, size=int(tokens.sum())).tolist()
    out = []
    pos = 0
    k = 0
    for s in sents.tolist():
        doc = []
        for t in tokens[k : k + s].tolist():
            doc.append(ids[pos : pos + t])
            pos += t
        k += s
        out.append(doc)
    return out


def ragged_rows(target_rows, width, mean_len, seed_offset=0, dtype=np.float32):
    """A one-level batch: (data of shape (rows, width), lengths uniform in 1..2*mean_len-1).

    The number of sequences is ``round(target_rows / mean_len)``, so the row
    count is close to ``target_rows`` (not exact).
    """
    g = rng(seed_offset)
    n = max(1, round(target_rows / mean_len))
    lengths = g.integers(1, 2 * mean_len, size=n).astype(np.int64)
    rows = int(lengths.sum())
    data = g.random((rows, width), dtype=np.float32).astype(dtype, copy=False)
    return data, lengths


def offsets_of(lengths):
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def describe_sizes(nbytes):
    return f"{nbytes / 2**20:.1f} MiB"
