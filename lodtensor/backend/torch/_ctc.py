"""CTC loss on the torch backend: ``torch.nn.functional.ctc_loss``, or Paddle's recursion where a label
id equals the blank (``Backend.ctc_loss``).

torch's CTC takes targets without the blank and allows a skip from a label straight into the next label
whenever the two differ; Paddle's warpctc accepts a label equal to the blank and allows no skip into it
(the path must pass through the blank before it). For such labels the loss is the forward recursion over
all sequences at once, one time step at a time over the sequences sorted by length, in float64, built from
differentiable torch ops (autograd gives the gradient), on the logits' device. Unreachable states hold a
large finite negative number rather than ``-inf``, so that their gradients stay 0 rather than NaN; a
sequence with no alignment gets ``inf`` and a zero gradient.
"""

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling

__all__ = ["ctc_loss"]

_NEVER = -1e200  # log-probability of an unreachable state (float64; ``exp`` of it is 0)


def ctc_loss(be, logits, input_offsets, labels, label_offsets, blank, blank_labels=None):
    """See ``Backend.ctc_loss``; ``be`` the torch backend (for ``from_host``)."""
    if logits.dtype in (torch.float16, torch.bfloat16):  # torch's ctc_loss has no half kernels: float32
        return ctc_loss(be, logits.float(), input_offsets, labels, label_offsets, blank, blank_labels).to(logits.dtype)
    t_len, l_len = np.diff(input_offsets), np.diff(label_offsets)
    n, tmax, total = t_len.size, int(t_len.max(initial=0)), int(input_offsets[-1])
    if tmax == 0:  # no input rows at all (torch's ctc_loss refuses empty log_probs): 0, or inf for a label
        empty = torch.from_numpy(np.where(l_len == 0, 0.0, np.inf)).to(logits.device, logits.dtype)
        return empty + logits.sum() * 0  # still on the logits' graph
    if isinstance(labels, torch.Tensor):
        targets = labels.to(logits.device, torch.int64)
    else:
        targets = be.from_host(np.ascontiguousarray(labels, dtype=np.int64), like=logits)
    if blank_labels is None:  # the caller did not say: look (a read of one flag)
        blank_labels = bool((targets == blank).any()) if targets.numel() else False
    if blank_labels:
        return _paddle_recursion(be, logits, input_offsets, targets, label_offsets, blank)
    # slot (t, s) of the padded [tmax, n]: row starts[s] + t while t < t_len[s], else row ``total`` (a zero row)
    per_seq = be.from_host(np.stack([input_offsets[:-1], t_len]).astype(np.int64), like=logits)
    step = torch.arange(tmax, device=logits.device).unsqueeze(1)
    index = torch.where(step < per_seq[1], per_seq[0] + step, total).reshape(-1)
    log_probs = torch.log_softmax(logits, dim=1)
    rows = torch.cat([log_probs, log_probs.new_zeros((1, logits.shape[1]))])
    padded = rows.index_select(0, index).reshape(tmax, n, -1)
    return F.ctc_loss(padded, targets, torch.from_numpy(t_len), torch.from_numpy(l_len), blank=blank,
                      reduction="none", zero_infinity=False)


def _paddle_recursion(be, logits, input_offsets, targets, label_offsets, blank):
    """Paddle's CTC (no skip into a label equal to ``blank``) of every sequence: ``[n]`` in ``logits``'
    dtype. The extended labels and the emissions of every step are gathered on the device at once; the
    loop runs over time steps, each on the sequences still running (longest first)."""
    dev = logits.device
    t_len, l_len = np.diff(input_offsets), np.diff(label_offsets)
    n = t_len.size
    order = np.argsort(-t_len, kind="stable")
    lengths = t_len[order]
    steps, width = int(lengths[0]), 2 * int(l_len.max(initial=0)) + 1
    counts = np.searchsorted(-lengths, -np.arange(steps), side="left")  # sequences running at each step
    end = 2 * l_len[order]  # each sequence's last position of its extended label
    host = np.stack([input_offsets[:-1][order], lengths, label_offsets[:-1][order], l_len[order], end])
    starts, t_sorted, l_starts, l_count, ends = be.from_host(host.astype(np.int64), like=logits)
    # the extended label of each sequence (blank, id, blank, id, ..., blank), where a skip is allowed,
    # and which positions exist
    pos = torch.arange(width, device=dev)
    is_id = (pos % 2 == 1) & (pos // 2 < l_count[:, None])
    ids = torch.cat([targets, targets.new_zeros(1)])  # a spare slot for the positions holding no id
    ext = torch.where(is_id, ids[torch.where(is_id, l_starts[:, None] + pos // 2, targets.numel())], blank)
    skip = torch.zeros_like(is_id)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    valid = pos <= ends[:, None]
    # the emissions of every step: [steps, n, width] (a zero row where a sequence has ended)
    logp = torch.log_softmax(logits.double(), dim=1)
    logp = torch.cat([logp, logp.new_zeros((1, logp.shape[1]))])
    step = torch.arange(steps, device=dev)[:, None]
    rows = torch.where(step < t_sorted, starts + step, int(input_offsets[-1]))
    emit = logp.reshape(-1)[rows[:, :, None] * logp.shape[1] + ext]  # no [steps, n, classes] copy
    never = torch.full((n, width), _NEVER, dtype=torch.float64, device=dev)
    alpha = torch.where((pos < 2) & valid, 0.0, never) + emit[0]
    finals = []
    for t in range(steps):
        k = int(counts[t])
        if not t:  # the sequences without rows never run
            alpha = alpha[:k]
        else:
            a = alpha[:k]
            a1 = torch.cat([never[:k, :1], a[:, :-1]], dim=1)
            a2 = torch.cat([never[:k, :2], a[:, :-2]], dim=1)
            alpha = torch.logaddexp(torch.logaddexp(a, a1), torch.where(skip[:k], a2, _NEVER)) + emit[t, :k]
        alpha = torch.where(valid[:k], alpha, _NEVER)
        lo = int(counts[t + 1]) if t + 1 < steps else 0
        if k > lo:  # the sequences ending here: their last label or the blank after it
            at = ends[lo:k, None]
            last = torch.gather(alpha[lo:k], 1, at)[:, 0]
            prev = torch.gather(alpha[lo:k], 1, (at - 1).clamp(min=0))[:, 0]
            finals.append(-torch.logaddexp(last, torch.where(at[:, 0] > 0, prev, _NEVER)))
    finals.reverse()  # the shortest sequences end first: back to the longest-first order
    running = int(counts[0])  # the sequences without rows come last: no loss when their label is empty too
    if running < n:
        finals.append(torch.where(ends[running:] == 0, 0.0, np.inf).double() + logits.sum() * 0)
    sorted_loss = torch.cat(finals)
    sorted_loss = torch.where(sorted_loss > -_NEVER / 2, np.inf, sorted_loss)  # no alignment
    inverse = be.from_host(np.argsort(order, kind="stable"), like=logits)
    return sorted_loss[inverse].to(logits.dtype)
