"""Paddle's ``dynamic_lstm`` and ``dynamic_gru`` over LoD batches.

All sequences advance together, one time step at a time, over the sequences
sorted by length (:class:`~lodtensor.nn._common.TimePlan`): step ``t`` is one
GEMM over the sequences still running, a prefix of the sorted batch. The
inputs' rows are gathered into step order once and the outputs put back once.
"""

from ._common import TimePlan, lod_input, out_like, param
from ._math import activation

__all__ = ["dynamic_lstm", "dynamic_gru"]


def _initial(state, plan, like, m, where, name, width):
    if state is None:
        return None
    s = param(state, like, where, name, (plan.order.size, width))
    return m.take(s, m.index(plan.order, like))


def dynamic_lstm(input, weight, bias, h_0=None, c_0=None, use_peepholes=True, is_reverse=False,  # noqa: A002
                 gate_activation="sigmoid", cell_activation="tanh", candidate_activation="tanh"):
    """Paddle's LSTM over every sequence of ``input`` (the input projection already applied).

    ``input`` is ``[T, 4D]``, ``weight`` ``[D, 4D]`` and ``bias`` ``[1, 4D]`` (``[1, 7D]`` with
    peepholes: then the last ``3D`` are the peephole weights ``W_ic, W_fc, W_oc``), in Paddle's
    gate order: candidate, input, forget, output. ``h_0``/``c_0`` are ``[num_sequences, D]``.
    Per step::

        g = x_t + b + h_{t-1} @ W
        i = gate(g_i + W_ic * c_{t-1});  f = gate(g_f + W_fc * c_{t-1})
        c_t = candidate(g_c) * i + c_{t-1} * f
        o = gate(g_o + W_oc * c_t);  h_t = o * cell(c_t)

    Returns ``(hidden, cell)``, both ``[T, D]`` LoDTensors with ``input``'s lod. With
    ``is_reverse`` each sequence runs from its last row to its first.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.zeros((3, 4)), [[0, 2, 3]])
    >>> h, c = dynamic_lstm(x, np.zeros((1, 4)), np.ones((1, 4)), use_peepholes=False)
    >>> np.round(c.data.ravel(), 4).tolist()
    [0.5568, 0.9638, 0.5568]
    """
    where = "dynamic_lstm()"
    x, m = lod_input(input, where)
    data = x.data
    if int(data.shape[1]) % 4:
        raise ValueError(f"{where}: input width must be 4 * hidden size, got {int(data.shape[1])}")
    d = int(data.shape[1]) // 4
    w = param(weight, data, where, "weight", (d, 4 * d))
    b = param(bias, data, where, "bias", (1, 7 * d if use_peepholes else 4 * d))
    act_gate = activation(m, gate_activation, where, "gate_activation")
    act_cell = activation(m, cell_activation, where, "cell_activation")
    act_cand = activation(m, candidate_activation, where, "candidate_activation")
    plan = TimePlan(x.offsets(-1), reverse=bool(is_reverse))
    h = _initial(h_0, plan, data, m, where, "h_0", d)
    c = _initial(c_0, plan, data, m, where, "c_0", d)
    if use_peepholes:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d : 7 * d]
    gates_all = m.take(data, m.index(plan.rows, data)) + b[:, : 4 * d]
    hs, cs = [], []
    for t in range(plan.steps):
        n = int(plan.counts[t])
        g = gates_all[int(plan.bounds[t]) : int(plan.bounds[t + 1])]
        if h is not None:
            g = g + h[:n] @ w
        cand = act_cand(g[:, :d])
        gi, gf, go = g[:, d : 2 * d], g[:, 2 * d : 3 * d], g[:, 3 * d :]
        if c is not None:
            c_prev = c[:n]
            if use_peepholes:
                gi = gi + c_prev * w_ic
                gf = gf + c_prev * w_fc
            c = cand * act_gate(gi) + c_prev * act_gate(gf)
        else:
            c = cand * act_gate(gi)
        if use_peepholes:
            go = go + c * w_oc
        h = act_gate(go) * act_cell(c)
        hs.append(h)
        cs.append(c)
    if not hs:
        return out_like(x, data[:, :d] * 0), out_like(x, data[:, :d] * 0)
    back = m.index(plan.inverse, data)
    hidden = m.take(m.cat(hs) if len(hs) > 1 else hs[0], back)
    cell = m.take(m.cat(cs) if len(cs) > 1 else cs[0], back)
    return out_like(x, hidden), out_like(x, cell)


