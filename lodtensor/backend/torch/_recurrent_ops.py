"""Paddle's LSTM and GRU (``_recurrent``) as plain, out-of-place torch ops, one time step at a time.

``_recurrent`` records the whole recurrence as one autograd node whose backward writes preallocated
buffers in place: fast, but vmap cannot batch its in-place steps (as torch.func's ``jacrev`` and
``vmap(grad(f))`` do to a backward), and it cannot be differentiated twice. Under torch.func's gradient
and forward-mode transforms the same recurrence runs here as torch ops, which every transform and
autograd (to any order) follow. Same step order, same numbers.

>>> x = torch.zeros(3, 4)
>>> rows, inverse = torch.tensor([0, 2, 1]), torch.tensor([0, 2, 1])
>>> h, c = lstm(x, torch.zeros(1, 4), torch.ones(1, 4), None, None, rows, inverse, [2, 1],
...             ("sigmoid", "tanh", "tanh"), False)
>>> [round(v, 4) for v in c.ravel().tolist()]
[0.5568, 0.9638, 0.5568]
"""

import torch
import torch.autograd.forward_ad as fwad
import torch.nn.functional as F  # noqa: N812 - torch's own spelling
from torch._functorch import pyfunctorch

__all__ = ["lstm", "gru", "needs_ops"]


def _softmax(x, width):
    return torch.softmax(x.reshape(x.shape[0], -1, width), -1).reshape(x.shape)


_ACT = {
    "sigmoid": lambda x, w: torch.sigmoid(x),
    "tanh": lambda x, w: torch.tanh(x),
    "relu": lambda x, w: torch.relu(x),
    "identity": lambda x, w: x,
    "linear": lambda x, w: x,
    "leaky_relu": lambda x, w: F.leaky_relu(x, 0.02),
    "elu": lambda x, w: F.elu(x),
    "softsign": lambda x, w: x / (1 + x.abs()),
    "softmax": _softmax,
}


def needs_ops(arrays, weights):
    """Whether the recurrence must run as torch ops: a torch.func gradient transform (``grad``, ``vjp``,
    ``jacrev``: their backward may run under ``vmap``, which cannot batch the Function's in-place steps)
    or forward-mode (``jvp``, or ``torch.autograd.forward_ad``'s dual tensors) is on the stack and sees
    one of ``arrays``, or vmap batches one of the ``weights`` (an ensemble: the Function's vmap rule folds
    only the samples of the data and the initial states into more sequences). ``vmap`` alone, and plain
    autograd, keep the Function."""
    functorch = torch._C._functorch
    if any(w is not None and functorch.is_batchedtensor(w) for w in weights):
        return True
    if getattr(fwad, "_current_level", -1) >= 0 and any(  # forward-mode AD's dual tensors (no jvp on the Function)
            a is not None and fwad.unpack_dual(a).tangent is not None for a in arrays):
        return True
    if not any(a is not None and functorch.is_functorch_wrapped_tensor(a) for a in arrays):
        return False
    keys = {i.key() for i in pyfunctorch.retrieve_all_functorch_interpreters()}
    return functorch.TransformType.Grad in keys or functorch.TransformType.Jvp in keys


def _steps(counts):
    lo = 0
    for n in counts:
        yield n, lo, lo + n
        lo += n


def lstm(x, w, b, h, c, rows, inverse, counts, acts, peep):
    """``(hidden, cell)`` in the rows' order: ``Backend.lstm``'s contract, as torch ops."""
    gate, cell_act, cand = (_ACT[a] for a in acts)
    d = int(w.shape[0])
    gates = x.index_select(0, rows) + b[:, : 4 * d]
    w_ic, w_fc, w_oc = (b[:, k * d : (k + 1) * d] for k in (4, 5, 6)) if peep else (None, None, None)
    hs, cs = [], []
    for n, lo, hi in _steps(counts):
        g = gates[lo:hi]
        if h is not None:
            g = g + h[:n] @ w
        c_prev = None if c is None else c[:n]
        i, f, o = g[:, d : 2 * d], g[:, 2 * d : 3 * d], g[:, 3 * d :]
        if peep and c_prev is not None:
            i, f = i + c_prev * w_ic, f + c_prev * w_fc
        c = cand(g[:, :d], d) * gate(i, d)
        if c_prev is not None:
            c = c + c_prev * gate(f, d)
        h = gate(o + c * w_oc if peep else o, d) * cell_act(c, d)
        hs.append(h)
        cs.append(c)
    return torch.cat(hs).index_select(0, inverse), torch.cat(cs).index_select(0, inverse)


def gru(x, w_gate, w_cand, b, h, rows, inverse, counts, acts, origin):
    """The hidden states in the rows' order: ``Backend.gru``'s contract, as torch ops."""
    gate, cand = (_ACT[a] for a in acts)
    d = int(w_cand.shape[0])
    gates = x.index_select(0, rows)
    if b is not None:
        gates = gates + b
    hs = []
    for n, lo, hi in _steps(counts):
        g = gates[lo:hi]
        h_prev = None if h is None else h[:n]
        if h_prev is None:
            u, c = gate(g[:, :d], d), cand(g[:, 2 * d :], d)
            h = c - u * c if origin else u * c
        else:
            ur = gate(g[:, : 2 * d] + h_prev @ w_gate, d)
            u, r = ur[:, :d], ur[:, d:]
            c = cand(g[:, 2 * d :] + (r * h_prev) @ w_cand, d)
            h = c + u * (h_prev - c) if origin else h_prev + u * (c - h_prev)
        hs.append(h)
    return torch.cat(hs).index_select(0, inverse)
