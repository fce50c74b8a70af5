"""Permuted views: a nested tensor whose component dims are a permutation of its buffer's.

``transpose`` returns a view, as torch's does: the buffer and its size table
(the *storage*) stay, and ``perm`` records which storage axis each component
dim reads (component ``i`` is ``storage_component_i.permute(perm)``). The
ops that know about views (transpose, unflatten, flatten, squeeze, unsqueeze,
pointwise ops between tensors of one layout, ``scaled_dot_product_attention``
over ``(B, heads, (L), E)``) work on the storage directly; every other op
reads the *logical* buffer, materialised on each read (one dense permute
over the rows when the ragged axis stays first, else one per group of equal
component shapes): not cached, since a write into the base or another view
of the storage would leave a cached copy stale.
"""

import numpy as np

from ._grouped import block_of, element_index, joined, shape_groups

__all__ = ["normalize_perm", "compose", "permute_view", "permuted", "logical_structure", "regroup", "regroup_table",
           "regroup_columns", "loose_axes", "view_plans"]


def normalize_perm(perm):
    """``perm`` as a tuple, or None when it is the identity."""
    if perm is None:
        return None
    perm = tuple(int(p) for p in perm)
    return None if perm == tuple(range(len(perm))) else perm


def compose(perm, rank):
    """``perm`` (None: the identity) as a full tuple of ``rank`` axes."""
    return tuple(range(rank)) if perm is None else perm


def permute_view(be, x, perm):
    """``x`` with its axes permuted (``out.shape[i] == x.shape[perm[i]]``): a view, built from axis swaps."""
    order = list(range(len(perm)))
    for i, p in enumerate(perm):  # selection by swaps: after step i, axis i holds x's axis perm[i]
        j = order.index(p)
        if j != i:
            x = be.swapaxes_view(x, i, j)
            order[i], order[j] = order[j], order[i]
    return x


def logical_structure(st, perm):
    """The size table read through ``perm``; the element offsets are the storage's (same numel per component)."""
    hollow = None if st.hollow is None else tuple(st.hollow[p] for p in perm)
    jag = None if st.jag is None else list(perm).index(st.jag)  # the jagged dim moves with its storage axis
    return st.derive(st.sizes[:, list(perm)], st.offsets, hollow=hollow, jag=jag)


def _fresh(be, view):
    """``view`` (of a buffer) copied into a new flat contiguous array, also where it is laid out in order already
    (size-1 dims moved: ``contiguous()`` would give the buffer itself, and the result would share it)."""
    return (be.clone(view) if be.is_c_contiguous(view) else be.contiguous(view)).reshape(-1)


def permuted(be, buffer, st, perm):
    """``buffer`` (components laid out as ``st``) with every component permuted by ``perm``, contiguous.

    Returns the new flat buffer; its size table is ``st.sizes[:, perm]``. When
    the first axis stays first and the others are regular (sequences with a
    ragged length), it is one dense permute of the buffer viewed as rows;
    otherwise one per group of equal component shapes.
    """
    if st.n == 0 or st.numel == 0:
        return be.clone(buffer)
    rank = st.rank
    if perm[0] == 0 and all(st.regular[1:]):
        rows = st.tail_view(buffer, 1)  # (rows, *tail)
        return _fresh(be, permute_view(be, rows, (0, *perm[1:])))
    out_offsets = st.offsets  # every component keeps its number of elements
    groups = shape_groups(st.sizes)
    block_perm = (0, *[p + 1 for p in perm])
    if len(groups) == 1:
        key = groups[0][1]
        return _fresh(be, permute_view(be, buffer.reshape((st.n,) + key), block_perm))
    if getattr(buffer, "requires_grad", False):  # autograd: no per-group writes (see _grouped.joined)
        return joined(be, [(buffer, st.offsets)], lambda block: permute_view(be, block, block_perm), groups,
                      (0, rank), out_offsets)
    out = be.empty((st.numel,), buffer.dtype, buffer)
    for members, key in groups:
        block = block_of(be, buffer, st.offsets, members, key)
        moved = be.contiguous(permute_view(be, block, block_perm)).reshape(-1)
        numel = int(np.prod(key, dtype=np.int64)) if rank else 1
        be.scatter(out, be.from_host(element_index(out_offsets, members, numel), like=out), moved)
    return out


def regroup(st, perm, plan):
    """The storage of a view whose component dims regroup the current ones: ``(storage sizes, perm)``, or
    None when the storage cannot express it (a merge of dims not consecutive in storage, but for dims of size
    <= 1 in every component with elements between them: :func:`loose_axes`).

    ``st`` and ``perm`` are the current storage and permutation; ``plan`` lists the new component dims in
    order, each ``("keep", a)``, ``("merge", a, b)`` (dims ``a..b``), ``("split", a, sizes)`` (dim ``a`` into
    ``len(sizes)`` dims) or ``("new",)`` (a dim of size 1); a current dim left out of the plan is dropped (it
    must have size 1). Each new dim reads one storage axis, placed in the storage where its parts were.
    """
    sizes = st.sizes
    out = regroup_columns(lambda axis: sizes[:, axis], lambda value: np_full(st.n, value), st.rank, perm, plan,
                          loose_axes(sizes))
    if out is None:
        return None
    columns, new_perm = out
    table = np.stack(columns, axis=1) if columns else np.zeros((st.n, 0), np.int64)
    return table.astype(np.int64, copy=False), new_perm


