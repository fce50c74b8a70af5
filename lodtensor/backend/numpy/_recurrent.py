"""Paddle's LSTM and GRU recurrences and the CTC loss for the NumPy backend, written against ``xp``
so CuPy's backend runs the same code on the GPU.

Forward only (neither library records gradients). The recurrences run the steps
over the sequences sorted by length (step ``t`` is a prefix of step ``t - 1``'s
rows) and write every result in place into step-major buffers allocated once;
a step reads the previous step's rows back as views.

>>> import numpy as np
>>> x = np.zeros((3, 4)); rows = np.array([0, 2, 1]); inverse = np.array([0, 2, 1])
>>> h, c = lstm(np, x, np.zeros((1, 4)), np.ones((1, 4)), None, None, rows, inverse, [2, 1],
...             ("sigmoid", "tanh", "tanh"), False)
>>> np.round(c.ravel(), 4).tolist()
[0.5568, 0.9638, 0.5568]
"""

import numpy as np

from ._activations import IN_PLACE, OUT_OF_PLACE

__all__ = ["lstm", "gru", "ctc_loss", "activation_"]


def activation_(xp, name, x, width):
    """Paddle's activation ``name`` applied to ``x`` in place (softmax over each block of ``width``
    columns: one gate at a time); returns ``x``."""
    fn = IN_PLACE.get(name)
    if fn is not None:
        return fn(xp, x)
    if name == "softmax":
        n = x.shape[0]
        x[...] = OUT_OF_PLACE["softmax"](xp, x.reshape(n, -1, width)).reshape(n, -1)
    else:
        x[...] = OUT_OF_PLACE[name](xp, x)
    return x


def lstm(xp, x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes, steps=None):
    """See ``Backend.lstm``: ``(hidden, cell)`` in ``x``'s row order. ``steps``: a maker of the fused
    steps (``cupy/_steps.py``: CuPy's), called with the gates and the operands; None where it gives none."""
    gate, cell, cand = activations
    d = int(weight.shape[0])
    counts = [int(n) for n in counts]
    gates = xp.take(x, rows, axis=0)  # a copy: the caller's data is never written
    gates += bias[:, : 4 * d]
    total, width = int(gates.shape[0]), counts[0]
    hs = xp.empty((total, d), dtype=gates.dtype)
    cs = xp.empty((total, d), dtype=gates.dtype)
    buf = xp.empty((width, 4 * d), dtype=gates.dtype)
    tmp = xp.empty((width, d), dtype=gates.dtype)
    if peepholes:
        w_ic, w_fc, w_oc = bias[:, 4 * d : 5 * d], bias[:, 5 * d : 6 * d], bias[:, 6 * d : 7 * d]
    peep = bias[0, 4 * d :] if peepholes else None
    w_c = xp.ascontiguousarray(weight)
    fused = None if steps is None else steps("lstm", gates, activations, (h_0, c_0, peep, w_c))
    if fused is not None:  # each step one GEMM (cuBLAS) and one kernel, every call planned before the loop
        starts = _starts(counts)
        g_at = fused.rows_at(gates, starts)
        gemm = fused.gemm(counts, g_at, 4 * d, fused.previous(hs, starts, h_0), d, w_c)
        step = fused.plan("lstm_step", counts, d, (
            g_at, fused.previous(cs, starts, c_0), fused.at(peep), fused.rows_at(cs, starts),
            fused.rows_at(hs, starts), fused.at(None)))
        for t in range(len(counts)):
            fused.run((gemm[t], step[t]) if t or h_0 is not None else (step[t],))
        return xp.take(hs, inverse, axis=0), xp.take(cs, inverse, axis=0)
    h, c, lo = h_0, c_0, 0
    for n in counts:
        hi = lo + n
        g = gates[lo:hi]
        if h is not None:
            xp.add(g, xp.matmul(h[:n], weight, out=buf[:n]), out=g)
        c_prev = None if c is None else c[:n]
        activation_(xp, cand, g[:, :d], d)
        if peepholes and c_prev is not None:
            g[:, d : 2 * d] += xp.multiply(c_prev, w_ic, out=tmp[:n])
            g[:, 2 * d : 3 * d] += xp.multiply(c_prev, w_fc, out=tmp[:n])
        activation_(xp, gate, g[:, d : 3 * d] if peepholes else g[:, d:], d)
        c = cs[lo:hi]
        xp.multiply(g[:, :d], g[:, d : 2 * d], out=c)
        if c_prev is not None:
            c += xp.multiply(c_prev, g[:, 2 * d : 3 * d], out=tmp[:n])
        if peepholes:
            g[:, 3 * d :] += xp.multiply(c, w_oc, out=tmp[:n])
            activation_(xp, gate, g[:, 3 * d :], d)
        h = hs[lo:hi]
        h[...] = c
        activation_(xp, cell, h, d)
        h *= g[:, 3 * d :]
        lo = hi
    return xp.take(hs, inverse, axis=0), xp.take(cs, inverse, axis=0)


