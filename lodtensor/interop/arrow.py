"""Arrow: a LoDTensor is a nested ``LargeListArray``; the lod levels are its offsets buffers.

One list level per lod level (outermost first), the rows as the values, trailing
dims as ``FixedSizeList`` values. Both directions share the values buffer and
every int64 offsets buffer of a LoD; foreign offsets are copied and checked (one
vectorised pass per level, through the one gate :class:`lodtensor.lod.LoD`), so
converting costs O(sequences), not O(rows).

>>> import lodtensor as lt
>>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 3], [0, 2, 2, 5]])
>>> arr = t.to_arrow()
>>> arr.type
LargeListType(large_list<item: large_list<item: double>>)
>>> arr.to_pylist()
[[[0.0, 1.0], []], [[2.0, 3.0, 4.0]]]
>>> lt.from_arrow(arr).lod()
[[0, 2, 3], [0, 2, 2, 5]]
"""

import numpy as np

from ..backend import backend_name_of
from ..lod import MAX_LOD_LEVELS, LoD
from ..tensor import LoDTensor
from ._lazy import loaded, lod_tensor_arg, require

__all__ = [
    "to_arrow", "from_arrow", "arrow_type_of", "host_dtype", "list_levels", "unwrap", "wrap_levels", "check_nesting",
    "plain_type", "ARROW_MAX_NESTING",
]  # fmt: skip

_INT64 = np.dtype(np.int64)

#: List levels (lod levels plus row dimensions, each a ``fixed_size_list``) an Arrow column of a
#: LoDTensor may nest: Arrow IPC readers (C++ ``kMaxNestingDepth``, 64 types with the leaf) refuse
#: one more, so :func:`to_arrow` refuses it rather than write what ``lt.load`` cannot read.
ARROW_MAX_NESTING = 63


def _pa(what):
    return require("pyarrow", "arrow", what)


def _host_data(t, what):
    """The tensor's data as a C-contiguous NumPy array (shared when it already is one)."""
    lod_tensor_arg(t, what)
    data = t._check_fits(what)
    name = backend_name_of(data)
    if name == "torch":
        if data.device.type != "cpu":
            raise ValueError(f"{what}: the data is on {data.device}; Arrow buffers live on the host, call .cpu() first")
        data = data.detach()
        if data.is_complex():  # before NumPy: a conjugate view would fail there with torch's own message
            raise TypeError(f"{what}: Arrow has no complex type; got data of dtype {data.dtype}")
        data = data.resolve_neg()  # a negative view (NumPy cannot see its bit): the values, a copy
        if not data.is_contiguous():
            data = data.contiguous()  # the one copy, for strided data
        data = t.backend.to_numpy(data)
    elif name != "numpy":
        raise ValueError(
            f"{what}: the data is a {name} array on {t.device}; Arrow buffers live on the host, call .cpu() first"
        )
    if not data.dtype.isnative:  # Arrow buffers are in the machine's byte order: a swapped copy
        return np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("="))
    return np.ascontiguousarray(data)  # a copy only for non-contiguous data


def _values_array(pa, data, what):
    """The flat values of ``data`` (shape (N, *row_shape)) as an Arrow array sharing its buffer."""
    if data.dtype.kind == "c":
        raise TypeError(f"{what}: Arrow has no complex type; got data of dtype {data.dtype}")
    if data.dtype.kind == "b":
        flat = pa.array(data.reshape(-1))  # Arrow packs booleans into bits: a copy
    else:
        typ = _arrow_scalar_type(pa, data.dtype, what)
        flat = pa.Array.from_buffers(typ, data.size, [None, pa.py_buffer(data.reshape(-1))])
    # one fixed_size_list per row dimension, innermost first; the length of each is given, not
    # inferred, so rows of width 0 (shape (N, 0): no values at all) keep their N rows
    counts = np.cumprod(data.shape, dtype=np.int64).tolist()
    for dim in range(data.ndim - 1, 0, -1):
        typ = pa.list_(flat.type, int(data.shape[dim]))
        flat = pa.Array.from_buffers(typ, counts[dim - 1], [None], children=[flat])
    return flat


def _arrow_scalar_type(pa, dtype, what):
    """Arrow's type for a NumPy number dtype; TypeError naming the dtype when Arrow has none (long double)."""
    try:
        return pa.from_numpy_dtype(dtype)
    except (pa.ArrowNotImplementedError, TypeError):
        raise TypeError(
            f"{what}: Arrow has no type for data of dtype {dtype}; cast it first (e.g. to float64)"
        ) from None


