"""``sequence_topk_avg_pooling``: Paddle's operator (``fluid.contrib`` in Paddle 1.x; no Python
layer in Paddle 2.6) over a batch of ``channel x rows x cols`` matrices.

Which values are the top ``k`` of a row is decided on the host (one stable sort of all rows
at once, padded to the widest); the values are then gathered from the input on its own
backend, so a torch input keeps its gradient (to the chosen values, as Paddle's backward).
"""

import operator

import numpy as np

from ..backend import dtype_kind
from ..lod import offsets_to_segment_ids
from ..ops._common import require_lod, wrap
from ._host import host, like

__all__ = ["sequence_topk_avg_pooling"]


def _topks(topks, where):
    """``topks`` as a list of Python ints; a string, floats or bools are refused, not converted
    (``int(1.5)`` would pool the top 1, ``"12"`` the tops 1 and 2)."""
    if isinstance(topks, (str, bytes)) or not hasattr(topks, "__iter__"):
        raise TypeError(f"{where}: topks must be a list of positive integers, got {type(topks).__name__} {topks!r}")
    items = list(topks)
    try:
        if any(isinstance(k, (bool, np.bool_)) for k in items):
            raise TypeError
        values = [operator.index(k) for k in items]
    except TypeError:
        raise TypeError(f"{where}: topks must be a list of positive integers, got {topks!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{where}: topks must be a non-empty list of positive integers, got {topks!r}")
    return values


def sequence_topk_avg_pooling(input, row, col, topks, channel_num):  # noqa: A002 - Paddle's name
    """The mean of the top ``k`` values of every matrix row, for each ``k`` in ``topks``.

    Sequence ``i`` of ``input`` (one lod level) holds ``channel_num`` matrices of
    ``rows_i x cols_i`` values, row-major, channel after channel; ``rows_i`` and ``cols_i``
    are the lengths of sequence ``i`` of ``row``'s and ``col``'s lods (their data is not
    read). For matrix row ``r`` of channel ``c`` the result row ``r`` of sequence ``i``
    holds, at column ``c * len(topks) + t``, the sum of the ``topks[t]`` largest values of
    that matrix row divided by ``topks[t]`` (a row shorter than ``k`` adds zeros).
    The result is ``[sum(rows), channel_num * len(topks)]`` with ``row``'s lod; its dtype
    is ``input``'s (float64 for integer or bool input, on every backend). Ties go to the
    earlier column, as in Paddle's kernel.

    Parameters
    ----------
    input : lodtensor.LoDTensor, shape ``[N]`` or ``[N, 1]``, one lod level
    row, col : lodtensor.LoDTensor
        Their top lod level gives ``rows_i`` and ``cols_i``.
    topks : list of int
        Each >= 1 (Paddle needs them ascending; any order is fine here).
    channel_num : int

    Raises
    ------
    LoDError, ValueError
        If a sequence of ``input`` does not hold ``channel_num * rows_i * cols_i`` values,
        or the three do not have the same number of sequences.

    See Also
    --------
    Paddle's ``sequence_topk_avg_pooling`` operator (``fluid.contrib.sequence_topk_avg_pooling``).

    Notes
    -----
    Paddle's kernel never picks a value at or below -1e7 (its search starts there), and
    fails when a whole matrix row lies below it; lodtensor takes the true top ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> x = lt.LoDTensor(np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.0]), [[0, 6]])
    >>> rows = lt.LoDTensor(np.zeros(2), [[0, 2]])
    >>> cols = lt.LoDTensor(np.zeros(3), [[0, 3]])
    >>> out = sequence_topk_avg_pooling(x, rows, cols, topks=[1, 2], channel_num=1)
    >>> out.lod(), out.data.tolist()
    ([[0, 2]], [[3.0, 2.5], [5.0, 4.5]])
    """
    where = "sequence_topk_avg_pooling()"
    input = require_lod(input, where)  # noqa: A001 - Paddle's name
    row = require_lod(row, where, "row")
    col = require_lod(col, where, "col")
    ks = _topks(topks, where)
    if isinstance(channel_num, bool) or not isinstance(channel_num, (int, np.integer)) or channel_num < 1:
        raise ValueError(f"{where}: channel_num must be a positive integer, got {channel_num!r}")
    channels = int(channel_num)
    data = input.data
    be = input.backend
    if dtype_kind(data.dtype) in "biu":  # means of integers: float64 on every backend, as sequence_pool's average
        data = be.astype(data, "float64")
    if data.ndim == 2 and data.shape[1] != 1 or data.ndim > 2:
        raise ValueError(f"{where}: input must have shape [N] or [N, 1], got {list(data.shape)}")
    in_off, row_off, col_off = (t._lod.absolute_offsets(0) for t in (input, row, col))
    if not in_off.size == row_off.size == col_off.size:
        raise ValueError(
            f"{where}: input, row and col must hold the same number of sequences, got "
            f"{in_off.size - 1}, {row_off.size - 1} and {col_off.size - 1}"
        )
    rows, cols = np.diff(row_off), np.diff(col_off)
    bad = np.flatnonzero(np.diff(in_off) != channels * rows * cols)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{where}: sequence {i} of input holds {int(in_off[i + 1] - in_off[i])} values, expected "
            f"channel_num * rows * cols = {channels} * {int(rows[i])} * {int(cols[i])}"
        )
    total_rows = int(row_off[-1])
    # one line per (result row g, channel c), g-major: the layout of the result
    seq = offsets_to_segment_ids(row_off)  # sequence of every result row
    r = np.arange(total_rows, dtype=np.int64) - row_off[:-1][seq]
    start = (in_off[:-1][seq] + r * cols[seq])[:, None] + np.arange(channels)[None, :] * (rows * cols)[seq][:, None]
    start, length = start.reshape(-1), np.repeat(cols[seq], channels)
    kmax = max(ks)
    width = max(int(length.max(initial=0)), kmax)
    position = np.arange(width, dtype=np.int64)[None, :]
    valid = position < length[:, None]
    index = np.where(valid, start[:, None] + position, 0)
    values = host(data).reshape(-1)
    scores = np.full(index.shape, -np.inf)
    scores[valid] = values[index[valid]]
    picked = np.argsort(-scores, axis=1, kind="stable")[:, :kmax]  # ties: the earlier column first
    chosen = np.take_along_axis(valid, picked, axis=1).astype(values.dtype)
    gathered = be.gather(data.reshape(-1), like(np.take_along_axis(index, picked, axis=1).reshape(-1), data))
    top = gathered.reshape(-1, kmax) * like(chosen, data)
    means = be.concat_axis([(top[:, :k].sum(1) / k).reshape(-1, 1) for k in ks], 1)
    return wrap(means.reshape(total_rows, channels * len(ks)), [row_off])