def gru(xp, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode, steps=None):
    """See ``Backend.gru``: the hidden states in ``x``'s row order (``steps``: as for :func:`lstm`)."""
    gate, cand = activations
    d = int(w_cand.shape[0])
    counts = [int(n) for n in counts]
    gates = xp.take(x, rows, axis=0)
    if bias is not None:
        gates += bias
    total, width = int(gates.shape[0]), counts[0]
    hs = xp.empty((total, d), dtype=gates.dtype)
    buf = xp.empty((width, 2 * d), dtype=gates.dtype)
    tmp = xp.empty((width, d), dtype=gates.dtype)
    prod = xp.empty((width, d), dtype=gates.dtype)
    w_g, w_c = xp.ascontiguousarray(w_gate), xp.ascontiguousarray(w_cand)
    fused = None if steps is None else steps("gru", gates, activations, (h_0, w_g, w_c))
    if fused is not None:  # cuBLAS GEMMs and one kernel after each, every call planned before the loop
        starts = _starts(counts)
        g_at, prev_at, rh = fused.rows_at(gates, starts), fused.previous(hs, starts, h_0), fused.at(tmp)
        gemm_gates = fused.gemm(counts, g_at, 3 * d, prev_at, d, w_g)
        reset = fused.plan("gru_step_gates", counts, d, (g_at, prev_at, rh))
        gemm_cand = fused.gemm(counts, fused.rows_at(gates, starts, 2 * d), 3 * d, rh, d, w_c)
        step = fused.plan("gru_step_out", counts, d, (g_at, prev_at, fused.rows_at(hs, starts)), origin_mode)
        for t in range(len(counts)):
            fused.run((gemm_gates[t], reset[t], gemm_cand[t], step[t]) if t or h_0 is not None else (step[t],))
        return xp.take(hs, inverse, axis=0)
    h, lo = h_0, 0
    for n in counts:
        hi = lo + n
        g, out = gates[lo:hi], hs[lo:hi]
        if h is None:
            activation_(xp, gate, g[:, :d], d)
            c = activation_(xp, cand, g[:, 2 * d :], d)
            xp.multiply(g[:, :d], c, out=out)
            if origin_mode:  # (1 - u) * c
                xp.subtract(c, out, out=out)
        else:
            h_prev = h[:n]
            xp.add(g[:, : 2 * d], xp.matmul(h_prev, w_gate, out=buf[:n]), out=g[:, : 2 * d])
            activation_(xp, gate, g[:, : 2 * d], d)
            xp.multiply(g[:, d : 2 * d], h_prev, out=tmp[:n])
            xp.add(g[:, 2 * d :], xp.matmul(tmp[:n], w_cand, out=prod[:n]), out=g[:, 2 * d :])
            c = activation_(xp, cand, g[:, 2 * d :], d)
            if origin_mode:  # c + u * (h - c)
                xp.subtract(h_prev, c, out=out)
                out *= g[:, :d]
                out += c
            else:  # h + u * (c - h)
                xp.subtract(c, h_prev, out=out)
                out *= g[:, :d]
                out += h_prev
        h = out
        lo = hi
    return xp.take(hs, inverse, axis=0)


def _starts(counts):
    """Each step's first row in the step-major buffers."""
    return np.concatenate([[0], np.cumsum(counts[:-1], dtype=np.int64)]).astype(np.int64)


