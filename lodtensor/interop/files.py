"""save / load: one LoDTensor per Arrow IPC file, memory-mapped on load.

The file is a standard Arrow IPC file (readable by any Arrow library) holding
one record batch with one column, ``lodtensor``: the tensor's :func:`to_arrow`
array. The schema metadata key ``lodtensor`` holds JSON describing what the
column must be (format version, lod level, dtype, row shape, rows); loading
checks the magic bytes, that metadata, the column type and every offsets level
(through the LoD gate, and against a CRC-32 per level kept in the header)
before the tensor exists, so a truncated, tampered or
foreign file raises ValueError naming the file.

>>> import os, tempfile
>>> import numpy as np
>>> import lodtensor as lt
>>> path = os.path.join(tempfile.mkdtemp(), "t.arrow")
>>> lt.save(path, lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]]))
>>> t = lt.load(path)
>>> t.lod(), t.shape(), t.data.flags.writeable
([[0, 1, 3]], [3, 2], False)
"""

import json
import mmap as _mmap
import os
import struct
import zlib

import numpy as np

from ..lod import MAX_LOD_LEVELS
from ..tensor import LoDTensor
from ._lazy import bad_file, require
from .arrow import arrow_type_of, from_arrow, host_dtype, to_arrow

__all__ = ["save", "load"]

_MAGIC = b"ARROW1"
_KEY = b"lodtensor"
_COLUMN = "lodtensor"
_FORMAT = "lodtensor.ipc"
_VERSION = 1
_MAX_HEADER = 1 << 16  # bytes of JSON header (lt.save writes ~150 plus 11 per lod level)
_MAX_JSON_DEPTH = 4  # lt.save writes 2: {"lod_crc32": [...]}
_MAX_ROW_DIMS = 31  # rows plus these: NumPy 1.x's limit of 32 dims
# what save writes: plain numeric and bool dtypes in native byte order
_DTYPES = frozenset(np.dtype(n).str for n in ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"))


def save(path, t):
    """Write ``t`` to ``path`` as an Arrow IPC file (uncompressed, so :func:`load` can map it).

    The file is written next to ``path`` and renamed into place, so a reader
    never sees half a file. Boolean data is stored bit-packed (Arrow's layout),
    so loading it copies; every other dtype loads zero-copy.

    Raises
    ------
    TypeError
        ``t`` is not a LoDTensor, or has complex data.
    ValueError
        ``t`` holds no data, its lod does not fit it, its data is on a GPU, or
        its rows have more than 31 dimensions (what :func:`load` reads).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> path = os.path.join(tempfile.mkdtemp(), "batch.arrow")
    >>> save(path, lt.LoDTensor(np.arange(10, dtype="float32").reshape(5, 2), [[0, 2, 5]]))
    >>> load(path).lod()
    [[0, 2, 5]]
    """
    pa = require("pyarrow", "arrow", "save()")
    if not isinstance(t, LoDTensor):
        raise TypeError(f"save(): t must be a LoDTensor, got {type(t).__name__}")
    if t.data is not None and len(t.shape()) - 1 > _MAX_ROW_DIMS:  # what load() reads back, refused up front
        raise ValueError(f"save(): t has {len(t.shape()) - 1} row dimensions; lt.load reads at most {_MAX_ROW_DIMS}")
    arr = to_arrow(t, _what="save()")
    meta = {
        "format": _FORMAT,
        "version": _VERSION,
        "lod_level": t.lod_level,
        "dtype": host_dtype(t).str,
        "row_shape": [int(s) for s in t.shape()[1:]],
        "num_rows": t.num_rows,
        "lod_crc32": _checksums(t.lod.levels),
    }
    schema = pa.schema([pa.field(_COLUMN, arr.type, nullable=False)], metadata={_KEY: json.dumps(meta).encode()})
    batch = pa.record_batch([arr], schema=schema)
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        # allow_64bit: the format's lengths are int64; without it the writer refuses 2**31 rows or more
        options = pa.ipc.IpcWriteOptions(allow_64bit=True)
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, schema, options=options) as writer:
            writer.write_batch(batch)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _checksums(levels):
    """CRC-32 of each offsets level (int64 little-endian): a flipped offset that still forms a valid LoD is caught."""
    return [zlib.crc32(np.ascontiguousarray(lv, dtype="<i8").data) for lv in levels]


