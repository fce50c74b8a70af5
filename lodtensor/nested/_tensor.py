"""NestedTensor: one flat buffer, a per-component size table and element offsets.

Component ``i`` is ``buffer[offsets[i]:offsets[i + 1]].reshape(sizes[i])``, so
every component is contiguous and reshapes are free. When every component dim
after the first is regular (the LoD case: ``(batch, (tokens), hidden)``) the
buffer reshaped to ``(rows, *row_shape)`` is exactly the data of a one-level
LoDTensor whose offsets are the running sum of ``sizes[:, 0]``; the fast paths
of the ops work on that view.
"""

import numpy as np

from ..backend import backend_name_of, backend_of
from ..backend._pickle import portable
from ..lod import LoD
from ..place import place_of
from . import _registry
from ._dtypes import kind_of

__all__ = ["NestedTensor", "Structure", "make"]

_INT64 = np.dtype(np.int64)
_object_new = object.__new__


class Structure:
    """Sizes and offsets of a nested tensor's components, plus facts derived from them (cached).

    Results with the same shape as their input share its Structure, so its
    cached facts (regular dims, row offsets, Python lists for unbind) are
    computed once per batch, not once per op.
    """

    __slots__ = ("sizes", "offsets", "_regular", "_rows", "_lists", "_lod")

    def __init__(self, sizes, offsets=None):
        sizes = np.asarray(sizes, dtype=_INT64)
        if offsets is None:
            numel = sizes.prod(axis=1) if sizes.shape[1] else np.ones(sizes.shape[0], _INT64)
            offsets = np.zeros(sizes.shape[0] + 1, dtype=_INT64)
            np.cumsum(numel, out=offsets[1:])
        sizes.setflags(write=False)
        offsets.setflags(write=False)
        self.sizes = sizes
        self.offsets = offsets
        self._regular = None
        self._rows = None
        self._lists = None
        self._lod = None

    @classmethod
    def uniform(cls, n, shape):
        """``n`` components of the same ``shape``."""
        sizes = np.empty((n, len(shape)), dtype=_INT64)
        sizes[:] = shape
        step = int(np.prod(shape, dtype=np.int64))
        return cls(sizes, np.arange(n + 1, dtype=_INT64) * step)

    @property
    def n(self):
        return self.sizes.shape[0]

    @property
    def rank(self):
        """Dimensions of each component (the nested tensor has one more)."""
        return self.sizes.shape[1]

    @property
    def numel(self):
        return int(self.offsets[-1])

    @property
    def regular(self):
        """Per component dim: True where every component has the same size."""
        reg = self._regular
        if reg is None:
            sizes = self.sizes
            reg = (sizes == sizes[:1]).all(axis=0) if sizes.shape[0] else np.ones(sizes.shape[1], bool)
            reg = self._regular = tuple(bool(r) for r in reg)
        return reg

    @property
    def is_lod(self):
        """True when only the first component dim may be ragged (a one-level LoD over rows)."""
        return self.rank >= 1 and all(self.regular[1:]) and self.n > 0

    def rows(self):
        """``(row_offsets, row_shape)`` of the LoD case (cached)."""
        rows = self._rows
        if rows is None:
            offsets = np.zeros(self.n + 1, dtype=_INT64)
            np.cumsum(self.sizes[:, 0], out=offsets[1:])
            offsets.setflags(write=False)
            rows = self._rows = (offsets, tuple(int(s) for s in self.sizes[0, 1:]))
        return rows

    def lod(self):
        """The one-level :class:`~lodtensor.LoD` of the rows (LoD case; cached, so are its pad plans)."""
        lod = self._lod
        if lod is None:
            lod = self._lod = LoD._from_valid([self.rows()[0]])
        return lod

    def lists(self):
        """Element offsets, row offsets (LoD case, else None) and sizes as Python lists (cached)."""
        lists = self._lists
        if lists is None:
            rows = self.rows()[0].tolist() if self.is_lod else None
            lists = self._lists = (self.offsets.tolist(), rows, [tuple(s) for s in self.sizes.tolist()])
        return lists

    def tail_view(self, buffer, axis, tail=None):
        """``buffer`` viewed as ``(rows, *sizes[axis:])``; the dims from ``axis`` on must be regular.

        ``rows`` is counted from the sizes, so zero-size dims are never ambiguous;
        ``tail`` gives the trailing shape when there are no components to read it from.
        """
        if tail is None:
            tail = tuple(int(s) for s in self.sizes[0, axis:]) if self.n else (0,) * (self.rank - axis)
        rows = int(self.sizes[:, :axis].prod(axis=1).sum()) if axis else self.n
        return buffer.reshape((rows,) + tail)

    def same_as(self, other):
        return self is other or (
            self.sizes.shape == other.sizes.shape and bool(np.array_equal(self.sizes, other.sizes))
        )


