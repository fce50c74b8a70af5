"""Shape ops: reshape, view, reshape_as, transpose, permute, select, unbind and to_padded_tensor.

Reshapes only rewrite the size table (the components are contiguous, so the buffer is shared); ``transpose``
is a view through a permutation of the component dims (``_permute.py``). ``select`` of a regular dim is a view
of the rows (``_views.py``); elsewhere it copies: over regular trailing dims one dense op on the buffer viewed
as rows, else grouped by component shape. Indexing (``nt[...]``) composes select, slices and unsqueeze."""

import operator

import numpy as np

from .._dense import pad_level
from ..errors import ShapeError
from ..lod import LoD
from ._broadcast import check_nested
from ._dims import components_slice, regrouped_view, slice_dim
from ._dims import unsqueeze as _unsqueeze
from ._grouped import block_of, map_components, shape_groups
from ._holes import copied, live, reshaped
from ._nn import segments_along
from ._permute import compose
from ._registry import implements
from ._structure import dropped_jag, one_level, op_dim
from ._symbolic import keep_ragged, row_inferred
from ._tensor import NestedTensor, Structure, make, normalize_dim
from ._views import aliased, component, padded_permuted, regrouped, viewed, window, with_perm

__all__ = ["reshape", "view", "reshape_as", "transpose", "permute", "select", "unbind", "to_padded_tensor"]

_T = "torch.Tensor."


# -- reshape ----------------------------------------------------------------------------------
def _new_sizes(where, nt, shape):
    st = nt._struct
    if nt._layout == "jagged" and shape and isinstance(shape[0], int) and shape[0] == -1:  # torch's jagged layout
        # keeps the batch dim for -1 too (its strided layout refuses)
        shape = (st.n, *shape[1:])
    shape = keep_ragged(where, nt, shape)
    if not shape or shape[0] != st.n:
        raise ShapeError(
            f"reshape: For now nested reshape cannot change or infer the implicit batch dimension: "
            f"shape[0] must be {st.n} (the number of components), got {list(shape)}"
        )
    shape = row_inferred(nt, shape) or shape  # torch's jagged layout: a -1 past the ragged dim is inferred
    new = np.empty((st.n, len(shape) - 1), dtype=np.int64)
    for j, size in enumerate(shape[1:], start=1):
        axis = j - 1
        if size == -1:
            if axis >= st.rank:
                raise ShapeError(
                    f"{where}: nested tensor does not infer shape: -1 at new dimension {j} of "
                    f"{list(shape)}; give new dimensions explicit sizes"
                )
            new[:, axis] = st.sizes[:, axis]
            continue
        if size < 0:
            raise ShapeError(f"{where}: invalid size {size} at dimension {j} of {list(shape)}")
        if axis < st.rank and not st.regular[axis]:
            raise ShapeError(
                f"{where}: dimension {j} is irregular; the only valid size of an irregular dimension "
                f"is -1 (keep it), got {size} in {list(shape)}"
            )
        new[:, axis] = size
    if st.jag is not None and st.n and len(shape) - 1 <= st.jag:
        raise ShapeError(
            f"{where}: dimension {st.jag + 1} is irregular; the only valid size of an irregular dimension is -1 "
            f"(keep it), but {list(shape)} has no dimension {st.jag + 1}"
        )
    old_numel = np.diff(st.offsets)
    new_numel = new.prod(axis=1) if new.shape[1] else np.ones(st.n, np.int64)
    bad = np.flatnonzero(new_numel != old_numel)
    if bad.size:
        i = int(bad[0])
        raise ShapeError(
            f"shape '{list(shape)}' is invalid for input of size {int(old_numel[i])} (component {i} "
            f"of shape {st.sizes[i].tolist()})"
        )
    return new


def _reshaped(nt, sizes, as_view=False):
    jag = nt._struct.jag  # (kept in place: _new_sizes allows only -1 there)
    jag = jag if jag is not None and jag < sizes.shape[1] else None
    if as_view and nt._perm is not None and (viewed(nt) or live(nt)) and np.array_equal(sizes, nt._struct.sizes):
        return with_perm(nt, nt._perm)  # view() of a transposed view to its shape: a view of the same storage
    if as_view and (nt._perm is not None or nt._src is not None) and (nt._struct.numel or nt._perm is not None):
        # view() of a transposed view (torch's views one only to its own shape) or of part of a regular dim: a view
        view = regrouped(nt, sizes, None, jag) if nt._perm is None else regrouped_view(nt, sizes)
        if view is not None:
            return view
        raise ShapeError(f"view size is not compatible with input tensor's size and stride (at least one dimension "
                         f"spans across two contiguous subspaces). Use .reshape(...) instead. (view(): component 0 "
                         f"of sizes {nt._struct.sizes[0].tolist()} viewed as {sizes[0].tolist()}, "
                         f"{'a transposed view' if nt._perm else 'a view of part of a regular dim'})")
    out = make(aliased(nt._buffer), nt._struct.derive(sizes, nt._struct.offsets, jag=jag), nt._layout)
    return out if nt._perm is not None else reshaped(nt, out, as_view)  # (holes: kept by a view, as torch's)


