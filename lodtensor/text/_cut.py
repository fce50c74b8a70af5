"""How ParquetCorpus cuts record batches of documents into batches, and where each batch ends.

:func:`cut` takes the record batches of one shard's files in order and yields
every batch with its *position*: ``(file, document, seen)``, the index of the
file in the shard's list, the documents of that file before the next batch, and
the documents of the whole list before it (the document stride counts them). A
batch always ends at a document boundary and the cut is greedy from there, so
an epoch started at a position yields exactly the batches that followed it:
that is what ``ParquetCorpus.load_state_dict`` resumes from.
"""

import bisect
import os

import numpy as np

from ._pieces import join, split, take
from ._shards import check_layout

__all__ = ["cut"]


def cut(records, columns, layout, budget, stride, offset, start):
    """``(parts, position)`` for every batch of ``records``: ``(file index, path, record)`` triples.

    ``parts`` is a list of LoDTensors, one per column of ``columns`` (the first is
    the batched one). ``stride`` and ``offset``: keep the documents whose index in
    the whole list is ``offset`` modulo ``stride``. ``start``: the position to begin
    at; documents of file ``start[0]`` before ``start[1]`` are skipped, and
    ``start[2]`` counts the documents before it.
    """
    first_file, skip, seen = start
    column = columns[0]
    pending, pending_rows = [], 0
    current, file_docs = None, 0
    for index, path, record in records:
        if index != current:
            if current == first_file or (current is None and index != first_file):  # the start's file is done
                _check_start(file_docs, start)
            current, file_docs = index, 0
        check_layout(record, layout, path)
        parts = [record[c] for c in columns]
        total = len(parts[0])
        first, file_docs = file_docs, file_docs + total  # the record's documents in its file: first, first + 1...
        lo = max(0, skip - first) if index == first_file else 0  # documents before the start position
        if lo >= total:
            continue
        if lo:
            parts = [split(p, [lo, total])[0] for p in parts]
        base, seen_before, n = first + lo, seen, total - lo
        seen += n
        keep = None
        if stride > 1:  # keep documents offset, offset + stride, ... of the whole file list
            keep = np.flatnonzero((np.arange(seen_before, seen_before + n) % stride) == offset)
            if keep.size == 0:
                continue
            parts = [take(p, keep) for p in parts]
            n = keep.size

        def position(e, index=index, base=base, seen_before=seen_before, keep=keep):
            """After the first ``e`` documents kept of this record."""
            done = 0 if e == 0 else e if keep is None else int(keep[e - 1]) + 1
            return (index, base + done, seen_before + done)

        # rows before each document (bisect on a list: no NumPy call per batch)
        csum = _row_offsets(parts[0], path, column).tolist()
        bounds = [0]  # document ranges to cut this record batch into (a loop over batches)
        if pending:
            e = bisect.bisect_right(csum, budget - pending_rows) - 1
            if e > 0:
                bounds.append(e)
            head = e > 0
            fills = e < n  # the next document does not fit: the pending batch is full
        else:
            head = fills = False
        p, tail = bounds[-1], False
        while p < n:
            e = bisect.bisect_right(csum, csum[p] + budget, p) - 1
            e = max(e, p + 1)  # a document longer than the budget goes alone
            # room left, or exactly full (documents without tokens that follow still join it, as they
            # would in one record batch): wait for the next record batch
            tail = e == n and csum[e] - csum[p] <= budget
            bounds.append(e)
            p = e
        pieces = list(zip(*[split(t, bounds) for t in parts]))
        ends = bounds[1:]
        if head:
            pending.append(pieces.pop(0))
            pending_rows += csum[ends.pop(0)]
        if pending and (fills or not pieces):
            if not fills:
                continue
            yield join(pending), position(bounds[1] if head else 0)
            pending, pending_rows = [], 0
        last = pieces.pop() if tail else None
        for piece, e in zip(pieces, ends):
            yield list(piece), position(e)
        if last is not None:
            pending, pending_rows = [last], csum[n] - csum[bounds[-2]]
    if current in (first_file, None):
        _check_start(file_docs, start)
    if pending:
        yield join(pending), (current + 1, 0, seen)


def _check_start(docs, start):
    """A start position inside file ``start[0]`` (of ``docs`` documents) must lie within them: a file rewritten
    shorter since the state was saved would otherwise resume an empty or shifted epoch without a word."""
    if docs < start[1]:
        raise ValueError(
            f"ParquetCorpus: the loaded position is document {start[1]} of the shard's file {start[0]}, which "
            f"holds {docs}: the file changed since the state was saved"
        )


def _row_offsets(t, path, column):
    """Where every document of ``t`` starts in the rows (finest-level items), then the row count."""
    if t.lod_level == 0:
        raise ValueError(
            f"ParquetCorpus: column {column!r} of {os.fspath(path)!s} is not a list column (lod_level 0); "
            f"documents must be nested lists"
        )
    return t.lod.absolute_offsets(0)