def regroup_table(sizes, perm, plan):
    """:func:`regroup`'s size table from a size table (the recipe of a lazy Structure)."""
    n, rank = sizes.shape
    columns, _ = regroup_columns(lambda axis: sizes[:, axis], lambda value: np_full(n, value), rank, perm, plan,
                                 loose_axes(sizes))
    return np.stack(columns, axis=1) if columns else np.zeros((n, 0), np.int64)


def loose_axes(sizes):
    """The storage axes of the size table ``sizes`` with size <= 1 in every component that has elements: a
    merge may straddle them (a dim of size 1 has no stride constraint, an empty component none at all)."""
    sizes = np.asarray(sizes)
    if not sizes.size:
        return frozenset()
    live = sizes[sizes.prod(axis=1) > 0]
    return frozenset(np.flatnonzero((live <= 1).all(axis=0)).tolist())


def regroup_columns(column, constant, rank, perm, plan, loose=frozenset()):
    """The core of :func:`regroup`, over columns: ``column(axis)`` is a storage axis's sizes (a NumPy
    column, or one component's int), ``constant(value)`` a column of one value. Returns ``(new storage
    columns, new perm)`` or None. Pure Python over ints, so ``torch.compile`` traces it on row shapes.
    A merge needs its dims' storage axes in increasing order with only ``loose`` axes (:func:`loose_axes`)
    between them: those stay separate units, after the merged one (their place does not move an element);
    loose axes among its own dims may be in any order (torch's jagged ``flatten`` of ``(R, 1, 2)`` read
    ``(R, 2, 1)`` is a view)."""
    perm = compose(perm, rank)
    units = []  # (sort key, size column, new component dim)
    pending = []  # new size-1 dims, placed just before the storage axis of the next dim
    for dim, step in enumerate(_expand(plan)):
        kind = step[0]
        if kind == "new":
            pending.append(dim)
            continue
        if kind == "merge":
            a, b = step[1], step[2]
            axes = perm[a : b + 1]
            core = [p for p in axes if p not in loose] or list(axes[:1])  # (loose members go anywhere)
            if any(q <= p or not loose.issuperset(range(p + 1, q)) for p, q in zip(core, core[1:])):
                return None
            key, col = (core[0], 0), column(axes[0])
            for axis in axes[1:]:
                col = col * column(axis)
        elif kind == "piece":
            key, col = (perm[step[1]], step[2]), constant(step[3])
        else:
            key, col = (perm[step[1]], 0), column(perm[step[1]])
        for new in pending:
            units.append(((key[0], key[1] + (0.5 if key == (0, 0) else -0.5)), constant(1), new))  # (rows first)
        pending = []
        units.append((key, col, dim))
    for new in pending:
        units.append(((rank, 0), constant(1), new))
    units.sort(key=lambda u: u[0])
    new_perm = [0] * len(units)
    for position, (_, _, dim) in enumerate(units):
        new_perm[dim] = position
    return [u[1] for u in units], normalize_perm(new_perm)


def view_plans(old, new, kept):
    """The :func:`regroup` plans, applied in turn, that give component dims sized ``new`` from dims sized ``old``
    (one component's, lists of ints; ``kept``: the irregular dims, at the same index in both): regular dims of
    size 1 dropped, runs of dims merged, then split, dims of size 1 added (identity plans left out). Between
    kept dims the others must group into runs of equal products, as for NumPy's no-copy reshape; else None."""
    kept = sorted(kept)
    if any(k >= len(new) for k in kept):
        return None
    left = [a for a in range(len(old)) if a in kept or old[a] != 1]  # (regular dims of size 1 dropped)
    merges, splits, bounds = [], [], [-1, *kept, None]
    for lo, hi in zip(bounds, bounds[1:]):
        if lo >= 0:
            merges.append(("keep", left.index(lo)))
            splits.append(("keep", len(merges) - 1))
        olds = [k for k, a in enumerate(left) if a > lo and (hi is None or a < hi)]  # (indices into ``left``)
        run, size, target, p, start = [], 1, 1, 0, 0
        for s in new[lo + 1 : hi]:
            if s == 1 and not run:
                splits.append(("new",))
                continue
            run, target = run + [s], target * s
            while size < target and p < len(olds):
                size, p = size * old[left[olds[p]]], p + 1
            if size == target:
                a, b = olds[start], olds[p - 1]
                merges.append(("merge", a, b) if a < b else ("keep", a))
                splits.append(("split", len(merges) - 1, run) if len(run) > 1 else ("keep", len(merges) - 1))
                run, size, target, start = [], 1, 1, p
        if run or p < len(olds):
            return None
    plans = [[("keep", a) for a in left], merges, splits]
    ranks = (len(old), len(left), len(merges))
    return [plan for plan, rank in zip(plans, ranks) if plan != [("keep", a) for a in range(rank)]] or plans[:1]


def _expand(plan):
    for step in plan:
        if step[0] == "split":
            for i, size in enumerate(step[2]):
                yield ("piece", step[1], i, size)
        else:
            yield step


def np_full(n, value):
    out = np.empty(n, dtype=np.int64)
    out[:] = value
    return out
