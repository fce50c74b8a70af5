"""ParquetCorpus: LoD batches of whole documents streamed from Parquet files, sharded by rank and worker.

The class derives from ``torch.utils.data.IterableDataset`` when torch is
installed. It is built on first use (module ``__getattr__``), so importing
:mod:`lodtensor.text` does not import torch.
"""

import bisect
import os
import threading

import numpy as np

from ..ops._common import int_arg
from ._pieces import emit, join, split, take
from ._shards import check_layout, files_of, layouts

__all__ = ["ParquetCorpus"]  # noqa: F822 - made on first use by __getattr__ below


class _ParquetCorpus:
    """Batches of whole documents (LoDTensors) streamed from Parquet, each document once per epoch.

    An iterable dataset for ``torch.utils.data.DataLoader(corpus, batch_size=None)``.
    Each Parquet row is one document (one top-level sequence of ``column``,
    e.g. document -> sentence -> word); a batch is a run of consecutive
    documents whose rows (the finest level: words) add up to at most
    ``batch_tokens``. A document longer than that is a batch of its own.
    Documents without sentences count no tokens: they go in the batch they
    fall in (one the budget fills exactly still takes those that follow it,
    wherever record batches or files end, so the batches do not depend on
    ``docs_per_read``), and a batch of only such documents is a valid batch
    whose lower lod levels hold no sequence (offsets ``[0]``).

    The files are split over the ``num_replicas * num_workers`` shards (rank
    taken when the corpus is built, DataLoader worker when it is iterated):
    shard ``s`` reads files ``s, s + S, ...``, so each file is read by exactly
    one shard. With fewer files than shards, every shard reads every file and
    keeps documents ``s, s + S, ...`` (correct, but each shard then decodes
    everything: write at least as many files as shards).

    Files are read with :func:`lodtensor.read_parquet` ``(batch_size=docs_per_read)``:
    memory holds one record batch of ``docs_per_read`` documents and the batch
    being built, never the file (pages are read as they are decoded, whatever
    the size of the file's row groups). Batches inside one record batch are
    views of it; only a batch that spans two record batches is copied. Page
    checksums are verified (``verify_checksums``).

    Every shard must hold ``column`` (and ``with_columns``) with the same lod
    depth, dtype and row shape: checked for every file from its footer when the
    corpus is built (one footer read per file), and again for every record
    batch read, so that documents of two layouts never meet in one batch; the
    error names the first file that disagrees with the first file.

    Parameters
    ----------
    path : str, os.PathLike, or list of them
        A Parquet file, a directory (its ``*.parquet`` files, recursively, in
        sorted order), or a list of files.
    column : str
        The LoD column to batch.
    batch_tokens : int
        Budget of rows per batch.
    with_columns : sequence of str
        Other columns (labels...) yielded alongside, sliced the same way: the
        items are then tuples ``(batch, *others)`` of LoDTensors.
    num_replicas, rank : int, optional
        Default: the initialised torch.distributed world, else one process
        (``num_replicas > 1`` without ``rank`` and without such a world is an error).
    shuffle : bool
        Shuffle the file order every epoch (the same on every rank for ``seed``).
    seed : int
    docs_per_read : int, optional
        Documents per Parquet record batch read at once. Default: about four
        batches' worth (from the file's metadata: rows per document), at least
        1024 documents and at least 256K rows (2 MiB of int64 ids; more documents
        where they are short). Several batches per read is fastest (a batch that
        spans two record batches is copied); memory grows with it.
    prefetch : bool
        Decode the next record batch in a background thread while the current
        one is cut into batches (pyarrow releases the GIL while it decodes).
        Memory then holds two record batches. Off by default: pyarrow already
        decodes on its own threads, and on a busy 2-core machine the extra
        thread made an epoch slower (bench/distributed.py).
    verify_checksums : bool
        Verify the files' page checksums (default True; needs pyarrow >= 15).

    Raises
    ------
    FileNotFoundError
        ``path`` (or a listed file) does not exist.
    KeyError
        A file lacks ``column`` or one of ``with_columns`` (the message names it).
    ValueError
        Bad arguments, no Parquet file under ``path``, a file whose footer is
        corrupt, or files that disagree on a column's lod depth, dtype or row
        shape (the message names the file); while iterating, a corrupt file.

    Examples
    --------
    >>> import os, tempfile
    >>> import lodtensor as lt
    >>> from lodtensor.text import ParquetCorpus
    >>> path = os.path.join(tempfile.mkdtemp(), "docs.parquet")
    >>> words = lt.from_nested_list([[[1, 2], [3]], [[4, 5, 6]], [[7]]], lod_level=2)
    >>> lt.write_parquet(path, {"words": words})
    >>> corpus = ParquetCorpus(path, "words", batch_tokens=4, num_replicas=1, rank=0)
    >>> [batch.tolist() for batch in corpus]
    [[[[1, 2], [3]]], [[[4, 5, 6]], [[7]]]]
    """

    def __init__(
        self,
        path,
        column,
        batch_tokens,
        *,
        with_columns=(),
        num_replicas=None,
        rank=None,
        shuffle=False,
        seed=0,
        docs_per_read=None,
        prefetch=False,
        verify_checksums=True,
    ):
        name = "ParquetCorpus()"
        if not isinstance(column, str):
            raise TypeError(f"{name}: column must be a column name (str), got {type(column).__name__} {column!r}")
        names = list(with_columns) if hasattr(with_columns, "__iter__") else None  # once: an iterator runs dry
        if isinstance(with_columns, str) or names is None or not all(isinstance(c, str) for c in names):
            raise TypeError(f"{name}: with_columns must be a list of column names, got {with_columns!r}")
        with_columns = names
        self.files = files_of(path, name)
        self.column = column
        self.with_columns = tuple(with_columns)
        self.batch_tokens = _positive(batch_tokens, "batch_tokens", name)
        self.docs_per_read = None if docs_per_read is None else _positive(docs_per_read, "docs_per_read", name)
        self.num_replicas, self.rank = _world(num_replicas, rank, name)
        self.shuffle = bool(shuffle)
        self.seed = _natural(seed, "seed", name)
        self.prefetch = bool(prefetch)
        self.verify_checksums = bool(verify_checksums)
        self.epoch = 0
        self._read_sizes = {}  # (path, mtime, size) -> default docs per read (a footer hint, parsed once)
        self.layout = layouts(self.files, [column, *[c for c in self.with_columns if c != column]], name)

    def set_epoch(self, epoch):
        """Use the file order of ``epoch`` (with ``shuffle``); call it before each epoch on every rank.

        >>> import os, tempfile
        >>> import lodtensor as lt
        >>> from lodtensor.text import ParquetCorpus
        >>> folder = tempfile.mkdtemp()
        >>> for i in range(3):  # three files of one document each
        ...     doc = lt.from_nested_list([[[i]]], lod_level=2)
        ...     lt.write_parquet(os.path.join(folder, f"part-{i}.parquet"), {"words": doc})
        >>> corpus = ParquetCorpus(folder, "words", batch_tokens=1, num_replicas=1, rank=0, shuffle=True, seed=0)
        >>> for epoch in range(3):  # the file order is drawn from (seed, epoch): the same on every rank
        ...     corpus.set_epoch(epoch)
        ...     print([int(batch.data[0]) for batch in corpus])
        [2, 0, 1]
        [2, 0, 1]
        [2, 1, 0]
        """
        self.epoch = _natural(epoch, "epoch", "ParquetCorpus.set_epoch()")

    def shard(self, worker_id=0, num_workers=1):
        """``(files, stride, offset)`` of one shard: its files, and which documents of them it keeps.

        >>> import os, tempfile
        >>> import lodtensor as lt
        >>> from lodtensor.text import ParquetCorpus
        >>> folder = tempfile.mkdtemp()
        >>> for i in range(3):  # three files of one document each
        ...     doc = lt.from_nested_list([[[i]]], lod_level=2)
        ...     lt.write_parquet(os.path.join(folder, f"part-{i}.parquet"), {"words": doc})
        >>> files, stride, offset = ParquetCorpus(folder, "words", batch_tokens=4, num_replicas=4, rank=3).shard()
        >>> len(files), stride, offset  # fewer files than shards: every file, every 4th document from the 4th
        (3, 4, 3)
        >>> files, stride, offset = ParquetCorpus(folder, "words", batch_tokens=4, num_replicas=2, rank=1).shard()
        >>> [os.path.basename(f) for f in files], stride, offset  # else whole files: rank 1 of 2 takes every 2nd
        (['part-1.parquet'], 1, 0)
        """
        shards = self.num_replicas * num_workers
        index = self.rank * num_workers + worker_id
        files = list(self.files)
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(len(files))
            files = [files[i] for i in order]
        if len(files) >= shards:
            return files[index::shards], 1, 0
        return files, shards, index

    def __iter__(self):
        worker_id, num_workers = _worker()
        files, stride, offset = self.shard(worker_id, num_workers)
        return self._batches(files, stride, offset)

    def _batches(self, files, stride, offset):
        return (emit(batch) for batch in self._pieces(files, stride, offset))

    def _pieces(self, files, stride, offset):
        from ..interop import read_parquet

        columns = [self.column, *[c for c in self.with_columns if c != self.column]]
        budget = self.batch_tokens
        pending, pending_rows = [], 0
        seen = 0  # documents read so far (for the document stride)
        records = (
            (path, record)
            for path in files
            for record in read_parquet(
                path, columns=columns, batch_size=self._read_size(path), verify_checksums=self.verify_checksums
            )
        )
        if self.prefetch:
            records = _read_ahead(records)
        for path, record in records:
            check_layout(record, self.layout, path)
            parts = [record[self.column], *[record[c] for c in self.with_columns]]
            n = len(parts[0])
            if n == 0:
                continue
            if stride > 1:  # keep documents offset, offset + stride, ... of the whole file list
                keep = np.flatnonzero((np.arange(seen, seen + n) % stride) == offset)
                seen += n
                if keep.size == 0:
                    continue
                parts = [take(p, keep) for p in parts]
                n = keep.size
            # rows before each document (bisect on a list: no NumPy call per batch)
            csum = _row_offsets(parts[0], path, self.column).tolist()
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
            if head:
                pending.append(pieces.pop(0))
                pending_rows += csum[bounds[1]]
            if pending and (fills or not pieces):
                if fills:
                    yield join(pending)
                    pending, pending_rows = [], 0
                else:
                    continue
            last = pieces.pop() if tail else None
            for piece in pieces:
                yield list(piece)
            if last is not None:
                pending, pending_rows = [last], csum[n] - csum[bounds[-2]]
        if pending:
            yield join(pending)

    def _read_size(self, path):
        """Documents per record batch for ``path``: ``docs_per_read``, or ~4 batches' worth (>= 1024, >= 256K rows)."""
        if self.docs_per_read is not None:
            return self.docs_per_read
        try:  # a file rewritten between epochs gets its new footer's hint (a stat costs microseconds)
            stat = os.stat(path)
            key = (path, stat.st_mtime_ns, stat.st_size)
        except OSError:  # the read that follows names the file
            key = (path,)
        size = self._read_sizes.get(key)
        if size is None:  # once per file version, not per epoch: a footer parse costs about a record batch
            rows_per_doc = _rows_per_document(path, self.column)
            size = (
                _MIN_READ
                if not rows_per_doc
                else int(min(max(_MIN_READ, max(4 * self.batch_tokens, _MIN_READ_ROWS) / rows_per_doc), _MAX_READ))
            )
            self._read_sizes[key] = size
        return size

    def __repr__(self):
        return (
            f"ParquetCorpus({len(self.files)} file(s), column={self.column!r}, batch_tokens={self.batch_tokens}, "
            f"rank={self.rank} of {self.num_replicas})"
        )


