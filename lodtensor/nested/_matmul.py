"""Matrix products of nested tensors: ``matmul`` (nested @ nested, nested @ dense, dense @ nested) and ``bmm``,
by components grouped by shape, one GEMM on the rows where a dense matrix is shared, or the padded batch where
torch's jagged layout broadcasts a dense batch over the ragged dim."""

import numpy as np

from ..backend import backend_name_of
from ..errors import DTypeError, ShapeError
from . import _holes as holes
from ._broadcast import check_nested, same_backend
from ._construct import as_nested_tensor
from ._grouped import map_components
from ._nn import _regular_last, _with_last
from ._registry import OP_TABLE, implements
from ._tensor import NestedTensor, make

__all__ = ["matmul", "bmm"]

_T = "torch.Tensor."


def _check_pair(where, a, b, name_b):
    if a._struct.n != b._struct.n:
        raise ShapeError(
            f"{where}: Expected size for the 1st dimension of {name_b} tensor to be: {a._struct.n} "
            f"but got: {b._struct.n}."
        )
    same_backend(where, a._array(), b._array())
    if a._array().dtype != b._array().dtype:
        raise DTypeError(  # (torch: a RuntimeError)
            f"{where}: expected both inputs to have the same dtype, got {a._array().dtype} and {b._array().dtype}"
        )
    sa, sb = a._struct.sizes, b._struct.sizes
    bad = np.flatnonzero(sa[:, -1] != sb[:, -2])
    if bad.size:
        i = int(bad[0])
        raise ShapeError(
            f"{i}-th nested matrices in batch cannot be multiplied ({'x'.join(map(str, sa[i, -2:]))} and "
            f"{'x'.join(map(str, sb[i, -2:]))})"
        )


def _matmul_nested(where, a, b):
    sa, sb = a._struct.sizes, b._struct.sizes
    out_sizes = np.concatenate([sa[:, :-1], sb[:, -1:]], axis=1)
    ops = a.backend
    out, st = map_components([a, b], ops.matmul, out_sizes)
    contracted = a._struct.n and not a._struct.regular[-1] and (out_sizes == out_sizes[:1]).all()
    if contracted and a._layout == "jagged":  # the ragged dim contracted: dense, as torch's jagged
        return out.reshape((a._struct.n,) + tuple(int(v) for v in out_sizes[0]))  # (B, D, j) @ (B, j, D)
    return make(out, st, a._layout)  # torch's strided layout keeps such a product nested


