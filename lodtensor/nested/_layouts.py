"""Layouts of the NestedTensor-as-unifying-datastructure design, and the repr.

Masked (padded + mask), Packed (flat data + offsets), PackedSequence (torch's
RNN input) and List (the components), plus the LoD core: ``to_lod_tensor``
shares the buffer when only the first component dim is ragged.
"""

import enum

import numpy as np

from ..errors import ShapeError
from ..lod import LoD
from ..ops._packed import packed_sequence
from ..tensor import _wrap
from ._broadcast import check_nested
from ._holes import copied
from ._registry import OP_TABLE, implements
from ._shape import to_padded_tensor
from ._structure import one_level
from ._tensor import _components

__all__ = ["Layout", "to_layout", "to_padded", "to_masked", "to_packed", "to_packed_sequence", "to_lod_tensor"]


class Layout(enum.Enum):
    """The layouts of the NestedTensor-layouts design, for ``nt.to(layout)``.

    ``Padded``: the padded array; ``Masked``: ``(padded, mask)``; ``Packed``:
    ``(flat data, offsets)``; ``PackedSequence``: torch's RNN input; ``List``:
    the components; ``LoD``: a :class:`~lodtensor.LoDTensor` (zero-copy when
    only the first component dim is ragged).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))])
    >>> nt.to(ln.Layout.Masked)[1].tolist()
    [[True, True], [True, False]]
    >>> [c.shape for c in nt.to(ln.Layout.List)]
    [(2, 3), (1, 3)]
    """

    Padded = "to_padded"
    Masked = "to_masked"
    Packed = "to_packed"
    PackedSequence = "to_packed_sequence"
    List = "to_tensor_list"
    LoD = "to_lod_tensor"


def layout_of(x):
    """``x`` as a :class:`Layout` (a member or its name, any case, underscores optional), else None."""
    if isinstance(x, Layout):
        return x
    if isinstance(x, str):
        key = x.lower().replace("_", "")
        return next((m for m in Layout if m.name.lower() == key), None)
    return None


def to_layout(input, layout, **kwargs):
    """``input`` in ``layout`` (a :class:`Layout` or its name: ``"masked"``, ``"packed_sequence"``...)."""
    member = layout_of(layout)
    if member is None:
        raise ShapeError(f"to(): layout must be one of {[m.name for m in Layout]}, got {layout!r}")
    if member is Layout.List:
        return input.to_tensor_list(**kwargs)
    return OP_TABLE[member.value](input, **kwargs)


@implements("to_padded")
def to_padded(input, padding_value=0, output_size=None):
    """The Masked layout's data: same as :func:`to_padded_tensor` with ``padding_value``.

    >>> import lodtensor.nested as ln
    >>> ln.to_padded(ln.nested_tensor([[1, 2], [3]]), -1).tolist()
    [[1, 2], [3, -1]]
    """
    return to_padded_tensor(input, padding_value, output_size)


def _min_mask_dim(st):
    irregular = [d for d, r in enumerate(st.regular) if not r]
    return (irregular[-1] + 2) if irregular else 1


@implements("to_masked")
def to_masked(input, padding_value=0, mask_dim=None):
    """``(padded, mask)``: the padded data and a bool mask, True where a component has data.

    ``mask`` has the leading ``mask_dim`` dims of ``padded``; by default the
    fewest that describe the raggedness (through the last irregular dim), so
    ``(batch, (tokens), hidden)`` data gets a ``(batch, max_tokens)`` mask.

    >>> import lodtensor.nested as ln
    >>> padded, mask = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))]).to_masked()
    >>> padded.shape, mask.tolist()
    ((2, 2, 3), [[True, True], [True, False]])
    """
    check_nested(input, "to_masked()")
    one_level(input, "to_masked()")
    st = input._struct
    lowest = _min_mask_dim(st)
    if mask_dim is None:
        mask_dim = lowest
    if not lowest <= mask_dim <= input.dim():
        raise ShapeError(
            f"to_masked(): mask_dim must be in [{lowest}, {input.dim()}] to describe the irregular dims, got {mask_dim}"
        )
    padded = to_padded_tensor(input, padding_value)
    dims = tuple(int(s) for s in padded.shape[1:mask_dim])
    mask = np.ones((st.n,) + dims, dtype=bool)
    for j, width in enumerate(dims):
        shape = [st.n] + [1] * len(dims)
        shape[j + 1] = width
        mask &= (np.arange(width) < st.sizes[:, j : j + 1]).reshape(shape)
    return padded, input.backend.from_host(mask, like=padded)


