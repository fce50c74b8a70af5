"""Paddle's learnable sequence layers: ``lodtensor.nn.functional`` (NumPy forward, torch forward
and forward+backward) beside real Paddle 2.6.2's operators and torch's ``nn.LSTM``/``nn.GRU``
on a ``PackedSequence``, in interleaved rounds.

Workload: the 2,266-sentence batch of ``bench/nested.py`` (1..64 rows each, about 74K rows),
float32 rows of width 256, hidden size 256. Every contender computes the same thing: the
input projection (``fc``: ``[256, 4H]`` or ``[256, 3H]``) and the recurrence (no peepholes),
so ``nn.LSTM(256, 256)`` does exactly this work; forward+backward is the gradient of the
output's sum with respect to the input and every weight. ``sequence_conv``: filter 3,
256 -> 256. ``BENCH_LAYERS_SENTENCES`` keeps fewer sentences for a quick run.

The machine is shared and noisy, so the run has ``BENCH_LAYERS_ROUNDS`` rounds (default 3):
each round runs real Paddle once over every case (in its own interpreter: ``.venv-paddle``,
made by ``make test-paddle``, or ``BENCH_PADDLE_PYTHON``; one static Program per case, run by
an Executor with a LoDTensor feed), then every contender here once (after a warm-up call).
A table gives each contender's best and median time over the rounds; the goals compare
within each round and give the median ratio with its spread (min..max over rounds).

Threads: torch and lodtensor use their defaults (one per core). Inside a recurrence lodtensor
lowers torch's threads itself when a step's GEMM is small (``STEP_WORK_PER_THREAD`` in
``lodtensor/backend/torch/_tuning.py``): per-step loops of small GEMMs otherwise pay OpenMP's
fork and join every step. Paddle's CPU kernels run on one thread.

Goals (the issues' #16 and #27): faster than Paddle on each; the torch forward within 1.2x of
``nn.LSTM``/``nn.GRU`` on the same packed batch and the forward+backward below it.
"""

import os

import _common
import _seqdata
import numpy as np

import lodtensor as lt
from lodtensor.nn import functional as F

TITLE = "Paddle's layers: dynamic_lstm, dynamic_gru, sequence_conv (interleaved)"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH = HIDDEN = 256
ROUNDS = int(os.environ.get("BENCH_LAYERS_ROUNDS", "3"))
PADDLE = "Paddle 2.6.2"
OURS_T, OURS_N = "lodtensor (torch)", "lodtensor (numpy)"


def run_paddle(count):
    """One round of real Paddle over every case: ``(cases, None)`` or ``(None, reason)``."""
    python = os.environ.get("BENCH_PADDLE_PYTHON") or os.path.join(ROOT, ".venv-paddle", "bin", "python")
    if not os.path.exists(python):
        return None, "not installed (run make test-paddle, or set BENCH_PADDLE_PYTHON)"
    spec = {"width": WIDTH, "hidden": HIDDEN, "sentences": count, "ops": ["lstm", "gru", "sequence_conv"],
            "budget": 0.0, "min_repeat": 1}
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


def _recurrence_cases(torch, kind, x, data, lengths):
    """``{case: [(contender, fn, check)]}`` of one recurrence."""
    w = _seqdata.layer_weights(kind, WIDTH, HIDDEN)
    expected = _ours(kind, x, w).data
    close = lambda out, e=expected: np.testing.assert_allclose(np.asarray(out), e, rtol=2e-3, atol=2e-4)  # noqa: E731
    fwd = [(OURS_N, lambda: _ours(kind, x, w).data, close)]
    bwd = []
    if torch is not None:
        xt = x.to_torch()
        wt = {k: torch.from_numpy(v).requires_grad_() for k, v in w.items()}

        def forward():
            with torch.no_grad():
                return _ours(kind, xt, wt).data

        def forward_backward():
            xg = xt.with_data(xt.data.detach().requires_grad_())
            out = _ours(kind, xg, wt).data
            out.sum().backward()
            return out

        module = _torch_module(torch, kind, w)
        packed = torch.nn.utils.rnn.pack_sequence(list(torch.split(torch.from_numpy(data), lengths[0])),
                                                  enforce_sorted=False)

        def packed_forward():
            with torch.no_grad():
                return module(packed)[0]

        def packed_backward():
            out = module(packed._replace(data=packed.data.detach().requires_grad_()))[0]
            out.data.sum().backward()
            return out

        name = f"torch nn.{kind.upper()} (PackedSequence)"
        fwd += [(OURS_T, forward, lambda out: close(out.numpy())), (name, packed_forward, None)]
        bwd += [(OURS_T, forward_backward, None), (name, packed_backward, None)]
    return {f"dynamic_{kind} forward": fwd, f"dynamic_{kind} forward+backward": bwd}


