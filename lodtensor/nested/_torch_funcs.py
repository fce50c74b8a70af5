"""torch functions its jagged layout answers that NestedTensor lacked, each written with the ops already
registered (so every backend runs them): ``result_type``, ``tensor_split`` and ``dstack`` along regular
dims, ``repeat_interleave`` of a regular dim, ``F.l1_loss`` and ``F.one_hot``."""

import numbers

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from ..ops._common import int_arg
from ._broadcast import check_nested
from ._dims import _regular_dim
from ._dtypes import _result_dtype, kind_of, resolve_dtype
from ._registry import OP_TABLE, implements

__all__ = ["result_type", "tensor_split", "dstack", "repeat_interleave", "l1_loss", "one_hot"]

_T = "torch.Tensor."


def result_type(tensor, other):
    """The dtype torch's type promotion gives a binary op of ``tensor`` and ``other`` (a nested or dense
    tensor, or a number), in the data's library.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1, 2], [3]])
    >>> ln.result_type(nt, 2.5), ln.result_type(nt, 2)
    (dtype('float32'), dtype('int64'))
    """
    check_nested(tensor, "result_type()")
    other_array = other._buffer if hasattr(other, "_buffer") else other
    dtype = _result_dtype((tensor._buffer, other_array))
    if dtype is None:  # bfloat16, torch data only (NumPy has none): torch's own promotion, on no elements
        be = tensor.backend
        empty = be.flat(tensor._buffer)[:0]
        return (empty + (be.flat(other_array)[:0] if getattr(other_array, "ndim", 0) else other_array)).dtype
    return resolve_dtype(dtype, tensor.backend.name)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of ``input`` split along a regular dim: into ``n`` parts (the first ``size % n`` one longer), or
    at the given indices, as torch's ``tensor_split``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 5)), np.zeros((1, 5))], layout="jagged")
    >>> [p.nested_size().tolist() for p in ln.tensor_split(nt, 2, dim=-1)]
    [[[2, 3], [1, 3]], [[2, 2], [1, 2]]]
    >>> [p.shape[-1] for p in ln.tensor_split(nt, [1, 4], dim=2)]
    [1, 3, 1]
    """
    where = "tensor_split()"
    check_nested(input, where)
    d = _regular_dim(where, input, dim) + 1
    size = int(input._struct.sizes[0, d - 1]) if input._struct.n else 0
    if isinstance(indices_or_sections, (numbers.Integral, np.integer)) or getattr(indices_or_sections, "ndim", 1) == 0:
        n = int_arg(indices_or_sections, where, "sections")
        if n < 1:
            raise ArgumentError(f"{where}: number of sections must be larger than 0, got {n}", argument="sections",
                                value=n)
        cuts = [i * (size // n) + min(i, size % n) for i in range(1, n)]
    else:
        cuts = [int_arg(i, where, "indices") for i in indices_or_sections]
    bounds = [0, *(min(max(c + size if c < 0 else c, 0), size) for c in cuts), size]
    return tuple(OP_TABLE["narrow"](input, d, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))


def dstack(tensors):
    """Nested tensors of at least 3 dims joined along dim 2 (``cat(tensors, 2)``), as torch's ``dstack``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 3)), np.zeros((1, 3))], layout="jagged")
    >>> ln.dstack([nt, nt]).nested_size().tolist()
    [[2, 6], [1, 6]]
    """
    tensors = list(tensors)
    if tensors and any(getattr(t, "dim", lambda: 3)() < 3 for t in tensors):
        raise ShapeError("dstack(): nested tensors of at least 3 dims are joined along dim 2")
    return OP_TABLE["cat"](tensors, 2)


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """Each entry along regular dim ``dim`` repeated ``repeats`` times (an int), as torch's; a copy.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.array([[1, 2]]), np.array([[3, 4], [5, 6]])], layout="jagged")
    >>> ln.repeat_interleave(nt, 2, dim=-1).to_tensor_list()[0].tolist()
    [[1, 1, 2, 2]]
    """
    where = "repeat_interleave()"
    check_nested(input, where)
    if dim is None:
        raise ShapeError(f"{where}: a nested tensor repeats along a regular dim; pass dim (flattening it first "
                         f"would lose its components)")
    r = int_arg(repeats, where, "repeats")
    if r < 0:
        raise ArgumentError(f"{where}: repeats can not be negative, got {r}", argument="repeats", value=r)
    d = _regular_dim(where, input, dim) + 1
    sizes = [-1] * (input.dim() + 1)
    sizes[d + 1] = r
    out = OP_TABLE["flatten"](OP_TABLE["expand"](OP_TABLE["unsqueeze"](input, d + 1), *sizes), d, d + 1)
    if output_size is not None and input._struct.n and out.shape[d] != output_size:
        raise ArgumentError(f"{where}: output_size={output_size} does not match the result's size {out.shape[d]}",
                            argument="output_size", value=output_size)
    return out


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``|input - target|``, its mean (default), sum, or itself (``reduction='none'``), as torch's ``F.l1_loss``
    of nested tensors of one structure.

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> float(ln.l1_loss(a, a * 2)), float(ln.l1_loss(a, a * 2, reduction="sum"))
    (2.0, 6.0)
    """
    if size_average is not None or reduce is not None:  # torch's legacy arguments, mapped as torch maps them
        reduction = "none" if reduce is False else "mean" if size_average is not False else "sum"
    if reduction not in ("none", "mean", "sum"):
        raise ArgumentError(f"l1_loss(): {reduction} is not a valid value for reduction", argument="reduction",
                            value=reduction)
    diff = OP_TABLE["abs"](OP_TABLE["sub"](input, target))
    return diff if reduction == "none" else OP_TABLE[reduction](diff)


def one_hot(tensor, num_classes=-1):
    """Integer nested tensor -> int64 one-hot vectors in a new last dim of ``num_classes`` (``-1``: the
    largest value plus one), as torch's ``F.one_hot``.

    >>> import lodtensor.nested as ln
    >>> ln.one_hot(ln.nested_tensor([np.array([0, 2]), np.array([1])]), 3).to_tensor_list()[0].tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    where = "one_hot()"
    check_nested(tensor, where)
    if kind_of(tensor.dtype) not in "iu":
        raise DTypeError(f"{where}: one_hot is only applicable to index tensor of type LongTensor, got {tensor.dtype}")
    c = int_arg(num_classes, where, "num_classes")
    has_values = bool(tensor.numel())
    low = int(OP_TABLE["amin"](tensor)) if has_values else 0
    high = int(OP_TABLE["amax"](tensor)) if has_values else -1
    if low < 0:
        raise ArgumentError(f"{where}: Class values must be non-negative, got {low}", argument="tensor", value=low)
    if c == -1:
        c = high + 1
    elif high >= c:
        raise ArgumentError(f"{where}: Class values must be smaller than num_classes ({c}), got {high}",
                            argument="num_classes", value=c)
    classes = tensor.backend.arange(max(c, 0), like=tensor._buffer)
    hot = OP_TABLE["eq"](OP_TABLE["unsqueeze"](tensor, -1), classes)
    return hot.to(resolve_dtype(np.int64, tensor.backend.name))


implements("result_type", "torch.result_type")(result_type)
implements("tensor_split", "torch.tensor_split", _T + "tensor_split")(tensor_split)
implements("dstack", "torch.dstack")(dstack)
implements("repeat_interleave", "torch.repeat_interleave", _T + "repeat_interleave")(repeat_interleave)
implements("l1_loss", "torch.nn.functional.l1_loss")(l1_loss)
implements("one_hot", "torch.nn.functional.one_hot")(one_hot)
