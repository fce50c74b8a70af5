"""awkward-array: a LoDTensor is a nest of ``ListOffsetArray``s over a ``NumpyArray``, buffers shared.

>>> import lodtensor as lt
>>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 3], [0, 2, 2, 5]])
>>> a = t.to_awkward()
>>> a.tolist()
[[[0.0, 1.0], []], [[2.0, 3.0, 4.0]]]
>>> lt.from_awkward(a).lod()
[[0, 2, 3], [0, 2, 2, 5]]
"""

import numpy as np

from ..backend import backend_name_of
from ..lod import LoD
from ..tensor import LoDTensor
from ._lazy import lod_tensor_arg, require

__all__ = ["to_awkward", "from_awkward"]


def _ak(what):
    return require("awkward", "awkward", what)


def _host_data(t, what):
    """The data as NumPy in the machine's byte order (shared when it already is; awkward refuses the other)."""
    lod_tensor_arg(t, what)
    data = t._check_fits(what)
    name = backend_name_of(data)
    if name == "torch" and data.device.type == "cpu":
        # bfloat16 widened as numpy() does; conj/neg views resolved (NumPy has no lazy conjugate): copies
        data = t.backend.to_numpy(data.detach().resolve_conj().resolve_neg())
    elif name != "numpy":
        raise ValueError(f"{what}: the data is on {t.device}; call .cpu() first")
    if not data.dtype.isnative:
        data = data.astype(data.dtype.newbyteorder("="))  # awkward takes native byte order only: a copy
    return data


def to_awkward(t):
    """This tensor as an ``ak.Array`` of nested ``ListOffsetArray`` levels; data and offsets shared.

    One ``ListOffsetArray`` per lod level over a ``NumpyArray`` of the rows
    (trailing dims stay in its shape). Host data only (torch CPU data is
    shared through NumPy; call ``.cpu()`` for GPU data). Copied, not shared:
    data in the other byte order (swapped), torch bfloat16 (widened to
    float32, as ``numpy()`` does) and torch conjugate/negative views (resolved).

    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 2, 3]])
    >>> a = t.to_awkward()
    >>> str(a.type), a.tolist()
    ('2 * var * 2 * float64', [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0]]])
    """
    ak = _ak("to_awkward()")
    data = _host_data(t, "to_awkward()")
    layout = ak.contents.NumpyArray(data)
    for offsets in reversed(t.lod.levels):
        layout = ak.contents.ListOffsetArray(ak.index.Index64(offsets), layout)
    return ak.Array(layout)


_OPTIONS = ("IndexedOptionArray", "ByteMaskedArray", "BitMaskedArray", "UnmaskedArray")


def _plain(ak, layout, where, depth):
    """``layout`` without the wrappers that hold no structure of their own.

    An option type with no missing value (``ak.from_arrow`` and
    ``ak.from_parquet`` mark every Arrow level nullable) is unwrapped (shared
    for ``UnmaskedArray``; a gather, a copy, for the others), an
    ``IndexedArray`` is gathered (a copy), an ``EmptyArray`` (lists whose items
    have no type yet) becomes float64, as in ``ak.to_numpy``; a missing value raises.
    """
    while True:
        kind = type(layout).__name__
        if kind == "UnmaskedArray":
            layout = layout.content
        elif kind in _OPTIONS:
            index = np.asarray(layout.to_IndexedOptionArray64().index.data)
            missing = np.flatnonzero(index < 0)
            if missing.size:
                raise ValueError(
                    f"{where}: the array has missing values (option type {layout.form.type}): {missing.size} None(s) "
                    f"at depth {depth}, first at index {int(missing[0])}; fill or drop them "
                    f"(ak.fill_none, ak.drop_none)"
                )
            layout = layout.project()
        elif isinstance(layout, ak.contents.IndexedArray):
            layout = layout.project()
        elif isinstance(layout, ak.contents.EmptyArray):
            layout = layout.to_NumpyArray(np.float64)
        else:
            return layout


