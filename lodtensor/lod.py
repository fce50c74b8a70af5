"""LoD metadata: offsets levels, their validation, and level algebra.

A LoD ("level of details") is a tuple of int64 offset arrays, outermost level
first. Level ``k`` has ``num_sequences(k) + 1`` entries, starts at 0, never
decreases and ends at the number of sequences of level ``k + 1``; the last
level ends at the number of data rows. The host (NumPy) arrays are the source
of truth; they live in frozen memory (see :mod:`lodtensor._validate`) that no
NumPy call can make writable, so one ``LoD`` can be shared by many tensors and
every array it hands out is safe to keep.

Everything here is vectorised: loops run over levels (there are few), never
over sequences or rows.
"""

import operator
import sys
import weakref
from functools import partial

import numpy as np

from ._cache import ByteLRU
from ._compile import compiling, eager, eager_under_compile
from ._format import preview
from ._level import _normalize_level, concat_ranges, lengths_to_offsets, offsets_to_lengths, offsets_to_segment_ids
from ._lod_algebra import LevelAlgebra
from ._validate import _per_level, as_lengths, as_offsets, check_levels, freeze, offsets_from_lengths
from .backend._pickle import unpickled_by
from .backend._placement import mark_frozen
from .errors import LoDError

__all__ = [
    "LoD",
    "lengths_to_offsets",
    "offsets_to_lengths",
    "offsets_to_segment_ids",
    "as_offsets",
    "as_lengths",
    "concat_ranges",
    "MAX_LOD_LEVELS",
]

_INT64 = np.dtype(np.int64)
_object_new = object.__new__
# Plans derived from one LoD (padding indices...) are kept up to this many bytes, or four times
# the bytes of one row index, whichever is more; the least recently used go first.
_PLAN_BUDGET = 64 << 20

#: The deepest LoD there is: 32 levels. Real hierarchies use a handful (document -> paragraph
#: -> sentence -> word is 3); the formats a LoD travels through stop not far above: Parquet
#: readers refuse a schema nested past 100 nodes (49 list levels), Arrow IPC readers past 64
#: (63 list levels), and pyarrow overflows its stack building a type 10,000-20,000 levels
#: deep. 32 levels leave room for trailing row dimensions under both readers' limits, so a
#: LoD that exists can always be saved, sent and read back. Every LoD is checked against it.
MAX_LOD_LEVELS = 32


def _check_depth(n, name="lod"):
    if n > MAX_LOD_LEVELS:
        raise LoDError(
            f"{name} has {n} levels; a LoD has at most MAX_LOD_LEVELS={MAX_LOD_LEVELS} "
            f"(Arrow and Parquet readers refuse deeper nesting)"
        )


#: The host arrays ``LoD.on`` can place on a device, by name: ``build(lod, level)``.
_ON_HOST = {
    "offsets": lambda lod, k: lod.offsets(k),
    "absolute_offsets": lambda lod, k: lod.absolute_offsets(k),
    "segment_ids": lambda lod, k: lod.segment_ids(k),
    "lengths": lambda lod, k: lod.lengths(k),
    "absolute_lengths": lambda lod, k: np.diff(lod.absolute_offsets(k)),
    "sqrt_lengths": lambda lod, k: np.sqrt(np.diff(lod.absolute_offsets(k))),
    "empty": lambda lod, k: lod.absolute_offsets(k)[1:] == lod.absolute_offsets(k)[:-1],
}


def _longest_of(ref):  # of the offsets array ``ref`` refers to (alive: its fact is asked for through it)
    return _longest(ref())


def _longest(offsets):
    """The most rows between two neighbouring offsets (0 for none); valid ones: no wrap, and no np.diff overhead."""
    return int((offsets[1:] - offsets[:-1]).max()) if offsets.size > 1 else 0


def _make(arrays):
    """A LoD over frozen, valid int64 arrays (no checks but the depth, no copies)."""
    _check_depth(len(arrays))
    self = _object_new(LoD)
    self._levels = arrays
    self._rows = int(arrays[-1][-1]) if arrays else None
    self._cache = None
    self._top = None
    self._plans = None
    return self


