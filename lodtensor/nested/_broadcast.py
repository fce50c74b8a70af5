"""Operands of pointwise ops: nested tensors, scalars and dense arrays, lined up for one library call.

Nested operands must have equal structures (by value: torch insists on one
shared offsets object). Scalars pass through. A dense array broadcasts as torch
allows it on the jagged layout: against the trailing regular dims of every
component (``nt + bias``; a size-1 regular dim of the components grows to the
dense operand's size there), with size 1 in the ragged dims, and with an
optional leading batch dim of size 1 or the number of components
(``nt * dense[:, None, :]``). The nested buffers are then viewed as
``(rows, *regular tail)`` and a batch-dim operand gathered to one row per
``row``, so the op stays one call on whole buffers.
"""

import numbers

import numpy as np

from ..backend import backend_name_of, backend_of
from ..errors import BackendMismatchError, DTypeError, ShapeError
from ._dtypes import torch_name
from ._structure import same_levels
from ._tensor import NestedTensor, make, make_view, same_layout

__all__ = ["Aligned", "align", "scalar_like", "same_backend", "check_nested", "not_implemented", "describe"]


def same_backend(where, *arrays):
    """The backend shared by ``arrays``; a nested-tensor hint when they differ."""
    try:
        return backend_of(*arrays)
    except BackendMismatchError as err:
        names = sorted({backend_name_of(a) for a in arrays} - {None})
        raise BackendMismatchError(
            f"{where}: cannot combine {names[0]!r} and {names[1]!r} data; convert the nested tensor "
            f"with .to_torch() / .numpy() or the other argument to its library first"
        ) from err


def check_nested(x, where, name="input"):
    if not isinstance(x, NestedTensor):
        raise TypeError(f"{where}: {name} must be a NestedTensor, got {type(x).__name__}")
    return x


def not_implemented(op, nt, allowed="floating point"):
    dtype = nt.dtype
    return DTypeError(  # (TypeError and RuntimeError: torch raises a NotImplementedError, a RuntimeError)
        f"\"{op}\" not implemented for '{torch_name(dtype)}': {op}() needs {allowed} data, got dtype "
        f"{dtype}; cast it first"
    )


def scalar_like(x):
    """``x`` as a scalar operand (Python/NumPy number or 0-d array), or None when it is not one."""
    if isinstance(x, (bool, numbers.Number, np.generic)):
        return x
    if backend_name_of(x) is not None and x.ndim == 0:
        return x
    return None


def describe(nt):
    st = nt._struct
    return f"{st.n} components of rank {st.rank}" if st.n > 4 else f"sizes {st.sizes.tolist()}"


class Aligned:
    """The operands of one pointwise call as arrays and scalars for one library call.

    ``arrays`` holds every operand in its place (nested ones as buffer views);
    ``view(buffer)`` views another buffer of the structure the same way (for
    ``out=``); ``wrap(result)`` makes the result a nested tensor again.
    """

    __slots__ = ("nt", "arrays", "_axis", "_dense", "_stored", "_struct")

    def __init__(self, nt, arrays, axis, dense, stored=False, struct=None):
        self.nt, self.arrays, self._axis, self._dense, self._stored = nt, arrays, axis, dense, stored
        # the result's structure: the nested operands', or theirs with size-1 regular dims grown to a
        # dense operand's sizes
        self._struct = nt._struct if struct is None else struct

    @property
    def backend(self):
        return self.nt.backend

    @property
    def struct(self):
        """The result's structure (the nested operands', grown where a dense operand broadcast it)."""
        return self._struct

    def view(self, out):
        """The buffer of the nested tensor ``out`` (``out=``) lined up as the operands are."""
        if self._stored or out._perm is not None:
            if not (self._stored and same_layout(out, self.nt)):
                raise ShapeError("out=: a transposed nested tensor must have the layout of the inputs")
            out._written()
            return out._buf
        if not self._dense:
            return out._buffer
        if not out._struct.same_as(self._struct):
            raise ShapeError(f"out=: the result has sizes {self._struct.sizes.tolist()}, out has "
                             f"{out._struct.sizes.tolist()}")
        return self._struct.tail_view(out._buffer, self._axis)

    def wrap(self, result, layout=None):
        nt = self.nt
        layout = nt._layout if layout is None else layout
        if self._stored:  # operands of one transposed layout: the result reads the same way
            return make_view(result, nt._st, nt._perm, layout)
        flat = result.reshape(-1) if self._dense else result
        return make(flat, self._struct, layout)


def _one_element(x, dims):
    """Whether ``x`` is a dense array of one element and 1 to ``dims`` dims."""
    if isinstance(x, NestedTensor) or backend_name_of(x) is None or not 1 <= getattr(x, "ndim", 0) <= dims:
        return False
    return all(int(s) == 1 for s in x.shape)


