"""Fuzz targets for foreign containers: crafted Arrow arrays (and text columns of them), awkward layouts.

- ``arrow_crafted``: nested list arrays built from raw buffers (int32 / int64
  offsets that decrease, overflow or run past the child, validity bitmaps,
  sliced parents and children, fixed-size lists, chunks, string leaves with
  offsets of their own) through ``lt.from_arrow`` and, for words,
  ``text.lookup``: a refusal (an allowed error) whenever the part a reader
  reaches is broken, holds nulls or holds other values, and otherwise exactly
  the nested lists Arrow itself reads (``to_pylist``).
- ``awkward_crafted``: awkward layouts built node by node (``ListOffsetArray``
  and ``ListArray`` with crafted offsets / starts / stops, ``RegularArray``,
  option types with and without missing values, ``IndexedArray``) through
  ``lt.from_awkward``: refused when what it reaches breaks awkward's rules or
  holds a None, else exactly those items, read one at a time by a checked
  reference reader (itself checked against ``ak.to_list`` on valid layouts).

Each is deterministic from hypothesis' seed and quick (milliseconds an example).
DLPack producers and the collectives' heads are in :mod:`.targets_peers`.
"""

import numpy as np
from hypothesis import strategies as st

import lodtensor as lt

from .oracle import ALLOWED, attempt, check_tensor
from .strategies import EDGE_INTS
from .targets import target


def _rng(data):
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))


def _crafted_offsets(data, rng, count, child_len, wide):
    """``count + 1`` offsets into a child of ``child_len`` values: valid, from a later start, or broken."""
    how = data.draw(st.sampled_from(["valid", "valid", "valid", "shifted", "decrease", "past", "edge", "random"]))
    if how in ("valid", "shifted"):
        start = int(rng.integers(0, child_len + 1)) if how == "shifted" else 0
        cuts = np.sort(rng.integers(start, child_len + 1, size=max(count - 1, 0)))
        end = int(rng.integers(start, child_len + 1)) if how == "shifted" or not count else child_len
        offsets = np.concatenate(([start], cuts, [end])) if count else np.array([start])
        offsets = np.minimum(offsets, end) if count else offsets
        offsets[0] = start
    elif how == "decrease":
        offsets = np.sort(rng.integers(0, child_len + 1, size=count + 1))[::-1].copy()
    elif how == "past":
        offsets = np.sort(rng.integers(0, child_len + 3, size=count + 1))
        offsets[-1] = child_len + int(rng.integers(1, 4))
    elif how == "edge":
        offsets = np.sort(rng.integers(0, child_len + 1, size=count + 1)).tolist()
        offsets[int(rng.integers(0, count + 1))] = data.draw(st.sampled_from(EDGE_INTS))
    else:
        offsets = rng.integers(-2, child_len + 3, size=count + 1)
    bits = 64 if wide else 32  # wrapped into the offsets' width, as raw bytes would hold them
    wrapped = [(int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)) for v in list(offsets)]
    return np.array(wrapped, dtype=np.int64 if wide else np.int32)


def _validity(data, rng, length):
    """None (no nulls), or a validity bitmap (packed, little bit order) with some zeros."""
    if length == 0 or data.draw(st.integers(0, 3)):
        return None
    bits = rng.random(length) < 0.7
    return np.packbits(bits, bitorder="little")


