"""The ``lodtensor`` entry of a Parquet file lt.write_parquet wrote, and the checks a reader makes with it.

The entry (key-value metadata, JSON) holds, for each column, its lod depth,
dtype, row shape, rows and a CRC-32 of every level's lengths, plus the file's
top-level rows. Each column also carries a Parquet ``field_id`` (``MARK`` plus
its position), kept in the schema part of the footer, away from the key-value
list: a flipped bit that makes a reader skip that list leaves the ids, and a
file whose columns carry them but which has no entry is refused.
"""

import json
import zlib

import numpy as np

from ..lod import MAX_LOD_LEVELS
from .arrow import host_dtype, leaf_dtype, plain_type

__all__ = [
    "KEY",
    "FORMAT",
    "VERSION",
    "MARK",
    "FIELD_ID",
    "spec",
    "lengths_crc",
    "file_specs",
    "check_schema",
    "layout",
]

KEY = b"lodtensor"
FORMAT = "lodtensor.parquet"
VERSION = 1
# Each column's Parquet field_id: this plus its position. A file whose columns carry them was
# written by write_parquet, so a footer that lost the ``lodtensor`` entry (a flipped bit can
# make a reader skip the whole key-value list) is refused instead of read as a foreign file.
MARK = 0x4C540000
FIELD_ID = b"PARQUET:field_id"
_DTYPES = {
    np.dtype(name).str: np.dtype(name)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64")
}  # fmt: skip


def lengths_crc(t, crcs=None):
    """CRC-32 of every level's lengths (int64 little-endian), continuing ``crcs``: the same for a
    tensor and for the batches it streams as (lengths do not depend on where a batch starts)."""
    crcs = crcs or [0] * t.lod_level
    return [zlib.crc32(np.diff(level).astype("<i8").data, c) for level, c in zip(t.lod.levels, crcs)]


def spec(t):
    """What the reader checks a column against: lod depth, dtype (NumPy ``str``), row shape, rows, lod CRCs."""
    return {
        "lod_level": t.lod_level,
        "dtype": host_dtype(t).str,
        "row_shape": [int(s) for s in t.shape()[1:]],
        "rows": int(t.shape()[0]),
        "lod_crc32": lengths_crc(t),
    }


def file_specs(pf):
    """The ``lodtensor`` metadata entry: ``(top-level rows, {column: spec})``, or None if absent.

    Every value is checked (a file is input like any other): a bad entry, or
    a column marked as written by ``lt.write_parquet`` in a file without the
    entry, raises ValueError.
    """
    schema = pf.schema_arrow
    marked = [name for i, name in enumerate(schema.names) if field_id(schema.field(i)) == MARK + i]
    raw = (pf.metadata.metadata or {}).get(KEY)
    if raw is None:
        if marked:
            raise ValueError(
                f"column {marked[0]!r} is marked as written by lt.write_parquet, but the file has no "
                f"{KEY.decode()!r} metadata (the footer was altered)"
            )
        return None  # a file some other writer made: read as it is
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"its {KEY.decode()!r} metadata is not JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(f"its {KEY.decode()!r} metadata is not a lodtensor.parquet version {VERSION} entry")
    columns, num_rows = meta.get("columns"), meta.get("num_rows")
    if not isinstance(columns, dict) or type(num_rows) is not int or list(columns) != schema.names:
        raise ValueError(f"its {KEY.decode()!r} metadata does not describe the columns {schema.names}")
    if len(marked) != len(schema.names):
        raise ValueError("its columns do not all carry the field ids lt.write_parquet gives them")
    specs = {}
    for name, spec in columns.items():
        try:
            level, dtype, shape = spec["lod_level"], _DTYPES[spec["dtype"]], spec["row_shape"]
            rows, crcs = spec["rows"], spec["lod_crc32"]
            ok = type(level) is int and 0 <= level <= MAX_LOD_LEVELS and type(rows) is int and rows >= 0
            ok = ok and isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)
            ok = ok and isinstance(crcs, list) and len(crcs) == level and all(type(c) is int for c in crcs)
        except (TypeError, KeyError):
            ok = False
        if not ok:
            raise ValueError(f"its {KEY.decode()!r} metadata describes column {name!r} as {str(spec)[:200]}")
        specs[name] = (level, dtype, tuple(shape), rows, crcs)
    return num_rows, specs


def field_id(field):
    """The Parquet field id of an Arrow field read from a file (None without one)."""
    raw = (field.metadata or {}).get(FIELD_ID)
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def type_shape(pa, typ):
    """``(list levels, row shape, leaf type)`` of a nested Arrow type."""
    lists, row = 0, []
    typ = plain_type(pa, typ)
    while pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ, lists = plain_type(pa, typ.value_type), lists + 1
    while pa.types.is_fixed_size_list(typ):
        typ, row = plain_type(pa, typ.value_type), [*row, typ.list_size]
    name = getattr(typ, "extension_name", None)
    if name == "arrow.fixed_shape_tensor":  # the shape pyarrow's to_numpy_ndarray gives its rows
        order = typ.permutation or range(len(typ.shape))
        row = [*row, *(typ.shape[k] for k in order)]
        typ = typ.value_type
    elif name == "arrow.bool8":
        typ = pa.bool_()
    return lists, tuple(row), typ


def check_schema(pa, pf, names, specs):
    """Check the file's columns against its ``lodtensor`` entry, from the footer alone (no page read)."""
    num_rows, specs = specs
    meta = pf.metadata
    groups = sum(meta.row_group(g).num_rows for g in range(meta.num_row_groups))
    if not meta.num_rows == groups == num_rows:
        raise ValueError(
            f"it holds {meta.num_rows} rows in its footer and {groups} in its row groups; its lodtensor metadata "
            f"says {num_rows}"
        )
    schema = pf.schema_arrow
    for name in names:
        level, dtype, shape = specs[name][:3]
        width0 = 0 in shape
        leaf = pa.bool_() if dtype.kind == "b" else pa.from_numpy_dtype(dtype)
        if type_shape(pa, schema.field(name).type) != (level + width0, () if width0 else shape, leaf):
            raise ValueError(
                f"column {name!r} has Arrow type {schema.field(name).type}, but the file's lodtensor metadata says "
                f"{level} lod level(s) of {dtype} rows of shape {shape}"
            )


def layout(pa, pf, names, specs):
    """``{column: (lod_level, dtype, row_shape)}`` of a file from its footer (no page read).

    From the ``lodtensor`` entry where there is one (``specs``, already
    checked against the schema), else from the Arrow type: list levels are lod
    levels, ``fixed_size_list`` levels the row shape. A leaf that is not
    numbers or booleans raises ValueError.
    """
    out = {}
    for name in names:
        if specs is not None:
            out[name] = specs[1][name][:3]
            continue
        lists, row, leaf = type_shape(pa, pf.schema_arrow.field(name).type)
        if not (pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf)):
            raise ValueError(f"column {name!r} holds Arrow type {leaf}: not lists of numbers or booleans")
        out[name] = (lists, leaf_dtype(pa, leaf), row)
    return out
