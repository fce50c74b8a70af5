"""Feed-forward layers with explicit parameters: embedding, fc, sequence_conv, row_conv,
sequence_conv_pool (Paddle's parameter shapes)."""

import math

import numpy as np

from .._compile import eager_under_compile
from ..backend import backend_name_of, backend_of
from ..lod import offsets_to_segment_ids
from ..ops._common import int_arg
from ..ops._rows import per_row
from ..sequence import sequence_pool
from ..tensor import LoDTensor
from ._common import act_name, activate, lod_input, on_device, out_like, param, require_float

__all__ = ["embedding", "fc", "sequence_conv", "row_conv", "sequence_conv_pool"]


@eager_under_compile  # the ids are checked on the host: under torch.compile, behind a graph break
def embedding(input, weight, padding_idx=None):  # noqa: A002 - Paddle's name
    """Rows of ``weight`` ``[vocab, D]`` for the ids of ``input`` (``[N, 1]`` or ``[N]``).

    The rows of ``padding_idx`` (negative: counted from the end of the vocabulary) are zeros
    and get no gradient, as in Paddle's ``lookup_table``. Keeps the lod.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> ids = lt.LoDTensor(np.array([[0], [2], [1]]), [[0, 2, 3]])
    >>> embedding(ids, np.arange(6.0).reshape(3, 2), padding_idx=1).data.tolist()
    [[0.0, 1.0], [4.0, 5.0], [0.0, 0.0]]
    """
    where = "embedding()"
    if not isinstance(input, LoDTensor):
        raise TypeError(f"{where}: input must be a LoDTensor of ids, got {type(input).__name__}")
    ids = input._require_data(where)
    host = np.asarray(input.backend.to_numpy(ids))  # the ids are checked on the host (one read from a device)
    if host.ndim == 2 and host.shape[1] == 1:
        host = host[:, 0]
    if host.ndim != 1 or (host.size and host.dtype.kind not in "iu"):
        raise ValueError(
            f"{where}: input must hold integer ids of shape [N, 1] or [N], got {host.dtype} {list(ids.shape)}"
        )
    w = weight.data if isinstance(weight, LoDTensor) else weight
    if backend_name_of(w) is None or w.ndim != 2:
        raise ValueError(f"{where}: weight must be a 2-d array [vocab, D] (NumPy, CuPy or torch)")
    vocab = int(w.shape[0])
    if host.size and (host.min() < 0 or host.max() >= vocab):
        bad = host[(host < 0) | (host >= vocab)][0]
        raise IndexError(f"{where}: id {int(bad)} is out of range for a vocabulary of {vocab}")
    be = backend_of(w)
    out = be.gather(w, be.from_host(host.astype(np.int64, copy=False), like=w))
    if padding_idx is not None:
        pad = int_arg(padding_idx, where, "padding_idx")
        pad = pad + vocab if pad < 0 else pad
        if not 0 <= pad < vocab:
            raise ValueError(f"{where}: padding_idx {padding_idx} is out of range for a vocabulary of {vocab}")
        # zeros whatever the weight's row holds (a multiplication by 0 would keep its NaN or inf)
        out = be.where(be.from_host((host != pad)[:, None], like=out), out, be.zeros((1, 1), out.dtype, out))
    return out_like(input, out)


def fc(input, weight, bias=None, num_flatten_dims=1, act=None):  # noqa: A002
    """``act(flatten(input) @ weight + bias)`` with ``weight`` ``[in, out]`` (Paddle's layout).

    The first ``num_flatten_dims`` dims of the data are kept and the rest flattened into ``in``
    (``-1``, as Paddle 2's ``fc``: all dims but the last). The input must be floating point.
    ``input`` is a LoDTensor (the lod is kept) or a plain array. As Paddle's ``fc``, ``input``
    may be a list of inputs with one weight each (``weight`` a list of the same length):
    ``act(sum_i flatten(input[i]) @ weight[i] + bias)``; the result keeps the first input's lod.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.ones((3, 2)), [[0, 1, 3]])
    >>> fc(x, np.ones((2, 4)), np.arange(4.0), act="relu").data[0].tolist()
    [2.0, 3.0, 4.0, 5.0]
    >>> fc([x, 2 * x], [np.ones((2, 1)), np.ones((2, 1))]).data.ravel().tolist()
    [6.0, 6.0, 6.0]
    """
    where = "fc()"
    if isinstance(input, (list, tuple)):
        return _fc_many(list(input), weight, bias, num_flatten_dims, act, where)
    if isinstance(weight, (list, tuple)):
        raise TypeError(
            f"{where}: weight is a list of {len(weight)} but input is one tensor; pass one weight, or a list "
            f"of {len(weight)} inputs (one weight per input, as Paddle's fc)"
        )
    data, lead, be = _fc_data(input, num_flatten_dims, where, "input")
    w = param(weight, data, where, "weight", (int(data.shape[1]), None))
    return _fc_finish(input, be.matmul(data, w), lead, bias, act, be, where)


