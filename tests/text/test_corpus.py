"""ParquetCorpus: every document exactly once per epoch over ranks and workers, whole, within budget."""

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.text import ParquetCorpus

pytest.importorskip("pyarrow")


def make_docs(rng, n_docs, max_sentences=4, max_words=6):
    """Documents -> sentences -> word ids; a document's id is its first column ``doc``."""
    docs = []
    for _ in range(n_docs):
        docs.append(
            [
                rng.integers(1, 100, size=rng.integers(0, max_words + 1)).tolist()
                for _ in range(rng.integers(1, max_sentences + 1))
            ]
        )
    return docs


def write_shards(directory, docs, n_files, row_group_size=7):
    """``docs`` split over ``n_files`` Parquet files, with a ``doc`` id column; the file paths."""
    bounds = np.linspace(0, len(docs), n_files + 1).astype(int)
    paths = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if a == b:
            continue
        words = lt.from_nested_list(docs[a:b], dtype="int64", lod_level=2)
        ids = lt.LoDTensor(np.arange(a, b, dtype=np.int64))
        path = os.path.join(directory, f"shard-{i:03d}.parquet")
        lt.write_parquet(path, {"words": words, "doc": ids}, row_group_size=row_group_size)
        paths.append(path)
    return paths


def all_shards(corpus, workers):
    """Every batch of every (rank, worker) shard, as a list of (shard, batch)."""
    out = []
    for w in range(workers):
        out.extend(((corpus.rank, w), b) for b in corpus._batches(*corpus.shard(w, workers)))
    return out


@given(
    n_docs=st.integers(1, 60),
    n_files=st.integers(1, 6),
    replicas=st.integers(1, 4),
    workers=st.integers(1, 3),
    batch_tokens=st.integers(1, 40),
    docs_per_read=st.integers(1, 9),
    seed=st.integers(0, 1000),
)
def test_every_document_once_per_epoch_whole_and_within_budget(
    tmp_path_factory, n_docs, n_files, replicas, workers, batch_tokens, docs_per_read, seed
):
    rng = np.random.default_rng(seed)
    docs = make_docs(rng, n_docs)
    directory = tmp_path_factory.mktemp("corpus")
    write_shards(directory, docs, n_files)
    seen = []
    for rank in range(replicas):
        corpus = ParquetCorpus(
            directory,
            "words",
            batch_tokens,
            with_columns=["doc"],
            num_replicas=replicas,
            rank=rank,
            docs_per_read=docs_per_read,
            shuffle=bool(seed % 2),
            seed=seed,
        )
        corpus.set_epoch(seed % 3)
        for _, (words, ids) in all_shards(corpus, workers):
            assert words.lod_level == 2 and ids.lod_level == 0 and len(words) == len(ids)
            rows = words.num_rows
            assert rows <= batch_tokens or len(words) == 1  # within budget, or one long document alone
            for i, doc_id in enumerate(ids.data.tolist()):
                assert words[i].tolist() == docs[doc_id]  # whole documents, unchanged
            seen.extend(ids.data.tolist())
    assert sorted(seen) == list(range(n_docs))  # each document exactly once over ranks and workers


@pytest.mark.parametrize("prefetch", [False, True])
def test_batches_fill_the_budget_across_record_batches(tmp_path, prefetch):
    docs = [[[1, 2, 3]] for _ in range(20)]  # 3 words each
    write_shards(tmp_path, docs, 1)
    corpus = ParquetCorpus(tmp_path, "words", 10, num_replicas=1, rank=0, docs_per_read=4, prefetch=prefetch)
    sizes = [t.num_rows for t in corpus]
    assert sizes == [9] * 6 + [6]  # three documents a batch even where a batch spans two record batches