def _check_magic(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(len(_MAGIC))
        f.seek(max(0, size - len(_MAGIC)))
        tail = f.read(len(_MAGIC))
    if head != _MAGIC or tail != _MAGIC or size < 2 * len(_MAGIC) + 8:
        got = "a truncated Arrow file" if head == _MAGIC else f"first bytes {head!r}"
        raise ValueError(f"it does not start and end with the Arrow magic {_MAGIC!r} ({got}, {size} bytes)")


def _json_depth(raw):
    """An upper bound of the nesting depth of JSON ``raw`` (brackets inside strings count too)."""
    codes = np.frombuffer(raw, dtype=np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int32) - np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _metadata(schema):
    """The header ``save`` wrote, every field checked for type and range before anything is built from it."""
    raw = (schema.metadata or {}).get(_KEY)
    if raw is None:
        raise ValueError(f"its schema has no {_KEY.decode()!r} metadata: an Arrow file, but not one lt.save() wrote")
    if len(raw) > _MAX_HEADER or _json_depth(raw) > _MAX_JSON_DEPTH:
        raise ValueError(f"its {_KEY.decode()!r} header ({len(raw)} bytes, nesting {_json_depth(raw)}) is larger "
                         f"or deeper than a lodtensor header (at most {_MAX_HEADER} bytes, {_MAX_JSON_DEPTH} levels)")
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"its {_KEY.decode()!r} header is not JSON: {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError(f"its {_KEY.decode()!r} metadata is not a lodtensor header: {raw[:80]!r}")
    if meta.get("version") != _VERSION:
        raise ValueError(f"format version {meta.get('version')!r}; this lodtensor reads version {_VERSION}")
    level, rows, shape, crcs = meta.get("lod_level"), meta.get("num_rows"), meta.get("row_shape"), meta.get("lod_crc32")
    for field, value, top in (("lod_level", level, MAX_LOD_LEVELS), ("num_rows", rows, (1 << 63) - 1)):
        if type(value) is not int or not 0 <= value <= top:
            raise ValueError(f"bad header {field}={str(value)[:40]}: expected an integer in [0, {top}]")
    if not isinstance(shape, list) or len(shape) > _MAX_ROW_DIMS or not all(
            type(s) is int and 0 <= s < 1 << 31 for s in shape):
        raise ValueError(f"bad header row_shape={str(shape)[:80]}: expected a list of at most {_MAX_ROW_DIMS} "
                         f"integers in [0, 2**31) (Arrow's fixed-size list sizes)")
    if not isinstance(crcs, list) or len(crcs) != level:
        raise ValueError(f"bad header lod_crc32={str(crcs)[:80]}: expected a list of lod_level={level} checksums")
    if not all(type(c) is int and 0 <= c < 1 << 32 for c in crcs):
        raise ValueError(f"bad header lod_crc32={str(crcs)[:80]}: expected 32-bit unsigned integers")
    dtype = meta.get("dtype")
    if type(dtype) is not str or dtype not in _DTYPES:
        raise ValueError(f"bad header dtype {str(dtype)[:40]!r}: expected a plain numeric or bool dtype")
    meta["dtype"] = np.dtype(dtype)
    span = meta["dtype"].itemsize
    for s in shape:
        span *= max(s, 1)
    if span >= 1 << 62:
        raise ValueError(f"bad header row_shape={shape!r}: a row of {meta['dtype']} larger than any memory")
    return meta


def _column_type_levels(pa, typ, levels, leaf):
    """Check that ``typ`` is ``levels`` large_list levels over ``leaf``, walking the file's own type."""
    for k in range(levels):
        if not pa.types.is_large_list(typ):
            raise ValueError(f"the header says lod_level={levels}, but the column has {k} list levels "
                             f"(type {str(typ)[:200]})")
        typ = typ.value_type
    if typ != leaf:
        raise ValueError(f"the column's values have Arrow type {str(typ)[:200]}, but the header says {leaf}")


def _unpack(fmt, buf, pos):
    """``struct.unpack_from`` that refuses a position outside ``buf`` (never counted from its end)."""
    if not 0 <= pos <= len(buf) - struct.calcsize(fmt):
        raise ValueError(f"its IPC metadata points outside the file (offset {pos} of {len(buf)} bytes)")
    return struct.unpack_from(fmt, buf, pos)[0]


def _fb_field(buf, table, slot):
    """The position of field ``slot`` of the flatbuffer table at ``table``, or None where it is absent."""
    vtable = table - _unpack("<i", buf, table)
    if 4 + 2 * slot + 2 > _unpack("<H", buf, vtable):
        return None
    off = _unpack("<H", buf, vtable + 4 + 2 * slot)
    return table + off if off else None


def _fb_ref(buf, pos):
    return pos + _unpack("<I", buf, pos)


def _check_uncompressed(buf):
    """Refuse a record batch with compressed buffers (Arrow IPC's LZ4 / ZSTD body compression), from the
    file's own metadata, before pyarrow reads it: pyarrow would decompress it into memory (a file of a
    few KiB can grow to GiBs), where lt.save's files are uncompressed and mapped in place."""
    size = len(buf)
    footer = size - len(_MAGIC) - 4 - _unpack("<i", buf, size - len(_MAGIC) - 4)
    root = _fb_ref(buf, footer)
    batches = _fb_field(buf, root, 3)  # Footer.recordBatches: [Block {offset: long, metaDataLength: int, ...}]
    if batches is None:
        return
    vector = _fb_ref(buf, batches)
    if _unpack("<I", buf, vector) < 1:
        return
    pos = _unpack("<q", buf, vector + 4)  # the first Block's offset: an encapsulated Message
    start = pos + 8 if _unpack("<i", buf, pos) == -1 else pos + 4  # continuation marker, then its length
    message = _fb_ref(buf, start)
    header = _fb_field(buf, message, 2)  # Message.header (a RecordBatch table)
    if header is not None and _fb_field(buf, _fb_ref(buf, header), 3) is not None:  # RecordBatch.compression
        raise ValueError("its record batch has compressed buffers; lt.save writes them uncompressed (so that "
                         "load maps them in place), and a compressed one would be decompressed into memory")


def _read(buf):
    pa = require("pyarrow", "arrow", "load()")
    reader = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(buf)))
    meta = _metadata(reader.schema)
    if reader.num_record_batches != 1 or reader.schema.names != [_COLUMN]:
        raise ValueError(
            f"expected one record batch with one column {_COLUMN!r}, got {reader.num_record_batches} "
            f"batch(es) of columns {reader.schema.names[:8]}"
        )
    dtype, shape = meta["dtype"], meta["row_shape"]
    # the header's lod_level is checked against the file's own type, so no type deeper than the file's is built
    _column_type_levels(pa, reader.schema.field(0).type, meta["lod_level"],
                        arrow_type_of(LoDTensor(np.empty((0, *shape), dtype=dtype))))
    with memoryview(buf) as view:
        _check_uncompressed(view.cast("B"))
    column = reader.get_batch(0).column(0)
    # offsets are copied into frozen memory (small): another process writing the mapped file
    # can then change values but never make the checked LoD invalid
    t = from_arrow(column)
    if _checksums(t.lod.levels) != meta["lod_crc32"]:
        raise ValueError("the lod offsets do not match the checksums in the header (the file was altered)")
    if t.lod_level != meta["lod_level"] or t.num_rows != meta["num_rows"] or t.dtype != dtype:
        raise ValueError(
            f"the column holds lod_level={t.lod_level}, {t.num_rows} rows of {t.dtype}; the header says "
            f"lod_level={meta['lod_level']}, {meta['num_rows']} rows of {dtype}"
        )
    return t


