"""The size table of a nested tensor (``Structure``) and the dim checks shared by its ops."""

import warnings

import numpy as np

from .._validate import _integer_array
from ..backend import backend_of
from ..errors import ShapeError
from ..lod import LoD
from ._symbolic import ragged_size

__all__ = ["Structure", "normalize_dim", "op_dim", "implicit_dim", "one_level", "same_levels", "hollow_dims",
           "moved_jag", "dropped_jag"]

_INT64 = np.dtype(np.int64)
_KEEP = object()


_SPAN_LIMIT = 2**59  # no array of any dtype (up to 16 bytes per item) spans this many positions


def _too_large(flat):
    """Per row of the non-negative int64 table ``flat``: whether the product of its entries (zeros read as
    ones) reaches :data:`_SPAN_LIMIT`; exact, one pass per column, no int64 wraparound (a product that
    would pass the limit is never formed)."""
    span = np.ones(flat.shape[0], dtype=_INT64)
    big = np.zeros(flat.shape[0], dtype=bool)
    for j in range(flat.shape[1]):  # per component dim (a few), vectorised over the components
        factor = np.maximum(flat[:, j], 1)
        big |= span > (_SPAN_LIMIT - 1) // factor  # span * factor >= limit, decided without forming it
        span = np.where(big, 1, span * np.where(big, 1, factor))
    return big


def _exact_sum(values):
    """The exact sum of non-negative int64 ``values`` below 2**59 each, as a Python int (no wraparound:
    the high and low 32 bits are summed apart)."""
    high = int((values >> 32).sum())
    low = int((values & 0xFFFFFFFF).sum())
    return (high << 32) + low