def _conv_cases(torch, x):
    w = _seqdata.layer_weights("sequence_conv", WIDTH, HIDDEN)
    fwd = [(OURS_N, lambda: F.sequence_conv(x, w["filter"], filter_size=3).data, None)]
    bwd = []
    if torch is not None:
        xt = x.to_torch()
        ft = torch.from_numpy(w["filter"]).requires_grad_()

        def conv():
            with torch.no_grad():
                return F.sequence_conv(xt, ft, filter_size=3).data

        def conv_backward():
            xg = xt.with_data(xt.data.detach().requires_grad_())
            out = F.sequence_conv(xg, ft, filter_size=3).data
            out.sum().backward()
            return out

        fwd.append((OURS_T, conv, None))
        bwd.append((OURS_T, conv_backward, None))
    return {"sequence_conv forward": fwd, "sequence_conv forward+backward": bwd}


def _ratios(mine, theirs):
    """Per-round ratios ``mine / theirs`` (rounds where both ran), sorted."""
    return sorted(m / t for m, t in zip(mine, theirs) if m and t)


def _spread(ratios):
    mid = ratios[len(ratios) // 2]
    return mid, f"{mid:.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}] over {len(ratios)} rounds"


def run(report):
    count = int(os.environ.get("BENCH_LAYERS_SENTENCES", "2266"))
    data, lengths = _seqdata.sentences(WIDTH, count)
    x = lt.LoDTensor(data, recursive_sequence_lengths=lengths)
    workload = f"{len(lengths[0])} sentences, {x.num_rows} rows x {WIDTH}, hidden {HIDDEN}, float32"
    torch = _common.optional("torch")
    cases = {**_recurrence_cases(torch, "lstm", x, data, lengths), **_recurrence_cases(torch, "gru", x, data, lengths),
             **_conv_cases(torch, x)}
    if torch is not None:
        report.facts["torch_threads"] = torch.get_num_threads()
    for contenders in cases.values():  # every contender computes the same thing
        for _, fn, check in contenders:
            if check is not None:
                check(fn())
    # case -> contender -> seconds per round (ours first, then the peers, Paddle last)
    times = {case: {name: [None] * ROUNDS for name, _, _ in contenders} for case, contenders in cases.items()}
    reasons = {}
    for rnd in range(ROUNDS):
        found, reason = run_paddle(count)
        for case in cases:
            res = (found or {}).get(case.replace("dynamic_", ""))  # the worker's keys: "lstm forward"...
            if res is None or "error" in res:
                reasons[case] = (res or {}).get("error", reason or "no result")
            else:
                times[case].setdefault(PADDLE, [None] * ROUNDS)[rnd] = res["time"]["best"]
        for case, contenders in cases.items():
            for name, fn, _ in contenders:
                sec = _common.timeit(fn, budget=0.0, min_repeat=1, warmup=1)["best"]
                times[case][name][rnd] = sec
    for case, row in times.items():
        mine_name = OURS_T if OURS_T in row else OURS_N
        table = report.table(f"{case} (fc + recurrence)" if "dynamic" in case else case, workload,
                             reference=mine_name)
        for name, secs in row.items():
            valid = sorted(s for s in secs if s is not None)
            if valid:
                note = "static Program + Executor, subprocess" if name == PADDLE else ""
                table.add_result(name, valid[0], valid[len(valid) // 2], len(valid), note=note)
        if PADDLE not in row:
            table.missing(PADDLE, reasons.get(case, "no result"))
        table.finish()
        mine = row.get(mine_name, [])
        for name in [n for n in row if n not in (mine_name, OURS_N)]:
            ratios = _ratios(mine, row[name])
            if not ratios:
                continue
            mid, text = _spread(ratios)
            if name == PADDLE:
                report.goal(f"{case}: {mine_name} faster than Paddle", mid < 1.0, f"{text} of Paddle")
            else:
                limit = 1.2 if case.endswith("forward") else 1.0
                report.goal(f"{case}: {mine_name} within {limit}x of {name}", mid <= limit, text)
        if mine_name != OURS_N and OURS_N in row and PADDLE in row:
            ratios = _ratios(row[OURS_N], row[PADDLE])
            if ratios:
                mid, text = _spread(ratios)
                report.goal(f"{case}: {OURS_N} faster than Paddle", mid < 1.0, f"{text} of Paddle")
