"""NestedTensor: one flat buffer, a per-component size table and element offsets.

Component ``i`` is ``buffer[offsets[i]:offsets[i + 1]].reshape(sizes[i])``, so every component is contiguous
and reshapes are free. When every component dim after the first is regular (the LoD case: ``(batch, (tokens),
hidden)``) the buffer reshaped to ``(rows, *row_shape)`` is exactly the data of a one-level LoDTensor whose
offsets are the running sum of ``sizes[:, 0]``; the fast paths of the ops work on that view.
"""

import numpy as np

from .._compile import eager_under_compile
from .._format import nested_repr
from ..backend import backend_name_of, backend_of
from ..backend._pickle import unpickled_by
from ..errors import ShapeError
from ..lod import LoD
from ..place import place_of
from ..tensor import coerce_data
from . import _dispatch
from ._autograd import AutogradMixin, view_source
from ._permute import compose, logical_structure, normalize_perm, permute_view, permuted
from ._structure import Structure, normalize_dim
from ._symbolic import LayoutName, RaggedSize, Size, ragged_size

__all__ = ["NestedTensor", "Structure", "make", "make_view", "same_layout", "normalize_dim", "documents"]

_INT64 = np.dtype(np.int64)


def make(buffer, structure, layout="strided"):
    """A NestedTensor from parts known to fit together (no checks): the fast internal path."""
    t = object.__new__(NestedTensor)  # (not an alias of it: torch 2.12's dynamo traces only this spelling)
    t._data = buffer
    t._stamp = None
    t._st = structure if (structure.jag is None) == (layout != "jagged") else structure.for_layout(layout)
    t._perm = None
    t._layout = layout
    return t


def make_view(buffer, storage, perm, layout="strided"):
    """A NestedTensor whose component dim ``a`` reads storage axis ``perm[a]`` of ``buffer`` laid out as ``storage``."""
    t = object.__new__(NestedTensor)
    t._data = buffer
    t._stamp = None
    t._st = storage if (storage.jag is None) == (layout != "jagged") else storage.for_layout(layout)
    t._perm = normalize_perm(perm)
    t._layout = layout
    return t


def same_layout(a, b):
    """Whether nested tensors ``a`` and ``b`` lay their components out alike (perm and storage sizes)."""
    return a._perm == b._perm and a._st.same_as(b._st)


