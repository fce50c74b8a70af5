"""``index_put`` and ``index_put_``: values written (or added) at integer-indexed positions of the components.

``nt.index_put((b, i, ...), values)`` sets ``nt[b[t]][i[t], ...] = values[t]`` for every position ``t`` of
the broadcast index arrays, as torch 2.13's jagged layout runs it (the component index first, then the
component dims in order, at least the component index). The component dims after the indexed ones are
written whole: ``values`` broadcasts to ``(*index shape, *those dims)``, with 1 for a ragged one (one value
along it, as ``nt.index_put((b,), row)`` fills whole components with ``row``).

The positions are computed on the host from the index arrays (one device read when they live on a GPU, to
check them) and become one scatter (``accumulate=True``: one scatter-add) on the flat buffer, so every
backend runs it and torch data keeps autograd (to the input and to ``values``).
"""

import numpy as np

from ..backend import backend_name_of
from ..errors import ShapeError
from . import _holes as holes
from ._broadcast import check_nested, same_backend, scalar_like
from ._dtypes import kind_of, torch_name
from ._ops import fill_scalar
from ._pointwise import write_into
from ._registry import OP_TABLE, implements
from ._tensor import NestedTensor, make

__all__ = ["index_put", "index_put_", "setitem"]


def index_put(input, indices, values, accumulate=False):
    """A copy of ``input`` with ``values`` written at ``indices`` (added with ``accumulate=True``).

    ``indices``: a tuple of integer arrays of ``input``'s library (broadcast together): the component index,
    then indices into the component dims (negative ones count from the end of each component). ``values``: a
    dense array of ``input``'s dtype broadcasting to ``(*index shape, *the dims not indexed)``, 1 for a ragged
    one. torch 2.13's jagged layout checks the ragged index against ``lengths()[t]`` instead of the length of
    component ``b[t]`` (it refuses most calls, and takes a negative index from the component before); this
    checks each index against its own component. Masks (bool or nested indices) are refused: use
    ``masked_fill`` or ``where``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 2)), np.zeros((1, 2))])
    >>> out = nt.index_put((np.array([0, 1]), np.array([-1, 0])), np.array([5.0, 7.0]))
    >>> [c.tolist() for c in out.unbind()]
    [[[0.0, 0.0], [5.0, 7.0]], [[5.0, 7.0]]]
    >>> [c.tolist() for c in nt.index_put((np.array([1, 1]),), np.array([1.0, 2.0]), accumulate=True).unbind()]
    [[[0.0, 0.0], [0.0, 0.0]], [[2.0, 4.0]]]
    """
    check_nested(input, "index_put()")
    be = input.backend
    buf = input._buffer
    if not isinstance(accumulate, (bool, np.bool_)):
        raise TypeError(f"index_put(): accumulate must be a bool, got {type(accumulate).__name__}")
    positions, picks = _positions(input, indices, values)
    if positions.size == 0:
        out = be.clone(buf)
    else:
        pos = be.from_host(positions, like=buf, dtype=np.int64)
        vals = be.gather(be.flat(be.contiguous(values)), be.from_host(picks, like=buf, dtype=np.int64))
        out = be.scatter_add(buf, pos, vals) if accumulate else be.scatter(be.clone(buf), pos, vals)
    return make(out, input._struct, input._layout)


def index_put_(input, indices, values, accumulate=False):
    """:func:`index_put` written into ``input`` (returned).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros(2), np.zeros(3)])
    >>> nt.index_put_((np.array([1]), np.array([2])), np.array([4.0])) is nt, nt.to_tensor_list()[1].tolist()
    (True, [0.0, 0.0, 4.0])
    """
    return write_into(input, index_put(input, indices, values, accumulate), "index_put_()")


