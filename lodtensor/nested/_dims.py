"""Shape ops over regular component dims: squeeze, unsqueeze, flatten, unflatten, expand, narrow,
chunk, split, split_with_sizes, cat.

As on torch's jagged layout, none of them touches dim 0 (``chunk`` excepted:
it splits the batch) or a ragged dim. squeeze, unsqueeze, flatten and
unflatten only rewrite the size table (every component is contiguous, so the
buffer is shared: a view). narrow, split, split_with_sizes, chunk and expand
return views of the input's rows where it has them (``_views.py``; expand's with
stride 0 along the grown dims), as torch's jagged layout. The others (and those
where the components are not rows) move data
once over the whole buffer: viewed as ``(rows, *regular tail)`` when the dims
from the op's dim on are regular (the sequences case), one dense op per group
of equal shapes otherwise.
"""

import functools
import numbers
import operator

import numpy as np

from ..errors import ShapeError
from ._autograd import view_source
from ._broadcast import check_nested, same_backend
from ._dtypes import promote
from ._grouped import map_components
from ._holes import copied, reshaped, sliced
from ._permute import compose, regroup, view_plans
from ._registry import implements
from ._structure import moved_jag, one_level, op_dim, same_levels
from ._symbolic import keep_ragged
from ._tensor import NestedTensor, Structure, make, make_view, normalize_dim
from ._views import aliased, components_slice_view, expanded, pieces, regrouped, viewed, window, with_perm

__all__ = ["squeeze", "unsqueeze", "flatten", "unflatten", "expand", "narrow_nested", "chunk", "split",
           "split_with_sizes", "cat", "stack", "slice_dim", "components_slice"]  # fmt: skip

_T = "torch.Tensor."


def _regular_dim(where, nt, dim, extra=0):
    """Component axis of ``dim``, which must be neither dim 0 nor ragged (torch's messages)."""
    d = op_dim(nt, dim, where, extra)
    if d == 0:
        raise ShapeError(f"{where}: not supported for NestedTensor on dim=0")
    st = nt._struct
    if d - 1 < st.rank and st.n and not st.regular[d - 1]:
        raise ShapeError(f"{where}: not supported for NestedTensor on ragged dim")
    return d - 1


def _view(nt, plan, sizes):
    """A view whose component dims regroup ``nt``'s as ``plan`` says (see ``_permute.regroup``); ``sizes``,
    the new size table, serves when a transposed ``nt``'s storage cannot express it (then the data is copied);
    None (``view()``): the storage regrouped also where ``nt`` has no permutation (its rows kept first: holes
    stay), and a window view's window reshaped, merges too, or None where it cannot be without a copy."""
    out = regroup(nt._st, nt._perm, plan) if nt._perm is not None or sizes is None else (sizes, None)
    jag = moved_jag(plan, nt._struct.jag)  # (the logical jagged dim, as the plan moves it)
    if out is None:
        return make(aliased(nt._buffer), nt._st.derive(sizes, nt._st.offsets, jag=jag), nt._layout)
    table, perm = out
    if jag is not None:
        jag = compose(perm, table.shape[1])[jag]
    # a window view: its window reshaped (flatten copies, as torch's jagged layout)
    merge = sizes is not None and any(p[0] == "merge" for p in plan)
    view = regrouped(nt, table, perm, jag) if nt._src is not None and not merge else None
    if view is not None or (nt._src is not None and sizes is None):
        return view
    return reshaped(nt, make_view(aliased(nt._buf), nt._st.derive(table, nt._st.offsets, jag=jag), perm, nt._layout))


def regrouped_view(nt, sizes):
    """``view()`` of the transposed view ``nt`` (over a buffer) to the size table ``sizes``, its dims merged,
    split, or of size 1 added or dropped: a view of its storage (torch's views one only to its own shape),
    None where the storage cannot give it (without elements, a copy then: NumPy views any empty array)."""
    st = nt._struct
    plans = view_plans(st.sizes[0].tolist(), sizes[0].tolist(), {a for a in range(st.rank) if not st.regular[a]}
                       ) if st.n else None
    out = nt
    for plan in plans or ():
        out = _view(out, plan, None) if out is not None and regroup(out._st, out._perm, plan) is not None else None
    if plans and out is not None and np.array_equal(out._struct.sizes, sizes):
        return out
    return None if st.numel else make(aliased(nt._buffer), st.derive(sizes, st.offsets, jag=st.jag), nt._layout)


