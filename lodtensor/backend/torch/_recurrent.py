"""Paddle's LSTM and GRU recurrences on torch: one autograd node for the whole recurrence.

The forward runs the steps over the sequences sorted by length (step ``t`` is a
prefix of step ``t - 1``'s rows), writing every result in place into step-major
buffers allocated once: the gates (kept activated: the backward reads each
activation's derivative from its output), the cells and the hidden states.
Autograd records one node, not a dozen small ops per step. Its backward runs the
steps in reverse with in-place ``mul``/``addcmul``/``addmm`` into preallocated
buffers, one GEMM per step for the gradient of the previous hidden state, and
takes the weights' gradients as one GEMM over all steps at the end. Both run on
fewer torch threads when a step is small (``_steps.StepThreads``).
Double backward is refused with a clear error when attempted. Gradients batched by a vmap
(``autograd.grad(..., is_grads_batched=True)``, ``autograd.functional.jacobian(vectorize=True)``,
``torch.func.vmap`` over ``autograd.grad``) cannot be added into those unbatched buffers: for them the
backward runs the same steps out of place (``_recurrent_grads``).
"""

import torch

from ..._compile import eager_under_compile
from . import _recurrent_grads, _recurrent_ops
from ._fused_steps import steps as fused_steps
from ._steps import _ACT_, _GRAD_, StepThreads, _bounds, _once, _previous_rows, _rowdot, _take, _with_previous
from ._vmap import steps_rule, wrapped

__all__ = ["lstm", "gru", "StepThreads"]


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
    peep_w = b[0, 4 * d :] if peep else None
    w_c = w.contiguous()
    fused = fused_steps("lstm", gates, acts, (h, c, peep_w, w_c))  # CUDA: a cuBLAS GEMM and one kernel a step
    if fused is not None:
        with fused.launching():
            starts = _bounds(counts)[:-1]
            g_at = fused.rows_at(gates, starts)
            gemm = fused.gemm(counts, g_at, 4 * d, fused.previous(hs, starts, h), d, w_c)
            step = fused.plan("lstm_step", counts, d, (
                g_at, fused.previous(cs, starts, c), fused.at(peep_w), fused.rows_at(cs, starts),
                fused.rows_at(hs, starts), fused.rows_at(cell_acts, starts)))
            for t in range(len(counts)):
                fused.run((gemm[t], step[t]) if t or h is not None else (step[t],))
        return gates, hs, cs, cell_acts
    with threads:
        lo = 0
        for n in counts:
            hi = lo + n
            g = gates[lo:hi]
            if h is not None:
                threads.gemm(g.addmm_, h[:n], w)
            c_prev = None if c is None else c[:n]
            cand(g[:, :d], d)
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
    peep_w = b[0, 4 * d :] if peep else None
    w_c = w.contiguous()
    fused = fused_steps("lstm", gates, acts, (c0, peep_w, g_h, g_c, w_c))
    if fused is not None:
        with fused.launching():
            starts = bounds[:-1]
            dg_at = fused.rows_at(dgates, starts)
            step = fused.plan("lstm_step_grad", counts, d, (
                fused.rows_at(gates, starts), fused.rows_at(cell_acts, starts), fused.previous(cs, starts, c0),
                fused.at(peep_w), fused.rows_at(g_h, starts), fused.rows_at(g_c, starts), fused.at(dh), fused.at(dc),
                dg_at))
            gemm = fused.gemm(counts, fused.at(dh), d, dg_at, 4 * d, w_c, transposed=True, accumulate=False)
            for t in range(len(counts) - 1, -1, -1):  # dh, dc: rows past the previous step's count are still zero
                fused.run((step[t], gemm[t]) if t or h0 is not None else (step[t],))
    else:
        with threads:
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
    @steps_rule(states=(3, 4), row_outputs=2)
    class LSTM(torch.autograd.Function):
        """The whole LSTM recurrence as one autograd node (see the module's docstring)."""

        @staticmethod
        def forward(x, w, b, h0, c0, rows, inverse, counts, acts, peep):
            """``(hidden, cell)`` in the rows' order, then the step-major buffers the backward reads (outputs
            too, without gradients: torch.func wants what is saved to come from inputs or outputs)."""
            threads = StepThreads(x, counts[0], int(w.shape[0]), 4)
            gates, hs, cs, cell_acts = _lstm_forward(x, w, b, h0, c0, rows, counts, acts, peep, threads, keep=True)
            return _take(hs, inverse), _take(cs, inverse), gates, hs, cs, cell_acts

        @staticmethod
        def setup_context(ctx, inputs, output):
            _keep(ctx, inputs, output[2:])
            ctx.set_materialize_grads(False)

        @staticmethod
        @eager_under_compile  # see _backward
        def backward(ctx, grad_hidden, grad_cell, *_):
            return _backward(ctx, "dynamic_lstm()", _lstm_backward, 4, grad_hidden, grad_cell)

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
    w_g, w_c = w_gate.contiguous(), w_cand.contiguous()
    fused = fused_steps("gru", gates, acts, (h, w_g, w_c))  # CUDA: cuBLAS GEMMs, one kernel after each
    if fused is not None:
        with fused.launching():
            starts = _bounds(counts)[:-1]
            g_at, prev_at = fused.rows_at(gates, starts), fused.previous(hs, starts, h)
            rh_at = fused.rows_at(rh_all, starts)
            gemm_gates = fused.gemm(counts, g_at, 3 * d, prev_at, d, w_g)
            reset = fused.plan("gru_step_gates", counts, d, (g_at, prev_at, rh_at))
            gemm_cand = fused.gemm(counts, fused.rows_at(gates, starts, 2 * d), 3 * d, rh_at, d, w_c)
            out = fused.plan("gru_step_out", counts, d, (g_at, prev_at, fused.rows_at(hs, starts)), origin)
            for t in range(len(counts)):
                fused.run((gemm_gates[t], reset[t], gemm_cand[t], out[t]) if t or h is not None else (out[t],))
        return gates, hs, rh_all
    with threads:
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


