"""Building nested tensors: from lists of arrays, tensors or nested lists, dense arrays,
LoDTensors, torch nested tensors and PackedSequences.
"""

import numbers

import numpy as np

from .._data import host_array, to_place
from ..backend import backend_name_of, get_backend
from ..backend._placement import pin
from ..errors import ArgumentError, BackendMismatchError, ShapeError
from ..lod import LoD
from ..ops._packed import unpacked_rows
from ..place import CUDAPinnedPlace, as_place
from ..tensor import LoDTensor
from ._dispatch import COMPILE_HOOKS, compiling, mark_dynamic
from ._dtypes import DEFAULT_COMPLEX, DEFAULT_FLOAT, check_requires_grad, resolve_dtype
from ._holes import copied
from ._tensor import NestedTensor, Structure, make, make_view

__all__ = ["nested_tensor", "as_nested_tensor", "from_lod_tensor", "is_two_level_list", "from_lists",
           "with_levels"]

_LAYOUTS = {"strided": "strided", "jagged": "jagged", "torch.strided": "strided", "torch.jagged": "jagged"}


def _check_layout(layout):
    if layout is None:
        return "strided"
    key = layout if isinstance(layout, str) else str(layout)
    out = _LAYOUTS.get(key)
    if out is None:
        raise ArgumentError(
            f"Specified layout is unsupported for nested tensors: {layout!r}; expected 'strided', "
            f"'jagged', torch.strided or torch.jagged", argument="layout", value=layout,
        )
    return out


def _coerce_item(item, index, where):
    """One component as an array; Python data gets torch's dtype inference."""
    if backend_name_of(item) is not None:
        if getattr(item, "is_nested", False) is True:
            raise TypeError(f"{where}: tensor_list[{index}] is a nested tensor; components must be dense")
        if getattr(item.dtype, "kind", "f") not in "biufc":
            raise TypeError(f"{where}: tensor_list[{index}] must have a numeric or bool dtype, got {item.dtype}")
        return item, False
    if isinstance(item, LoDTensor):
        return item._require_data(where), False
    if isinstance(item, NestedTensor):
        raise TypeError(f"{where}: tensor_list[{index}] is a nested tensor; components must be dense")
    if isinstance(item, (bool, numbers.Number, np.generic)) or isinstance(item, (list, tuple)):
        try:
            arr = host_array(item)
        except ValueError:
            raise ShapeError(
                f"{where}: tensor_list[{index}] is a ragged nested list; each component must be "
                f"rectangular (expected sequences of equal length at every depth)"
            ) from None
        if arr.dtype == object or arr.dtype.kind not in "biufc":
            raise TypeError(
                f"{where}: tensor_list[{index}] must be an array, a tensor or a (nested) list of "
                f"numbers, got {_describe(item)}"
            )
        if not isinstance(item, np.generic):  # Python numbers: torch's defaults
            if arr.dtype.kind == "f":
                arr = arr.astype(DEFAULT_FLOAT)
            elif arr.dtype.kind == "c":
                arr = arr.astype(DEFAULT_COMPLEX)
            elif arr.dtype.kind in "iu":
                arr = arr.astype(np.int64, copy=False)
        return arr, True
    raise TypeError(
        f"{where}: tensor_list[{index}] must be an array, a tensor or a (nested) list of numbers, "
        f"got {_describe(item)}"
    )


def _describe(value):
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _check_jagged(structure, where):
    if structure.n == 0 and structure.hollow is None:  # a list of nothing (no dims known)
        raise ShapeError(f"{where}: Cannot construct a nested tensor from an empty tensor list (layout 'jagged')")
    if structure.rank == 0:
        raise ShapeError(f"{where}: Cannot construct a nested tensor from a list of zero-dim tensors (layout 'jagged')")
    if sum(not r for r in structure.regular) > 1:
        raise ShapeError(
            f"{where}: Cannot represent given tensor list as a nested tensor with the jagged layout. "
            f"Note that the jagged layout only allows for a single ragged dimension; irregular dims: "
            f"{[d + 1 for d, r in enumerate(structure.regular) if not r]}"
        )


