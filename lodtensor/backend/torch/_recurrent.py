"""Paddle's LSTM and GRU recurrences on torch: one autograd node for the whole recurrence.

The forward runs the steps over the sequences sorted by length (step ``t`` is a
prefix of step ``t - 1``'s rows), writing every result in place into step-major
buffers allocated once: the gates (kept activated: the backward reads each
activation's derivative from its output), the cells and the hidden states.
Autograd records one node, not a dozen small ops per step. Its backward runs the
steps in reverse with in-place ``mul``/``addcmul``/``addmm`` into preallocated
buffers, one GEMM per step for the gradient of the previous hidden state, and
takes the weights' gradients as one GEMM over all steps at the end. Both run on
fewer torch threads when a step is small (``_tuning.STEP_WORK_PER_THREAD``).
Double backward is refused with a clear error when attempted.
"""

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling

from . import _tuning

__all__ = ["lstm", "gru", "StepThreads"]

_aten = torch.ops.aten
_NUMPY_TAKE = (torch.float16, torch.float32, torch.float64)


# -- activations: in place forward, derivative from the output ---------------------------------
def _blocks(x, width):
    return x.reshape(x.shape[0], -1, width)


def _softmax_(x, width):
    x.copy_(torch.softmax(_blocks(x, width), -1).reshape(x.shape))


def _softsign_(x, width):
    x.div_(x.abs().add_(1))


def _tanh_(x, width):
    """tanh in place; on CPU by NumPy's SIMD tanh on the tensor's memory (torch 2.13's CPU tanh ran
    5-20x slower: ``_tuning.NUMPY_TANH``)."""
    if _tuning.NUMPY_TANH and x.device.type == "cpu" and x.dtype in _NUMPY_TANH_DTYPES:
        a = x.numpy()
        np.tanh(a, out=a)
        return x
    return x.tanh_()


_NUMPY_TANH_DTYPES = (torch.float32, torch.float64)

_ACT_ = {
    "sigmoid": lambda x, w: x.sigmoid_(),
    "tanh": _tanh_,
    "relu": lambda x, w: x.relu_(),
    "identity": lambda x, w: x,
    "linear": lambda x, w: x,
    "leaky_relu": lambda x, w: F.leaky_relu_(x, 0.02),
    "elu": lambda x, w: F.elu_(x),
    "softsign": _softsign_,
    "softmax": _softmax_,
}


def _softmax_grad_(y, g, width):
    back = torch._softmax_backward_data(_blocks(g, width), _blocks(y, width), -1, y.dtype)
    g.copy_(back.reshape(g.shape))


def _softsign_grad_(y, g, width):
    g.mul_((1 - y.abs()).square_())  # d/dx x / (1 + |x|) = 1 / (1 + |x|)^2 = (1 - |y|)^2


# g *= act'(y), in place, from the activation's output y
_GRAD_ = {
    "sigmoid": lambda y, g, w: _aten.sigmoid_backward.grad_input(g, y, grad_input=g),
    "tanh": lambda y, g, w: _aten.tanh_backward.grad_input(g, y, grad_input=g),
    "relu": lambda y, g, w: _aten.threshold_backward.grad_input(g, y, 0, grad_input=g),
    "identity": lambda y, g, w: g,
    "linear": lambda y, g, w: g,
    "leaky_relu": lambda y, g, w: _aten.leaky_relu_backward.grad_input(g, y, 0.02, True, grad_input=g),
    "elu": lambda y, g, w: _aten.elu_backward.grad_input(g, 1.0, 1, 1, True, y, grad_input=g),
    "softsign": _softsign_grad_,
    "softmax": _softmax_grad_,
}


