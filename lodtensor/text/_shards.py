"""The files a ParquetCorpus reads: finding them, and checking that they agree on every column's layout."""

import os

import numpy as np

__all__ = ["files_of", "layouts", "check_layout"]


def files_of(path, name):
    """The Parquet files under ``path`` (a file, a directory searched recursively in sorted order, or a list)."""
    if isinstance(path, (str, os.PathLike)):
        path = os.fspath(path)
        if os.path.isdir(path):
            found = sorted(
                os.path.join(root, f) for root, _, names in os.walk(path) for f in names if f.endswith(".parquet")
            )
            if not found:
                raise ValueError(f"{name}: no *.parquet file under the directory {path!r}")
            return found
        if not os.path.exists(path):
            raise FileNotFoundError(f"{name}: no such file or directory: {path!r}")
        return [path]
    try:
        files = [os.fspath(p) for p in path]
    except TypeError:
        raise TypeError(f"{name}: path must be a file, a directory or a list of files, got {path!r}") from None
    if not files:
        raise ValueError(f"{name}: path is an empty list; give at least one Parquet file")
    for f in files:
        if not os.path.isfile(f):
            raise FileNotFoundError(f"{name}: no such file: {f!r}")
    return files


def _describe(layout):
    level, dtype, shape = layout
    return f"{level} lod level(s) of {dtype} rows of shape {shape}"


def layouts(files, columns, name):
    """``{column: (lod_level, dtype, row_shape)}`` that every file agrees on, from the footers (no data read).

    Raises ValueError naming the first file whose layout differs from the
    first file's, or whose footer is corrupt; KeyError for a missing column.
    """
    from ..interop.parquet import column_layouts

    first = None
    for path in files:
        got = column_layouts(path, columns, where=name)
        if first is None:
            first = (path, got)
            for column, layout in got.items():
                if column == columns[0] and layout[0] == 0:
                    raise ValueError(
                        f"{name}: column {column!r} of {path!s} is not a list column (lod_level 0); "
                        f"documents must be nested lists"
                    )
            continue
        for column in columns:
            if got[column] != first[1][column]:
                raise ValueError(
                    f"{name}: shard {path!s} has column {column!r} of {_describe(got[column])}, but shard "
                    f"{first[0]!s} has {_describe(first[1][column])}: every shard must agree on the lod depth, "
                    f"dtype and row shape"
                )
    return first[1]


def check_layout(record, layout, path):
    """Refuse a record batch whose columns are not laid out as the corpus's (a file changed since it was built)."""
    for column, want in layout.items():
        t = record[column]
        got = (t.lod_level, np.dtype(t.dtype), tuple(t.shape()[1:]))
        if got != want:
            raise ValueError(
                f"ParquetCorpus: {path!s} now holds column {column!r} as {_describe(got)}, but the corpus was "
                f"built over {_describe(want)}: every shard must agree on the lod depth, dtype and row shape"
            )
