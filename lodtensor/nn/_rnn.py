"""Paddle's ``dynamic_lstm`` and ``dynamic_gru`` over LoD batches, on any backend.

All sequences advance together, one time step at a time, over the sequences
sorted by length (:class:`~lodtensor.nn._common.TimePlan`, cached on the LoD):
step ``t`` is one GEMM over the sequences still running, a prefix of the sorted
batch. The recurrence itself is the backend's (``Backend.lstm``/``Backend.gru``):
in-place steps into preallocated step-major buffers on NumPy and CuPy, and on
torch one autograd node for the whole recurrence whose backward runs fused steps
in reverse.
"""

from .._compile import eager_under_compile
from ..ops._common import flag_arg
from ._common import act_name, lod_input, on_device, out_like, param, step_inverse, step_rows, time_plan

__all__ = ["dynamic_lstm", "dynamic_gru"]


def _gated_input(input, where, gates, weight=None):
    """The LoD input of an RNN, its backend, its data ``[T, gates * D]`` and the hidden size ``D``;
    a ``weight`` of another hidden size is refused with the ``gates * D`` rule spelled out."""
    x, be = lod_input(input, where)
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
    return x, be, data, d


def _plan(x, data, reverse):
    """The time plan and its step order / inverse on ``data``'s device (cached on the LoD; made there for
    device data: no host pass over the rows of a fresh LoD)."""
    plan = time_plan(x, reverse)
    return plan, step_rows(x, plan, data), step_inverse(x, plan, data)


def _initial(state, x, plan, be, like, where, name, width):
    """``state`` ``[num_sequences, D]`` as the sequences still running at step 0, in step order
    (every sequence empty: the checked state itself, never read but kept in the graph)."""
    if state is None:
        return None
    s = param(state, like, where, name, (plan.order.size, width))
    if plan.steps == 0:
        return s
    running = int(plan.counts[0])
    return be.gather(s, on_device(x, ("nn.order", running), lambda: plan.order[:running], like))


def _empty(x, be, data, d, count, params):
    """Zero results ``[0, D]`` (no step at all: no row, or only empty sequences), still connected to
    the graph of the input and of every parameter and initial state that autograd tracks, so that a
    backward pass gives each of them a zero gradient of its shape (as torch's layers do for an empty
    batch) rather than none. The results have no element: adding ``sum * 0`` changes no value."""
    zero = data[:, :d] * 0
    for p in params:
        if p is not None and be.requires_grad(p):
            zero = zero + p.sum() * 0
    return tuple(out_like(x, zero) for _ in range(count))


@eager_under_compile  # the time plan reads the host offsets: under torch.compile, behind a graph break
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
    ``is_reverse`` each sequence runs from its last row to its first. The activations are
    Paddle's names (``sigmoid``, ``tanh``, ``relu``, ``identity``, and ``leaky_relu``, ``elu``,
    ``softsign``, ``softmax``; softmax acts on each gate's ``D`` values).

    Runs on NumPy, CuPy and torch data. On torch the whole recurrence is one autograd node
    with a fused backward (torch.func's ``grad``, ``jacrev``, ``jvp`` and ``vmap(grad(...))`` take the
    recurrence as plain torch ops instead, differentiable to any order; ``vmap`` alone folds the samples
    into more sequences and runs once); a second differentiation through it (``create_graph=True`` and a
    gradient of the gradient) is not supported and raises ``RuntimeError``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.zeros((3, 4)), [[0, 2, 3]])
    >>> h, c = dynamic_lstm(x, np.zeros((1, 4)), np.ones((1, 4)), use_peepholes=False)
    >>> np.round(c.data.ravel(), 4).tolist()
    [0.5568, 0.9638, 0.5568]
    """
    where = "dynamic_lstm()"
    x, be, data, d = _gated_input(input, where, 4, weight)
    w = param(weight, data, where, "weight", (d, 4 * d))
    peepholes = flag_arg(use_peepholes, where, "use_peepholes")
    b = param(bias, data, where, "bias", (1, 7 * d if peepholes else 4 * d))
    acts = (act_name(gate_activation, where, "gate_activation"), act_name(cell_activation, where, "cell_activation"),
            act_name(candidate_activation, where, "candidate_activation"))
    reverse = flag_arg(is_reverse, where, "is_reverse")
    plan, rows, inverse = _plan(x, data, reverse)
    h = _initial(h_0, x, plan, be, data, where, "h_0", d)
    c = _initial(c_0, x, plan, be, data, where, "c_0", d)
    if plan.steps == 0:
        return _empty(x, be, data, d, 2, (w, b, h, c))
    hidden, cell = be.lstm(data, w, b, h, c, rows, inverse, plan.counts, acts, peepholes)
    return out_like(x, hidden), out_like(x, cell)


@eager_under_compile  # the time plan reads the host offsets: under torch.compile, behind a graph break
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

    Returns the hidden states ``[T, D]`` with ``input``'s lod. Runs on NumPy, CuPy and torch
    data; on torch one autograd node with a fused backward (no double backward), as
    :func:`dynamic_lstm`.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.ones((3, 3)), [[0, 2, 3]])
    >>> h = dynamic_gru(x, np.zeros((1, 3)))
    >>> np.round(h.data.ravel(), 4).tolist()
    [0.5568, 0.7065, 0.5568]
    """
    where = "dynamic_gru()"
    x, be, data, d = _gated_input(input, where, 3, weight)
    w = param(weight, data, where, "weight", (d, 3 * d))
    b = param(bias, data, where, "bias", (1, 3 * d), optional=True)
    flat = w.reshape(3 * d * d)
    w_gate, w_cand = flat[: 2 * d * d].reshape(d, 2 * d), flat[2 * d * d :].reshape(d, d)
    acts = (act_name(gate_activation, where, "gate_activation"),
            act_name(candidate_activation, where, "candidate_activation"))
    reverse = flag_arg(is_reverse, where, "is_reverse")
    plan, rows, inverse = _plan(x, data, reverse)
    h = _initial(h_0, x, plan, be, data, where, "h_0", d)
    if plan.steps == 0:
        return _empty(x, be, data, d, 1, (w, b, h))[0]
    hidden = be.gru(data, w_gate, w_cand, b, h, rows, inverse, plan.counts, acts,
                    flag_arg(origin_mode, where, "origin_mode"))
    return out_like(x, hidden)
