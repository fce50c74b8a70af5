"""LoDTensor: one flat data array plus a LoD, with Paddle's methods.

Rows of ``data`` (axis 0) are the items of the finest lod level. Indexing a
top-level sequence, slicing and iteration return views of ``data`` with a
rebased LoD; nothing is copied.
"""

import copy
import sys

import numpy as np

from . import _indexing
from . import place as _place
from ._compile import eager, eager_under_compile, mark_rows_dynamic, tracing
from ._conversions import ConversionsMixin
from ._data import host_array, plain_array, to_place
from ._format import tensor_repr
from ._nested_list import to_nested_list
from ._paddle_methods import PaddleMethods, raise_unfit, rows_of
from ._ufunc import UfuncMixin, host_view
from .backend import backend_name_of, backend_of, dtype_kind, get_backend
from .backend._pickle import portable, unpickled_by
from .lod import LoD
from .place import CPUPlace, Place, as_place, place_of

for _cls in (_place.CPUPlace, _place.CUDAPinnedPlace, _place.CUDAPlace, _place.DevicePlace):
    unpickled_by(_cls)  # a pickled LoDTensor's place rebuilds through its class (place.py sits below backend)

__all__ = ["LoDTensor"]

_EMPTY_LOD = LoD._from_valid(())
_NUMERIC_KINDS = frozenset("biufc")
_object_new = object.__new__
_CPU = CPUPlace()
_ndarray = np.ndarray
_modules = sys.modules


def _check_dtype(dtype, name):
    if dtype_kind(dtype) not in _NUMERIC_KINDS:
        raise TypeError(
            f"{name} must have a numeric or bool dtype (bool, integer, floating or complex), got {dtype}"
        )


def coerce_data(data, name="data"):
    """Return ``data`` as a backend array (no copy for arrays); check rank and dtype."""
    if isinstance(data, LoDTensor):
        data = data._require_data(name)
    if backend_name_of(data) is None:
        if data is None or isinstance(data, (str, bytes)):
            raise TypeError(f"{name} must be an array or a list of numbers, got {type(data).__name__} {data!r}")
        try:
            data = host_array(data)
        except ValueError:
            raise ValueError(
                f"{name} must be rectangular (one array of rows); for ragged nested lists "
                f"use lodtensor.from_nested_list()"
            ) from None
        if data.dtype == object:
            raise TypeError(
                f"{name} must be rectangular numbers; got an object array (ragged lists or "
                f"non-numbers). For ragged nested lists use lodtensor.from_nested_list()"
            )
    if getattr(data, "ndim", 0) == 0:
        raise ValueError(
            f"{name} must have at least 1 dimension (axis 0 holds the rows), got a 0-d "
            f"array {data!r}; wrap it as [value]"
        )
    _check_dtype(data.dtype, name)
    return plain_array(data, name)


def _wrap(data, lod, place):
    """A LoDTensor from parts that are valid together (no checks): the fast internal path.

    Only for parts made inside lodtensor from validated ones (kernel results,
    views of a tensor's own data); data from outside goes through the
    constructor, ``with_data`` or ``from_*``, which check it.
    """
    t = object.__new__(LoDTensor)  # (not the _object_new alias: torch 2.12's dynamo traces only this spelling)
    t._data = data
    t._lod = lod
    t._where = place
    return t