def make(buffer, structure, layout="strided"):
    """A NestedTensor from parts known to fit together (no checks): the fast internal path."""
    t = _object_new(NestedTensor)
    t._buffer = buffer
    t._struct = structure
    t._layout = layout
    return t


def _op(name):
    def method(self, *args, **kwargs):
        return _registry.OP_TABLE[name](self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Same as :func:`lodtensor.nested.{name}` with this tensor first."
    return method


def _rop(name):
    def method(self, other):
        return _registry.OP_TABLE[name](other, self)

    method.__name__ = f"__r{name}__"
    return method


class NestedTensor:
    """A list of arrays of equal rank and any sizes, stored in one flat buffer (torch.nested semantics).

    Build one with :func:`nested_tensor` or :func:`as_nested_tensor`. Dim 0
    indexes the components; ``size(i)`` is defined for regular dims only.

    Examples
    --------
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.zeros((2, 3)), np.ones((4, 3))])
    >>> nt.dim(), nt.size(0), nt.size(2), nt.is_nested
    (3, 2, 3, True)
    >>> nt.nested_size().tolist()
    [[2, 3], [4, 3]]
    >>> nt.size(1)
    Traceback (most recent call last):
    ...
    ValueError: Given dimension 1 is irregular and does not have a size.
    """

    __slots__ = ("_buffer", "_struct", "_layout", "_holes", "__weakref__")  # _holes: see _jagged.py
    __array_priority__ = 1000  # NumPy scalars and arrays defer to our reflected operators
    is_nested = True

    def __init__(self, *args, **kwargs):
        raise TypeError("NestedTensor() cannot be called directly; use lodtensor.nested.nested_tensor(list)")

    # -- metadata ----------------------------------------------------------------------------
    def dim(self):
        """Number of dims, counting dim 0 (the components)."""
        return self._struct.rank + 1

    @property
    def ndim(self):
        return self._struct.rank + 1

    def size(self, dim=None):
        """The size of ``dim``; it must be regular. Without ``dim``: the full shape, if all dims are regular."""
        if dim is None:
            return self.shape
        dim = normalize_dim(dim, self.dim())
        if dim == 0:
            return self._struct.n
        st = self._struct
        if st.n == 0:
            raise ValueError(f"Given dimension {dim} has no size: the nested tensor has no components.")
        if not st.regular[dim - 1]:
            raise ValueError(f"Given dimension {dim} is irregular and does not have a size.")
        return int(st.sizes[0, dim - 1])

    @property
    def shape(self):
        """The shape as a tuple when every dim is regular (raises otherwise, naming the irregular dims)."""
        st = self._struct
        irregular = [d + 1 for d, r in enumerate(st.regular) if not r]
        if irregular:
            raise ValueError(
                f"NestedTensor has irregular dimension(s) {irregular} and no single shape; "
                f"use size(i) for a regular dim or nested_size()"
            )
        rest = tuple(int(s) for s in st.sizes[0]) if st.n else (0,) * st.rank
        return (st.n,) + rest

    def __len__(self):
        return self._struct.n

    def numel(self):
        """Total number of elements in all components."""
        return self._struct.numel

    def nested_size(self):
        """The size table: one row per component, int64 (a torch tensor for torch data)."""
        return self._index_array(self._struct.sizes)

    def nested_strides(self):
        """Contiguous strides of every component, like :meth:`nested_size`."""
        sizes = self._struct.sizes
        strides = np.ones_like(sizes)
        if sizes.shape[1] > 1:
            strides[:, :-1] = np.cumprod(sizes[:, :0:-1], axis=1)[:, ::-1]
        return self._index_array(strides)

    def _index_array(self, table):
        if backend_name_of(self._buffer) == "numpy":
            return table.copy()
        return self.backend.to_device(self.backend.asarray(table.copy()), self.backend.device_of(self._buffer))

    @property
    def dtype(self):
        return self._buffer.dtype

    @property
    def device(self):
        """``torch.device`` for torch data, the device string (``'cpu'``, ``'cuda:0'``) otherwise."""
        buf = self._buffer
        return buf.device if backend_name_of(buf) == "torch" else self.backend.device_of(buf)

    @property
    def place(self):
        """The lodtensor place (``CPUPlace()``, ``CUDAPlace(i)``) of the buffer."""
        return place_of(self._buffer, self.backend)

    @property
    def layout(self):
        """``'strided'`` or ``'jagged'`` (the layout asked for at construction)."""
        return self._layout

    @property
    def backend(self):
        return backend_of(self._buffer)

    @property
    def requires_grad(self):
        return bool(getattr(self._buffer, "requires_grad", False))

    @property
    def is_leaf(self):
        return bool(getattr(self._buffer, "is_leaf", True))

    @property
    def grad(self):
        """Gradient of a torch leaf as a NestedTensor of the same structure (None before backward)."""
        grad = getattr(self._buffer, "grad", None)
        return None if grad is None else make(grad, self._struct, self._layout)

    @property
    def grad_fn(self):
        return getattr(self._buffer, "grad_fn", None)

    def requires_grad_(self, requires_grad=True):
        """Make this (torch, floating) leaf record operations; in place, returns self."""
        from ._construct import check_requires_grad  # noqa: PLC0415 - avoids an import cycle

        check_requires_grad(self._buffer, requires_grad, "requires_grad_()")
        if requires_grad or backend_name_of(self._buffer) == "torch":
            self._buffer.requires_grad_(requires_grad)
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Backpropagate from this torch nested tensor; ``gradient`` a NestedTensor of the same structure."""
        buf = self._buffer
        if backend_name_of(buf) != "torch":
            raise TypeError("backward(): needs torch data; NumPy nested tensors have no autograd")
        if gradient is None:
            if self.numel() != 1:
                raise ValueError("backward(): grad can be implicitly created only for scalar outputs")
            grad = None
        else:
            if not isinstance(gradient, NestedTensor) or not self._struct.same_as(gradient._struct):
                raise ValueError("backward(): gradient must be a nested tensor with the same nested structure")
            grad = gradient._buffer
        buf.backward(grad, retain_graph=retain_graph, create_graph=create_graph)

    def is_contiguous(self):
        """True unless built with holes (``offsets`` and ``lengths``), as torch reports; the buffer
        itself is always contiguous here."""
        return getattr(self, "_holes", None) is None

    def lengths(self):
        """Component lengths (int64) when built with holes (``offsets`` and ``lengths``), else None, as torch.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1, 2], [3]]).lengths() is None
        True
        """
        holes = getattr(self, "_holes", None)
        return None if holes is None else self._index_array(holes[2])

    @property
    def jagged_dim(self):
        """The ragged dim: the first irregular dim (1 when every dim is regular), None when several are ragged.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))]).jagged_dim
        1
        """
        irregular = [a + 1 for a, r in enumerate(self._struct.regular) if not r]
        if len(irregular) > 1:
            return None
        return irregular[0] if irregular else 1

    def contiguous(self):
        """This nested tensor: its components always lie one after another in one buffer."""
        return self

    def values(self):
        """The buffer as rows ``(total rows, *row)`` when only the first component dim is ragged
        (torch's jagged ``values()``), else the flat buffer; a view either way.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))]).values().shape
        (6, 3)
        """
        holes = getattr(self, "_holes", None)
        if holes is not None:
            return holes[0]
        st = self._struct
        if st.is_lod and st.n:
            offsets, row_shape = st.rows()
            return self._buffer.reshape((int(offsets[-1]),) + row_shape)
        return self._buffer

    def offsets(self):
        """Row offsets of the components (torch's jagged ``offsets()``), as an int64 array of the
        buffer's library; only when the first component dim is the one ragged dim.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))]).offsets().tolist()
        [0, 2, 6]
        """
        holes = getattr(self, "_holes", None)
        if holes is not None:
            return self._index_array(holes[1])
        st = self._struct
        if not st.is_lod:
            raise ValueError(
                "offsets(): only a nested tensor ragged in its first component dim alone has row offsets; "
                "use nested_size() for the sizes of every dim"
            )
        return self.backend.to_device(self.backend.asarray(st.rows()[0].copy()), self.backend.device_of(self._buffer))

    # -- DLPack (the flat buffer; see docs/interop.md for the ragged convention) ----------------
    def __dlpack__(self, **kwargs):
        """A DLPack capsule over ``values()`` (shared): ``np.from_dlpack(nt)``, ``torch.from_dlpack(nt)``.

        >>> import lodtensor.nested as ln
        >>> np.from_dlpack(ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))])).shape
        (3, 3)
        """
        return self.values().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        """``(device_type, device_id)`` of the buffer, as DLPack defines them."""
        return self._buffer.__dlpack_device__()

    # -- components --------------------------------------------------------------------------
    def unbind(self, dim=0):
        """The components as a tuple of views into the one buffer (writes through them show here).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[1, 2], [3]])
        >>> a, b = nt.unbind()
        >>> a[0] = 10
        >>> nt.to_tensor_list()[0].tolist()
        [10, 2]
        """
        if dim != 0 and normalize_dim(dim, self.dim()) != 0:
            raise ValueError(f"NestedTensor can only be unbound along dimension 0 got dimension {dim} instead.")
        return tuple(_components(self))

    def __iter__(self):
        return iter(_components(self))

    def __getitem__(self, index):
        if isinstance(index, (int, np.integer)):
            return _registry.OP_TABLE["select"](self, 0, index)
        raise TypeError(
            f"NestedTensor indices must be an int (a component), got {type(index).__name__}; "
            f"use select(dim, index) for other dims"
        )

    def to_tensor_list(self):
        """The components as a list of views (the List layout)."""
        return list(_components(self))

    # -- conversions -------------------------------------------------------------------------
    def to_torch(self):
        """This nested tensor with torch data, sharing memory with NumPy/CuPy buffers."""
        from ..backend import get_backend  # noqa: PLC0415

        if backend_name_of(self._buffer) == "torch":
            return self
        return make(get_backend("torch").asarray(self._buffer), self._struct, self._layout)

    def to(self, *args, device=None, dtype=None):
        """This nested tensor on ``device`` and/or with ``dtype`` (self when nothing changes).

        As torch's ``to``: positional arguments may be a device, a dtype, both,
        or another nested tensor (whose device and dtype are taken).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1, 2], [3]]).to(np.float32).dtype
        dtype('float32')
        """
        from ._construct import as_nested_tensor  # noqa: PLC0415 - avoids an import cycle

        for arg in args:
            if isinstance(arg, NestedTensor):
                device = arg.device if device is None else device
                dtype = arg.dtype if dtype is None else dtype
            elif _is_dtype(arg):
                dtype = arg
            else:
                device = arg
        return as_nested_tensor(self, dtype=dtype, device=device)

    def double(self):
        """A float64 copy (self when already float64)."""
        return self.to(dtype=np.float64)

    def float(self):
        """A float32 copy (self when already float32)."""
        return self.to(dtype=np.float32)

    def half(self):
        """A float16 copy (self when already float16)."""
        return self.to(dtype=np.float16)

    def numpy(self):
        """This nested tensor with NumPy data (a view of host memory where possible)."""
        if backend_name_of(self._buffer) == "numpy":
            return self
        return make(self.backend.to_numpy(self._buffer), self._struct, self._layout)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "a NestedTensor has no single dense array; use to_padded_tensor(padding), to_packed() "
            "or to_tensor_list()"
        )

    # -- python protocol ---------------------------------------------------------------------
    def __repr__(self):
        from ._layouts import format_nested  # noqa: PLC0415

        return format_nested(self)

    __str__ = __repr__

    def __bool__(self):
        raise ValueError("the truth value of a NestedTensor is ambiguous")

    def __reduce__(self):
        buf = self._buffer
        if self.requires_grad and not self.is_leaf:
            buf = buf.detach()  # torch pickles leaves only; the history is not kept, as for torch tensors
        return (_rebuild, (portable(buf), portable(self._struct.sizes.copy()), self._layout))

    def __deepcopy__(self, memo):
        return _registry.OP_TABLE["clone"](self)

    def __copy__(self):
        return make(self._buffer, self._struct, self._layout)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs return NestedTensors (see ``lodtensor.nested._pointwise.array_ufunc``)."""
        return _registry.OP_TABLE["array_ufunc"](ufunc, method, *inputs, **kwargs)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _registry.torch_dispatch(func, args, kwargs or {})

    # -- operations (the table in _registry holds the implementations) ------------------------
    matmul = _op("matmul")
    bmm = _op("bmm")
    softmax = _op("softmax")
    masked_fill = _op("masked_fill")
    select = _op("select")
    clone = _op("clone")
    detach = _op("detach")
    reshape_as = _op("reshape_as")
    transpose = _op("transpose")
    to_padded_tensor = _op("to_padded_tensor")
    to_padded = _op("to_padded")
    to_masked = _op("to_masked")
    to_packed = _op("to_packed")
    to_packed_sequence = _op("to_packed_sequence")
    to_lod_tensor = _op("to_lod_tensor")
    sum = _op("sum")
    mean = _op("mean")
    amax = _op("amax")
    amin = _op("amin")

    def reshape(self, *shape):
        """Reshape every component; see :func:`lodtensor.nested.reshape` (dim 0 kept, -1 inherits)."""
        return _registry.OP_TABLE["reshape"](self, _shape_arg(shape))

    def view(self, *shape):
        """Same as :meth:`reshape` (components are contiguous, so it is always a view)."""
        return _registry.OP_TABLE["view"](self, _shape_arg(shape))

    __and__ = _op("bitwise_and")
    __rand__ = _rop("bitwise_and")
    __or__ = _op("bitwise_or")
    __ror__ = _rop("bitwise_or")
    __xor__ = _op("bitwise_xor")
    __rxor__ = _rop("bitwise_xor")
    __mod__ = _op("remainder")
    __rmod__ = _rop("remainder")
    __add__ = _op("add")
    __radd__ = _rop("add")
    __sub__ = _op("sub")
    __rsub__ = _rop("sub")
    __mul__ = _op("mul")
    __rmul__ = _rop("mul")
    __truediv__ = _op("div")
    __rtruediv__ = _rop("div")
    __matmul__ = _op("matmul")
    __rmatmul__ = _rop("matmul")
    __pow__ = _op("pow")
    __rpow__ = _rop("pow")
    __neg__ = _op("neg")
    __abs__ = _op("abs")
    __invert__ = _op("logical_not")
    __eq__ = _op("eq")
    __ne__ = _op("ne")
    __lt__ = _op("lt")
    __le__ = _op("le")
    __gt__ = _op("gt")
    __ge__ = _op("ge")
    __hash__ = object.__hash__