def _index_arrays(input, indices):
    """The index arrays on the host, int64, broadcast together."""
    where = "index_put()"
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{where}: indices must be a tuple of index arrays, got {type(indices).__name__}")
    if not indices:
        raise IndexError(f"{where}: indices must hold at least the component index (dim 0), got none")
    if len(indices) > input.dim():
        raise IndexError(f"{where}: too many indices: got {len(indices)} but the nested tensor has {input.dim()} "
                         f"dims")
    host = []
    for i, ix in enumerate(indices):
        if isinstance(ix, NestedTensor):
            raise TypeError(f"{where}: indices[{i}] is a NestedTensor; index with dense integer arrays (a mask "
                            f"of the input's structure: use masked_fill or where)")
        if backend_name_of(ix) is None:
            raise TypeError(f"{where}: indices[{i}] must be an integer array of the input's library, got "
                            f"{type(ix).__name__}")
        same_backend(where, input._array(), ix)
        kind = kind_of(ix.dtype)
        if kind == "b" or torch_name(ix.dtype) == "Byte":  # (torch reads uint8 indices as a mask too)
            raise TypeError(f"{where}: indices[{i}] is a {torch_name(ix.dtype)} mask; index with integer arrays "
                            f"(the mask's nonzero()), or use masked_fill or where")
        if kind not in "iu":
            raise TypeError(f"{where}: indices[{i}] must hold integers (tensors used as indices must be long, "
                            f"int, byte or bool tensors), got dtype {ix.dtype}")
        host.append(np.asarray(input.backend.to_numpy(ix), dtype=np.int64))
    try:
        return np.broadcast_arrays(*host)
    except ValueError:
        shapes = [list(h.shape) for h in host]
        raise IndexError(f"{where}: shape mismatch: indexing tensors could not be broadcast together with shapes "
                         f"{shapes}") from None


def _in_range(index, size, where_dim, components):
    """``index`` with negative entries counted from ``size`` (per entry); an IndexError names the first out of
    range."""
    bad = (index < -size) | (index >= size)
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        of = "" if components is None else f" of component {int(components[t])}"
        raise IndexError(f"index_put(): index {int(index[t])} is out of bounds for {where_dim}{of}, whose size is "
                         f"{int(np.broadcast_to(size, index.shape)[t])}")
    return np.where(index < 0, index + size, index)


def _positions(input, indices, values):
    """``(positions, picks)``: the buffer positions written and, for each, the flat index of its value in
    ``values`` (both host int64, 1-d)."""
    where = "index_put()"
    st = input._struct
    if st.outer:
        raise ShapeError(f"{where}: nested tensors with outer ragged levels are not supported; index their "
                         f"components (unbind the outer level) instead")
    index = _index_arrays(input, indices)
    if isinstance(values, NestedTensor) or backend_name_of(values) is None:
        raise TypeError(f"{where}: values must be a dense array of the input's library, got "
                        f"{type(values).__name__}")
    same_backend(where, input._array(), values)
    if values.dtype != input.dtype:
        raise TypeError(f"{where}: Index put requires the source and destination dtypes match, got "
                        f"{torch_name(input.dtype)} for the destination and {torch_name(values.dtype)} for the source")
    shape = index[0].shape
    k = len(index)
    regular = st.regular
    sizes_all = st.sizes
    block = tuple(int(sizes_all[0, d]) if st.n and regular[d] else 1 for d in range(k - 1, st.rank))
    target = shape + block
    vshape = tuple(values.shape)
    if len(vshape) > len(target) or any(v not in (1, t) for v, t in zip(vshape[::-1], target[::-1])):
        raise ShapeError(f"{where}: values of shape {vshape} do not broadcast to {target}: the index shape "
                         f"{shape}, then the component dims after the indexed ones, with 1 for a ragged dim")
    comp = _in_range(index[0].reshape(-1), st.n, "dim 0 (the components)", None)
    if comp.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sizes = sizes_all[comp]  # (K, rank)
    strides = np.ones_like(sizes)
    if st.rank > 1:
        strides[:, :-1] = np.cumprod(sizes[:, :0:-1], axis=1)[:, ::-1]
    base = st.offsets[comp].copy()
    for j in range(1, k):
        i = _in_range(index[j].reshape(-1), sizes[:, j - 1], f"dim {j}", comp)
        base += i * strides[:, j - 1]
    blk = sizes[:, k - 1:]  # the dims written whole, per position
    count = blk.prod(axis=1)
    total = int(count.sum())
    starts = np.zeros(count.size, np.int64)
    np.cumsum(count[:-1], out=starts[1:])
    owner = np.repeat(np.arange(count.size), count)
    local = np.arange(total, dtype=np.int64) - starts[owner]
    positions = base[owner] + local
    # the flat index into values (broadcast): its own contiguous strides, 0 along its size-1 dims
    full = (1,) * (len(target) - len(vshape)) + vshape
    vstrides = np.zeros(len(full), np.int64)
    step = 1
    for d in range(len(full) - 1, -1, -1):
        vstrides[d] = step if full[d] != 1 else 0
        step *= full[d]
    picks = np.zeros(total, np.int64)
    if shape:
        picks += (np.stack(np.unravel_index(owner, shape), axis=1) * vstrides[: len(shape)]).sum(axis=1)
    rest = local
    for d in range(blk.shape[1] - 1, -1, -1):  # the block coordinates, last dim first (one pass per dim)
        extent = blk[owner, d]
        picks += (rest % np.maximum(extent, 1)) * vstrides[len(shape) + d]
        rest = rest // np.maximum(extent, 1)
    return positions, picks