class Structure:
    """Sizes and offsets of a nested tensor's components, its outer ragged levels, and facts derived from
    them (cached).

    The ragged structure is a stack of partitions, as TensorFlow's ``RowPartition``s compose: ``outer``
    holds the LoD levels above the components, outermost first (documents -> sentences: one level whose
    offsets index the components), each a read-only int64 offsets array; the size table partitions each
    component. A nested tensor has ``1 + len(outer)`` leading dims before the component dims: ``(documents,
    (sentences), (words), hidden)`` is one outer level over components ``(words, hidden)``. Op code maps
    a user's dim through :func:`op_dim`, so every op written for components works on any number of outer
    levels, and results built with :meth:`derive` keep them.

    Results with the same shape as their input share its Structure, so its
    cached facts (regular dims, row offsets, Python lists for unbind) are
    computed once per batch, not once per op.

    Two facts are plain Python values, known without reading the size table:
    ``rank`` (dims per component) and ``tail`` (the sizes of component dims
    1.. when every component has the same ones, else None: the row shape of
    the LoD case). The ops that ``torch.compile`` traces read only these, so
    LoD metadata never enters a traced graph; a Structure made there is
    *lazy* (:meth:`derived`, :meth:`from_jagged`): its size table is computed
    from its source on first use, outside the graph.
    """

    __slots__ = ("_sizes", "_offsets", "_source", "rank", "tail", "outer", "_regular", "_rows", "_lists", "_lod",
                 "_dims", "root", "hollow", "jag")

    def __init__(self, sizes, offsets=None, outer=(), tail=None, hollow=None, jag=None):
        sizes = np.asarray(sizes, dtype=_INT64)
        self._set(sizes, offsets)
        self._source = None
        self.outer = outer
        self.rank = sizes.shape[1]
        self.jag = _jag_axis(jag, self.rank)
        rest = sizes[:, 1:]
        self.hollow = None
        if sizes.shape[0]:
            self.tail = tuple(int(v) for v in rest[0]) if self.rank and (rest == rest[:1]).all() else None
            if self.jag:  # the jagged dim is ragged whatever its sizes: no row shape past it
                self.tail = None
        else:  # no component to read the dims from: ``tail`` (the source's row shape) or ``hollow`` gives them
            self.hollow = hollow_dims(self.rank, tail, hollow)
            known = self.hollow is not None and self.hollow[0] is None and None not in self.hollow[1:]
            self.tail = self.hollow[1:] if known else None
        self._regular = None
        self._rows = None
        self._lists = None
        self._lod = None
        self._dims = None
        self.root = self

    def _set(self, sizes, offsets):
        if offsets is None:
            numel = sizes.prod(axis=1) if sizes.shape[1] else np.ones(sizes.shape[0], _INT64)
            offsets = np.zeros(sizes.shape[0] + 1, dtype=_INT64)
            np.cumsum(numel, out=offsets[1:])
        sizes.setflags(write=False)
        offsets.setflags(write=False)
        self._sizes = sizes
        self._offsets = offsets

    @classmethod
    def _lazy(cls, source, rank, tail, outer=(), jag=None):
        st = object.__new__(cls)
        st._sizes = st._offsets = None
        st._source = source
        st.rank = rank
        st.jag = jag = _jag_axis(jag, rank)
        st.tail = None if jag else tail
        st.hollow = None if tail is None else (None, *tail)  # (used only when the table has no row)
        st.outer = outer
        st._regular = st._rows = st._lists = st._lod = st._dims = None
        st.root = st
        return st

    @classmethod
    def derived(cls, parent, recipe, args, rank, tail, same_numel=True):
        """A lazy Structure: ``recipe(parent.sizes, *args)`` is its size table (``args`` Python values); the
        element offsets are ``parent``'s when ``same_numel``. ``rank`` and ``tail`` are given (known from
        ``parent``'s and ``args``). The recipes change regular dims only, so the components keep
        ``parent``'s lengths: ``root`` (the first structure of that lineage) says so without the table."""
        jag = parent.jag if rank == parent.rank else None
        st = cls._lazy(("derived", parent, recipe, args, same_numel), rank, tail, parent.outer, jag)
        st.root = parent.root
        return st

    @classmethod
    def from_jagged(cls, offsets, row_shape):
        """A lazy Structure of components ``(length, *row_shape)`` whose row offsets are the int64 tensor
        ``offsets`` (checked through the LoD gate when the table is first needed); the lengths are the
        jagged dim (``jag`` 0)."""
        return cls._lazy(("jagged", offsets, tuple(row_shape)), 1 + len(row_shape), tuple(row_shape), jag=0)

    def with_jag(self, jag):
        """This Structure with component axis ``jag`` as the jagged layout's ragged dim (None: none), which is
        ragged whatever its sizes (torch's jagged ``(2, j1, 3)`` of equal lengths); ``self`` when it has it."""
        jag = _jag_axis(jag, self.rank)
        if jag == self.jag:
            return self
        if self._sizes is None:  # lazy (torch.compile): stay lazy
            st = Structure._lazy(self._source, self.rank, self.tail, self.outer, jag)
            if jag is None and self.jag:  # the row shape past the old jagged dim is not known without the table
                st.tail = None
            st.root = self.root
            return st
        return Structure(self.sizes, self.offsets, self.outer, self.tail, self.hollow, jag)

    def for_layout(self, layout):
        """This Structure for a tensor of ``layout``: on the jagged layout one component dim is the ragged one
        (where no op said which, :meth:`default_jag`), on the strided layout none is."""
        return self.with_jag(self.default_jag() if layout == "jagged" else None)

    def default_jag(self):
        """The jagged dim a jagged-layout tensor of this table has when no op said: the one irregular axis,
        else the first (torch's dim 1); None without component dims."""
        if not self.rank:
            return None
        if self._sizes is None:
            return self.jag if self.jag is not None else 0
        irregular = [a for a, r in enumerate(self._value_regular()) if not r]
        return irregular[0] if len(irregular) == 1 else (self.jag if self.jag is not None else 0)

    def _resolve(self):
        kind, *rest = self._source
        if kind == "derived":
            parent, recipe, args, same_numel = rest
            sizes = np.asarray(recipe(parent.sizes, *args), dtype=_INT64)
            self._set(sizes.copy() if sizes.base is not None else sizes, parent.offsets if same_numel else None)
        else:
            offsets, row_shape = rest
            host = backend_of(offsets).to_numpy(offsets)
            lod = LoD([host])  # the gate: offsets made in a compiled graph are checked like any others
            rows = lod.offsets(0)
            sizes = np.empty((rows.size - 1, 1 + len(row_shape)), dtype=_INT64)
            sizes[:, 0] = np.diff(rows)
            sizes[:, 1:] = row_shape
            self._set(sizes, None)
            self._rows = (rows, row_shape)
        self._source = None

    @property
    def sizes(self):
        """The size table: one row per component, one column per component dim (int64, read-only)."""
        if self._sizes is None:
            self._resolve()
        return self._sizes

    @property
    def offsets(self):
        """Element offsets of the components in the buffer (int64, read-only)."""
        if self._offsets is None:
            self._resolve()
        return self._offsets

    @classmethod
    def uniform(cls, n, shape):
        """``n`` components of the same ``shape``."""
        sizes = np.empty((n, len(shape)), dtype=_INT64)
        sizes[:] = shape
        step = int(np.prod(shape, dtype=np.int64))
        return cls(sizes, np.arange(n + 1, dtype=_INT64) * step, tail=tuple(shape[1:]))

    @classmethod
    def of_rows(cls, lengths, row_shape, outer=()):
        """Components ``(lengths[i], *row_shape)``: the LoD case (no component: the row shape is kept)."""
        lengths = np.asarray(lengths, dtype=_INT64)
        sizes = np.empty((lengths.size, 1 + len(row_shape)), dtype=_INT64)
        sizes[:, 0] = lengths
        sizes[:, 1:] = row_shape
        return cls(sizes, None, outer, tuple(int(s) for s in row_shape))

    @classmethod
    def checked(cls, sizes, numel, where, hollow=None, jag=None):
        """The Structure of a size table from outside (a pickle), checked to hold exactly ``numel`` elements
        (``hollow``: the dims of no component, checked by :func:`hollow_dims`; ``jag``: the jagged dim)."""
        table = np.asarray(sizes)
        if table.ndim != 2:
            raise ValueError(f"{where}: sizes must be a 2-D table, got shape {table.shape}")
        flat = _integer_array(table.reshape(-1), "unpickled sizes").reshape(table.shape)
        if flat.size and flat.min() < 0:
            raise ValueError(f"{where}: sizes must be >= 0, got {flat.min()}")
        if _too_large(flat).any():  # no array of any dtype (up to 16 bytes) can have such a shape
            spans = [int(np.prod([max(int(v), 1) for v in row], dtype=object)) for row in flat.tolist()]  # exact
            i = spans.index(max(spans))
            raise ValueError(
                f"{where}: component {i} has shape {tuple(flat[i].tolist())}, larger than any array can be"
            )
        total = _exact_sum(flat.prod(axis=1) if flat.shape[1] else np.ones(flat.shape[0], _INT64))
        if total != numel:
            raise ValueError(f"{where}: the sizes hold {total} elements, the buffer {numel}")
        if hollow is not None and (flat.shape[0] or not isinstance(hollow, tuple) or not all(
                s is None or isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in hollow)):
            raise ValueError(f"{where}: hollow must be None, or a tuple of ints and None for no component, got "
                             f"{hollow!r}")
        if jag is not None and (isinstance(jag, bool) or not isinstance(jag, (int, np.integer))
                                or not 0 <= jag < flat.shape[1]):
            raise ValueError(f"{where}: jag must be None or a component dim (0 to {flat.shape[1] - 1}), got {jag!r}")
        return cls(flat.copy(), hollow=hollow, jag=jag)

    @property
    def n(self):
        return self.sizes.shape[0]

    @property
    def numel(self):
        return int(self.offsets[-1])

    @property
    def regular(self):
        """Per component dim: True where every component has the same size, except the jagged dim (``jag``,
        a jagged-layout tensor's ragged dim), never regular where there is a component."""
        reg = self._regular
        if reg is None:
            reg = self._value_regular()
            if self.jag is not None and self.sizes.shape[0]:  # the jagged dim: ragged even where sizes agree
                reg = tuple(False if a == self.jag else r for a, r in enumerate(reg))
            self._regular = reg
        return reg

    def _value_regular(self):
        """Per component dim: whether every component has the same size (the jagged dim not considered)."""
        sizes = self.sizes
        reg = (sizes == sizes[:1]).all(axis=0) if sizes.shape[0] else np.ones(sizes.shape[1], bool)
        return tuple(bool(r) for r in reg)

    @property
    def is_lod(self):
        """True when only the first component dim may be ragged (a one-level LoD over rows)."""
        return self.tail is not None

    def dim_sizes(self):
        """Per component dim: its size (an int) when regular, else its :class:`RaggedSize` (cached)."""
        dims = self._dims
        if dims is None:
            if self.n == 0:  # torch's jagged layout: (0, j1, *row_shape) when the dims are known
                hollow = self.hollow or (0,) * self.rank
                dims = tuple(ragged_size(self.sizes[:, 0]) if s is None else s for s in hollow)
            else:
                dims = tuple(int(self.sizes[0, a]) if r else ragged_size(self.sizes[:, a])
                             for a, r in enumerate(self.regular))
            self._dims = dims
        return dims

    def rows(self):
        """``(row_offsets, row_shape)`` of the LoD case (cached)."""
        rows = self._rows
        if rows is None:
            offsets = np.zeros(self.n + 1, dtype=_INT64)
            np.cumsum(self.sizes[:, 0], out=offsets[1:])
            offsets.setflags(write=False)
            rows = self._rows = (offsets, self.tail)
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
            if self.n:
                tail = tuple(int(s) for s in self.sizes[0, axis:])
            elif self.hollow is not None and None not in self.hollow[axis:]:
                tail = self.hollow[axis:]
            else:
                tail = (0,) * (self.rank - axis)
        rows = int(self.sizes[:, :axis].prod(axis=1).sum()) if axis else self.n
        return buffer.reshape((rows,) + tail)

    def derive(self, sizes, offsets=None, tail=None, hollow=None, jag=_KEEP):
        """A Structure of the same components and outer levels with size table ``sizes`` (an op's result);
        ``tail`` or ``hollow``: its dims when there is no component (see :func:`hollow_dims`); ``jag``: its
        jagged dim (by default this one's when the rank stays, else None: ``make`` then picks one)."""
        if jag is _KEEP:
            jag = self.jag if np.shape(sizes)[1] == self.rank else None
        return Structure(sizes, offsets, self.outer, tail, hollow, jag)

    def same_as(self, other):
        return self is other or (
            self.sizes.shape == other.sizes.shape and bool(np.array_equal(self.sizes, other.sizes))
            and same_levels(self.outer, other.outer)
        )

    def count(self):
        """The size of dim 0: outer sequences at the top level, or components when there is none."""
        return int(self.outer[0].size - 1) if self.outer else self.n

    def top_slice(self, lo, hi):
        """``(first component, end component, outer levels)`` of the top-level entries ``lo:hi`` (rebased)."""
        levels = []
        for offsets in self.outer:
            part = offsets[lo : hi + 1]
            levels.append(_frozen(part - part[0]))
            lo, hi = int(part[0]), int(part[-1])
        return lo, hi, tuple(levels)