# -- helpers ------------------------------------------------------------------------------------
class StepThreads:
    """torch's intra-op threads for a loop of small steps (CPU), restored afterwards.

    A step is one small GEMM and a dozen element-wise ops on a few hundred KB. With one
    thread per core every op pays OpenMP's fork and join, and on a small or loaded machine
    the threads wait for each other (on the loaded 2-core VM, six element-wise ops of a
    ``[2266, 256]`` step took 0.62 ms on one thread and 4.8 ms on two, medians; 2 threads
    made a small LSTM 6-10x slower than 1). Inside ``with StepThreads(...)`` the element-wise
    ops run on ``pointwise`` threads (one per ``STEP_ELEMENTS_PER_THREAD`` values of a step)
    and the per-step GEMMs, through :meth:`gemm`, on ``gemm`` threads (one per
    ``STEP_WORK_PER_THREAD`` multiply-adds), both at most torch's count. CPU data only;
    ``torch.set_num_threads`` is process-wide: other threads of the process see the lower
    count meanwhile.
    """

    __slots__ = ("gemm_threads", "pointwise", "saved")

    def __init__(self, like, batch, d, gates):
        self.gemm_threads = self.pointwise = self.saved = None
        if like.device.type == "cpu":
            have = torch.get_num_threads()
            gemm = max(1, min(have, (int(batch) * d * gates * d) // _tuning.STEP_WORK_PER_THREAD))
            pointwise = max(1, min(have, (int(batch) * d) // _tuning.STEP_ELEMENTS_PER_THREAD))
            if min(gemm, pointwise) < have:
                self.gemm_threads, self.pointwise = gemm, pointwise

    def __enter__(self):
        if self.pointwise is not None:
            self.saved = torch.get_num_threads()
            torch.set_num_threads(self.pointwise)
        return self

    def gemm(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` (a per-step GEMM) on the GEMM's thread count."""
        if self.saved is None or self.gemm_threads == self.pointwise:
            return fn(*args, **kwargs)
        torch.set_num_threads(self.gemm_threads)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(self.pointwise)

    def restore(self):
        """Back to the caller's count (early: before the whole-batch GEMMs after a loop)."""
        if self.saved is not None:
            torch.set_num_threads(self.saved)
            self.saved = None

    def __exit__(self, *exc):
        self.restore()
        return False


def _take(a, index):
    """Rows ``index`` (int64 on ``a``'s device) of ``a``, a new tensor. On CPU, NumPy's take on the
    tensor's memory (1.7x faster than ``index_select`` on the 300 MB of gates of
    ``bench/paddle_layers.py``, measured)."""
    if a.device.type == "cpu" and a.dtype in _NUMPY_TAKE and index.device.type == "cpu":
        host = a.detach().resolve_conj().resolve_neg().numpy()
        return torch.from_numpy(np.take(host, index.numpy(), axis=0))
    return a.index_select(0, index)


def _bounds(counts):
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64).tolist()


def _previous_rows(counts, like):
    """For every step-major row of steps ``1..``, the row of the same sequence one step earlier."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    prev = np.arange(int(counts[0]), total, dtype=np.int64) - np.repeat(counts[:-1], counts[1:])
    return torch.from_numpy(prev).to(like.device)


def _with_previous(first, steps, prev, width):
    """``[first; steps[prev]]`` (``first`` None: ``steps[prev]`` alone), one new buffer."""
    rows = prev.shape[0] + (0 if first is None else first.shape[0])
    out = steps.new_empty((rows, width))
    start = 0
    if first is not None:
        out[: first.shape[0]] = first
        start = first.shape[0]
    torch.index_select(steps, 0, prev, out=out[start:])
    return out


def _rowdot(a, b):
    """Column sums of ``a * b`` as a ``[1, D]`` row."""
    return (a * b).sum(0, keepdim=True)


def _once(where, grads):
    """``grads`` as returned by a backward; where the caller asked for a graph of the gradients
    (``create_graph=True``), they lead to a node that refuses a second differentiation."""
    if not torch.is_grad_enabled():
        return grads
    from torch._C import _functions  # noqa: PLC0415 - what torch's once_differentiable uses

    message = (
        f"{where}: double backward (a gradient of the gradient, create_graph=True) is not supported "
        "through the fused recurrence; differentiate the recurrence once"
    ).encode()
    present = [g for g in grads if g is not None]
    if not present:
        return grads
    err = _functions.DelayedError(message, len(present))
    marked = err(*[g.detach().requires_grad_() for g in present])
    marked = iter(marked if isinstance(marked, tuple) else (marked,))
    return tuple(None if g is None else next(marked) for g in grads)


# -- LSTM -----------------------------------------------------------------------------------------
def _lstm_forward(x, w, b, h, c, rows, counts, acts, peep, threads, keep=False):
    """Step-major activated gates ``[total, 4D]`` (candidate, input, forget, output), cells, hidden states
    and, with ``keep`` (for the backward), the cells' activations (else None)."""
    gate, cell, cand = (_ACT_[a] for a in acts)
    d = int(w.shape[0])
    gates = _take(x, rows)
    gates += b[:, : 4 * d]
    total = int(gates.shape[0])
    hs, cs = gates.new_empty((total, d)), gates.new_empty((total, d))
    cell_acts = gates.new_empty((total, d)) if keep else None
    if peep:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d : 7 * d]
    with threads:  # the per-step loop on the steps' thread counts
        lo = 0
        for n in counts:
            hi = lo + n
            g = gates[lo:hi]
            if h is not None:
                threads.gemm(g.addmm_, h[:n], w)
            cand(g[:, :d], d)
            c_prev = None if c is None else c[:n]
            if peep and c_prev is not None:
                g[:, d : 2 * d].addcmul_(c_prev, w_ic)
                g[:, 2 * d : 3 * d].addcmul_(c_prev, w_fc)
            gate(g[:, d : 3 * d] if peep else g[:, d:], d)
            c = cs[lo:hi]
            torch.mul(g[:, :d], g[:, d : 2 * d], out=c)
            if c_prev is not None:
                c.addcmul_(c_prev, g[:, 2 * d : 3 * d])
            if peep:
                g[:, 3 * d :].addcmul_(c, w_oc)
                gate(g[:, 3 * d :], d)
            h = hs[lo:hi]
            if keep:
                tc = cell_acts[lo:hi]
                tc.copy_(c)
                cell(tc, d)
                torch.mul(tc, g[:, 3 * d :], out=h)
            else:
                h.copy_(c)
                cell(h, d)
                h.mul_(g[:, 3 * d :])
            lo = hi
    return gates, hs, cs, cell_acts


def _lstm_backward(saved, meta, grad_hidden, grad_cell, needs, threads):
    w, b, h0, c0, gates, hs, cs, cell_acts, rows, inverse = saved
    counts, acts, peep = meta
    gate_grad, cell_grad, cand_grad = (_GRAD_[a] for a in acts)
    d, n0, total = int(w.shape[0]), counts[0], int(gates.shape[0])
    bounds = _bounds(counts)
    g_h = None if grad_hidden is None else _take(grad_hidden, rows)
    g_c = None if grad_cell is None else _take(grad_cell, rows)
    dgates = torch.empty_like(gates)
    dh, dc = gates.new_zeros((n0, d)), gates.new_zeros((n0, d))
    scratch = gates.new_empty((n0, d))
    if peep:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d : 7 * d]
    with threads:  # the per-step loop on the steps' thread counts
        for t in range(len(counts) - 1, -1, -1):
            n, lo = counts[t], bounds[t]
            hi = lo + n
            dhv, dcv = dh[:n], dc[:n]  # rows past the previous step's count are still zero
            if g_h is not None:
                dhv += g_h[lo:hi]
            if g_c is not None:
                dcv += g_c[lo:hi]
            g, dg = gates[lo:hi], dgates[lo:hi]
            cand, i, f, o = g[:, :d], g[:, d : 2 * d], g[:, 2 * d : 3 * d], g[:, 3 * d :]
            d_cand, d_i, d_f, d_o = dg[:, :d], dg[:, d : 2 * d], dg[:, 2 * d : 3 * d], dg[:, 3 * d :]
            tc = cell_acts[lo:hi]  # cell(c_t)
            torch.mul(dhv, tc, out=d_o)
            tmp = scratch[:n]
            torch.mul(dhv, o, out=tmp)
            cell_grad(tc, tmp, d)
            dcv += tmp
            gate_grad(o, d_o, d)
            if peep:
                dcv.addcmul_(d_o, w_oc)
            torch.mul(dcv, i, out=d_cand)
            cand_grad(cand, d_cand, d)
            torch.mul(dcv, cand, out=d_i)
            gate_grad(i, d_i, d)
            c_prev = cs[bounds[t - 1] : bounds[t - 1] + n] if t else c0
            if c_prev is not None:
                torch.mul(dcv, c_prev, out=d_f)
                gate_grad(f, d_f, d)
                dcv.mul_(f)
                if peep:
                    dcv.addcmul_(d_i, w_ic)
                    dcv.addcmul_(d_f, w_fc)
            else:
                d_f.zero_()
            if t or h0 is not None:
                threads.gemm(torch.mm, dg, w.t(), out=dhv)
    d_x = _take(dgates, inverse) if needs[0] else None
    d_w = d_b = None
    prev = _previous_rows(counts, gates) if (needs[1] or (needs[2] and peep)) else None
    if needs[1]:
        first = 0 if h0 is not None else n0
        d_w = _with_previous(h0, hs, prev, d).t().mm(dgates[first:]) if total > first else torch.zeros_like(w)
    if needs[2]:
        d_b = torch.zeros_like(b)
        d_b[:, : 4 * d] = dgates.sum(0, keepdim=True)
        if peep:
            first = 0 if c0 is not None else n0
            if total > first:
                c_prev_all = _with_previous(c0, cs, prev, d)
                d_b[:, 4 * d : 5 * d] = _rowdot(dgates[first:, d : 2 * d], c_prev_all)
                d_b[:, 5 * d : 6 * d] = _rowdot(dgates[first:, 2 * d : 3 * d], c_prev_all)
            d_b[:, 6 * d :] = _rowdot(dgates[:, 3 * d :], cs)
    d_h0 = dh if needs[3] and h0 is not None else None
    d_c0 = dc if needs[4] and c0 is not None else None
    return d_x, d_w, d_b, d_h0, d_c0


def _lstm_function():
    class LSTM(torch.autograd.Function):
        """The whole LSTM recurrence as one autograd node (see the module's docstring)."""

        @staticmethod
        def forward(ctx, x, w, b, h0, c0, rows, inverse, counts, acts, peep):
            threads = StepThreads(x, counts[0], int(w.shape[0]), 4)
            gates, hs, cs, cell_acts = _lstm_forward(x, w, b, h0, c0, rows, counts, acts, peep, threads, keep=True)
            ctx.save_for_backward(w, b, h0, c0, gates, hs, cs, cell_acts, rows, inverse)
            ctx.meta = (counts, acts, peep)
            ctx.set_materialize_grads(False)
            return _take(hs, inverse), _take(cs, inverse)

        @staticmethod
        def backward(ctx, grad_hidden, grad_cell):
            needs = ctx.needs_input_grad
            saved = ctx.saved_tensors
            threads = StepThreads(saved[4], ctx.meta[0][0], int(saved[0].shape[0]), 4)
            with torch.no_grad():
                grads = _lstm_backward(saved, ctx.meta, grad_hidden, grad_cell, needs, threads)
            grads = _once("dynamic_lstm()", grads)
            return (*grads, None, None, None, None, None)

    return LSTM


# -- GRU ------------------------------------------------------------------------------------------
def _gru_forward(x, w_gate, w_cand, b, h, rows, counts, acts, origin, threads):
    """Step-major activated gates ``[total, 3D]`` (update, reset, candidate), hidden states and the
    products ``r * h_prev`` (the candidate GEMM's left operand)."""
    gate, cand = (_ACT_[a] for a in acts)
    d = int(w_cand.shape[0])
    gates = _take(x, rows)
    if b is not None:
        gates += b
    total = int(gates.shape[0])
    hs, rh_all = gates.new_empty((total, d)), gates.new_empty((total, d))
    with threads:  # the per-step loop on the steps' thread counts
        lo = 0
        for n in counts:
            hi = lo + n
            g, out = gates[lo:hi], hs[lo:hi]
            if h is None:
                gate(g[:, :d], d)
                c = g[:, 2 * d :]
                cand(c, d)
                torch.mul(g[:, :d], c, out=out)
                if origin:  # (1 - u) * c
                    torch.sub(c, out, out=out)
            else:
                h_prev = h[:n]
                threads.gemm(g[:, : 2 * d].addmm_, h_prev, w_gate)
                gate(g[:, : 2 * d], d)
                rh = rh_all[lo:hi]
                torch.mul(g[:, d : 2 * d], h_prev, out=rh)
                c = g[:, 2 * d :]
                threads.gemm(c.addmm_, rh, w_cand)
                cand(c, d)
                if origin:  # c + u * (h - c)
                    torch.sub(h_prev, c, out=out)
                    out.mul_(g[:, :d])
                    out += c
                else:  # h + u * (c - h)
                    torch.sub(c, h_prev, out=out)
                    out.mul_(g[:, :d])
                    out += h_prev
            h = out
            lo = hi
    return gates, hs, rh_all


def _gru_backward(saved, meta, grad_hidden, needs, threads):
    w_gate, w_cand, b, h0, gates, hs, rh_all, rows, inverse = saved
    counts, acts, origin = meta
    gate_grad, cand_grad = (_GRAD_[a] for a in acts)
    d, n0, total = int(w_cand.shape[0]), counts[0], int(gates.shape[0])
    bounds = _bounds(counts)
    g_h = _take(grad_hidden, rows)
    dgates = torch.empty_like(gates)
    dh = gates.new_zeros((n0, d))
    t1 = gates.new_empty((n0, d))
    with threads:  # the per-step loop on the steps' thread counts
        for t in range(len(counts) - 1, -1, -1):
            n, lo = counts[t], bounds[t]
            hi = lo + n
            dhv = dh[:n]
            dhv += g_h[lo:hi]
            g, dg = gates[lo:hi], dgates[lo:hi]
            u, r, c = g[:, :d], g[:, d : 2 * d], g[:, 2 * d :]
            d_u, d_r, d_c = dg[:, :d], dg[:, d : 2 * d], dg[:, 2 * d :]
            h_prev = hs[bounds[t - 1] : bounds[t - 1] + n] if t else h0
            if h_prev is None:  # h = u * c, or (1 - u) * c
                torch.mul(dhv, c, out=d_u)
                torch.mul(dhv, u, out=d_c)
                if origin:
                    d_u.neg_()
                    torch.sub(dhv, d_c, out=d_c)
                gate_grad(u, d_u, d)
                cand_grad(c, d_c, d)
                d_r.zero_()
                continue
            tmp = t1[:n]
            if origin:  # h = c + u * (h_prev - c)
                torch.sub(h_prev, c, out=d_u)
                d_u.mul_(dhv)
                torch.mul(dhv, u, out=tmp)
                torch.sub(dhv, tmp, out=d_c)
                dhv.copy_(tmp)  # the direct part of dh_prev: dh * u
            else:  # h = h_prev + u * (c - h_prev)
                torch.sub(c, h_prev, out=d_u)
                d_u.mul_(dhv)
                torch.mul(dhv, u, out=d_c)
                dhv.sub_(d_c)  # dh * (1 - u)
            gate_grad(u, d_u, d)
            cand_grad(c, d_c, d)
            threads.gemm(torch.mm, d_c, w_cand.t(), out=tmp)  # the gradient of r * h_prev
            torch.mul(tmp, h_prev, out=d_r)
            gate_grad(r, d_r, d)
            dhv.addcmul_(tmp, r)
            threads.gemm(dhv.addmm_, dg[:, : 2 * d], w_gate.t())
    d_x = _take(dgates, inverse) if needs[0] else None
    first = 0 if h0 is not None else n0
    d_wg = d_wc = None
    if needs[1]:
        if total > first:
            d_wg = _with_previous(h0, hs, _previous_rows(counts, gates), d).t().mm(dgates[first:, : 2 * d])
        else:
            d_wg = torch.zeros_like(w_gate)
    if needs[2]:
        d_wc = rh_all[first:].t().mm(dgates[first:, 2 * d :]) if total > first else torch.zeros_like(w_cand)
    d_b = dgates.sum(0, keepdim=True) if needs[3] and b is not None else None
    d_h0 = dh if needs[4] and h0 is not None else None
    return d_x, d_wg, d_wc, d_b, d_h0


def _gru_function():
    class GRU(torch.autograd.Function):
        """The whole GRU recurrence as one autograd node (see the module's docstring)."""

        @staticmethod
        def forward(ctx, x, w_gate, w_cand, b, h0, rows, inverse, counts, acts, origin):
            threads = StepThreads(x, counts[0], int(w_cand.shape[0]), 3)
            gates, hs, rh_all = _gru_forward(x, w_gate, w_cand, b, h0, rows, counts, acts, origin, threads)
            ctx.save_for_backward(w_gate, w_cand, b, h0, gates, hs, rh_all, rows, inverse)
            ctx.meta = (counts, acts, origin)
            return _take(hs, inverse)

        @staticmethod
        def backward(ctx, grad_hidden):
            saved = ctx.saved_tensors
            threads = StepThreads(saved[4], ctx.meta[0][0], int(saved[1].shape[0]), 3)
            with torch.no_grad():
                grads = _gru_backward(saved, ctx.meta, grad_hidden, ctx.needs_input_grad, threads)
            grads = _once("dynamic_gru()", grads)
            return (*grads, None, None, None, None, None)

    return GRU


_FUNCTIONS = {}


def _function(name, make):
    fn = _FUNCTIONS.get(name)
    if fn is None:
        fn = _FUNCTIONS[name] = make()
    return fn


def _tracked(*arrays):
    return torch.is_grad_enabled() and any(a is not None and a.requires_grad for a in arrays)


def lstm(x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes):
    """See ``Backend.lstm``."""
    counts = [int(n) for n in counts]
    acts = tuple(activations)
    if _tracked(x, weight, bias, h_0, c_0):
        fn = _function("lstm", _lstm_function)
        return fn.apply(x, weight, bias, h_0, c_0, rows, inverse, counts, acts, bool(peepholes))
    threads = StepThreads(x, counts[0], int(weight.shape[0]), 4)
    with torch.no_grad():
        _, hs, cs, _ = _lstm_forward(x, weight, bias, h_0, c_0, rows, counts, acts, bool(peepholes), threads)
        return _take(hs, inverse), _take(cs, inverse)


def gru(x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode):
    """See ``Backend.gru``."""
    counts = [int(n) for n in counts]
    acts = tuple(activations)
    if _tracked(x, w_gate, w_cand, bias, h_0):
        fn = _function("gru", _gru_function)
        return fn.apply(x, w_gate, w_cand, bias, h_0, rows, inverse, counts, acts, bool(origin_mode))
    threads = StepThreads(x, counts[0], int(w_cand.shape[0]), 3)
    with torch.no_grad():
        _, hs, _ = _gru_forward(x, w_gate, w_cand, bias, h_0, rows, counts, acts, bool(origin_mode), threads)
        return _take(hs, inverse)