def check_nesting(t, limit, what, reader):
    """Refuse a tensor whose Arrow column would nest more than ``limit`` list levels.

    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.zeros((3, 2)), [[0, 2, 3]])  # 1 lod level + 1 row dimension
    >>> check_nesting(t, ARROW_MAX_NESTING, "to_arrow()", "Arrow IPC readers read")
    >>> check_nesting(t, 1, "write()", "this reader reads")
    Traceback (most recent call last):
    ...
    ValueError: write(): the tensor nests 2 list levels (1 lod levels + 1 row dimensions); this reader reads at most 1
    """
    depth = t.lod_level + max(len(t.shape()) - 1, 0)
    if depth > limit:
        raise ValueError(
            f"{what}: the tensor nests {depth} list levels ({t.lod_level} lod levels + "
            f"{depth - t.lod_level} row dimensions); {reader} at most {limit}"
        )


def to_arrow(t, *, _what="to_arrow()"):
    """This tensor as a nested ``pyarrow.LargeListArray``, sharing the data and every offsets buffer.

    One list level per lod level (outermost first); trailing dims of the rows
    become ``FixedSizeList`` values, so data of shape ``(N, 3)`` gives
    ``large_list<fixed_size_list<item, 3>>``; rows of width 0 (shape ``(N, 0)``)
    give ``fixed_size_list<item, 0>`` of ``N`` entries. A tensor with no lod gives the
    plain values array. Zero-copy (torch CPU data included), except: boolean
    data (Arrow packs it into bits), non-contiguous data, data in the other byte
    order (Arrow's buffers are native: swapped) and torch bfloat16 (widened to
    float32, as ``numpy()`` does) are copied; GPU data raises (call ``.cpu()``).

    Raises
    ------
    ValueError
        GPU data, data the lod does not fit, or more than :data:`ARROW_MAX_NESTING`
        (63) lod levels and row dimensions together (Arrow IPC readers refuse them).
    TypeError
        Complex data (Arrow has no complex type).

    Examples
    --------
    >>> import lodtensor as lt
    >>> lt.LoDTensor(np.zeros((3, 0)), [[0, 1, 3]]).to_arrow().type
    LargeListType(large_list<item: fixed_size_list<item: double>[0]>)
    >>> t = lt.LoDTensor(np.arange(6).reshape(3, 2), [[0, 1, 3]])
    >>> t.to_arrow().to_pylist()
    [[[0, 1]], [[2, 3], [4, 5]]]
    >>> np.shares_memory(np.frombuffer(t.to_arrow().values.values.buffers()[1], np.int64), t.data)
    True
    """
    pa = _pa(_what)  # _what: the caller's name in messages (save(), write_parquet(): column 'x')
    data = _host_data(t, _what)
    check_nesting(t, ARROW_MAX_NESTING, _what, "Arrow IPC readers (lt.load) take")
    return wrap_levels(pa, _values_array(pa, data, _what), t._lod._levels)


def wrap_levels(pa, arr, levels):
    """``arr`` inside one ``large_list`` per offsets level (outermost first), sharing the offsets.

    >>> import pyarrow as pa
    >>> arr = wrap_levels(pa, pa.array([1.0, 2.0, 3.0]), [np.array([0, 2, 3])])
    >>> arr.type, arr.to_pylist()
    (LargeListType(large_list<item: double>), [[1.0, 2.0], [3.0]])
    """
    for offsets in reversed(levels):
        buf = pa.py_buffer(offsets)  # frozen, C-contiguous int64: shared
        arr = pa.LargeListArray.from_buffers(pa.large_list(arr.type), offsets.size - 1, [None, buf], children=[arr])
    return arr


def host_dtype(t):
    """The NumPy dtype ``t``'s data has in Arrow (torch dtypes mapped, bfloat16 widened as ``to_numpy`` does,
    in the machine's byte order).

    >>> import torch
    >>> import lodtensor as lt
    >>> host_dtype(lt.LoDTensor(np.zeros(2, ">f4"))), host_dtype(lt.LoDTensor(torch.zeros(2, dtype=torch.bfloat16)))
    (dtype('float32'), dtype('float32'))
    """
    data = t._data
    if data is None or backend_name_of(data) != "torch":
        return np.dtype(t.dtype).newbyteorder("=")
    return t.backend.to_numpy(data[:0].resolve_conj().resolve_neg()).dtype  # (a conj/neg view: NumPy refuses it)


