"""Reductions over one component dim, or over everything: sum, mean, prod, amax/amin, max/min,
argmax/argmin, any/all.

Over the ragged dim of sequences (only dim 1 ragged) the result is dense
``(components, *row)``, as torch's jagged layout gives: sum/mean/amax/amin are
one segment kernel; prod/any/all/argmax/argmin pad with the reduction's
identity once and reduce the dense axis. Over a regular dim the result is a
nested tensor without that dim; with several ragged dims, components of equal
shape are reduced together (``_grouped``). ``keepdim=True`` over the last dim of the strided
layout stays nested (``kept_nested``), as torch's strided layout.
"""

import builtins
from collections import namedtuple

import numpy as np

from .._dense import pad_level
from ..backend import dtype_name
from ..errors import DTypeError, ShapeError
from . import _holes as holes
from ._broadcast import check_nested
from ._dtypes import DEFAULT_FLOAT, kind_of, resolve_dtype, torch_name
from ._grouped import map_components
from ._registry import OP_TABLE, implements
from ._structure import dropped_jag, op_dim
from ._tensor import NestedTensor, Structure, make, normalize_dim

__all__ = ["REDUCTIONS", "sum", "mean", "amax", "amin", "prod", "any", "all", "argmax", "argmin", "max", "min"]

_T = "torch.Tensor."

#: ``ln.max(nt, dim)`` and ``ln.min(nt, dim)`` return ``(values, indices)``, like torch.return_types.max.
MaxMin = namedtuple("MaxMin", ["values", "indices"])


def _over_ragged(st, dim):
    """Whether ``dim`` is the one ragged dim of sequences (where torch's jagged mean takes integers)."""
    return isinstance(dim, int) and st.is_lod and dim in (1, 1 - (st.rank + 1))


def _identity(kind, dtype):
    """The value padding may add without changing ``kind``'s result."""
    if kind == "prod":
        return 1
    if kind in ("any", "all"):
        return kind == "all"
    k = kind_of(dtype)
    low = kind == "argmax"
    if k == "b":
        return not low
    if k in "iu":
        info = np.iinfo(np.dtype(str(dtype).replace("torch.", "")))
        return int(info.min if low else info.max)
    return float("-inf") if low else float("inf")


_BFLOAT16_MAX = float.fromhex("0x1.fep127")


def _of_empty(kind, dtype):
    """What ``amax``/``amin`` of an empty component over the ragged dim gives: the dtype's lowest value
    (amax) or highest (amin), as torch's jagged layout (a bool gives False / True)."""
    high = kind == "amin"
    k = kind_of(dtype)
    if k == "b":
        return high
    name = dtype_name(dtype)
    if k in "iu":
        info = np.iinfo(name)
        return int(info.max if high else info.min)
    big = _BFLOAT16_MAX if name == "bfloat16" else float(np.finfo(name).max)
    return big if high else -big