def _keep(axes):
    return [("keep", a) for a in axes]


def _map(nt, axis, fn, sizes):
    """``fn(block, block_axis)`` over component axis ``axis`` (regular): a new contiguous nested tensor."""
    st = nt._struct
    start = st.rank
    while start > 0 and st.regular[start - 1]:
        start -= 1
    if st.n and axis >= start:
        out = fn(st.tail_view(nt._buffer, start), axis - start + 1)
        return make(copied(nt, nt.backend.contiguous(out).reshape(-1)), st.derive(sizes), nt._layout)
    out, struct = map_components([nt], lambda block: fn(block, axis + 1), sizes)
    return make(out, struct, nt._layout)


def _take(block, axis, start, stop):
    return block[(slice(None),) * axis + (slice(start, stop),)]


# -- size-table ops (views) -----------------------------------------------------------------------
@implements("unsqueeze", "torch.unsqueeze", _T + "unsqueeze")
def unsqueeze(input, dim):
    """A view with a new dim of size 1 at ``dim`` (not 0).

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.ones((2, 4)), np.ones((3, 4))]).unsqueeze(-1).nested_size().tolist()
    [[2, 4, 1], [3, 4, 1]]
    """
    check_nested(input, "unsqueeze()")
    d = op_dim(input, dim, "unsqueeze()", extra=1)
    if d == 0:
        raise ShapeError("unsqueeze(): not supported for NestedTensor on dim=0")
    rank = input._struct.rank
    return _view(input, _keep(range(d - 1)) + [("new",)] + _keep(range(d - 1, rank)),
                 np.insert(input._struct.sizes, d - 1, 1, axis=1))


@implements("squeeze", "torch.squeeze", _T + "squeeze")
def squeeze(input, dim=None):
    """A view without dim ``dim`` when it has size 1 (unchanged otherwise); without ``dim``, every
    regular dim of size 1 goes (torch 2.13's jagged layout has no ``squeeze()``: see docs/nested.md).

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.ones((2, 1)), np.ones((3, 1))]).squeeze(-1).nested_size().tolist()
    [[2], [3]]
    """
    check_nested(input, "squeeze()")
    st = input._struct
    if dim is None:
        keep = [a for a in range(st.rank) if not (st.n and st.regular[a] and st.sizes[0, a] == 1)]
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = {_squeeze_axis(input, d) for d in dims}
        keep = [a for a in range(st.rank) if not (a in axes and st.n and st.sizes[0, a] == 1)]
    return _view(input, _keep(keep), st.sizes[:, keep])


def _squeeze_axis(nt, dim):
    """Component axis of squeeze's ``dim``. torch's strided layout leaves a ragged dim in place (its sizes
    are not all 1, as dense squeeze leaves a dim that is not 1); its jagged layout refuses one."""
    st = nt._struct
    d = op_dim(nt, dim, "squeeze()")
    if nt._layout == "strided" and d > 0 and st.n and not st.regular[d - 1]:
        return None
    return _regular_dim("squeeze()", nt, dim)


@implements("flatten", "torch.flatten", _T + "flatten")
def flatten(input, start_dim=0, end_dim=-1):
    """A view with dims ``start_dim..end_dim`` (regular, not 0) merged into one.

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.ones((2, 3, 4)), np.ones((1, 3, 4))]).flatten(2).nested_size().tolist()
    [[2, 12], [1, 12]]
    """
    check_nested(input, "flatten()")
    st = input._struct
    a = _regular_dim("flatten()", input, start_dim)
    b = op_dim(input, end_dim, "flatten()") - 1
    if b < a:
        raise ShapeError(f"flatten() has invalid args: start_dim cannot come after end_dim ({start_dim} > {end_dim})")
    for axis in range(a, b + 1):
        _regular_dim("flatten()", input, axis + 1)
    if a == b:  # one dim: the input itself, as torch (a dense or nested tensor's ``flatten(d, d)`` is ``self``)
        return input
    merged = st.sizes[:, a : b + 1].prod(axis=1, keepdims=True)
    return _view(input, _keep(range(a)) + [("merge", a, b)] + _keep(range(b + 1, st.rank)),
                 np.concatenate([st.sizes[:, :a], merged, st.sizes[:, b + 1 :]], axis=1))


