"""Sequence losses and decoding: ``linear_chain_crf``, ``crf_decoding``, ``warpctc``.

The forward (and Viterbi) recursions run over all sequences at once, one time
step at a time over the sorted lengths (:class:`~lodtensor.nn._common.TimePlan`).
"""

import numpy as np

from ..backend import backend_name_of
from ..tensor import LoDTensor
from ._common import TimePlan, lod_input, param

__all__ = ["linear_chain_crf", "crf_decoding", "warpctc"]


def _labels(label, x, where, name="label"):
    if not isinstance(label, LoDTensor):
        raise TypeError(f"{where}: {name} must be a LoDTensor of ids, got {type(label).__name__}")
    label._require_data(where)
    data = label.data
    host = data.detach().cpu().numpy() if backend_name_of(data) == "torch" else np.asarray(data)
    host = host.reshape(-1) if host.ndim == 2 and host.shape[1] == 1 else host
    if host.ndim != 1 or (host.size and host.dtype.kind not in "iu"):
        raise ValueError(f"{where}: {name} must hold integer ids of shape [N, 1], got {host.dtype} {list(data.shape)}")
    return host.astype(np.int64)


def _per_sequence(values, offsets, m):
    """Sums of ``values`` (one per row) over each sequence, through a cumulative sum."""
    cs = m.cat([m.zeros((1,), values), values.cumsum(0)])
    return m.take(cs, m.index(offsets[1:], values)) - m.take(cs, m.index(offsets[:-1], values))


def linear_chain_crf(input, label, transition):  # noqa: A002
    """Negative log-likelihood of each tag sequence under a linear-chain CRF (Paddle's
    ``LogLikelihood`` output, ``[num_sequences, 1]``; an empty sequence gives 0).

    ``input`` holds the emission scores ``[T, K]``; ``transition`` is ``[K + 2, K]``: row 0 the
    start scores, row 1 the end scores, rows ``2..`` the score of tag ``i`` followed by tag ``j``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.zeros((2, 2)), [[0, 2]])
    >>> y = lt.LoDTensor(np.array([[0], [1]]), [[0, 2]])
    >>> float(np.round(linear_chain_crf(x, y, np.zeros((4, 2))).ravel()[0], 4))  # log(4): 4 paths
    1.3863
    """
    where = "linear_chain_crf()"
    x, m = lod_input(input, where)
    data = x.data
    k = int(data.shape[1])
    w = param(transition, data, where, "transition", (k + 2, k))
    lab = _labels(label, x, where)
    if lab.size != int(data.shape[0]):
        raise ValueError(f"{where}: label has {lab.size} rows but input has {int(data.shape[0])}")
    if lab.size and (lab.min() < 0 or lab.max() >= k):
        raise ValueError(f"{where}: labels must be in [0, {k}), got {int(lab.min())}..{int(lab.max())}")
    offsets = x.offsets(-1)
    n_seq = offsets.size - 1
    start, end, trans = w[0:1], w[1:2], w[2:]
    # the label path's score
    rows = np.arange(lab.size)
    emit = _pick(data, rows, lab, m)
    first = offsets[:-1][np.diff(offsets) > 0]
    last = offsets[1:][np.diff(offsets) > 0] - 1
    inner = np.ones(lab.size, dtype=bool)
    inner[first] = False
    prev = np.where(inner, np.arange(lab.size) - 1, 0)
    pair = _pick(trans, lab[prev], lab, m) * m.mask(inner, data)
    is_first = np.zeros(lab.size, dtype=bool)
    is_first[first] = True
    is_last = np.zeros(lab.size, dtype=bool)
    is_last[last] = True
    lab_index = m.index(lab, data)
    bounds = m.take(m.reshape(start, (k,)), lab_index) * m.mask(is_first, data) + m.take(
        m.reshape(end, (k,)), lab_index
    ) * m.mask(is_last, data)
    score = _per_sequence(emit + pair + bounds, offsets, m)
    # the partition function: forward recursion in log space
    plan = TimePlan(offsets)
    steps = plan.per_step(m.take(data, m.index(plan.rows, data)))
    log_z = m.zeros((n_seq,), data)
    pieces, where_sorted = [], []
    alpha = None
    for t in range(plan.steps):
        n = int(plan.counts[t])
        e = steps[t]
        if alpha is None:
            alpha = start + e
        else:
            alpha = m.logsumexp(alpha[:n, :, None] + trans[None, :, :], 1) + e
        lo, hi = plan.ending(t)
        if hi > lo:
            pieces.append(m.logsumexp(alpha[lo:hi] + end, 1))
            where_sorted.append(np.arange(lo, hi))
    if pieces:
        seqs = plan.order[np.concatenate(where_sorted)]
        z = m.cat(pieces) if len(pieces) > 1 else pieces[0]
        empty = np.setdiff1d(np.arange(n_seq), seqs)
        full_index = np.concatenate([seqs, empty])
        z_all = m.cat([z, m.zeros((empty.size,), data)]) if empty.size else z
        inv = np.empty(n_seq, dtype=np.int64)
        inv[full_index] = np.arange(n_seq)
        log_z = m.take(z_all, m.index(inv, data))
    return m.reshape(log_z - score, (n_seq, 1))


