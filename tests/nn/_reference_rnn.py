"""The recurrences unfused: every step's small ops recorded by torch's autograd (the reference the
fused ``Backend.lstm``/``Backend.gru`` are checked against). Same arguments as the backend methods."""

import torch
import torch.nn.functional as F  # noqa: N812


def _act(name, x, width):
    if name == "softmax":  # over each gate's D values
        return torch.softmax(x.reshape(x.shape[0], -1, width), -1).reshape(x.shape)
    return {
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "relu": torch.relu,
        "identity": lambda v: v,
        "linear": lambda v: v,
        "leaky_relu": lambda v: F.leaky_relu(v, 0.02),
        "elu": F.elu,
        "softsign": F.softsign,
    }[name](x)


def lstm(x, w, b, h, c, rows, inverse, counts, acts, peep):
    gate, cell, cand = acts
    d = w.shape[0]
    steps = torch.split(x[rows] + b[:, : 4 * d], [int(n) for n in counts])
    if peep:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d :]
    hs, cs = [], []
    for g, n in zip(steps, counts):
        if h is not None:
            g = g + h[:n] @ w
        c_prev = None if c is None else c[:n]
        g_i, g_f, g_o = g[:, d : 2 * d], g[:, 2 * d : 3 * d], g[:, 3 * d :]
        if peep and c_prev is not None:
            g_i, g_f = g_i + c_prev * w_ic, g_f + c_prev * w_fc
        i, f = _act(gate, g_i, d), _act(gate, g_f, d)
        c = _act(cand, g[:, :d], d) * i if c_prev is None else _act(cand, g[:, :d], d) * i + c_prev * f
        o = _act(gate, g_o + c * w_oc if peep else g_o, d)
        h = o * _act(cell, c, d)
        hs.append(h)
        cs.append(c)
    return torch.cat(hs)[inverse], torch.cat(cs)[inverse]


def gru(x, w_gate, w_cand, b, h, rows, inverse, counts, acts, origin):
    gate, cand = acts
    d = w_cand.shape[0]
    g_all = x[rows] if b is None else x[rows] + b
    hs = []
    for g, n in zip(torch.split(g_all, [int(n) for n in counts]), counts):
        if h is None:
            u = _act(gate, g[:, :d], d)
            c = _act(cand, g[:, 2 * d :], d)
            h = (1 - u) * c if origin else u * c
        else:
            h_prev = h[:n]
            ur = g[:, : 2 * d] + h_prev @ w_gate
            u, r = _act(gate, ur[:, :d], d), _act(gate, ur[:, d:], d)
            c = _act(cand, g[:, 2 * d :] + (r * h_prev) @ w_cand, d)
            h = u * h_prev + (1 - u) * c if origin else (1 - u) * h_prev + u * c
        hs.append(h)
    return torch.cat(hs)[inverse]