def _leaf(data, pa, rng):
    kind = data.draw(st.sampled_from(["int64", "int32", "float32", "float64", "bool", "uint8", "float16", "string",
                                      "null"]))
    n = data.draw(st.integers(0, 12))
    if kind == "string":
        arr = pa.array([str(i % 7) for i in range(n)])
        if n and data.draw(st.integers(0, 3)) == 0:  # string offsets of its own making: maybe broken
            chars = b"".join(str(i % 7).encode() for i in range(n)) + b"\xff\xfe"
            offsets = _crafted_offsets(data, rng, n, len(chars), wide=False)
            try:
                arr = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
            except pa.ArrowInvalid:  # pyarrow's own cheap check (first > last offset)
                pass
    elif kind == "null":
        arr = pa.nulls(n)
    elif kind == "bool":
        arr = pa.array(rng.random(n) < 0.5)
    else:
        arr = pa.array((rng.integers(-50, 50, n)).astype(kind))
    if n and data.draw(st.integers(0, 4)) == 0 and _arrow_valid(arr):  # a leaf with nulls
        mask = rng.random(n) < 0.3
        arr = pa.array(arr.to_pylist(), type=arr.type, mask=mask)
    if len(arr) and data.draw(st.integers(0, 3)) == 0:
        a = int(rng.integers(0, len(arr) + 1))
        arr = arr.slice(a, int(rng.integers(0, len(arr) - a + 1)))
    for _ in range(data.draw(st.integers(0, 2)) if data.draw(st.integers(0, 3)) == 0 else 0):
        size = data.draw(st.integers(0, 3))
        count = len(arr) // size if size else data.draw(st.integers(0, 4))
        if data.draw(st.integers(0, 5)) == 0:
            count += data.draw(st.integers(1, 3))  # more lists than the child holds values for
        try:
            arr = pa.Array.from_buffers(pa.list_(arr.type, size), count, [None], children=[arr])
        except pa.ArrowInvalid:  # pyarrow checks a fixed-size list's child length itself
            break
    return arr


def _arrow_valid(arr):
    try:
        arr.validate(full=True)
    except Exception:  # noqa: BLE001 - pyarrow's own verdict: ArrowInvalid and friends
        return False
    return True


def _reference(pa, arr, strings=False):
    """What a reader reaches in ``arr``: ``(numeric leaf, a null reached, offsets outside a child, reached part
    valid)``.

    Walks the levels by hand, slicing each child to what its parent's offsets reach (pyarrow's own
    ``flatten()`` aborts the process on a valid empty list array whose one offset lies past its
    empty child); the reached part is valid when every reached offsets run is non-decreasing and
    the reached leaf passes Arrow's full validation. A fault no list points at is no fault here.
    """
    nulls = outside = False
    ok = True
    level = arr
    while not outside and ok:
        nulls = nulls or level.null_count > 0
        child = None
        if pa.types.is_list(level.type) or pa.types.is_large_list(level.type):
            raw = level.buffers()[1]
            if raw is not None:
                wide = pa.types.is_large_list(level.type)
                offsets = np.frombuffer(raw, np.int64 if wide else np.int32, count=level.offset + len(level) + 1)
                offsets = offsets[level.offset :]
                first, last = int(offsets[0]), int(offsets[-1])
                ok = bool(np.all(np.diff(offsets.astype(np.int64)) >= 0))
                outside = ok and not 0 <= first <= last <= len(level.values)
                child = level.values.slice(first, last - first) if ok and not outside else None
            else:
                child = level.values.slice(0, 0)
        elif pa.types.is_fixed_size_list(level.type):
            size = level.type.list_size
            outside = (level.offset + len(level)) * size > len(level.values)
            child = None if outside else level.values.slice(level.offset * size, len(level) * size)
        else:
            ok = _arrow_valid(level)
        if child is None:
            break
        level = child
    typ = arr.type
    while pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        typ = typ.value_type
    numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ)
    numeric = pa.types.is_string(typ) if strings else numeric
    empty_null = pa.types.is_null(typ) and not outside and len(level) == 0
    return numeric or empty_null, nulls, outside, ok


def _expect(pa, arr, t, what, convert=None):
    """The oracle of a reader of ``arr`` that returned ``t`` (None: refused)."""
    numeric, nulls, outside, reached_ok = _reference(pa, arr, strings=convert is not None)
    if not reached_ok:
        assert t is None, f"{what} accepted an array whose reached part Arrow refuses: {arr.type}, lod {t.lod()}"
        return
    if outside and t is None:  # an empty level whose one offset lies past its child: refusing it is fine
        return
    if nulls or not numeric:
        assert t is None, f"{what} accepted nulls or other values: {arr.type}"
        return
    if t is None:
        assert not _arrow_valid(arr), f"{what} refused a valid array of numbers without nulls: {arr.to_pylist()}"
        return  # refusing what Arrow calls invalid (in a part no list reaches) is fine too
    want = arr.to_pylist()
    if convert is not None:
        want = convert(want)
    assert repr(t.tolist()) == repr(want), (t.tolist(), want)
    check_tensor(t)


