"""Sequence losses and decoding: ``linear_chain_crf``, ``crf_decoding``, ``warpctc``, on any backend.

The forward (and Viterbi) recursions run over all sequences at once, one time
step at a time over the sorted lengths (:class:`~lodtensor.nn._common.TimePlan`).
The label path's indices are made on the host for CPU data and on the data's device
otherwise (from per-sequence host arrays: a fresh LoD costs no host pass over its
rows); labels already on that device are checked there, with one read of their
extremes, not copied back (``warpctc`` hands them to ``Backend.ctc_loss`` there too,
with whether an id equals the blank, counted in the same read).
"""

import numpy as np

from .._compile import eager_under_compile
from ..backend import backend_name_of, backend_of, dtype_kind
from ..ops._common import extremes_on_device, flag_arg, int_arg, read_ints
from ..ops._rows import on_host
from ..ops.reduce import pool
from ..tensor import LoDTensor
from ._common import lod_input, on_device, param, step_inverse, step_rows, time_plan

__all__ = ["linear_chain_crf", "crf_decoding", "warpctc"]


def _labels(label, where, name="label"):
    """The ids of ``label`` as host int64 (read back once from a device: they are checked)."""
    if not isinstance(label, LoDTensor):
        raise TypeError(f"{where}: {name} must be a LoDTensor of ids, got {type(label).__name__}")
    data = label._require_data(where)
    host = np.asarray(label.backend.to_numpy(data))
    host = host.reshape(-1) if host.ndim == 2 and host.shape[1] == 1 else host
    if host.ndim != 1 or (host.size and host.dtype.kind not in "iu"):
        raise ValueError(f"{where}: {name} must hold integer ids of shape [N, 1], got {host.dtype} {list(data.shape)}")
    return host.astype(np.int64)


def _label_ids(label, where, like, name="label"):
    """``(host, ids)``: the ids of ``label`` as int64 on ``like``'s device, and as host int64 (``_labels``)
    unless ``like`` is device data and ``label`` is on its device already (then ``host`` is None: the
    ids stay there, checked by shape and dtype here, by value by the caller's one read)."""
    be = backend_of(like)
    data = label._require_data(where) if isinstance(label, LoDTensor) else None
    if on_host(be, like) or data is None or backend_name_of(data) != be.name or \
            be.device_of(data) != be.device_of(like):
        host = _labels(label, where, name)
        return host, be.from_host(host, like=like)
    shape = tuple(int(s) for s in data.shape)
    if len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] != 1) or (
            shape[0] and dtype_kind(data.dtype) not in "iu"):
        raise ValueError(f"{where}: {name} must hold integer ids of shape [N, 1], got {data.dtype} {list(shape)}")
    return None, be.astype(be.flat(data), "int64")


def _check_labels(be, host, ids, k, where, what="labels", blank=None):
    """Labels in ``[0, k)``: on the host where they are there (``host``), else one read of the extremes
    of the device ids ``ids`` (the error names them ``what``). With ``blank``: whether an id equals it,
    found in the same read."""
    if host is not None:
        if not host.size:
            return False
        low, high = int(host.min()), int(host.max())
        holds_blank = blank is not None and bool((host == blank).any())
    elif not int(ids.shape[0]):
        return False
    else:
        scalars = extremes_on_device(be, ids)
        if blank is not None:
            scalars += (be.reduce(be.astype(ids == blank, "int64"), "sum", None, False),)
        low, _, high, _, *blanks = read_ints(be, scalars)
        holds_blank = bool(blanks and blanks[0])
    if low < 0 or high >= k:
        raise ValueError(f"{where}: {what} must be in [0, {k}), got {low}..{high}")
    return holds_blank


def _steps(x, be, data):
    """The time plan of ``x`` and ``data``'s rows cut into its steps (views of one step-major copy)."""
    plan = time_plan(x)
    rows = step_rows(x, plan, data)
    return plan, be.split_rows(be.gather(data, rows), plan.steps_at)


def _path_index(lab, offsets, k):
    """Host positions, in the flattened ``[transition; 0]``, of each row's transition from the
    previous tag, start score and end score (the zero past the end where a row has none)."""
    n = lab.size
    zero = (k + 2) * k
    lengths = np.diff(offsets)
    first = np.zeros(n, dtype=bool)
    first[offsets[:-1][lengths > 0]] = True
    last = np.zeros(n, dtype=bool)
    last[offsets[1:][lengths > 0] - 1] = True
    prev = lab[np.maximum(np.arange(n) - 1, 0)]
    pair = np.where(first, zero, (2 + prev) * k + lab)
    return np.concatenate([pair, np.where(first, lab, zero), np.where(last, k + lab, zero)])