def _from_list(items, dtype, device, layout, where, keep_history):
    if not isinstance(items, (list, tuple)):
        raise TypeError(
            f"{where}: tensor_list must be a list or tuple of arrays, tensors or nested lists, "
            f"got {type(items).__name__}"
        )
    parts, from_python = [], []
    for i, item in enumerate(items):
        arr, py = _coerce_item(item, i, where)
        parts.append(arr)
        from_python.append(py)
    names = {backend_name_of(p) for p, py in zip(parts, from_python) if not py}
    if len(names) > 1:
        first, second = sorted(names)[:2]
        raise BackendMismatchError(
            f"{where}: tensor_list mixes {first!r} and {second!r} arrays; convert them to one "
            f"library first (nested lists combine with any)"
        )
    name = names.pop() if names else "numpy"
    be = get_backend(name)
    ndims = [p.ndim for p in parts]
    for i, d in enumerate(ndims):
        if d != ndims[0]:
            raise ShapeError(
                f"All Tensors given to nested_tensor must have the same dimension. Found dimension "
                f"{d} for Tensor at index {i} and dimension {ndims[0]} for Tensor at index 0."
            )
    target = resolve_dtype(dtype, name)
    if target is None:
        target = parts[0].dtype if parts else resolve_dtype(DEFAULT_FLOAT, name)
    like = next((p for p, py in zip(parts, from_python) if not py), None)
    if like is not None:  # nested lists next to arrays: onto the arrays' device
        parts = [be.from_host(p, like=like) if py else p for p, py in zip(parts, from_python)]
    rank = ndims[0] if parts else 0
    sizes = np.array([tuple(p.shape) for p in parts], dtype=np.int64).reshape(len(parts), rank)
    structure = Structure(sizes)
    if layout == "jagged":
        _check_jagged(structure, where)
        kinds = {p.dtype for p in parts}
        if len(kinds) > 1:  # torch's jagged layout refuses them (its strided one: the first dtype wins)
            raise TypeError(f"{where}: when constructing a jagged nested tensor, all tensors in list must have "
                            f"the same dtype, got {', '.join(sorted(str(k) for k in kinds))}")
    ops = be
    if rank and parts and (sizes[:, 1:] == sizes[:1, 1:]).all() and {p.dtype for p in parts} == {target}:
        # equal trailing dims and dtype (sequences of rows): one join of the components as they are, no
        # per-component reshape, detach or cast (a torch call each, microseconds per component)
        buffer = ops.concat_axis(parts, 0).reshape(-1)
        return _place(buffer if keep_history else ops.detach(buffer), device), structure
    flats = [p.reshape(-1) if keep_history else ops.detach(p).reshape(-1) for p in parts]
    buffer = ops.concat_flat(flats, dtype=target)
    if flats and len(flats) == 1 and buffer is flats[0]:
        buffer = ops.clone(buffer)
    return _place(buffer, device), structure