@implements("unflatten", "torch.unflatten", _T + "unflatten")
def unflatten(input, dim, sizes):
    """A view with regular dim ``dim`` split into ``sizes`` (one may be -1).

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.ones((2, 6)), np.ones((1, 6))]).unflatten(-1, [2, 3]).nested_size().tolist()
    [[2, 2, 3], [1, 2, 3]]
    """
    check_nested(input, "unflatten()")
    st = input._struct
    a = _regular_dim("unflatten()", input, dim)
    sizes = [operator.index(s) for s in sizes]
    size = int(st.sizes[0, a]) if st.n else 0
    if sizes.count(-1) > 1:
        raise ShapeError("unflatten(): only one dimension can be inferred")
    known = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
    if -1 in sizes:
        if known == 0 or size % known:
            raise ShapeError(f"unflatten(): provided sizes {sizes} don't multiply up to the size of dim {dim} ({size})")
        sizes[sizes.index(-1)] = size // known
    elif known != size:
        raise ShapeError(f"unflatten(): provided sizes {sizes} don't multiply up to the size of dim {dim} ({size})")
    new = np.empty((st.n, len(sizes)), dtype=np.int64)
    new[:] = sizes
    return _view(input, _keep(range(a)) + [("split", a, sizes)] + _keep(range(a + 1, st.rank)),
                 np.concatenate([st.sizes[:, :a], new, st.sizes[:, a + 1 :]], axis=1))


# -- views of the rows (a copy where the components are not rows) -----------------------------------
@implements("expand", _T + "expand")
def expand(input, *sizes):
    """A view with regular dims of size 1 after the ragged one repeated to ``sizes`` (stride 0 along them, as
    torch's jagged ``expand``: a write into the input shows in it; in-place ops that would write one element
    twice refuse, as torch's). -1 keeps a dim; dim 0 and the dims up to the ragged one must be -1 or kept
    (torch's "cannot expand shape"); a grown dim must have size 1 (torch's "must match the existing size").
    torch's strided layout has no ``expand``; it is the jagged one's on both layouts here. Where the storage
    has no rows to view (several ragged dims, holes), the result is a copy. NumPy's expanded arrays are
    read-only: an in-place write into an expanded view of NumPy data raises NumPy's ValueError.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 1)), np.ones((3, 1))])
    >>> wide = nt.expand(-1, -1, 4)
    >>> wide.nested_size().tolist(), bool(ln.all(wide == 1))
    ([[2, 4], [3, 4]], True)
    >>> _ = nt.fill_(5.0)
    >>> wide.to_tensor_list()[1].tolist()
    [[5.0, 5.0, 5.0, 5.0], [5.0, 5.0, 5.0, 5.0], [5.0, 5.0, 5.0, 5.0]]
    """
    check_nested(input, "expand()")
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    one_level(input, "expand()")
    sizes = keep_ragged("expand()", input, sizes)
    st, own = input._struct, tuple(input.shape)
    ragged = [a + 1 for a in range(st.rank) if (st.n and not st.regular[a]) or a == st.jag]
    kept = max(ragged, default=0)  # dims 0..kept (the batch, up to the ragged one) stay as they are
    if len(sizes) != len(own) or any(s != -1 and not (isinstance(n, numbers.Integral) and s == n)
                                     for s, n in zip(sizes[: kept + 1], own)):
        raise ShapeError(f"expand(): cannot expand shape {_describe(input)} -> {list(sizes)}")
    grown = {}
    for d in range(kept + 1, len(own)):
        size, have = sizes[d], own[d]
        if size in (-1, have):
            continue
        if have != 1:
            raise ShapeError(f"expand(): the expanded size of the tensor ({size}) must match the existing size "
                             f"({have}) at non-singleton dimension {d}. Target sizes: {list(sizes)}. Tensor "
                             f"sizes: {_describe(input)}")
        if size < 0:
            raise ShapeError(f"expand(): the expanded size of the tensor ({size}) at dimension {d} must be "
                             f"non-negative, or -1 to keep that dim. Target sizes: {list(sizes)}")
        grown[d - 1] = size
    if not grown:  # a view all the same, as torch's
        return with_perm(input, input._perm)
    view = expanded(input, grown)
    if view is not None:
        return view
    new = st.sizes.copy()
    for a, size in grown.items():
        new[:, a] = size
    first, be = min(grown), input.backend

    def grow(block, ax):  # block dims from ``ax`` are component dims ``first..``: repeat the grown ones
        tail = [grown.get(first + k, block.shape[ax + k]) for k in range(block.ndim - ax)]
        return be.expand(block, tuple(block.shape[:ax]) + tuple(tail))

    return _map(input, first, grow, new)