def load(path, mmap=True):
    """Read a LoDTensor that :func:`save` wrote; memory-mapped and zero-copy by default.

    Parameters
    ----------
    path : str or os.PathLike
    mmap : bool
        True (default): the data is a read-only view of the mapped file (pages
        load on first touch, so opening costs O(levels + offsets), not O(file)).
        The mapping is private (copy-on-write): a write that ignores the
        read-only flag (torch's ``from_numpy`` and ``from_dlpack`` do) changes
        this process's copy of the page, never the file, and never crashes.
        The offsets are copied into private memory and validated, so a process
        writing the file later can change values but never the checked LoD.
        False: the whole file is read into memory first (O(file) time and
        memory); the tensor then owns its bytes and nothing done to the file
        afterwards can reach it.

    Notes
    -----
    A mapped file that another process truncates (or rewrites in place) while
    the tensor is alive makes the next read of a page past the new end raise
    SIGBUS, which kills the process; no library can catch that after the fact.
    Load with ``mmap=False`` when the file may change underneath. ``save``
    itself writes a new file and renames it over the old one, so saving again
    to the same path never truncates a file that is mapped.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an Arrow file, not one ``save`` wrote, truncated, or tampered
        with (bad header, type, or offsets); the message names the file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import lodtensor as lt
    >>> path = os.path.join(tempfile.mkdtemp(), "batch.arrow")
    >>> save(path, lt.LoDTensor(np.arange(5, dtype="int64"), [[0, 2, 2, 5]]))
    >>> t = load(path)  # a read-only view of the mapped file
    >>> t.tolist(), t.data.flags.writeable
    ([[0, 1], [], [2, 3, 4]], False)
    >>> load(path, mmap=False).data.tolist()  # read into memory: nothing done to the file reaches it
    [0, 1, 2, 3, 4]
    """
    pa = require("pyarrow", "arrow", "load()")
    name = os.fspath(path)
    try:
        _check_magic(name)
        if mmap:
            # copy-on-write: torch ignores read-only memory (from_numpy, DLPack's read-only flag), so a
            # write through such a view of a read-only mapping killed the process (SIGSEGV); a private
            # mapping takes it in the writer's own page and never reaches the file
            with open(name, "rb") as f:
                buf = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY)
        else:
            with open(name, "rb") as f:
                buf = f.read()
        return _read(buf)
    except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError, RecursionError) as err:
        raise bad_file("load()", name, err, "lodtensor (lt.save)") from None
