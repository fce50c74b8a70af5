"""Attention over sequences stored as rows: ``scaled_dot_product_attention`` of ``(B, heads, (L), E)`` views.

The transformer tutorials build query, key and value as ``linear(x)`` ->
``unflatten(-1, [heads, E])`` -> ``transpose(1, 2)``: a view whose buffer
holds rows ``(tokens, heads, E)`` and whose component dims read them as
``(heads, L, E)``. Attention then runs per group of components of equal
``(Lq, Lk)`` on the rows themselves:

1. one gather puts the rows of q, k and v in group order (skipped when the
   components already come grouped, e.g. sorted by length);
2. each group is a slice of those rows, viewed ``(g, L, heads, E)`` and read
   as ``(g, heads, L, E)`` without a copy, and goes to the backend's dense
   attention (torch's fused SDPA kernel, forward and backward);
3. the groups' outputs are joined and one gather puts the rows back in
   component order.

Nothing is padded, and no result is written into a preallocated buffer, so on
torch the backward is the kernels' own backward per group plus one
scatter-add per gather (an in-place write per group would make autograd copy
the whole buffer once per group). The result is again a view ``(B, heads,
(Lq), Ev)`` over rows ``(tokens, heads, Ev)``, so ``transpose(1, 2)`` and
``flatten(-2)`` after it are free.
"""

import numpy as np

from ._grouped import shape_groups
from ._permute import compose, permute_view

__all__ = ["rows_of", "attention_rows"]


def rows_of(x):
    """``(rows, lengths, perm)`` of a nested tensor whose components ``(*lead, L, E)`` read rows
    ``(tokens, *lead, E)`` (ragged only in ``L``), else None."""
    st = x._st
    if st.n == 0 or st.rank < 2 or not st.is_lod:
        return None
    rank = st.rank
    want = (*range(1, rank - 1), 0, rank - 1)
    if compose(x._perm, rank) != want:
        return None
    offsets, row_shape = st.rows()
    return x._buf.reshape((int(offsets[-1]),) + row_shape), st.sizes[:, 0], x._perm


def _group_order(offsets, lengths, order):
    """Row indices that list the rows of components ``order`` one after another."""
    counts = lengths[order]
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return np.repeat(offsets[order] - starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)


def _offsets(lengths):
    out = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def attention_rows(be, q, k, v, lq, lk, is_causal, scale, dropout_p):
    """Attention of the components over rows ``q (Tq, *lead, E)``, ``k (Tk, *lead, E)``, ``v (Tk, *lead, Ev)``
    with per-component lengths ``lq`` and ``lk``; returns rows ``(Tq, *lead, Ev)`` in component order."""
    groups = shape_groups(np.stack([lq, lk], axis=1))
    order = np.concatenate([members for members, _ in groups])
    grouped = not np.array_equal(order, np.arange(order.size))
    if grouped:
        q_rows = _group_order(_offsets(lq), lq, order)
        k_rows = _group_order(_offsets(lk), lk, order)
        q_index, k_index = be.from_host(q_rows, like=q), be.from_host(k_rows, like=k)
        q, k, v = be.gather(q, q_index), be.gather(k, k_index), be.gather(v, k_index)
    lead = tuple(int(s) for s in q.shape[1:-1])
    m = len(lead)
    to_heads = (0, *range(2, m + 2), 1, m + 2)  # (g, L, *lead, E) read as (g, *lead, L, E)
    to_rows = (0, m + 1, *range(1, m + 1), m + 2)
    ev = int(v.shape[-1])
    counts = [(int(members.size), length_q, length_k) for members, (length_q, length_k) in groups]
    # one split per input (its backward joins the group gradients once; a slice per group would make
    # autograd add a buffer-sized zero tensor per group)
    q_parts = be.split_rows(q, _offsets(np.array([g * a for g, a, _ in counts], np.int64)).tolist())
    k_bounds = _offsets(np.array([g * b for g, _, b in counts], np.int64)).tolist()
    k_parts, v_parts = be.split_rows(k, k_bounds), be.split_rows(v, k_bounds)
    outs = []
    for (g, length_q, length_k), part_q, part_k, part_v in zip(counts, q_parts, k_parts, v_parts):
        nq = g * length_q
        if not nq:
            continue
        if length_k:
            block_q = permute_view(be, part_q.reshape((g, length_q, *lead, -1)), to_heads)
            block_k = permute_view(be, part_k.reshape((g, length_k, *lead, -1)), to_heads)
            block_v = permute_view(be, part_v.reshape((g, length_k, *lead, ev)), to_heads)
            out = be.attention(block_q, block_k, block_v, None, is_causal, scale, dropout_p)
            outs.append(permute_view(be, out, to_rows).reshape((nq, *lead, ev)))
        else:  # no keys: the weights of an empty softmax are empty, the output zero (torch's convention)
            outs.append(be.zeros((nq, *lead, ev), q.dtype, q))
    if not outs:
        return be.zeros((0, *lead, ev), q.dtype, q)
    out = outs[0] if len(outs) == 1 else be.concat_axis(outs, 0)
    if grouped:
        back = np.empty_like(q_rows)
        back[q_rows] = np.arange(q_rows.size, dtype=np.int64)
        out = be.gather(out, be.from_host(back, like=out))
    return out


def attend(query, key, value, is_causal, scale, dropout_p, make_view):
    """``scaled_dot_product_attention`` of row-stored query/key/value (see :func:`rows_of`), or None when
    one of them is stored otherwise."""
    found = [rows_of(x) for x in (query, key, value)]
    if any(f is None for f in found):
        return None
    (q, lq, perm), (k, lk, _), (v, _, _) = found
    be = query.backend
    out = attention_rows(be, q, k, v, lq, lk, is_causal, scale, dropout_p)
    sizes = query._st.sizes.copy()
    sizes[:, -1] = int(v.shape[-1])
    return make_view(out.reshape(-1), query._st.derive(sizes), perm, query._layout)