def arrow_type_of(t):
    """The Arrow type :func:`to_arrow` gives for ``t`` (no data touched).

    >>> import lodtensor as lt
    >>> arrow_type_of(lt.LoDTensor(np.zeros((3, 2), "float32"), [[0, 2, 3]]))
    LargeListType(large_list<item: fixed_size_list<item: float>[2]>)
    """
    pa = _pa("arrow_type_of()")
    dtype = host_dtype(t)
    typ = pa.bool_() if dtype.kind == "b" else _arrow_scalar_type(pa, dtype, "arrow_type_of()")
    for size in reversed(t.shape()[1:]):
        typ = pa.list_(typ, int(size))
    for _ in range(t.lod_level):
        typ = pa.large_list(typ)
    return typ


# -- from Arrow ------------------------------------------------------------------------------
def _check_no_nulls(arr, where, level):
    if arr.null_count:
        at = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])  # failure path only
        what = "list level" if level is not None else "values"
        lvl = f" {level}" if level is not None else ""
        raise ValueError(
            f"{where}: Arrow {what}{lvl} holds {arr.null_count} null(s), first at index {at}; "
            f"a LoDTensor has no nulls (fill or drop them first, e.g. pyarrow.compute.drop_null)"
        )


def leaf_dtype(pa, typ):
    """The NumPy dtype of Arrow boolean, integer or floating type ``typ``.

    Not ``typ.to_pandas_dtype()``: pyarrow < 21 (the releases that run with NumPy 1.x) imports pandas for it,
    and lodtensor does not need pandas.

    >>> import pyarrow as pa
    >>> leaf_dtype(pa, pa.uint16()), leaf_dtype(pa, pa.float32()), leaf_dtype(pa, pa.bool_())
    (dtype('uint16'), dtype('float32'), dtype('bool'))
    """
    if pa.types.is_boolean(typ):
        return np.dtype(np.bool_)
    kind = "f" if pa.types.is_floating(typ) else "i" if pa.types.is_signed_integer(typ) else "u"
    return np.dtype(f"{kind}{typ.bit_width // 8}")


def _leaf_numpy(pa, arr, where):
    """The values array (FixedSizeLists over a primitive) as NumPy data of shape (N, *row_shape)."""
    row_shape = []
    n = len(arr)  # rows: counted here, since rows of width 0 hold no values to count
    arr = _plain(pa, arr)
    while pa.types.is_fixed_size_list(arr.type):
        _check_no_nulls(arr, where, None)
        size = arr.type.list_size
        row_shape.append(size)
        child, start, want = arr.values, arr.offset * size, len(arr) * size  # .values ignores the slice
        if start + want > len(child):  # (validate() checks the child's length, not the slice's share of it)
            raise ValueError(f"{where}: a fixed_size_list level of {len(arr)} lists of {size} from list {arr.offset} "
                             f"reaches past its {len(child)} child values")
        arr = _plain(pa, child.slice(start, want))
    _check_no_nulls(arr, where, None)
    typ = arr.type
    name = getattr(typ, "extension_name", None)
    if name == "arrow.fixed_shape_tensor":  # rows of tensors: pyarrow's reading of shape and permutation
        tensors = arr.to_numpy_ndarray() if len(arr) else np.empty((0, *typ.shape), leaf_dtype(pa, typ.value_type))
        flat, row_shape = tensors, [*row_shape, *tensors.shape[1:]]
    elif name == "arrow.bool8":  # one byte per boolean, any nonzero byte True
        flat = arr.storage.to_numpy(zero_copy_only=False) != 0
    elif pa.types.is_null(typ) and not len(arr):  # pa.array([[], []]) infers list<null>: no value, float64
        flat = np.empty(0, dtype=np.float64)  # as from_awkward (ak.from_arrow gives ?unknown) and np.array([[]])
    elif pa.types.is_boolean(typ):
        flat = arr.to_numpy(zero_copy_only=False)  # unpacking bits: a copy
    elif pa.types.is_integer(typ) or pa.types.is_floating(typ):
        raw, dtype = arr.buffers()[1], leaf_dtype(pa, typ)
        if raw is None:  # Arrow lets an empty array have no data buffer (validate() refused it for any other)
            flat = np.empty(0, dtype=dtype)
        else:
            flat = np.frombuffer(raw, dtype=dtype, count=len(arr) + arr.offset)[arr.offset :]
    else:
        raise TypeError(
            f"{where}: the values must be numbers or booleans (optionally in fixed-size lists), got Arrow type {typ}"
        )
    flat.setflags(write=False)  # Arrow memory is immutable by contract; the view says so
    return flat.reshape((n, *row_shape))


def _offsets_numpy(pa, arr):
    """One list level's offsets for the slice ``arr`` as int64 NumPy (shared when int64 from 0)."""
    wide = pa.types.is_large_list(arr.type)
    if arr.buffers()[1] is None:  # Arrow lets an array of no lists have no offsets buffer
        return np.zeros(1, dtype=np.int64)
    raw = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32, count=arr.offset + len(arr) + 1)
    return raw[arr.offset :]