_MIN_READ, _MAX_READ = 1024, 1 << 20
# A read holds at least this many rows (2 MiB of int64 ids) where documents are short: per record
# batch costs (the LoD gate, the split, the one joined batch) then spread over more batches
# (bench/distributed.py, batches of 4,096 words: 20% faster an epoch than reads of 1,024 documents).
_MIN_READ_ROWS = 1 << 18


def _rows_per_document(path, column):
    """Mean leaf values per row of ``column`` from the Parquet footer (no data read); None if unknown.

    A broken footer gives None here: the read that follows reports the file.
    """
    try:
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
        schema = meta.schema
        leaf = [j for j in range(len(schema)) if schema.column(j).path.split(".")[0] == column]
        if len(leaf) != 1 or meta.num_rows == 0:
            return None
        values = sum(meta.row_group(g).column(leaf[0]).num_values for g in range(meta.num_row_groups))
        return values / meta.num_rows
    except Exception:  # noqa: BLE001 - only a hint; read_parquet names the file if it is broken
        return None


def _row_offsets(t, path, column):
    """Where every document of ``t`` starts in the rows (finest-level items), then the row count."""
    if t.lod_level == 0:
        raise ValueError(
            f"ParquetCorpus: column {column!r} of {os.fspath(path)!s} is not a list column (lod_level 0); "
            f"documents must be nested lists"
        )
    return t.lod.absolute_offsets(0)


