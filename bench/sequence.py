"""Paddle's sequence ops: lodtensor (NumPy and torch backends) beside NumPy by hand,
torch (``index_add_``, ``segment_reduce``) and real Paddle 2.6.2.

Workloads (float32, fixed seed; see ``_seqdata``): 256 documents x 1..16
sentences x 1..64 words with D=256 and D=16 (about 70K rows), and a one-level
batch of about 2.7M rows with D=16. Every op acts on the last level.

Real Paddle runs in a subprocess from its own venv (``.venv-paddle``, made by
``make test-paddle``; or set ``BENCH_PADDLE_PYTHON``): each call is one static
Program run with LoDTensor feeds, as Paddle users run it. torch runs with its
default threads; NumPy and lodtensor's NumPy backend use one core.

Also per-sample gradients (``torch.func.vmap(grad(...))``) through an LSTM, and through softmax and max pooling,
beside a loop of ``grad`` and the same loss by hand in dense torch.

Goals: sequence_pool faster than Paddle's; sum, average and max within 1.5x
of torch's ``index_add_`` (the same sum, one pass) on the NumPy backend and
within 1.1x on the torch backend; sequence_softmax at least as fast as NumPy
by hand.
"""

import os
import sys

import _common
import _seqdata
import numpy as np

import lodtensor as lt
from lodtensor import sequence as S

TITLE = "sequence ops: pool, softmax, expand, pad/unpad"
POOLS = ("sum", "average", "max")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_paddle(workloads, ops):
    """Paddle's timings from the worker, or ``(None, reason)``."""
    python = os.environ.get("BENCH_PADDLE_PYTHON") or os.path.join(ROOT, ".venv-paddle", "bin", "python")
    if not os.path.exists(python):
        return None, "not installed (run make test-paddle, or set BENCH_PADDLE_PYTHON)"
    spec = {"workloads": workloads, "ops": ops, "budget": _common.BUDGET}
    result, reason = _common.run_worker(python, "_paddle_worker.py", spec, "not installed")
    if result is None:
        return None, reason
    return {case["name"]: case["ops"] for case in result["cases"]}, None


def _numpy_pool(kind, data, offsets):
    starts = offsets[:-1]
    if kind == "max":
        return np.maximum.reduceat(data, starts, axis=0)
    total = np.add.reduceat(data, starts, axis=0)
    return total if kind == "sum" else total / np.diff(offsets)[:, None]


def _numpy_softmax(scores, offsets):
    lengths = np.diff(offsets)
    peak = np.maximum.reduceat(scores, offsets[:-1], axis=0)
    e = np.exp(scores - np.repeat(peak, lengths, axis=0))
    return e / np.repeat(np.add.reduceat(e, offsets[:-1], axis=0), lengths, axis=0)


def _paddle_row(table, paddle, op):
    if paddle is None:
        return
    res = paddle.get(op)
    if res is None or "error" in res:
        table.missing("Paddle 2.6.2", (res or {}).get("error", "no result"))
        return
    t = res["time"]
    table.add_result("Paddle 2.6.2", t["best"], t["median"], t["n"], note="static Program + Executor, subprocess")


def _pool_training(report, torch, name, workload, tt, toffs):
    """sequence_pool forward + backward on torch CPU tensors (the backward passes by the compiled kernels
    and into pooled outputs) against torch.segment_reduce's autograd, the gradients checked against it."""
    weights = torch.randn(toffs.numel() - 1, tt.data.shape[1], generator=torch.Generator().manual_seed(3))
    for kind in POOLS:
        reduce = {"sum": "sum", "average": "mean", "max": "max"}[kind]

        def ours(k=kind):
            x = tt.data.detach().requires_grad_()
            (S.sequence_pool(lt.LoDTensor(x, tt.lod), k).data * weights).sum().backward()
            return x.grad

        def theirs(r=reduce):
            x = tt.data.detach().requires_grad_()
            (torch.segment_reduce(x, r, offsets=toffs, axis=0) * weights).sum().backward()
            return x.grad

        want = theirs().numpy()
        close = lambda out, w=want: np.testing.assert_allclose(out.numpy(), w, rtol=1e-5, atol=1e-6)  # noqa: E731
        table = report.table(f"sequence_pool {kind!r} forward + backward (torch autograd)", workload,
                             reference="lodtensor (torch)")
        table.add("lodtensor (torch)", ours, check=close)
        table.add("torch.segment_reduce", theirs, check=close)
        table.finish()
        mine, other = table._best("lodtensor (torch)"), table._best("torch.segment_reduce")
        if mine is not None and other is not None:
            report.goal(f"{name}: sequence_pool {kind} forward+backward at or under torch.segment_reduce",
                        mine <= other, f"{other / mine:.2f}x")