def _reduce(where, kind, input, dim, keepdim, dtype):
    """``kind`` of ``input`` over one component dim (a dense result when the reduced dim was the
    only irregular one, as torch's jagged layout gives), or over everything (``dim=None``)."""
    check_nested(input, where)
    be = input.backend
    ops = be
    if isinstance(dim, (tuple, list)) and not dim and kind in ("sum", "mean", "amax", "amin"):
        dim = None  # dim=() or []: every dim, as torch's
    if dtype is not None and kind in ("sum", "prod"):
        want = resolve_dtype(dtype, be.name)
        if kind_of(want) in "biu":  # computed as the int64 sum of the cast values, kept in ``dtype`` (wrapping
            out = _reduce(where, kind, input.to(want), dim, keepdim, None)  # as torch's: the same mod 2**bits)
            return out.to(want) if isinstance(out, NestedTensor) else ops.astype(out, want)
    buf = input._buffer
    if dtype is not None:
        buf = ops.astype(buf, resolve_dtype(dtype, be.name))
    k = kind_of(buf.dtype)
    if kind in ("argmax", "argmin") and k in "bc":  # (torch: a RuntimeError; NumPy orders complex numbers)
        raise DTypeError(f"{kind}(): does not support {'bool' if k == 'b' else 'complex'} input")
    if kind in ("amax", "amin") and k == "c":
        raise DTypeError(f'"{kind[1:]}_values_cpu" not implemented for \'{torch_name(buf.dtype)}\': {where} needs '
                         f"real data (torch orders no complex numbers), got dtype {buf.dtype}")
    if kind in ("sum", "prod") and k in "biu" and dtype is None:
        buf = ops.astype(buf, resolve_dtype(np.int64, be.name))  # torch: integer sums and products are int64
    if kind == "mean" and k not in "fc":
        if not _over_ragged(input._struct, dim):
            raise DTypeError(  # (TypeError and RuntimeError: torch raises a RuntimeError)
                f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
                f"dtype. Got: {torch_name(buf.dtype)}"
            )
        buf = ops.astype(buf, resolve_dtype(DEFAULT_FLOAT, be.name))  # over the ragged dim torch gives float32
    if dim is None:
        out = ops.reduce(buf, kind, None, False)
        return out.reshape((1,) * input.dim()) if keepdim else out  # keepdim: a dense (1, 1, ...), as torch's
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if len(dims) != 1:
        return _reduce_several(where, kind, input, buf, dims, keepdim)
    d = op_dim(input, dims[0], where)
    if d == 0:
        raise ShapeError(
            f"{where}: reducing along the batch dimension but not the ragged dimension is not supported "
            f"for nested tensors"
        )
    st = input._struct
    axis = d - 1
    sizes, jag = _reduced(st, axis, keepdim)
    over_rows = st.is_lod and axis == 0  # torch's jagged layout: an empty component has a value (below)
    if kind in ("amax", "amin", "argmax", "argmin") and not over_rows and st.n and (st.sizes[:, axis] == 0).any():
        if input._layout == "jagged" and st.jag == axis and not st.outer:  # the ragged dim of a transposed view
            return _over_ragged_first(where, kind, input, d, keepdim, dtype)
        i = int(np.flatnonzero(st.sizes[:, axis] == 0)[0])
        raise ShapeError(
            f"{where}: component {i} has size 0 in dim {d}; {kind} of an empty dim has no value"
        )
    if st.is_lod:  # (also of no component: the rows are (0, *row_shape))
        offsets, row_shape = st.rows()
        rows = buf.reshape((int(offsets[-1]),) + row_shape)
        if axis == 0 and 0 in row_shape:  # rows of no elements: an empty result, no kernel to run
            shape = (st.n, 1) + row_shape if keepdim else (st.n,) + row_shape
            dtype = resolve_dtype(np.int64, be.name) if kind in ("argmax", "argmin") else (
                resolve_dtype(np.bool_, be.name) if kind in ("any", "all") else rows.dtype)
            return ops.empty(shape, dtype, rows)
        if axis == 0:  # the ragged dim: one segment kernel, a dense (components, *row) result
            dev = st.lod().on(be, "offsets", 0, like=rows)
            if kind == "sum":
                out = be.segment_sum(rows, dev)
            elif kind == "mean":
                out = be.segment_mean(rows, dev, empty=float("nan"))
            elif kind in ("amax", "amin"):
                empty = _of_empty(kind, rows.dtype)  # an empty component: the lowest (highest) value, as torch
                out = (be.segment_max if kind == "amax" else be.segment_min)(rows, dev, empty=empty)
            else:  # prod, any, all, argmax, argmin: pad with the identity, reduce the dense axis
                padded, _ = pad_level(be, rows, st.lod(), 0, _identity(kind, rows.dtype), None, None, where)
                if padded.shape[1] == 0 and kind in ("argmax", "argmin"):  # every component empty: index 0
                    padded = ops.zeros((st.n, 1) + row_shape, padded.dtype, padded)
                return ops.reduce(padded, kind, 1, keepdim)
            return out.reshape((st.n, 1) + row_shape) if keepdim else out
        out = ops.reduce(rows, kind, axis, keepdim)  # a regular dim of every row
        return make(out.reshape(-1), st.derive(sizes, jag=jag), input._layout)
    out, struct = map_components([make(buf, st)], lambda block: ops.reduce(block, kind, d, keepdim), sizes)
    result = make(out, struct.with_jag(jag), input._layout)
    others = builtins.all(r for i, r in enumerate(st.regular) if i != axis)
    if st.n and others and (axis == 0 or not st.regular[axis]):  # no ragged dim left: dense, as torch's jagged
        return out.reshape((st.n,) + tuple(int(s) for s in sizes[0]))  # sum (also of a transposed view)
    return result


