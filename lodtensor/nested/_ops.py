"""masked_fill, dropout, clone/detach, the ``*_like`` factories and the in-place fills.

Every one is a single call on the flat buffer, whatever the raggedness: the
components are contiguous and in order, so the buffer *is* the elementwise
domain. Results share the input's Structure (sizes, offsets, cached facts).
The pointwise math ops are in ``_pointwise.py`` (tables).
"""

import numbers

import numpy as np

from ..errors import ArgumentError, ShapeError
from . import _holes as holes
from ._broadcast import align, check_nested, describe, not_implemented, same_backend, scalar_like
from ._construct import _place
from ._dtypes import check_fits, check_requires_grad, kind_of, resolve_dtype
from ._pointwise import write_into
from ._registry import implements
from ._tensor import NestedTensor, make, make_view
from ._views import compact, fill_target, rebase, write_back

__all__ = [
    "masked_fill", "dropout", "alpha_dropout", "feature_alpha_dropout",
    "clone", "detach", "empty_like", "zeros_like", "randn_like", "ones_like",
    "full_like", "rand_like", "fill_", "zero_", "copy_", "masked_fill_",
]  # fmt: skip

_T = "torch.Tensor."
_F = "torch.nn.functional."


# -- masks, dropout, copies -----------------------------------------------------------------
@implements("masked_fill", "torch.masked_fill", _T + "masked_fill")
def masked_fill(input, mask, value):
    """A copy of ``input`` with ``value`` where ``mask`` (a bool nested tensor of the same structure,
    a bool scalar, or a dense bool array that broadcasts as a dense pointwise operand does) is True.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, -2.0], [-3.0]])
    >>> nt.masked_fill(nt < 0, 0.0).to_tensor_list()
    [array([1., 0.], dtype=float32), array([0.], dtype=float32)]
    """
    check_nested(input, "masked_fill()")
    if isinstance(mask, NestedTensor):
        if not input._struct.same_as(mask._struct):
            raise ShapeError(
                f"masked_fill does not support broadcasting when given a NestedTensor: the mask's "
                f"nested structure differs ({describe(mask)} vs {describe(input)})"
            )
        m = mask._buffer
        same_backend("masked_fill()", input._buffer, m)
    else:
        m = scalar_like(mask)
        if m is None and hasattr(mask, "dtype"):
            return _masked_fill_dense(input, mask, value)
        if m is None:
            raise TypeError(f"masked_fill(): mask must be a bool NestedTensor, array or scalar, got "
                            f"{type(mask).__name__}")
    # (a device mask has a dtype: only a host scalar is asked, np.asarray would copy a device array)
    mdtype = m.dtype if hasattr(m, "dtype") else np.asarray(m).dtype
    if kind_of(mdtype) != "b":
        raise TypeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mdtype}")
    value = scalar_like(value)
    if value is None:
        raise TypeError("masked_fill(): value must be a scalar (a number or a 0-d array)")
    value = fill_scalar(value, input.dtype)
    buf = input._buffer
    ops = input.backend
    if isinstance(m, (bool, np.bool_)) and (not m or not ops.requires_grad(buf)):
        out = ops.full(tuple(buf.shape), value, buf.dtype, buf) if m else ops.clone(buf)
    elif isinstance(m, (bool, np.bool_)):  # filled everywhere, on the graph: a zero gradient, not none
        out = ops.astype(ops.where(ops.from_host(np.asarray(True), like=buf), value, buf), buf.dtype)
    else:
        out = ops.astype(ops.where(m, value, buf), buf.dtype)
    return make(out, input._struct, input._layout)


def fill_scalar(value, dtype, where="masked_fill()"):
    """``masked_fill``'s scalar as torch converts it to ``dtype``: -1 into uint8 is 255; 300, or a 0-d host
    tensor holding it, refused as dense torch refuses it (not wrapped). A number comes back as a Python
    number (torch's ``where`` reads a NumPy complex scalar as its real part); a tensor stays itself, its graph
    kept (a device one unread: reading it would wait for the device)."""
    host = isinstance(value, np.ndarray) or getattr(getattr(value, "device", None), "type", None) == "cpu"
    number = value.item() if host else value
    cast = check_fits(number, dtype, where, "value")
    if hasattr(value, "shape") and not isinstance(value, (np.ndarray, np.generic)):
        return value
    return cast.item() if isinstance(cast, np.generic) else cast