@unpickled_by
class LoDTensor(ConversionsMixin, UfuncMixin, PaddleMethods):
    """Flat data plus multi-level LoD, with Paddle's LoDTensor methods.

    Parameters
    ----------
    data : array (numpy, cupy, torch) or rectangular list, shape ``(num_rows, ...)``, optional
        The rows of the finest level. Not copied (unless ``place`` moves it).
        ``LoDTensor()`` with no data is an empty tensor, as in Paddle.
    lod : list of offset lists or LoD, optional
        Offsets per level, outermost first, e.g. ``[[0, 2, 5]]``.
    recursive_sequence_lengths : list of length lists, optional
        The same information as lengths, e.g. ``[[2, 3]]``; exclusive with ``lod``.
    place : Place or device string, optional
        Where the data lives; default: where it already is.

    Raises
    ------
    LoDError
        The lod breaks a rule or does not fit ``len(data)``.
    TypeError, ValueError
        Bad data (0-d, object or string dtype, ragged lists) or place.

    Examples
    --------
    >>> t = LoDTensor(np.arange(5), [[0, 2, 5]])
    >>> t.lod(), t.recursive_sequence_lengths(), t.shape()
    ([[0, 2, 5]], [[2, 3]], [5])
    >>> t[1].data.tolist(), len(t)
    ([2, 3, 4], 2)
    >>> (t * 10).tolist()
    [[0, 10], [20, 30, 40]]
    """

    # Whether the lod fits the rows is never stored: it is read off the data's shape and the
    # LoD's row count at every use (O(1)), so no pickle, ``set()`` or torch ``resize_`` can leave
    # a stale "fits" flag for the unchecked fast paths to trust.
    __slots__ = ("_data", "_lod", "_where", "__weakref__")

    def __new__(cls, *args, **kwargs):  # noqa: ARG004 - the empty tensor until __init__ runs (or torch's NEWOBJ)
        t = _object_new(cls)
        t._data, t._lod, t._where = None, _EMPTY_LOD, _CPU
        return t

    def __setstate__(self, state):  # pickle's and torch.load's BUILD: a subclass's own attributes (a dict of names),
        _set_attrs(self, state)  # never the slots (a LoDTensor's parts come through _rebuild, checked)

    def __init__(self, data=None, lod=None, *, recursive_sequence_lengths=None, place=None):
        if lod is not None and recursive_sequence_lengths is not None:
            raise TypeError("LoDTensor(): pass lod or recursive_sequence_lengths, not both")
        place = as_place(place)
        if data is None:
            self._data = None
            self._where = place or CPUPlace()
            num_rows = None
        else:
            array = coerce_data(data)
            self._data, self._where = to_place(array, place, copy=False)
            mark_rows_dynamic(self._data)  # torch data: a graph compiled for it takes any row count
            num_rows = int(self._data.shape[0])
        # the gate checks host offsets with NumPy: under torch.compile, eagerly behind a graph break
        if recursive_sequence_lengths is not None:
            self._lod = eager(LoD.from_lengths, recursive_sequence_lengths, num_rows=num_rows)
        elif lod is not None:
            self._lod = eager(LoD, lod, num_rows=num_rows)
        else:
            self._lod = _EMPTY_LOD

    # -- construction helpers ----------------------------------------------------------------
    @classmethod
    def from_offsets(cls, data, offsets):
        """A one-level LoDTensor from offsets ``[0, ..., len(data)]``; ``data`` is not copied.

        >>> LoDTensor.from_offsets(np.arange(5), [0, 2, 2, 5]).tolist()
        [[0, 1], [], [2, 3, 4]]
        """
        data = mark_rows_dynamic(coerce_data(data))  # for torch.compile: a graph for any row count
        lod = eager(LoD, [offsets], num_rows=int(data.shape[0]))  # the gate, eagerly under torch.compile
        return _wrap(data, lod, place_of(data, backend_of(data)))

    @classmethod
    def from_lengths(cls, data, lengths):
        """A one-level LoDTensor from per-sequence lengths; ``data`` is not copied.

        Equivalent to ``from_offsets(data, [0, *itertools.accumulate(lengths)])``.

        >>> LoDTensor.from_lengths(np.arange(5), [2, 0, 3]).tolist()
        [[0, 1], [], [2, 3, 4]]
        >>> LoDTensor.from_lengths(np.arange(5), [2, 2])
        Traceback (most recent call last):
        ...
        lodtensor.errors.LoDError: recursive_sequence_lengths level 0 must add up to len(data)=5, got sum=4
        """
        data = mark_rows_dynamic(coerce_data(data))  # for torch.compile: a graph for any row count
        lod = eager(LoD.from_lengths, [lengths], num_rows=int(data.shape[0]))  # eagerly under torch.compile
        return _wrap(data, lod, place_of(data, backend_of(data)))

    def with_data(self, data, lod=None):
        """A LoDTensor sharing this one's LoD (or ``lod``) around new rows ``data``; not copied.

        The rows must fit the LoD: ``len(data)`` must be where its last level ends.

        >>> t = LoDTensor(np.arange(5), [[0, 2, 5]])
        >>> t.with_data(np.arange(10).reshape(5, 2))[1].tolist()
        [[4, 5], [6, 7], [8, 9]]
        >>> t.with_data(np.arange(3))
        Traceback (most recent call last):
        ...
        lodtensor.errors.LoDError: with_data(): lod level 0 must end at len(data)=3, got offsets[-1]=5
        """
        data = coerce_data(data)
        rows = int(data.shape[0])
        if lod is None:
            lod = self._lod
        elif not isinstance(lod, LoD):
            lod = LoD(lod, num_rows=rows)
        lod.check_rows(rows, where="with_data()")
        return _wrap(mark_rows_dynamic(data), lod, place_of(data, backend_of(data)))  # dynamic rows: torch.compile

    # -- Paddle's methods --------------------------------------------------------------------
    def set(self, array, place=None, zero_copy=False):
        """Replace the data with a copy of ``array`` on ``place`` (Paddle's ``set``).

        The lod is kept; if it no longer fits, ``has_valid_recursive_sequence_lengths()`` is False and every
        op that reads the data by its sequences raises until a fitting lod is set (``t.numpy()`` still reads
        the flat data). With ``zero_copy=True`` the array is used without copying when it lives on ``place``.

        >>> t = LoDTensor()
        >>> t.set(np.arange(6.0).reshape(3, 2), CPUPlace())
        >>> t.shape(), t.place()
        ([3, 2], Place(cpu))
        """
        target = as_place(place)
        array = coerce_data(array, name="array")
        data, target = to_place(array, target, copy=not zero_copy)
        self._data, self._where = mark_rows_dynamic(data), target

    # -- Pythonic surface --------------------------------------------------------------------
    @property
    def data(self):
        """The flat backend array (``None`` for an empty tensor)."""
        return self._data

    @property
    def lod(self):
        """The :class:`LoD` object; calling it gives the offsets as lists, ``t.lod()`` -> ``[[0, 2, 5]]``."""
        return self._lod

    @property
    def dtype(self):
        return np.dtype(np.float32) if self._data is None else self._data.dtype

    @property
    def device(self):
        """The device string, ``"cpu"`` or ``"cuda:<i>"``."""
        return self._where.device

    @property
    def backend(self):
        """The backend (kernel set) of the data."""
        return backend_of(self._data) if self._data is not None else get_backend("numpy")

    @property
    def lod_level(self):
        """Number of lod levels."""
        return len(self._lod._levels)

    @property
    def ndim(self):
        return 1 if self._data is None else self._data.ndim

    @property
    def num_rows(self):
        return rows_of(self._data) or 0  # (0 for no data, or data made 0-d in place)

    @eager_under_compile  # reads the host offsets: eager, behind a graph break, under torch.compile
    def offsets(self, level=-1):
        """Offsets of ``level`` (int64, indexing the level below).

        >>> t = LoDTensor(np.arange(4), [[0, 2, 3], [0, 1, 1, 4]])
        >>> t.offsets().tolist(), t.offsets(0).tolist()
        ([0, 1, 1, 4], [0, 2, 3])
        """
        self._require_lod("offsets()")
        return self._lod.offsets(level)

    @eager_under_compile  # reads the host offsets: eager, behind a graph break, under torch.compile
    def lengths(self, level=-1):
        """Sequence lengths of ``level`` (int64).

        >>> t = LoDTensor(np.arange(4), [[0, 2, 3], [0, 1, 1, 4]])
        >>> t.lengths().tolist(), t.lengths(0).tolist()
        ([1, 0, 3], [2, 1])
        """
        self._require_lod("lengths()")
        return self._lod.lengths(level)

    def numpy(self):
        """The flat data as a NumPy array (a view when already on the host).

        >>> t = LoDTensor(np.arange(5), [[0, 2, 5]])
        >>> t.numpy().tolist(), np.shares_memory(t.numpy(), t.data)
        ([0, 1, 2, 3, 4], True)
        """
        return self.backend.to_numpy(self._require_data("numpy()"))

    def __array__(self, dtype=None, copy=None):
        if copy is False and self._data is not None and host_view(self._data, self.backend) is None:
            raise ValueError(f"Unable to avoid copy while creating an array as requested: the {self.dtype} data "
                             f"on {self.backend.device_of(self._data)} has no NumPy view")
        data = np.empty(0, np.float32) if self._data is None else self.backend.to_numpy(self._data)
        if copy:
            return np.array(data, dtype=dtype, copy=True)
        if self._data is not None and self.backend.requires_grad(self._data):  # autograd's memory: NumPy may read
            (data := data.view()).flags.writeable = False  # it, not write it (t.numpy() is the writable twin)
        if copy is False:  # NumPy's "never copy": its own error where a dtype change needs one
            return np.array(data, dtype=dtype, copy=False)
        return data if dtype is None else data.astype(dtype, copy=False)

    def __len__(self):
        if _modules.get("torch._dynamo") is not None and tracing():  # (inlined: a wrapper doubles the cost)
            return eager(LoDTensor.__len__, self)  # the host offsets: read behind a graph break
        levels = self._lod._levels
        if levels:
            return levels[0].shape[0] - 1
        return 0 if self._data is None else int(self._data.shape[0])

    def __getitem__(self, index):
        lod = self._lod
        data = self._data
        dynamo = _modules.get("torch._dynamo")  # while dynamo traces: the general path, behind a graph break
        if type(index) is int and data is not None and (dynamo is None or not tracing()) and data.ndim and (
            lod._rows == (len(data) if type(data) is _ndarray else data.shape[0])  # len(): cheaper for NumPy only
        ):
            # fast paths for one top-level sequence (the lod has levels and fits the rows)
            top = lod._top
            if top is None:
                top = lod._make_top()
            if top:  # a one-level tensor: its offsets as a list
                sublod = _EMPTY_LOD
                rows = top
            else:  # several levels: the LoD's cached split, once indexing has been repeated
                cache = lod._cache
                hit = cache.get("split") if cache is not None else None
                if hit is None:
                    hit = _indexing.split_for_indexing(lod)
                if hit is None:
                    rows = None
                else:
                    sublods, rows = hit
            if rows is not None:
                try:
                    if index >= 0:
                        start, stop = rows[index], rows[index + 1]
                    else:
                        start, stop = rows[index - 1], rows[index]
                except IndexError:
                    raise IndexError(
                        f"index {index} is out of range for {len(rows) - 1} top-level sequences"
                    ) from None
                t = _object_new(LoDTensor)
                t._data = data[start:stop]
                t._lod = sublod if top else sublods[index]
                t._where = self._where
                return t
        return eager(_indexing.getitem, self, index)  # under torch.compile: eager, behind a graph break

    def __iter__(self):
        return iter(self.unbind())

    def __bool__(self):
        # as NumPy and torch (not len() > 0): ``if t == u`` must not be True for any non-empty ``t``
        if self._data is None:
            raise ValueError("the truth value of a LoDTensor without data (LoDTensor() before set()) is undefined")
        size = int(np.prod(self._data.shape))
        if size != 1:
            raise ValueError(f"the truth value of a LoDTensor of {size} elements is ambiguous: use "
                             f"len(t) to count its sequences, or t.data.any() / t.data.all()")
        return bool(self._data)

    @eager_under_compile  # reads the host offsets: eager, behind a graph break, under torch.compile
    def unbind(self):
        """All top-level sequences as a list of views (one level shorter each).

        One vectorised pass per lod level, then slicing: no per-row work.

        >>> t = LoDTensor(np.arange(6), [[0, 2, 3], [0, 1, 1, 6]])
        >>> [(s.lod(), s.data.tolist()) for s in t.unbind()]
        [([[0, 1, 1]], [0]), ([[0, 5]], [1, 2, 3, 4, 5])]
        """
        t = copy.copy(self)  # the data and lod read once: another thread's set_lod() midway must not mix two lods
        levels = t._lod._levels
        data = t._check_fits("unbind()")
        if not levels:
            return list(data)
        place = t._where
        if len(levels) == 1:
            offs = t._lod.offsets_list(0)
            return [_wrap(data[a:b], _EMPTY_LOD, place) for a, b in zip(offs, offs[1:])]
        sublods, rows = t._lod.split_cached()
        return [_wrap(data[a:b], lod, place) for lod, a, b in zip(sublods, rows, rows[1:])]

    @eager_under_compile  # reads the host offsets: eager, behind a graph break, under torch.compile
    def tolist(self):
        """Nested Python lists following the lod levels (rows become lists too).

        >>> LoDTensor(np.arange(6), [[0, 2, 3], [0, 1, 1, 6]]).tolist()
        [[[0], []], [[1, 2, 3, 4, 5]]]
        >>> LoDTensor(np.arange(4).reshape(2, 2), [[0, 0, 2]]).tolist()
        [[], [[0, 1], [2, 3]]]
        """
        t = copy.copy(self)  # the data and lod read once (another thread may set_lod() or set() midway)
        data = t._check_fits("tolist()")
        return to_nested_list(t.backend.to_numpy(data).tolist(), t._lod._levels)

    to_list = tolist

    # -- python protocol ---------------------------------------------------------------------
    @eager_under_compile  # reads the host offsets: eager, behind a graph break, under torch.compile
    def __repr__(self):
        return tensor_repr(self)

    __str__ = __repr__

    def __reduce__(self):
        data, lod, where = self._data, self._lod, self._where  # one state, read before any call (set() elsewhere)
        attrs = getattr(self, "__dict__", None)  # a subclass's own attributes, as the state (set once the tensor
        args = (type(self), portable(data), lod, where)  # exists: one referring back to it pickles and deep-copies)
        return (_rebuild, args, dict(attrs)) if attrs else (_rebuild, args)

    def __deepcopy__(self, memo):
        if getattr(self._data, "grad_fn", None) is not None:  # as torch and NestedTensor: graph leaves only
            raise RuntimeError("Only LoDTensors whose torch data is a graph leaf support the deepcopy protocol "
                               "(as torch's tensors); detach() the data first: t.with_data(t.data.detach())")
        fn, args, *state = self.__reduce__()
        memo[id(self)] = out = fn(*copy.deepcopy(args, memo))
        if state:  # (after the memo entry: an attribute may refer back to this tensor)
            out.__setstate__(copy.deepcopy(state[0], memo))
        return out

    def __copy__(self):
        t = object.__new__(type(self))  # a subclass (fluid's LoDTensor) stays itself (not _object_new: see _wrap)
        t._data, t._lod, t._where = self._data, self._lod, self._where
        if getattr(self, "__dict__", None):
            t.__dict__.update(self.__dict__)
        return t

    # -- internal ----------------------------------------------------------------------------
    @classmethod
    def _attach(cls, **methods):
        """Install methods that an upper layer defines (interop, nested, text...).

        Each is a plain function whose first argument is the tensor. The core
        never imports the layers above it; they attach their methods when
        ``lodtensor`` is imported, so arrows in the import graph only point down.
        """
        for name, fn in methods.items():
            if name in cls.__dict__ and cls.__dict__[name] is not fn:
                raise RuntimeError(f"LoDTensor.{name} is already defined; an upper layer cannot replace it")
            setattr(cls, name, fn)

    def _new(self, data, lod, place=None):
        """A LoDTensor of parts valid together (no checks), on this tensor's place unless ``place`` is given."""
        return _wrap(data, lod, self._where if place is None else place)

    def _require_data(self, what):
        if self._data is None:
            raise ValueError(f"{what}: the LoDTensor holds no data yet; call set(array, place) first")
        return self._data

    def _require_lod(self, what):
        if not self._lod._levels:
            raise IndexError(f"{what}: the tensor has no lod (lod_level 0); set_lod() first")

    def _check_fits(self, what="this operation"):
        """The data, after checking that there is some and that the lod fits its rows (O(1))."""
        data = self._data
        if data is None:
            self._require_data(what)
        rows = self._lod._rows
        if rows is not None and rows != (data.shape[0] if data.ndim else None):  # (0-d: shaped so in place)
            raise_unfit(self._lod, data, what)
        return data