def _unwrap(pa, obj, column, where):
    """``obj`` as one ``pyarrow.Array`` (joining chunks: a copy), with the container's name."""
    ds = loaded("datasets")
    if ds is not None and isinstance(obj, ds.arrow_dataset.Column) and isinstance(obj.source, ds.Dataset):
        if column is not None:
            raise TypeError(f"{where}: {obj.column_name!r} is one column already; do not pass column=")
        obj, column = obj.source, obj.column_name  # ds["name"]
    if ds is not None and isinstance(obj, ds.Dataset):
        if column is None:
            raise TypeError(f"{where}: pass column= to pick one of the Dataset's columns {obj.column_names}")
        if column not in obj.column_names:
            raise KeyError(f"{where}: no column {column!r}; the columns are {obj.column_names}")
        # the Arrow view honours select()/shuffle() (an indices mapping: then a gather, a copy);
        # without one it is the dataset's own buffers
        obj, column = obj.with_format("arrow")[column], None
    if isinstance(obj, (pa.Table, pa.RecordBatch)):
        if column is None:
            if obj.num_columns != 1:
                raise TypeError(f"{where}: pass column= to pick one of the table's columns {obj.column_names}")
            column = 0
        try:
            obj = obj.column(column)
        except (KeyError, IndexError):
            raise KeyError(f"{where}: no column {column!r}; the columns are {obj.column_names}") from None
    elif column is not None:
        raise TypeError(f"{where}: column= applies to a Table, RecordBatch or Dataset, got {type(obj).__name__}")
    if isinstance(obj, pa.ChunkedArray):
        obj = obj.chunk(0) if obj.num_chunks == 1 else obj.combine_chunks()  # several chunks: one copy
    if not isinstance(obj, pa.Array):
        if hasattr(obj, "__arrow_c_array__") or hasattr(obj, "__arrow_c_stream__"):
            return _unwrap(
                pa, pa.array(obj) if hasattr(obj, "__arrow_c_array__") else pa.chunked_array(obj), None, where
            )
        raise TypeError(
            f"{where}: expected a pyarrow Array, ChunkedArray, Table column or datasets.Dataset, "
            f"got {type(obj).__name__}"
        )
    return _plain(pa, obj)


#: Arrow extension types whose values :func:`_leaf_numpy` reads by their meaning, not as their storage
_READ_AS_VALUES = ("arrow.fixed_shape_tensor", "arrow.bool8")


def _plain(pa, arr):
    """``arr`` without extension wrappers that only label their storage (awkward's ``ak:`` types...)."""
    while isinstance(arr, pa.ExtensionArray) and arr.type.extension_name not in _READ_AS_VALUES:
        arr = arr.storage
    return arr


def plain_type(pa, typ):
    """``typ`` without extension wrappers that only label their storage (as :func:`_plain` for arrays).

    >>> import pyarrow as pa
    >>> plain_type(pa, pa.bool8()), plain_type(pa, pa.int64())
    (Bool8Type(extension<arrow.bool8>), DataType(int64))
    """
    while isinstance(typ, pa.BaseExtensionType) and typ.extension_name not in _READ_AS_VALUES:
        typ = typ.storage_type
    return typ


