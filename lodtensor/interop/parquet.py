"""Parquet: columns of LoDTensors, one Arrow nested list column each.

>>> import os, tempfile
>>> import numpy as np
>>> import lodtensor as lt
>>> path = os.path.join(tempfile.mkdtemp(), "corpus.parquet")
>>> words = lt.LoDTensor(np.arange(6), [[0, 2, 3], [0, 2, 2, 6]])
>>> lt.write_parquet(path, {"words": words, "label": lt.LoDTensor(np.array([1, 0]))})
>>> cols = lt.read_parquet(path)
>>> cols["words"].lod(), cols["label"].tolist()
([[0, 2, 3], [0, 2, 2, 6]], [1, 0])
>>> [b["words"].lod() for b in lt.read_parquet(path, columns=["words"], batch_size=1)]
[[[0, 2], [0, 2, 2]], [[0, 1], [0, 4]]]
"""

import os

from ..tensor import LoDTensor
from ._lazy import bad_file, require
from .arrow import from_arrow, to_arrow

__all__ = ["write_parquet", "read_parquet"]


def _pq(what):
    require("pyarrow", "arrow", what)
    return require("pyarrow.parquet", "arrow", what)


def _table(pa, columns, where):
    if not isinstance(columns, dict) or not columns:
        raise TypeError(f"{where}: columns must be a non-empty dict {{name: LoDTensor}}, got {type(columns).__name__}")
    arrays = {}
    for name, t in columns.items():
        if not isinstance(name, str):
            raise TypeError(f"{where}: column names must be strings, got {type(name).__name__} {name!r}")
        if not isinstance(t, LoDTensor):
            raise TypeError(f"{where}: column {name!r} must be a LoDTensor, got {type(t).__name__}")
        arrays[name] = to_arrow(t)
    sizes = {name: len(a) for name, a in arrays.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"{where}: every column must have the same number of top-level sequences (one Parquet "
            f"row each), got {sizes}"
        )
    return pa.table(arrays)


def write_parquet(path, columns, **kwargs):
    """Write ``{name: LoDTensor}`` to a Parquet file, one nested list column per tensor.

    Each top-level sequence is one Parquet row, so every tensor must have the
    same ``len()``; a tensor with no lod is a plain column of its rows. The
    Arrow schema is stored too, so trailing dims (``fixed_size_list``) and
    int64 offsets come back exactly.

    Parameters
    ----------
    path : str or os.PathLike
    columns : dict of str -> LoDTensor (host data)
    **kwargs
        Passed to ``pyarrow.parquet.write_table`` (``row_group_size``,
        ``compression``...).

    Raises
    ------
    TypeError
        ``columns`` is not a dict of LoDTensors.
    ValueError
        The tensors differ in ``len()``, or their data is on a GPU.
    """
    pq = _pq("write_parquet()")
    import pyarrow as pa  # noqa: PLC0415 - loaded by _pq above

    table = _table(pa, columns, "write_parquet()")
    pq.write_table(table, os.fspath(path), **kwargs)


def _column_tensors(table_or_batch, names, path):
    out = {}
    for name in names:
        try:
            out[name] = from_arrow(table_or_batch.column(name))
        except (ValueError, TypeError) as err:  # the file's content: a ValueError whatever the cause
            raise ValueError(f"read_parquet(): {os.fspath(path)!s}, column {name!r}: {err}") from err
    return out


def _corrupt(path, err):
    return bad_file("read_parquet()", os.fspath(path), err, "Parquet")


def read_parquet(path, columns=None, batch_size=None):
    """Read Parquet columns of nested lists as LoDTensors, or stream them batch by batch.

    Each column becomes :func:`from_arrow` of it: list levels are lod levels
    (int32 offsets widened), a non-list column gives ``lod_level`` 0. Every
    level goes through the LoD validation gate.

    Parameters
    ----------
    path : str or os.PathLike
    columns : list of str, optional
        The columns to read (default all).
    batch_size : int, optional
        Stream: an iterator of dicts, one per record batch of at most
        ``batch_size`` top-level sequences. Memory is bounded by one batch
        (and one row group being decoded), not by the file.

    Returns
    -------
    dict of str -> LoDTensor, or an iterator of such dicts when ``batch_size`` is given.
        Without ``batch_size`` a column spread over several row groups is joined
        into one buffer (one copy); a single row group is shared as decoded.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not a Parquet file, a truncated or corrupted one, a column with nulls,
        invalid offsets or a type that is not lists of numbers; the message
        names the file and the column.
    KeyError
        A requested column is not in the file.
    """
    pq = _pq("read_parquet()")
    import pyarrow as pa  # noqa: PLC0415 - loaded by _pq above

    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"read_parquet(): batch_size must be a positive int, got {batch_size!r}")
    if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
        raise TypeError(f"read_parquet(): columns must be a list of column names, got {columns!r}")
    try:
        pf = pq.ParquetFile(os.fspath(path))
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError, UnicodeError) as err:  # a corrupted schema can fail to decode
        raise _corrupt(path, err) from None
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise KeyError(f"read_parquet(): {os.fspath(path)!s} has no column(s) {missing}; it has {names}")
        names = list(columns)
    if batch_size is None:
        try:
            table = pf.read(columns=names)
        except (pa.ArrowException, OSError, UnicodeError) as err:  # a corrupted schema can fail to decode
            raise _corrupt(path, err) from None
        return _column_tensors(table, names, path)
    return _batches(pf, names, batch_size, path, pa)


def _batches(pf, names, batch_size, path, pa):
    it = pf.iter_batches(batch_size=batch_size, columns=names)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (pa.ArrowException, OSError, UnicodeError) as err:  # a corrupted schema can fail to decode
            raise _corrupt(path, err) from None
        yield _column_tensors(batch, names, path)
