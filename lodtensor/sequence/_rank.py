"""Paddle's rank-table family and ``LoDTensorArray``: the pieces of a ``DynamicRNN`` loop.

``lod_rank_table`` sorts the sequences of one lod level by length (longest
first, stable); ``lod_tensor_to_array`` cuts a LoDTensor into time steps in
that order (step ``t`` holds item ``t`` of every sequence longer than ``t``,
so the batch shrinks as sequences end) and ``array_to_lod_tensor`` puts the
steps back. Data move with the backend's ``gather``/``concat``, so torch
inputs keep autograd.
"""

import copy

import numpy as np

from ..backend import backend_of
from ..lod import LoD, concat_ranges, lengths_to_offsets
from ..ops._common import int_arg, snapshot
from ..tensor import LoDTensor

__all__ = [
    "LoDTensorArray",
    "LoDRankTable",
    "lod_rank_table",
    "max_sequence_len",
    "lod_tensor_to_array",
    "array_to_lod_tensor",
    "reorder_lod_tensor_by_rank",
]


class LoDTensorArray(list):
    """A list of LoDTensors with Paddle's ``core.LoDTensorArray`` methods (``append``,
    ``len``, indexing); what ``lod_tensor_to_array`` returns and ``beam_search_decode`` takes.

    >>> import numpy as np
    >>> arr = LoDTensorArray()
    >>> arr.append(LoDTensor(np.zeros((2, 1))))
    >>> len(arr), arr[0].shape()
    (1, [2, 1])
    """

    __slots__ = ()

    def append(self, tensor):
        """Add ``tensor`` (a LoDTensor; arrays are wrapped) at the end. As in Paddle, the element shares
        ``tensor``'s data but has a lod of its own: a later ``tensor.set_lod(...)`` leaves the element as it
        was appended, and so does ``set()`` of new data (which in Paddle writes into the shared buffer
        where the new data fits it: docs/porting.md).

        >>> import numpy as np
        >>> arr = LoDTensorArray()
        >>> arr.append(np.zeros((2, 1)))  # an array is wrapped as a LoDTensor without lod
        >>> type(arr[0]).__name__, arr[0].shape()
        ('LoDTensor', [2, 1])
        >>> t = LoDTensor(np.zeros((2, 1)), [[0, 2]])
        >>> arr.append(t)
        >>> t.set_lod([[0, 1, 2]])
        >>> arr[1].lod(), arr[1].data is t.data
        ([[0, 2]], True)
        """
        super().append(_stored(tensor, "LoDTensorArray.append()"))

    # list's other writers check every item as append does, all before the first is stored (Paddle's
    # pybind array refuses a non-tensor item too): a bad item leaves the array as it was
    def extend(self, tensors):
        """Add each of ``tensors`` at the end (every one checked as :meth:`append` checks, first).

        >>> import numpy as np
        >>> arr = LoDTensorArray()
        >>> arr.extend([np.zeros((2, 1)), LoDTensor(np.ones((1, 1)))])
        >>> len(arr), arr[1].shape()
        (2, [1, 1])
        """
        super().extend(_stored_all(tensors, "LoDTensorArray.extend()"))

    def insert(self, index, tensor):
        """Put ``tensor`` (checked as :meth:`append` checks) before position ``index``.

        >>> import numpy as np
        >>> arr = LoDTensorArray()
        >>> arr.append(np.zeros((2, 1)))
        >>> arr.insert(0, np.ones((3, 1)))
        >>> [t.shape() for t in arr]
        [[3, 1], [2, 1]]
        """
        super().insert(index, _stored(tensor, "LoDTensorArray.insert()"))

    def __setitem__(self, index, value):
        where = "LoDTensorArray[...] = value"
        value = _stored_all(value, where) if isinstance(index, slice) else _stored(value, where)
        super().__setitem__(index, value)

    def __iadd__(self, tensors):
        self.extend(tensors)
        return self

    def _move_to_list(self):
        """Paddle's name: the elements as a plain list, moved out (the array is left empty, as Paddle's).

        >>> import numpy as np
        >>> arr = LoDTensorArray()
        >>> arr.append(np.zeros((2, 1)))
        >>> len(arr._move_to_list()), len(arr)
        (1, 0)
        """
        out = list(self)
        self.clear()
        return out

    def __repr__(self):
        return f"LoDTensorArray({list.__repr__(self)})"


def _as_tensor(value, where):
    if isinstance(value, LoDTensor):
        return value
    if value is None:  # (LoDTensor(None) is the empty tensor: Paddle's append refuses None)
        raise TypeError(f"{where}: expected a LoDTensor or an array, got None")
    try:
        return LoDTensor(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where}: expected a LoDTensor or an array, got {type(value).__name__}: {err}") from None


def _stored(value, where):
    """What an array stores for ``value``: a LoDTensor that shares its data and holds its lod as it is now
    (Paddle's ``ShareDataWith`` + ``set_lod``), so a later ``set()`` or ``set_lod()`` on ``value``, or on
    the element, leaves the other as it was; an array is wrapped."""
    return copy.copy(value) if isinstance(value, LoDTensor) else _as_tensor(value, where)