def _jag_axis(jag, rank):
    """``jag`` checked as a component axis (None: no jagged dim; also for components of no dim)."""
    if jag is None or not rank:
        return None
    jag = int(jag)
    if not 0 <= jag < rank:
        raise ValueError(f"the jagged dim of components of rank {rank} must be in [0, {rank}), got {jag}")
    return jag


def moved_jag(plan, jag):
    """The jagged dim after a regroup ``plan`` (see ``_permute.regroup``): where its ``("keep", jag)`` went,
    counting the dims a ``("split", a, sizes)`` before it makes."""
    if jag is None:
        return None
    position = 0
    for step in plan:
        if step[0] == "keep" and step[1] == jag:
            return position
        position += len(step[2]) if step[0] == "split" else 1
    return None


def dropped_jag(jag, axis):
    """The jagged dim after component axis ``axis`` goes (None when it was the jagged one)."""
    if jag is None or jag == axis:
        return None
    return jag - 1 if jag > axis else jag


def hollow_dims(rank, tail=None, hollow=None):
    """The component dims of a Structure of no component (torch's ``(0, j1, 3)``): per dim its size, None
    where it is ragged. From ``hollow`` itself, or from ``tail`` (the row shape its maker knows: dim 1
    ragged); rank 1 is ``(None,)``; None when not known (rank 0, or no row shape given)."""
    if rank == 0:
        return None
    if hollow is None:
        if tail is None and rank != 1:
            return None
        hollow = (None, *(tail or ()))
    hollow = tuple(None if s is None else int(s) for s in hollow)
    if len(hollow) != rank or any(s is not None and s < 0 for s in hollow):
        raise ValueError(f"the dims of components of rank {rank} must be {rank} sizes >= 0 (None: ragged), "
                         f"got {hollow}")
    return hollow