def _pick(matrix, rows, cols, m):
    """``matrix[rows[i], cols[i]]`` for every i (autograd on torch)."""
    k = int(matrix.shape[1])
    flat = m.reshape(matrix, (-1,))
    return m.take(flat, m.index(np.asarray(rows, dtype=np.int64) * k + cols, matrix))


def crf_decoding(input, transition, label=None):  # noqa: A002
    """The best tag path of every sequence (Viterbi), int64 ``[T, 1]`` with ``input``'s lod.

    With ``label``, the result is 1 where the best path equals the label and 0 elsewhere, as
    Paddle. Ties go to the lower tag. Forward only.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]), [[0, 2, 3]])
    >>> crf_decoding(x, np.zeros((4, 2))).data.ravel().tolist()
    [0, 1, 0]
    """
    where = "crf_decoding()"
    x, _ = lod_input(input, where)
    data = x.data
    host = data.detach().cpu().numpy() if backend_name_of(data) == "torch" else np.asarray(data)
    k = int(host.shape[1])
    w = param(transition, host, where, "transition", (k + 2, k))
    start, end, trans = w[0], w[1], w[2:]
    plan = TimePlan(x.offsets(-1))
    steps = host[plan.rows]
    alpha, pointers, best_last = None, [], np.zeros(plan.order.size, dtype=np.int64)
    for t in range(plan.steps):
        n = int(plan.counts[t])
        e = steps[int(plan.bounds[t]) : int(plan.bounds[t + 1])]
        if alpha is None:
            alpha = start + e
            pointers.append(None)
        else:
            cand = alpha[:n, :, None] + trans[None, :, :]
            ptr = np.argmax(cand, axis=1)
            pointers.append(ptr)
            alpha = np.take_along_axis(cand, ptr[:, None, :], axis=1)[:, 0, :] + e
        lo, hi = plan.ending(t)
        if hi > lo:
            best_last[lo:hi] = np.argmax(alpha[lo:hi] + end, axis=1)
    path_steps = np.zeros(int(plan.bounds[-1]) if plan.steps else 0, dtype=np.int64)
    tag = np.zeros(plan.order.size, dtype=np.int64)
    for t in range(plan.steps - 1, -1, -1):
        n = int(plan.counts[t])
        lo, hi = plan.ending(t)
        tag[lo:hi] = best_last[lo:hi]
        path_steps[int(plan.bounds[t]) : int(plan.bounds[t + 1])] = tag[:n]
        if t:
            tag[:n] = pointers[t][np.arange(n), tag[:n]]
    path = path_steps[plan.inverse].reshape(-1, 1)
    if label is not None:
        lab = _labels(label, x, where)
        if lab.size != path.shape[0]:
            raise ValueError(f"{where}: label has {lab.size} rows but input has {path.shape[0]}")
        path = (path[:, 0] == lab).astype(np.int64).reshape(-1, 1)
    if backend_name_of(data) == "torch":
        import torch  # noqa: PLC0415

        path = torch.as_tensor(path, device=data.device)
    return x.with_data(path)


def warpctc(input, label, blank=0, norm_by_times=False):  # noqa: A002
    """CTC loss of every sequence (Paddle's ``warpctc``: ``input`` holds unnormalised
    scores ``[T, num_classes + 1]``, softmax applied inside), ``[num_sequences, 1]``.

    ``label`` holds the target ids (one lod level, as many sequences as ``input``).
    ``norm_by_times`` divides each sequence's gradient by its length (the loss is unchanged),
    as Paddle. On torch the loss is ``torch.nn.functional.ctc_loss``; NumPy runs the same
    forward recursion over all sequences at once. An impossible alignment gives ``inf``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.zeros((2, 2)), [[0, 2]])
    >>> y = lt.LoDTensor(np.array([[1]]), [[0, 1]])
    >>> float(np.round(warpctc(x, y).ravel()[0], 4))  # 3 of 4 paths give "1": -log(3/4)
    0.2877
    """
    where = "warpctc()"
    x, m = lod_input(input, where)
    data = x.data
    lab = _labels(label, x, where)
    if label.lod_level < 1:
        raise ValueError(f"{where}: label must have a lod")
    t_off, l_off = x.offsets(-1), label.offsets(-1)
    if t_off.size != l_off.size:
        raise ValueError(f"{where}: input has {t_off.size - 1} sequences but label has {l_off.size - 1}")
    c = int(data.shape[1])
    blank = int(blank)
    if not 0 <= blank < c:
        raise ValueError(f"{where}: blank must be in [0, {c}), got {blank}")
    if lab.size and (lab.min() < 0 or lab.max() >= c):
        raise ValueError(f"{where}: label ids must be in [0, {c}), got {int(lab.min())}..{int(lab.max())}")
    t_len, l_len = np.diff(t_off), np.diff(l_off)
    if m.name == "torch":
        loss = _ctc_torch(data, t_off, t_len, lab, l_len, blank)
    else:
        loss = _ctc_numpy(data, t_off, lab, l_off, blank)
    if norm_by_times and m.name == "torch":
        scale = m.const(1.0 / np.maximum(t_len, 1), loss)
        loss = loss.detach() + (loss - loss.detach()) * scale
    return m.reshape(loss, (-1, 1))