def align(where, operands, *, dense=True, names=None):
    """Line up ``operands`` (nested tensors, scalars, dense arrays) around their first nested one.

    Raises ``ValueError`` with torch's phrase when nested structures differ or
    a dense operand does not broadcast, ``TypeError`` for anything else (``names``: the
    operands' parameter names, for the messages).
    """
    nested = [x for x in operands if isinstance(x, NestedTensor)]
    if not nested:
        raise TypeError(f"{where}: expected at least one NestedTensor operand")
    for i, x in enumerate(operands):  # (None read as NaN by NumPy: copy_(None) filled the tensor with NaN)
        if x is None:
            what = f"argument {names[i]!r} (position {i + 1})" if names else f"operand {i}"
            raise TypeError(f"{where}: {what} is None; expected a NestedTensor, an array or a number")
    ref = nested[0]
    # a dense operand of one element that adds no dim takes part as a 0-d one (torch's jagged layout: float32
    # nested * float64 of shape (1,) is float32, int32 * int64 (1,) int32; a dense (3,) promotes as dense)
    operands = tuple(x.reshape(()) if _one_element(x, ref.dim()) else x for x in operands)
    st = ref._struct
    grown = st
    for other in nested[1:]:
        if not st.same_as(other._struct):
            grown = _grow(grown, other._struct)
            if grown is None:
                raise ShapeError(
                    f"{where} does not support broadcasting when given a NestedTensor: the nested "
                    f"structures differ ({describe(ref)} vs {describe(other)})"
                )
        same_backend(where, ref._array(), other._array())
    if grown is not st:  # nested operands whose size-1 regular dims broadcast, as torch's jagged layout
        return _align_grown(where, operands, nested, grown)
    dense_ops = []
    for x in operands:
        if isinstance(x, NestedTensor) or x is None:
            continue
        s = scalar_like(x)
        if s is None:
            if backend_name_of(x) is None:
                raise TypeError(f"{where}: expected NestedTensors, arrays or scalars, got {type(x).__name__}")
            dense_ops.append(x)
        elif backend_name_of(s) is not None:
            same_backend(where, ref._array(), s)
    if dense_ops and not dense:
        shape = tuple(dense_ops[0].shape)
        raise ShapeError(
            f"{where}: Expected both self and other to be nested, but got a nested self and non-nested "
            f"other (a dense array of shape {shape}); combine nested tensors of the same nested "
            f"structure, or a nested tensor and a scalar"
        )
    if not dense_ops:
        stored = ref._perm is not None and all(same_layout(ref, x) for x in nested)  # one transposed layout
        arrays = [(x._buf if stored else x._buffer) if isinstance(x, NestedTensor) else _weak(x) for x in operands]
        return Aligned(ref, arrays, 0, False, stored)
    axis = _regular_suffix(st)
    arrays = []
    own = tuple(int(s) for s in st.sizes[0, axis:]) if st.n else None
    grown = own
    for x in operands:
        if isinstance(x, NestedTensor):
            arrays.append(st.tail_view(x._buffer, axis))
        elif x is None or scalar_like(x) is not None:
            arrays.append(_weak(x))
        else:
            same_backend(where, ref._array(), x)
            lined = _dense(where, ref, axis, x)
            arrays.append(lined)
            if grown is not None:  # (not max: a size 0 stays 0 against a dense size 1)
                grown = tuple(int(d) if g == 1 else g for g, d in zip(grown, lined.shape[1:]))
    struct = None
    if grown != own:  # size-1 regular dims of the components broadcast up, as on dense tensors
        sizes = st.sizes.copy()
        sizes[:, axis:] = grown
        struct = st.derive(sizes)
    return Aligned(ref, arrays, axis, True, struct=struct)


def _grow(a, b):
    """The structure of nested operands ``a`` and ``b`` broadcast together: equal but for regular trailing
    dims where one side has size 1 in every component; None when they do not broadcast so."""
    if a.n != b.n or a.rank != b.rank or not same_levels(a.outer, b.outer):
        return None
    sa, sb = a.sizes, b.sizes
    differ = [d for d in range(a.rank) if not np.array_equal(sa[:, d], sb[:, d])]
    if not differ or min(differ) < max(_regular_suffix(a), _regular_suffix(b), 1):
        return None  # (a dim that differs must be regular in both, after every ragged dim, not the first)
    if any(not ((sa[:, d] == 1).all() or (sb[:, d] == 1).all()) for d in differ):
        return None
    return a.derive(np.where(sa == 1, sb, sa))  # (not max: a size 0 stays 0 against a size 1)