def _matmul_padded(where, nt, other, d=1):
    """Jagged ``nt`` @ dense ``other`` of the same rank: torch's jagged rule, the product of the padded batch
    (a dim of ``other`` against the ragged dim 1 or the longest length, the other batch dims broadcast), each
    component's rows taken back. ``nt`` is ragged in dim 1; ``d``: the dim the caller's tensor is ragged in
    (``nt`` is it with dims 1 and ``d`` swapped, and so is the result)."""
    be = same_backend(where, nt._array(), other)
    st = nt._struct
    padded = OP_TABLE["to_padded_tensor"](nt, 0)
    if d != 1:
        padded = be.swapaxes_view(padded, 1, d)
    ps, os_ = tuple(int(v) for v in padded.shape), tuple(int(v) for v in other.shape)
    if ps[-1] != os_[-2]:
        raise ShapeError(f"{where}: last dimension of self ({ps[-1]}) does not match the rows of other ({os_[-2]})")
    for i, (a, b) in enumerate(zip(ps[:-2], os_[:-2])):
        if b not in (a, 1) and (a != 1 or i == 0):  # (the batch keeps its size)
            raise ShapeError(f"{where}: The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                             f"non-singleton dimension {i}")
    out = be.matmul(padded, other)
    if d != 1:
        out = be.contiguous(be.swapaxes_view(out, 1, d))
    tail = tuple(int(v) for v in out.shape[2:])
    sizes = np.concatenate([st.sizes[:, :1], np.broadcast_to(np.asarray(tail, np.int64), (st.n, len(tail)))], axis=1)
    lod = st.lod()
    rows = be.unpad(out, lod.on(be, "offsets", 0, like=out), total=lod.num_rows)
    result = make(rows.reshape(-1), st.derive(sizes), "jagged")
    return result if d == 1 else OP_TABLE["transpose"](result, 1, d)


@implements("matmul", "torch.matmul", "torch.linalg.matmul", _T + "matmul", _T + "__matmul__")
def matmul(input, other):
    """Matrix product of every pair of components (nested @ nested), or of every component with a
    dense 2-d matrix, or with its own matrix of a dense ``(batch, k, m)`` array (nested @ dense). A
    product that contracts the ragged dim, ``(B, D, j) @ (B, j, D)``, is dense on the jagged layout and
    nested on the strided one, as torch's.

    Nested @ nested needs two nested tensors of the same rank >= 3 with equal
    batch dims per component (no broadcasting); the work is grouped by
    component shapes.

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 2))])
    >>> b = ln.nested_tensor([np.ones((3, 4)), np.ones((2, 5))])
    >>> (a @ b).nested_size().tolist()
    [[2, 4], [1, 5]]
    """
    where = "matmul"
    if not isinstance(input, NestedTensor):  # (D, E) or (B, D, E) @ (B, E, j1): (B, D, j1), as torch's jagged
        if backend_name_of(input) is not None and input.ndim in (2, 3) and isinstance(other, NestedTensor) and (
                other._struct.regular == (True, False)):  # layout: (other^T @ input^T)^T
            swapped = same_backend(where, other._array(), input).swapaxes_view(input, -1, -2)
            out = OP_TABLE["transpose"](matmul(OP_TABLE["transpose"](other, 1, 2), swapped), 1, 2)
            return out.contiguous() if input.ndim == 2 else out  # (torch's: values() @, or a padded product)
        raise ShapeError("matmul: Expected both self and other to be nested, but got a non-nested self and nested "
                         "other; a dense @ nested product needs other's ragged dim last, (B, E, j1)")
    if not isinstance(other, NestedTensor):
        dense = backend_name_of(other) is not None
        if dense and other.ndim == input.dim() >= 3 and all(int(s) == 1 for s in other.shape[:-2]):
            other = other.reshape(tuple(other.shape[-2:]))  # one matrix for every component: torch broadcasts it
        if dense and other.ndim == 3 and input.dim() == 3:
            return bmm(input, other)  # a dense (batch, k, m): one matrix per component
        ragged = [c for c, r in enumerate(input._struct.regular) if not r]
        if dense and other.ndim == input.dim() >= 4 and input._layout == "jagged" and input._struct.n and (
                len(ragged) == 1 and ragged[0] <= input._struct.rank - 2):  # one ragged dim, not the last
            d = ragged[0] + 1
            return _matmul_padded(where, input if d == 1 else OP_TABLE["transpose"](input, 1, d), other, d)
        if not dense or other.ndim != 2:
            raise ShapeError(
                f"matmul: Expected both self and other to be nested, but got a nested self and "
                f"non-nested other of {getattr(other, 'ndim', type(other).__name__)} dims; a dense other must "
                f"be a 2-d matrix, a (batch, k, m) one for 3-d components' tensors, or, on the jagged layout "
                f"with one ragged dim before the last, a (batch or 1, ..., k, m) one of the same rank"
            )
        same_backend(where, input._array(), other)
        last = _regular_last(where, input)
        k, m = (int(s) for s in other.shape)
        if input._struct.n and last != k:
            raise ShapeError(f"matmul: last dimension of self ({last}) does not match the rows of other ({k})")
        held = holes.apply(lambda x: matmul(x, other), (input,)) if holes.over_row_dims(input, -1) else None
        if held is not None:  # (with holes: over every row of their values, kept, as torch's)
            return held
        st = input._struct
        out = input.backend.matmul(st.tail_view(input._buffer, st.rank - 1, (k,)), other)
        return make(out.reshape(-1), _with_last(input._struct, m), input._layout)
    ra, rb = input.dim(), other.dim()
    if ra != rb:
        raise ShapeError(f"matmul: both inputs must have the same rank, got {ra} and {rb}")
    if ra < 3:
        raise ShapeError(
            f"matmul: For nested tensors, only inputs with >= 3 dims are currently supported. 1st input has rank: {ra}"
        )
    sa, sb = input._struct.sizes, other._struct.sizes
    if input._struct.n == other._struct.n and not np.array_equal(sa[:, :-2], sb[:, :-2]):
        i = int(np.flatnonzero((sa[:, :-2] != sb[:, :-2]).any(axis=1))[0])
        raise ShapeError(
            f"matmul: For nested tensors, batch dimensions must have the same sizes, no broadcasting "
            f"is currently performed. Got batch shapes for self {sa[i, :-2].tolist()} and for other "
            f"{sb[i, :-2].tolist()} (component {i})"
        )
    _check_pair(where, input, other, "2nd input")
    return _matmul_nested(where, input, other)


@implements("rmatmul", _T + "__rmatmul__")
def _rmatmul(input, other):
    return matmul(other, input)


@implements("bmm", "torch.bmm", _T + "bmm")
def bmm(input, mat2):
    """Batched matrix product of two 3-d nested tensors (either may be a dense 3-d array, as torch's strided
    layout takes; dense ``input`` rows are its components).

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 2))])
    >>> b = ln.nested_tensor([np.ones((3, 4)), np.ones((2, 5))])
    >>> ln.bmm(a, b).nested_size().tolist()
    [[2, 4], [1, 5]]
    """
    if not isinstance(input, NestedTensor) and isinstance(mat2, NestedTensor) and backend_name_of(input):
        input = as_nested_tensor(input, layout=mat2._layout) if input.ndim == 3 else input
    check_nested(input, "bmm()")
    if input.dim() != 3:
        raise ShapeError(f"batch1 must be a 3D tensor, got a {input.dim()}-d nested tensor")
    if not isinstance(mat2, NestedTensor):
        if backend_name_of(mat2) is None or mat2.ndim != 3:
            raise ShapeError("batch2 must be a 3D tensor (nested, or dense of shape (batch, k, m))")
        mat2 = as_nested_tensor(mat2)
    if mat2.dim() != 3:
        raise ShapeError(f"batch2 must be a 3D tensor, got a {mat2.dim()}-d nested tensor")
    _check_pair("bmm", input, mat2, "batch2")
    return _matmul_nested("bmm", input, mat2)