def attach_ops(names):
    """Install ``names`` (registered ops) as methods where the class has none of its own."""
    for name in names:
        if not hasattr(NestedTensor, name):
            setattr(NestedTensor, name, _op(name))


def _is_dtype(x):
    """Whether ``x`` names a dtype (a NumPy dtype or type, a torch dtype, a dtype name) rather than a device."""
    if isinstance(x, (np.dtype, type)) or type(x).__name__ == "dtype":
        return True
    if isinstance(x, str) and x.split(":")[0] not in ("cpu", "cuda", "gpu"):
        try:
            np.dtype(x)
        except TypeError:
            return False
        return True
    return False


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)) or (
        len(shape) == 1 and type(shape[0]).__name__ == "Size"
    ):
        return tuple(shape[0])
    return shape


def _components(nt):
    """The components as views of the buffer: one slice per component, no other work."""
    st = nt._struct
    buf = nt._buffer
    if st.n == 0:
        return []
    offsets, row_offsets, sizes = st.lists()
    ops = backend_of(buf)
    if row_offsets is not None:
        rows = buf.reshape((row_offsets[-1],) + st.rows()[1])
        return ops.split_rows(rows, row_offsets)
    pieces = ops.split_rows(buf, offsets)
    return [p.reshape(s) for p, s in zip(pieces, sizes)]