def _place(buffer, device):
    place = as_place(device, name="device")
    if place is None:
        return buffer
    if isinstance(place, CUDAPinnedPlace):
        raise ShapeError("device: use pin_memory=True for page-locked host memory")
    return to_place(buffer, place, copy=False)[0]


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A nested tensor holding copies of ``tensor_list``, without autograd history (a leaf).

    Parameters
    ----------
    tensor_list : list or tuple
        NumPy arrays, CuPy arrays, torch tensors or nested Python lists of
        numbers, all with the same number of dims (any sizes, zero allowed).
    dtype : NumPy dtype, name or torch dtype, optional
        Default: the dtype of the first component, as in torch (the others are
        cast to it). Python floats become float32 and ints int64.
    layout : 'strided', 'jagged', torch.strided or torch.jagged, optional
        'jagged' allows one ragged dim only and no empty list, as in torch.
    device : device string, Place or torch.device, optional
        Where the buffer goes (CPU -> NumPy, CUDA -> CuPy, or torch for torch data).
    requires_grad : bool
        Record operations for autograd (torch floating data only).
    pin_memory : bool
        Allocate the buffer in page-locked host memory (needs CUDA).

    Raises
    ------
    ValueError
        Components of different rank, a ragged nested list inside one component,
        an unsupported layout, a jagged layout the components do not fit.
    TypeError
        Non-numeric items, ``requires_grad=True`` for integer or non-torch data.

    See Also
    --------
    torch.nested.nested_tensor

    Examples
    --------
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> nt.dtype, nt.nested_size().tolist()
    (dtype('float32'), [[2], [1]])
    >>> ln.nested_tensor([np.zeros(2), np.zeros((2, 2))])
    Traceback (most recent call last):
    ...
    lodtensor.errors.ShapeError: All Tensors given to nested_tensor must have the same dimension. ...
    """
    if compiling():  # the size table is built on the host: behind a graph break
        return COMPILE_HOOKS["eager"](nested_tensor, tensor_list, dtype=dtype, layout=layout, device=device,
                                      requires_grad=requires_grad, pin_memory=pin_memory)
    if is_two_level_list(tensor_list):  # documents x sentences: two ragged dims (beyond torch)
        return from_lists(tensor_list, lambda sentences: nested_tensor(
            sentences, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad, pin_memory=pin_memory))
    where = "nested_tensor()"
    layout = _check_layout(layout)
    if isinstance(tensor_list, NestedTensor):
        tensor_list = list(tensor_list.unbind())
    buffer, structure = _from_list(tensor_list, dtype, device, layout, where, keep_history=False)
    if requires_grad and all(isinstance(item, (list, tuple, numbers.Number)) for item in tensor_list):
        buffer = get_backend("torch").asarray(buffer)  # Python numbers alone and autograd asked: torch data
    check_requires_grad(buffer, requires_grad, where)
    if pin_memory:
        buffer = pin(buffer)
    if requires_grad:
        buffer.requires_grad_(True)
    return mark_dynamic(make(buffer, structure, layout))


def is_two_level_list(tensor_list):
    """Whether ``tensor_list`` is a list of lists of arrays (and not of numbers)."""
    if not isinstance(tensor_list, (list, tuple)) or not tensor_list:
        return False
    if not all(isinstance(doc, (list, tuple)) for doc in tensor_list):
        return False
    items = [x for doc in tensor_list for x in doc]
    return bool(items) and all(backend_name_of(x) is not None for x in items)


def from_lists(tensor_list, build):
    """The nested tensor of documents ``tensor_list`` (lists of arrays): ``build(sentences)`` makes the
    components, the documents become an outer LoD level over them (two ragged dims)."""
    counts = np.fromiter((len(doc) for doc in tensor_list), dtype=np.int64, count=len(tensor_list))
    inner = build([x for doc in tensor_list for x in doc])
    lod = LoD.from_lengths([counts], num_rows=inner._struct.n)  # the gate for the documents' offsets
    return with_levels(inner, lod.levels)


def with_levels(inner, outer):
    """``inner``'s components under the outer LoD levels ``outer`` (valid, outermost first)."""
    st = inner._struct
    return make(inner._buffer, Structure(st.sizes, st.offsets, tuple(outer), st.tail), inner._layout)


def as_nested_tensor(tensor_list, dtype=None, device=None, layout=None):
    """A nested tensor from ``tensor_list``, keeping autograd history; no copy where possible.

    Accepts what :func:`nested_tensor` accepts (list items are copied into
    one buffer), plus: a NestedTensor (returned as is, or converted to
    ``dtype``/``device``/``layout``); a dense array or tensor of 2 or more
    dims (one component per row of dim 0; its memory is shared when it is
    contiguous); a torch ``PackedSequence``; a torch nested tensor (a jagged
    one ragged in dim 1 shares its values buffer); a :class:`LoDTensor`.

    Raises
    ------
    ValueError
        A dense input of fewer than 2 dims; the errors of :func:`nested_tensor`.
    TypeError
        Anything else.

    See Also
    --------
    torch.nested.as_nested_tensor

    Examples
    --------
    >>> import lodtensor.nested as ln
    >>> dense = np.arange(6.0).reshape(2, 3)
    >>> nt = ln.as_nested_tensor(dense)
    >>> nt.nested_size().tolist(), np.shares_memory(nt.unbind()[1], dense)
    ([[3], [3]], True)
    """
    if compiling():  # the size table is built on the host: behind a graph break
        return COMPILE_HOOKS["eager"](as_nested_tensor, tensor_list, dtype, device, layout)
    if is_two_level_list(tensor_list):
        return from_lists(tensor_list, lambda sentences: as_nested_tensor(sentences, dtype, device, layout))
    where = "as_nested_tensor()"
    lay = None if layout is None else _check_layout(layout)
    if isinstance(tensor_list, NestedTensor):
        return mark_dynamic(_convert(tensor_list, dtype, device, lay, where))
    if isinstance(tensor_list, LoDTensor):
        return mark_dynamic(_convert(from_lod_tensor(tensor_list), dtype, device, lay, where))
    kind = type(tensor_list).__name__
    if kind == "PackedSequence":
        return mark_dynamic(_convert(_from_packed(tensor_list, where), dtype, device, lay, where))
    if backend_name_of(tensor_list) is not None:
        if getattr(tensor_list, "is_nested", False) is True:
            return mark_dynamic(_convert(_from_torch_nested(tensor_list), dtype, device, lay, where))
        return mark_dynamic(_convert(_from_dense(tensor_list, where), dtype, device, lay, where))
    if not isinstance(tensor_list, (list, tuple)):
        raise TypeError(
            f"{where}: Expected first argument to be a tensor or a list / tuple of tensors, got {kind}"
        )
    buffer, structure = _from_list(tensor_list, dtype, device, lay or "strided", where, keep_history=True)
    return mark_dynamic(make(buffer, structure, lay or "strided"))


