"""The pieces ParquetCorpus batches are made of: documents of a read table as LoDTensor views
(:func:`split`), a rank's documents (:func:`take`) and pieces joined into one batch (:func:`join`).
A piece of only sentence-less documents is a batch like any other: its lower levels hold no
sequence (offsets ``[0]``).
"""

import numpy as np

from .._validate import freeze
from ..lod import _make
from ..tensor import LoDTensor, _wrap

__all__ = ["emit", "split", "take", "join"]


def emit(parts):
    return parts[0] if len(parts) == 1 else tuple(parts)


def split(t, bounds):
    """Documents ``bounds[i]:bounds[i + 1]`` of ``t`` for every ``i``: LoDTensor views.

    One vectorised pass per lod level builds every piece's rebased offsets in
    one frozen buffer; each piece's LoD views its part (derived from ``t``'s
    checked LoD, so valid by construction, as ``LoD.split`` builds its parts).
    A loop over pieces, not documents.
    """
    place = t.place()
    data = t.data
    if t.lod_level == 0:
        return [_wrap(data[a:b], t.lod, place) for a, b in zip(bounds, bounds[1:])]
    # the pieces are contiguous: piece i holds offs[cuts[i] : cuts[i + 1] + 1], so in the joined
    # buffer entry j of piece seg[j] reads offs[cuts[0] + j - seg[j]] (each shared end appears twice)
    cuts = np.asarray(bounds, dtype=np.int64)
    piece = np.arange(cuts.size - 1, dtype=np.int64)
    per_level = []
    for offs in t.lod.levels:
        counts = np.diff(cuts)
        counts += 1
        seg = np.repeat(piece, counts)
        src = np.arange(cuts[0], cuts[0] + seg.size, dtype=np.int64)
        src -= seg
        starts = offs[cuts]
        values = offs[src]
        values -= starts[seg]
        ends = np.cumsum(counts).tolist()
        per_level.append((freeze(values), [0, *ends]))
        cuts = starts
    rows = cuts.tolist()
    return [
        _wrap(data[rows[i] : rows[i + 1]], _make(tuple([v[c[i] : c[i + 1]] for v, c in per_level])), place)
        for i in range(len(rows) - 1)
    ]


def take(t, index):
    """Documents ``index`` of ``t`` (a copy); where none of them has a sentence, the lower levels hold
    no sequence (offsets ``[0]``), as :func:`split` makes them."""
    if t.lod_level == 0:
        return LoDTensor(t.data[t.backend.asarray(index)])
    return t[index]


def join(pieces):
    """Concatenate lists of column pieces document-wise: one LoDTensor per column (a copy)."""
    return [_concat([piece[k] for piece in pieces]) for k in range(len(pieces[0]))]


def _concat(tensors):
    """The documents of ``tensors`` one after the other: the data joined, every level's offsets shifted.

    Valid by construction (each piece's levels are checked ones, each shift is
    where the previous pieces end), so the LoD is not checked again.
    """
    first = tensors[0]
    if len(tensors) == 1:
        return first
    data = first.backend.concat([t.data for t in tensors])
    return _wrap(data, first.lod.join(*[t.lod for t in tensors[1:]]), first.place())
