"""Parquet: columns of LoDTensors, one Arrow nested list column each, with page checksums.

:func:`write_parquet` writes a CRC-32 with every data page and a ``lodtensor``
entry in the file's key-value metadata (the lod depth, dtype and row shape of
each column); :func:`read_parquet` verifies every page's checksum and checks the
columns against that entry before any tensor exists, so a flipped bit in a
page, in the Arrow schema or in the entry is a ValueError naming the file, not
a different LoD. A streaming read holds a bounded number of batches (pages are
read as decoded, never the whole file).

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

import json
import operator
import os

import numpy as np

from ..lod import MAX_LOD_LEVELS, LoD
from ..tensor import LoDTensor
from . import _parquet_meta as meta
from ._lazy import bad_file, require
from .arrow import (
    _host_data,
    _values_array,
    check_nesting,
    from_arrow,
    host_dtype,
    list_levels,
    to_arrow,
    unwrap,
    wrap_levels,
)

__all__ = ["write_parquet", "read_parquet", "column_layouts", "PARQUET_MAX_NESTING"]

#: List levels (lod levels plus row dimensions) a column may nest: Parquet readers refuse a
#: schema deeper than 100 nodes (Arrow C++'s ``schema_depth_limit``), and each list takes two.
PARQUET_MAX_NESTING = 49

# A streaming read reads pages through a buffer of this size instead of pre-buffering whole
# column chunks: memory stays at about a record batch whatever the size of the row groups.
_STREAM_BUFFER = 1 << 20
_FEATURES = {}


def _pq(what):
    require("pyarrow", "arrow", what)
    return require("pyarrow.parquet", "arrow", what)


def _checksums_supported(pq, what, switch):
    """Raise ImportError unless pyarrow writes and verifies page checksums (pyarrow >= 15)."""
    ok = _FEATURES.get("checksums")
    if ok is None:
        import inspect  # noqa: PLC0415 - once per process

        ok = _FEATURES["checksums"] = "page_checksum_verification" in inspect.signature(
            pq.ParquetFile
        ).parameters and "write_page_checksum" in inspect.signature(pq.write_table).parameters
    if not ok:
        import pyarrow as pa  # noqa: PLC0415 - loaded by _pq

        raise ImportError(
            f"{what}: Parquet page checksums need pyarrow >= 15, found pyarrow {pa.__version__}: "
            f"pip install 'pyarrow>=15', or pass {switch} to go without (a flipped bit in a page "
            f"then loads as other values)"
        )


# -- writing ---------------------------------------------------------------------------------
def _column_array(pa, t, where, name):
    """``t`` as the Arrow column Parquet stores.

    Rows of width 0 (a 0 in the row shape) are written as one more list level
    whose ``N`` lists are all empty, over no values: pyarrow writes a
    ``fixed_size_list<item, 0>`` column but cannot read it back. The row shape
    in the ``lodtensor`` metadata restores them.
    """
    what = f"{where}: column {name!r}"
    check_nesting(t, PARQUET_MAX_NESTING, what, "Parquet readers take")
    if 0 not in t.shape()[1:]:
        return to_arrow(t, _what=what)
    # no values, but to_arrow's checks: host data (not GPU / meta), a type Arrow has (not complex)
    leaf = _values_array(pa, _host_data(t, what).reshape(-1), what)
    n = int(t.shape()[0])
    arr = pa.LargeListArray.from_buffers(
        pa.large_list(leaf.type), n, [None, pa.py_buffer(np.zeros(n + 1, np.int64))], children=[leaf]
    )
    return wrap_levels(pa, arr, t.lod.levels)


def _table(pa, columns, where):
    if not isinstance(columns, dict) or not columns:
        raise TypeError(f"{where}: columns must be a non-empty dict {{name: LoDTensor}}, got {type(columns).__name__}")
    fields, arrays, specs = [], [], {}
    for i, (name, t) in enumerate(columns.items()):
        if not isinstance(name, str):
            raise TypeError(f"{where}: column names must be strings, got {type(name).__name__} {name!r}")
        if not isinstance(t, LoDTensor):
            raise TypeError(f"{where}: column {name!r} must be a LoDTensor, got {type(t).__name__}")
        arrays.append(_column_array(pa, t, where, name))
        fields.append(pa.field(name, arrays[-1].type, metadata={meta.FIELD_ID: str(meta.MARK + i).encode()}))
        specs[name] = meta.spec(t)
    sizes = {name: len(a) for name, a in zip(columns, arrays)}
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"{where}: every column must have the same number of top-level sequences (one Parquet "
            f"row each), got {sizes}"
        )
    entry = {"format": meta.FORMAT, "version": meta.VERSION, "num_rows": len(arrays[0]), "columns": specs}
    schema = pa.schema(fields, metadata={meta.KEY: json.dumps(entry).encode()})
    return pa.Table.from_arrays(arrays, schema=schema)


def write_parquet(path, columns, **kwargs):
    """Write ``{name: LoDTensor}`` to a Parquet file, one nested list column per tensor.

    Each top-level sequence is one Parquet row, so every tensor must have the
    same ``len()``; a tensor with no lod is a plain column of its rows. The
    Arrow schema is stored too, so trailing dims (``fixed_size_list``) and
    int64 offsets come back exactly. Every data page carries a CRC-32 that
    :func:`read_parquet` verifies; the file's key-value metadata holds a
    ``lodtensor`` entry (JSON: each column's lod depth, dtype, row shape, rows
    and a CRC-32 of every level's lengths) that it checks, and each column a
    Parquet ``field_id`` (1280573440 + its position) saying that the entry
    exists. Rows of width 0 (shape ``(N, 0)``) are stored as one more list
    level of ``N`` empty lists (pyarrow cannot read back a ``fixed_size_list``
    of size 0); :func:`read_parquet` restores the shape.

    Parameters
    ----------
    path : str or os.PathLike
    columns : dict of str -> LoDTensor (host data)
    **kwargs
        Passed to ``pyarrow.parquet.write_table`` (``row_group_size``,
        ``compression``...). ``write_page_checksum`` defaults to True
        (needs pyarrow >= 15; pass False to write without checksums);
        ``store_schema=False`` is refused (the row shapes live in it).

    Raises
    ------
    TypeError
        ``columns`` is not a dict of LoDTensors.
    ValueError
        The tensors differ in ``len()``, their data is on a GPU, a column nests
        more than :data:`PARQUET_MAX_NESTING` (49) lod levels and row dimensions
        together, or ``store_schema=False``.
    ImportError
        pyarrow older than 15 (no page checksums) and ``write_page_checksum`` not False.

    Examples
    --------
    >>> import os, tempfile
    >>> import lodtensor as lt
    >>> path = os.path.join(tempfile.mkdtemp(), "w.parquet")
    >>> lt.write_parquet(path, {"x": lt.LoDTensor(np.zeros((3, 0)), [[0, 1, 3]])})
    >>> lt.read_parquet(path)["x"].shape()
    [3, 0]
    """
    pq = _pq("write_parquet()")
    import pyarrow as pa  # noqa: PLC0415 - loaded by _pq above

    where = "write_parquet()"
    if kwargs.get("store_schema", True) is not True:
        raise ValueError(
            f"{where}: store_schema must be True (the row shapes live in the Arrow schema), got "
            f"{kwargs['store_schema']!r}"
        )
    kwargs.setdefault("write_page_checksum", True)
    if kwargs["write_page_checksum"]:
        _checksums_supported(pq, where, "write_page_checksum=False")
    table = _table(pa, columns, where)
    pq.write_table(table, os.fspath(path), **kwargs)


# -- reading ---------------------------------------------------------------------------------
def _corrupt(path, err):
    return bad_file("read_parquet()", os.fspath(path), err, "Parquet")


def _width0(pa, column, spec, where):
    """The tensor of a width-0 column: its last list level holds ``N`` empty lists, the rows."""
    level, dtype, shape = spec[:3]
    if level == 0 and len(column) == 0:  # no rows at all: no list to count them with
        return LoDTensor(np.empty((0, *shape), dtype=dtype))
    levels, leaf = list_levels(unwrap(column, None, where), where, limit=MAX_LOD_LEVELS + 1)
    if len(levels) != level + 1 or len(leaf) or levels[-1][-1]:
        raise ValueError(f"{where}: a column of rows of width 0 must end in a list level of empty lists")
    data = np.empty((len(levels[-1]) - 1, *shape), dtype=dtype)
    return LoDTensor(data, LoD(levels[:-1], num_rows=data.shape[0])) if level else LoDTensor(data)


class _Reader:
    """Turns record batches of a file into LoDTensors, checking each against the file's metadata.

    Across a stream it adds up rows and continues each level's lengths CRC, so
    that :meth:`finish` can compare the totals with the metadata.
    """

    def __init__(self, pa, path, names, specs):
        self.pa, self.path, self.names = pa, path, names
        self.num_rows, self.specs = specs if specs is not None else (None, None)
        self.seen = 0
        self.rows = dict.fromkeys(names, 0)
        self.crcs = dict.fromkeys(names)

    def _fail(self, name, message):
        where = f"read_parquet(): {os.fspath(self.path)!s}" + ("" if name is None else f", column {name!r}")
        return ValueError(f"{where}: {message}")

    def tensors(self, table_or_batch):
        out = {}
        for name in self.names:
            column = table_or_batch.column(name)
            spec = None if self.specs is None else self.specs[name]
            try:
                if spec is not None and 0 in spec[2]:
                    t = _width0(self.pa, column, spec, "from_arrow()")
                else:
                    t = from_arrow(column)
            except (ValueError, TypeError) as err:  # the file's content: a ValueError whatever the cause
                raise self._fail(name, err) from err
            if spec is not None:
                got = (t.lod_level, host_dtype(t), tuple(t.shape()[1:]))
                if got != spec[:3]:
                    raise self._fail(
                        name,
                        f"it holds {got[0]} lod level(s) of {got[1]} rows of shape {got[2]}, the file's lodtensor "
                        f"metadata says {spec[0]} of {spec[1]} rows of shape {spec[2]}",
                    )
                self.rows[name] += int(t.shape()[0])
                self.crcs[name] = meta.lengths_crc(t, self.crcs[name])
            out[name] = t
        self.seen += table_or_batch.num_rows
        return out

    def finish(self):
        """Compare what was read with the metadata's rows and lod CRCs (ValueError naming the column)."""
        if self.specs is None:
            return
        if self.seen != self.num_rows:
            raise self._fail(None, f"read {self.seen} rows, its lodtensor metadata says {self.num_rows}")
        for name in self.names:
            level, _, _, rows, crcs = self.specs[name]
            # no record batch at all (a file of no document): every level's CRC is that of no length
            if self.rows[name] != rows or (self.crcs[name] or [0] * level) != crcs:
                raise self._fail(
                    name, "its lod or rows do not match the checksums in the file's lodtensor metadata (the file "
                    "was altered)"
                )


def read_parquet(path, columns=None, batch_size=None, *, verify_checksums=True):
    """Read Parquet columns of nested lists as LoDTensors, or stream them batch by batch.

    Each column becomes :func:`from_arrow` of it: list levels are lod levels
    (int32 offsets widened), a non-list column gives ``lod_level`` 0. Every
    level goes through the LoD validation gate. Every data page's CRC-32 is
    verified where the file has one (:func:`write_parquet` writes them; pages
    without one, as other writers may make, are read unchecked). A file
    :func:`write_parquet` wrote is checked against its ``lodtensor`` metadata:
    each column's lod depth, dtype and row shape and the row counts up front,
    from the footer; every tensor read; and the rows and lod lengths CRCs once
    all are read (for a stream: after the last batch, which then raises
    instead of ending).

    Parameters
    ----------
    path : str or os.PathLike
    columns : list of str, optional
        The columns to read (default all).
    batch_size : int, optional
        Stream: an iterator of dicts, one per record batch of at most
        ``batch_size`` top-level sequences. Pages are read as they are decoded
        through a 1 MiB buffer (whole row groups are never buffered), so memory
        holds about one record batch, whatever the size of the file or of its
        row groups.
    verify_checksums : bool
        Verify page checksums (default True; needs pyarrow >= 15).

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
        Not a Parquet file, a truncated or corrupted one (a page whose checksum
        fails, a footer that disagrees with the ``lodtensor`` metadata), a
        column with nulls, invalid offsets or a type that is not lists of
        numbers; the message names the file and the column.
    KeyError
        A requested column is not in the file.
    ImportError
        pyarrow older than 15 with ``verify_checksums=True``.

    Examples
    --------
    >>> import os, tempfile
    >>> import lodtensor as lt
    >>> path = os.path.join(tempfile.mkdtemp(), "r.parquet")
    >>> lt.write_parquet(path, {"x": lt.LoDTensor(np.arange(4.0), [[0, 1, 4]])})
    >>> [b["x"].tolist() for b in lt.read_parquet(path, batch_size=1)]
    [[[0.0]], [[1.0, 2.0, 3.0]]]
    """
    pq = _pq("read_parquet()")
    import pyarrow as pa  # noqa: PLC0415 - loaded by _pq above

    if batch_size is not None:
        try:
            if isinstance(batch_size, (bool, np.bool_)):
                raise TypeError
            batch_size = operator.index(batch_size)  # a NumPy integer too, as pyarrow takes it
        except TypeError:
            raise ValueError(f"read_parquet(): batch_size must be a positive int, got {batch_size!r}") from None
        if batch_size < 1:
            raise ValueError(f"read_parquet(): batch_size must be a positive int, got {batch_size!r}")
    if columns is not None:
        columns = _names(columns, "read_parquet()")
    options = {}
    if verify_checksums:
        _checksums_supported(pq, "read_parquet()", "verify_checksums=False")
        options["page_checksum_verification"] = True
    if batch_size is not None:
        options.update(pre_buffer=False, buffer_size=_STREAM_BUFFER)
    try:
        pf = pq.ParquetFile(os.fspath(path), **options)
        names = pf.schema_arrow.names
        specs = meta.file_specs(pf)
    except (pa.ArrowException, OSError, UnicodeError, ValueError) as err:  # a corrupted footer can fail anywhere
        raise _corrupt(path, err) from None
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise KeyError(f"read_parquet(): {os.fspath(path)!s} has no column(s) {missing}; it has {names}")
        names = columns
    twice = sorted({c for c in names if pf.schema_arrow.get_all_field_indices(c)[1:]})
    if twice:
        raise ValueError(f"read_parquet(): {os.fspath(path)!s} has several columns named {twice}; columns are read "
                         f"by name")
    if specs is not None:
        try:
            meta.check_schema(pa, pf, names, specs)
        except ValueError as err:
            raise _corrupt(path, err) from None
    reader = _Reader(pa, path, names, specs)
    if batch_size is None:
        try:
            table = pf.read(columns=names)
        except (pa.ArrowException, OSError, UnicodeError) as err:
            raise _corrupt(path, err) from None
        out = reader.tensors(table)
        reader.finish()
        return out
    return _batches(pf, batch_size, path, pa, reader)


def column_layouts(path, columns, *, where="column_layouts()"):
    """``{column: (lod_level, dtype, row_shape)}`` of a Parquet file, from its footer alone (no page read).

    A file :func:`write_parquet` wrote is described by its ``lodtensor``
    metadata (checked against its schema first); another file by its Arrow
    schema. What :func:`read_parquet` of the file will return, without reading it.

    ``where`` names the caller in messages.

    Raises
    ------
    ValueError
        A corrupt footer or metadata, or a column that is not lists of numbers; names the file.
    KeyError
        A column the file does not have.

    Examples
    --------
    >>> import os, tempfile
    >>> import lodtensor as lt
    >>> path = os.path.join(tempfile.mkdtemp(), "l.parquet")
    >>> lt.write_parquet(path, {"x": lt.LoDTensor(np.zeros((3, 2), np.float32), [[0, 1, 3]])})
    >>> column_layouts(path, ["x"])
    {'x': (1, dtype('float32'), (2,))}
    """
    columns = _names(columns, where)
    pq = _pq(where)
    import pyarrow as pa  # noqa: PLC0415 - loaded by _pq above

    name = os.fspath(path)
    try:
        pf = pq.ParquetFile(name)
        specs = meta.file_specs(pf)
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError, UnicodeError, ValueError) as err:
        raise bad_file(where, name, err, "Parquet") from None
    missing = [c for c in columns if c not in names]
    if missing:
        raise KeyError(f"{where}: {name} has no column(s) {missing}; it has {names}")
    try:
        if specs is not None:
            meta.check_schema(pa, pf, columns, specs)
    except (pa.ArrowException, ValueError) as err:
        raise bad_file(where, name, err, "Parquet") from None
    try:
        return meta.layout(pa, pf, columns, specs)
    except ValueError as err:  # a valid file, with a column lodtensor cannot read
        raise ValueError(f"{where}: {name}: {err}") from None


def _names(columns, where):
    """``columns`` (any iterable of str, read once) as a list; TypeError otherwise."""
    listed = None if isinstance(columns, (str, bytes, dict)) or not hasattr(columns, "__iter__") else list(columns)
    if listed is None or not all(isinstance(c, str) for c in listed):  # ("x": 'x' of chars)
        raise TypeError(f"{where}: columns must be a list of column names, got {columns!r}")
    return listed


def _batches(pf, batch_size, path, pa, reader):
    it = pf.iter_batches(batch_size=batch_size, columns=reader.names)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            reader.finish()
            return
        except (pa.ArrowException, OSError, UnicodeError) as err:  # a page that fails its checksum, or to decode
            raise _corrupt(path, err) from None
        yield reader.tensors(batch)
