"""Grouped work for components ragged in several dims: one dense op per distinct shape.

Components of equal shape are gathered into one ``(count, *shape)`` block
(one vectorised gather), the dense op runs once on the block, and the result
is scattered back (one vectorised scatter). The Python loop runs over
distinct shapes, not over components or elements; a batch of images of all
different sizes degrades to one op per image, which is what torch.nested's
strided layout does too.
"""

import math

import numpy as np

__all__ = ["shape_groups", "map_components", "element_index", "block_of", "joined"]


def shape_groups(keys):
    """Split component indices by equal rows of ``keys`` (n x k ints).

    Returns a list of ``(members, key_row)``: members an int64 array of component
    indices in increasing order, key_row a tuple of ints. One group when every
    row is the same.
    """
    n = keys.shape[0]
    if n == 0:
        return []
    if (keys == keys[:1]).all():
        return [(np.arange(n, dtype=np.int64), tuple(int(k) for k in keys[0]))]
    code = _row_codes(keys)
    order = np.argsort(code, kind="stable")
    bounds = np.flatnonzero(np.diff(code[order])) + 1
    if bounds.size == n - 1:  # every shape distinct (a batch of images): one group per component
        return [(order[j : j + 1], tuple(row)) for j, row in enumerate(keys[order].tolist())]
    # only the first row of each group goes to Python: the work here grows with the groups, not with n
    rows = keys[order[np.concatenate(([0], bounds))]].tolist()
    return [(members, tuple(row)) for members, row in zip(np.split(order, bounds), rows)]


def _row_codes(keys):
    """One int64 per row, equal exactly when the rows are equal (mixed radix, or np.unique when too wide)."""
    radix = keys.max(axis=0).astype(np.float64) + 1
    if np.prod(radix) < 2.0**62:
        code = np.zeros(keys.shape[0], dtype=np.int64)
        for j in range(keys.shape[1]):
            code = code * int(radix[j]) + keys[:, j]
        return code
    return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)


def element_index(offsets, members, numel):
    """Buffer positions of the elements of ``members`` (each ``numel`` long), component-major."""
    return (offsets[members][:, None] + np.arange(numel, dtype=np.int64)).reshape(-1)


def block_of(be, buffer, offsets, members, shape):
    numel = math.prod(shape)
    if members.size == 1:
        start = int(offsets[members[0]])
        return buffer[start : start + numel].reshape((1,) + shape)
    if members.size == offsets.size - 1:  # every component has this shape: the buffer is the block
        return buffer.reshape((members.size,) + shape)
    index = be.from_host(element_index(offsets, members, numel), like=buffer)
    return be.gather(buffer, index).reshape((members.size,) + shape)


