"""Attention and its building blocks: scaled_dot_product_attention, log_softmax, rms_norm, embedding.

``scaled_dot_product_attention`` takes nested ``query`` ``(B, heads, (Lq), E)``,
``key`` and ``value`` ``(B, heads, (Lk), E|Ev)`` (any leading regular dims,
the sequence dim ragged) and runs one dense attention per group of
components with equal ``(Lq, Lk)``: on NumPy one blocked pass per length
group, on torch torch's own ``F.scaled_dot_product_attention`` per group (so
``is_causal``, ``attn_mask``, ``dropout_p``, ``scale`` and autograd all work,
where torch 2.13's CPU jagged SDPA refuses causal and masked attention).
"""

import numbers

import numpy as np

from ..backend import backend_name_of
from ..errors import ArgumentError, ShapeError
from ._broadcast import check_nested, not_implemented, same_backend
from ._dtypes import dtype_name, kind_of
from ._grouped import map_components
from ._nn import softmax_like
from ._registry import implements
from ._tensor import NestedTensor, make, make_view
from ._varlen import attend as attend_rows

__all__ = ["scaled_dot_product_attention", "log_softmax", "rms_norm", "embedding"]

_F = "torch.nn.functional."
_T = "torch.Tensor."


# -- log_softmax ------------------------------------------------------------------------------------
@implements("log_softmax", "torch.log_softmax", _F + "log_softmax", _T + "log_softmax", "torch.special.log_softmax")
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``log(softmax(x, dim))`` computed stably, along any dim but 0 of every component.

    Over the ragged dim of sequences (which torch 2.13's jagged layout refuses)
    it is a few segment kernels on the flat buffer, with autograd on torch.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    >>> np.exp(ln.log_softmax(nt, 1).to_tensor_list()[1]).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    return softmax_like("log_softmax", input, dim, dtype,
                        "log_softmax(): not supported when reducing across the batch dimension for NestedTensor",
                        _segment_log_softmax)


def _segment_log_softmax(be, x, dev, rows):
    """``x - logsumexp`` of every segment (``dev``: their offsets on ``x``'s device), from the segment kernels
    (autograd flows on torch)."""
    ids = be.segment_ids(dev, total=rows)
    shifted = x - be.gather(be.segment_max(x, dev, empty=0), ids)
    lse = be.pointwise("log", "log", be.segment_sum(be.pointwise("exp", "exp", shifted), dev))
    return shifted - be.gather(lse, ids)


# -- rms_norm ---------------------------------------------------------------------------------------
@implements("rms_norm", _F + "rms_norm", "torch.rms_norm")
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` (regular dims), times ``weight``.

    ``eps`` defaults to the machine epsilon of the dtype the op computes in, as in torch: float64's for
    float64, float32's for float32, float16 and bfloat16.

    >>> import lodtensor.nested as ln
    >>> out = ln.rms_norm(ln.nested_tensor([np.full((2, 4), 2.0), np.full((1, 4), -3.0)]), (4,))
    >>> [c.round(4).tolist()[0] for c in out.unbind()]
    [[1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, -1.0]]
    """
    check_nested(input, "rms_norm()")
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    st = input._struct
    k = len(shape)
    if not 1 <= k <= st.rank:
        raise ShapeError(f"rms_norm(): normalized_shape {shape} must cover 1 to {st.rank} trailing dims")
    axis = st.rank - k
    if st.n and not all(st.regular[axis:]):
        raise ShapeError("rms_norm(): Normalization over the ragged dim not supported for nested tensors")
    if st.n and tuple(int(s) for s in st.sizes[0, axis:]) != shape:
        raise ShapeError(
            f"rms_norm(): normalized_shape {shape} doesn't match the input's trailing dims "
            f"{tuple(int(s) for s in st.sizes[0, axis:])}"
        )
    be = input.backend
    buf = input._buffer
    if kind_of(buf.dtype) != "f":
        raise not_implemented("rms_norm", input)
    width = int(np.prod(shape, dtype=np.int64))
    if weight is not None:
        same_backend("rms_norm()", buf, weight)
        if tuple(weight.shape) != shape:
            raise ShapeError(f"rms_norm(): weight must have shape {shape}, got {tuple(weight.shape)}")
        weight = weight.reshape(width)
    if eps is None:  # torch computes half precision in float32 and takes float32's epsilon for it
        eps = float(np.finfo(np.float64 if dtype_name(buf.dtype) == "float64" else np.float32).eps)
    eps = float(eps)
    rows = buf.reshape((-1, width)) if width else buf.reshape((0, 0))
    return make(be.rms_norm(rows, eps, weight).reshape(-1), st, input._layout)


# -- embedding --------------------------------------------------------------------------------------
@implements("embedding", _F + "embedding")
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` looked up by the integer nested tensor ``input``: ``(B, (L), ...) -> (B, (L), ..., D)``.

    On torch this is ``F.embedding`` on the flat indices (``padding_idx`` gets no gradient; ``max_norm``
    renormalises ``weight`` in place, as torch does); on NumPy ``max_norm`` rescales the looked-up rows
    without writing into ``weight``.

    >>> import lodtensor.nested as ln
    >>> ln.embedding(ln.nested_tensor([[0, 2], [1]]), np.eye(3)).to_tensor_list()[0].tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    check_nested(input, "embedding()")
    if isinstance(weight, NestedTensor) or backend_name_of(weight) is None or weight.ndim != 2:
        raise TypeError("embedding(): weight must be a 2-D array or tensor (num_embeddings, embedding_dim)")
    buf = input._buffer
    if kind_of(buf.dtype) not in "iu":
        raise TypeError(
            f"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
            f"but got {buf.dtype} instead (while checking arguments for embedding)"
        )
    be = same_backend("embedding()", buf, weight)
    num = int(weight.shape[0])
    if buf.shape[0]:
        lo, hi = int(buf.min()), int(buf.max())
        if lo < 0 or hi >= num:
            raise IndexError(f"embedding(): index out of range in self (index {lo if lo < 0 else hi}, {num} rows)")
    st = input._struct
    dim = int(weight.shape[1])
    sizes = np.concatenate([st.sizes, np.full((st.n, 1), dim, dtype=np.int64)], axis=1)
    out = be.embedding(buf, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    return make(out.reshape(-1), st.derive(sizes), input._layout)


# -- scaled dot-product attention -------------------------------------------------------------------
def _check_qkv(q, k, v):
    for name, x in (("query", q), ("key", k), ("value", v)):
        check_nested(x, "scaled_dot_product_attention()", name)
    same_backend("scaled_dot_product_attention()", q._array(), k._array(), v._array())
    qs, ks, vs = q._struct, k._struct, v._struct
    if not qs.rank == ks.rank == vs.rank or qs.rank < 2:
        raise ShapeError(
            f"scaled_dot_product_attention(): query, key and value must have the same number of dims (at least 3), "
            f"got {qs.rank + 1}, {ks.rank + 1}, {vs.rank + 1}"
        )
    if not qs.n == ks.n == vs.n:
        raise ShapeError(
            f"scaled_dot_product_attention(): query, key and value must have the same batch size, got {qs.n}, "
            f"{ks.n}, {vs.n}"
        )
    for name, x in (("query", qs), ("key", ks), ("value", vs)):
        if x.n and not x.regular[-1]:
            raise ShapeError(f"scaled_dot_product_attention(): {name}'s embedding dim (dim -1) must not be ragged")
    if qs.n and (not np.array_equal(qs.sizes[:, :-2], ks.sizes[:, :-2]) or not np.array_equal(
            ks.sizes[:, :-1], vs.sizes[:, :-1])):
        raise ShapeError(
            "scaled_dot_product_attention(): key and value must have the same sequence lengths, and query, key "
            "and value the same leading dims"
        )
    if qs.n and qs.sizes[0, -1] != ks.sizes[0, -1]:
        raise ShapeError(
            f"scaled_dot_product_attention(): query's embedding dim {int(qs.sizes[0, -1])} must match key's "
            f"{int(ks.sizes[0, -1])}"
        )


def _nested_mask(mask, q, k):
    """``attn_mask`` as a nested tensor of components ``(..., Lq_i, Lk_i)``."""
    qs, ks = q._struct, k._struct
    if isinstance(mask, NestedTensor):
        ms = mask._struct
        if ms.n != qs.n or ms.rank != qs.rank or not (
            np.array_equal(ms.sizes[:, -2], qs.sizes[:, -2]) and np.array_equal(ms.sizes[:, -1], ks.sizes[:, -2])
        ):
            raise ShapeError("scaled_dot_product_attention(): a nested attn_mask must have components (..., Lq, Lk)")
        return mask
    if backend_name_of(mask) is None or mask.ndim != qs.rank + 1:
        raise ShapeError(
            f"scaled_dot_product_attention(): attn_mask must be a nested tensor of components (..., Lq, Lk), or a "
            f"dense array (B, ..., max Lq, max Lk) of {qs.rank + 1} dims"
        )
    if qs.n and not all(qs.regular[:-2]):
        raise ShapeError("scaled_dot_product_attention(): a dense attn_mask cannot follow a ragged batch-like dim of "
                         "query (dims 1 to -3); give a nested attn_mask of components (..., Lq, Lk)")
    be = q.backend
    lq, lk = qs.sizes[:, -2], ks.sizes[:, -2]
    shape = tuple(int(s) for s in mask.shape)
    if shape[0] not in (1, qs.n) or shape[-2] < lq.max(initial=0) or shape[-1] < lk.max(initial=0):
        raise ShapeError(
            f"scaled_dot_product_attention(): a dense attn_mask of shape {shape} must be (1 or {qs.n}, ..., "
            f">= {int(lq.max(initial=0))}, >= {int(lk.max(initial=0))})"
        )
    mask = be.expand(mask, (qs.n,) + shape[1:])
    valid = (np.arange(shape[-2])[None, :, None] < lq[:, None, None]) & (
        np.arange(shape[-1])[None, None, :] < lk[:, None, None])
    valid = np.broadcast_to(valid.reshape((qs.n,) + (1,) * (len(shape) - 3) + valid.shape[1:]), (qs.n,) + shape[1:])
    values = mask[be.from_host(np.ascontiguousarray(valid), like=mask)]
    sizes = np.empty((qs.n, qs.rank), dtype=np.int64)
    sizes[:, :-2] = shape[1:-2]
    sizes[:, -2], sizes[:, -1] = lq, lk
    return make(values, qs.derive(sizes), q._layout)


@implements("scaled_dot_product_attention", _F + "scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(q @ k^T * scale + mask) @ v`` per component, one dense pass per group of equal lengths.

    ``attn_mask``: a bool (True = attend) or float (added) nested tensor of components ``(..., Lq, Lk)``, or a
    dense ``(B or 1, ..., >= max Lq, >= max Lk)`` array whose top-left corner applies to each component.
    ``is_causal``: the top-left aligned lower triangle, as torch.

    >>> import lodtensor.nested as ln
    >>> q = ln.nested_tensor([np.ones((2, 3, 4)), np.ones((2, 1, 4))])
    >>> ln.scaled_dot_product_attention(q, q, q, is_causal=True).nested_size().tolist()
    [[2, 3, 4], [2, 1, 4]]
    """
    _check_qkv(query, key, value)
    if attn_mask is not None and is_causal:
        raise ShapeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ArgumentError(f"scaled_dot_product_attention(): dropout probability has to be between 0 and 1, "
                            f"but got dropout_p={dropout_p}", argument="dropout_p", value=dropout_p)
    if enable_gqa:
        raise ShapeError("scaled_dot_product_attention(): enable_gqa is not supported for nested tensors")
    if kind_of(query.dtype) != "f":
        raise not_implemented("scaled_dot_product_attention", query)
    if attn_mask is None:  # (B, heads, (L), E) views of rows (tokens, heads, E): per length group on the rows
        out = attend_rows(query, key, value, is_causal, scale, float(dropout_p), make_view)
        if out is not None:
            return out
    be = query.backend
    qs = query._struct
    if attn_mask is None and qs.n and all(qs.regular[-2:]) and all(x._struct.regular[-2] for x in (key, value)):
        # ragged only in batch-like dims ((B, (P), S, E): prompts of a fixed length): the rows are the batch
        axis = qs.rank - 2
        q, k, v = (x._struct.tail_view(x._buffer, axis) for x in (query, key, value))
        out = be.attention(q, k, v, None, is_causal, scale, float(dropout_p))
        sizes = qs.sizes.copy()
        sizes[:, -1] = value._struct.sizes[0, -1]
        return make(out.reshape(-1), qs.derive(sizes), query._layout)
    inputs = [query, key, value]
    if attn_mask is not None:
        inputs.append(_nested_mask(attn_mask, query, key))
    sizes = query._struct.sizes.copy()
    if sizes.shape[0]:
        sizes[:, -1] = value._struct.sizes[0, -1]

    def attend(q, k, v, mask=None):
        return be.attention(q, k, v, mask, is_causal, scale, float(dropout_p))

    out, struct = map_components(inputs, attend, sizes, dtype=query._array().dtype)
    return make(out, struct, query._layout)