def list_levels(arr, where, *, limit=MAX_LOD_LEVELS):
    """Split a nested list array into its offsets levels (int64, from 0; not yet gated) and its leaf array.

    Refuses more than ``limit`` list levels from the type alone, then checks
    the buffer sizes (``validate()``, O(1) per level) before reading any
    buffer and refuses nulls; the caller passes the levels through the LoD
    gate. A level of no list (an empty array, or the level under lists that
    are all empty) gives offsets ``[0]``, a level of no sequence. Shared by
    :func:`from_arrow`, Parquet's rows of width 0 and the text layer.

    >>> import pyarrow as pa
    >>> levels, leaf = list_levels(pa.array([[1, 2], [], [3]]), "example()")
    >>> [level.tolist() for level in levels], leaf.to_pylist()
    ([[0, 2, 2, 3]], [1, 2, 3])
    >>> levels, _ = list_levels(pa.array([[], []], pa.list_(pa.list_(pa.int64()))), "example()")
    >>> [level.tolist() for level in levels]  # documents without sentences
    [[0, 0, 0], [0]]
    """
    pa = _pa(where)
    arr = _plain(pa, arr)
    typ, depth = arr.type, 0
    while pa.types.is_list(typ) or pa.types.is_large_list(typ):  # the type alone: no buffer read yet
        typ, depth = plain_type(pa, typ.value_type), depth + 1
        if depth > limit:
            raise ValueError(
                f"{where}: the Arrow array nests more than {limit} list levels; a LoD has at most "
                f"MAX_LOD_LEVELS={MAX_LOD_LEVELS}"
            )
    arr.validate()  # buffer sizes against lengths: O(1) per level, before any buffer is read
    levels = []
    level = 0
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        _check_no_nulls(arr, where, level)
        offsets = _offsets_numpy(pa, arr)
        first, last = int(offsets[0]), int(offsets[-1])
        if first != 0 or offsets.dtype != _INT64:
            offsets = offsets.astype(np.int64) - first  # rebased / widened: a copy of the offsets only
        levels.append(offsets)
        child = arr.values  # the whole child; the slice [first, last) is what this level indexes
        if not 0 <= first <= last <= len(child):
            raise ValueError(
                f"{where}: list level {level} offsets run from {first} to {last}, outside its {len(child)} child values"
            )
        arr = _plain(pa, child.slice(first, last - first))
        level += 1
    if pa.types.is_map(arr.type) or pa.types.is_list_view(arr.type) or pa.types.is_large_list_view(arr.type):
        raise TypeError(f"{where}: expected list, large_list or fixed_size_list levels, got Arrow type {arr.type}")
    return levels, arr


def unwrap(obj, column, where):
    """``obj`` (Array, ChunkedArray, Table, RecordBatch, datasets.Dataset) as one ``pyarrow.Array``.

    >>> import pyarrow as pa
    >>> table = pa.table({"words": [[1, 2], [], [3]], "label": [0, 1, 0]})
    >>> unwrap(table, "words", "example()").to_pylist()
    [[1, 2], [], [3]]
    >>> unwrap(pa.chunked_array([[[1]], [[2, 3]]]), None, "example()").to_pylist()  # chunks joined: one copy
    [[1], [2, 3]]
    """
    return _unwrap(_pa(where), obj, column, where)


def from_arrow(obj, *, column=None):
    """A LoDTensor from a nested Arrow list array, sharing the values buffer.

    Every list level (``list`` or ``large_list``) becomes a lod level, outermost
    first; ``fixed_size_list`` values become trailing dims of the rows. Every
    level goes through the LoD validation gate.

    Parameters
    ----------
    obj : pyarrow Array, ChunkedArray, Table, RecordBatch, ``datasets.Dataset`` or its column
        A ChunkedArray of several chunks is joined first (one copy); a Table,
        RecordBatch or Dataset needs ``column`` unless it has one column; a
        Dataset column ``ds["name"]`` works as is. A Dataset after
        ``select``/``shuffle`` is gathered in its order (a copy).
        Sliced arrays (non-zero offset) are fine. A non-list array gives a
        tensor with no lod.
    column : str or int, optional
        The column of a Table, RecordBatch or Dataset.

    Returns
    -------
    LoDTensor
        NumPy data (read-only: it is Arrow's buffer), shared with ``obj``;
        boolean values are unpacked (a copy); lists of no type (``list<null>``,
        what ``pa.array([[], []])`` infers) give float64 data. The offsets are
        copied into the LoD's frozen memory (O(sequences)): an Arrow buffer may
        lie over memory its owner still writes (``pa.array`` of a NumPy array
        shares it), and a LoD must not change after its check. Offsets that
        came from ``t.to_arrow()`` are recognised and shared.
        ``fixed_shape_tensor`` values give rows of that shape (as pyarrow's
        ``to_numpy_ndarray``), ``bool8`` booleans, and other extension types
        (awkward's ``ak:`` labels) are read as their storage.

    Raises
    ------
    ValueError
        A null at any level, or offsets that break a LoD rule (``LoDError``).
    TypeError
        Values that are not numbers or booleans (strings, structs...).

    Examples
    --------
    >>> import pyarrow as pa
    >>> import lodtensor as lt
    >>> lt.from_arrow(pa.array([[1, 2], [], [3]])).tolist()
    [[1, 2], [], [3]]
    >>> lt.from_arrow(pa.array([[1, None]]))
    Traceback (most recent call last):
    ...
    ValueError: from_arrow(): Arrow values holds 1 null(s), first at index 1; ...
    """
    pa = _pa("from_arrow()")
    where = "from_arrow()"
    levels, arr = list_levels(_unwrap(pa, obj, column, where), where)
    data = _leaf_numpy(pa, arr, where)
    if not levels:
        return LoDTensor(data)
    lod = LoD(levels, num_rows=int(data.shape[0]))  # the gate: every level copied, then checked
    return LoDTensor(data, lod)