def bench_workload(report, name, paddle_all, paddle_reason):
    data, lengths = _seqdata.WORKLOADS[name]()
    t = lt.LoDTensor(data, recursive_sequence_lengths=lengths)
    offsets = t.lod.absolute_offsets(-1)
    n_seq = offsets.size - 1
    workload = f"{name}: {t.num_rows} rows, {n_seq} sequences, {_common.describe_sizes(data.nbytes)}"
    torch = _common.optional("torch")
    paddle = (paddle_all or {}).get(name)
    tt = t.to_torch() if torch is not None else None
    ids = torch.from_numpy(t.lod.segment_ids(-1).copy()) if torch is not None else None
    index_add = None  # torch index_add_ time of the sum table: the reference for every pool type
    toffs = torch.from_numpy(offsets.copy()) if torch is not None else None

    for kind in POOLS:
        table = report.table(f"sequence_pool {kind!r}", workload, reference="lodtensor (numpy)")
        expected = _numpy_pool(kind, data, offsets)
        close = lambda out, e=expected: np.testing.assert_allclose(np.asarray(out), e, rtol=1e-4, atol=1e-4)  # noqa: E731
        table.add("lodtensor (numpy)", lambda k=kind: S.sequence_pool(t, k).data, check=close)
        table.add("NumPy by hand (reduceat)", lambda k=kind: _numpy_pool(k, data, offsets), check=close)
        if torch is None:
            table.missing("lodtensor (torch)")
            table.missing("torch index_add_")
        else:
            close_torch = lambda out, c=close: c(out.numpy())  # noqa: E731
            table.add("lodtensor (torch)", lambda k=kind: S.sequence_pool(tt, k).data, check=close_torch)
            if kind == "sum":
                table.add("torch index_add_", lambda: torch.zeros(n_seq, data.shape[1]).index_add_(0, ids, tt.data),
                          check=close_torch)
            reduce = {"sum": "sum", "average": "mean", "max": "max"}[kind]
            table.add("torch.segment_reduce", lambda r=reduce: torch.segment_reduce(tt.data, r, offsets=toffs, axis=0),
                      check=close_torch)
        if paddle is not None:
            _paddle_row(table, paddle, kind)
        else:
            table.missing("Paddle 2.6.2", paddle_reason)
        table.finish()
        if kind == "sum" and torch is not None:
            index_add = table._best("torch index_add_")
        if torch is not None and index_add:
            for backend, bound in (("numpy", 1.5), ("torch", 1.1)):
                mine = table._best(f"lodtensor ({backend})")
                report.goal(f"{name}: sequence_pool {kind} ({backend} backend) within {bound}x of torch index_add_",
                            mine <= bound * index_add, f"{mine / index_add:.2f}x")
        pp = table._best("Paddle 2.6.2")
        if pp is not None:
            mine = table._best("lodtensor (numpy)")
            report.goal(f"{name}: sequence_pool {kind} faster than Paddle", mine < pp, f"{mine / pp:.2f}x Paddle")

    if torch is not None:
        _pool_training(report, torch, name, workload, tt, toffs)

    scores = lt.LoDTensor(np.ascontiguousarray(data[:, :1]), t.lod)
    table = report.table("sequence_softmax (one score per row)", workload, reference="lodtensor (numpy)")
    expected = _numpy_softmax(scores.data, offsets)
    close = lambda out: np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-6)  # noqa: E731
    table.add("lodtensor (numpy)", lambda: S.sequence_softmax(scores).data, check=close)
    table.add("NumPy by hand (reduceat, exp, repeat)", lambda: _numpy_softmax(scores.data, offsets), check=close)
    if torch is not None:
        ts = scores.to_torch()
        table.add("lodtensor (torch)", lambda: S.sequence_softmax(ts).data, check=lambda out: close(out.numpy()))
    if paddle is not None:
        _paddle_row(table, paddle, "softmax")
    table.finish()
    mine, hand = table._best("lodtensor (numpy)"), table._best("NumPy by hand (reduceat, exp, repeat)")
    report.goal(f"{name}: sequence_softmax at least as fast as NumPy by hand", mine <= hand * 1.05,
                f"{mine / hand:.2f}x")

    rows_per_seq = t.lod.lengths(-1)
    sentence_vectors = lt.LoDTensor(np.ascontiguousarray(data[offsets[:-1]]))
    table = report.table("sequence_expand (one row per sequence -> its rows)", workload,
                         reference="lodtensor (numpy)")
    table.add("lodtensor (numpy)", lambda: S.sequence_expand(sentence_vectors, t).data)
    table.add("NumPy by hand (np.repeat)", lambda: np.repeat(sentence_vectors.data, rows_per_seq, axis=0))
    if torch is not None:
        sv = torch.from_numpy(sentence_vectors.data)
        reps = torch.from_numpy(rows_per_seq.copy())
        table.add("torch repeat_interleave", lambda: torch.repeat_interleave(sv, reps, dim=0))
    table.finish()

    table = report.table("sequence_pad / sequence_unpad", workload, reference="lodtensor sequence_pad (numpy)")
    padded, length = S.sequence_pad(t, 0.0)
    maxlen = padded.data.shape[1]
    mask = np.arange(maxlen) < rows_per_seq[:, None]

    def by_hand_pad():
        out = np.zeros((n_seq, maxlen, data.shape[1]), np.float32)
        out[mask] = data
        return out

    table.add("lodtensor sequence_pad (numpy)", lambda: S.sequence_pad(t, 0.0)[0].data)
    table.add("NumPy by hand pad (out[mask] = data)", by_hand_pad)
    if paddle is not None:
        _paddle_row(table, paddle, "pad")
    table.add("lodtensor sequence_unpad (numpy)", lambda: S.sequence_unpad(padded, length).data)
    table.add("NumPy by hand unpad (padded[mask])", lambda: padded.data[mask])
    table.finish()