def _describe(nt):
    return f"({', '.join(str(s) for s in nt.shape)})"


@implements("narrow", _T + "narrow")
def narrow_nested(input, dim, start, length):
    """Elements ``start:start + length`` of regular dim ``dim`` in every component: a view of the input's
    rows, as torch's jagged ``narrow`` (a copy where the components are not rows: several ragged dims). On
    the strided layout dim 0 narrows the components (a view, as torch's strided ``narrow``; its jagged layout
    refuses).

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([np.ones((2, 4)), np.ones((3, 4)), np.ones((1, 4))]).narrow(0, 1, 2).nested_size().tolist()
    [[3, 4], [1, 4]]
    """
    check_nested(input, "narrow()")
    if input._layout == "strided" and not input._st.outer and normalize_dim(dim, input.dim()) == 0:
        start, length = _narrow_range(start, length, input._struct.n)
        return components_slice(input, start, start + length)
    a = _regular_dim("narrow()", input, dim)
    st = input._struct
    start, length = _narrow_range(start, length, int(st.sizes[0, a]) if st.n else 0)
    view = window(input, a, slice(start, start + length))
    if view is not None:
        return view
    new = st.sizes.copy()
    new[:, a] = length
    return _map(input, a, lambda block, ax: _take(block, ax, start, start + length), new)


def _narrow_range(start, length, size):
    """``(start, length)`` of narrow over ``size`` elements, ``start`` counted from 0; torch's errors: an
    IndexError for a start outside ``[-size, size]``, a RuntimeError (ShapeError) for a negative length or one
    running past the end."""
    start, length = operator.index(start), operator.index(length)
    if not -size <= start <= size:
        raise IndexError(f"narrow(): start out of range (expected to be in range of [{-size}, {size}], but got "
                         f"{start})")
    if length < 0:
        raise ShapeError(f"narrow(): length must be non-negative, got {length}")
    begin = start + size if start < 0 else start
    if begin + length > size:
        raise ShapeError(f"start ({begin}) + length ({length}) exceeds dimension size ({size}).")
    return begin, length


def slice_dim(input, dim, index):
    """``index`` (a slice, any positive step) of regular dim ``dim`` in every component (``nt[..., 1:5:2]``):
    a view of the input's rows where it has them (as torch's jagged layout), else a copy."""
    a = _regular_dim("slice()", input, dim)
    st = input._struct
    size = st.dim_sizes()[a]  # (no component: the size the tensor keeps for the dim, as torch's (0, j1, 4))
    start, stop, step = index.indices(size if isinstance(size, int) else 0)
    if step <= 0:
        raise ShapeError(f"slice(): step must be greater than zero, got {index.step}")
    view = window(input, a, slice(start, stop, step))
    if view is not None:
        return view
    new = st.sizes.copy()
    new[:, a] = len(range(start, stop, step))
    return _map(input, a, lambda block, ax: block[(slice(None),) * ax + (slice(start, stop, step),)], new)