@implements("to_packed")
def to_packed(input):
    """``(data, offsets)`` sharing the buffer: the Packed layout.

    When only the first component dim is ragged, ``data`` is the rows
    ``(sum of lengths, *row_shape)`` and ``offsets`` the row offsets (a
    one-level LoD); otherwise ``data`` is the flat element buffer and
    ``offsets`` the element offsets (``nested_size()`` gives the shapes).

    >>> import lodtensor.nested as ln
    >>> data, offsets = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))]).to_packed()
    >>> data.shape, offsets.tolist()
    ((3, 3), [0, 2, 3])
    """
    check_nested(input, "to_packed()")
    one_level(input, "to_packed()")
    st = input._struct
    be = input.backend
    buf = copied(input, input._buffer)  # (with holes: a copy; the buffer is gathered again on each read)
    if st.is_lod:
        offsets, row_shape = st.rows()
        data = buf.reshape((int(offsets[-1]),) + row_shape)
    else:
        offsets, data = st.offsets, buf
    return data, be.from_host(offsets.copy(), like=buf)


@implements("to_packed_sequence")
def to_packed_sequence(input, enforce_sorted=False):
    """A torch ``PackedSequence`` of the components (torch needed; NumPy data is shared, not copied,
    on the way in). Components must be non-empty with equal trailing dims.

    >>> import lodtensor.nested as ln
    >>> ln.to_packed_sequence(ln.nested_tensor([[1.0, 2.0], [3.0]])).batch_sizes.tolist()
    [2, 1]
    """
    check_nested(input, "to_packed_sequence()")
    one_level(input, "to_packed_sequence()")
    st = input._struct
    if st.rank == 0 or not all(st.regular[1:]):
        raise ShapeError(
            "to_packed_sequence(): components must be ragged in their first dim only (sequences of "
            "equal-shaped steps)"
        )
    if st.n == 0 or (st.sizes[:, 0] == 0).any():
        raise ShapeError(
            "to_packed_sequence(): every component needs at least one step (torch refuses empty sequences)"
        )
    return _pack(input.to_torch(), st.sizes[:, 0], enforce_sorted)


def _pack(nt, lengths, enforce_sorted):
    """``pack_sequence(list(nt.unbind()), enforce_sorted)`` in one gather of the rows: no Python list of
    components (same data, batch sizes and indices; the order of equal lengths is torch's sort's)."""
    import torch  # noqa: PLC0415 - torch is needed for the result

    if enforce_sorted:
        up = np.flatnonzero(lengths[1:] > lengths[:-1])
        if up.size:
            j = int(up[0])
            raise ShapeError(
                f"to_packed_sequence(): `lengths` array must be sorted in decreasing order when "
                f"`enforce_sorted` is True, but component {j} has {lengths[j]} steps and component {j + 1} "
                f"{lengths[j + 1]}; pass enforce_sorted=False"
            )
    row_shape = tuple(int(s) for s in nt._struct.sizes[0, 1:])  # regular past the first dim (checked)
    return packed_sequence(nt._buffer.reshape((int(lengths.sum()),) + row_shape), lengths, enforce_sorted, torch)


@implements("to_lod_tensor")
def to_lod_tensor(input):
    """A LoDTensor over the rows, sharing the buffer (only the first component dim ragged): one level, plus
    the outer levels of a nested tensor with two ragged dims (documents, sentences).

    >>> import lodtensor.nested as ln
    >>> t = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))]).to_lod_tensor()
    >>> t.lod(), t.shape()
    ([[0, 2, 3]], [3, 3])
    """
    check_nested(input, "to_lod_tensor()")
    st = input._struct
    if not st.is_lod:
        irregular = [d + 1 for d, r in enumerate(st.regular) if not r][1:] if st.rank else []
        raise ShapeError(
            f"to_lod_tensor(): only nested tensors of at least one component dim, ragged in the "
            f"first component dim only, are a LoDTensor; this one has {st.n} components of rank "
            f"{st.rank}" + (f", irregular dims {[d for d in irregular]}" if irregular else "")
        )
    offsets, row_shape = st.rows()
    data = copied(input, input._buffer).reshape((int(offsets[-1]),) + row_shape)  # (with holes: a copy)
    lod = st.lod() if not st.outer else LoD._from_valid([*st.outer, offsets])  # valid: built level by level
    return _wrap(data, lod, input.place)


# -- repr -------------------------------------------------------------------------------------
@implements("to_tensor_list")
def to_tensor_list(input):
    """The components as a list of views (the List layout).

    >>> import lodtensor.nested as ln
    >>> ln.to_tensor_list(ln.nested_tensor([[1, 2], [3]]))
    [array([1, 2]), array([3])]
    """
    check_nested(input, "to_tensor_list()")
    return list(_components(input))
