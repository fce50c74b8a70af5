"""Paddle's learnable sequence layers: ``lodtensor.nn.functional`` (NumPy forward, torch forward
and forward+backward) beside real Paddle 2.6.2's operators and torch's ``nn.LSTM``/``nn.GRU``
on a ``PackedSequence``.

Workload: the 2,266-sentence batch of ``bench/nested.py`` (1..64 rows each, about 74K rows),
float32 rows of width 256, hidden size 256. Every contender computes the same thing: the
input projection (``fc``: ``[256, 4H]`` or ``[256, 3H]``) and the recurrence (no peepholes),
so ``nn.LSTM(256, 256)`` does exactly this work; forward+backward is the gradient of the
output's sum with respect to the input and every weight. ``sequence_conv``: filter 3,
256 -> 256. ``BENCH_LAYERS_SENTENCES`` keeps fewer sentences for a quick run.

Real Paddle runs in a subprocess from its own venv (``.venv-paddle``, made by ``make
test-paddle``; or ``BENCH_PADDLE_PYTHON``): one static Program per case, run by an Executor
with a LoDTensor feed. torch runs with its default threads.

Goals (the issue's): faster than Paddle on each; the torch forward and forward+backward within
1.2x of ``nn.LSTM``/``nn.GRU`` on the same packed batch.
"""

import os

import _common
import _seqdata
import numpy as np

import lodtensor as lt
from lodtensor.nn import functional as F

TITLE = "Paddle's layers: dynamic_lstm, dynamic_gru, sequence_conv"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH = HIDDEN = 256
TIMING = {"min_repeat": 2, "warmup": 1}


def run_paddle(count):
    python = os.environ.get("BENCH_PADDLE_PYTHON") or os.path.join(ROOT, ".venv-paddle", "bin", "python")
    if not os.path.exists(python):
        return None, "not installed (run make test-paddle, or set BENCH_PADDLE_PYTHON)"
    spec = {"width": WIDTH, "hidden": HIDDEN, "sentences": count, "ops": ["lstm", "gru", "sequence_conv"],
            "budget": _common.BUDGET}
    result, reason = _common.run_worker(python, "_paddle_layers_worker.py", spec, "not installed", timeout=3600)
    if result is None:
        return None, reason
    return result["cases"], None


def _ours(kind, x, w):
    proj = F.fc(x, w["w_ih"])
    if kind == "lstm":
        return F.dynamic_lstm(proj, w["w_hh"], w["bias"], use_peepholes=False)[0]
    return F.dynamic_gru(proj, w["w_hh"], w["bias"])


def _torch_module(torch, kind, w):
    """``nn.LSTM``/``nn.GRU`` with the same weights (torch's gate order)."""
    d = HIDDEN
    if kind == "lstm":
        mod = torch.nn.LSTM(WIDTH, d)
        order = np.concatenate([np.arange(d, 2 * d), np.arange(2 * d, 3 * d), np.arange(0, d), np.arange(3 * d, 4 * d)])
        with torch.no_grad():
            mod.weight_ih_l0.copy_(torch.from_numpy(w["w_ih"].T[order]))
            mod.weight_hh_l0.copy_(torch.from_numpy(w["w_hh"].T[order]))
            mod.bias_ih_l0.copy_(torch.from_numpy(w["bias"][0][order]))
            mod.bias_hh_l0.zero_()
        return mod
    return torch.nn.GRU(WIDTH, d)  # same work; its candidate applies the reset gate after the GEMM


def _paddle_row(table, cases, key, reason):
    res = (cases or {}).get(key)
    if res is None or "error" in res:
        table.missing("Paddle 2.6.2", (res or {}).get("error", reason or "no result"))
        return
    t = res["time"]
    table.add_result("Paddle 2.6.2", t["best"], t["median"], t["n"], note="static Program + Executor, subprocess")


