"""The fused recurrences on torch (one autograd node for the whole ``dynamic_lstm``/``dynamic_gru``):
forward values and gradients equal the unfused recurrence that autograd records step by step
(``_reference_rnn``), ``torch.autograd.gradcheck`` passes in float64 (peepholes, reverse, empty
sequences, ``h_0``/``c_0``, every activation), a second differentiation raises, and the per-step
loops run on fewer torch threads forward and backward when the steps are small."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.backend._contract import ACTIVATIONS
from lodtensor.nn import functional as F
from lodtensor.nn._common import TimePlan

from . import _reference_rnn

torch = pytest.importorskip("torch")

LODS = {
    "mixed": [[0, 3, 3, 5, 6]],  # an empty sequence in the middle
    "empty_first": [[0, 0, 4, 5, 7, 7]],  # empty at both ends, one of length 1
    "one": [[0, 4]],
    "two_levels": [[0, 1, 3], [0, 2, 2, 5]],  # the recurrence runs over the last level
}
ACTS = [a for a in ACTIVATIONS if a != "linear"]  # "linear" is "identity"'s other name


def _tensors(rng, *shapes):
    return [torch.tensor(rng.uniform(-0.8, 0.8, size=s), requires_grad=True) for s in shapes]


def _plan_args(lod, reverse, h0=None, c0=None):
    plan = TimePlan(lod[-1], reverse)
    pick = lambda s: None if s is None else s[torch.from_numpy(plan.order[: int(plan.counts[0])])]  # noqa: E731
    return pick(h0), pick(c0), torch.from_numpy(plan.rows), torch.from_numpy(plan.inverse), plan.counts.tolist()


def _lstm_case(lod, peep, reverse, state, acts, seed=0):
    rng = np.random.RandomState(seed)
    n_rows, n_seq, d = lod[-1][-1], len(lod[-1]) - 1, 3
    x, w, b, h0, c0 = _tensors(rng, (n_rows, 4 * d), (d, 4 * d), (1, (7 if peep else 4) * d), (n_seq, d), (n_seq, d))
    h0 = h0 if state in ("h", "both") else None
    c0 = c0 if state in ("c", "both") else None
    kw = dict(use_peepholes=peep, is_reverse=reverse, gate_activation=acts[0], cell_activation=acts[1],
              candidate_activation=acts[2])
    return lod, (x, w, b, h0, c0), kw


def _lstm_fused(lod, x, w, b, h0, c0, **kw):
    hidden, cell = F.dynamic_lstm(lt.LoDTensor(x, lod), w, b, h0, c0, **kw)
    return hidden.data, cell.data


def _lstm_unfused(lod, x, w, b, h0, c0, **kw):
    h0s, c0s, rows, inverse, counts = _plan_args(lod, kw["is_reverse"], h0, c0)
    acts = (kw["gate_activation"], kw["cell_activation"], kw["candidate_activation"])
    if not counts:
        return x[:, : w.shape[0]] * 0, x[:, : w.shape[0]] * 0
    return _reference_rnn.lstm(x, w, b, h0s, c0s, rows, inverse, counts, acts, kw["use_peepholes"])


def _compare(fused, unfused, inputs, seed=1):
    """Same values, and the same gradients of a random weighting of every output."""
    inputs = [t for t in inputs if t is not None]
    rng = np.random.RandomState(seed)
    weights = [torch.tensor(rng.uniform(-1, 1, size=tuple(o.shape))) for o in fused]
    for a, e in zip(fused, unfused):
        torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-13)
    got = torch.autograd.grad(sum((o * wt).sum() for o, wt in zip(fused, weights)), inputs, allow_unused=True)
    want = torch.autograd.grad(sum((o * wt).sum() for o, wt in zip(unfused, weights)), inputs, allow_unused=True)
    for g, e, t in zip(got, want, inputs):
        g = torch.zeros_like(t) if g is None else g
        e = torch.zeros_like(t) if e is None else e
        torch.testing.assert_close(g, e, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("lod", sorted(LODS))
@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("state", ["none", "h", "c", "both"])
def test_fused_lstm_equals_unfused(lod, peep, reverse, state):
    lod, inputs, kw = _lstm_case(LODS[lod], peep, reverse, state, ("sigmoid", "tanh", "tanh"))
    _compare(_lstm_fused(lod, *inputs, **kw), _lstm_unfused(lod, *inputs, **kw), inputs)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("which", [0, 1, 2])
def test_fused_lstm_equals_unfused_for_every_activation(act, which):
    acts = ["sigmoid", "tanh", "tanh"]
    acts[which] = act
    lod, inputs, kw = _lstm_case(LODS["mixed"], which != 1, which == 2, "both", tuple(acts), seed=which)
    _compare(_lstm_fused(lod, *inputs, **kw), _lstm_unfused(lod, *inputs, **kw), inputs)


def _gru_case(lod, reverse, with_h0, origin, acts, seed=0):
    rng = np.random.RandomState(seed)
    n_rows, n_seq, d = lod[-1][-1], len(lod[-1]) - 1, 3
    x, w, b, h0 = _tensors(rng, (n_rows, 3 * d), (d, 3 * d), (1, 3 * d), (n_seq, d))
    kw = dict(is_reverse=reverse, origin_mode=origin, gate_activation=acts[0], candidate_activation=acts[1])
    return lod, (x, w, b, h0 if with_h0 else None), kw


def _gru_fused(lod, x, w, b, h0, **kw):
    return (F.dynamic_gru(lt.LoDTensor(x, lod), w, b, h0, **kw).data,)


def _gru_unfused(lod, x, w, b, h0, **kw):
    h0s, _, rows, inverse, counts = _plan_args(lod, kw["is_reverse"], h0)
    d = w.shape[0]
    if not counts:
        return (x[:, :d] * 0,)
    flat = w.reshape(-1)
    w_gate, w_cand = flat[: 2 * d * d].reshape(d, 2 * d), flat[2 * d * d :].reshape(d, d)
    acts = (kw["gate_activation"], kw["candidate_activation"])
    return (_reference_rnn.gru(x, w_gate, w_cand, b, h0s, rows, inverse, counts, acts, kw["origin_mode"]),)


@pytest.mark.parametrize("lod", sorted(LODS))
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("origin", [False, True])
def test_fused_gru_equals_unfused(lod, reverse, with_h0, origin):
    lod, inputs, kw = _gru_case(LODS[lod], reverse, with_h0, origin, ("sigmoid", "tanh"))
    _compare(_gru_fused(lod, *inputs, **kw), _gru_unfused(lod, *inputs, **kw), inputs)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("which", [0, 1])
def test_fused_gru_equals_unfused_for_every_activation(act, which):
    acts = ["sigmoid", "tanh"]
    acts[which] = act
    lod, inputs, kw = _gru_case(LODS["mixed"], which == 1, True, which == 0, tuple(acts), seed=which)
    _compare(_gru_fused(lod, *inputs, **kw), _gru_unfused(lod, *inputs, **kw), inputs)


def test_fused_softmax_gradients_where_torchs_kernel_misreads_strided_blocks(monkeypatch):
    """torch 2.4.1's CPU ``_softmax_backward_data`` read strided blocks (a gate's columns of a step's
    buffer) as if contiguous: the fused LSTM's and GRU's softmax activations had wrong gradients there.
    The steps' probe finds such a kernel and hands it contiguous blocks."""
    from lodtensor.backend.torch import _steps

    real = torch._softmax_backward_data

    def misreads(grad, output, dim, dtype):  # each operand's memory read as if it were contiguous
        flat = [torch.as_strided(t, t.shape, torch.empty(t.shape).stride(), t.storage_offset()) for t in (grad, output)]
        return real(*flat, dim, dtype)

    monkeypatch.setattr(torch, "_softmax_backward_data", misreads)
    monkeypatch.setattr(_steps, "_STRIDED_SOFTMAX_GRAD", _steps._strided_softmax_grad())
    assert not _steps._STRIDED_SOFTMAX_GRAD  # the probe sees the simulated kernel
    lod, inputs, kw = _lstm_case(LODS["mixed"], True, False, "both", ("softmax", "tanh", "tanh"))
    _compare(_lstm_fused(lod, *inputs, **kw), _lstm_unfused(lod, *inputs, **kw), inputs)
    lod, inputs, kw = _gru_case(LODS["mixed"], False, True, True, ("softmax", "tanh"))
    _compare(_gru_fused(lod, *inputs, **kw), _gru_unfused(lod, *inputs, **kw), inputs)