def _pieces(input, axis, lengths):
    st = input._struct
    out, start = [], 0
    views = pieces(input, axis, lengths)  # (one multi-output split, as torch's; None: every piece copies)
    if views is not None:
        return views
    for length in lengths:
        new = st.sizes.copy()
        new[:, axis] = length
        s = start
        out.append(_map(input, axis, lambda block, ax, s=s, n=length: _take(block, ax, s, s + n), new))
        start += length
    return tuple(out)


@implements("split_with_sizes", "torch.split_with_sizes", _T + "split_with_sizes")
def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of regular dim ``dim`` with the given sizes (they must add up to the dim's size); views of the
    input's rows, as :func:`narrow`.

    >>> import lodtensor.nested as ln
    >>> [c.nested_size().tolist() for c in ln.split_with_sizes(ln.nested_tensor([np.ones((2, 4))]), [1, 3], -1)]
    [[[2, 1]], [[2, 3]]]
    """
    check_nested(input, "split_with_sizes()")
    a = _regular_dim("split_with_sizes()", input, dim)
    size = int(input._struct.sizes[0, a]) if input._struct.n else 0
    lengths = [operator.index(s) for s in split_sizes]
    if sum(lengths) != size or any(s < 0 for s in lengths):
        raise ShapeError(
            f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension "
            f"{dim}), but got split_sizes={lengths}"
        )
    return _pieces(input, a, lengths)


@implements("split", "torch.split", _T + "split")
def split(input, split_size_or_sections, dim=0):
    """Pieces of regular dim ``dim``: of ``split_size`` each (the last may be shorter), or of the listed sizes;
    views of the input's rows, as :func:`narrow`.

    >>> import lodtensor.nested as ln
    >>> a, b = ln.nested_tensor([np.ones((2, 4)), np.ones((3, 4))]).split(2, -1)
    >>> a.nested_size().tolist()
    [[2, 2], [3, 2]]
    """
    check_nested(input, "split()")
    if not isinstance(split_size_or_sections, numbers.Integral):
        return split_with_sizes(input, split_size_or_sections, dim)
    a = _regular_dim("split()", input, dim)
    size = int(input._struct.sizes[0, a]) if input._struct.n else 0
    step = operator.index(split_size_or_sections)
    if step <= 0 and size:
        raise ShapeError(f"split expects split_size be non-negative, but got split_size={step}")
    lengths = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    return _pieces(input, a, lengths)


@implements("chunk", "torch.chunk", _T + "chunk")
def chunk(input, chunks, dim=0):
    """``chunks`` pieces of regular dim ``dim`` (each ``ceil(size / chunks)``; views of the input's rows, as
    :func:`narrow`), or of the components (dim 0: views of groups of components).

    >>> import lodtensor.nested as ln
    >>> [c.nested_size().tolist() for c in ln.nested_tensor([np.ones((2, 4)), np.ones((1, 4))]).chunk(2, -1)]
    [[[2, 2], [1, 2]], [[2, 2], [1, 2]]]
    """
    check_nested(input, "chunk()")
    chunks = operator.index(chunks)
    if chunks <= 0:
        raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if normalize_dim(dim, input.dim()) == 0:  # the batch (the documents, with outer levels): views
        count = input._st.count()
        step = -(-count // chunks) if count else 1
        return tuple(components_slice(input, s, min(s + step, count)) for s in range(0, count, step))
    a = _regular_dim("chunk()", input, dim)
    size = int(input._struct.sizes[0, a]) if input._struct.n else 0
    step = -(-size // chunks) if size else 1
    return split(input, step, dim)


def components_slice(nt, lo, hi):
    """Entries ``lo:hi`` of dim 0 (components, or the top outer level's entries), a view."""
    if viewed(nt):  # a view (of a window, or transposed): a view of its storage
        return components_slice_view(nt, lo, hi)
    st = nt._struct
    lo, hi, levels = st.top_slice(lo, hi)
    a, b = int(st.offsets[lo]), int(st.offsets[hi])
    buf = view_source(nt._buffer)
    return sliced(nt, make(buf[a:b], Structure(st.sizes[lo:hi].copy(), outer=levels, tail=st.tail), nt._layout), lo, hi)


@implements("cat", "torch.cat", "torch.concat", "torch.concatenate")
def cat(tensors, dim=0):
    """Nested tensors joined along regular dim ``dim`` (not 0); their other dims must match; a copy.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 4)), np.ones((3, 4))])
    >>> ln.cat([nt, nt], dim=-1).nested_size().tolist()
    [[2, 8], [3, 8]]
    """
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, NestedTensor) for t in tensors):
        raise TypeError("cat(): expected a non-empty sequence of NestedTensors of the same number of components")
    first = tensors[0]
    for t in tensors[1:]:
        same_backend("cat()", first._array(), t._array())
    dtypes = [t.dtype for t in tensors]  # mixed: torch's promotion (int64, float16: float16), not NumPy's
    if dtypes.count(dtypes[0]) != len(dtypes) and not first.backend.follows_torch_promotion:
        dtype = functools.reduce(lambda a, b: promote(a, np.dtype(b)), dtypes[1:], np.dtype(dtypes[0]))
        tensors = [t if t.dtype == dtype else t.to(dtype) for t in tensors]
        first = tensors[0]
    a = _regular_dim("cat()", first, dim)
    st = first._struct
    for t in tensors[1:]:
        other = t._struct
        if other.n != st.n or other.rank != st.rank or not np.array_equal(
            np.delete(other.sizes, a, axis=1), np.delete(st.sizes, a, axis=1)
        ) or not same_levels(other.outer, st.outer):
            raise ShapeError(
                "cat(): expected all nested tensors to have matching ragged structures outside of the "
                f"concatenated dim {dim}"
            )
        if other.n and not other.regular[a]:
            raise ShapeError("cat(): not supported for NestedTensor on ragged dim")
    new = st.sizes.copy()
    new[:, a] = sum(int(t._struct.sizes[0, a]) if t._struct.n else 0 for t in tensors)
    be = first.backend
    start = st.rank
    while start > 0 and all(t._struct.regular[start - 1] for t in tensors):
        start -= 1
    if st.n and a >= start:
        blocks = [t._struct.tail_view(t._buffer, start) for t in tensors]
        out = be.concat_axis(blocks, a - start + 1)
        return make(out.reshape(-1), st.derive(new), first._layout)
    out, struct = map_components(tensors, lambda *blocks: be.concat_axis(list(blocks), a + 1), new)
    return make(out, struct, first._layout)