def _gru_backward_steps(gates, hs, h0, g_h, dgates, dh, t1, w_gate, w_cand, counts, bounds, acts, origin,
                                threads):
    """The GRU backward's steps one op at a time (where the fused steps do not serve): the gates' gradients
    into ``dgates``, the initial state's into ``dh``."""
    gate_grad, cand_grad = (_GRAD_[a] for a in acts)
    d = int(w_cand.shape[0])
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


def _gru_backward(saved, meta, grad_hidden, needs, threads):
    w_gate, w_cand, b, h0, gates, hs, rh_all, rows, inverse = saved
    counts, acts, origin = meta
    d, n0, total = int(w_cand.shape[0]), counts[0], int(gates.shape[0])
    bounds = _bounds(counts)
    g_h = _take(grad_hidden, rows)
    dgates = torch.empty_like(gates)
    dh = gates.new_zeros((n0, d))
    t1 = gates.new_empty((n0, d))
    w_g, w_c = w_gate.contiguous(), w_cand.contiguous()
    fused = fused_steps("gru", gates, acts, (h0, g_h, w_g, w_c))
    if fused is not None:
        with fused.launching():
            starts = bounds[:-1]
            g_at, prev_at = fused.rows_at(gates, starts), fused.previous(hs, starts, h0)
            dg_at = fused.rows_at(dgates, starts)
            grad_out = fused.plan("gru_step_grad_out", counts, d,
                                  (g_at, prev_at, fused.rows_at(g_h, starts), fused.at(dh), dg_at), origin)
            gemm_reset = fused.gemm(counts, fused.at(t1), d, fused.rows_at(dgates, starts, 2 * d), 3 * d, w_c,
                                    transposed=True, accumulate=False)  # the gradient of r * h_prev
            grad_reset = fused.plan("gru_step_grad_reset", counts, d,
                                    (g_at, prev_at, fused.at(t1), fused.at(dh), dg_at))
            gemm_state = fused.gemm(counts, fused.at(dh), d, dg_at, 3 * d, w_g, transposed=True)
            for t in range(len(counts) - 1, -1, -1):  # with a previous state: the reset's gradient and the state's
                fused.run((grad_out[t], gemm_reset[t], grad_reset[t], gemm_state[t]) if t or h0 is not None
                          else (grad_out[t],))
    else:
        with threads:
            _gru_backward_steps(gates, hs, h0, g_h, dgates, dh, t1, w_gate, w_cand, counts, bounds, acts, origin,
                                threads)
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
    @steps_rule(states=(4,), row_outputs=1)
    class GRU(torch.autograd.Function):
        """The whole GRU recurrence as one autograd node (see the module's docstring)."""

        @staticmethod
        def forward(x, w_gate, w_cand, b, h0, rows, inverse, counts, acts, origin):
            """The hidden states in the rows' order, then the step-major buffers the backward reads."""
            threads = StepThreads(x, counts[0], int(w_cand.shape[0]), 3)
            gates, hs, rh_all = _gru_forward(x, w_gate, w_cand, b, h0, rows, counts, acts, origin, threads)
            return _take(hs, inverse), gates, hs, rh_all

        @staticmethod
        def setup_context(ctx, inputs, output):
            _keep(ctx, inputs, output[1:])

        @staticmethod
        @eager_under_compile  # see _backward
        def backward(ctx, grad_hidden, *_):
            return _backward(ctx, "dynamic_gru()", _gru_backward, 3, grad_hidden)

    return GRU