def _gradcheck(fused, lod, inputs, kw):
    """gradcheck of ``fused`` over the inputs that are given (None ones stay None)."""
    present = [t is not None for t in inputs]

    def fn(*args):
        given = iter(args)
        return torch.cat(fused(lod, *[next(given) if p else None for p in present], **kw), 1)

    assert torch.autograd.gradcheck(fn, [t for t in inputs if t is not None], eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("lod", sorted(LODS))
@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_gradcheck_fused_lstm(lod, peep, reverse):
    for state in ("none", "h", "c", "both") if lod == "mixed" else ("both",):
        lod_, inputs, kw = _lstm_case(LODS[lod], peep, reverse, state, ("sigmoid", "tanh", "tanh"))
        _gradcheck(_lstm_fused, lod_, inputs, kw)


@pytest.mark.parametrize("act", ACTS)
def test_gradcheck_fused_lstm_every_activation(act):
    for acts in ((act, "tanh", "tanh"), ("sigmoid", act, act)):
        lod, inputs, kw = _lstm_case(LODS["mixed"], True, False, "both", acts, seed=2)
        _gradcheck(_lstm_fused, lod, inputs, kw)


@pytest.mark.parametrize("lod", sorted(LODS))
@pytest.mark.parametrize("origin", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_gradcheck_fused_gru(lod, origin, with_h0):
    lod, inputs, kw = _gru_case(LODS[lod], lod == "mixed", with_h0, origin, ("sigmoid", "tanh"))
    _gradcheck(_gru_fused, lod, inputs, kw)


@pytest.mark.parametrize("act", ACTS)
def test_gradcheck_fused_gru_every_activation(act):
    for acts in ((act, "tanh"), ("sigmoid", act)):
        lod, inputs, kw = _gru_case(LODS["mixed"], False, True, False, acts, seed=3)
        _gradcheck(_gru_fused, lod, inputs, kw)


def test_all_sequences_empty_gives_empty_results_and_zero_gradients():
    rng = np.random.RandomState(4)
    x, w, b = _tensors(rng, (0, 8), (2, 8), (1, 14))
    hidden, cell = F.dynamic_lstm(lt.LoDTensor(x, [[0, 0, 0]]), w, b)
    assert tuple(hidden.data.shape) == tuple(cell.data.shape) == (0, 2)
    (hidden.data.sum() + cell.data.sum()).backward()
    assert x.grad is not None and x.grad.shape == (0, 8)
    xg, wg = _tensors(rng, (0, 6), (2, 6))
    out = F.dynamic_gru(lt.LoDTensor(xg, [[0, 0]]), wg)
    assert tuple(out.data.shape) == (0, 2)


@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_double_backward_raises_clearly(layer):
    rng = np.random.RandomState(5)
    gates = 4 if layer == "lstm" else 3
    x, w = _tensors(rng, (6, gates * 2), (2, gates * 2))
    b = _tensors(rng, (1, 14 if layer == "lstm" else 6))[0]
    t = lt.LoDTensor(x, LODS["mixed"])
    out = F.dynamic_lstm(t, w, b)[0].data if layer == "lstm" else F.dynamic_gru(t, w, b).data
    # a first gradient with create_graph=True is right; differentiating it again raises
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(out.sum(), x, retain_graph=True)
    torch.testing.assert_close(gx.detach(), want)
    with pytest.raises(RuntimeError, match=rf"dynamic_{layer}\(\): double backward .* is not supported"):
        gx.sum().backward()


def test_fused_torch_equals_numpy_in_float32():
    """The float32 training path against the NumPy forward (the Paddle bench's dtype)."""
    rng = np.random.RandomState(6)
    lod = [[0, 7, 7, 12, 13, 20]]
    x, w, b = (rng.uniform(-0.5, 0.5, size=s).astype(np.float32) for s in ((20, 16), (4, 16), (1, 28)))
    want_h, want_c = F.dynamic_lstm(lt.LoDTensor(x, lod), w, b, is_reverse=True)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    got_h, got_c = F.dynamic_lstm(lt.LoDTensor(xt, lod), wt, bt, is_reverse=True)
    np.testing.assert_allclose(got_h.data.detach().numpy(), want_h.data, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_c.data.detach().numpy(), want_c.data, rtol=1e-5, atol=1e-6)
    (got_h.data.sum() + got_c.data.sum()).backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (xt, wt, bt))


@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_small_recurrences_run_their_steps_on_one_thread_forward_and_backward(layer, monkeypatch):
    """Small steps run their element-wise ops and GEMMs on fewer torch threads, forward and backward
    (OpenMP's fork/join per step made them 6-10x slower), and the count comes back afterwards."""
    from lodtensor.backend.torch._recurrent import StepThreads

    seen = []  # (threads of the loop, threads of the GEMM) at every per-step GEMM
    gemm = StepThreads.gemm

    def probe(self, fn, *args, **kwargs):
        loop = torch.get_num_threads()

        def run(*a, **k):
            seen.append((loop, torch.get_num_threads()))
            return fn(*a, **k)

        return gemm(self, run, *args, **kwargs)

    monkeypatch.setattr(StepThreads, "gemm", probe)
    monkeypatch.setattr("lodtensor.backend.torch._steps._SWITCH", [True])  # (where changing the count is slow,
    previous = torch.get_num_threads()  # torch 2.4's, the loops keep it: test_version_range.py)
    torch.set_num_threads(2)
    try:
        rng = np.random.RandomState(0)
        gates = 4 if layer == "lstm" else 3
        x = lt.LoDTensor(torch.tensor(rng.rand(9, gates * 3), requires_grad=True), [[0, 4, 5, 9]])
        w = torch.tensor(rng.rand(3, gates * 3), requires_grad=True)
        b = torch.tensor(rng.rand(1, (7 if layer == "lstm" else 3) * 3), requires_grad=True)
        h = F.dynamic_lstm(x, w, b)[0] if layer == "lstm" else F.dynamic_gru(x, w, b)
        assert torch.get_num_threads() == 2
        assert seen and set(seen) == {(1, 1)}  # forward
        seen.clear()
        h.data.sum().backward()
        assert torch.get_num_threads() == 2
        assert seen and set(seen) == {(1, 1)}  # backward
        expected = [p.grad.clone() for p in (x.data, w, b)]
        for p in (x.data, w, b):
            p.grad = None
        torch.set_num_threads(1)  # the same gradients on one thread throughout
        h = F.dynamic_lstm(x, w, b)[0] if layer == "lstm" else F.dynamic_gru(x, w, b)
        h.data.sum().backward()
        for p, g in zip((x.data, w, b), expected):
            torch.testing.assert_close(p.grad, g)
    finally:
        torch.set_num_threads(previous)


def test_large_steps_keep_torch_threads(monkeypatch):
    from lodtensor.backend.torch._recurrent import StepThreads
    from lodtensor.backend.torch._tuning import STEP_ELEMENTS_PER_THREAD, STEP_WORK_PER_THREAD

    monkeypatch.setattr("lodtensor.backend.torch._steps._SWITCH", [True])  # a torch whose count changes cheaply
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        data = torch.zeros(1, 1)
        big = StepThreads(data, 2 * STEP_ELEMENTS_PER_THREAD // 512, 512, 4)  # large GEMMs and element-wise ops
        assert big.gemm_threads is None and big.pointwise is None
        mid = StepThreads(data, 2 * STEP_WORK_PER_THREAD // (4 * 256 * 256), 256, 4)  # large GEMMs, small steps
        assert (mid.gemm_threads, mid.pointwise) == (2, 1)
        small = StepThreads(data, 32, 128, 4)
        assert (small.gemm_threads, small.pointwise) == (1, 1)
        assert StepThreads(torch.zeros(1, 1, device="meta"), 32, 128, 4).pointwise is None  # not a CPU
        with mid:
            assert torch.get_num_threads() == 1
            assert mid.gemm(torch.get_num_threads) == 2
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)


@pytest.mark.gpu
@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_fused_recurrence_on_cuda_equals_cpu(layer):
    """The fused forward and backward on torch CUDA: CPU's values and gradients (float64)."""
    if not torch.cuda.is_available():
        pytest.skip("needs torch CUDA")
    if layer == "lstm":
        lod, inputs, kw = _lstm_case(LODS["empty_first"], True, True, "both", ("sigmoid", "tanh", "tanh"))
        fused = _lstm_fused
    else:
        lod, inputs, kw = _gru_case(LODS["empty_first"], True, True, False, ("sigmoid", "tanh"))
        fused = _gru_fused
    on_cuda = [t.detach().cuda().requires_grad_() for t in inputs]
    want, got = fused(lod, *inputs, **kw), fused(lod, *on_cuda, **kw)
    assert all(g.device.type == "cuda" for g in got)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-10, atol=1e-12)
    sum(o.sum() for o in want).backward()
    sum(o.sum() for o in got).backward()
    for c, t in zip(on_cuda, inputs):
        torch.testing.assert_close(c.grad.cpu(), t.grad, rtol=1e-10, atol=1e-12)