def _logaddexp(xp, a, b):
    """``log(exp(a) + exp(b))``, ``-inf`` where both are."""
    top = xp.maximum(a, b)
    safe = xp.where(xp.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = safe + xp.log(xp.exp(a - safe) + xp.exp(b - safe))
    return xp.where(xp.isfinite(top), out, -np.inf)


def _extended(xp, labels, starts, counts, width, blank):
    """``[n, width]`` int64: sequence ``s``'s ids (``counts[s]`` of ``labels`` from ``starts[s]``, host
    per-sequence arrays) at the odd positions, ``blank`` elsewhere; gathered on the labels' device (host
    labels copied there), no pass over the ids on the host."""
    if not int(labels.shape[0]):
        return xp.full((counts.size, width), blank, dtype=np.int64)
    labels = xp.asarray(labels, dtype=np.int64)
    slot = xp.arange(width) // 2  # position 2j + 1 holds the j-th id
    is_id = (xp.arange(width) % 2 == 1)[None, :] & (slot[None, :] < xp.asarray(counts)[:, None])
    at = xp.where(is_id, xp.asarray(starts)[:, None] + slot[None, :], 0)
    return xp.where(is_id, labels[at], blank)


def ctc_loss(xp, logits, input_offsets, labels, label_offsets, blank):
    """See ``Backend.ctc_loss``: the forward recursion over all sequences at once, one time step at a
    time over the sequences sorted by length (float64 inside, the result in ``logits``' dtype)."""
    x = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    logp = x - xp.log(xp.exp(x).sum(axis=1, keepdims=True))
    t_len = np.diff(input_offsets)
    l_len = np.diff(label_offsets)
    n = t_len.size
    width = 2 * int(l_len.max(initial=0)) + 1
    order = np.argsort(-t_len, kind="stable")
    lengths = t_len[order]
    steps = int(lengths[0]) if n else 0
    counts = np.searchsorted(-lengths, -np.arange(steps), side="left")
    # in the sequences' length order (longest first): the extended label (blanks between the ids), where
    # a skip over a blank is allowed, which positions exist; made where the labels are
    ext_s = _extended(xp, labels, label_offsets[:-1][order], l_len[order], width, blank)
    skip_s = xp.zeros((n, width), dtype=bool)
    skip_s[:, 2:] = (ext_s[:, 2:] != blank) & (ext_s[:, 2:] != ext_s[:, :-2])
    valid_s = xp.arange(width)[None, :] < xp.asarray(2 * l_len[order] + 1)[:, None]
    end = 2 * l_len[order]
    starts = input_offsets[:-1][order]
    loss_sorted = np.zeros(n, dtype=np.float64)
    pieces, done = [], []
    alpha = None
    for t in range(steps):
        k = int(counts[t])
        emit = xp.take_along_axis(logp[xp.asarray(starts[:k] + t)], ext_s[:k], axis=1)
        if alpha is None:
            alpha = xp.full((k, width), -np.inf)
            alpha[:, 0] = 0.0
            alpha[:, 1:2] = xp.where(valid_s[:k, 1:2], 0.0, -np.inf)
            alpha = alpha + emit
        else:
            a = alpha[:k]
            a1 = xp.concatenate([xp.full((k, 1), -np.inf), a[:, :-1]], axis=1)
            a2 = xp.concatenate([xp.full((k, 2), -np.inf), a[:, :-2]], axis=1)
            alpha = _logaddexp(xp, _logaddexp(xp, a, a1), xp.where(skip_s[:k], a2, -np.inf)) + emit
        alpha = xp.where(valid_s[:k], alpha, -np.inf)
        lo = int(counts[t + 1]) if t + 1 < steps else 0
        if k > lo:  # the sequences that end here: the last label or the blank after it
            idx = np.arange(lo, k)
            last = alpha[xp.asarray(idx), xp.asarray(end[idx])]
            prev = xp.where(xp.asarray(end[idx] > 0), alpha[xp.asarray(idx), xp.asarray(np.maximum(end[idx] - 1, 0))],
                            -np.inf)
            pieces.append(-_logaddexp(xp, last, prev))
            done.append(idx)
    empty = lengths == 0  # no input: no loss when the label is empty too, else impossible
    loss_sorted[empty] = np.where(end[empty] == 0, 0.0, np.inf)
    loss = xp.asarray(loss_sorted)
    if pieces:
        loss[xp.asarray(np.concatenate(done))] = xp.concatenate(pieces)
    out = xp.empty(n, dtype=np.float64)
    out[xp.asarray(order)] = loss
    return out.astype(logits.dtype)