def _fc_data(input, num_flatten_dims, where, name):  # noqa: A002
    """The data of one fc input flattened to ``[rows, in]``, its kept leading shape, its backend."""
    data = input.data if isinstance(input, LoDTensor) else input
    if isinstance(input, LoDTensor):
        input._require_data(where)
    elif backend_name_of(data) is None:
        raise TypeError(
            f"{where}: {name} must be a LoDTensor or an array (NumPy, CuPy or torch), got {type(input).__name__}"
        )
    require_float(data, where, name)
    be = backend_of(data)
    k = int_arg(num_flatten_dims, where, "num_flatten_dims")
    k = data.ndim - 1 if k == -1 else k  # Paddle 2's fc: -1 keeps all but the last dim
    if not 1 <= k < data.ndim:
        raise ValueError(
            f"{where}: num_flatten_dims must be -1 or in [1, {data.ndim - 1}] for {name} of rank {data.ndim}, "
            f"got {num_flatten_dims}"
        )
    # math.prod of the sizes as they are, no int() or NumPy: under torch.compile the row count is a symbolic
    # size, which int() or np.prod would fix to one batch's (a graph break and a recompile per LoD)
    lead = tuple(data.shape[:k])
    return data.reshape(math.prod(lead), math.prod(data.shape[k:])), lead, be


def _fc_finish(input, out, lead, bias, act, be, where):  # noqa: A002
    """Bias, activation and the kept leading shape (and lod) of an fc result."""
    width = int(out.shape[1])
    b = param(bias, out, where, "bias", None, optional=True)
    if b is not None:
        if math.prod(b.shape) != width:
            raise ValueError(f"{where}: bias must have {width} elements, got shape {list(b.shape)}")
        out = out + b.reshape(1, width)
    out = activate(be, act_name(act, where, layer=True), out).reshape(*lead, width)
    return out_like(input, out) if isinstance(input, LoDTensor) else out


def _fc_many(inputs, weights, bias, num_flatten_dims, act, where):
    """Paddle's fc of several inputs: one weight each, the products summed."""
    if not inputs:
        raise ValueError(f"{where}: input is an empty list; pass at least one tensor")
    if not isinstance(weights, (list, tuple)) or len(weights) != len(inputs):
        got = f"a list of {len(weights)}" if isinstance(weights, (list, tuple)) else "one weight"
        raise TypeError(
            f"{where}: input is a list of {len(inputs)} tensors, so weight must be a list of {len(inputs)} "
            f"weights (one per input, as Paddle stores them: fc_0.w_0, fc_0.w_1, ...), got {got}"
        )
    out, lead, be = None, None, None
    for i, (x, w) in enumerate(zip(inputs, weights)):
        data, lead_i, be_i = _fc_data(x, num_flatten_dims, where, f"input[{i}]")
        if lead is None:
            lead, be = lead_i, be_i
        elif lead_i != lead or be_i is not be:
            raise ValueError(
                f"{where}: input[{i}] has leading shape {list(lead_i)} ({be_i.name}) but input[0] has "
                f"{list(lead)} ({be.name}); every input needs the same rows and the same library"
            )
        term = be.matmul(data, param(w, data, where, f"weight[{i}]", (int(data.shape[1]), None)))
        if out is not None and int(term.shape[1]) != int(out.shape[1]):
            raise ValueError(
                f"{where}: weight[{i}] has {int(term.shape[1])} columns but weight[0] has {int(out.shape[1])}; "
                f"every weight is [in_i, size]"
            )
        out = term if out is None else out + term
    return _fc_finish(inputs[0], out, lead, bias, act, be, where)