def _per_sample_gradients(report, torch):
    """Per-sample gradients through softmax then max pooling, for a batch of samples sharing one LoD:
    ``torch.func.vmap(grad(loss))`` (the sequence ops' vmap rules: one call over the batch), a loop
    of ``grad`` over the samples, and the same loss by hand in dense torch (padded, masked) under vmap."""
    from torch.func import grad, vmap  # noqa: PLC0415

    g = _common.rng(21)
    lengths = g.integers(1, 40, size=200)
    offsets = _common.offsets_of(lengths)
    batch, width, rows, n = 32, 16, int(offsets[-1]), lengths.size
    x = torch.from_numpy(g.standard_normal((batch, rows, width), dtype=np.float32))
    lod = [offsets.tolist()]
    maxlen = int(lengths.max())
    seq = torch.from_numpy(np.repeat(np.arange(n), lengths))
    slot = torch.from_numpy(np.arange(rows) - np.repeat(offsets[:-1], lengths))
    mask = torch.arange(maxlen)[None, :] < torch.from_numpy(lengths)[:, None]

    def ours(v):
        return (S.sequence_pool(S.sequence_softmax(lt.LoDTensor(v, lod)), "max").data ** 2).sum()

    def dense(v):
        padded = v.new_full((n, maxlen, width), float("-inf")).index_put((seq, slot), v)
        soft = torch.softmax(padded, dim=1).masked_fill(~mask[..., None], float("-inf"))
        return (soft.amax(dim=1) ** 2).sum()

    workload = f"{batch} samples of [{rows}, {width}] float32 in {n} sequences (one LoD); softmax, max pool"
    table = report.table("per-sample gradients (torch.func)", workload, reference="lodtensor vmap(grad)")
    want = vmap(grad(dense))(x)
    close = lambda out: torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)  # noqa: E731
    table.add("lodtensor vmap(grad)", lambda: vmap(grad(ours))(x), check=close)
    table.add("lodtensor, a loop of grad", lambda: torch.stack([grad(ours)(x[i]) for i in range(batch)]),
              check=close)
    table.add("torch by hand (padded, masked), vmap(grad)", lambda: vmap(grad(dense))(x), check=close)
    table.finish()