def _over_ragged_first(where, kind, input, d, keepdim, dtype):
    """``kind`` over the ragged dim ``d`` of a jagged transposed view, as over its rows (an empty component
    then has a value, as torch's): the view permuted to put that dim first (a view), reduced over dim 1, and
    the result's dims back in the input's order."""
    others = [a for a in range(1, input.dim()) if a != d]
    out = _reduce(where, kind, OP_TABLE["permute"](input, (0, d, *others)), 1, False, dtype)
    if not keepdim:
        return out
    if isinstance(out, NestedTensor):
        return OP_TABLE["unsqueeze"](out, d)
    return out.reshape((*(int(s) for s in out.shape[:d]), 1, *(int(s) for s in out.shape[d:])))


def _reduced(st, axis, keepdim):
    """``(sizes, jag)``: the size table and jagged dim of ``st`` reduced over component axis ``axis``."""
    sizes = st.sizes.copy()
    if keepdim:
        sizes[:, axis] = 1
    else:
        sizes = np.delete(sizes, axis, axis=1)
    return sizes, (st.jag if keepdim and st.jag != axis else dropped_jag(st.jag, axis))


def _reduce_several(where, kind, input, buf, dims, keepdim):
    """``kind`` over several dims at once, as torch's jagged layout: regular dims (a nested result, one dim
    after the other), or the batch and ragged dims of sequences with any regular ones (a dense result,
    over every row of ``buf``, the input's buffer already in the result's dtype)."""
    ds = sorted({op_dim(input, d, where) for d in dims}, reverse=True)  # (a dim named twice counts once)
    st = input._struct
    ragged = [a + 1 for a, r in enumerate(st.regular) if not r]
    if kind not in ("sum", "mean", "amax", "amin", "any", "all") or not ds:
        raise ShapeError(
            f"{where}: reducing along several dims at once is not supported for nested tensors "
            f"(got dim={tuple(dims)!r}); reduce one dim at a time"
        )
    if 0 not in ds:
        if builtins.any(d in ragged for d in ds):
            raise ShapeError(f"{where}: reducing along a ragged and non-batch dimension is not supported for "
                             f"nested tensors (got dim={tuple(dims)!r})")
        out = make(buf, st, input._layout)  # (the buffer in the result's dtype)
        for d in ds:  # the highest dim first: the lower ones keep their numbers
            out = _reduce(where, kind, out, d, keepdim, None)
        return out
    if not (st.is_lod and 1 in ds) or st.outer:
        raise ShapeError(
            f"{where}: reducing along the batch dimension needs the ragged dim of sequences too "
            f"(dims 0 and 1 of a nested tensor ragged in dim 1 alone), got dim={tuple(dims)!r}"
        )
    ops = input.backend
    offsets, row_shape = st.rows()
    out = ops.reduce(buf.reshape((int(offsets[-1]),) + row_shape), kind, 0, keepdim)  # every row at once
    if keepdim:
        out = out.reshape((1,) + tuple(out.shape))
    for d in ds:
        if d > 1:  # a regular dim: its axis in the result (dims 0 and 1 became one axis, or two kept ones)
            out = ops.reduce(out, kind, d if keepdim else d - 2, keepdim)
    return out


#: name: (takes ``dtype=``, what it computes; the docs below). Every entry becomes ``ln.<name>``, the method and
#: ``torch.<name>`` / ``torch.Tensor.<name>``, all through the one ``_reduce``.
REDUCTIONS = {
    "sum": (True, "Sum"),
    "mean": (True, "Mean"),
    "prod": (True, "Product"),
    "amax": (False, "Maximum"),
    "amin": (False, "Minimum"),
    "any": (False, "Whether any value is true (a bool result; an empty component gives False)"),
    "all": (False, "Whether every value is true (a bool result; an empty component gives True)"),
    "argmax": (False, "Index of the first largest value (int64; within each component, or into the flat values)"),
    "argmin": (False, "Index of the first smallest value (int64; within each component, or into the flat values)"),
}