def _context_rows(offsets, n, shift):
    """Row ``r + shift`` for every row ``r`` and whether it lies in ``r``'s sequence."""
    seg = offsets_to_segment_ids(offsets)
    src = np.arange(n, dtype=np.int64) + shift
    valid = (src >= offsets[:-1][seg]) & (src < offsets[1:][seg])
    return np.where(valid, src, 0), valid


def _padding_rows(offsets, n, shift, begin_pad):
    """The row of Paddle's ``PaddingData`` that stands for row ``r + shift`` where it lies outside
    ``r``'s sequence: ``begin_pad + q`` for position ``q < 0`` before the sequence, ``begin_pad + e``
    for the ``e``-th position past its end (meaningless where the row is inside)."""
    seg = offsets_to_segment_ids(offsets)
    starts, ends = offsets[:-1][seg], offsets[1:][seg]
    pos = np.arange(n, dtype=np.int64) + shift - starts
    return np.where(pos < 0, begin_pad + pos, begin_pad + pos - (ends - starts))


def _context_on_device(be, x, n, shifts, like):
    """On ``like``'s device, for every row ``r`` (rows) and shift ``s`` (columns): the row ``r + s``, the
    start and end of ``r``'s sequence, and whether ``r + s`` lies in it (no host pass over the rows)."""
    offsets, lengths = x.offsets(-1), x.lod.lengths(-1)
    src = be.arange(n, like=like)[:, None] + be.from_host(np.asarray(shifts, dtype=np.int64), like=like)
    starts = per_row(be, offsets[:-1], lengths, like)[:, None]
    ends = per_row(be, offsets[1:], lengths, like)[:, None]
    return src, starts, ends, (src >= starts) & (src < ends)