def _is_words(pa, arr):
    typ = arr.type
    while pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ = typ.value_type
    return pa.types.is_string(typ) and typ != arr.type


def _check_lookup(pa, arr, obj):
    """text.lookup of a column of word lists: refused when what it reaches is broken or null, else the ids."""
    from lodtensor.text import Vocab, lookup

    vocab = Vocab([str(i) for i in range(5)])  # "5" and "6" are unknown words
    try:
        t = lookup(obj, vocab)
    except ALLOWED + (KeyError,) as err:
        assert str(err), err
        t = None

    def ids(x):
        return [ids(v) for v in x] if isinstance(x, list) else vocab[x]

    _expect(pa, arr, t, "lookup()", ids)


@target
def arrow_crafted(data):
    """lt.from_arrow (and text.lookup for words) of list arrays built from raw buffers: refused when what a
    reader reaches is broken, holds nulls or other values than numbers, else exactly what Arrow reads."""
    import pyarrow as pa

    rng = _rng(data)
    arr = _leaf(data, pa, rng)
    for _ in range(data.draw(st.integers(0, 3))):
        wide = data.draw(st.booleans())
        count = data.draw(st.integers(0, 6))
        offsets = _crafted_offsets(data, rng, count, len(arr), wide)
        validity = _validity(data, rng, count)
        typ = pa.large_list(arr.type) if wide else pa.list_(arr.type)
        buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets)]
        try:
            arr = pa.Array.from_buffers(typ, count, buffers, children=[arr])
        except (pa.ArrowException, ValueError):
            return
        if count and data.draw(st.integers(0, 3)) == 0:  # a sliced parent
            a = int(rng.integers(0, count + 1))
            arr = arr.slice(a, int(rng.integers(0, count - a + 1)))
    valid = _arrow_valid(arr)
    obj = arr
    if valid and data.draw(st.integers(0, 3)) == 0 and len(arr) > 1:
        cut = int(rng.integers(1, len(arr)))
        obj = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], type=arr.type)
    elif valid and data.draw(st.integers(0, 4)) == 0:  # (a Table validates its columns itself)
        obj = pa.table({"x": arr})
    if _is_words(pa, arr):
        _check_lookup(pa, arr, obj)
    _expect(pa, arr, attempt(lt.from_arrow, obj), "from_arrow()")


# -- awkward ---------------------------------------------------------------------------------------
def _ak_leaf(data, ak, rng):
    n = data.draw(st.integers(0, 10))
    kind = data.draw(st.sampled_from(["int64", "float64", "int8", "bool", "datetime64[s]", "empty"]))
    if kind == "empty":
        return ak.contents.EmptyArray()
    values = rng.integers(-9, 10, n).astype("int64")
    layout = ak.contents.NumpyArray(values.astype(kind) if kind != "bool" else values > 0)
    if data.draw(st.integers(0, 4)) == 0 and n:  # a regular inner dim
        size = data.draw(st.integers(0, 3))
        layout = ak.contents.RegularArray(layout, size, zeros_length=data.draw(st.integers(0, 3)))
    return layout


def _ak_wrap(data, ak, rng, content):
    n = len(content)
    kind = data.draw(st.sampled_from(["offsets", "offsets", "offsets", "list", "regular", "option", "indexed",
                                      "bytemask", "unmasked"]))
    count = data.draw(st.integers(0, 6))
    if kind == "offsets":
        offsets = _crafted_offsets(data, rng, count, n, wide=True)
        return ak.contents.ListOffsetArray(ak.index.Index64(offsets), content)
    if kind == "list":
        starts = rng.integers(-1, n + 2, count).astype(np.int64)
        stops = np.minimum(starts + rng.integers(-1, 4, count), n + 2).astype(np.int64)
        if data.draw(st.booleans()):  # mostly in range
            starts, stops = np.clip(starts, 0, n), np.clip(np.maximum(stops, starts), 0, n)
        return ak.contents.ListArray(ak.index.Index64(starts), ak.index.Index64(stops), content)
    if kind == "regular":
        size = data.draw(st.integers(0, 3))
        return ak.contents.RegularArray(content, size, zeros_length=data.draw(st.integers(0, 3)))
    if kind in ("option", "indexed"):
        index = rng.integers(-1 if kind == "option" else 0, n + (1 if data.draw(st.integers(0, 4)) == 0 else 0),
                             count).astype(np.int64)
        if kind == "option" and data.draw(st.booleans()):
            index = np.abs(index)
        cls = ak.contents.IndexedOptionArray if kind == "option" else ak.contents.IndexedArray
        return cls(ak.index.Index64(index), content)
    if kind == "bytemask":
        mask = (rng.random(n) < (0.2 if data.draw(st.booleans()) else 0.0)).astype(np.int8)
        return ak.contents.ByteMaskedArray(ak.index.Index8(mask), content, valid_when=False)
    return ak.contents.UnmaskedArray(content)