def _check_list_array(layout, where, depth):
    """Refuse a ``ListArray`` whose non-empty lists break awkward's validity rules, before converting it.

    Its conversion to offsets counts a negative start from the end of the content (a silently
    wrong list) and allocates the total length of the lists before it checks their stops against
    the content (a few bytes of stops past it asked for GiBs).
    """
    starts = np.asarray(layout.starts.data)
    stops = np.asarray(layout.stops.data)[: len(starts)]
    size = len(layout.content)
    bad = np.flatnonzero((starts != stops) & ((starts < 0) | (stops < starts) | (stops > size)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{where}: ListArray at depth {depth} has list {i} from {int(starts[i])} to {int(stops[i])}; "
            f"a list must lie within the {size} items of its content (0 <= start <= stop <= {size})"
        )


def from_awkward(a):
    """A LoDTensor from an awkward array of variable-length lists of numbers; buffers shared where possible.

    ``ListOffsetArray`` levels give lod levels: the offsets are copied once
    into the LoD's frozen memory (awkward's are writable; those that came
    from :func:`to_awkward` are recognised and shared), the data is shared;
    ``ListArray`` levels are made contiguous first (a copy); a
    ``RegularArray`` above a variable-length level is a lod level of equal
    lengths; ``RegularArray`` or multi-dim ``NumpyArray`` inner levels become
    trailing dims. Option types with no missing value (what ``ak.from_arrow``
    gives) and ``IndexedArray`` are gathered (a copy unless ``UnmaskedArray``);
    empty lists of unknown type give float64 data. Every level goes through the LoD gate.

    Raises
    ------
    ValueError
        Missing values (``None``). A level with no list (``ak.Array([])`` of a list type, or the
        level under lists that are all empty) is a lod level of no sequence, offsets ``[0]``.
    TypeError
        Records, unions, strings or anything that is not lists of numbers.

    Examples
    --------
    >>> import awkward as ak
    >>> t = from_awkward(ak.Array([[1, 2, 3], [], [4]]))
    >>> t.lod(), t.data.tolist()
    ([[0, 3, 3, 4]], [1, 2, 3, 4])
    >>> from_awkward(ak.Array([[1, None]]))
    Traceback (most recent call last):
    ...
    ValueError: from_awkward(): the array has missing values (option type ?int64): 1 None(s) at depth 1, ...
    """
    ak = _ak("from_awkward()")
    where = "from_awkward()"
    if isinstance(a, (str, bytes)) or a is None:
        raise TypeError(f"from_awkward(): expected an ak.Array (or nested lists of numbers), got {type(a).__name__}")
    if getattr(a, "is_nested", False) is True:  # read as its dense values(): the components would be lost
        raise TypeError(f"{where}: expected an ak.Array, got a nested tensor ({type(a).__name__}); a nested tensor "
                        f"ragged in its first component dim is a LoDTensor already: nt.to_lod_tensor()")
    if isinstance(a, ak.Record):
        raise TypeError(f"{where}: expected an ak.Array, got an ak.Record (one record of fields); pass one of "
                        f"its fields, e.g. record[{(a.fields or ['name'])[0]!r}]")
    layout = ak.to_layout(a)
    levels = []
    while True:
        layout = _plain(ak, layout, where, len(levels))
        if isinstance(layout, ak.contents.RegularArray) and not layout.purelist_isregular:
            layout = layout.to_ListOffsetArray64(False)  # a var level below: this one is a lod level
        if isinstance(layout, ak.contents.ListArray):
            _check_list_array(layout, where, len(levels))
            layout = layout.to_ListOffsetArray64(True)  # starts/stops not contiguous: a copy
        if not isinstance(layout, ak.contents.ListOffsetArray):
            break
        if layout.parameter("__array__") in ("string", "bytestring"):
            raise TypeError(f"{where}: strings are not numbers; tokenize them first")
        offsets = np.asarray(layout.offsets.data)
        first, last = int(offsets[0]), int(offsets[-1])
        size = len(layout.content)
        if first != last and not 0 <= first <= last <= size:  # else a negative slice counts from the end
            raise ValueError(f"{where}: ListOffsetArray at depth {len(levels)} runs from offset {first} to {last}; "
                             f"its lists must lie within the {size} items of its content")
        if first != 0 or offsets.dtype != np.int64:
            offsets = offsets.astype(np.int64) - first
        levels.append(offsets)
        layout = layout.content[first:last] if first != last else layout.content[0:0]
    rows, row_shape = len(layout), []  # counted here: rows of width 0 hold no values to count
    while isinstance(layout, ak.contents.RegularArray):
        row_shape.append(layout.size)
        layout = _plain(ak, layout.content[: len(layout) * layout.size], where, len(levels) + len(row_shape))
    if (not isinstance(layout, ak.contents.NumpyArray) or layout.parameter("__array__") in ("char", "byte")
            or np.dtype(layout.dtype).kind not in "biufc"):  # datetime64 / timedelta64: not numbers either
        kind = type(layout).__name__
        raise TypeError(f"{where}: expected lists of numbers, got {kind} of type {layout.form.type}")
    data = np.asarray(layout.data)
    if row_shape:
        data = data.reshape((rows, *row_shape, *data.shape[1:]))
    if not levels:
        return LoDTensor(data)
    # awkward's offsets are writable NumPy memory: the gate copies them into the LoD's frozen memory
    # (O(sequences)), except those that came from to_awkward(), which it recognises and shares
    return LoDTensor(data, LoD(levels, num_rows=int(data.shape[0])))
