"""Run the lodtensor benchmarks and print one table per comparison.

Usage::

    python bench/run.py                 # every benchmark module in bench/
    python bench/run.py padding         # a subset, by module name
    python bench/run.py --list          # the module names

Each module's results go to ``bench/results/<module>.json`` (git-ignored).
Times are best-of-N after a warm-up (``time.perf_counter``); the columns
"x lodtensor" and "x copy" divide each contender's best time by lodtensor's and
by the memory-copy limit's (``np.copyto`` of the same bytes): above 1 means
slower than lodtensor / than a plain copy. Set ``BENCH_BUDGET`` (seconds per
contender, default 0.6) to trade run time for steadier numbers. Each table is
printed as soon as it is measured; ``BENCH_DEADLINE`` (seconds) stops a run
there (as SIGTERM does), keeping the tables measured by then in the output and
the JSON, and exits 124.
"""

import faulthandler
import json
import os
import signal
import sys
import time
import traceback

# torch's OpenMP workers spin-wait after each parallel region; on a small machine they then
# hold the cores that the next contender's threads need (lodtensor's, TensorFlow's, BLAS's),
# which made threaded timings bimodal. Idle OpenMP threads sleep instead (set before torch loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:  # run from a checkout without installing: import the tree's lodtensor
    sys.path.append(ROOT)

import _common  # noqa: E402

RESULTS = os.path.join(HERE, "results")


def discover():
    """Benchmark modules: bench/*.py except run.py and private (_*) files."""
    names = []
    for fname in sorted(os.listdir(HERE)):
        if fname.endswith(".py") and not fname.startswith("_") and fname != "run.py":
            names.append(fname[:-3])
    return names


class Interrupted(BaseException):
    """The time limit (SIGALRM from BENCH_DEADLINE, or SIGTERM from ``timeout``): report, then stop."""


def _interrupt(signum, frame):
    raise Interrupted(signum)


def _print_table(table):
    print()
    print(table.format())
    print(f"   ({table.elapsed:.1f} s)", flush=True)


def _torch_threads(restore=None):
    """torch's intra-op threads (None where torch was never imported); with ``restore``, set them back."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if restore is not None:
        torch.set_num_threads(restore)
    return torch.get_num_threads()


def run_module(name):
    module = __import__(name)
    report = _common.Report(name, getattr(module, "TITLE", name))
    print(f"\n#### {name}: {report.title}", flush=True)
    report.stream = _print_table
    t0 = time.perf_counter()
    interrupted = False
    threads = _torch_threads()
    try:
        module.run(report)
    except Interrupted:  # a device call has a time limit: keep the tables measured so far
        interrupted = True
        report.abandon()
        report.notes.append("stopped at its time limit (BENCH_DEADLINE or SIGTERM): the tables measured by "
                            "then, the last one from its first timing pass")
    finally:
        _torch_threads(threads)  # a module that sets torch's threads (per-call costs: one) leaves the next as found
    report.close()
    elapsed = time.perf_counter() - t0
    print(f"\n   {name}: {elapsed:.1f} s")
    for note in report.notes:
        print(f"\n   note: {note}")
    if report.goals:
        print("\n   goals:")
        for g in report.goals:
            mark = {True: "MET   ", False: "MISSED", None: "n/a   "}[g["met"]]
            print(f"   [{mark}] {g['goal']}" + (f"  ({g['detail']})" if g["detail"] else ""))
    data = report.to_json()
    data["elapsed_s"] = elapsed
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=_jsonable)
    print(f"\n   -> {os.path.relpath(path)}", flush=True)
    if interrupted:
        raise SystemExit(124)
    return data


def _jsonable(x):
    try:
        import numpy as np  # noqa: PLC0415

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:  # pragma: no cover
        pass
    return str(x)


def main(argv):
    available = discover()
    if "--list" in argv:
        print("\n".join(available))
        return 0
    wanted = [a for a in argv if not a.startswith("-")] or available
    unknown = [w for w in wanted if w not in available]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    deadline = int(os.environ.get("BENCH_DEADLINE", "0") or 0)  # seconds: stop there, keeping the tables
    if deadline > 0:
        signal.signal(signal.SIGALRM, _interrupt)
        signal.alarm(deadline)
        # a main thread held in native code (a kernel that never ends, a compile) cannot take the
        # signal: then every thread's stack goes to stderr, to say where
        faulthandler.dump_traceback_later(deadline + 5, exit=False)
    info = _common.versions()
    print("lodtensor benchmarks  seed", _common.SEED)
    print("   " + ", ".join(f"{k} {v if v is not None else 'not installed'}" for k, v in info.items()))
    print("   " + ", ".join(f"{k} {v}" for k, v in _common.machine().items()))
    t0 = time.perf_counter()
    failed = []
    for name in wanted:
        try:
            run_module(name)
        except Exception:  # noqa: BLE001 - one broken module must not hide the others
            traceback.print_exc()
            failed.append(name)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
