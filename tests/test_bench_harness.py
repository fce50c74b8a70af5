"""bench/run.py's harness: every table is printed as soon as it is measured, and a run stopped at
its time limit (``BENCH_DEADLINE``'s SIGALRM, or ``timeout``'s SIGTERM) keeps what it measured, in
its output and its JSON, and exits 124. A GPU run is one device call with a time limit: a benchmark
that printed only at its end lost every figure of a run that overran it."""

import importlib.util
import json
import os
import signal
import sys
import time
import types

import pytest

_BENCH = os.path.join(os.path.dirname(__file__), "..", "bench")


@pytest.fixture
def harness(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(os.path.abspath(_BENCH))
    spec = importlib.util.spec_from_file_location("lt_bench_run", os.path.join(_BENCH, "run.py"))
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    monkeypatch.setattr(run, "RESULTS", str(tmp_path))
    saved = signal.getsignal(signal.SIGALRM)
    yield run
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, saved)


def _fake(monkeypatch, body):
    module = types.ModuleType("lt_fake_bench")
    module.run = body
    monkeypatch.setitem(sys.modules, "lt_fake_bench", module)
    return "lt_fake_bench"


def _timed(table, name):
    table.add(name, lambda: sum(range(100)), budget=0.0, min_repeat=1, max_repeat=1)


@pytest.mark.parametrize("signum", [signal.SIGALRM, signal.SIGTERM])
def test_a_run_stopped_at_its_limit_keeps_its_tables(harness, monkeypatch, tmp_path, capsys, signum):
    printed_early = []

    def body(report):
        _timed(report.table("first", "a workload", reference="mine"), "mine")
        second = report.table("second", "a workload", reference="mine")
        printed_early.append(capsys.readouterr().out)  # the first table is out before the second ends
        _timed(second, "mine")
        signal.signal(signum, harness._interrupt)
        if signum == signal.SIGALRM:
            signal.setitimer(signal.ITIMER_REAL, 0.05)
        else:
            os.kill(os.getpid(), signum)
        while True:  # a benchmark still measuring when its time is up
            time.sleep(0.01)

    name = _fake(monkeypatch, body)
    try:
        with pytest.raises(SystemExit) as stopped:
            harness.run_module(name)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert stopped.value.code == 124
    assert "== first" in printed_early[0] and "== second" not in printed_early[0]
    out = capsys.readouterr().out
    assert "== second" in out and "mine" in out and "time limit" in out
    with open(tmp_path / f"{name}.json") as f:
        data = json.load(f)
    assert [t["title"] for t in data["tables"]] == ["first", "second"]
    assert all(t["rows"][0]["best"] > 0 for t in data["tables"])


def test_a_whole_run_prints_each_table_once(harness, monkeypatch, tmp_path, capsys):
    def body(report):
        for title in ("one", "two", "three"):
            _timed(report.table(title, "a workload", reference="mine"), "mine")
        report.goal("a goal", True, "1.0x")

    data = harness.run_module(_fake(monkeypatch, body))
    out = capsys.readouterr().out
    assert [out.count(f"== {t}\n") for t in ("one", "two", "three")] == [1, 1, 1]
    assert "[MET   ] a goal" in out and "time limit" not in out
    assert [t["title"] for t in data["tables"]] == ["one", "two", "three"]


def test_the_gpu_trace_script_runs_its_calls_on_the_cpu(monkeypatch, capsys):
    """bench/_gpu_trace.py (the runbook's ``trace`` part) profiles each call and prints its wall and busy
    time: its dry run on the CPU, so a device call never finds it broken."""
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(os.path.abspath(_BENCH))
    import _gpu_trace  # noqa: PLC0415

    _gpu_trace.main("cpu", scale=200)
    out = capsys.readouterr().out
    for name in ("dynamic_lstm forward+backward", "dynamic_gru forward+backward", "sequence_pool sum",
                 "torch.segment_reduce sum"):
        assert f"== {name}" in out, out[-2000:]
    assert "LSTMBackward" in out and "GRUBackward" in out and out.rstrip().endswith("trace run: done")


def test_the_gpu_hostprof_script_runs_its_calls_on_the_cpu(monkeypatch, capsys):
    """bench/_gpu_hostprof.py (the runbook's ``hostprof`` part): its calls, per-call times and profiles on
    the CPU (NumPy and torch CPU), so a device call never finds them broken."""
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(os.path.abspath(_BENCH))
    import _gpu_hostprof  # noqa: PLC0415

    _gpu_hostprof.main("cpu", n=2)
    out = capsys.readouterr().out
    for name in ("torch: pool sum, 64 seqs", "numpy: pool sum, a new LoD, 512 seqs", "torch: softmax, 512 seqs",
                 "torch.segment_reduce sum, 64 seqs", "torch: pool sum forward+backward, a new LoD, 64 seqs"):
        assert name in out, out[-2000:]
    assert out.count("== cProfile, 2 calls") == 6 and out.rstrip().endswith("hostprof run: done")


def test_a_module_that_sets_torchs_threads_leaves_the_next_as_found(harness, monkeypatch):
    """bench/overhead.py and bench/gpu_host.py time per-call costs on one torch thread; before, every module
    after them in the same run (padding, sequence, ...) measured torch on one thread too."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    want = 2 if before == 1 else 1

    def body(report):
        torch.set_num_threads(want)
        table = report.table("t", "w", reference="x")
        _timed(table, "x")
        table.finish()

    try:
        harness.run_module(_fake(monkeypatch, body))
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