@eager_under_compile  # the context rows read the host offsets: under torch.compile, behind a graph break
def sequence_conv(input, weight, bias=None, filter_size=3, filter_stride=1, padding_start=None, act=None,  # noqa: A002
                  padding_trainable=False, padding_data=None):
    """Convolution over the rows of every sequence (Paddle's context projection + GEMM).

    Row ``t`` sees rows ``t + padding_start ... t + padding_start + filter_size - 1`` of its own
    sequence; ``padding_start`` defaults to ``-(filter_size // 2)``. Positions outside the
    sequence read zeros, or, with ``padding_trainable``, rows of ``padding_data`` (Paddle's
    ``PaddingData`` input, learnable): ``[begin_pad + end_pad, D]`` with ``begin_pad =
    max(0, -padding_start)`` rows for the positions ``-begin_pad ... -1`` before a sequence and
    ``end_pad = max(0, padding_start + filter_size - 1)`` rows for the positions past its end.
    ``weight`` is ``[filter_size * D, num_filters]``, ``bias`` ``[num_filters]``. Acts on the
    last lod level. Only ``filter_stride=1`` exists in Paddle.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(1.0, 5.0).reshape(4, 1), [[0, 3, 4]])
    >>> sequence_conv(x, np.ones((3, 1))).data.ravel().tolist()
    [3.0, 6.0, 5.0, 4.0]
    >>> pad = np.array([[10.0], [100.0]])  # the row before a sequence, the row after it
    >>> sequence_conv(x, np.ones((3, 1)), padding_trainable=True, padding_data=pad).data.ravel().tolist()
    [13.0, 6.0, 105.0, 114.0]
    """
    where = "sequence_conv()"
    x, be = lod_input(input, where)
    if int_arg(filter_stride, where, "filter_stride") != 1:
        raise ValueError(f"{where}: filter_stride must be 1 (Paddle supports only 1), got {filter_stride}")
    size = int_arg(filter_size, where, "filter_size", 1)
    start = -(size // 2) if padding_start is None else int_arg(padding_start, where, "padding_start")
    data = x.data
    d = int(data.shape[1])
    w = param(weight, data, where, "weight", (size * d, None))
    act = act_name(act, where, layer=True)
    begin_pad, end_pad = max(0, -start), max(0, start + size - 1)
    if padding_trainable:
        if padding_data is None and begin_pad + end_pad:
            raise TypeError(
                f"{where}: padding_trainable=True needs padding_data of shape [{begin_pad + end_pad}, {d}] "
                f"(begin_pad {begin_pad} + end_pad {end_pad} rows of width {d})"
            )
        pad = param(padding_data, data, where, "padding_data", (begin_pad + end_pad, d), optional=True)
    elif padding_data is not None:
        raise ValueError(f"{where}: padding_data is used only with padding_trainable=True; pass both, or neither")
    else:
        pad = None
    b = param(bias, data, where, "bias", None, optional=True)
    if b is not None and math.prod(b.shape) != int(w.shape[1]):
        raise ValueError(f"{where}: bias must have num_filters={int(w.shape[1])} elements (weight's columns), "
                         f"got shape {list(b.shape)}")
    offsets = x.offsets(-1)
    n = int(data.shape[0])
    learned = pad is not None and begin_pad + end_pad > 0

    def build():  # for every row and window position: its source row, past the data where outside
        cols = []
        for k in range(size):  # a loop over the window, not over rows
            idx, valid = _context_rows(offsets, n, start + k)
            outside = n + _padding_rows(offsets, n, start + k, begin_pad) if learned else n
            cols.append(np.where(valid, idx, outside))
        return np.stack(cols, axis=1).reshape(-1)

    def build_on_device():  # the same index, made on the data's device
        src, starts, ends, valid = _context_on_device(be, x, n, range(start, start + size), data)
        outside = n
        if learned:
            pos = src - starts
            outside = n + be.where(pos < 0, begin_pad + pos, begin_pad + pos - (ends - starts))
        return be.where(valid, src, outside).reshape(-1)

    index = on_device(x, ("nn.sequence_conv", start, size, learned), build, data, build_on_device)
    extra = pad if learned else be.zeros((1, d), data.dtype, data)  # the padding rows, or one zero row
    windows = be.gather(be.concat([data, extra]), index).reshape(n, size * d)
    out = be.matmul(windows, w)
    if b is not None:
        out = out + b.reshape(1, int(w.shape[1]))
    return out_like(x, activate(be, act, out))


@eager_under_compile  # the context rows read the host offsets: under torch.compile, behind a graph break
def row_conv(input, weight, act=None):  # noqa: A002
    """Look-ahead convolution: ``out[t] = sum_k x[t + k] * weight[k]`` over ``k = 0..future_context_size``
    rows ahead in the same sequence; ``weight`` is ``[future_context_size + 1, D]``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(1.0, 5.0).reshape(4, 1), [[0, 3, 4]])
    >>> row_conv(x, np.array([[1.0], [10.0]])).data.ravel().tolist()
    [21.0, 32.0, 3.0, 4.0]
    """
    where = "row_conv()"
    x, be = lod_input(input, where)
    data = x.data
    d = int(data.shape[1])
    w = param(weight, data, where, "weight", (None, d))
    act = act_name(act, where, layer=True)
    ahead = int(w.shape[0])
    if ahead == 0:
        raise ValueError(f"{where}: weight must have at least one row, got shape {list(w.shape)}")
    offsets = x.offsets(-1)
    n = int(data.shape[0])

    def build():  # for every row and look-ahead k: row t + k in the same sequence, else the zero row n
        cols = []
        for k in range(ahead):
            idx, valid = _context_rows(offsets, n, k)
            cols.append(np.where(valid, idx, n))
        return np.stack(cols, axis=1).reshape(-1)

    def build_on_device():  # the same index, made on the data's device
        src, _, _, valid = _context_on_device(be, x, n, range(ahead), data)
        return be.where(valid, src, n).reshape(-1)

    index = on_device(x, ("nn.row_conv", ahead), build, data, build_on_device)
    ahead_rows = be.gather(be.concat([data, be.zeros((1, d), data.dtype, data)]), index).reshape(n, ahead, d)
    out = be.reduce(ahead_rows * w, "sum", 1, False)
    return out_like(x, activate(be, act, out))


def sequence_conv_pool(input, weight, bias, filter_size, act="sigmoid", pool_type="max"):  # noqa: A002
    """Paddle's ``nets.sequence_conv_pool``: :func:`sequence_conv` then ``sequence_pool``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(1.0, 5.0).reshape(4, 1), [[0, 3, 4]])
    >>> sequence_conv_pool(x, np.ones((3, 1)), None, 3, act=None).data.ravel().tolist()
    [6.0, 4.0]
    """
    conv = sequence_conv(input, weight, bias, filter_size=filter_size, act=act)
    return sequence_pool(conv, pool_type)
