"""Feed-forward layers with explicit parameters: embedding, fc, sequence_conv, row_conv,
sequence_conv_pool (Paddle's parameter shapes)."""

import numpy as np

from ..backend import backend_name_of
from ..lod import offsets_to_segment_ids
from ..sequence import sequence_pool
from ..tensor import LoDTensor
from ._common import lod_input, out_like, param
from ._math import activation, math_for

__all__ = ["embedding", "fc", "sequence_conv", "row_conv", "sequence_conv_pool"]


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
    input._require_data(where)
    ids = input.data
    lib = backend_name_of(ids)
    host = ids.detach().cpu().numpy() if lib == "torch" else np.asarray(ids)
    if host.ndim == 2 and host.shape[1] == 1:
        host = host[:, 0]
    if host.ndim != 1 or (host.size and host.dtype.kind not in "iu"):
        raise ValueError(
            f"{where}: input must hold integer ids of shape [N, 1] or [N], got {host.dtype} {list(ids.shape)}"
        )
    w = weight.data if isinstance(weight, LoDTensor) else weight
    if backend_name_of(w) not in ("numpy", "torch") or w.ndim != 2:
        raise ValueError(f"{where}: weight must be a 2-d NumPy array or torch tensor [vocab, D]")
    vocab = int(w.shape[0])
    if host.size and (host.min() < 0 or host.max() >= vocab):
        bad = host[(host < 0) | (host >= vocab)][0]
        raise IndexError(f"{where}: id {int(bad)} is out of range for a vocabulary of {vocab}")
    m = math_for(w)
    out = m.take(w, m.index(host, w))
    if padding_idx is not None:
        pad = int(padding_idx) + vocab if int(padding_idx) < 0 else int(padding_idx)
        if not 0 <= pad < vocab:
            raise ValueError(f"{where}: padding_idx {padding_idx} is out of range for a vocabulary of {vocab}")
        out = out * m.mask((host != pad)[:, None], out)
    return out_like(input, out)


def fc(input, weight, bias=None, num_flatten_dims=1, act=None):  # noqa: A002
    """``act(flatten(input) @ weight + bias)`` with ``weight`` ``[in, out]`` (Paddle's layout).

    The first ``num_flatten_dims`` dims of the data are kept and the rest flattened into ``in``.
    ``input`` is a LoDTensor (the lod is kept) or a plain array.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.ones((3, 2)), [[0, 1, 3]])
    >>> fc(x, np.ones((2, 4)), np.arange(4.0), act="relu").data[0].tolist()
    [2.0, 3.0, 4.0, 5.0]
    """
    where = "fc()"
    data = input.data if isinstance(input, LoDTensor) else input
    if isinstance(input, LoDTensor):
        input._require_data(where)
    m = math_for(data)
    k = int(num_flatten_dims)
    if not 1 <= k < data.ndim:
        raise ValueError(
            f"{where}: num_flatten_dims must be in [1, {data.ndim - 1}] for input of rank {data.ndim}, got {k}"
        )
    lead = tuple(int(s) for s in data.shape[:k])
    inner = int(np.prod(data.shape[k:], dtype=np.int64))
    w = param(weight, data, where, "weight", (inner, None))
    out = m.reshape(data, (int(np.prod(lead, dtype=np.int64)), inner)) @ w
    b = param(bias, data, where, "bias", None, optional=True)
    if b is not None:
        if int(np.prod(b.shape)) != int(w.shape[1]):
            raise ValueError(f"{where}: bias must have {int(w.shape[1])} elements, got shape {list(b.shape)}")
        out = out + m.reshape(b, (1, int(w.shape[1])))
    out = m.reshape(activation(m, act, where)(out), (*lead, int(w.shape[1])))
    return out_like(input, out) if isinstance(input, LoDTensor) else out


def _context_rows(offsets, n, shift):
    """Row ``r + shift`` for every row ``r`` and whether it lies in ``r``'s sequence."""
    seg = offsets_to_segment_ids(offsets)
    src = np.arange(n, dtype=np.int64) + shift
    valid = (src >= offsets[:-1][seg]) & (src < offsets[1:][seg])
    return np.where(valid, src, 0), valid


def sequence_conv(input, weight, bias=None, filter_size=3, filter_stride=1, padding_start=None, act=None):  # noqa: A002
    """Convolution over the rows of every sequence (Paddle's context projection + GEMM).

    Row ``t`` sees rows ``t + padding_start ... t + padding_start + filter_size - 1`` of its own
    sequence (zeros outside it); ``padding_start`` defaults to ``-(filter_size // 2)``.
    ``weight`` is ``[filter_size * D, num_filters]``, ``bias`` ``[num_filters]``. Acts on the
    last lod level. Only ``filter_stride=1`` exists in Paddle.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.arange(1.0, 5.0).reshape(4, 1), [[0, 3, 4]])
    >>> sequence_conv(x, np.ones((3, 1))).data.ravel().tolist()
    [3.0, 6.0, 5.0, 4.0]
    """
    where = "sequence_conv()"
    x, m = lod_input(input, where)
    if int(filter_stride) != 1:
        raise ValueError(f"{where}: filter_stride must be 1 (Paddle supports only 1), got {filter_stride}")
    size = int(filter_size)
    if size < 1:
        raise ValueError(f"{where}: filter_size must be >= 1, got {filter_size}")
    start = -(size // 2) if padding_start is None else int(padding_start)
    data = x.data
    d = int(data.shape[1])
    w = param(weight, data, where, "weight", (size * d, None))
    offsets = x.offsets(-1)
    n = int(data.shape[0])
    cols = []
    for k in range(size):
        idx, valid = _context_rows(offsets, n, start + k)
        cols.append(m.take(data, m.index(idx, data)) * m.mask(valid[:, None], data))
    out = (m.cat(cols, 1) if size > 1 else cols[0]) @ w
    b = param(bias, data, where, "bias", None, optional=True)
    if b is not None:
        out = out + m.reshape(b, (1, int(w.shape[1])))
    return out_like(x, activation(m, act, where)(out))


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
    x, m = lod_input(input, where)
    data = x.data
    d = int(data.shape[1])
    w = param(weight, data, where, "weight", (None, d))
    offsets = x.offsets(-1)
    n = int(data.shape[0])
    out = None
    for k in range(int(w.shape[0])):
        idx, valid = _context_rows(offsets, n, k)
        term = m.take(data, m.index(idx, data)) * m.mask(valid[:, None], data) * w[k : k + 1]
        out = term if out is None else out + term
    if out is None:
        raise ValueError(f"{where}: weight must have at least one row, got shape {list(w.shape)}")
    return out_like(x, activation(m, act, where)(out))


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