def _align_grown(where, operands, nested, grown):
    """Nested operands of broadcast-compatible structures (and scalars, dense arrays), each viewed as
    ``(rows, *its regular tail)`` from the first dim that differs or is regular in all."""
    axis = max(_regular_suffix(x._struct) for x in nested)
    arrays = []
    for x in operands:
        if isinstance(x, NestedTensor):
            arrays.append(x._struct.tail_view(x._buffer, axis))
        elif x is None or scalar_like(x) is not None:
            arrays.append(_weak(x))
        else:
            same_backend(where, nested[0]._array(), x)
            lined = _dense(where, nested[0], axis, x, grown)
            if grown.n and tuple(lined.shape[1:]) != tuple(int(v) for v in grown.sizes[0, axis:]):
                raise ShapeError(f"{where}: a dense operand of shape {tuple(x.shape)} cannot grow the sizes of "
                                 f"nested operands that already broadcast against each other")
            arrays.append(lined)
    return Aligned(nested[0], arrays, axis, True, struct=grown)


def _weak(x):
    """NumPy scalars act as Python numbers, as torch treats them (float32 * np.float64(0.5) stays float32)."""
    return x.item() if isinstance(x, np.generic) else x


def _jagged_shape(nt):
    """torch's way of printing a nested shape: ``(2, j1, 3)``."""
    return f"({', '.join(str(s) for s in nt.shape)})"


def _regular_suffix(st):
    """The first component dim from which every dim is regular."""
    axis = st.rank
    while axis > 0 and st.regular[axis - 1]:
        axis -= 1
    return axis


def _dense(where, nt, axis, dense, st=None):
    """``dense`` lined up against the nested buffer viewed as ``(rows, *sizes[axis:])`` (``st``: the
    structure to line up against, by default ``nt``'s)."""
    st = nt._struct if st is None else st
    r = st.rank
    shape = tuple(int(s) for s in dense.shape)
    where = f"cannot call binary pointwise function {where} with inputs of shapes {_jagged_shape(nt)} and {shape}"
    if len(shape) > r + 1:
        raise ShapeError(
            f"{where}: a dense operand of shape {shape} has more dims ({len(shape)}) than the nested tensor ({r + 1})"
        )
    batch = False
    if len(shape) == r + 1:
        # one component and a (1, its length, ...) operand: the padded batch of torch's jagged layout too
        one_padded = st.n == 1 and axis == 1 and st.jag == 0 and r and shape[1] != 1 and shape[1] == int(st.sizes[0, 0])
        if shape[0] == st.n and (st.n != 1 or one_padded):
            batch = True
        elif shape[0] != 1:
            raise ShapeError(
                f"{where}: cannot broadcast a dense operand of shape {shape}: its dim 0 must be 1 or the "
                f"number of components ({st.n})"
            )
        comp = shape[1:]
    else:
        comp = (1,) * (r - len(shape)) + shape
    padded = batch and axis == 1 and st.jag == 0 and st.n and comp[0] == int(st.sizes[:, 0].max())
    for d in range(axis):
        if comp[d] != 1 and not (padded and d == 0):  # (torch's jagged: a padded (B, max length, ...) operand)
            raise ShapeError(
                f"{where}: cannot broadcast a dense operand of shape {shape} over dim {d + 1} of the nested "
                f"tensor, which is irregular (or precedes an irregular dim); its size there must be 1"
            )
    tail = comp[axis:]
    own = tuple(int(s) for s in st.sizes[0, axis:]) if st.n else tail
    for d, (a, b) in enumerate(zip(tail, own)):
        # a size-1 dim of the components grows to the dense operand's, but never the first component dim
        # (the ragged one of the jagged layout, even where every length happens to be 1)
        if a not in (1, b) and (b != 1 or axis + d == 0):
            raise ShapeError(
                f"{where}: the dense operand's size {a} must match the nested tensor's size {b} at "
                f"dim {axis + d + 1} (or be 1); dense shape {shape}"
            )
    if not batch:
        return dense.reshape((1,) + tail)
    be = nt.backend
    if padded and comp[0] != 1:  # component i reads the first lengths[i] rows of dense[i]
        lengths, width = st.sizes[:, 0], comp[0]
        starts = np.repeat(np.arange(st.n, dtype=np.int64) * width - np.cumsum(lengths) + lengths, lengths)
        rows = dense.reshape((st.n * width,) + tail)
        return be.gather(rows, be.from_host(starts + np.arange(int(lengths.sum()), dtype=np.int64), like=dense))
    rows = st.sizes[:, :axis].prod(axis=1) if axis else np.ones(st.n, dtype=np.int64)
    ids = np.repeat(np.arange(st.n, dtype=np.int64), rows)
    index = be.from_host(ids, like=dense)
    return be.gather(dense.reshape((st.n,) + tail), index)