def _masked_fill_dense(input, mask, value):
    """``masked_fill`` with a dense ``mask`` broadcast against every component (``(D,)``: per column)."""
    if kind_of(mask.dtype) != "b":
        raise TypeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    value = scalar_like(value)
    if value is None:
        raise TypeError("masked_fill(): value must be a scalar (a number or a 0-d array)")
    value = fill_scalar(value, input.dtype)
    aligned = align("masked_fill()", (input, mask))
    if not aligned.struct.same_as(input._struct):
        raise ShapeError(f"masked_fill(): a mask of shape {tuple(mask.shape)} would grow the components' sizes "
                         f"{input._struct.sizes[0].tolist()}; the result keeps the input's shape")
    buf, m = aligned.arrays
    ops = input.backend
    return aligned.wrap(ops.astype(ops.where(m, value, buf), buf.dtype))


@implements("dropout", _F + "dropout", "torch.dropout")
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (when training).

    NumPy data draws from NumPy's global random state (``np.random.seed``
    applies), torch data from torch's. With ``training=False`` or ``p=0`` (and not ``inplace``) it gives a
    copy, on the autograd graph, on both layouts (torch's nested dropout is ``native_dropout``, which copies).

    >>> import lodtensor.nested as ln
    >>> ln.dropout(ln.nested_tensor([[1.0, 2.0], [3.0]]), p=0.5, training=False).to_tensor_list()[1].tolist()
    [3.0]
    """
    check_nested(input, "dropout()")
    _check_p(p)
    if not training:  # any dtype, as torch's
        return _kept(input, inplace)
    if kind_of(input._array().dtype) not in "fc":
        raise not_implemented("dropout", input)
    if p == 0:
        return _kept(input, inplace)
    if inplace and (input._perm is not None or input._src is not None):  # a view: its _buffer is no storage,
        return write_into(input, dropout(input, p, training), "dropout(inplace=True)")  # so written through
    out = input.backend.dropout(input._buffer, p, inplace)
    return input if inplace else make(out, input._struct, input._layout)


#: SELU's saturation ``-alpha`` is the value alpha_dropout drops to (torch's constant, ATen Dropout.cpp)
_SELU_ALPHA = 1.7580993408473766


@implements("alpha_dropout", _F + "alpha_dropout", "torch.alpha_dropout")
def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """torch's ``alpha_dropout``, for SELU networks: training, each element is kept with probability ``1 - p``
    else set to SELU's saturation ``-alpha``, then all go through the affine map ``a * v + alpha * a * p``,
    ``a = ((alpha**2 * p + 1) * (1 - p)) ** -0.5``, which keeps zero mean and unit variance (``p=1``: zeros).
    ``training=False`` or ``p=0`` returns ``input`` itself (as torch's, on both layouts).

    torch 2.13's nested layouts refuse training mode (``bernoulli_``); here it is torch's dense formula on the
    buffer. NumPy data draws from NumPy's global random state, torch data from torch's.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> ln.alpha_dropout(nt, 0.5, training=False) is nt
    True
    >>> ln.alpha_dropout(nt, 1.0, training=True).to_tensor_list()[0].tolist()
    [0.0, 0.0]
    """
    check_nested(input, "alpha_dropout()")
    _check_p(p)
    if not training or p == 0:  # any dtype, as torch's
        return input
    if kind_of(input._array().dtype) not in "fc":
        raise not_implemented("alpha_dropout", input)
    buf = input._buffer
    be = input.backend
    if p == 1:
        out = buf * 0
    else:
        a = ((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p)) ** -0.5
        keep = be.astype(be.keep_mask(tuple(buf.shape), p, buf), buf.dtype)
        out = buf * (keep * a) + ((keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p)
    out = make(out, input._struct, input._layout)
    return write_into(input, out, "alpha_dropout(inplace=True)") if inplace else out


@implements("feature_alpha_dropout", _F + "feature_alpha_dropout", "torch.feature_alpha_dropout")
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """``training=False`` or ``p=0``: ``input`` itself, as torch's. Training is refused, as torch 2.13's nested
    layouts refuse it (``NotImplementedError``, a ``RuntimeError``): its noise is one draw per channel.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> ln.feature_alpha_dropout(nt, 0.5, training=False) is nt
    True
    """
    check_nested(input, "feature_alpha_dropout()")
    _check_p(p)
    if not training or p == 0:
        return input
    raise NotImplementedError("feature_alpha_dropout() in training mode is not supported for a nested tensor "
                              "(torch 2.13's nested layouts refuse it too); use alpha_dropout() for one draw per "
                              "element, or training=False")


def _check_p(p):
    if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ArgumentError(f"dropout probability has to be between 0 and 1, but got {p}", argument="p", value=p)


def _kept(input, inplace):
    """dropout's result when nothing is dropped: ``input`` in place, else a copy (torch 2.13's jagged and
    strided layouts both copy, through ``native_dropout``)."""
    return input if inplace else clone(input)


@implements("clone", "torch.clone", _T + "clone")
def clone(input, *, memory_format=None):
    """A copy with its own buffer (keeps autograd history on torch); a transposed view stays one unless
    ``memory_format`` is ``torch.contiguous_format``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> copy = ln.clone(nt)
    >>> np.shares_memory(copy.values(), nt.values())
    False
    """
    check_nested(input, "clone()")
    if _wants_contiguous("clone()", memory_format) and not input.is_contiguous():
        return input.contiguous()  # (a copy in component order, as torch's clone to contiguous_format)
    held = holes.apply(clone, (input,))
    if held is not None:  # a copy of all of values, the holes kept (as torch's; a transposed view's too)
        return held
    return make_view(input.backend.clone(input._buf), input._st, input._perm, input._layout)


@implements("detach", "torch.detach", _T + "detach")
def detach(input):
    """The same data without autograd history (shares the buffer; a view of part of a regular dim stays one).

    >>> import lodtensor.nested as ln
    >>> ln.detach(ln.nested_tensor([[1.0, 2.0], [3.0]])).nested_size().tolist()
    [[2], [1]]
    """
    check_nested(input, "detach()")
    if input._src is not None:
        return rebase(input, input.backend.detach(input._src))
    out = make_view(input.backend.detach(input._buf), input._st, input._perm, input._layout)
    kept = getattr(input, "_holes", None)
    if kept is not None:  # the holes kept, over the values detached (shared, as the buffer is)
        out._holes = (input.backend.detach(kept[0]), *kept[1:])
    return out


def _wants_contiguous(where, memory_format):
    """True for ``torch.contiguous_format``, False for None or ``torch.preserve_format``; any other memory
    format (channels_last...) is refused, as torch refuses it for a nested tensor."""
    name = str(memory_format).replace("torch.", "")
    if memory_format is None or name == "preserve_format":
        return False
    if name == "contiguous_format":
        return True
    raise ShapeError(f"{where}: a nested tensor supports memory formats Preserve and Contiguous, got {memory_format}")


def _like(where, input, dtype, device, requires_grad, fill):
    check_nested(input, where)
    buf = input._buffer
    target = resolve_dtype(dtype, input.backend.name) or buf.dtype
    ops = input.backend
    out = fill(ops, (int(buf.shape[0]),), target, buf)
    out = _place(out, device)
    check_requires_grad(out, requires_grad, where)
    if requires_grad:
        out.requires_grad_(True)
    return make(out, input._struct, input._layout)


def _require_floating(input, dtype, kernel):
    """torch's error for random values of a non-floating dtype (its ``kernel`` not implemented for it)."""
    if not isinstance(input, NestedTensor):
        return  # _like names what it is
    if kind_of(resolve_dtype(dtype, input.backend.name) or input._array().dtype) not in "fc":
        raise not_implemented(kernel, input)


@implements("empty_like", "torch.empty_like")
def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure with uninitialised values.

    >>> import lodtensor.nested as ln
    >>> ln.empty_like(ln.nested_tensor([[1.0, 2.0], [3.0]])).nested_size().tolist()
    [[2], [1]]
    """
    _wants_contiguous("empty_like()", memory_format)  # (the result is contiguous)
    return _like("empty_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.empty(s, d, b))


@implements("zeros_like", "torch.zeros_like")
def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure filled with zeros.

    >>> import lodtensor.nested as ln
    >>> ln.zeros_like(ln.nested_tensor([[1.0, 2.0], [3.0]])).to_tensor_list()[0].tolist()
    [0.0, 0.0]
    """
    _wants_contiguous("zeros_like()", memory_format)  # (the result is contiguous)
    return _like("zeros_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.zeros(s, d, b))


@implements("randn_like", "torch.randn_like")
def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure with standard normal values (floating dtypes only).

    >>> import lodtensor.nested as ln
    >>> ln.randn_like(ln.nested_tensor([[1.0, 2.0], [3.0]])).nested_size().tolist()
    [[2], [1]]
    """
    _require_floating(input, dtype, "normal_kernel_cpu")
    _wants_contiguous("randn_like()", memory_format)  # (the result is contiguous)
    return _like("randn_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.randn(s, d, b))


@implements("ones_like", "torch.ones_like")
def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure filled with ones.

    >>> import lodtensor.nested as ln
    >>> ln.ones_like(ln.nested_tensor([[1.0, 2.0], [3.0]])).to_tensor_list()[1].tolist()
    [1.0]
    """
    _wants_contiguous("ones_like()", memory_format)  # (the result is contiguous)
    return _like("ones_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.full(s, 1, d, b))


@implements("full_like", "torch.full_like")
def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure filled with ``fill_value``.

    >>> import lodtensor.nested as ln
    >>> ln.full_like(ln.nested_tensor([[1, 2], [3]]), 7).to_tensor_list()
    [array([7, 7]), array([7])]
    """
    if scalar_like(fill_value) is None:
        raise TypeError(f"full_like(): fill_value must be a number, got {type(fill_value).__name__}")
    _wants_contiguous("full_like()", memory_format)  # (the result is contiguous)
    check_nested(input, "full_like()")
    fill_value = fill_scalar(fill_value, input.dtype if dtype is None else dtype, "full_like()")  # (torch's checks)
    return _like("full_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.full(s, fill_value, d, b))


@implements("rand_like", "torch.rand_like")
def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure with uniform values in ``[0, 1)`` (floating dtypes only).

    >>> import lodtensor.nested as ln
    >>> ln.rand_like(ln.nested_tensor([[1.0, 2.0], [3.0]])).nested_size().tolist()
    [[2], [1]]
    """
    _require_floating(input, dtype, "check_uniform_bounds")
    _wants_contiguous("rand_like()", memory_format)  # (the result is contiguous)
    return _like("rand_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.rand(s, d, b))


# -- in place ------------------------------------------------------------------------------
@implements("fill_", "torch.Tensor.fill_", "torch.fill_")
def fill_(input, value):
    """Set every element to ``value`` (a scalar); in place, returns ``input``.

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).fill_(7.0).to_tensor_list()[1].tolist()
    [7.0]
    """
    check_nested(input, "fill_()")
    if scalar_like(value) is None and getattr(value, "ndim", 0):
        raise ShapeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    if scalar_like(value) is None:
        raise TypeError(f"fill_(): value must be a number or a 0-d array, got {type(value).__name__}")
    value = fill_scalar(value, input.dtype, "fill_()")  # (uint8: -1 is 255, 300 refused, as torch's)
    holes.check_writable(input)
    kept = holes.whole(input)
    if kept is not None:  # every row of values, the holes too (as torch's)
        kept[0][...] = value
    fill_target(input)[...] = value  # every element: how the storage is viewed does not matter
    input._written()
    return input


@implements("zero_", "torch.Tensor.zero_", "torch.zero_")
def zero_(input):
    """Set every element to 0; in place, returns ``input``.

    >>> import lodtensor.nested as ln
    >>> ln.nested_tensor([[1.0, 2.0], [3.0]]).zero_().to_tensor_list()[0].tolist()
    [0.0, 0.0]
    """
    return fill_(input, 0)


@implements("copy_", "torch.Tensor.copy_")
def copy_(input, src, non_blocking=False):
    """Copy ``src`` (a nested tensor of the same structure, a scalar, or a dense array that broadcasts
    as for ``+``) into ``input``, casting to its dtype; in place, returns ``input``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> nt.copy_(nt * 2).to_tensor_list()[0].tolist()
    [2.0, 4.0]
    """
    check_nested(input, "copy_()")
    holes.check_writable(input)
    kept, theirs = holes.whole(input), holes.whole(src) if isinstance(src, NestedTensor) else None
    if kept is not None and (scalar_like(src) is not None or (theirs is not None and holes.same(kept, theirs))):
        kept[0][...] = src if theirs is None else theirs[0]  # every row of values, the holes too (as torch's)
    if input._src is not None:  # a view of part of a regular dim: copied into a compact copy, then the window
        return write_back(input, copy_(compact(input), src, non_blocking))
    aligned = align("copy_", (input, src), names=("self", "src"))
    if input._perm is not None and not aligned._stored:  # a transposed view read through a materialised copy:
        done = make(input._buffer, input._struct, input._layout)  # copy into that copy, then store it back
        copy_(done, src, non_blocking)
        input._buf[...] = input._stored(done._buf)
        input._written()  # (with holes: the components' rows into the values)
        return input
    dst, value = aligned.arrays
    dst[...] = value
    input._written()
    return input


@implements("masked_fill_", "torch.Tensor.masked_fill_")
def masked_fill_(input, mask, value):
    """:func:`masked_fill` written into ``input``; returns ``input``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, -2.0], [-3.0]])
    >>> nt.masked_fill_(nt < 0, 0.0).to_tensor_list()
    [array([1., 0.], dtype=float32), array([0.], dtype=float32)]
    """
    return write_into(input, masked_fill(input, mask, value), "masked_fill_()")
