"""Level algebra of a LoD: the LoDs of slices, of one sequence, of a selection, of every top-level
sequence, and with a level dropped or appended; a mixin of :class:`~lodtensor.lod.LoD`.

Everything is vectorised per level (loops over the few levels, never over sequences or rows);
results are LoDs of the same class, over frozen arrays, made without checks where they are valid
by construction and through the gate where outside offsets come in (``append_level``).
"""

import numpy as np

from ._compile import eager_under_compile
from ._level import _normalize_level, concat_ranges, lengths_to_offsets
from ._validate import as_offsets, check_levels, freeze

__all__ = ["LevelAlgebra"]

_INT64 = np.dtype(np.int64)


def _rebased_range(levels, a, b):
    """The pieces of ``levels`` under entries ``[a, b)`` of the first, each rebased to 0, and the
    range of rows (or entries of the level below) they cover: ``(arrays, row_start, row_stop)``."""
    arrays = []
    for offs in levels:
        piece = offs[a : b + 1]
        base = piece[0]
        arrays.append(piece - base if base else piece)
        a, b = int(base), int(piece[-1])
    return arrays, a, b


class LevelAlgebra:
    """The LoD methods that build other LoDs from this one's levels (``self._levels``)."""

    __slots__ = ()

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def slice(self, start, stop):
        """LoD of top-level sequences ``[start, stop)``, rebased to 0; a range of rows.

        Returns ``(lod, row_start, row_stop)``. The caller has checked the range.

        >>> from lodtensor.lod import LoD
        >>> lod, a, b = LoD([[0, 1, 3], [0, 2, 4, 5]]).slice(1, 2)
        >>> lod(), a, b
        ([[0, 2], [0, 2, 3]], 2, 5)
        """
        arrays, a, b = _rebased_range(self._levels, start, stop)
        return type(self)._from_valid(arrays), a, b

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def child(self, i):
        """LoD of top-level sequence ``i`` without its top level, and its row range.

        Returns ``(lod, row_start, row_stop)``; the caller has checked ``i``.

        >>> from lodtensor.lod import LoD
        >>> lod, a, b = LoD([[0, 1, 3], [0, 2, 4, 5]]).child(1)
        >>> lod(), a, b
        ([[0, 2, 3]], 2, 5)
        """
        top = self.offsets_list(0)
        arrays, a, b = _rebased_range(self._levels[1:], top[i], top[i + 1])
        return type(self)._from_valid(arrays), a, b

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def select(self, indices, *, rows=True):
        """LoD of the top-level sequences ``indices`` (any order, repeats allowed).

        Returns ``(lod, rows)`` where ``rows`` indexes the data rows to gather. Where the
        selected sequences are all empty, the levels under them hold no sequence (``[0]``).
        With ``rows=False`` it makes no index over the rows (a pass over every one of them) and
        returns ``(lod, starts, stops)``: last-level sequence ``i`` of the result copies the data
        rows ``[starts[i], stops[i])`` (per-sequence arrays, for an index made where the data live).

        >>> from lodtensor.lod import LoD
        >>> lod, rows = LoD([[0, 2, 3], [0, 1, 1, 4]]).select([1, 0])
        >>> lod(), rows.tolist()
        ([[0, 1, 3], [0, 3, 4, 4]], [1, 2, 3, 0])
        >>> LoD([[0, 0, 1], [0, 2]]).select([0])[0]()
        [[0, 0], [0]]
        >>> lod, starts, stops = LoD([[0, 2, 3], [0, 1, 1, 4]]).select([1, 0], rows=False)
        >>> lod(), starts.tolist(), stops.tolist()
        ([[0, 1, 3], [0, 3, 4, 4]], [1, 0, 1], [4, 1, 1])
        """
        items = np.asarray(indices, dtype=_INT64)
        starts, stops = items, items + 1  # no level: every item is one row
        arrays = []
        for k, offs in enumerate(self._levels):
            if k:  # the entries of this level under the previous level's spans
                items, _ = concat_ranges(starts, stops)
            starts, stops = offs[items], offs[items + 1]
            arrays.append(lengths_to_offsets(stops - starts))
        lod = type(self)._from_valid(arrays)
        if not rows:
            return lod, starts, stops
        return lod, concat_ranges(starts, stops)[0]

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def split(self):
        """Sub-LoDs and row ranges of every top-level sequence, vectorised per level.

        Returns ``(sublods, row_offsets)``: a list with one LoD (one level
        shorter, its arrays views into one buffer per level) per top-level
        sequence, and the rows each sequence spans as absolute offsets.

        >>> from lodtensor.lod import LoD
        >>> sublods, rows = LoD([[0, 2, 3], [0, 1, 1, 4]]).split()
        >>> [sub() for sub in sublods], rows.tolist()
        ([[[0, 1, 1]], [[0, 3]]], [0, 1, 4])
        """
        n = self._levels[0].size - 1 if self._levels else 0
        a = self._levels[0][:-1]
        b = self._levels[0][1:]
        per_level = []
        for offs in self._levels[1:]:
            idx, counts = concat_ranges(a, b + 1)
            values = freeze(offs[idx] - np.repeat(offs[a], counts))
            bounds = lengths_to_offsets(counts).tolist()
            per_level.append((values, bounds))
            a, b = offs[a], offs[b]
        if not per_level:
            empty = type(self)._from_frozen(())
            return [empty] * n, self.absolute_offsets(0)
        if len(per_level) == 1:
            (values, bounds), = per_level
            sublods = [type(self)._from_frozen((values[a:b],)) for a, b in zip(bounds, bounds[1:])]
        else:
            make = type(self)._from_frozen
            sublods = [make([values[bounds[i] : bounds[i + 1]] for values, bounds in per_level]) for i in range(n)]
        return sublods, self.absolute_offsets(0)

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def split_cached(self):
        """``split()`` cached on the LoD as ``(sublods, row offsets as a list)``.

        ``sublods`` is None for a one-level LoD (every part has an empty LoD).

        >>> from lodtensor.lod import LoD
        >>> lod = LoD([[0, 2, 3], [0, 1, 1, 4]])
        >>> sublods, rows = lod.split_cached()
        >>> [sub() for sub in sublods], rows, lod.split_cached()[0] is sublods
        ([[[0, 1, 1]], [[0, 3]]], [0, 1, 4], True)
        >>> LoD([[0, 2, 3]]).split_cached()
        (None, [0, 2, 3])
        """
        cache = self._cached()
        hit = cache.get("split")
        if hit is None:
            if len(self._levels) == 1:
                hit = (None, self.offsets_list(0))
            else:
                sublods, rows = self.split()
                hit = (sublods, rows.tolist())
            cache["split"] = hit
        return hit

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def drop_level(self, level=-1):
        """The LoD without ``level``: its sequences merge into their parents.

        >>> from lodtensor.lod import LoD
        >>> LoD([[0, 2], [0, 2, 5]]).drop_level(-1)()
        [[0, 5]]
        >>> LoD([[0, 1, 2], [0, 2, 5]]).drop_level(0)()
        [[0, 2, 5]]
        """
        level = _normalize_level(level, len(self._levels))
        arrays = list(self._levels)
        if level > 0:
            arrays[level - 1] = arrays[level][arrays[level - 1]]
        del arrays[level]
        return type(self)._from_valid(arrays)

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def append_level(self, offsets, *, num_rows=None):
        """A LoD with one more, finest level (Paddle's ``lod_append``); validated.

        >>> from lodtensor.lod import LoD
        >>> LoD([[0, 2]]).append_level([0, 1, 3])()
        [[0, 2], [0, 1, 3]]
        """
        new = as_offsets(offsets, level=len(self._levels))
        arrays = self._levels + (new,)
        check_levels(arrays, num_rows)
        return type(self)._from_valid(arrays)

    @eager_under_compile  # under torch.compile: read behind a graph break, never traced as NumPy
    def join(self, *others):
        """The LoD of this LoD's sequences followed by each of ``others``' (all of one depth): every level's
        offsets shifted past the pieces before. Valid by construction (a loop over levels and LoDs, few).

        >>> from lodtensor.lod import LoD
        >>> LoD([[0, 1, 3]]).join(LoD([[0, 2]]), LoD([[0, 0, 1]]))()
        [[0, 1, 3, 5, 5, 6]]
        """
        lods = (self, *others)
        if len({len(lod._levels) for lod in lods}) != 1:
            raise ValueError(f"LoD.join(): the LoDs must have one depth, got depths {[len(d._levels) for d in lods]}")
        arrays = []
        for k in range(len(self._levels)):
            offs = [lod._levels[k] for lod in lods]
            ends = np.cumsum([0] + [int(o[-1]) for o in offs[:-1]]).tolist()
            arrays.append(np.concatenate([offs[0]] + [o[1:] + e for o, e in zip(offs[1:], ends[1:])]))
        return type(self)._from_valid(arrays) if arrays else self