@implements("reshape", "torch.reshape", _T + "reshape")
def reshape(input, shape):
    """A view with every component reshaped: dim 0 is kept, ``-1`` keeps that dim's sizes.

    The only valid size of an irregular dim is ``-1``; new dims need explicit
    sizes. No data moves (the components are contiguous).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 6)), np.zeros((3, 6))])
    >>> nt.reshape(2, -1, 2, 3).nested_size().tolist()
    [[2, 2, 3], [3, 2, 3]]
    >>> nt.reshape(2, 4, 3)
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: reshape(): dimension 1 is irregular; the only valid size ...
    """
    check_nested(input, "reshape()")
    one_level(input, "reshape()")
    return _reshaped(input, _new_sizes("reshape()", input, shape))


@implements("view", _T + "view")
def view(input, shape):
    """As :func:`reshape`; on a transposed view or a view of part of a regular dim, a view of its storage (dims
    merged, split, of size 1 added or dropped), or torch's error where none can give it.

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.ones((2, 6)), np.ones((1, 6))]).view(2, -1, 3, 2).nested_size().tolist()
    [[2, 3, 2], [1, 3, 2]]
    """
    check_nested(input, "view()")
    one_level(input, "view()")
    return _reshaped(input, _new_sizes("view()", input, shape), as_view=True)


@implements("reshape_as", _T + "reshape_as")
def reshape_as(input, other):
    """A view of ``input`` with the nested structure of ``other`` (same element count per component).

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([np.ones((2, 6)), np.ones((1, 6))])
    >>> a.reshape_as(a.reshape(2, -1, 2, 3)).nested_size().tolist()
    [[2, 2, 3], [1, 2, 3]]
    """
    check_nested(input, "reshape_as()")
    one_level(input, "reshape_as()")
    if not isinstance(other, NestedTensor):
        raise TypeError(f"reshape_as(): other must be a NestedTensor (get_nested_tensor_impl requires a "
                        f"NestedTensor), got {type(other).__name__}")
    a, b = input._struct, other._struct
    if a.n != b.n:
        raise ShapeError(
            f"reshape: For now nested reshape cannot change or infer the implicit batch dimension: "
            f"input has {a.n} components, other {b.n}"
        )
    bad = np.flatnonzero(np.diff(a.offsets) != np.diff(b.offsets))
    if bad.size:
        i = int(bad[0])
        raise ShapeError(
            f"reshape_as(): shape {b.sizes[i].tolist()} is invalid for input of size "
            f"{int(a.offsets[i + 1] - a.offsets[i])} (component {i})"
        )
    out = make(aliased(input._buffer), b, input._layout)  # a view (never the input's leaf itself), as torch's
    return out if input._perm is not None else reshaped(input, out, False)  # (with holes: a copy)


# -- transpose / select -----------------------------------------------------------------------
@implements("transpose", "torch.transpose", "torch.swapaxes", _T + "transpose", _T + "swapaxes")
def transpose(input, dim0, dim1):
    """Swap two component dims (not dim 0); a view, as torch's (no data moves).

    The result reads the same buffer through a permutation of its dims. Ops
    that know views (transpose, unflatten, flatten, squeeze, unsqueeze,
    pointwise ops with tensors of the same layout, scaled_dot_product_attention
    over ``(B, heads, (L), E)``) work on it as it is; others copy it into
    contiguous components once (cached on the tensor).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 3)), np.zeros((4, 3))])
    >>> nt.transpose(1, 2).nested_size().tolist()
    [[3, 2], [3, 4]]
    >>> nt.transpose(0, 1)
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: Nested tensor dimension 0 cannot be transposed
    """
    check_nested(input, "transpose()")
    if 0 in (normalize_dim(dim0, input.dim()), normalize_dim(dim1, input.dim())):
        raise ShapeError("Nested tensor dimension 0 cannot be transposed")
    d0, d1 = op_dim(input, dim0, "transpose()"), op_dim(input, dim1, "transpose()")
    if d0 == 0 or d1 == 0:
        raise ShapeError("Nested tensor dimension 0 cannot be transposed")
    perm = list(compose(input._perm, input._st.rank))
    a, b = d0 - 1, d1 - 1
    perm[a], perm[b] = perm[b], perm[a]
    return with_perm(input, perm)