def _op(name):
    def method(self, *args, **kwargs):
        return _dispatch.OP_TABLE[name](self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Same as :func:`lodtensor.nested.{name}` with this tensor first."
    return method


def _rop(name):
    def method(self, other):
        return _dispatch.OP_TABLE[name](other, self)

    method.__name__ = f"__r{name}__"
    return method


class NestedTensor(AutogradMixin):
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
    lodtensor.errors.ShapeError: Given dimension 1 is irregular and does not have a size.
    """

    # _buf, _st: the buffer and its size table (the storage); _perm: which storage axis each component dim
    # reads (None: the same; see _permute.py), _logical: the size table read through _perm (cached; the buffer
    # read through it is materialised per read, _buffer); _holes: see _holes.py (_stamp: _restamp there;
    # _leaf: _hole_leaf there). Outer ragged levels (documents) are part of the Structure.
    __slots__ = ("_data", "_st", "_perm", "_logical", "_layout", "_hole_parts", "_stamp", "_leaf", "__weakref__")
    __array_priority__ = 1000  # NumPy scalars and arrays defer to our reflected operators
    is_nested = True
    _src = None  # the strided window a view of a regular dim reads (``_views.WindowView``); none here

    def __init__(self, *args, **kwargs):
        raise TypeError("NestedTensor() cannot be called directly; use lodtensor.nested.nested_tensor(list)")

    @classmethod
    def _attach(cls, **methods):
        """Install methods that an upper module of the package defines (``_convert``).

        The class never imports the modules above it; they attach their methods
        when ``lodtensor.nested`` is imported, so the imports only point down.
        """
        for name, fn in methods.items():
            if name in cls.__dict__ and cls.__dict__[name] is not fn:
                raise RuntimeError(f"NestedTensor.{name} is already defined; an upper module cannot replace it")
            setattr(cls, name, fn)

    # -- storage -----------------------------------------------------------------------------
    @property
    def _buf(self):  # (with holes over values written since, or not yet gathered: gathered, _holes.py)
        stamp = getattr(self, "_stamp", None)
        if stamp is not None and stamp != backend_of(self._hole_parts[0]).version(self._hole_parts[0]):
            self._regather()
        return self._data

    @_buf.setter
    def _buf(self, array):
        self._data = array

    @property
    def _holes(self):  # (values, offsets, lengths), lengths None where offsets span part of values: _holes.py
        return getattr(self, "_hole_parts", None)

    @_holes.setter
    def _holes(self, holes):
        self._hole_parts = holes
        self._restamp()  # (_holes.py)

    @property
    def _struct(self):
        """The size table of the components as they read (the storage's, through ``_perm``)."""
        if self._perm is None:
            return self._st
        st = getattr(self, "_logical", None)
        if st is None:
            st = self._logical = logical_structure(self._st, self._perm)
        return st

    @property
    def _buffer(self):
        """The components as they read, one after another (a permuted view: materialised on each read, so it
        has the storage's current values whoever wrote into it: the base, another view, ``values()``)."""
        if self._perm is None:
            return self._buf
        return permuted(backend_of(self._buf), self._buf, self._st, self._perm)

    def _stored(self, buffer):
        """A buffer laid out as this tensor's components read (``_buffer``'s layout) moved into its storage layout."""
        if self._perm is None:
            return buffer
        inverse = tuple(int(a) for a in np.argsort(self._perm))
        return permuted(backend_of(buffer), buffer, self._struct, inverse)

    def _written(self):
        """Hook called after an in-place write into the storage (a permuted view keeps no copy to forget;
        components with holes write their rows back into the values, ``_holes._write_holes``)."""
        if getattr(self, "_holes", None) is not None:
            self._write_holes()

    def _array(self):
        """The array holding this tensor's storage, which in-place writes go into (the buffer; a view of a
        regular dim's window of its input's rows, ``_views.WindowView``)."""
        return self._buf

    def _tracked(self):
        """:meth:`_array` for the autograd state it tells: over values that count no writes, the same array not
        gathered again (``_holes._regather`` keeps it); of a tensor with holes made to require grad, the leaf
        over its values (``_holes._hole_leaf``)."""
        leaf = getattr(self, "_leaf", None)
        return leaf if leaf is not None else self._data if self._stamp == -1 else self._buf

    def _meta(self):  # (for the library, dtype and device: a result with holes not gathered yet, its values)
        return self._hole_parts[0] if self._stamp == -2 else self._tracked()

    def _rebind(self, array):
        """Hold ``array`` (one over the same memory as :meth:`_array`'s, in its place: ``requires_grad_()``)."""
        self._buf = array

    # -- metadata ----------------------------------------------------------------------------
    def dim(self):
        """Number of dims, counting dim 0 (the components).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros((2, 3)), np.ones((4, 3))]).dim()
        3
        """
        st = self._st
        return st.rank + 1 + len(st.outer)

    @property
    def ndim(self):
        return self.dim()

    def size(self, dim=None):
        """The size of ``dim``; it must be regular. Without ``dim``: :attr:`shape`.

        Raises
        ------
        ShapeError
            ``dim`` is ragged (torch's "irregular" RuntimeError; also a ValueError).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.zeros((2, 3)), np.ones((4, 3))])
        >>> nt.size(0), nt.size(-1), nt.size()
        (2, 3, Size([2, j..., 3]))
        >>> nt.size(1)
        Traceback (most recent call last):
        ...
        lodtensor.errors.ShapeError: Given dimension 1 is irregular and does not have a size.
        """
        if dim is None:
            return self.shape
        d = normalize_dim(dim, self.dim())
        st = self._st
        axis = d - 1 - len(st.outer)
        if axis >= 0 and st.tail is not None:  # a regular component dim: from the row shape
            storage = compose(self._perm, st.rank)[axis]  # (no size table read: torch.compile traces this)
            if storage:
                return st.tail[storage - 1]
        size = self.shape[d]
        if isinstance(size, RaggedSize):
            raise ShapeError(f"Given dimension {d} is irregular and does not have a size.")
        return size

    @property
    def shape(self):
        """The shape as a :class:`~lodtensor.nested.Size`: ints for regular dims, a symbolic
        :class:`~lodtensor.nested.RaggedSize` (printed ``j1``, ...) for each ragged dim, as torch's jagged layout.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.zeros((2, 6)), np.zeros((4, 6))])
        >>> nt.shape  # doctest: +ELLIPSIS
        Size([2, j..., 6])
        >>> nt.shape[0], nt.shape[-1], len(nt.shape), nt.shape == (nt * 2).shape
        (2, 6, 3, True)
        """
        if _dispatch.compiling():  # the size table is host data: read behind a graph break
            return _dispatch.COMPILE_HOOKS["eager"](_shape, self)
        return _shape(self)

    def _shape_eager(self):
        st = self._struct
        head = [st.count()]
        for offsets in st.outer:  # each outer level: the number of entries under each parent
            counts = np.diff(offsets)
            head.append(int(counts[0]) if counts.size and (counts == counts[0]).all() else (
                ragged_size(counts) if counts.size else 0))
        return Size((*head, *st.dim_sizes()))

    @eager_under_compile  # reads the host size table: behind a graph break under torch.compile
    def __len__(self):
        return self._st.count()

    def numel(self):
        """Total number of elements in all components.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros((2, 3)), np.ones((4, 3))]).numel()  # 2 * 3 + 4 * 3
        18
        """
        return self._struct.numel

    @eager_under_compile  # reads the host size table: behind a graph break under torch.compile
    def nested_size(self):
        """The size table: one row per component, int64 (a torch tensor for torch data).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros((2, 3)), np.ones((4, 3))]).nested_size().tolist()
        [[2, 3], [4, 3]]
        """
        return self._index_array(self._struct.sizes)

    @eager_under_compile  # reads the host size table: behind a graph break under torch.compile
    def nested_strides(self):
        """Contiguous strides of every component, like :meth:`nested_size`.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.zeros((2, 3)), np.ones((4, 3))]).nested_strides().tolist()
        [[3, 1], [3, 1]]
        """
        sizes = self._struct.sizes
        strides = np.ones_like(sizes)
        if sizes.shape[1] > 1:
            strides[:, :-1] = np.cumprod(sizes[:, :0:-1], axis=1)[:, ::-1]
        return self._index_array(strides)

    def _index_array(self, table):
        return self.backend.from_host(table.copy(), like=self._meta())

    @property
    def dtype(self):
        return self._meta().dtype

    @property
    def device(self):
        """``torch.device`` for torch data, the device string (``'cpu'``, ``'cuda:0'``) otherwise."""
        buf = self._meta()
        torch_data = backend_name_of(buf) == "torch"  # backend-branch: a torch.device, as torch gives it
        return buf.device if torch_data else self.backend.device_of(buf)

    @property
    def place(self):
        """The lodtensor place (``CPUPlace()``, ``CUDAPlace(i)``) of the buffer."""
        return place_of(self._meta(), self.backend)

    @property
    def layout(self):
        """``'strided'`` or ``'jagged'`` (the layout asked for at construction); it also compares equal to
        torch's ``torch.strided`` / ``torch.jagged``, so ``nt.layout == torch.jagged`` reads as on torch."""
        return LayoutName(self._layout)

    @property
    def backend(self):
        return backend_of(self._meta())

    def _grad_view(self, grad):
        """``grad`` (a buffer like this tensor's; like its values, of one made a leaf over them: :meth:`_meta`)
        as a nested tensor laid out as this one (with its holes)."""
        if getattr(self, "_leaf", None) is not None:
            return self._leaf_grad(grad)
        return make_view(grad, self._st, self._perm, self._layout)

    def _buffer_like(self, other):
        """The buffer of nested tensor ``other`` laid out as this one's (the same array when it is)."""
        return other._buf if same_layout(self, other) else self._stored(other._buffer)

    # -- components --------------------------------------------------------------------------
    @eager_under_compile  # the slices come from the host size table: read behind a graph break
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
            raise ShapeError(f"NestedTensor can only be unbound along dimension 0 got dimension {dim} instead.")
        if self._st.outer:
            return documents(self)  # one nested tensor of sentences per document
        return tuple(_components(self))

    def __iter__(self):
        return iter(self.unbind())

    def __getitem__(self, index):
        """``nt[i]`` (component ``i``), ``nt[1, :, -1]``, ``nt[..., 0]``: see :func:`lodtensor.nested.getitem`."""
        if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
            return _dispatch.OP_TABLE["select"](self, 0, index)
        return _dispatch.OP_TABLE["getitem"](self, index)

    @eager_under_compile  # the slices come from the host size table: read behind a graph break
    def to_tensor_list(self):
        """The components as a list of views (the List layout); with two ragged dims, a list per document."""
        if self._st.outer:
            return [doc.to_tensor_list() for doc in self.unbind()]
        return list(_components(self))

    # -- python protocol ---------------------------------------------------------------------
    @eager_under_compile  # reads the host size table: behind a graph break under torch.compile
    def __repr__(self):
        if self._st.outer:
            docs = ",\n".join("  " + repr(d).replace("\n", "\n  ") for d in self.unbind())
            return f"two-level nested_tensor([\n{docs}\n])"
        return nested_repr(_components(self.detach() if self.requires_grad else self), layout=self._layout,
                           requires_grad=self.requires_grad, grad_fn=self.grad_fn)

    __str__ = __repr__

    def __bool__(self):
        raise ShapeError("the truth value of a NestedTensor is ambiguous")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs return NestedTensors (see ``lodtensor.nested._pointwise.array_ufunc``)."""
        return _dispatch.OP_TABLE["array_ufunc"](ufunc, method, *inputs, **kwargs)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _dispatch.torch_dispatch(func, args, kwargs or {})

    # -- operations (the table in _registry holds the implementations) ------------------------
    # (and the methods named in _METHODS, below)

    def reshape(self, *shape, **given):
        """Reshape every component; see :func:`lodtensor.nested.reshape` (dim 0 kept, -1 inherits)."""
        return _dispatch.OP_TABLE["reshape"](self, _shape_arg(shape, given, "shape"))

    def view(self, *shape, **given):
        """Same as :meth:`reshape` (components are contiguous, so it is always a view)."""
        return _dispatch.OP_TABLE["view"](self, _shape_arg(shape, given, "size"))

    __hash__ = object.__hash__


#: Python's operators as ops: name -> (operator, reflected operator, in-place operator); the in-place
#: ones write into this tensor's buffer, as torch's (views and other names of it see the write)
_OPERATORS = {
    "add": ("__add__", "__radd__", "__iadd__"), "sub": ("__sub__", "__rsub__", "__isub__"),
    "mul": ("__mul__", "__rmul__", "__imul__"), "div": ("__truediv__", "__rtruediv__", "__itruediv__"),
    "remainder": ("__mod__", "__rmod__", "__imod__"), "pow": ("__pow__", "__rpow__", "__ipow__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__", "__ifloordiv__"),
    "matmul": ("__matmul__", "__rmatmul__", None), "bitwise_and": ("__and__", "__rand__", "__iand__"),
    "bitwise_or": ("__or__", "__ror__", "__ior__"), "bitwise_xor": ("__xor__", "__rxor__", "__ixor__"),
    "bitwise_left_shift": ("__lshift__", "__rlshift__", "__ilshift__"),
    "bitwise_right_shift": ("__rshift__", "__rrshift__", "__irshift__"),
    "eq": ("__eq__", None, None), "ne": ("__ne__", None, None), "lt": ("__lt__", None, None),
    "le": ("__le__", None, None), "gt": ("__gt__", None, None), "ge": ("__ge__", None, None),
}
#: ops that are methods of the class (the others become methods where no upper module defines one: attach_ops)
_METHODS = ("matmul", "bmm", "softmax", "masked_fill", "select", "clone", "detach", "reshape_as", "transpose",
            "to_padded_tensor", "to_padded", "to_masked", "to_packed", "to_packed_sequence", "to_lod_tensor", "sum",
            "mean", "amax", "amin")
_UNARY_OPERATORS = {"neg": "__neg__", "abs": "__abs__", "bitwise_not": "__invert__"}
for _name, (_plain_op, _reflected, _inplace) in _OPERATORS.items():
    setattr(NestedTensor, _plain_op, _op(_name))
    if _reflected:
        setattr(NestedTensor, _reflected, _rop(_name))
    if _inplace:
        setattr(NestedTensor, _inplace, _op(f"{_name}_"))
for _name, _dunder in [*_UNARY_OPERATORS.items(), *((m, m) for m in _METHODS)]:
    setattr(NestedTensor, _dunder, _op(_name))


def _shape(nt):
    return nt._shape_eager()


def attach_ops(names):
    """Install ``names`` (registered ops) as methods where the class has none of its own."""
    for name in (name for name in names if not hasattr(NestedTensor, name)):
        setattr(NestedTensor, name, _op(name))


def _shape_arg(shape, given=None, key=None):
    if given:  # torch's keyword spelling: reshape(shape=...), view(size=...)
        if shape or list(given) != [key]:
            raise TypeError(f"takes the shape by position or as {key}=, got {shape} and keywords {sorted(given)}")
        shape = (given[key],)
    one = len(shape) == 1 and (isinstance(shape[0], (list, tuple)) or type(shape[0]).__name__ == "Size")
    return tuple(shape[0]) if one else shape


def _components(nt):
    """The components as views of the buffer (with holes, views of their values): one slice per component
    (permuted views of a transposed tensor), no other work."""
    st = nt._st
    parts = nt._hole_components() if st.n and getattr(nt, "_stamp", None) is not None else None
    if parts is not None or st.n == 0:  # (holes: views of their values, _holes.py)
        return parts or []
    offsets, row_offsets, sizes = st.lists()
    ops = nt.backend
    if row_offsets is not None:  # (a view of a regular dim's window: its strided rows)
        rows = view_source(nt._src) if nt._src is not None else view_source(nt._buf).reshape(
            (row_offsets[-1],) + st.rows()[1])
        parts = ops.split_rows(rows, row_offsets)
    else:
        parts = [p.reshape(s) for p, s in zip(ops.split_rows(view_source(nt._buf), offsets), sizes)]
    if nt._perm is None:
        return parts
    return [permute_view(ops, p, nt._perm) for p in parts]


def documents(nt):
    """The top-level entries (documents) of a nested tensor with outer levels, each a nested tensor one
    level shallower (views of the buffer)."""
    st = nt._struct
    buf = view_source(nt._buffer)
    out = []
    for i in range(st.count()):
        lo, hi, levels = st.top_slice(i, i + 1)
        a, b = int(st.offsets[lo]), int(st.offsets[hi])
        out.append(make(buf[a:b], Structure(st.sizes[lo:hi].copy(), outer=levels[1:], tail=st.tail), nt._layout))
    return tuple(out)


@unpickled_by
def _rebuild(buffer, sizes, layout, outer=(), hollow=None, jag=None):
    """Unpickle through a gate: a pickle is outside data, so its parts are checked like a constructor's."""
    where = "unpickling a NestedTensor"
    if layout not in ("strided", "jagged"):
        raise ShapeError(f"{where}: layout must be 'strided' or 'jagged', got {layout!r}")
    if getattr(buffer, "ndim", None) != 1 or not hasattr(buffer, "dtype"):
        raise TypeError(f"{where}: the buffer must be a 1-D array, got {type(buffer).__name__}")
    buffer = coerce_data(buffer, f"{where}: the buffer")  # an array library's, of a numeric or bool dtype
    st = Structure.checked(sizes, int(buffer.shape[0]), where, hollow, jag)
    if outer:  # the LoD gate: the levels must nest and end at the number of components
        st.outer = tuple(LoD([np.asarray(level) for level in outer], num_rows=st.n).levels)
    return make(buffer, st, layout)