def test_dataloader_workers_split_the_files(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    docs = make_docs(rng, 80)
    write_shards(tmp_path, docs, 8)
    corpus = ParquetCorpus(tmp_path, "words", 30, with_columns=["doc"], num_replicas=1, rank=0)
    assert isinstance(corpus, torch.utils.data.IterableDataset)
    loader = torch.utils.data.DataLoader(corpus, batch_size=None, num_workers=2)
    seen = [i for _, ids in loader for i in ids.data.tolist()]
    assert sorted(seen) == list(range(80))


@pytest.mark.parametrize("prefetch", [False, True])
def test_a_corrupt_shard_is_named(tmp_path, prefetch):
    rng = np.random.default_rng(1)
    paths = write_shards(tmp_path, make_docs(rng, 40), 2)
    corpus = ParquetCorpus(tmp_path, "words", 50, num_replicas=1, rank=0, prefetch=prefetch)
    with open(paths[1], "r+b") as f:  # clobber the footer's metadata after the corpus was built
        f.seek(-40, os.SEEK_END)
        f.write(b"\xff" * 32)
    with pytest.raises(ValueError, match="shard-001.parquet"):
        list(corpus)
    with pytest.raises(ValueError, match="ParquetCorpus.*shard-001.parquet"):  # and when it is built
        ParquetCorpus(tmp_path, "words", 50, num_replicas=1, rank=0, prefetch=prefetch)
    corpus = ParquetCorpus(paths[0], "words", 50, num_replicas=1, rank=0, prefetch=prefetch)
    with open(paths[0], "r+b") as f:  # and a truncated one
        f.truncate(os.path.getsize(paths[0]) // 2)
    with pytest.raises(ValueError, match="shard-000.parquet"):
        list(corpus)


def test_bad_arguments(tmp_path):
    write_shards(tmp_path, [[[1]]], 1)
    with pytest.raises(FileNotFoundError, match="nope"):
        ParquetCorpus(tmp_path / "nope", "words", 10)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no \*.parquet file under the directory"):
        ParquetCorpus(empty, "words", 10)
    with pytest.raises(ValueError, match="batch_tokens must be a positive int, got 0"):
        ParquetCorpus(tmp_path, "words", 0)
    with pytest.raises(ValueError, match="0 <= rank < num_replicas, got 3 of 2"):
        ParquetCorpus(tmp_path, "words", 10, num_replicas=2, rank=3)
    with pytest.raises(KeyError, match="missing"):
        list(ParquetCorpus(tmp_path, "missing", 10))
    with pytest.raises(ValueError, match="'doc' .* is not a list column"):
        list(ParquetCorpus(tmp_path, "doc", 10))


def test_default_read_size_is_a_few_batches_from_the_footer(tmp_path):
    docs = [[[1, 2, 3], [4]], [[5, 6]]] * 100  # 3 words per document on average
    (path,) = write_shards(tmp_path, docs, 1)
    assert ParquetCorpus(path, "words", 1 << 17)._read_size(path) == 4 * (1 << 17) // 3  # four batches
    assert ParquetCorpus(path, "words", 4096)._read_size(path) == (1 << 18) // 3  # at least 256K rows
    long_docs = [[list(range(500))]] * 3  # 500 words per document
    (tmp_path / "long").mkdir()
    (long_path,) = write_shards(tmp_path / "long", long_docs, 1)
    assert ParquetCorpus(long_path, "words", 30)._read_size(long_path) == 1024  # at least 1024 documents
    assert ParquetCorpus(path, "words", 30, docs_per_read=7)._read_size(path) == 7
    corpus = ParquetCorpus(path, "words", 30)
    assert [i for t in corpus for i in t.data.tolist()] == [w for d in docs for s in d for w in s]


@given(
    lengths=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=4), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 12), max_size=6),
)
def test_split_pieces_equal_slicing(lengths, cuts):
    # the corpus cuts a record batch into pieces in one vectorised pass per level: each piece
    # must be exactly the slice t[a:b] (data, every level's offsets), a view of t's data
    from lodtensor.text._pieces import split

    sentences = [len(doc) for doc in lengths]
    words = [w for doc in lengths for w in doc]
    t = lt.LoDTensor(np.arange(sum(words), dtype=np.int64), recursive_sequence_lengths=[sentences, words])
    bounds = sorted({0, len(t), *[c for c in cuts if c <= len(t)]})
    pieces = split(t, bounds)
    assert len(pieces) == len(bounds) - 1
    for piece, a, b in zip(pieces, bounds, bounds[1:]):
        want = t[a:b]
        assert piece.lod() == want.lod() and piece.data.tolist() == want.data.tolist()
        assert np.shares_memory(piece.data, t.data) or piece.num_rows == 0