def dynamic_gru(input, weight, bias=None, h_0=None, is_reverse=False, gate_activation="sigmoid",  # noqa: A002
                candidate_activation="tanh", origin_mode=False):
    """Paddle's GRU over every sequence of ``input`` (the input projection already applied).

    ``input`` is ``[T, 3D]`` in Paddle's gate order update, reset, candidate; ``weight`` is
    ``[D, 3D]`` laid out as Paddle stores it: its first ``2 * D * D`` values are the gates'
    ``[D, 2D]`` matrix and the last ``D * D`` the candidate's ``[D, D]`` matrix (flat, row
    major); ``bias`` ``[1, 3D]``; ``h_0`` ``[num_sequences, D]``. Per step::

        u, r = gate(x_u + h @ W_u), gate(x_r + h @ W_r)
        c = candidate(x_c + (r * h) @ W_c)
        h = (1 - u) * h + u * c          (origin_mode: u * h + (1 - u) * c)

    Returns the hidden states ``[T, D]`` with ``input``'s lod.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.ones((3, 3)), [[0, 2, 3]])
    >>> h = dynamic_gru(x, np.zeros((1, 3)))
    >>> np.round(h.data.ravel(), 4).tolist()
    [0.5568, 0.7065, 0.5568]
    """
    where = "dynamic_gru()"
    x, m = lod_input(input, where)
    data = x.data
    if int(data.shape[1]) % 3:
        raise ValueError(f"{where}: input width must be 3 * hidden size, got {int(data.shape[1])}")
    d = int(data.shape[1]) // 3
    w = param(weight, data, where, "weight", (d, 3 * d))
    b = param(bias, data, where, "bias", (1, 3 * d), optional=True)
    flat = m.reshape(w, (3 * d * d,))
    w_gate = m.reshape(flat[: 2 * d * d], (d, 2 * d))
    w_cand = m.reshape(flat[2 * d * d :], (d, d))
    act_gate = activation(m, gate_activation, where, "gate_activation")
    act_cand = activation(m, candidate_activation, where, "candidate_activation")
    plan = TimePlan(x.offsets(-1), reverse=bool(is_reverse))
    h = _initial(h_0, plan, data, m, where, "h_0", d)
    gates_all = m.take(data, m.index(plan.rows, data))
    if b is not None:
        gates_all = gates_all + b
    hs = []
    for t in range(plan.steps):
        n = int(plan.counts[t])
        g = gates_all[int(plan.bounds[t]) : int(plan.bounds[t + 1])]
        if h is None:
            u = act_gate(g[:, :d])
            c = act_cand(g[:, 2 * d :])
            h = (1 - u) * c if origin_mode else u * c
        else:
            h_prev = h[:n]
            ur = g[:, : 2 * d] + h_prev @ w_gate
            u, r = act_gate(ur[:, :d]), act_gate(ur[:, d:])
            c = act_cand(g[:, 2 * d :] + (r * h_prev) @ w_cand)
            h = u * h_prev + (1 - u) * c if origin_mode else h_prev + u * (c - h_prev)
        hs.append(h)
    if not hs:
        return out_like(x, data[:, :d] * 0)
    hidden = m.take(m.cat(hs) if len(hs) > 1 else hs[0], m.index(plan.inverse, data))
    return out_like(x, hidden)
