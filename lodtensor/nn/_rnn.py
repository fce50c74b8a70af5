"""Paddle's ``dynamic_lstm`` and ``dynamic_gru`` over LoD batches.

All sequences advance together, one time step at a time, over the sequences
sorted by length (:class:`~lodtensor.nn._common.TimePlan`): step ``t`` is one
GEMM over the sequences still running, a prefix of the sorted batch. The
inputs' rows are gathered into step order once and the outputs put back once.
"""

import numpy as np

from ._common import StepThreads, TimePlan, lod_input, out_like, param
from ._math import INPLACE, activation, inplace_ops

__all__ = ["dynamic_lstm", "dynamic_gru"]


def _gated_input(input, where, gates, weight=None):
    """The LoD input of an RNN, its array module, its data ``[T, gates * D]`` and the hidden size ``D``;
    a ``weight`` of another hidden size is refused with the ``gates * D`` rule spelled out."""
    x, m = lod_input(input, where)
    data = x.data
    width = int(data.shape[1])
    if width % gates:
        raise ValueError(
            f"{where}: input width must be {gates} * hidden size (the input projected by an fc of size "
            f"{gates} * hidden), got {width}"
        )
    d = width // gates
    shape = tuple(int(s) for s in getattr(weight.data if hasattr(weight, "lod_level") else weight, "shape", ()))
    if len(shape) == 2 and shape != (d, gates * d) and shape[1] == gates * shape[0]:
        h = shape[0]
        raise ValueError(
            f"{where}: input width {width} = {gates} * {d} means hidden size {d}, but weight {list(shape)} has "
            f"hidden size {h}, which takes input of width {gates} * {h} = {gates * h}; project the input to "
            f"{gates * h} columns, or use a weight of [{d}, {gates * d}]"
        )
    return x, m, data, d


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
    x, m, data, d = _gated_input(input, where, 4, weight)
    w = param(weight, data, where, "weight", (d, 4 * d))
    b = param(bias, data, where, "bias", (1, 7 * d if use_peepholes else 4 * d))
    act_gate = activation(m, gate_activation, where, "gate_activation")
    act_cell = activation(m, cell_activation, where, "cell_activation")
    act_cand = activation(m, candidate_activation, where, "candidate_activation")
    plan = TimePlan(x.offsets(-1), reverse=bool(is_reverse))
    h = _initial(h_0, plan, data, m, where, "h_0", d)
    c = _initial(c_0, plan, data, m, where, "c_0", d)
    names = (gate_activation, cell_activation, candidate_activation)
    if plan.steps == 0:
        return out_like(x, data[:, :d] * 0), out_like(x, data[:, :d] * 0)
    fast = _fast_path(m, names, data, w, b, h, c)
    with StepThreads(data, plan.counts[0], d, 4) as threads:  # small steps: fewer torch threads
        if fast is not None:
            hs, cs = _lstm_inplace(*fast, data, w, b, h, c, plan, d, use_peepholes)
            return out_like(x, _take_rows(hs, plan.inverse)), out_like(x, _take_rows(cs, plan.inverse))
        data, w, b, h, c = threads.inputs(data, w, b, h, c)
        hs, cs = _lstm_steps(m, data, w, b, h, c, plan, d, use_peepholes, (act_gate, act_cell, act_cand))
        back = m.index(plan.inverse, data)
        hidden, cell = threads.outputs(m.take(hs, back), m.take(cs, back))
    return out_like(x, hidden), out_like(x, cell)


def _take_rows(a, rows):
    """Rows ``rows`` (NumPy int64) of ``a``, for the fast paths (no gradient tracked): NumPy's take,
    on a CPU tensor's own memory too (1.7x faster than torch's indexing on the 300 MB of gates of
    ``bench/paddle_layers.py``, measured); ``index_select`` on other devices and dtypes."""
    if isinstance(a, np.ndarray):
        return np.take(a, rows, axis=0)
    import torch  # noqa: PLC0415

    if a.device.type == "cpu" and a.dtype in (torch.float32, torch.float64, torch.float16):
        return torch.from_numpy(np.take(a.detach().resolve_conj().resolve_neg().numpy(), rows, axis=0))
    return a.index_select(0, torch.from_numpy(rows).to(a.device))