def test_read_size_follows_a_file_rewritten_between_epochs(tmp_path):
    """The footer hint is parsed once per file version: a shard rewritten with longer documents between
    epochs gets the read size of its new footer (not a stale one that would hold 100x the rows)."""
    (path,) = write_shards(tmp_path, [[[1]]] * 50, 1)  # 1 word per document
    corpus = ParquetCorpus(path, "words", 4096, num_replicas=1, rank=0)
    assert corpus._read_size(path) == (1 << 18)  # 256K documents of one word
    assert corpus._read_size(path) == (1 << 18)  # cached
    docs = [[list(range(100))]] * 50  # rewritten: 100 words per document
    (again,) = write_shards(tmp_path, docs, 1)
    assert again == path
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))  # a later write
    assert corpus._read_size(path) == ParquetCorpus(path, "words", 4096)._read_size(path) == (1 << 18) // 100
    assert [t.num_rows for t in corpus] == [4000] * 1 + [1000]


# -- issue #25 item 8: shards that disagree on a column's layout ---------------------------------
def _shard(path, words, **extra):
    lt.write_parquet(path, {"words": words, **extra})
    return str(path)


@pytest.mark.parametrize(
    ("second", "match"),
    [
        (lt.from_nested_list([[[[1, 2]], [[3]]], [[[4]]]], dtype="int64", lod_level=3), r"3 lod level\(s\) of int64"),
        (lt.from_nested_list([[[1, 2], [3]], [[4]]], dtype="int32", lod_level=2), r"2 lod level\(s\) of int32"),
        (
            lt.LoDTensor(np.zeros((4, 2), np.int64), [[0, 2, 3], [0, 1, 3, 4]]),
            r"2 lod level\(s\) of int64 rows of shape \(2,\)",
        ),
    ],
    ids=["depth", "dtype", "row shape"],
)
def test_shards_that_disagree_are_named_when_the_corpus_is_built(tmp_path, second, match):
    first = lt.from_nested_list([[[1, 2], [3]], [[4]]], dtype="int64", lod_level=2)
    _shard(tmp_path / "a.parquet", first)
    _shard(tmp_path / "b.parquet", second)
    _shard(tmp_path / "c.parquet", second)
    with pytest.raises(ValueError, match=r"shard \S*b\.parquet has column 'words' of " + match) as err:
        ParquetCorpus(tmp_path, "words", 10, num_replicas=1, rank=0)
    assert "a.parquet has 2 lod level(s) of int64" in str(err.value) and "c.parquet" not in str(err.value)


def test_with_columns_must_agree_too(tmp_path):
    words = lt.from_nested_list([[[1, 2], [3]], [[4]]], dtype="int64", lod_level=2)
    _shard(tmp_path / "a.parquet", words, label=lt.LoDTensor(np.array([0, 1], np.int64)))
    _shard(tmp_path / "b.parquet", words, label=lt.LoDTensor(np.array([0.0, 1.0])))
    ParquetCorpus(tmp_path, "words", 10, num_replicas=1, rank=0)  # the words agree; the labels are not read
    with pytest.raises(ValueError, match=r"b\.parquet has column 'label' of 0 lod level\(s\) of float64"):
        ParquetCorpus(tmp_path, "words", 10, with_columns=["label"], num_replicas=1, rank=0)
    with pytest.raises(KeyError, match=r"ParquetCorpus\(\): \S*a\.parquet has no column\(s\) \['nope'\]"):
        ParquetCorpus(tmp_path, "words", 10, with_columns=["nope"], num_replicas=1, rank=0)


