"""Neural-network ops: softmax, linear, matmul, bmm, layer_norm, embedding_bag.

Fast paths first: ``linear`` is one GEMM on the buffer viewed as rows,
``layer_norm`` one blocked pass over rows, ``softmax`` over a ragged dim one
segment kernel, over regular trailing dims one dense softmax. Only what
depends on several ragged dims at once (``matmul``, softmax across a ragged
dim followed by ragged dims) groups components by shape.
"""

import numbers

import numpy as np

from ..backend import backend_name_of, get_backend
from ..errors import DTypeError, ShapeError
from . import _holes as holes
from ._broadcast import check_nested, not_implemented, same_backend
from ._dtypes import kind_of, resolve_dtype
from ._grouped import map_components
from ._registry import OP_TABLE, implements
from ._structure import implicit_dim, op_dim
from ._tensor import NestedTensor, make, normalize_dim
from ._whole_norm import covers_components, whole_layer_norm

__all__ = ["softmax", "linear", "layer_norm", "embedding_bag"]

_T = "torch.Tensor."
_F = "torch.nn.functional."


def segments_along(struct, axis):
    """Row offsets of the segments along component ``axis`` when every later dim is regular.

    The buffer viewed as ``(rows, *sizes[axis + 1:])`` then holds, for each
    component, ``prod(sizes[:axis])`` consecutive segments of ``sizes[axis]``
    rows each. Returns ``(offsets, total_rows, row_shape)``.
    """
    sizes = struct.sizes
    count = sizes[:, :axis].prod(axis=1) if axis else np.ones(struct.n, np.int64)
    lengths = np.repeat(sizes[:, axis], count)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    row_shape = tuple(int(s) for s in sizes[0, axis + 1 :])
    return offsets, int(offsets[-1]), row_shape


# -- softmax ----------------------------------------------------------------------------------
def softmax_like(name, input, dim, dtype, dim0_error, segments):
    """``softmax`` or ``log_softmax`` (op ``name``, also the backend's dense function) along ``dim``.

    Checks the arguments (``dim`` not 0, torch's implicit one if None; ``dim0_error`` being torch's
    message for dim 0; the buffer, cast to ``dtype`` when given, floating),
    then: a dense call over a regular trailing dim; ``segments(be, x, offsets,
    rows)`` over a ragged dim with regular dims after it (``x`` the buffer as
    ``(rows, *row)``, ``offsets`` the row offsets of the segments on ``x``'s backend and device); else
    one dense call per group of equal component shapes.
    """
    check_nested(input, f"{name}()")
    if dim is None:  # torch's legacy implicit dim (1 or the batch dim 0), with its warning
        dim = implicit_dim(name, input.dim())
    held = holes.apply(softmax_like, (name, input, dim, dtype, dim0_error, segments)) if holes.over_row_dims(
        input, dim) else None
    if held is not None:  # over a row dim of a tensor with holes: all of values, the holes kept (as torch's)
        return held
    if not input._st.outer and normalize_dim(dim, input.dim()) == 0:
        raise ShapeError(dim0_error)
    d = op_dim(input, dim, f"{name}()")
    be = input.backend
    buf = input._buffer
    if dtype is not None:
        buf = be.astype(buf, resolve_dtype(dtype, be.name))
    if kind_of(buf.dtype) != "f":
        raise not_implemented(f"{name}_lastdim_kernel_impl", make(buf, input._struct))
    dense = getattr(be, name)
    st = input._struct
    axis = d - 1
    if st.n == 0 or buf.shape[0] == 0:
        return make(be.clone(buf), st, input._layout)
    half = buf.dtype if buf.dtype.itemsize == 2 else None
    if half is not None:  # float16/bfloat16: exp and sums in float32, one rounding at the end (as torch)
        buf = be.astype(buf, resolve_dtype("float32", be.name))

    def done(out):
        return make(out if half is None else be.astype(out, half), st, input._layout)

    if all(st.regular[axis:]):
        return done(dense(st.tail_view(buf, axis), 1).reshape(-1))
    if all(st.regular[axis + 1 :]):  # a ragged dim with regular dims after it: segment kernels
        if axis == 0 and st.is_lod:
            offsets, row_shape = st.rows()  # cached on the structure
            rows = int(offsets[-1])
            x = buf.reshape((rows,) + row_shape)
            dev = st.lod().on(be, "offsets", 0, like=x)  # the device copy cached on the structure's LoD (with the
            # kernels' plans keyed by it): no host-to-device copy per call
        else:
            offsets, rows, row_shape = segments_along(st, axis)
            x = buf.reshape((rows,) + row_shape)
            dev = be.from_host(offsets, like=x)
        out = segments(be, x, dev, rows)
        return done(out.reshape(-1))
    source = buf
    if name == "softmax":
        shifted = _exp_shifted(be, buf)
        if shifted is not None:  # exp once over the whole buffer: per component a sum and a multiply remain
            source, dense = shifted, be.normalize_sum
    out, _ = map_components([make(source, st)], lambda block: dense(block, d), st.sizes, dtype=buf.dtype,
                            into=lambda block, out: dense(block, d, out=out))
    return done(out)