# -- the Functions' shared parts: inputs (x, 4 weights/bias/initial states, rows, inverse, counts,
# activations, a flag); outputs (the results, then the step-major buffers the backward reads) ---------
def _keep(ctx, inputs, buffers):
    """Save what a recurrence's backward reads, in its order: the weights, bias and initial states
    (inputs 1-4), the step-major ``buffers`` (outputs without gradients), the rows' order and its
    inverse; ``ctx.meta``: the step counts, the activations and the LSTM's peepholes or GRU's origin mode."""
    ctx.save_for_backward(*inputs[1:5], *buffers, *inputs[5:7])
    ctx.mark_non_differentiable(*buffers)
    ctx.meta = tuple(inputs[7:10])


def _backward(ctx, where, steps_backward, gate_count, *grads):
    """``steps_backward`` (``_lstm_backward``, ``_gru_backward``) unrecorded, on the step threads of
    ``gate_count`` gates of D (the first weight's rows); a node refusing double backward (``_once``);
    None for the five inputs that are no parameters.

    The Functions' ``backward`` run eagerly when dynamo would trace them: a compiled training step's
    ``loss.backward()`` (a graph break) runs the autograd engine with dynamo's frame hook on, which traced
    these host-planned steps (the step counts) and recompiled them for every new LoD."""
    saved = ctx.saved_tensors
    batched = any(g is not None and wrapped(g) for g in grads)  # by a vmap (is_grads_batched=True...)
    if batched and torch.is_grad_enabled():  # (_once cannot mark a batch: torch 2.13 crashes on it)
        raise RuntimeError(f"{where}: a graph of batched gradients (is_grads_batched=True or a vectorized "
                           f"jacobian/hessian, with create_graph=True) is not supported through the fused "
                           f"recurrence; differentiate the recurrence once, or take the gradients one at a time")
    with torch.no_grad():
        if batched:  # no in-place step into an unbatched buffer: the same steps out of place
            result = _BATCHED[steps_backward](saved, ctx.meta, *grads, ctx.needs_input_grad)
        else:
            threads = StepThreads(saved[4], ctx.meta[0][0], int(saved[0].shape[0]), gate_count)
            result = steps_backward(saved, ctx.meta, *grads, ctx.needs_input_grad, threads)
    return (*_once(where, result), None, None, None, None, None)


#: each fused backward's out-of-place form, for gradients batched by a vmap (``_recurrent_grads``)
_BATCHED = {_lstm_backward: _recurrent_grads.lstm_backward, _gru_backward: _recurrent_grads.gru_backward}


_FUNCTIONS = {}


def _function(name, make):
    fn = _FUNCTIONS.get(name)
    if fn is None:
        fn = _FUNCTIONS[name] = make()
    return fn


def _tracked(*arrays):
    """Whether the recurrence goes through its autograd Function: autograd records, or torch.func
    transforms an argument (vmap's rule lives on the Function)."""
    return any(a is not None and (wrapped(a) or (a.requires_grad and torch.is_grad_enabled())) for a in arrays)


def lstm(x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes):
    """See ``Backend.lstm``."""
    counts = [int(n) for n in counts]
    acts = tuple(activations)
    if _recurrent_ops.needs_ops((x, weight, bias, h_0, c_0), (weight, bias)):
        return _recurrent_ops.lstm(x, weight, bias, h_0, c_0, rows, inverse, counts, acts, bool(peepholes))
    if _tracked(x, weight, bias, h_0, c_0):
        fn = _function("lstm", _lstm_function)
        return fn.apply(x, weight, bias, h_0, c_0, rows, inverse, counts, acts, bool(peepholes))[:2]
    threads = StepThreads(x, counts[0], int(weight.shape[0]), 4)
    with torch.no_grad():
        _, hs, cs, _ = _lstm_forward(x, weight, bias, h_0, c_0, rows, counts, acts, bool(peepholes), threads)
        return _take(hs, inverse), _take(cs, inverse)


def gru(x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode):
    """See ``Backend.gru``."""
    counts = [int(n) for n in counts]
    acts = tuple(activations)
    if _recurrent_ops.needs_ops((x, w_gate, w_cand, bias, h_0), (w_gate, w_cand, bias)):
        return _recurrent_ops.gru(x, w_gate, w_cand, bias, h_0, rows, inverse, counts, acts, bool(origin_mode))
    if _tracked(x, w_gate, w_cand, bias, h_0):
        fn = _function("gru", _gru_function)
        return fn.apply(x, w_gate, w_cand, bias, h_0, rows, inverse, counts, acts, bool(origin_mode))[0]
    threads = StepThreads(x, counts[0], int(w_cand.shape[0]), 3)
    with torch.no_grad():
        _, hs, _ = _gru_forward(x, w_gate, w_cand, bias, h_0, rows, counts, acts, bool(origin_mode), threads)
        return _take(hs, inverse)