def _stored_all(values, where):
    return [_stored(t, where) for t in _as_tensors(values, where)]


def _as_tensors(values, where):
    if isinstance(values, (str, bytes, LoDTensor)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{where}: expected an iterable of LoDTensors or arrays, got {type(values).__name__}")
    return [_as_tensor(v, where) for v in values]


class LoDRankTable:
    """The sequences of one lod level sorted by length, longest first (ties keep their order).

    ``items()`` gives ``[(index, length), ...]`` as Paddle's ``core.LodRankTable``;
    ``coarse_lod()`` the lod levels above the ranked one.

    >>> import numpy as np
    >>> x = LoDTensor(np.arange(6.0), [[0, 2, 3], [0, 1, 4, 6]])
    >>> table = lod_rank_table(x, level=1)
    >>> isinstance(table, LoDRankTable), len(table), table
    (True, 3, LoDRankTable(level=1, items=[(1, 3), (2, 2), (0, 1)]))
    """

    __slots__ = ("_index", "_length", "_coarse", "level")

    def __init__(self, index, length, coarse, level):
        self._index, self._length, self._coarse, self.level = index, length, coarse, level

    def items(self):
        """``[(index, length), ...]`` in rank order.

        >>> import numpy as np
        >>> lod_rank_table(LoDTensor(np.arange(6.0), [[0, 1, 4, 6]])).items()
        [(1, 3), (2, 2), (0, 1)]
        """
        return list(zip(self._index.tolist(), self._length.tolist()))

    def coarse_lod(self):
        """The lod levels above the ranked level (offsets lists).

        >>> import numpy as np
        >>> lod_rank_table(LoDTensor(np.arange(6.0), [[0, 2, 3], [0, 1, 4, 6]]), level=1).coarse_lod()
        [[0, 2, 3]]
        """
        return [level.tolist() for level in self._coarse]

    def __len__(self):
        return int(self._index.size)

    def __repr__(self):
        return f"LoDRankTable(level={self.level}, items={self.items()})"


def _require_table(table, where):
    if not isinstance(table, LoDRankTable):
        raise TypeError(f"{where}: rank_table must be a LoDRankTable from lod_rank_table(), got {type(table).__name__}")
    return table


def _require_input(x, where):
    """Raise unless ``x`` is a LoDTensor holding data that fits its lod."""
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: x must be a LoDTensor, got {type(x).__name__}")
    x._require_data(where)
    x._check_fits(where)


def lod_rank_table(x, level=0):
    """Rank the sequences of lod ``level`` of ``x`` by length, longest first.

    A tensor without lod ranks its rows (each of length 1), as Paddle does for
    the output of ``sequence_pool``.

    >>> import numpy as np
    >>> x = LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 1, 4, 6]])
    >>> lod_rank_table(x).items()
    [(1, 3), (2, 2), (0, 1)]
    """
    where = "lod_rank_table()"
    if not isinstance(x, LoDTensor):
        raise TypeError(f"{where}: x must be a LoDTensor, got {type(x).__name__}")
    x = snapshot(x)  # one data/lod state: another thread's set_lod() must not mix two lods' levels
    x._require_data(where)
    x._check_fits(where)
    level = int_arg(level, where, "level")
    if x.lod_level == 0:
        length = np.ones(x.num_rows, dtype=np.int64)
        return LoDRankTable(np.arange(x.num_rows, dtype=np.int64), length, (), 0)
    if not 0 <= level < x.lod_level:
        raise IndexError(
            f"{where}: level {level} is out of range for lod_level {x.lod_level}; expected 0 <= level < {x.lod_level}"
        )
    lengths = x.lengths(level)
    order = np.argsort(-lengths, kind="stable")
    coarse = tuple(x.offsets(k) for k in range(level))
    return LoDRankTable(order.astype(np.int64), lengths[order], coarse, level)


def max_sequence_len(rank_table):
    """The longest length in the table, an int64 array of shape ``[1]`` (Paddle's output).

    >>> import numpy as np
    >>> max_sequence_len(lod_rank_table(LoDTensor(np.zeros(5), [[0, 2, 5]]))).tolist()
    [3]
    """
    table = _require_table(rank_table, "max_sequence_len()")
    return np.array([int(table._length[0]) if len(table) else 0], dtype=np.int64)


def _items_lod(x, level):
    """LoD whose top level are the items of ``level`` of ``x`` (their sub-trees below)."""
    below = [x.offsets(k) for k in range(level + 1, x.lod_level)]
    return LoD(below, num_rows=x.num_rows) if below else None


def _gather_items(data, sub_lod, items):
    """Rows and lod of the items ``items`` (top-level of ``sub_lod``; rows when None)."""
    be = backend_of(data)
    if sub_lod is None:
        return be.gather(data, be.asarray(items)), []
    lod, rows = sub_lod.select(items)
    return be.gather(data, be.asarray(rows)), list(lod.levels)


def lod_tensor_to_array(x, table):
    """Cut ``x`` into time steps along the ranked level: step ``t`` holds item ``t`` of every
    sequence longer than ``t``, in rank order (the batch shrinks as sequences end).

    Each step keeps the lod below the ranked level.

    >>> import numpy as np
    >>> x = LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 1, 4, 6]])
    >>> arr = lod_tensor_to_array(x, lod_rank_table(x))
    >>> [a.data.ravel().tolist() for a in arr]
    [[1.0, 4.0, 0.0], [2.0, 5.0], [3.0]]
    """
    where = "lod_tensor_to_array()"
    table = _require_table(table, where)
    _require_input(x, where)
    level = table.level
    if x.lod_level == 0:
        starts = np.arange(x.num_rows, dtype=np.int64)
    else:
        if level >= x.lod_level:
            raise ValueError(f"{where}: the table ranks level {level} but x has lod_level {x.lod_level}")
        starts = x.offsets(level)[:-1]
        if starts.size != len(table) or not np.array_equal(x.lengths(level)[table._index], table._length):
            raise ValueError(
                f"{where}: x's lod level {level} (lengths {x.lengths(level).tolist()[:8]}) do not match the table"
            )
    sub_lod = _items_lod(x, level) if x.lod_level else None
    out = LoDTensorArray()
    for t in range(int(table._length[0]) if len(table) else 0):
        active = table._index[table._length > t]
        data, levels = _gather_items(x.data, sub_lod, starts[active] + t)
        out.append(LoDTensor(data, levels or None))
    return out


def array_to_lod_tensor(x, table):
    """Inverse of :func:`lod_tensor_to_array`: the steps back in the original sequence order,
    with the table's coarse lod above, the sequence lengths, and the steps' lod below.

    >>> import numpy as np
    >>> x = LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 1, 4, 6]])
    >>> table = lod_rank_table(x)
    >>> back = array_to_lod_tensor(lod_tensor_to_array(x, table), table)
    >>> back.lod(), back.data.ravel().tolist()
    ([[0, 1, 4, 6]], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    """
    where = "array_to_lod_tensor()"
    table = _require_table(table, where)
    steps = [_as_tensor(t, where) for t in x]
    if not steps:
        raise ValueError(f"{where}: x is an empty LoDTensorArray")
    depth = steps[0].lod_level
    for t, step in enumerate(steps):
        step._require_data(where)
        if step.lod_level != depth:
            raise ValueError(f"{where}: x[{t}] has lod_level {step.lod_level}, x[0] has {depth}")
    counts = np.array([len(s) for s in steps], dtype=np.int64)
    lengths = table._length
    expected = (lengths[None, :] > np.arange(counts.size)[:, None]).sum(axis=1)
    if int(lengths.max(initial=0)) > counts.size or not np.array_equal(counts, expected[: counts.size]):
        raise ValueError(f"{where}: x has {counts.tolist()} items per step; the rank table needs {expected.tolist()}")
    be = backend_of(steps[0].data)
    data = be.concat([s.data for s in steps]) if len(steps) > 1 else steps[0].data
    levels = []
    if depth:
        for k in range(depth):
            parts, shift = [np.zeros(1, np.int64)], 0
            for s in steps:
                offs = s.offsets(k)
                parts.append(offs[1:] + shift)
                shift += int(offs[-1])
            levels.append(np.concatenate(parts))
    sub_lod = LoD(levels, num_rows=int(data.shape[0])) if levels else None
    # item (sequence i, step t) sits at base[t] + rank position of i in step t
    base = lengths_to_offsets(counts)[:-1]
    order = np.argsort(table._index, kind="stable")  # rank position of each original sequence
    seq_len = lengths[order]
    steps_of, _ = concat_ranges(np.zeros_like(seq_len), seq_len)
    rank_pos = np.repeat(order, seq_len)
    items = base[steps_of] + rank_pos
    gathered, below = _gather_items(data, sub_lod, items)
    top = [np.asarray(level) for level in table._coarse] + [lengths_to_offsets(seq_len)]
    return LoDTensor(gathered, top + list(below))


def reorder_lod_tensor_by_rank(x, rank_table):
    """The top-level sequences of ``x`` (its rows when it has no lod) in the table's order.

    >>> import numpy as np
    >>> x = LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 1, 4, 6]])
    >>> out = reorder_lod_tensor_by_rank(x, lod_rank_table(x))
    >>> out.lod(), out.data.ravel().tolist()
    ([[0, 3, 5, 6]], [1.0, 2.0, 3.0, 4.0, 5.0, 0.0])
    """
    where = "reorder_lod_tensor_by_rank()"
    table = _require_table(rank_table, where)
    _require_input(x, where)
    n = len(x) if x.lod_level else x.num_rows
    if n != len(table):
        raise ValueError(f"{where}: x has {n} sequences but the rank table has {len(table)} items")
    sub_lod = x._lod if x.lod_level else None
    data, levels = _gather_items(x.data, sub_lod, table._index)
    return LoDTensor(data, levels or None)
