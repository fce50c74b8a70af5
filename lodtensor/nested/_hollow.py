"""Ops on a nested tensor of no component (torch's ``(0, j1, 3)``): the op on one empty component, dropped.

A nested tensor of no component still has component dims (``nested_tensor_from_jagged(values, offsets=[0])``,
an empty batch ``LoDTensor(..., lod=[[0]]).to_nested()``): its Structure keeps them (``Structure.hollow``),
but an op that computes its result's size table from the input's (``linear`` sets the last column,
``transpose`` permutes the columns) finds no row to compute from. So an op that acts on each component on its
own runs on a *probe*: the same buffer (no element) as one component of length 0 in the ragged dim. Its
result, one component of no element, gives the result's dims; the component is dropped again. The probe has
the very elements of the input (none), so values, dtypes, errors about dims and the autograd graph are the
op's own; only the count of components differs, and results where the count shows (a dense array, other
than one component, elements appearing) are not taken: the op then runs on the input itself.
"""

import numpy as np

from ..errors import ShapeError
from ._structure import Structure
from ._tensor import NestedTensor, make_view

__all__ = ["probed_op", "NOT_PROBED"]

#: ops that are about the components themselves (their count, an index of dim 0, a layout of them) or write
#: in place: they run on the input as it is (in-place ops, names ending in "_", too)
NOT_PROBED = frozenset({
    "getitem", "select", "unbind", "stack", "is_same_size", "embedding_bag", "fill", "copy_", "zero_",
    "to_lod_tensor", "to_masked", "to_packed", "to_packed_sequence", "to_padded", "to_padded_tensor",
    "to_tensor_list",
})

#: ops whose shape argument names the size of dim 0 (the count of components): position of that argument
_SHAPE_ARG = {"reshape": 1, "view": 1, "expand": 1}


def probed_op(name, fn):
    """``fn`` (op ``name``), run on a probe when every nested tensor among its arguments has no component
    and known dims; ``fn`` itself for ops in :data:`NOT_PROBED`."""
    if name in NOT_PROBED or name.endswith("_"):
        return None
    shape_at = _SHAPE_ARG.get(name)

    def op(*args, **kwargs):
        rank = _all_hollow((*args, *kwargs.values()))
        if not rank:
            return fn(*args, **kwargs)
        probe_args = [_probe(a, rank) for a in args]
        probe_kwargs = {k: _probe(v, rank) for k, v in kwargs.items()}
        if args and isinstance(args[0], (list, tuple)):  # cat([a, b], dim)
            probe_args[0] = type(args[0])(_probe(a, rank) for a in args[0])
        if shape_at is not None and len(args) > shape_at:
            if isinstance(args[shape_at], (int, np.integer)):  # reshape(0, -1, 3): the shape as varargs
                probe_args[shape_at:] = _count_one(tuple(args[shape_at:]), name)
            else:
                probe_args[shape_at] = _count_one(args[shape_at], name)
        # the probe's error is the op's own (its arguments do not fit these dims): raised as it is
        out = _dropped(fn(*probe_args, **probe_kwargs))
        return fn(*args, **kwargs) if out is None else out

    return op


def _hollow(x):
    """Whether ``x`` is a nested tensor of no component whose dims are known (and no outer level)."""
    if not isinstance(x, NestedTensor):
        return None
    st = x._st
    return st._sizes is not None and st._sizes.shape[0] == 0 and not st.outer and st.tail is not None


def _all_hollow(args):
    """The rank (``dim()``) of the nested tensors among ``args`` when each has no component and known dims,
    else 0 (no probe)."""
    rank = 0
    for a in args:
        items = a if isinstance(a, (list, tuple)) else (a,)
        for x in items:
            h = _hollow(x)
            if h is False:
                return 0
            if h:
                rank = x.dim()
    return rank


def _probe(x, rank):
    """``x`` for the probe: a nested tensor of no component as one empty component; a dense operand of
    the nested tensors' rank whose batch (dim 0) is 0, a batch of one zero (still in ``x``'s graph)."""
    if _hollow(x):
        return make_view(x._buf, Structure.of_rows([0], x._st.tail), x._perm, x._layout)
    shape = getattr(x, "shape", None)
    if shape is not None and not isinstance(x, NestedTensor) and len(shape) == rank and shape[0] == 0:
        if type(x).__module__.startswith("torch"):
            import torch  # noqa: PLC0415 - only torch operands get here

            return torch.cat((x, x.new_zeros((1, *shape[1:]))))
        if isinstance(x, np.ndarray):
            return np.zeros((1, *shape[1:]), dtype=x.dtype)
    return x


def _count_one(shape, name):
    """A shape argument whose dim 0 is 0 (the count) made 1 for the probe (-1 and the rest as they are);
    another count is refused, as for a nested tensor of components."""
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (int, np.integer)):
        if shape[0] == 0:
            return type(shape)((1, *shape[1:])) if not hasattr(shape, "_fields") else shape
        if shape[0] != -1:
            raise ShapeError(f"{name}(): shape {list(shape)} asks for {int(shape[0])} components in dim 0, "
                             "but the nested tensor has 0")
    return shape


def _dropped(out):
    """The probe's result with its one component dropped; None when the result is not made of such nested
    tensors only."""
    if isinstance(out, NestedTensor):
        st = out._st
        if st.outer or st.n != 1 or st.numel != 0 or st.rank == 0:
            return None
        storage = Structure(np.zeros((0, st.rank), dtype=np.int64), hollow=(None, *st.sizes[0, 1:].tolist()))
        result = make_view(out._buf, storage, out._perm, out._layout)
        return result
    if isinstance(out, tuple) and out:
        parts = [_dropped(x) for x in out]
        if any(p is None for p in parts):
            return None
        return type(out)(*parts) if hasattr(out, "_fields") else tuple(parts)
    return None