_SHIFT_SPAN = {"float32": 16.0, "float64": 64.0}  # exp(-span) stays a normal number; rounding x - shift
# adds at most span * eps / 2 relative error (1e-6 for float32)


def _exp_shifted(be, buf):
    """``exp(buf - max(buf))`` when one shift serves every softmax segment, else None.

    Softmax is shift-invariant per segment, so the largest value of the whole
    buffer is a valid shift for all of them as long as no segment's terms all
    underflow: values spanning at most ``_SHIFT_SPAN`` (and no NaN or inf,
    which fail the comparison) guarantee it.
    """
    span = _SHIFT_SPAN.get(str(buf.dtype).replace("torch.", ""))
    if span is None or buf.shape[0] == 0:
        return None
    probe = be.detach(buf)  # the shift is a constant: no graph for it
    hi = float(be.reduce(probe, "amax", None, False))
    lo = float(be.reduce(probe, "amin", None, False))
    if not hi - lo <= span:
        return None
    return be.pointwise("exp", "exp", buf - hi)


@implements("softmax", "torch.softmax", _F + "softmax", _T + "softmax", "torch.special.softmax")
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax along ``dim`` (any dim but 0) of every component.

    Over a ragged dim with regular dims after it (``(batch, (tokens), heads)``)
    this is one segment kernel on the flat buffer; over a regular trailing
    dim one dense softmax; otherwise grouped by component shape.

    Examples
    --------
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    >>> ln.softmax(nt, 1).to_tensor_list()
    [array([0.5, 0.5], dtype=float32), array([0.25, 0.25, 0.25, 0.25], dtype=float32)]
    >>> ln.softmax(nt, 0)
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: Cannot apply softmax across nested dimension 0
    """
    return softmax_like("softmax", input, dim, dtype, "Cannot apply softmax across nested dimension 0",
                        _segment_softmax)


def _segment_softmax(be, x, offsets, rows):
    return be.segment_softmax(x, offsets)


# -- linear -----------------------------------------------------------------------------------
def _check_weight(where, nt, weight, bias):
    for name, arr in (("weight", weight), ("bias", bias)):
        if arr is not None and backend_name_of(arr) is None:
            raise TypeError(f"{where}: {name} must be an array or tensor, got {type(arr).__name__}")
    same_backend(where, nt._array(), *[a for a in (weight, bias) if a is not None])
    dtype = nt._array().dtype
    for name, arr in (("weight", weight), ("bias", bias)):
        if arr is not None and arr.dtype != dtype:
            raise DTypeError(f"{where}: expected the nested tensor and {name} to have the same dtype, got "
                             f"{dtype} and {arr.dtype}")  # (TypeError; torch raises a RuntimeError)


def _with_last(st, size):
    """The structure with the last component dim set to ``size`` (row offsets reused)."""
    if st.n and int(st.sizes[0, -1]) == size and st.regular[-1]:
        return st
    sizes = st.sizes.copy()
    sizes[:, -1] = size
    out = st.derive(sizes)
    if st.is_lod and st._rows is not None and st.rank > 1:
        out._rows = (st._rows[0], st._rows[1][:-1] + (size,))
    return out


def _regular_last(where, nt):
    st = nt._struct
    if st.rank == 0:
        raise ShapeError(f"{where}: the components are 0-d; a matrix product needs at least 1 dim")
    if not st.regular[-1]:
        raise ShapeError(
            f"{where}: Expected all tensors in nested tensor to have the same trailing dimension, "
            f"instead last dimension equals: {st.sizes[:, -1].tolist()[:8]}"
        )
    return int(st.sizes[0, -1]) if st.n else 0


@implements("linear", _F + "linear")
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` on every component: one GEMM on the flat buffer.

    ``weight`` is a dense ``(out_features, in_features)`` array of the same
    library and dtype (or, on the jagged layout, ``(in_features,)``, which
    contracts the last dim away, as torch's); the last component dim must be regular and equal
    ``in_features``. Any other dims may be ragged.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))])
    >>> ln.linear(nt, np.ones((4, 3)), np.zeros(4)).nested_size().tolist()
    [[2, 4], [1, 4]]
    """
    where = "linear()"
    check_nested(input, where)
    if getattr(weight, "ndim", None) == 1 and input.dim() >= 2 and input._layout == "jagged":  # torch's jagged
        # layout: x @ w, the last dim contracted away (its strided layout refuses a 1-d weight)
        if bias is not None:
            raise ShapeError(f"{where}: a 1-d weight takes no bias (as torch's dense linear), got a bias of shape "
                             f"{tuple(bias.shape)}")
        return OP_TABLE["squeeze"](linear(input, weight.reshape(1, -1)), -1)
    if getattr(weight, "ndim", None) != 2:
        raise ShapeError(
            f"Linear requires nested_tensor.dim >= 2 and dense_matrix.dim == 2. Nested tensor dim: "
            f"{input.dim()}. Dense tensor dim: {getattr(weight, 'ndim', None)}"
        )
    _check_weight(where, input, weight, bias)
    if input.dim() < 2:
        raise ShapeError(
            f"Linear requires nested_tensor.dim >= 2 and dense_matrix.dim == 2. Nested tensor dim: {input.dim()}"
        )
    last = _regular_last(where, input)
    out_f, in_f = (int(s) for s in weight.shape)
    if input._struct.n and last != in_f:
        raise ShapeError(
            f"Shape mismatch for NestedTensor Linear: Expected input's (a nested tensor) 'last_dim' to "
            f"equal 'weight.size(1), but got: last_dim = {last}, and weight.size(1) = {in_f}"
        )
    if bias is not None and tuple(bias.shape) not in ((out_f,), ()):
        raise ShapeError(f"{where}: bias must have shape ({out_f},), got {tuple(bias.shape)}")
    buf = input._buffer
    rows = input._struct.tail_view(buf, input._struct.rank - 1, (in_f,))
    out = input.backend.linear(rows, weight, bias)
    return make(out.reshape(-1), _with_last(input._struct, out_f), input._layout)