def run(report):
    count = int(os.environ.get("BENCH_LAYERS_SENTENCES", "2266"))
    data, lengths = _seqdata.sentences(WIDTH, count)
    x = lt.LoDTensor(data, recursive_sequence_lengths=lengths)
    workload = f"{len(lengths[0])} sentences, {x.num_rows} rows x {WIDTH}, hidden {HIDDEN}, float32"
    torch = _common.optional("torch")
    cases, reason = run_paddle(count)
    for kind in ("lstm", "gru"):
        w = _seqdata.layer_weights(kind, WIDTH, HIDDEN)
        expected = _ours(kind, x, w).data
        close = lambda out, e=expected: np.testing.assert_allclose(np.asarray(out), e, rtol=2e-3, atol=2e-4)  # noqa: E731
        fwd = report.table(f"dynamic_{kind} forward (fc + recurrence)", workload, reference="lodtensor (numpy)")
        fwd.add("lodtensor (numpy)", lambda k=kind, w=w: _ours(k, x, w).data, check=close, **TIMING)
        bwd = report.table(f"dynamic_{kind} forward+backward", workload, reference="lodtensor (torch)")
        if torch is None:
            fwd.missing("lodtensor (torch)")
            bwd.missing("lodtensor (torch)")
        else:
            xt = x.to_torch()
            wt = {k: torch.from_numpy(v).requires_grad_() for k, v in w.items()}

            def forward(k=kind, wt=wt, xt=xt):
                with torch.no_grad():
                    return _ours(k, xt, wt).data

            def forward_backward(k=kind, wt=wt, xt=xt):
                xg = xt.with_data(xt.data.detach().requires_grad_())
                out = _ours(k, xg, wt).data
                out.sum().backward()
                return out

            fwd.add("lodtensor (torch)", forward, check=lambda out, c=close: c(out.numpy()), **TIMING)
            bwd.add("lodtensor (torch)", forward_backward, **TIMING)
            module = _torch_module(torch, kind, w)
            seqs = list(torch.split(torch.from_numpy(data), lengths[0]))
            packed = torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)

            def packed_forward(module=module, packed=packed):
                with torch.no_grad():
                    return module(packed)[0]

            def packed_backward(module=module, packed=packed):
                inp = packed._replace(data=packed.data.detach().requires_grad_())
                out = module(inp)[0]
                out.data.sum().backward()
                return out

            fwd.add(f"torch nn.{kind.upper()} (PackedSequence)", packed_forward, **TIMING)
            bwd.add(f"torch nn.{kind.upper()} (PackedSequence)", packed_backward, **TIMING)
        _paddle_row(fwd, cases, f"{kind} forward", reason)
        _paddle_row(bwd, cases, f"{kind} forward+backward", reason)
        for table, mine_name in ((fwd, "lodtensor (torch)"), (bwd, "lodtensor (torch)")):
            table.finish()
            mine = table._best(mine_name)
            ref = table._best(f"torch nn.{kind.upper()} (PackedSequence)")
            pp = table._best("Paddle 2.6.2")
            what = table.title.split(" (")[0]
            if mine is not None and ref is not None:
                report.goal(f"{what}: lodtensor (torch) within 1.2x of nn.{kind.upper()} on a PackedSequence",
                            mine <= 1.2 * ref, f"{mine / ref:.2f}x")
            if mine is not None and pp is not None:
                report.goal(f"{what}: lodtensor (torch) faster than Paddle", mine < pp, f"{mine / pp:.2f}x Paddle")
        numpy_fwd, pp = fwd._best("lodtensor (numpy)"), fwd._best("Paddle 2.6.2")
        if numpy_fwd is not None and pp is not None:
            report.goal(f"dynamic_{kind} forward: lodtensor (numpy) faster than Paddle", numpy_fwd < pp,
                        f"{numpy_fwd / pp:.2f}x Paddle")

    w = _seqdata.layer_weights("sequence_conv", WIDTH, HIDDEN)
    for mode in ("forward", "forward+backward"):
        table = report.table(f"sequence_conv {mode} (filter 3, {WIDTH} -> {HIDDEN})", workload,
                             reference="lodtensor (torch)" if mode != "forward" else "lodtensor (numpy)")
        if mode == "forward":
            table.add("lodtensor (numpy)", lambda: F.sequence_conv(x, w["filter"], filter_size=3).data, **TIMING)
        if torch is not None:
            xt = x.to_torch()
            ft = torch.from_numpy(w["filter"]).requires_grad_()

            def conv(backward=mode != "forward", ft=ft, xt=xt):
                if not backward:
                    with torch.no_grad():
                        return F.sequence_conv(xt, ft, filter_size=3).data
                xg = xt.with_data(xt.data.detach().requires_grad_())
                out = F.sequence_conv(xg, ft, filter_size=3).data
                out.sum().backward()
                return out

            table.add("lodtensor (torch)", conv, **TIMING)
        _paddle_row(table, cases, f"sequence_conv {mode}", reason)
        table.finish()
        pp = table._best("Paddle 2.6.2")
        mine = table._best(table.reference)
        if mine is not None and pp is not None:
            report.goal(f"sequence_conv {mode}: {table.reference} faster than Paddle", mine < pp,
                        f"{mine / pp:.2f}x Paddle")