def _convert(nt, dtype, device, layout, where):
    array = nt._array()  # the storage: its dtype and device, read without materialising a view's components
    target = resolve_dtype(dtype, backend_name_of(array))
    layout = layout or nt._layout
    if layout == "jagged":
        _check_jagged(nt._struct, where)
    moved = _place(array, device) if (target is None or target == array.dtype) and layout == nt._layout else None
    if moved is array:  # nothing changes: self, as torch's to() (a view stays that view)
        return nt
    if nt._perm is not None and nt._src is None and layout == nt._layout:  # a transposed view: its storage
        buffer = nt._buf  # converted, read through the same permutation (torch's to() keeps the view's layout)
        if target is not None and target != buffer.dtype:
            buffer = nt.backend.astype(buffer, target)
        return make_view(_place(buffer, device), nt._st, nt._perm, layout)
    buffer = nt._buffer
    if moved is not None and buffer is array:  # (the storage is the buffer: moved once)
        return make(moved, nt._struct, layout)
    if target is not None and target != buffer.dtype:
        buffer = nt.backend.astype(buffer, target)
    elif nt._perm is None:  # (a tensor with holes' buffer is gathered again on each read: another layout copies it)
        buffer = copied(nt, buffer)
    return make(_place(buffer, device), nt._struct, layout)


def _from_dense(array, where):
    if array.ndim < 2:
        raise ShapeError(f"{where}: Expected tensor argument to have dim() > 1, got shape {tuple(array.shape)}")
    n = int(array.shape[0])
    return make(array.reshape(-1), Structure.uniform(n, tuple(int(s) for s in array.shape[1:])))


def from_lod_tensor(t, level=-1):
    """The sequences of ``level`` of a LoDTensor as components; shares ``t.data`` when contiguous."""
    data = t._check_fits("to_nested()")
    t._require_lod("to_nested()")
    offsets = t.lod.absolute_offsets(level)
    structure = Structure.of_rows(np.diff(offsets), tuple(int(s) for s in data.shape[1:]))
    if structure.is_lod:
        structure._rows = (offsets, tuple(int(s) for s in data.shape[1:]))
    return mark_dynamic(make(data.reshape(-1), structure))


#: ``fn(values, offsets, lengths)``: a tensor with holes over ``values`` through the gate of
#: ``nested_tensor_from_jagged`` (installed by ``_jagged``, a module above this one)
JAGGED_WITH_HOLES = {}


def _from_torch_nested(nt):
    import torch  # noqa: PLC0415 - the argument is a torch tensor

    if nt.layout == torch.jagged and nt._ragged_idx == 1 and nt._lengths is not None and JAGGED_WITH_HOLES:
        return JAGGED_WITH_HOLES["fn"](nt.values(), nt.offsets(), nt._lengths)  # (a view of its values, as it is)
    if nt.layout == torch.jagged and nt._ragged_idx == 1 and nt._lengths is None:
        values = nt.values()
        # torch does not check the offsets of a jagged tensor: they pass the gate like any others
        offsets = LoD([nt.offsets().detach().cpu().numpy()], num_rows=int(values.shape[0])).offsets(0)
        if values.is_contiguous():
            structure = Structure.of_rows(np.diff(offsets), tuple(int(s) for s in values.shape[1:]))
            return make(values.reshape(-1), structure, "jagged")
    parts = list(nt.unbind())
    buffer, structure = _from_list(parts, None, None, "strided", "as_nested_tensor()", keep_history=True)
    return make(buffer, structure, "jagged" if nt.layout == torch.jagged else "strided")


def _from_packed(packed, where):
    """The sequences of a ``PackedSequence`` as components (what ``unpack_sequence`` lists), in one
    gather of its rows back to sequence order: no Python list of sequences. Keeps autograd history."""
    import torch  # noqa: PLC0415 - the argument is torch's

    rows, lengths = unpacked_rows(packed, where, torch)
    tail = tuple(int(s) for s in packed.data.shape[1:])
    sizes = np.empty((lengths.size, 1 + len(tail)), dtype=np.int64)
    sizes[:, 0] = lengths
    sizes[:, 1:] = tail
    return make(rows.reshape(-1), Structure(sizes))