def test_a_shard_rewritten_after_the_corpus_was_built_is_refused_on_read(tmp_path):
    # before: documents of a 3-level shard were joined with 2-level ones without a check, so words
    # moved between documents; and a float shard changed the batch dtype mid-epoch
    two = lt.from_nested_list([[[1, 2], [3]], [[4]]], dtype="int64", lod_level=2)
    a, b = _shard(tmp_path / "a.parquet", two), _shard(tmp_path / "b.parquet", two)
    corpus = ParquetCorpus([a, b], "words", 100, num_replicas=1, rank=0)
    assert [t.lod_level for t in corpus] == [2]
    _shard(b, lt.from_nested_list([[[[5]], [[6, 7]]]], dtype="int64", lod_level=3))
    with pytest.raises(ValueError, match=r"b\.parquet now holds column 'words' as 3 lod level\(s\)"):
        list(corpus)
    _shard(b, lt.from_nested_list([[[5.0], [6.0, 7.0]]], lod_level=2))
    with pytest.raises(ValueError, match=r"b\.parquet now holds column 'words' as 2 lod level\(s\) of float"):
        list(corpus)


def test_foreign_shards_are_described_by_their_arrow_schema(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"words": pa.array([[[1, 2]], [[3]]], type=pa.list_(pa.list_(pa.int64())))}),
                   tmp_path / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"words": pa.array([[1, 2], [3]], type=pa.list_(pa.int64()))}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"b\.parquet has column 'words' of 1 lod level\(s\) of int64"):
        ParquetCorpus(tmp_path, "words", 10, num_replicas=1, rank=0)
    os.remove(tmp_path / "b.parquet")
    assert [t.tolist() for t in ParquetCorpus(tmp_path, "words", 10, num_replicas=1, rank=0)] == [[[[1, 2]], [[3]]]]


def test_documents_without_sentences_are_batched_as_asked(tmp_path):
    """A batch of only sentence-less documents is a valid batch (its word level holds no sequence, offsets
    [0]) that pickles, as DataLoader workers do: the batches are exactly the budget's, no document moved
    to a neighbour (they were joined to one while the LoD gate refused such a level)."""
    import pickle

    path = str(tmp_path / "docs.parquet")
    lt.write_parquet(path, {"w": lt.from_nested_list([[], [[1, 2, 3]], [], []], lod_level=2)})
    batches = list(ParquetCorpus(path, "w", batch_tokens=1, num_replicas=1, rank=0))
    assert [b.lod() for b in batches] == [[[0, 0], [0]], [[0, 1], [0, 3]], [[0, 0, 0], [0]]]
    assert [np.asarray(b.data).tolist() for b in batches] == [[], [1, 2, 3], []]
    for b in batches:
        again = pickle.loads(pickle.dumps(b))
        assert again.lod() == b.lod() and lt.LoDTensor(np.asarray(b.data), b.lod()).lod() == b.lod()
    # a rank whose documents all lack sentences gets them as one batch (this raised a LoDError)
    lonely = str(tmp_path / "empty.parquet")
    lt.write_parquet(lonely, {"w": lt.from_nested_list([[], [[1]], []], lod_level=2)})
    got = [b.lod() for b in ParquetCorpus(lonely, "w", batch_tokens=10, num_replicas=2, rank=0)]
    assert got == [[[0, 0, 0], [0]]]
    got = [b.lod() for b in ParquetCorpus(lonely, "w", batch_tokens=10, num_replicas=2, rank=1)]
    assert got == [[[0, 1], [0, 1]]]