def _per_sample_lstm(report, torch):
    """Per-sample weight gradients through ``dynamic_lstm`` (``vmap(grad(loss))``, samples sharing one LoD): lodtensor
    under vmap(grad) (the recurrence as torch ops per step), a loop of plain autograd over the samples
    (the fused one-node recurrence), and the same LSTM by hand in dense torch (padded, masked) under
    vmap(grad)."""
    from torch.func import grad, vmap  # noqa: PLC0415

    from lodtensor.nn.functional import dynamic_lstm  # noqa: PLC0415

    g = _common.rng(22)
    lengths = g.integers(1, 30, size=48)
    offsets = _common.offsets_of(lengths)
    batch, d, rows, n, maxlen = 16, 32, int(offsets[-1]), lengths.size, int(lengths.max())
    x = torch.from_numpy(g.standard_normal((batch, rows, 4 * d), dtype=np.float32))
    w = torch.from_numpy(g.standard_normal((d, 4 * d), dtype=np.float32) * 0.1)
    b = torch.from_numpy(g.standard_normal((1, 4 * d), dtype=np.float32) * 0.1)
    lod = [offsets.tolist()]
    seq = torch.from_numpy(np.repeat(np.arange(n), lengths))
    slot = torch.from_numpy(np.arange(rows) - np.repeat(offsets[:-1], lengths))
    mask = (torch.arange(maxlen)[None, :] < torch.from_numpy(lengths)[:, None])[..., None]

    def ours(v, weight):
        h, _ = dynamic_lstm(lt.LoDTensor(v, lod), weight, b, use_peepholes=False)
        return (h.data ** 2).sum()

    def dense(v, weight):
        padded = v.new_zeros((n, maxlen, 4 * d)).index_put((seq, slot), v)
        h = c = v.new_zeros((n, d))
        total = v.new_zeros(())
        for t in range(maxlen):
            gates = padded[:, t] + b + h @ weight
            c_new = torch.tanh(gates[:, :d]) * torch.sigmoid(gates[:, d : 2 * d]) + c * torch.sigmoid(
                gates[:, 2 * d : 3 * d])
            h_new = torch.sigmoid(gates[:, 3 * d :]) * torch.tanh(c_new)
            m = mask[:, t]
            total = total + (h_new.square() * m).sum()
            h, c = torch.where(m, h_new, h), torch.where(m, c_new, c)
        return total

    def loop():
        out = []
        for i in range(batch):
            wi = w.clone().requires_grad_()
            ours(x[i], wi).backward()
            out.append(wi.grad)
        return torch.stack(out)

    workload = f"{batch} samples of [{rows}, {4 * d}] float32 in {n} sequences (one LoD); LSTM hidden {d}"
    table = report.table("per-sample LSTM weight gradients (torch.func)", workload,
                         reference="lodtensor vmap(grad)")
    per_sample = vmap(grad(ours, argnums=1), in_dims=(0, None))
    want = vmap(grad(dense, argnums=1), in_dims=(0, None))(x, w)
    close = lambda out: torch.testing.assert_close(out, want, rtol=1e-3, atol=1e-4)  # noqa: E731
    table.add("lodtensor vmap(grad)", lambda: per_sample(x, w), check=close)
    table.add("lodtensor, a loop of backward (fused recurrence)", loop, check=close)
    table.add("torch by hand (padded, masked), vmap(grad)",
              lambda: vmap(grad(dense, argnums=1), in_dims=(0, None))(x, w), check=close)
    table.finish()


def run(report):
    names = list(_seqdata.WORKLOADS)
    paddle_all, reason = run_paddle(names, [*POOLS, "softmax", "pad"])
    if paddle_all is None:
        report.notes.append(f"Paddle 2.6.2: {reason}")
    for name in names:
        bench_workload(report, name, paddle_all, reason)
    torch = _common.optional("torch")
    if torch is not None:
        _per_sample_gradients(report, torch)
        _per_sample_lstm(report, torch)


if __name__ == "__main__":  # pragma: no cover - use bench/run.py
    sys.exit("run: python bench/run.py sequence")