def _fast_path(m, names, *arrays):
    """``(ops, activations)``: the in-place kernels and the in-place forms of the activations ``names``,
    when no gradient is tracked and every activation has an in-place form; else None."""
    if any(str(a).lower() not in INPLACE for a in names):
        return None
    if m.name == "torch":
        import torch  # noqa: PLC0415

        if torch.is_grad_enabled() and any(a is not None and a.requires_grad for a in arrays):
            return None
    found = inplace_ops(arrays[0])
    if found is None:
        return None
    ops, acts = found
    return ops, [acts[str(a).lower()] for a in names]


def _lstm_steps(m, data, w, b, h, c, plan, d, peep, acts):
    """The LSTM steps with out-of-place ops (torch autograd); step-major hidden and cell."""
    act_gate, act_cell, act_cand = acts
    if peep:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d : 7 * d]
    steps = plan.per_step(m.take(data, m.index(plan.rows, data)) + b[:, : 4 * d])
    hs, cs = [], []
    for t in range(plan.steps):
        n = int(plan.counts[t])
        g = steps[t]
        if h is not None:
            g = m.addmm(g, h[:n], w)
        cand = act_cand(g[:, :d])
        c_prev = c[:n] if c is not None else None
        if peep:
            if c_prev is None:
                i = act_gate(g[:, d : 2 * d])
                c = cand * i
            else:
                i = act_gate(g[:, d : 2 * d] + c_prev * w_ic)
                f = act_gate(g[:, 2 * d : 3 * d] + c_prev * w_fc)
                c = cand * i + c_prev * f
            o = act_gate(g[:, 3 * d :] + c * w_oc)
        else:
            ifo = act_gate(g[:, d:])
            c = cand * ifo[:, :d] if c_prev is None else cand * ifo[:, :d] + c_prev * ifo[:, d : 2 * d]
            o = ifo[:, 2 * d :]
        h = o * act_cell(c)
        hs.append(h)
        cs.append(c)
    return (m.cat(hs), m.cat(cs)) if len(hs) > 1 else (hs[0], cs[0])


def _lstm_inplace(ops, acts, data, w, b, h, c, plan, d, peep):
    """The LSTM steps in place (NumPy, or torch without autograd): results written straight into
    step-major buffers, the previous step's rows read back as views (the active batch is a prefix)."""
    gate, cell_act, cand = acts
    total, width = int(plan.bounds[-1]), int(plan.counts[0])
    gates_all = _take_rows(data, plan.rows)
    gates_all += b[:, : 4 * d]
    hs = ops.empty((total, d), data)
    cs = ops.empty((total, d), data)
    buf = ops.empty((width, 4 * d), data)
    tmp = ops.empty((width, d), data)
    if peep:
        w_ic, w_fc, w_oc = b[:, 4 * d : 5 * d], b[:, 5 * d : 6 * d], b[:, 6 * d : 7 * d]
    for t in range(plan.steps):
        lo, hi = int(plan.bounds[t]), int(plan.bounds[t + 1])
        n = hi - lo
        g = gates_all[lo:hi]
        if h is not None:
            ops.addmm(g, h[:n], w, buf[:n])
        cand(g[:, :d])
        c_prev = c[:n] if c is not None else None
        if peep and c_prev is not None:
            ops.addcmul(g[:, d : 2 * d], c_prev, w_ic, tmp[:n])
            ops.addcmul(g[:, 2 * d : 3 * d], c_prev, w_fc, tmp[:n])
        gate(g[:, d : 3 * d] if peep else g[:, d:])
        c = cs[lo:hi]
        ops.mul(g[:, :d], g[:, d : 2 * d], c)
        if c_prev is not None:
            ops.addcmul(c, c_prev, g[:, 2 * d : 3 * d], tmp[:n])
        if peep:
            ops.addcmul(g[:, 3 * d :], c, w_oc, tmp[:n])
            gate(g[:, 3 * d :])
        h = hs[lo:hi]
        ops.copy(h, c)
        cell_act(h)
        h *= g[:, 3 * d :]
    return hs, cs


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
    x, m, data, d = _gated_input(input, where, 3, weight)
    w = param(weight, data, where, "weight", (d, 3 * d))
    b = param(bias, data, where, "bias", (1, 3 * d), optional=True)
    flat = m.reshape(w, (3 * d * d,))
    w_gate = m.reshape(flat[: 2 * d * d], (d, 2 * d))
    w_cand = m.reshape(flat[2 * d * d :], (d, d))
    act_gate = activation(m, gate_activation, where, "gate_activation")
    act_cand = activation(m, candidate_activation, where, "candidate_activation")
    plan = TimePlan(x.offsets(-1), reverse=bool(is_reverse))
    h = _initial(h_0, plan, data, m, where, "h_0", d)
    if plan.steps == 0:
        return out_like(x, data[:, :d] * 0)
    names = (gate_activation, candidate_activation)
    fast = _fast_path(m, names, data, w, b, h)
    with StepThreads(data, plan.counts[0], d, 3) as threads:  # small steps: fewer torch threads
        if fast is not None:
            hs = _gru_inplace(*fast, data, w_gate, w_cand, b, h, plan, d, origin_mode)
            return out_like(x, _take_rows(hs, plan.inverse))
        data, w_gate, w_cand, b, h = threads.inputs(data, w_gate, w_cand, b, h)
        hs = _gru_steps(m, data, w_gate, w_cand, b, h, plan, d, origin_mode, (act_gate, act_cand))
        (hidden,) = threads.outputs(m.take(hs, m.index(plan.inverse, data)))
    return out_like(x, hidden)


