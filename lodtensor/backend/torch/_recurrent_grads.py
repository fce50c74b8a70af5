"""The backward of the recurrence Functions (``_recurrent``) for batched gradients, out of place.

``torch.autograd.grad(..., is_grads_batched=True)`` (and ``autograd.functional.jacobian`` /
``hessian`` with ``vectorize=True``) hands a backward its gradients as a legacy vmap batch;
``torch.func.vmap`` over ``autograd.grad`` hands it torch.func's batch. Neither can add a batch into the
unbatched buffers that ``_recurrent``'s backward writes in place (``dh += g_h[lo:hi]``: "vmap: aten::add_
... is not possible"). Here the same steps (the same formulas, in the same order) run as out-of-place torch
ops, which both vmaps batch: every per-row factor is read from the forward's saved buffers (one for all
samples), and each sample's gradient flows through them, so the result equals a loop over the batch of
gradients. The Functions take this path only for such gradients; a plain backward keeps the fused one.

>>> y, g = torch.tensor([[0.5, 0.25]]), torch.ones(1, 2)
>>> grad_of("sigmoid", y, g, 2).tolist()  # g * y * (1 - y), a new tensor
[[0.25, 0.1875]]
"""

import torch

from ._steps import _bounds, _previous_rows, _rowdot, _with_previous

__all__ = ["lstm_backward", "gru_backward", "grad_of"]


def _softmax_grad(y, g, width):
    y_blocks, g_blocks = y.reshape(y.shape[0], -1, width), g.reshape(g.shape[0], -1, width)
    return ((g_blocks - (g_blocks * y_blocks).sum(-1, keepdim=True)) * y_blocks).reshape(g.shape)


# g * act'(x), from the activation's output y (as ``_steps._GRAD_``, out of place): y is the forward's,
# unbatched; g may be batched
_GRAD = {
    "sigmoid": lambda y, g, w: g * (y * (1 - y)),
    "tanh": lambda y, g, w: g * (1 - y * y),
    "relu": lambda y, g, w: torch.where(y > 0, g, 0.0),
    "identity": lambda y, g, w: g,
    "linear": lambda y, g, w: g,
    "leaky_relu": lambda y, g, w: g * torch.where(y > 0, torch.ones_like(y), torch.full_like(y, 0.02)),
    "elu": lambda y, g, w: g * torch.where(y > 0, torch.ones_like(y), y + 1),  # alpha = 1: exp(x) = y + 1
    "softsign": lambda y, g, w: g * (1 - y.abs()).square(),
    "softmax": _softmax_grad,
}


def grad_of(act, y, g, width):
    """``g * act'(x)`` of Paddle's activation ``act`` from its output ``y`` (softmax: over blocks of
    ``width`` columns), a new tensor."""
    return _GRAD[act](y, g, width)


def _grown(state, n):
    """``state`` (a step's gradient of the hidden state or cell, its rows) with zero rows up to ``n``: the
    sequences an earlier step has and this one had not get nothing from it."""
    more = n - int(state.shape[0])
    return state if more == 0 else torch.cat([state, state.new_zeros((more,) + tuple(state.shape[1:]))])