def _path_index_on_device(be, lab, offsets, k, like):
    """:func:`_path_index` made on ``like``'s device from the device ids ``lab``: the zeros and the
    per-sequence entries placed at each sequence's first and last row (host arrays of one entry per
    sequence), no host pass over the rows."""
    n = int(lab.shape[0])
    zero = (k + 2) * k
    lengths = np.diff(offsets)
    first = be.from_host(offsets[:-1][lengths > 0], like=like)
    last = be.from_host(offsets[1:][lengths > 0] - 1, like=like)
    prev = be.concat([lab[:1], lab[:-1]]) if n else lab
    pair = be.scatter((prev + 2) * k + lab, first, be.full((int(first.shape[0]),), zero, lab.dtype, lab))
    start = be.scatter(be.full((n,), zero, lab.dtype, lab), first, be.gather(lab, first))
    end = be.scatter(be.full((n,), zero, lab.dtype, lab), last, be.gather(lab, last) + k)
    return be.concat([pair, start, end])


@eager_under_compile  # the steps read the host offsets: under torch.compile, behind a graph break
def linear_chain_crf(input, label, transition):  # noqa: A002
    """Negative log-likelihood of each tag sequence under a linear-chain CRF (Paddle's
    ``LogLikelihood`` output, ``[num_sequences, 1]``; an empty sequence gives 0).

    ``input`` holds the emission scores ``[T, K]``; ``transition`` is ``[K + 2, K]``: row 0 the
    start scores, row 1 the end scores, rows ``2..`` the score of tag ``i`` followed by tag ``j``.
    Runs on NumPy, CuPy and torch data (autograd on torch).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.zeros((2, 2)), [[0, 2]])
    >>> y = lt.LoDTensor(np.array([[0], [1]]), [[0, 2]])
    >>> float(np.round(linear_chain_crf(x, y, np.zeros((4, 2))).ravel()[0], 4))  # log(4): 4 paths
    1.3863
    """
    where = "linear_chain_crf()"
    x, be = lod_input(input, where)
    data = x.data
    k = int(data.shape[1])
    w = param(transition, data, where, "transition", (k + 2, k))
    on_cpu = on_host(be, data)
    lab, ids = (_labels(label, where), None) if on_cpu else _label_ids(label, where, data)
    n = int(data.shape[0])
    got = int((lab if on_cpu else ids).shape[0])
    if got != n:
        raise ValueError(f"{where}: label has {got} rows but input has {n}")
    _check_labels(be, lab, ids, k, where)
    offsets = x.offsets(-1)
    n_seq = offsets.size - 1
    start, end, trans = w[0:1], w[1:2], w[2:]
    # the label path's score: its emissions, transitions, start and end scores, summed per sequence
    # (CPU data: the indices made on the host; device data: on the device, from per-sequence arrays)
    if on_cpu:
        emit_at = be.from_host(np.arange(n, dtype=np.int64) * k + lab, like=data)
        path_at = be.from_host(_path_index(lab, offsets, k), like=data)
    else:
        emit_at = be.arange(n, like=data) * k + ids
        path_at = _path_index_on_device(be, ids, offsets, k, data)
    emit = be.gather(be.flat(data), emit_at)
    table = be.concat([be.flat(w), be.zeros((1,), data.dtype, data)])
    picked = be.gather(table, path_at).reshape(3, n)
    per_row = emit + picked[0] + picked[1] + picked[2]
    score = pool(x.with_data(per_row.reshape(n, 1)), "sum").data
    # the partition function: the forward recursion in log space
    plan, steps = _steps(x, be, data)
    pieces, alpha = [], None
    for t in range(plan.steps):
        n_t = int(plan.counts[t])
        e = steps[t]
        alpha = start + e if alpha is None else be.logsumexp(alpha[:n_t, :, None] + trans[None, :, :], 1) + e
        lo, hi = plan.ending(t)
        if hi > lo:
            pieces.append(be.logsumexp(alpha[lo:hi] + end, 1))
    if not pieces:
        return score * 0
    empty = int(np.count_nonzero(plan.lengths == 0))
    z = be.concat(pieces + ([be.zeros((empty,), data.dtype, data)] if empty else []))

    def build():  # the sequences in the order of z: by the step they end at, then the empty ones
        pos = np.flatnonzero(plan.lengths > 0)
        pos = pos[np.argsort(plan.lengths[pos], kind="stable")]
        full = np.concatenate([plan.order[pos], plan.order[plan.lengths == 0]])
        inv = np.empty(n_seq, dtype=np.int64)
        inv[full] = np.arange(n_seq, dtype=np.int64)
        return inv

    log_z = be.gather(z, on_device(x, ("nn.crf_sequences",), build, data))
    return log_z.reshape(n_seq, 1) - score