def _gru_steps(m, data, w_gate, w_cand, b, h, plan, d, origin_mode, acts):
    """The GRU steps with out-of-place ops (torch autograd); step-major hidden states."""
    act_gate, act_cand = acts
    gates_all = m.take(data, m.index(plan.rows, data))
    if b is not None:
        gates_all = gates_all + b
    steps = plan.per_step(gates_all)
    hs = []
    for t in range(plan.steps):
        n = int(plan.counts[t])
        g = steps[t]
        if h is None:
            u = act_gate(g[:, :d])
            c = act_cand(g[:, 2 * d :])
            h = c - u * c if origin_mode else u * c
        else:
            h_prev = h[:n]
            ur = act_gate(m.addmm(g[:, : 2 * d], h_prev, w_gate))
            u, r = ur[:, :d], ur[:, d:]
            c = act_cand(m.addmm(g[:, 2 * d :], r * h_prev, w_cand))
            h = c + u * (h_prev - c) if origin_mode else h_prev + u * (c - h_prev)
        hs.append(h)
    return m.cat(hs) if len(hs) > 1 else hs[0]


def _gru_inplace(ops, acts, data, w_gate, w_cand, b, h, plan, d, origin_mode):
    """The GRU steps in place (see :func:`_lstm_inplace`)."""
    gate, cand = acts
    total, width = int(plan.bounds[-1]), int(plan.counts[0])
    gates_all = _take_rows(data, plan.rows)
    if b is not None:
        gates_all += b
    hs = ops.empty((total, d), data)
    buf = ops.empty((width, 2 * d), data)
    tmp = ops.empty((width, d), data)
    for t in range(plan.steps):
        lo, hi = int(plan.bounds[t]), int(plan.bounds[t + 1])
        n = hi - lo
        g = gates_all[lo:hi]
        out = hs[lo:hi]
        if h is None:
            gate(g[:, :d])
            c = cand(g[:, 2 * d :])
            ops.mul(g[:, :d], c, out)
            if origin_mode:
                ops.sub(c, out, out)
        else:
            h_prev = h[:n]
            ops.addmm(g[:, : 2 * d], h_prev, w_gate, buf[:n])
            gate(g[:, : 2 * d])
            ops.mul(g[:, d : 2 * d], h_prev, tmp[:n])
            ops.addmm(g[:, 2 * d :], tmp[:n], w_cand, buf[:n, :d])
            c = cand(g[:, 2 * d :])
            if origin_mode:  # c + u * (h - c)
                ops.sub(h_prev, c, out)
                out *= g[:, :d]
                out += c
            else:  # h + u * (c - h)
                ops.sub(c, h_prev, out)
                out *= g[:, :d]
                out += h_prev
        h = out
    return hs