class _Unreadable(Exception):
    """The part of a layout that a reader reaches breaks a rule (an index out of range, a negative start)."""


def _ak_ref(layout, start, stop):
    """The items ``[start, stop)`` of ``layout`` as Python values, read one at a time with every index checked.

    Only what is reached is read, so a fault in a part no list points at is no fault here (awkward's
    ``validity_error`` reports those too, and its own readers wrap negative starts from the end).
    """
    name = type(layout).__name__
    if not 0 <= start <= stop <= len(layout):
        raise _Unreadable(f"{name}[{start}:{stop}] of {len(layout)}")
    if name == "EmptyArray":
        return []
    if name == "NumpyArray":
        return np.asarray(layout.data)[start:stop].tolist()
    if name in ("ListOffsetArray", "ListArray"):
        if name == "ListOffsetArray":
            offsets = np.asarray(layout.offsets.data)
            starts, stops = offsets[:-1], offsets[1:]
        else:
            starts, stops = np.asarray(layout.starts.data), np.asarray(layout.stops.data)
        pairs = zip(starts[start:stop].tolist(), stops[start:stop].tolist())
        return [[] if a == b else _ak_ref(layout.content, a, b) for a, b in pairs]
    if name == "RegularArray":
        size = layout.size
        return [_ak_ref(layout.content, i * size, (i + 1) * size) for i in range(start, stop)]
    if name == "UnmaskedArray":
        return _ak_ref(layout.content, start, stop)
    if name == "ByteMaskedArray":
        mask = np.asarray(layout.mask.data).astype(bool) == layout.valid_when
        return [_ak_ref(layout.content, i, i + 1)[0] if mask[i] else None for i in range(start, stop)]
    if name in ("IndexedArray", "IndexedOptionArray"):
        index = np.asarray(layout.index.data)
        out = []
        for i in range(start, stop):
            j = int(index[i])
            if j < 0 and name == "IndexedOptionArray":
                out.append(None)
            else:
                out.append(_ak_ref(layout.content, j, j + 1)[0])
        return out
    raise _Unreadable(f"no reference for {name}")


def _has_none(x):
    return x is None or (isinstance(x, list) and any(_has_none(v) for v in x))


@target
def awkward_crafted(data):
    """lt.from_awkward of layouts built node by node: refused when what it reaches is broken or holds a None,
    else exactly those items (checked against ak.to_list where awkward calls the layout valid)."""
    import awkward as ak

    rng = _rng(data)
    layout = _ak_leaf(data, ak, rng)
    try:
        for _ in range(data.draw(st.integers(0, 3))):
            layout = _ak_wrap(data, ak, rng, layout)
    except (ValueError, TypeError, IndexError):  # awkward's own constructor refused it
        return
    try:
        want = _ak_ref(layout, 0, len(layout))
    except _Unreadable:
        want = _Unreadable
    fault = ak.validity_error(layout)
    if not fault:
        assert want is not _Unreadable and repr(want) == repr(ak.to_list(layout)), "the reference reader is wrong"
    arr = ak.Array(layout, check_valid=False) if fault else ak.Array(layout)
    t = attempt(lt.from_awkward, arr)
    if want is _Unreadable or _has_none(want):
        assert t is None, f"from_awkward accepted a layout it cannot read right ({fault}): lod {t.lod()}"
        return
    if t is None:
        return  # refusals of readable layouts (datetimes, EmptyArray inner dims) are allowed
    got = t.tolist()
    assert repr(got) == repr(want) or (not got and not want), (got, want, layout.form.type)
    check_tensor(t)