def _frozen(arr):
    """``arr`` frozen (a copy unless it already is), for the caches a LoD hands out."""
    return freeze(np.asarray(arr))


class LoD(LevelAlgebra):
    """Immutable multi-level offsets (Paddle's LoD), outermost level first.

    Calling a LoD returns its offsets as lists, so ``t.lod()`` reads as in Paddle.

    Parameters
    ----------
    levels : sequence of 1-D integer array-likes
        Offsets per level, e.g. ``[[0, 2, 3], [0, 2, 5, 6]]``. Copied to int64.
    num_rows : int, optional
        Number of data rows; when given, the last level must end there.
    copy : bool
        Default True: the offsets are copied into frozen memory, then checked.
        False shares int64 arrays instead (for buffers nobody writes, such as
        Arrow's); they are checked all the same.

    Raises
    ------
    LoDError
        A rule is broken; the message names the level, the index and the value.
        More than :data:`MAX_LOD_LEVELS` (32) levels.
    TypeError
        Offsets that are not integers (floats, bools, ragged input).

    Examples
    --------
    >>> lod = LoD([[0, 2, 3], [0, 2, 5, 6]])
    >>> lod()
    [[0, 2, 3], [0, 2, 5, 6]]
    >>> lod.lengths(0).tolist(), lod.num_rows
    ([2, 1], 6)
    >>> lod.absolute_offsets(0).tolist()
    [0, 5, 6]
    >>> LoD([[0, 2, 3], [0, 2, 5]])
    Traceback (most recent call last):
    ...
    lodtensor.errors.LoDError: lod level 0 must end at the number of sequences in level 1 (2), got offsets[-1]=3
    """

    __slots__ = ("_levels", "_rows", "_cache", "_top", "_plans", "__weakref__")
    __array_ufunc__ = None  # ``array == lod`` defers to ``LoD.__eq__`` (not NumPy's entry-by-entry comparison)

    def __init__(self, levels=(), *, num_rows=None, copy=True):
        if sys.modules.get("torch._dynamo") is not None and compiling():  # the gate's NumPy: eager, graph break
            eager(LoD.__init__, self, levels, num_rows=num_rows, copy=copy)
            return
        if isinstance(levels, (str, bytes, dict)):
            raise TypeError(
                f"lod must be a list of offset lists (one per level), got {type(levels).__name__} {_short(levels)}"
            )
        if num_rows is not None:
            num_rows = _count(num_rows, "num_rows")
        if isinstance(levels, LoD):
            arrays = levels._levels
        else:
            levels = _per_level(levels, "lod", "offset")
            _check_depth(len(levels))
            arrays = tuple(as_offsets(level, level=k, name="lod", copy=copy) for k, level in enumerate(levels))
        check_levels(arrays, num_rows)
        self._levels = arrays
        self._rows = int(arrays[-1][-1]) if arrays else None
        self._cache = None
        self._top = None
        self._plans = None

    @classmethod
    def _from_valid(cls, arrays):
        """Wrap int64 arrays that are valid by construction (no checks; frozen, so copied unless they are)."""
        return _make(tuple(_frozen(a) for a in arrays))

    @classmethod
    def _from_frozen(cls, arrays):
        """Wrap frozen, valid int64 arrays as they are (no checks but the depth, no copies)."""
        return _make(tuple(arrays))

    def _make_top(self):
        """The offsets of a one-level LoD as a list (False for other depths), kept for ``t[i]``."""
        self._top = self._levels[0].tolist() if len(self._levels) == 1 else False
        return self._top

    def _cached(self):
        cache = self._cache
        if cache is None:
            cache = self._cache = {}
        return cache

    @classmethod
    @eager_under_compile  # the gate runs on the host: under torch.compile, behind a graph break
    def from_lengths(cls, lengths, *, num_rows=None):
        """Build a LoD from per-level sequence lengths (Paddle's recursive_sequence_lengths).

        >>> LoD.from_lengths([[2, 1], [2, 3, 1]])()
        [[0, 2, 3], [0, 2, 5, 6]]
        """
        if isinstance(lengths, (str, bytes, dict)):
            raise TypeError(
                f"recursive_sequence_lengths must be a list of length lists (one per level), got "
                f"{type(lengths).__name__} {_short(lengths)}"
            )
        if num_rows is not None:
            num_rows = _count(num_rows, "num_rows")
        lengths = _per_level(lengths, "recursive_sequence_lengths", "length")
        _check_depth(len(lengths), "recursive_sequence_lengths")
        name = "recursive_sequence_lengths"
        arrays = [
            offsets_from_lengths(as_lengths(lv, level=k, name=name), level=k, name=name) for k, lv in enumerate(lengths)
        ]
        check_levels(arrays, num_rows, name=name)
        return _make(tuple(arrays))

    @classmethod
    def _from_valid_lengths(cls, lengths):
        """A LoD from per-level lengths that are valid by construction (no checks)."""
        return _make(tuple(_frozen(lengths_to_offsets(lv)) for lv in lengths))

    # -- basic facts -------------------------------------------------------------------------
    @property
    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def levels(self):
        """The offsets arrays, outermost first (read-only int64)."""
        return self._levels

    @property
    def num_levels(self):
        return len(self._levels)

    def __len__(self):
        return len(self._levels)

    @property
    def num_rows(self):
        """Rows the finest level indexes (``None`` for an empty LoD)."""
        return self._rows

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def num_sequences(self, level=0):
        """Number of sequences at ``level`` (0, the default, is the outermost).

        >>> LoD([[0, 2, 3], [0, 1, 1, 4]]).num_sequences(), LoD([[0, 2, 3], [0, 1, 1, 4]]).num_sequences(1)
        (2, 3)
        """
        return self._levels[_normalize_level(level, len(self._levels))].size - 1

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def offsets(self, level=-1):
        """Offsets of ``level``, indexing the level below it (read-only int64).

        >>> lod = LoD([[0, 2, 3], [0, 1, 1, 4]])
        >>> lod.offsets().tolist(), lod.offsets(0).tolist(), lod.offsets().flags.writeable
        ([0, 1, 1, 4], [0, 2, 3], False)
        """
        return self._levels[_normalize_level(level, len(self._levels))]

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def lengths(self, level=-1):
        """Per-sequence lengths of ``level`` (read-only int64, cached).

        >>> lod = LoD([[0, 2, 3], [0, 1, 1, 4]])
        >>> lod.lengths().tolist(), lod.lengths(0).tolist()
        ([1, 0, 3], [2, 1])
        """
        level = _normalize_level(level, len(self._levels))
        key = ("lengths", level)
        out = self._cached().get(key)
        if out is None:
            out = self._cache[key] = _frozen(np.diff(self._levels[level]))
        return out

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def absolute_offsets(self, level=-1):
        """Offsets of ``level`` expressed in data rows (composed through the finer levels).

        >>> LoD([[0, 1, 2], [0, 2, 2]]).absolute_offsets(0).tolist()
        [0, 2, 2]
        """
        level = _normalize_level(level, len(self._levels))
        key = ("absolute", level)
        out = self._cached().get(key)
        if out is None:
            out = self._levels[level]
            for finer in self._levels[level + 1 :]:
                out = finer[out]
            out = self._cache[key] = _frozen(out)
        return out

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def head(self, k):
        """The LoD of the first ``k`` levels (the same frozen arrays), one object per ``k``, cached: results
        that keep the outer levels (pooling a level away) share it, and its device copies with it.

        >>> lod = LoD([[0, 1, 3], [0, 2, 2, 5]])
        >>> lod.head(1)(), lod.head(1) is lod.head(1), lod.head(2) is lod
        ([[0, 1, 3]], True, True)
        """
        if k == len(self._levels):
            return self
        key = ("head", k)
        out = self._cached().get(key)
        if out is None:
            out = self._cache.setdefault(key, _make(self._levels[:k]))  # threads at once: all get the one kept
        return out

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def empty_rows(self, level=-1):
        """How many sequences of ``level`` hold no data row (cached: op code asks per call, and a
        pass over millions of offsets per call would cost more than the kernels).

        >>> LoD([[0, 1, 3], [0, 2, 2, 5]]).empty_rows(0), LoD([[0, 1, 3], [0, 2, 2, 5]]).empty_rows(1)
        (0, 1)
        """
        level = _normalize_level(level, len(self._levels))
        key = ("empty_rows", level)
        out = self._cached().get(key)
        if out is None:
            absolute = self.absolute_offsets(level)
            out = self._cache[key] = int(np.count_nonzero(absolute[1:] == absolute[:-1]))
        return out

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def segment_ids(self, level=-1):
        """For each data row, the index of its sequence at ``level`` (int64, cached).

        >>> lod = LoD([[0, 2, 3], [0, 1, 1, 4]])
        >>> lod.segment_ids().tolist(), lod.segment_ids(0).tolist()
        ([0, 2, 2, 2], [0, 1, 1, 1])
        """
        level = _normalize_level(level, len(self._levels))
        key = ("segment_ids", level)
        out = self._cached().get(key)
        if out is None:
            out = self._cache[key] = _frozen(offsets_to_segment_ids(self.absolute_offsets(level)))
        return out

    def _plan(self, key, build):
        """``build()``, kept for this LoD in a thread-safe LRU bounded by bytes.

        For host plans derived from the offsets (padding indices...); their
        arrays are made read-only, and a plan is an internal object: the
        public accessors above hand out frozen arrays only.
        """
        plans = self._plans
        if plans is None:
            rows = self._rows or 0
            plans = self._plans = ByteLRU(max(_PLAN_BUDGET, 4 * 8 * rows))
        plan = plans.get(key)
        if plan is None:
            plan = plans.put(key, build())
        return plan

    def on(self, be, what, level=-1, *, like=None, dtype=None):
        """A host array of this LoD as an array of backend ``be`` on ``like``'s device, cached.

        ``what`` is ``"offsets"``, ``"absolute_offsets"``, ``"segment_ids"``, ``"lengths"``,
        ``"absolute_lengths"`` (lengths in data rows), ``"sqrt_lengths"`` (their square roots, float64
        unless ``dtype`` says otherwise) or ``"empty"`` (bool: the sequences of no data row). The host arrays stay the
        source of truth; this is the copy the kernels use, made once per backend, device and
        dtype through ``be.from_host`` (so it costs one host-to-device copy per LoD, not per op).

        >>> import lodtensor as lt
        >>> LoD([[0, 1, 4]]).on(lt.get_backend("numpy"), "sqrt_lengths", dtype="float32")
        array([1.       , 1.7320508], dtype=float32)
        """
        level = _normalize_level(level, len(self._levels))
        build = _ON_HOST.get(what)
        if build is None:
            raise ValueError(f"LoD.on(): what must be one of {sorted(_ON_HOST)}, got {what!r}")
        device = "cpu" if like is None else be.device_of(like)
        key = ("on", be.name, device, what, level, None if dtype is None else str(dtype))
        cache = self._cached()
        out = cache.get(key)
        if out is None:
            host = build(self, level)
            if like is None:  # the backend's default device
                out = be.to_device(be.asarray(host, dtype=dtype), device)
            else:
                out = be.from_host(host, like=like, dtype=dtype)
            # the LoD's: kernels may cache plans made from its values, and know its longest sequence
            facts = {}  # (``host`` by a weak reference where it is ``out``: mark_frozen's table would keep it)
            if what in ("offsets", "absolute_offsets"):
                facts["longest"] = partial(_longest_of, weakref.ref(host)) if out is host else partial(_longest, host)
            mark_frozen(out, **facts)
            out = cache.setdefault(key, out)  # threads asking at once all get the one copy kept
        return out

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def offsets_list(self, level=-1):
        """Offsets of ``level`` as a Python list (cached; for fast scalar access).

        >>> LoD([[0, 2, 3], [0, 1, 1, 4]]).offsets_list()
        [0, 1, 1, 4]
        """
        if level != 0 or not self._levels:  # (level 0 of a LoD with levels needs no check: the fast path)
            level = _normalize_level(level, len(self._levels))
        key = ("list", level)
        out = self._cached().get(key)
        if out is None:
            out = self._levels[level].tolist()
            self._cache[key] = out
        return out

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def to_list(self):
        """Offsets as nested Python lists (Paddle's ``lod()``); fresh lists the caller may change.

        >>> lod = LoD([[0, 2, 3], [0, 1, 1, 4]])
        >>> lod.to_list(), lod() == lod.to_list()
        ([[0, 2, 3], [0, 1, 1, 4]], True)
        """
        return [self.offsets_list(k).copy() for k in range(len(self._levels))]

    __call__ = to_list

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def to_lengths_list(self):
        """Lengths as nested Python lists (Paddle's ``recursive_sequence_lengths()``).

        >>> LoD([[0, 2, 3], [0, 1, 1, 4]]).to_lengths_list()
        [[2, 1], [1, 0, 3]]
        """
        return [self.lengths(k).tolist() for k in range(len(self._levels))]

    def fits(self, num_rows):
        """True when the LoD is empty or its last level ends at ``num_rows``.

        >>> LoD([[0, 2, 3], [0, 1, 1, 4]]).fits(4), LoD([[0, 2, 3], [0, 1, 1, 4]]).fits(5), LoD([]).fits(5)
        (True, False, True)
        """
        return self._rows is None or self._rows == num_rows

    def check_rows(self, num_rows, where="lod"):
        """Raise LoDError unless the last level ends at ``num_rows``.

        >>> LoD([[0, 2, 3], [0, 1, 1, 4]]).check_rows(4)
        >>> LoD([[0, 2, 3], [0, 1, 1, 4]]).check_rows(5, where="set()")
        Traceback (most recent call last):
        ...
        lodtensor.errors.LoDError: set(): lod level 1 must end at len(data)=5, got offsets[-1]=4
        """
        if not self.fits(num_rows):
            last = len(self._levels) - 1
            raise LoDError(
                f"{where}: lod level {last} must end at len(data)={num_rows}, "
                f"got offsets[-1]={self._rows}",
                level=last,
                index=self._levels[-1].size - 1,
            )

    # -- python protocol ---------------------------------------------------------------------
    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def __eq__(self, other):
        if isinstance(other, LoD):
            levels = other._levels
        elif isinstance(other, (list, tuple, np.ndarray)):  # (an array as the constructor reads one: rows are levels,
            try:  # a 1-D array is one level; not NumPy's reflected ==, which compares this object with every entry)
                levels = [other] if getattr(other, "ndim", None) == 1 else [np.asarray(level) for level in other]
            except Exception:
                return NotImplemented
        else:
            return NotImplemented
        return len(levels) == len(self._levels) and all(
            a.shape == np.shape(b) and bool(np.array_equal(a, b)) for a, b in zip(self._levels, levels)
        )

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def __hash__(self):  # that of the equal tuple of tuples (Python's rule: equal objects hash alike), kept
        cache = self._cached()
        if "hash" not in cache:
            cache["hash"] = hash(tuple(tuple(level.tolist()) for level in self._levels))
        return cache["hash"]

    def __repr__(self):
        return "LoD([" + ", ".join(preview(level) for level in self._levels) + "])"

    def __reduce__(self):
        return (_rebuild_lod, ([level.tolist() for level in self._levels],))


@unpickled_by
def _rebuild_lod(levels):
    """Unpickling goes through the gate: a pickle is outside data like any other."""
    return LoD(levels)


def _count(value, name):
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