_EXTRA_DOCS = {
    "sum": """
    Over the ragged dim of sequences (only dim 1 ragged) the result is a dense
    ``(components, *row)`` array, one segment kernel, as torch's jagged
    layout gives; over a regular dim it is a nested tensor without that dim.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))])
    >>> ln.sum(nt, dim=1).tolist()
    [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]]
    >>> ln.sum(nt, dim=2).nested_size().tolist()
    [[2], [4]]
    >>> float(nt.sum())
    18.0
    """,
    "mean": """
    Integer inputs are refused, as torch refuses them, except over the ragged dim of sequences, where
    torch's jagged layout gives a float32 mean; an empty component gives nan.

    >>> import lodtensor.nested as ln
    >>> ln.mean(ln.nested_tensor([[1.0, 3.0], [5.0]]), dim=1).tolist()
    [2.0, 5.0]
    """,
    "prod": """
    Integer and bool inputs give int64; an empty component gives 1.

    >>> import lodtensor.nested as ln
    >>> ln.prod(ln.nested_tensor([[1, 3], [5], []]), dim=1).tolist()
    [3, 5, 1]
    """,
    "amax": """
    >>> import lodtensor.nested as ln
    >>> ln.amax(ln.nested_tensor([[1, 3], [5]]), dim=1).tolist()
    [3, 5]
    """,
}


def rows_of_components(input, result):
    """A dense result with one row per component (a reduction over the ragged dim) of a nested tensor with
    outer levels, as a nested tensor over them: pooling the words of ``(documents, (sentences), (words),
    hidden)`` gives ``(documents, (sentences), hidden)``. Other results as they are."""
    st = input._st
    if not st.outer or isinstance(result, NestedTensor) or getattr(result, "ndim", 0) == 0:
        return result
    rows = st.outer[-1]
    structure = Structure.of_rows(np.diff(rows), tuple(int(s) for s in result.shape[1:]), st.outer[:-1])
    return make(result.reshape(-1), structure, input._layout)


def kept_nested(input, dim, keepdim, result):
    """A dense result of ``keepdim=True`` over the last dim of a strided-layout tensor (ragged there: 1-d
    components, or a ragged last dim) as a nested tensor of its rows, as torch's strided layout, which
    reduces that dim alone, keeps one (``sum(-1, keepdim=True)`` of 1-d components: components ``(1,)``).
    Other results as they are (over dim 1 of wider components: dense, as torch's jagged layout)."""
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if not (keepdim and isinstance(dim, int) and input._layout == "strided") or isinstance(result, NestedTensor):
        return result
    if input._st.outer or getattr(result, "ndim", 0) < 2 or normalize_dim(dim, input.dim()) != input.dim() - 1:
        return result
    return make(result.reshape(-1), Structure.uniform(int(result.shape[0]), tuple(result.shape[1:])), "strided")


def _make_reduction(name, takes_dtype, what):
    def reduced(input, dim, keepdim, dtype):
        held = holes.apply(reduced, (input, dim, keepdim, dtype)) if holes.over_row_dims(input, dim) else None
        if held is not None:  # over the row dims of a tensor with holes: all of values, the holes kept (as torch's)
            return held
        out = kept_nested(input, dim, keepdim, rows_of_components(
            input, _reduce(f"{name}()", name, input, dim, keepdim, dtype)))
        if name in ("any", "all") and dtype_name(input.dtype) == "uint8":  # torch's: uint8 data, a uint8 result
            u8 = resolve_dtype(np.uint8, input.backend.name)
            return out.to(dtype=u8) if isinstance(out, NestedTensor) else input.backend.astype(out, u8)
        return out

    if takes_dtype:
        def op(input, dim=None, keepdim=False, *, dtype=None):
            return reduced(input, dim, keepdim, dtype)
    else:
        def op(input, dim=None, keepdim=False):
            return reduced(input, dim, keepdim, None)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"{what} over component dim ``dim`` (any but 0), or of every value (``dim=None``); ``keepdim``."
        + _EXTRA_DOCS.get(name, f"""

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))])
    >>> ln.{name}(nt, dim=2).nested_size().tolist()
    [[2], [4]]
    """)
    )
    return implements(name, f"torch.{name}", _T + name)(op)


for _name, _spec in REDUCTIONS.items():
    globals()[_name] = _make_reduction(_name, *_spec)
sum, mean, prod, amax, amin = (globals()[n] for n in ("sum", "mean", "prod", "amax", "amin"))  # noqa: A001
any, all, argmax, argmin = (globals()[n] for n in ("any", "all", "argmax", "argmin"))  # noqa: A001


