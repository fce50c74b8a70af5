"""ParquetCorpus: LoD batches of whole documents streamed from Parquet files, sharded by rank and worker.

The class derives from ``torch.utils.data.IterableDataset`` when torch is
installed. It is built on first use (module ``__getattr__``), so importing
:mod:`lodtensor.text` does not import torch.
"""

import os
import threading

import numpy as np

from ..ops._common import int_arg
from ._cut import cut
from ._pieces import emit
from ._shards import files_of, layouts

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
        self._position = self._resume = None  # where the last iteration stands; a loaded one to start from
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
        epoch = _natural(epoch, "epoch", "ParquetCorpus.set_epoch()")
        if epoch != self.epoch:
            self._resume = None  # a loaded position belongs to its epoch
        self.epoch = epoch

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
        start, self._resume = self._resume, None  # a loaded position starts the next iteration only
        if start is None:
            start = (0, 0, 0)
        else:
            start, saved = start
            if saved != (worker_id, num_workers) or start[0] > len(files):
                raise ValueError(
                    f"ParquetCorpus: the loaded state was saved by worker {saved[0]} of {saved[1]} at file "
                    f"{start[0]}; this is worker {worker_id} of {num_workers} with {len(files)} file(s): resume "
                    f"with the same DataLoader num_workers"
                )
        self._position = start
        return self._batches(files, stride, offset, start)

    def state_dict(self):
        """Where this iteration stands: ``load_state_dict`` of it resumes after the last batch yielded.

        A dict of plain values (``torch.save``, JSON): the epoch, the position
        (the file of this shard's list, the documents of it already batched, the
        documents before it), the DataLoader worker, and what the corpus was
        built with. ``torchdata``'s ``StatefulDataLoader`` saves and restores it
        per worker by itself; without it, call it in the process that iterates.
        Resuming skips the files before the position unread; the documents of
        its file before it are read and dropped.

        >>> import os, tempfile
        >>> import lodtensor as lt
        >>> from lodtensor.text import ParquetCorpus
        >>> path = os.path.join(tempfile.mkdtemp(), "docs.parquet")
        >>> lt.write_parquet(path, {"words": lt.from_nested_list([[[1, 2]], [[3]], [[4, 5]], [[6]]], lod_level=2)})
        >>> corpus = ParquetCorpus(path, "words", batch_tokens=2, num_replicas=1, rank=0)
        >>> batches = iter(corpus)
        >>> next(batches).tolist(), corpus.state_dict()["position"]
        ([[[1, 2]]], [0, 1, 1])
        >>> state = corpus.state_dict()
        >>> resumed = ParquetCorpus(path, "words", batch_tokens=2, num_replicas=1, rank=0)
        >>> resumed.load_state_dict(state)
        >>> [batch.tolist() for batch in resumed]  # the batches that followed
        [[[[3]]], [[[4, 5]]], [[[6]]]]
        """
        position = self._position if self._resume is None else self._resume[0]
        worker = _worker() if self._resume is None else self._resume[1]
        return {"epoch": self.epoch, "position": None if position is None else list(position),
                "worker": list(worker), "corpus": self._identity()}

    def load_state_dict(self, state):
        """Resume from :meth:`state_dict`'s ``state``: the next iteration starts after its last batch.

        The state is checked (it may come from a file): its corpus must be this one (the
        same file names, column, batch_tokens, ranks, shuffle and seed), else ValueError
        naming what differs; the epoch is set to the saved one (``set_epoch`` to
        another epoch drops the position). :meth:`state_dict` shows a resume.

        >>> import os, tempfile
        >>> import lodtensor as lt
        >>> from lodtensor.text import ParquetCorpus
        >>> path = os.path.join(tempfile.mkdtemp(), "docs.parquet")
        >>> lt.write_parquet(path, {"words": lt.from_nested_list([[[1, 2]], [[3]]], lod_level=2)})
        >>> state = ParquetCorpus(path, "words", batch_tokens=2, num_replicas=1, rank=0).state_dict()
        >>> ParquetCorpus(path, "words", batch_tokens=3, num_replicas=1, rank=0).load_state_dict(state)
        Traceback (most recent call last):
        ...
        ValueError: ParquetCorpus.load_state_dict(): the state was saved by another corpus (batch_tokens ...)
        """
        name = "ParquetCorpus.load_state_dict()"
        keys = {"epoch", "position", "worker", "corpus"}
        if not isinstance(state, dict) or set(state) != keys:
            got = sorted(map(str, state)) if isinstance(state, dict) else type(state).__name__
            raise TypeError(f"{name}: state must be a dict with keys {sorted(keys)} (from state_dict()), got {got}")
        epoch = _natural(state["epoch"], "state['epoch']", name)
        position, worker = state["position"], state["worker"]
        if position is not None:
            position = _naturals(position, 3, "state['position']", name)
        worker = _naturals(worker, 2, "state['worker']", name)
        if worker[0] >= worker[1]:
            raise ValueError(f"{name}: state['worker'] must be [id, count] with id < count, got {state['worker']!r}")
        mine = self._identity()
        theirs = state["corpus"] if isinstance(state["corpus"], dict) else {}
        differ = [k for k in mine if theirs.get(k) != mine[k]]
        if differ or set(theirs) != set(mine):
            raise ValueError(f"{name}: the state was saved by another corpus ({', '.join(differ or ['keys'])} "
                             f"differ: {[theirs.get(k) for k in differ]} saved, {[mine[k] for k in differ]} here)")
        self.epoch = epoch
        self._resume = None if position is None else (position, worker)

    def _identity(self):
        """What the batches of an epoch depend on (a saved position is only valid for the same)."""
        return {"files": [os.path.basename(f) for f in self.files], "column": self.column,
                "batch_tokens": self.batch_tokens, "num_replicas": self.num_replicas, "rank": self.rank,
                "shuffle": self.shuffle, "seed": self.seed}

    def _batches(self, files, stride, offset, start=(0, 0, 0)):
        from ..interop import read_parquet

        columns = [self.column, *[c for c in self.with_columns if c != self.column]]
        records = (
            (i, files[i], record)
            for i in range(start[0], len(files))
            for record in read_parquet(
                files[i], columns=columns, batch_size=self._read_size(files[i]),
                verify_checksums=self.verify_checksums,
            )
        )
        if self.prefetch:
            records = _read_ahead(records)
        for parts, position in cut(records, columns, self.layout, self.batch_tokens, stride, offset, start):
            self._position = position  # read by state_dict() while the batch is in use
            yield emit(parts)

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


def _naturals(value, count, what, name):
    if not isinstance(value, (list, tuple)) or len(value) != count:
        raise ValueError(f"{name}: {what} must be a list of {count} ints >= 0, got {value!r:.200}")
    return tuple(_natural(v, what, name) for v in value)


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