# -- matmul / bmm -----------------------------------------------------------------------------
@implements("layer_norm", _F + "layer_norm", "torch.layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dims of every component, one pass.

    ``normalized_shape`` must lie within the regular trailing dims, or be ``nt.shape[1:]`` (every
    component normalised over all its elements, as torch's jagged layout; no ``weight`` or ``bias`` then);
    ``weight`` and ``bias`` (optional, shape ``normalized_shape``) scale and shift.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[[1.0, 3.0]], [[0.0, 2.0], [5.0, 5.0]]])
    >>> ln.layer_norm(nt, (2,)).to_padded_tensor(0.0).round(3).tolist()
    [[[-1.0, 1.0], [0.0, 0.0]], [[-1.0, 1.0], [0.0, 0.0]]]
    """
    where = "layer_norm()"
    check_nested(input, where)
    ns = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    st = input._struct
    k = len(ns)
    if 0 < k <= st.rank - 1 and holes.over_row_dims(input, tuple(range(-k, 0))):  # (the holes kept, as torch's)
        held = holes.apply(layer_norm, (input, normalized_shape, weight, bias, eps))
        if held is not None:
            return held
    if k == 0 or k > st.rank:
        raise ShapeError(
            f"{where}: normalized_shape {list(ns)} must name 1 to {st.rank} trailing dims of the components"
        )
    if not all(st.regular[st.rank - k :]):
        if covers_components(input, ns):  # the ragged dim and all after it (nt.shape[1:]): whole components
            return whole_layer_norm(input, eps, weight, bias, make)
        raise ShapeError("normalized_shape extends into irregular dimensions for the nested tensor")
    if st.n:
        have = tuple(int(s) for s in st.sizes[0, st.rank - k :])
        for i, (want, got) in enumerate(zip(ns, have)):
            if want != got:
                raise ShapeError(
                    f"The shape at dimension {i} of normalized_shape doesn't match the input: "
                    f"normalized_shape={list(ns)}, trailing component shape {list(have)}"
                )
    for name, arr in (("weight", weight), ("bias", bias)):
        if arr is not None and tuple(arr.shape) != ns:
            raise ShapeError(f"{where}: {name} must have shape {ns} (normalized_shape), got {tuple(arr.shape)}")
    _check_weight(where, input, weight, bias)
    if kind_of(input._array().dtype) != "f":
        raise not_implemented("LayerNormKernelImpl", input)
    width = int(np.prod(ns))
    buf = st.tail_view(input._buffer, st.rank - k, ns)
    buf = buf.reshape((buf.shape[0], width))
    w = None if weight is None else weight.reshape(-1)
    b = None if bias is None else bias.reshape(-1)
    out = input.backend.layer_norm(buf, eps, w, b)
    return make(out.reshape(-1), st, input._layout)


# -- embedding_bag ----------------------------------------------------------------------------
@implements("embedding_bag", _F + "embedding_bag")
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sum, mean or max of ``weight`` rows over each component of a nested tensor of 1-d id sequences.

    Equal to ``torch.nn.EmbeddingBag`` with the components as bags (their
    offsets are the nested tensor's): a dense ``(num_bags, embedding_dim)``
    array; empty bags give zeros. Ids are moved to the weight's library.
    ``max_norm`` rescales the looked-up rows without writing into ``weight``.

    >>> import lodtensor.nested as ln
    >>> ids = ln.nested_tensor([[0, 2], [], [1]])
    >>> w = np.arange(6.0).reshape(3, 2)
    >>> ln.embedding_bag(ids, w, mode="sum").tolist()
    [[4.0, 6.0], [0.0, 0.0], [2.0, 3.0]]
    """
    where = "embedding_bag()"
    check_nested(input, where)
    if offsets is not None:
        raise ShapeError(f"{where}: offsets has to be None if input is a nested tensor (its components are the bags)")
    if input.dim() != 2:
        raise ShapeError(f"{where}: input must be a nested tensor of 1-d id sequences (dim 2), got dim {input.dim()}")
    if kind_of(input._array().dtype) not in "iu":
        raise TypeError(f"{where}: input must hold integer ids, got dtype {input._array().dtype}")
    if backend_name_of(weight) is None or weight.ndim != 2:
        raise ShapeError(f"{where}: weight must be a 2-d array (num_embeddings, embedding_dim)")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{where}: mode has to be one of sum, mean or max, got {mode!r}")
    if sparse or scale_grad_by_freq:
        raise NotImplementedError(f"{where}: sparse=True and scale_grad_by_freq=True are not supported")
    be = get_backend(backend_name_of(weight))
    device = be.device_of(weight)
    ids = be.to_device(be.asarray(input._buffer, dtype=resolve_dtype("int64", be.name)), device)
    num = int(weight.shape[0])
    if ids.shape[0]:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num:
            raise IndexError(
                f"{where}: index out of range in self: ids must be in [0, {num}), got {lo if lo < 0 else hi}"
            )
    lengths = input._struct.sizes[:, 0]
    weights = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise ShapeError(
                f"embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
                f"for mode='sum' (got mode='{mode}')."
            )
        if not isinstance(per_sample_weights, NestedTensor) or not input._struct.same_as(per_sample_weights._struct):
            raise ShapeError(
                f"{where}: per_sample_weights must be a nested tensor with the same nested structure as input"
            )
        weights = per_sample_weights._buffer
        same_backend(where, weight, weights)
    if padding_idx is not None:
        padding_idx = padding_idx + num if padding_idx < 0 else padding_idx
        keep = be.to_numpy(ids) != padding_idx
        seg = np.repeat(np.arange(lengths.size), lengths)
        lengths = np.bincount(seg[keep], minlength=lengths.size).astype(np.int64)
        index = np.flatnonzero(keep)
        ids = be.gather(ids, index)
        if weights is not None:
            weights = be.gather(weights, index)
    rows = be.gather(weight, ids)
    if max_norm is not None:
        rows = be.renorm_rows(rows, max_norm, norm_type)
    if weights is not None:
        rows = rows * weights.reshape(-1, 1)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    offsets = be.from_host(offsets, like=rows)
    if mode == "sum":
        return be.segment_sum(rows, offsets)
    if mode == "mean":
        return be.segment_mean(rows, offsets, empty=0)
    return be.segment_max(rows, offsets, empty=0)


# -- reductions ---------------------------------------------------------------------------------