def lstm_backward(saved, meta, grad_hidden, grad_cell, needs):
    """``_recurrent._lstm_backward``'s results (the gradients of x, w, b, h0, c0) out of place."""
    w, b, h0, c0, gates, hs, cs, cell_acts, rows, inverse = saved
    counts, (gate_act, cell_act, cand_act), peep = meta
    d, n0, total = int(w.shape[0]), counts[0], int(gates.shape[0])
    bounds = _bounds(counts)
    g_h = None if grad_hidden is None else grad_hidden.index_select(0, rows)
    g_c = None if grad_cell is None else grad_cell.index_select(0, rows)
    if peep:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d : 7 * d]
    dh = dc = gates.new_zeros((0, d))
    steps = []
    for t in range(len(counts) - 1, -1, -1):
        n, lo = counts[t], bounds[t]
        hi = lo + n
        dhv, dcv = _grown(dh, n), _grown(dc, n)
        if g_h is not None:
            dhv = dhv + g_h[lo:hi]
        if g_c is not None:
            dcv = dcv + g_c[lo:hi]
        g = gates[lo:hi]
        cand, i, f, o = g[:, :d], g[:, d : 2 * d], g[:, 2 * d : 3 * d], g[:, 3 * d :]
        tc = cell_acts[lo:hi]  # cell(c_t)
        d_o = grad_of(gate_act, o, dhv * tc, d)
        dcv = dcv + grad_of(cell_act, tc, dhv * o, d)
        if peep:
            dcv = dcv + d_o * w_oc
        d_cand = grad_of(cand_act, cand, dcv * i, d)
        d_i = grad_of(gate_act, i, dcv * cand, d)
        c_prev = cs[bounds[t - 1] : bounds[t - 1] + n] if t else c0
        if c_prev is not None:
            d_f = grad_of(gate_act, f, dcv * c_prev, d)
            dcv = dcv * f
            if peep:
                dcv = dcv + d_i * w_ic + d_f * w_fc
        else:
            d_f = torch.zeros_like(d_i)
        dg = torch.cat([d_cand, d_i, d_f, d_o], -1)
        steps.append(dg)
        if t or h0 is not None:
            dhv = dg @ w.t()
        dh, dc = dhv, dcv
    dgates = torch.cat(steps[::-1])
    d_x = dgates.index_select(0, inverse) if needs[0] else None
    d_w = d_b = None
    prev = _previous_rows(counts, gates) if (needs[1] or (needs[2] and peep)) else None
    if needs[1]:
        first = 0 if h0 is not None else n0
        d_w = _with_previous(h0, hs, prev, d).t() @ dgates[first:] if total > first else torch.zeros_like(w)
    if needs[2]:
        parts = [dgates.sum(0, keepdim=True)]
        if peep:
            first = 0 if c0 is not None else n0
            if total > first:
                c_prev_all = _with_previous(c0, cs, prev, d)
                parts += [_rowdot(dgates[first:, d : 2 * d], c_prev_all),
                          _rowdot(dgates[first:, 2 * d : 3 * d], c_prev_all)]
            else:
                parts += [torch.zeros_like(b[:, :d]), torch.zeros_like(b[:, :d])]
            parts.append(_rowdot(dgates[:, 3 * d :], cs))
        d_b = torch.cat(parts, -1)
    d_h0 = _grown(dh, n0) if needs[3] and h0 is not None else None
    d_c0 = _grown(dc, n0) if needs[4] and c0 is not None else None
    return d_x, d_w, d_b, d_h0, d_c0


def gru_backward(saved, meta, grad_hidden, needs):
    """``_recurrent._gru_backward``'s results (the gradients of x, w_gate, w_cand, b, h0) out of place."""
    w_gate, w_cand, b, h0, gates, hs, rh_all, rows, inverse = saved
    counts, (gate_act, cand_act), origin = meta
    d, n0, total = int(w_cand.shape[0]), counts[0], int(gates.shape[0])
    bounds = _bounds(counts)
    g_h = grad_hidden.index_select(0, rows)
    dh = gates.new_zeros((0, d))
    steps = []
    for t in range(len(counts) - 1, -1, -1):
        n, lo = counts[t], bounds[t]
        hi = lo + n
        dhv = _grown(dh, n) + g_h[lo:hi]
        g = gates[lo:hi]
        u, r, c = g[:, :d], g[:, d : 2 * d], g[:, 2 * d :]
        h_prev = hs[bounds[t - 1] : bounds[t - 1] + n] if t else h0
        if h_prev is None:  # h = u * c, or (1 - u) * c
            d_u, d_c = dhv * c, dhv * u
            if origin:
                d_u, d_c = -d_u, dhv - d_c
            steps.append(torch.cat([grad_of(gate_act, u, d_u, d), torch.zeros_like(d_u),
                                    grad_of(cand_act, c, d_c, d)], -1))
            dh = dhv
            continue
        if origin:  # h = c + u * (h_prev - c)
            d_u = (h_prev - c) * dhv
            direct = dhv * u  # the direct part of dh_prev: dh * u
            d_c = dhv - direct
        else:  # h = h_prev + u * (c - h_prev)
            d_u = (c - h_prev) * dhv
            d_c = dhv * u
            direct = dhv - d_c  # dh * (1 - u)
        d_u = grad_of(gate_act, u, d_u, d)
        d_c = grad_of(cand_act, c, d_c, d)
        d_rh = d_c @ w_cand.t()  # the gradient of r * h_prev
        d_r = grad_of(gate_act, r, d_rh * h_prev, d)
        dg = torch.cat([d_u, d_r, d_c], -1)
        steps.append(dg)
        dh = direct + d_rh * r + dg[:, : 2 * d] @ w_gate.t()
    dgates = torch.cat(steps[::-1])
    d_x = dgates.index_select(0, inverse) if needs[0] else None
    first = 0 if h0 is not None else n0
    d_wg = d_wc = None
    if needs[1]:
        if total > first:
            d_wg = _with_previous(h0, hs, _previous_rows(counts, gates), d).t() @ dgates[first:, : 2 * d]
        else:
            d_wg = torch.zeros_like(w_gate)
    if needs[2]:
        d_wc = rh_all[first:].t() @ dgates[first:, 2 * d :] if total > first else torch.zeros_like(w_cand)
    d_b = dgates.sum(0, keepdim=True) if needs[3] and b is not None else None
    d_h0 = _grown(dh, n0) if needs[4] and h0 is not None else None
    return d_x, d_wg, d_wc, d_b, d_h0
