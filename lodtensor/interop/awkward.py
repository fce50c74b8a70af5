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
from ._lazy import require

__all__ = ["to_awkward", "from_awkward"]


def _ak(what):
    return require("awkward", "awkward", what)


def to_awkward(t):
    """This tensor as an ``ak.Array`` of nested ``ListOffsetArray`` levels; data and offsets shared.

    One ``ListOffsetArray`` per lod level over a ``NumpyArray`` of the rows
    (trailing dims stay in its shape). Host data only (torch CPU data is
    shared through NumPy; call ``.cpu()`` for GPU data).

    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 2, 3]])
    >>> a = t.to_awkward()
    >>> str(a.type), a.tolist()
    ('2 * var * 2 * float64', [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0]]])
    """
    ak = _ak("to_awkward()")
    data = t._check_fits("to_awkward()")
    name = backend_name_of(data)
    if name == "torch" and data.device.type == "cpu":
        data = data.detach().numpy()
    elif name != "numpy":
        raise ValueError(f"to_awkward(): the data is on {t.device}; call .cpu() first")
    layout = ak.contents.NumpyArray(data)
    for offsets in reversed(t.lod.levels):
        layout = ak.contents.ListOffsetArray(ak.index.Index64(offsets), layout)
    return ak.Array(layout)


def from_awkward(a):
    """A LoDTensor from an awkward array of variable-length lists of numbers; buffers shared where possible.

    ``ListOffsetArray`` levels give lod levels: the offsets are copied once
    into the LoD's frozen memory (awkward's are writable; those that came
    from :func:`to_awkward` are recognised and shared), the data is shared;
    ``ListArray`` levels are made contiguous first (a copy);
    ``RegularArray`` or multi-dim ``NumpyArray`` inner levels become trailing
    dims. Every level goes through the LoD gate.

    Raises
    ------
    ValueError
        Missing values (option types) or a level with no list.
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
    ValueError: from_awkward(): the array has missing values (option type ?int64); fill or drop them
    """
    ak = _ak("from_awkward()")
    where = "from_awkward()"
    layout = ak.to_layout(a)
    levels = []
    while True:
        if isinstance(layout, ak.contents.ListArray):
            layout = layout.to_ListOffsetArray64(True)  # starts/stops not contiguous: a copy
        if isinstance(layout, ak.contents.ListOffsetArray):
            if layout.parameter("__array__") in ("string", "bytestring"):
                raise TypeError(f"{where}: strings are not numbers; tokenize them first")
            offsets = np.asarray(layout.offsets.data)
            first, last = int(offsets[0]), int(offsets[-1])
            if first != 0 or offsets.dtype != np.int64:
                offsets = offsets.astype(np.int64) - first
            if len(layout) == 0:
                raise ValueError(f"{where}: list level {len(levels)} holds no lists; a lod level needs one at least")
            levels.append(offsets)
            layout = layout.content[first:last]
            continue
        break
    row_shape = []
    while isinstance(layout, ak.contents.RegularArray):
        row_shape.append(layout.size)
        layout = layout.content[: len(layout) * layout.size]
    if isinstance(
        layout,
        (
            ak.contents.IndexedOptionArray,
            ak.contents.ByteMaskedArray,
            ak.contents.BitMaskedArray,
            ak.contents.UnmaskedArray,
        ),
    ):
        raise ValueError(f"{where}: the array has missing values (option type {layout.form.type}); fill or drop them")
    if not isinstance(layout, ak.contents.NumpyArray):
        raise TypeError(f"{where}: expected lists of numbers, got {type(layout).__name__} of type {layout.form.type}")
    data = np.asarray(layout.data)
    if row_shape:
        data = data.reshape((-1, *row_shape, *data.shape[1:]))
    if not levels:
        return LoDTensor(data)
    # awkward's offsets are writable NumPy memory: the gate copies them into the LoD's frozen memory
    # (O(sequences)), except those that came from to_awkward(), which it recognises and shares
    return LoDTensor(data, LoD(levels, num_rows=int(data.shape[0])))