def _extreme_over_ragged(kind, input, dim, keepdim):
    """``(values, indices)`` over the ragged dim of sequences from one padded copy (one pass for both),
    or None where the general path applies (other dims, empty components, bool, no elements)."""
    check_nested(input, f"{kind}()")
    st = input._struct
    if not (isinstance(dim, int) and st.is_lod and st.n and not st.outer and normalize_dim(dim, input.dim()) == 1):
        return None
    buf = input._buffer
    offsets, row_shape = st.rows()
    if kind_of(buf.dtype) == "b" or 0 in row_shape or not st.sizes[:, 0].all():
        return None
    be = input.backend
    rows = buf.reshape((int(offsets[-1]),) + row_shape)
    by_segments = be.segment_extreme_with_index(rows, offsets, kind)  # None: the backend pads instead
    if by_segments is not None:
        values, index = by_segments
        return (values[:, None], index[:, None]) if keepdim else (values, index)
    padded, _ = pad_level(be, rows, st.lod(), 0, _identity(f"arg{kind}", rows.dtype), None, None, f"{kind}()")
    return be.extreme_with_index(padded, kind, 1, keepdim)


def _extreme_over_row_dim(kind, input, dim, keepdim):
    """``(values, indices)`` over a regular dim of sequences from the library's max/min with index (one pass;
    the gradient reaches the one element the index names, as torch's ``max(dim)``, where ``amax`` would share
    it among ties), or None where the general path applies (the ragged dim, empty rows, several ragged dims)."""
    st = input._struct
    if not (isinstance(dim, int) and st.is_lod and st.n and not st.outer):
        return None
    axis = op_dim(input, dim, f"{kind}()") - 1
    offsets, row_shape = st.rows()
    if axis < 1 or 0 in row_shape:
        return None
    rows = input._buffer.reshape((int(offsets[-1]),) + row_shape)
    sizes, jag = _reduced(st, axis, keepdim)
    return tuple(make(part.reshape(-1), st.derive(sizes, jag=jag), input._layout)
                 for part in input.backend.extreme_with_index(rows, kind, axis, keepdim))


def _extreme(kind):
    def op(input, dim=None, keepdim=False):
        if isinstance(dim, NestedTensor) or hasattr(dim, "shape"):  # torch.max(a, b): the elementwise maximum
            return OP_TABLE["maximum" if kind == "max" else "minimum"](input, dim)
        check_nested(input, f"{kind}()")
        if kind_of(input.dtype) == "c":
            raise DTypeError(f"{kind}(): does not support complex input (torch orders no complex numbers)")
        if dim is None:
            return _reduce(f"{kind}()", f"a{kind}", input, None, False, None)
        held = holes.apply(op, (input, dim, keepdim)) if holes.over_row_dims(input, dim) else None
        if held is not None:  # over the row dims of a tensor with holes: all of values, the holes kept (as torch's)
            return held
        fast = _extreme_over_ragged(kind, input, dim, keepdim) or _extreme_over_row_dim(kind, input, dim, keepdim)
        if fast is not None:
            return MaxMin(*(kept_nested(input, dim, keepdim, r) for r in fast))
        values = rows_of_components(input, _reduce(f"{kind}()", f"a{kind}", input, dim, keepdim, None))
        keys = input
        if kind_of(input._array().dtype) == "b":  # torch.max takes bool (argmax does not): compare as integers
            keys = make(input.backend.astype(input._buffer, resolve_dtype(np.int64, input.backend.name)),
                        input._struct, input._layout)
        indices = rows_of_components(input, _reduce(f"{kind}()", f"arg{kind}", keys, dim, keepdim, None))
        return MaxMin(kept_nested(input, dim, keepdim, values), kept_nested(input, dim, keepdim, indices))

    op.__name__ = op.__qualname__ = kind
    op.__doc__ = (
        f"``{kind}(nt)``: the {kind}imum value; ``{kind}(nt, dim, keepdim=False)``: ``(values, indices)`` "
        f"along component dim ``dim``, as torch's ``return_types.{kind}``; ``{kind}(nt, other)``: the "
        f"elementwise {kind}imum.\n\n"
        f">>> import lodtensor.nested as ln\n"
        f">>> values, indices = ln.{kind}(ln.nested_tensor([[1.0, 5.0], [3.0]]), 1)\n"
        f">>> values.tolist(), indices.tolist()\n"
        f"({[5.0, 3.0] if kind == 'max' else [1.0, 3.0]}, {[1, 0] if kind == 'max' else [0, 0]})\n"
    )
    return op


max = implements("max", "torch.max", _T + "max")(_extreme("max"))  # noqa: A001 - torch's name
min = implements("min", "torch.min", _T + "min")(_extreme("min"))  # noqa: A001 - torch's name