def map_components(inputs, fn, out_sizes, *, dtype=None, into=None):
    """Apply ``fn(*blocks)`` per group of equal component shapes; returns (buffer, Structure).

    ``inputs`` are nested tensors with the same number of components; ``fn``
    maps blocks ``(g, *shape_k)`` (one per input) to a block ``(g, *out_shape)``
    whose rows go to the components of ``out_sizes`` (n x rank ints). A group
    of one component (every image of a batch of distinct sizes) takes a lean
    path: slices at precomputed Python offsets, no index arrays; with
    ``into(*blocks, out=view)`` (same result as ``fn``, written into ``view``)
    and ``dtype`` given, such a group writes straight into the result (no
    temporary per component and no copy).
    """
    first = inputs[0]
    be = first.backend
    ops = be
    bufs = [x._buffer for x in inputs]  # read once (a view of part of a regular dim copies on each read)
    out_struct = first._struct.derive(out_sizes)  # the components keep their outer levels
    keys = np.concatenate([x._struct.sizes for x in inputs], axis=1)
    ranks = [x._struct.rank for x in inputs]
    groups = shape_groups(keys)
    if not groups:
        probe = fn(*[b[:0].reshape((0,) + (1,) * r) for b, r in zip(bufs, ranks)])
        return ops.empty((0,), dtype or probe.dtype, bufs[0]), out_struct
    out = None
    n = first._struct.n
    out_offsets = out_struct.offsets
    cuts = [sum(ranks[:k]) for k in range(len(ranks) + 1)]
    if len(groups) > 1 and any(x.requires_grad for x in inputs):
        pairs = [(b, x._struct.offsets) for b, x in zip(bufs, inputs)]
        return joined(be, pairs, fn, groups, cuts, out_struct.offsets), out_struct
    lone = _lone_slices(inputs, groups, out_offsets, out_struct.sizes if into is not None else None)
    for members, key in groups:
        if members.size == 1 and lone is not None:
            (i, bounds, (out_lo, out_hi), out_shape) = next(lone)
            blocks = [
                b[lo:hi].reshape((1,) + key[cuts[k] : cuts[k + 1]])
                for k, (b, (lo, hi)) in enumerate(zip(bufs, bounds))
            ]
            if into is not None and dtype is not None:
                if out is None:
                    out = ops.empty((out_struct.numel,), dtype, bufs[0])
                into(*blocks, out=out[out_lo:out_hi].reshape((1, *out_shape)))
                continue
            res = fn(*blocks)
            if out is None:
                out = ops.empty((out_struct.numel,), res.dtype, bufs[0])
            out[out_lo:out_hi].reshape(tuple(res.shape))[...] = res  # one copy, into place
            continue
        blocks = [
            block_of(be, b, x._struct.offsets, members, key[cuts[k] : cuts[k + 1]])
            for k, (b, x) in enumerate(zip(bufs, inputs))
        ]
        res = fn(*blocks)
        if len(groups) == 1 and members.size == n:
            return ops.contiguous(res).reshape(-1), out_struct
        if out is None:
            out = ops.empty((out_struct.numel,), res.dtype, bufs[0])
        flat = res.reshape(-1)
        m = flat.shape[0] // members.size
        be.scatter(out, be.from_host(element_index(out_offsets, members, m), like=out), flat)
    return out, out_struct


def _lone_slices(inputs, groups, out_offsets, out_sizes):
    """For the groups of one component, in group order: ``(i, [(lo, hi) per input], (out_lo, out_hi),
    out_shape)`` as Python ints, read from the host tables for those components only (not a ``tolist()``
    of every offset: a few distinct shapes among many components must not cost a Python int each).
    None when there is one group."""
    if len(groups) < 2:
        return None
    lone = np.array([members[0] for members, _ in groups if members.size == 1], dtype=np.int64)
    ends = (lone, lone + 1)
    bounds = [zip(*(x._struct.offsets[e].tolist() for e in ends)) for x in inputs]
    out_bounds = zip(*(out_offsets[e].tolist() for e in ends))
    shapes = out_sizes[lone].tolist() if out_sizes is not None else [None] * lone.size
    return zip(lone.tolist(), zip(*bounds), out_bounds, shapes)


def joined(be, inputs, fn, groups, cuts, out_offsets):
    """Grouped work for inputs that record autograd: ``fn(*blocks)`` per group of ``groups`` (``(members,
    key)``, key the concatenated component shapes cut by ``cuts``), ``inputs`` being ``(buffer,
    element offsets)`` pairs; returns the flat result in component order (element offsets ``out_offsets``).

    Each input is gathered once into group order and split into its groups' blocks, the results are
    joined and gathered once back. A slice or a gather per group, or a write per group into a
    preallocated buffer, would make the backward add or copy a buffer-sized gradient once per group.
    """
    parts = []
    for k, (buffer, offsets) in enumerate(inputs):
        numels = [int(np.prod(key[cuts[k] : cuts[k + 1]], dtype=np.int64)) for _, key in groups]
        index = np.concatenate([element_index(offsets, members, m) for (members, _), m in zip(groups, numels)])
        bounds = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum([m * members.size for (members, _), m in zip(groups, numels)], out=bounds[1:])
        parts.append(be.split_rows(be.gather(buffer, be.from_host(index, like=buffer)), bounds.tolist()))
    results, index = [], []
    for j, (members, key) in enumerate(groups):
        blocks = [parts[k][j].reshape((members.size,) + key[cuts[k] : cuts[k + 1]]) for k in range(len(inputs))]
        flat = fn(*blocks).reshape(-1)
        results.append(flat)
        index.append(element_index(out_offsets, members, int(flat.shape[0]) // members.size))
    order = np.concatenate(index)
    back = np.empty_like(order)
    back[order] = np.arange(order.size, dtype=np.int64)
    joined_results = be.concat_axis(results, 0)
    return be.gather(joined_results, be.from_host(back, like=joined_results))