implements("index_put", "torch.index_put", "torch.Tensor.index_put")(index_put)
implements("index_put_", "torch.index_put_", "torch.Tensor.index_put_")(index_put_)


def setitem(input, index, value):
    """``nt[index] = value``: an index that starts with a component (``nt[i]``, ``nt[i, j]``, ``nt[i, 1:, 0]``)
    writes ``value`` into that component's view of the storage, as torch's jagged layout does; a bool nested
    tensor of ``input``'s structure as the index writes a number where it is True (``masked_fill_``; torch's
    jagged layout refuses it). A number is converted as torch converts it (-1 into uint8 is 255, 300 refused);
    a dense ``value`` broadcasts to the part written, as a dense tensor's. Other indices (a slice or ``...``
    over dim 0) are refused, as torch's jagged layout refuses them.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1, 2, 3], [4]])
    >>> nt[0, 1:] = 9
    >>> ln.setitem(nt, 1, np.array([7]))  # (what nt[1] = np.array([7]) runs)
    >>> nt.to_tensor_list()
    [array([1, 9, 9]), array([7])]
    """
    check_nested(input, "__setitem__")
    if isinstance(index, NestedTensor):
        OP_TABLE["masked_fill_"](input, index, value)
        return
    items = index if isinstance(index, tuple) else (index,)
    if not items or not isinstance(items[0], (int, np.integer)) or isinstance(items[0], (bool, np.bool_)):
        raise ShapeError(f"__setitem__: an index must start with a component (nt[i] = ..., nt[i, j] = ...), as "
                         f"torch's jagged layout's; got {index!r}. Write where a mask holds with masked_fill_, "
                         f"at positions with index_put_")
    if isinstance(value, NestedTensor):
        raise TypeError("__setitem__: value must be a number or a dense array, got a NestedTensor")
    holes.check_writable(input)
    part = OP_TABLE["select"](input, 0, items[0])  # a view of the component's storage
    if isinstance(part, NestedTensor):  # a document of a tensor with outer levels: its sentences
        if len(items) > 1:
            setitem(part, items[1:], value)
        else:
            OP_TABLE["fill_"](part, value)
        input._written()
        return
    if scalar_like(value) is not None:
        value = fill_scalar(value, input.dtype, "__setitem__")  # (a number as torch converts it)
    else:
        same_backend("__setitem__", part, value)
    part[items[1:] if len(items) > 1 else ...] = value
    if getattr(input, "_stamp", None) is None:  # (with holes the component is a view of the values, which the
        input._written()  # next read gathers again: writing the buffer back would undo the write)


NestedTensor.__setitem__ = setitem