@implements("stack", "torch.stack")
def stack(tensors, dim=0):
    """Nested tensors of equal structure stacked along a new dim ``dim`` (not 0); a copy.

    Each component of the result is ``stack([t[i] for t in tensors], dim - 1)``:
    the same as ``cat`` of the tensors unsqueezed at ``dim``. torch's jagged
    layout takes only a ``dim`` after the ragged one; any ``dim >= 1`` works here.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 6)), np.ones((4, 6))])
    >>> ln.stack([nt, nt], dim=2).nested_size().tolist()
    [[2, 2, 6], [4, 2, 6]]
    >>> ln.stack([nt, nt], dim=0)
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: stack(): not supported for NestedTensor on dim=0
    """
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, NestedTensor) for t in tensors):
        raise TypeError("stack(): expected a non-empty sequence of NestedTensors")
    d = normalize_dim(dim, tensors[0].dim() + 1)
    if op_dim(tensors[0], d, "stack()", extra=1) == 0:
        raise ShapeError("stack(): not supported for NestedTensor on dim=0")
    first = tensors[0]._struct
    for i, t in enumerate(tensors[1:], start=1):
        if not first.same_as(t._struct):
            raise ShapeError(
                f"stack(): expected all nested tensors to have the same nested structure, tensor {i} has "
                f"shape {t.shape} and tensor 0 {tensors[0].shape}"
            )
    return cat([unsqueeze(t, d) for t in tensors], d)