@implements("permute", "torch.permute", _T + "permute")
def permute(input, *dims):
    """Reorder the component dims (dim 0, and the outer ragged dims, stay first); a view, as transpose.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 3, 4)), np.zeros((5, 3, 4))])
    >>> nt.permute(0, 3, 1, 2).nested_size().tolist()
    [[4, 2, 3], [4, 5, 3]]
    """
    check_nested(input, "permute()")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    n, levels = input.dim(), len(input._st.outer)
    if len(dims) != n:
        raise ShapeError(f"permute(sizes): number of dims don't match in permute: got {len(dims)} dims for a "
                         f"{n}-dim nested tensor")
    norm = [normalize_dim(d, n) for d in dims]
    if sorted(norm) != list(range(n)):
        raise ShapeError(f"permute(): repeated dim in {tuple(dims)}")
    if norm[: levels + 1] != list(range(levels + 1)):
        kept = "dim 0 (the batch dim)" if not levels else f"dims 0..{levels} (the batch and outer ragged dims)"
        raise ShapeError(f"permute(): {kept} must stay in place, got {tuple(dims)}")
    perm = compose(input._perm, input._st.rank)
    return with_perm(input, [perm[d - levels - 1] for d in norm[levels + 1 :]])


@implements("select", "torch.select", _T + "select")
def select(input, dim, index):
    """Index ``index`` of ``dim`` in every component (dim 0: component ``index`` itself, a view; a regular
    dim: a view of the rows, as torch's jagged layout; a ragged one: a copy).

    On an irregular dim a negative index counts from the end of each component.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[[1, 2], [3, 4]], [[5, 6]]])
    >>> nt.select(1, -1).to_tensor_list()
    [array([3, 4]), array([5, 6])]
    >>> nt.select(2, 0).to_tensor_list()
    [array([1, 3]), array([5])]
    """
    check_nested(input, "select()")
    try:
        index = operator.index(index)
    except TypeError:
        raise TypeError(f"select(): index must be an integer, got {type(index).__name__} {index!r}") from None
    st = input._struct
    if st.outer and normalize_dim(dim, input.dim()) == 0:  # a document: its sentences, one level shallower
        count = st.count()
        if not -count <= index < count:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {count}")
        return input.unbind()[index % count]
    d = op_dim(input, dim, "select()")
    if d == 0:
        if not -st.n <= index < st.n:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {st.n}")
        return component(input, index % st.n)  # a view of its storage (read through a transposed view's perm)
    axis = d - 1
    sizes = st.sizes[:, axis]
    bad = np.flatnonzero((index >= sizes) | (index < -sizes))
    if bad.size:
        i = int(bad[0])
        raise IndexError(
            f"index {index} is out of bounds for dimension {d} of component {i} (the {i}th constituent "
            f"tensor) with size {int(sizes[i])}"
        )
    new_sizes = np.delete(st.sizes, axis, axis=1)
    jag = dropped_jag(st.jag, axis)
    # selecting in the jagged dim itself (torch refuses) leaves no ragged dim: a strided-layout result
    layout = "strided" if st.jag is not None and jag is None else input._layout
    if st.n and st.regular[axis]:  # a regular dim: a view of the input's rows where it has them, as torch's
        view = window(input, axis, index % int(sizes[0]))
        if view is not None:
            return view
    ops = input.backend
    buf = input._buffer
    if st.n == 0:
        return make(buf[:0], st.derive(new_sizes, jag=jag), layout)
    if all(st.regular[axis:]):
        block = st.tail_view(buf, axis)
        out = copied(input, ops.take(block, index % int(sizes[0]), 1).reshape(-1))  # (with holes: not a view)
        return make(out, st.derive(new_sizes, jag=jag), layout)
    if all(st.regular[axis + 1 :]):
        offsets, rows, row_shape = segments_along(st, axis)
        picks = np.repeat(index % sizes, _counts(st, axis))
        be = input.backend
        rows_view = buf.reshape((rows,) + row_shape)
        out = be.gather(rows_view, be.from_host(offsets[:-1] + picks, like=rows_view))
        return make(out.reshape(-1), st.derive(new_sizes, jag=jag), layout)
    out, new = map_components(
        [input], lambda x: ops.take(x, index % x.shape[axis + 1], axis + 1), new_sizes
    )
    return make(out, new.with_jag(jag), layout)