def _ctc_torch(data, t_off, t_len, lab, l_len, blank):
    import torch  # noqa: PLC0415

    n, tmax = t_len.size, int(t_len.max(initial=0))
    # padded [tmax, n, C] through one gather (a zero row for the padding)
    seq = np.repeat(np.arange(n), t_len)
    pos = np.arange(t_off[-1]) - t_off[:-1][seq]
    index = np.full((tmax, n), int(t_off[-1]), dtype=np.int64)
    index[pos, seq] = np.arange(t_off[-1])
    log_probs = torch.log_softmax(data, dim=1)
    padded = torch.cat([log_probs, log_probs.new_zeros((1, data.shape[1]))])[torch.as_tensor(index.reshape(-1))]
    padded = padded.reshape(tmax, n, -1)
    targets = torch.as_tensor(lab, device=data.device)
    return torch.nn.functional.ctc_loss(padded, targets, torch.as_tensor(t_len), torch.as_tensor(l_len), blank=blank,
                                        reduction="none", zero_infinity=False)


def _ctc_numpy(data, t_off, lab, l_off, blank):
    x = data - data.max(axis=1, keepdims=True)
    logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    n = t_off.size - 1
    l_len = np.diff(l_off)
    width = 2 * int(l_len.max(initial=0)) + 1
    ext = np.full((n, width), blank, dtype=np.int64)
    seq = np.repeat(np.arange(n), l_len)
    pos = np.arange(lab.size) - l_off[:-1][seq]
    ext[seq, 2 * pos + 1] = lab
    skip = np.zeros((n, width), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    valid = np.arange(width)[None, :] < (2 * l_len + 1)[:, None]
    plan = TimePlan(t_off)
    ext_s, skip_s, valid_s = ext[plan.order], skip[plan.order], valid[plan.order]
    loss_sorted = np.zeros(n, dtype=np.float64)
    end_a = 2 * l_len[plan.order]
    alpha = None
    neg = -np.inf
    for t in range(plan.steps):
        k = int(plan.counts[t])
        rows = plan.rows[int(plan.bounds[t]) : int(plan.bounds[t + 1])]
        emit = np.take_along_axis(logp[rows], ext_s[:k], axis=1)
        if alpha is None:
            alpha = np.full((k, width), neg)
            alpha[:, 0] = 0.0
            alpha[:, 1:2] = np.where(valid_s[:k, 1:2], 0.0, neg)
            alpha = alpha + emit
        else:
            a = alpha[:k]
            a1 = np.concatenate([np.full((k, 1), neg), a[:, :-1]], axis=1)
            a2 = np.concatenate([np.full((k, 2), neg), a[:, :-2]], axis=1)
            a2 = np.where(skip_s[:k], a2, neg)
            stack = np.stack([a, a1, a2])
            top = stack.max(axis=0)
            safe = np.where(np.isfinite(top), top, 0.0)
            with np.errstate(divide="ignore"):
                alpha = safe + np.log(np.exp(stack - safe).sum(axis=0)) + emit
            alpha = np.where(np.isfinite(top), alpha, neg)
        alpha = np.where(valid_s[:k], alpha, neg)
        lo, hi = plan.ending(t)
        if hi > lo:
            idx = np.arange(lo, hi)
            last = alpha[idx, end_a[idx]]
            prev = np.where(end_a[idx] > 0, alpha[idx, np.maximum(end_a[idx] - 1, 0)], neg)
            top = np.maximum(last, prev)
            safe = np.where(np.isfinite(top), top, 0.0)
            with np.errstate(divide="ignore"):
                loss_sorted[idx] = -(safe + np.log(np.exp(last - safe) + np.exp(prev - safe)))
            loss_sorted[idx[~np.isfinite(top)]] = np.inf
    empty = plan.lengths == 0
    loss_sorted[empty] = np.where(end_a[empty] == 0, 0.0, np.inf)
    loss = np.empty(n, dtype=np.float64)
    loss[plan.order] = loss_sorted
    return loss.astype(data.dtype)