def _read_ahead(iterator):
    """The items of ``iterator``, the next one produced in a background thread meanwhile.

    Exceptions (a corrupt file...) come out in order, where the item would have.
    """
    from concurrent.futures import ThreadPoolExecutor

    done = object()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lodtensor-parquet")
    try:
        future = pool.submit(next, iterator, done)
        while True:
            item = future.result()
            if item is done:
                return
            future = pool.submit(next, iterator, done)
            yield item
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _positive(value, what, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: {what} must be a positive int, got {value!r}")
    return int(value)


def _natural(value, what, name):
    """``value`` as an int >= 0 (a seed or an epoch: the shuffle's ``default_rng([seed, epoch])`` needs both)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name}: {what} must be an int >= 0, got {value!r}")
    return int(value)


def _world(num_replicas, rank, name):
    if num_replicas is None or rank is None:
        dist = _torch_distributed()
        initialised = dist is not None and dist.is_available() and dist.is_initialized()
        if num_replicas is None:
            num_replicas = dist.get_world_size() if initialised else 1
        if rank is None:
            if not initialised and _whole(num_replicas, "num_replicas", name) > 1:
                # as torch's DistributedSampler: rank 0 on every process would read one shard num_replicas times
                raise ValueError(
                    f"{name}: num_replicas={num_replicas!r} is given but rank is not, and torch.distributed is "
                    f"not initialised to tell it; pass rank= too"
                )
            rank = dist.get_rank() if initialised else 0
    num_replicas, rank = _whole(num_replicas, "num_replicas", name), _whole(rank, "rank", name)
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ValueError(f"{name}: need num_replicas >= 1 and 0 <= rank < num_replicas, got {rank} of {num_replicas}")
    return num_replicas, rank


def _whole(value, what, name):
    """An int (``ops._common.int_arg``), or a string of one (``os.environ["RANK"]``); a float such as 0.7 is
    refused, not cut to 0."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdecimal() and value.strip().isascii():
        value = int(value)
    return int_arg(value, name, what)


def _torch_distributed():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist


def _worker():
    """``(worker id, number of workers)`` of the DataLoader worker running this, ``(0, 1)`` outside one."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        return 0, 1
    info = get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


_CLASS = None
_CLASS_LOCK = threading.Lock()


def _build():
    """ParquetCorpus: an IterableDataset subclass when torch is installed (made once, on first use; under a
    lock: threads asking at once must get the one class, or instances of the others would not pickle)."""
    global _CLASS  # noqa: PLW0603 - the class is made once, lazily
    if _CLASS is not None:
        return _CLASS
    with _CLASS_LOCK:
        if _CLASS is not None:
            return _CLASS
        try:
            from torch.utils.data import IterableDataset

            bases = (_ParquetCorpus, IterableDataset)
        except ImportError:
            bases = (_ParquetCorpus,)
        _CLASS = type("ParquetCorpus", bases, {"__module__": __name__, "__doc__": _ParquetCorpus.__doc__})
    return _CLASS


def _new_lock_after_fork():  # a lock another thread held at the fork would never be released in the child
    global _CLASS_LOCK  # noqa: PLW0603 - rebound in the child only
    _CLASS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_after_fork)


def __getattr__(name):
    if name == "ParquetCorpus":
        return _build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