def same_levels(a, b):
    """Whether two tuples of outer levels are equal."""
    return a is b or (len(a) == len(b) and all(x is y or np.array_equal(x, y) for x, y in zip(a, b)))


def _frozen(a):
    a = np.ascontiguousarray(a, dtype=_INT64)
    a.setflags(write=False)
    return a


def op_dim(nt, dim, where, extra=0):
    """``dim`` of ``nt`` (of ``nt.dim() + extra`` dims, for ops that insert one) in the numbering that op
    code uses for components: 0 the component index, 1.. the component dims. With outer levels (two ragged
    dims), dim 0 (the documents) and the outer ragged dims refuse: an op defined per component runs on
    the components' own dims."""
    levels = len(nt._st.outer)
    d = normalize_dim(dim, nt.dim() + extra)
    if not levels:
        return d
    if d == 0:
        raise ShapeError(f"{where}: dim 0 (the documents) is the batch dim of a nested tensor with two ragged dims")
    if d <= levels:
        raise ShapeError(
            f"{where}: dim {d} is an outer ragged dim (the sentences of each document) of a nested tensor with two "
            f"ragged dims; the op is defined per sentence (dims {levels + 1} and up): pool the words first"
        )
    return d - levels


def implicit_dim(name, ndim, stacklevel=4):
    """torch's legacy dim for ``softmax``/``log_softmax``/``softmin`` called without one (``F._get_softmax_dim``):
    0 for 0, 1 or 3 dims, else 1, with its deprecation warning (``name`` the op's)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as "
                  f"an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def one_level(nt, where):
    """Refuse a whole-shape op (its arguments describe every dim) on a nested tensor with outer levels."""
    if nt._st.outer:
        raise ShapeError(f"{where} is not defined for a nested tensor with two ragged dims; unbind() the documents")


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