@eager_under_compile  # the steps read the host offsets: under torch.compile, behind a graph break
def crf_decoding(input, transition, label=None):  # noqa: A002
    """The best tag path of every sequence (Viterbi), int64 ``[T, 1]`` with ``input``'s lod.

    With ``label``, the result is 1 where the best path equals the label and 0 elsewhere, as
    Paddle. Ties go to the lower tag. Forward only; runs on the input's device (NumPy, CuPy
    or torch), one step at a time, the back-trace too.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]), [[0, 2, 3]])
    >>> crf_decoding(x, np.zeros((4, 2))).data.ravel().tolist()
    [0, 1, 0]
    """
    where = "crf_decoding()"
    x, be = lod_input(input, where)
    data = be.detach(x.data)
    k = int(data.shape[1])
    w = be.detach(param(transition, data, where, "transition", (k + 2, k)))
    lab = None if label is None else _label_ids(label, where, data)[1]  # (on the device: no read)
    if lab is not None and int(lab.shape[0]) != int(data.shape[0]):
        raise ValueError(f"{where}: label has {int(lab.shape[0])} rows but input has {int(data.shape[0])}")
    start, end, trans = w[0], w[1], w[2:]
    plan, steps = _steps(x, be, data)
    if plan.steps == 0:
        return x.with_data(be.from_host(np.zeros((0, 1), dtype=np.int64), like=data))
    alpha, pointers, best_last = None, [None] * plan.steps, [None] * plan.steps
    for t in range(plan.steps):
        n = int(plan.counts[t])
        if alpha is None:
            alpha = start + steps[t]
        else:
            alpha, pointers[t] = be.extreme_with_index(alpha[:n, :, None] + trans[None, :, :], "max", 1, False)
            alpha = alpha + steps[t]
        lo, hi = plan.ending(t)
        if hi > lo:
            best_last[t] = be.extreme_with_index(alpha[lo:hi] + end, "max", 1, False)[1]
    # the back-trace, last step first: a sequence still running at t + 1 takes its tag at t from the
    # pointers of t + 1; one ending at t starts from its best last tag
    tags, tag = [None] * plan.steps, None
    for t in range(plan.steps - 1, -1, -1):
        parts = []
        if tag is not None:
            slots = be.arange(int(tag.shape[0]), like=data) * k + tag
            parts.append(be.gather(be.flat(pointers[t + 1]), slots))
        if best_last[t] is not None:
            parts.append(best_last[t])
        tag = tags[t] = parts[0] if len(parts) == 1 else be.concat(parts)
    inverse = step_inverse(x, plan, data)
    path = be.gather(be.concat(tags), inverse).reshape(-1, 1)
    if lab is not None:
        path = be.astype(path == lab.reshape(-1, 1), "int64")
    return x.with_data(path)


@eager_under_compile  # the loss reads the host offsets: under torch.compile, behind a graph break
def warpctc(input, label, blank=0, norm_by_times=False):  # noqa: A002
    """CTC loss of every sequence (Paddle's ``warpctc``: ``input`` holds unnormalised
    scores ``[T, num_classes + 1]``, softmax applied inside), ``[num_sequences, 1]``.

    ``label`` holds the target ids (one lod level, as many sequences as ``input``).
    ``norm_by_times`` divides each sequence's gradient by its length (the loss is unchanged),
    as Paddle. The loss is the backend's (``torch.nn.functional.ctc_loss`` on torch; the
    forward recursion over all sequences at once on NumPy and CuPy). An impossible alignment
    gives ``inf``. A label id equal to ``blank`` is accepted with Paddle's rule: no path skips
    into it from the label before (on torch, the recursion in torch ops rather than torch's
    ``ctc_loss``, whose targets must not hold the blank).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.zeros((2, 2)), [[0, 2]])
    >>> y = lt.LoDTensor(np.array([[1]]), [[0, 1]])
    >>> float(np.round(warpctc(x, y).ravel()[0], 4))  # 3 of 4 paths give "1": -log(3/4)
    0.2877
    """
    where = "warpctc()"
    x, be = lod_input(input, where)
    data = x.data
    host, lab = _label_ids(label, where, data)  # device ids stay there: checked by one read below
    if label.lod_level < 1:
        raise ValueError(f"{where}: label must have a lod")
    t_off, l_off = x.offsets(-1), label.offsets(-1)
    if t_off.size != l_off.size:
        raise ValueError(f"{where}: input has {t_off.size - 1} sequences but label has {l_off.size - 1}")
    c = int(data.shape[1])
    blank = int_arg(blank, where, "blank")
    norm = flag_arg(norm_by_times, where, "norm_by_times")
    if not 0 <= blank < c:
        raise ValueError(f"{where}: blank must be in [0, {c}), got {blank}")
    blank_labels = _check_labels(be, host, lab, c, where, "label ids", blank)
    loss = be.ctc_loss(data, t_off, lab, l_off, blank, blank_labels)
    if norm and be.requires_grad(loss):  # the gradient scaled, the value kept (inf stays inf)
        scale = be.from_host(1.0 / np.maximum(np.diff(t_off), 1), like=loss, dtype=loss.dtype)
        fixed = be.detach(loss)
        finite = be.pointwise("isfinite", "isfinite", fixed)
        loss = be.where(finite, fixed + (loss - fixed) * scale, loss)
    return loss.reshape(-1, 1)