def _counts(st, axis):
    return st.sizes[:, :axis].prod(axis=1) if axis else np.ones(st.n, np.int64)


# -- indexing -----------------------------------------------------------------------------------
def _is_int(x):  # (a 0-d integer array or tensor too, as torch takes the argmax of something)
    integer = isinstance(x, (int, np.integer)) or getattr(x, "ndim", 1) == 0 and "int" in str(getattr(x, "dtype", ""))
    return integer and not isinstance(x, (bool, np.bool_))


@implements("getitem")
def getitem(input, index):
    """``nt[index]``: a leading int picks a component (then the rest indexes it, as a dense array);
    otherwise ``...``, slices, ints and ``None`` act on the dims in order.

    Ints select (:func:`select`; on a ragged dim, counting from each component's own end), slices
    of a regular dim keep every ``step``-th element (a view of the rows, as torch's jagged layout),
    ``:`` keeps a dim, ``None`` inserts one of size 1, a slice of dim 0 keeps a run of components (a
    view; step 1). torch's jagged layout accepts ``nt[i, ...]`` and ``nt[..., j]``; slices of dim 0
    go beyond it.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.arange(12).reshape(2, 6), np.arange(24).reshape(4, 6)])
    >>> nt[1, :, -1].tolist()
    [5, 11, 17, 23]
    >>> nt[..., 1:3].nested_size().tolist(), nt[..., -1].nested_size().tolist()
    ([[2, 2], [4, 2]], [[2], [4]])
    >>> nt[1:].nested_size().tolist()
    [[4, 6]]
    >>> nt[:, 1:3]
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: slice(): not supported for NestedTensor on ragged dim
    """
    check_nested(input, "__getitem__")
    items = tuple(int(i) if _is_int(i) else i for i in (index if isinstance(index, tuple) else (index,)))
    for item in items:
        if not (item is None or item is Ellipsis or isinstance(item, slice) or _is_int(item)):
            raise IndexError(
                f"NestedTensor indices must be ints, slices, None or ... (Ellipsis), got {type(item).__name__} "
                f"{item!r}; index a component (nt[i][...]) for advanced indexing"
            )
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(item is not None and item is not Ellipsis for item in items)
    ndim = input.dim()
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    if Ellipsis in items:
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        items = items[:at] + (slice(None),) * (ndim - used) + items[at + 1 :]
    if items and _is_int(items[0]):  # a component, then the rest indexes it as a dense array
        part = select(input, 0, items[0])
        return part[items[1:]] if len(items) > 1 else part
    out, d = input, 0
    for item in items:
        if item is None:
            out = _unsqueeze(out, d)
            d += 1
        elif _is_int(item):
            if d == 0:  # after None: the new dim 0 of size 1
                raise ShapeError("unsqueeze(): not supported for NestedTensor on dim=0")
            out = select(out, d, item)
        else:
            out = _slice(out, d, item)
            d += 1
    return out


def _slice(nt, d, index):
    if index == slice(None):
        return nt
    if d == 0:
        start, stop, step = index.indices(len(nt))
        if step != 1:
            raise ShapeError(f"slice(): only a step of 1 is supported for dim 0 of a NestedTensor, got {step}")
        return components_slice(nt, start, max(start, stop))
    axis = op_dim(nt, d, "slice()") - 1
    if axis < nt._struct.rank and not nt._struct.regular[axis] and nt._struct.n:
        raise ShapeError("slice(): not supported for NestedTensor on ragged dim")
    return slice_dim(nt, d, index)


@implements("unbind", "torch.unbind", _T + "unbind")
def unbind(input, dim=0):
    """The components as a tuple of views into the buffer (dim 0 only).

    >>> import lodtensor.nested as ln
    >>> [c.shape for c in ln.unbind(ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))]))]
    [(2, 3), (1, 3)]
    """
    check_nested(input, "unbind()")
    return input.unbind(dim)


# -- padding ----------------------------------------------------------------------------------
def _padded_shape(nt, output_size):
    st = nt._struct
    if st.n:
        maxes = [st.n] + [int(m) for m in st.sizes.max(axis=0)]
    else:  # no component: its regular dims keep their sizes, as torch's (0, j1, 3) pads to (0, 0, 3)
        maxes = [0] + [s or 0 for s in (st.hollow or (0,) * st.rank)]
    if output_size is None:
        return tuple(maxes)
    try:
        target = tuple(operator.index(s) for s in output_size)
    except TypeError:
        raise TypeError(f"to_padded_tensor(): output_size must be a sequence of ints, got {output_size!r}") from None
    if len(target) != len(maxes):
        raise ShapeError(
            f"Length of output_size does not match NestedTensor dims. Broadcasting is not supported. "
            f"output_size={list(target)} has {len(target)} entries, the nested tensor has {len(maxes)} dims"
        )
    for d, (want, have) in enumerate(zip(target, maxes)):
        if want < have:
            raise ShapeError(
                f"Value in output_size is less than NestedTensor padded size. Truncation is not supported. "
                f"output_size[{d}]={want} < {have}"
            )
    return target