@unpickled_by
def _rebuild(cls, data, lod, place, fits=None):
    """Unpickle through the gate: a pickle is outside data, so the class, the LoD (its validating
    constructor), the data (an array of a numeric dtype) and the place (where the data is) are checked.
    Whether the lod fits is derived again (``fits``, from older versions, is ignored)."""
    if not (isinstance(cls, type) and issubclass(cls, LoDTensor)):
        raise TypeError(f"unpickling a LoDTensor: expected a LoDTensor class, got {cls!r}")
    if not isinstance(lod, LoD):
        lod = LoD(lod)
    if not isinstance(place, Place):  # (a place pickles through its checking constructor; its state can't be set)
        raise TypeError(f"unpickling a LoDTensor: place must be a Place, got {type(place).__name__} {place!r:.80}")
    t = _object_new(cls)
    if data is not None:
        data = coerce_data(data, name="unpickled data")
        if place_of(data, backend_of(data)).device != place.device:
            place = place_of(data, backend_of(data))
    t._data, t._lod, t._where = data, lod, place
    return t


def _set_attrs(t, attrs):  # a subclass instance's own attributes from a pickle (names only; never the slots)
    if not (isinstance(attrs, dict) and all(type(k) is str for k in attrs) and hasattr(t, "__dict__")):
        raise TypeError(f"unpickling a LoDTensor: refusing to set its state directly: attributes must be a dict of "
                        f"names for a subclass, got {type(attrs).__name__} {attrs!r:.60} for {type(t).__name__}")
    t.__dict__.update(attrs)