def normalize_dim(dim, ndim, name="dim"):
    """``dim`` in ``[-ndim, ndim)`` as a non-negative int; torch's IndexError otherwise."""
    try:
        d = int(dim) if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool) else None
    except TypeError:
        d = None
    if d is None:
        raise TypeError(f"{name} must be an integer, got {type(dim).__name__} {dim!r}")
    if not -ndim <= d < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d % ndim


def kind(nt):
    return kind_of(nt._buffer.dtype)


def _rebuild(buffer, sizes, layout):
    """Unpickle through a gate: a pickle is outside data, so its parts are checked like a constructor's."""
    from .._validate import _integer_array  # noqa: PLC0415 - only unpickling needs it

    if layout not in ("strided", "jagged"):
        raise ValueError(f"unpickling a NestedTensor: layout must be 'strided' or 'jagged', got {layout!r}")
    if getattr(buffer, "ndim", None) != 1 or not hasattr(buffer, "dtype"):
        raise TypeError(f"unpickling a NestedTensor: the buffer must be a 1-D array, got {type(buffer).__name__}")
    table = np.asarray(sizes)
    if table.ndim != 2:
        raise ValueError(f"unpickling a NestedTensor: sizes must be a 2-D table, got shape {table.shape}")
    flat = _integer_array(table.reshape(-1), "unpickled sizes").reshape(table.shape)
    if flat.size and flat.min() < 0:
        raise ValueError(f"unpickling a NestedTensor: sizes must be >= 0, got {flat.min()}")
    numel = [int(np.prod([int(v) for v in row], dtype=object)) for row in flat.tolist()]  # exact, no wrap
    spans = [int(np.prod([max(int(v), 1) for v in row], dtype=object)) for row in flat.tolist()]
    if spans and max(spans) >= 2**59:  # no array of any dtype (up to 16 bytes) can have such a shape
        i = spans.index(max(spans))
        raise ValueError(
            f"unpickling a NestedTensor: component {i} has shape {tuple(flat[i].tolist())}, "
            "larger than any array can be"
        )
    if sum(numel) != int(buffer.shape[0]):
        raise ValueError(
            f"unpickling a NestedTensor: the sizes hold {sum(numel)} elements, the buffer {int(buffer.shape[0])}"
        )
    return make(buffer, Structure(flat.copy()), layout)