@implements("to_padded_tensor", "torch.nested.to_padded_tensor", _T + "to_padded_tensor")
def to_padded_tensor(input, padding, output_size=None):
    """A dense copy of shape ``(n, max sizes...)`` (or ``output_size``), ``padding`` elsewhere.

    Parameters
    ----------
    input : NestedTensor
    padding : float
        The fill value (cast to the dtype, as in torch).
    output_size : sequence of int, optional
        At least the padded size in every dim (dim 0 included); no truncation.

    Raises
    ------
    ValueError
        ``output_size`` of the wrong length ("Broadcasting is not supported") or
        smaller than the data ("Truncation is not supported").

    See Also
    --------
    torch.nested.to_padded_tensor

    Examples
    --------
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1, 2, 3], [4]])
    >>> ln.to_padded_tensor(nt, -1).tolist()
    [[1, 2, 3], [4, -1, -1]]
    >>> ln.to_padded_tensor(nt, 0, (3, 4)).tolist()
    [[1, 2, 3, 0], [4, 0, 0, 0], [0, 0, 0, 0]]
    >>> ln.to_padded_tensor(nt, 0, (2, 2))
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: Value in output_size is less than NestedTensor padded size. Truncation ...
    """
    check_nested(input, "to_padded_tensor()")
    if input._st.outer:  # components padded, then each outer level (the LoD core's padding)
        return _padded_levels(input, padding, output_size)
    shape = _padded_shape(input, output_size)
    if input._perm is not None and input._st.is_lod and getattr(input, "_holes", None) is None:
        return padded_permuted(input, lambda storage, size: to_padded_tensor(storage, padding, size), output_size)
    st = input._struct
    buf = input._buffer
    be = input.backend
    ops = be
    if st.rank == 0:
        if shape[0] == st.n:
            return ops.clone(buf)
        return ops.concat_flat([buf, ops.full((shape[0] - st.n,), padding, buf.dtype, buf)])
    if st.is_lod:
        offsets, row_shape = st.rows()
        rows = buf.reshape((int(offsets[-1]),) + row_shape)
        if tuple(shape[2:]) == row_shape:  # the LoD core's padding (its index plan is cached on the structure)
            padded, _ = pad_level(be, rows, st.lod(), 0, padding, shape[1], None, where="to_padded_tensor()",
                                  exact=False)  # torch casts the padding
            if shape[0] > st.n:
                extra = ops.full((shape[0] - st.n,) + tuple(shape[1:]), padding, buf.dtype, buf)
                padded = ops.concat_flat([padded, extra])
            return padded
    out = ops.full(shape, padding, buf.dtype, buf)
    groups = shape_groups(st.sizes)
    # host offsets of the components alone in their group, once (not a Python int per component)
    lone = np.array([members[0] for members, _ in groups if members.size == 1], dtype=np.int64)
    lone = zip(lone.tolist(), st.offsets[lone].tolist(), st.offsets[lone + 1].tolist())
    for members, key in groups:
        if members.size == 1 and len(groups) > 1:  # a component of its own shape: one slice copy
            i, lo, hi = next(lone)
            out[(i, *[slice(0, k) for k in key])] = buf[lo:hi].reshape(key)
            continue
        block = block_of(be, buf, st.offsets, members, key)
        index = be.from_host(members, like=out)
        out[(index,) + tuple(slice(0, k) for k in key)] = block
    return out


def _padded_levels(nt, padding, output_size):
    """``(documents, max sentences, *max component sizes)``: the components padded, then the outer levels."""
    st = nt._struct
    inner = make(nt._buffer, Structure(st.sizes, st.offsets, tail=st.tail), nt._layout)
    out = to_padded_tensor(inner, padding)
    be = nt.backend
    for offsets in reversed(st.outer):
        out, _ = pad_level(be, out, LoD([offsets], num_rows=int(out.shape[0])), 0, padding, None, None,
                           where="to_padded_tensor()", exact=False)
    if output_size is not None and tuple(output_size) != tuple(out.shape):
        raise ShapeError(f"to_padded_tensor(): output_size {tuple(output_size)} must be {tuple(out.shape)} here")
    return out
