"""The fluid 1.x calls around a model's layers (no parameters): ``sums``, ``mean``,
``cross_entropy``, ``accuracy``, on LoDTensors or arrays of any backend (NumPy, CuPy, torch with autograd)."""

import numpy as np

from ..backend import backend_of
from ..ops._common import int_arg
from ._tensor_layers import _array as _data
from ._tensor_layers import _like

__all__ = ["sums", "mean", "cross_entropy", "accuracy"]


def sums(input, out=None):  # noqa: A002 - Paddle's names
    """``fluid.layers.sums``: the element-wise sum of a list of tensors of one shape; the result keeps
    the first input's lod. ``out`` (Paddle's pre-made output variable) must be None: use the result.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> a = lt.LoDTensor(np.ones((3, 2)), [[0, 1, 3]])
    >>> r = sums([a, a, a])
    >>> r.lod(), r.data[0].tolist()
    ([[0, 1, 3]], [3.0, 3.0])
    """
    where = "fluid.layers.sums()"
    if out is not None:
        raise TypeError(f"{where}: out= (a pre-made Paddle variable) has no meaning here; use the returned sum")
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    if not items:
        raise ValueError(f"{where}: input is an empty list")
    datas = [_data(x, where, f"input[{i}]") for i, x in enumerate(items)]
    shape = tuple(datas[0].shape)
    for i, d in enumerate(datas[1:], 1):
        if tuple(d.shape) != shape:
            raise ValueError(f"{where}: input[{i}] has shape {list(d.shape)} but input[0] has {list(shape)}")
    total = datas[0]
    for d in datas[1:]:
        total = total + d
    return _like(items[0], total)


def mean(x, name=None):
    """``fluid.layers.mean``: the mean of every element, a 0-d tensor (NumPy: a 0-d array).

    >>> import numpy as np
    >>> float(mean(np.array([[1.0], [2.0], [6.0]])))
    3.0
    """
    return _data(x, "fluid.layers.mean()", "x").mean()


def _labels(label, rows, where):
    """Integer labels ``[N]`` (from ``[N, 1]`` or ``[N]``) as host int64 (read back once from a device)."""
    lab = _data(label, where, "label")
    if tuple(lab.shape) not in ((rows,), (rows, 1)):
        raise ValueError(f"{where}: label must have shape [{rows}, 1] or [{rows}], got {list(lab.shape)}")
    return np.asarray(backend_of(lab).to_numpy(lab)).reshape(-1).astype(np.int64)


def cross_entropy(input, label, soft_label=False, ignore_index=-100):  # noqa: A002
    """``fluid.layers.cross_entropy`` of probabilities ``input`` ``[N, C]``: ``-log(input[i, label[i]])``
    (0 where ``label == ignore_index``), or with ``soft_label`` ``-sum(label[i] * log(input[i]))``;
    ``[N, 1]``, keeping ``input``'s lod.

    >>> import numpy as np
    >>> out = cross_entropy(np.array([[0.25, 0.75], [0.5, 0.5]]), np.array([[1], [0]]))
    >>> np.round(out.ravel(), 4).tolist()
    [0.2877, 0.6931]
    """
    where = "fluid.layers.cross_entropy()"
    probs = _data(input, where, "input")
    be = backend_of(probs)
    if probs.ndim != 2:
        raise ValueError(f"{where}: input must be probabilities [N, C], got shape {list(probs.shape)}")
    rows = int(probs.shape[0])
    if soft_label:
        lab = _data(label, where, "label")
        if tuple(lab.shape) != tuple(probs.shape):
            raise ValueError(f"{where}: a soft label has input's shape {list(probs.shape)}, got {list(lab.shape)}")
        return _like(input, -(lab * be.pointwise("log", "log", probs)).sum(-1)[:, None])
    host = _labels(label, rows, where)
    keep = host != int(ignore_index)
    width = int(probs.shape[1])
    if keep.any() and (host[keep].min() < 0 or host[keep].max() >= width):
        bad = int(host[keep][(host[keep] < 0) | (host[keep] >= width)][0])
        raise IndexError(f"{where}: label {bad} is out of range for {width} classes")
    flat = np.arange(rows, dtype=np.int64) * width + np.where(keep, host, 0)
    picked = be.gather(be.flat(probs), be.from_host(flat, like=probs))
    # an ignored row reads 1 (log 1 = 0): no log(0) in its value, no 0/0 in its gradient
    picked = be.where(be.from_host(~keep, like=probs), 1.0, picked)
    loss = 0.0 - be.pointwise("log", "log", picked)  # 0.0 - : an ignored row gives 0, not -0
    return _like(input, loss.reshape(rows, 1))


def accuracy(input, label, k=1, correct=None, total=None):  # noqa: A002
    """``fluid.layers.accuracy``: the fraction of rows whose label is among the ``k`` largest scores of
    ``input`` ``[N, C]``; a float32 0-d tensor (NumPy: 0-d array). ``correct``/``total`` must be None.

    >>> import numpy as np
    >>> round(float(accuracy(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), np.array([[1], [1], [1]]))), 4)
    0.6667
    """
    where = "fluid.layers.accuracy()"
    if correct is not None or total is not None:
        raise TypeError(f"{where}: correct=/total= (pre-made Paddle variables) have no meaning here")
    scores = _data(input, where, "input")
    if scores.ndim != 2:
        raise ValueError(f"{where}: input must be scores [N, C], got shape {list(scores.shape)}")
    rows, width = int(scores.shape[0]), int(scores.shape[1])
    k = int_arg(k, where, "k", 1)
    if k > width:
        raise ValueError(f"{where}: k={k} is more than the {width} classes of input (every row would count)")
    host = _labels(label, rows, where)
    if rows and host.min() < 0:
        raise ValueError(f"{where}: labels must be >= 0 (as Paddle's accuracy), got {int(host.min())}")
    be = backend_of(scores)
    if not rows:
        return be.astype(be.zeros((), scores.dtype, scores), "float32")
    scores = be.detach(scores)
    valid = host < width
    safe = np.where(valid, host, 0)
    own = be.gather(be.flat(scores), be.from_host(np.arange(rows, dtype=np.int64) * width + safe, like=scores))
    label_col = be.from_host(safe[:, None], like=scores)
    cols = be.from_host(np.arange(width, dtype=np.int64)[None, :], like=scores)
    # the label's place in a stable descending sort of its row: the scores above it, and the equal
    # ones of a lower column (as NumPy's stable argsort ranks them); NaN ranks above every number
    # (as Paddle's top_k), so a diverged model does not score every row
    own = own[:, None]
    nan, own_nan = be.pointwise("isnan", "isnan", scores), be.pointwise("isnan", "isnan", own)
    above = (scores > own) | (nan & ~own_nan)
    ahead = above | (((scores == own) | (nan & own_nan)) & (cols < label_col))
    hit = (be.reduce(ahead, "sum", 1, False) < k) & be.from_host(valid, like=scores)
    return be.asarray(be.reduce(be.astype(hit, "float32"), "mean", None, False))
