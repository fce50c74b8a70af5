"""Second bug hunt of lodtensor.text: specials in Vocab.build's max_size, labels in collate (each test failed
before its fix, unless marked as a guard)."""

import os
import re

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import text


# -- Vocab.build: a special that occurs in the data ------------------------------------------------------------------
def test_vocab_build_max_size_is_not_taken_by_a_special_in_the_data():
    # legacy torchtext's Vocab(counter, max_size=) deletes the specials from the counter before it cuts at
    # max_size; here the most frequent token "<unk>" took the one place and the vocabulary held no real token
    docs = [["<unk>", "<unk>", "<unk>", "a", "b", "b"]]
    assert text.Vocab.build(docs, max_size=1).itos == ["<pad>", "<unk>", "b"]  # was ['<pad>', '<unk>']
    assert text.Vocab.build(docs, max_size=2).itos == ["<pad>", "<unk>", "b", "a"]  # was [..., 'b']
    # specials given as an iterator are read once
    assert text.Vocab.build(docs, specials=iter(["<unk>"]), max_size=1).itos == ["<unk>", "b"]
    # a special still keeps its own id when it is rarer than the cut
    assert text.Vocab.build([["x", "x", "<pad>"]], max_size=1).itos == ["<pad>", "<unk>", "x"]


# -- collate: labels -------------------------------------------------------------------------------------------------
def test_collate_stacks_torch_labels_with_torch():
    torch = pytest.importorskip("torch")
    collate = text.make_collate(backend="torch")
    # torch's default_collate stacks tensors with torch.stack: autograd and dtypes NumPy lacks are kept.
    # Was: "Can't call numpy() on Tensor that requires grad" (RuntimeError), and bfloat16 failed in NumPy.
    w = torch.tensor(2.0, requires_grad=True)
    _, y = collate([([[1]], w * 1), ([[2]], w * 3)])
    assert y.tolist() == [2.0, 6.0] and y.requires_grad
    y.sum().backward()
    assert w.grad.item() == 4.0
    _, y = collate([([[1]], torch.tensor([1, 2], dtype=torch.bfloat16)), ([[2]], torch.tensor([3, 4.5]).bfloat16())])
    assert y.dtype == torch.bfloat16 and y.tolist() == [[1.0, 2.0], [3.0, 4.5]]
    want = torch.utils.data.default_collate([torch.tensor([1, 2]), torch.tensor([3, 4])])
    _, y = collate([([[1]], torch.tensor([1, 2])), ([[2]], torch.tensor([3, 4]))])
    assert torch.equal(y, want) and y.dtype == want.dtype
    with pytest.raises(ValueError, match=r"item 1 of the samples \(torch arrays\) cannot be stacked"):
        collate([([[1]], torch.ones(2)), ([[2]], torch.ones(3))])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_collate_names_labels_that_make_no_array(backend):
    if backend == "torch":
        pytest.importorskip("torch")
    collate = text.make_collate(backend=backend)
    # was: NumPy's "inhomogeneous shape" ValueError, naming neither the item nor the sample
    with pytest.raises(TypeError, match=r"collate\(\): item 1 of the samples \(list \[1, 2\], \.\.\.\) cannot be "
                                        r"stacked into one \w+ array"):
        collate([([[1]], [1, 2]), ([[2]], [3])])
    # numbers work on both backends
    _, y = collate([([[1]], 1), ([[2]], 0)])
    assert y.tolist() == [1, 0]


def test_collate_str_labels_on_torch_are_named():
    pytest.importorskip("torch")
    # was torch's "can't convert np.ndarray of type numpy.str_" (no item named); NumPy keeps str labels
    with pytest.raises(TypeError, match=r"item 1 of the samples \(str 'pos', \.\.\.\) cannot be stacked into one "
                                        r"torch array of numbers"):
        text.make_collate(backend="torch")([([[1]], "pos"), ([[2]], "neg")])
    _, y = text.make_collate()([([[1]], "pos"), ([[2]], "neg")])
    assert y.tolist() == ["pos", "neg"]


# -- ParquetCorpus guards --------------------------------------------------------------------------------------------
def test_corpus_files_with_empty_row_groups_and_more_shards_than_documents(tmp_path):
    """Guard: files with zero-row row groups, a file of no row, and more shards than files or documents:
    every document once, whole, over ranks x workers."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from lodtensor.text import ParquetCorpus

    typ = pa.list_(pa.list_(pa.int64()))
    with pq.ParquetWriter(os.path.join(tmp_path, "a.parquet"), pa.schema([("words", typ)])) as w:
        for part in ([], [[[1, 2]], [[3]]], [], [[[4]], []]):
            w.write_table(pa.table({"words": pa.array(part, typ)}))
    pq.write_table(pa.table({"words": pa.array([], typ)}), os.path.join(tmp_path, "b.parquet"))
    want = sorted(map(repr, [[[1, 2]], [[3]], [[4]], []]))
    for replicas, workers in ((1, 1), (2, 3), (3, 2)):
        got = []
        for rank in range(replicas):
            corpus = ParquetCorpus(tmp_path, "words", 2, num_replicas=replicas, rank=rank, docs_per_read=1)
            for worker in range(workers):
                got += [doc for b in corpus._batches(*corpus.shard(worker, workers)) for doc in b.tolist()]
        assert sorted(map(repr, got)) == want, (replicas, workers)


def test_corpus_with_persistent_spawned_workers(tmp_path):
    """Guard: the corpus (a class made on first use) pickles into spawned, persistent DataLoader workers and
    gives every document once per epoch."""
    torch = pytest.importorskip("torch")
    from lodtensor.text import ParquetCorpus

    for i in range(3):
        docs = [[[10 * i + k] * (k + 1)] for k in range(4)]
        lt.write_parquet(os.path.join(tmp_path, f"f{i}.parquet"),
                         {"words": lt.from_nested_list(docs, dtype="int64", lod_level=2)})
    corpus = ParquetCorpus(tmp_path, "words", 3, num_replicas=1, rank=0)
    loader = torch.utils.data.DataLoader(corpus, batch_size=None, num_workers=2, multiprocessing_context="spawn",
                                         persistent_workers=True)
    want = sorted(10 * i + k for i in range(3) for k in range(4))
    for _ in range(2):
        got = sorted({int(v) for b in loader for v in np.unique(b.data)})
        assert got == want


def test_corpus_num_replicas_without_rank_needs_a_world(tmp_path):
    """torch's DistributedSampler(num_replicas=4) without rank= and without an initialised group raises; the corpus
    took rank 0 on every process, so each read the same quarter of the files and the rest never."""
    from lodtensor.text import ParquetCorpus

    lt.write_parquet(os.path.join(tmp_path, "a.parquet"), {"w": lt.from_nested_list([[[1]]], lod_level=2)})
    for replicas in (4, "4", np.int64(2)):
        with pytest.raises(ValueError, match=re.escape(f"num_replicas={replicas!r} is given but rank is not, and "
                                                       f"torch.distributed is not initialised to tell it; pass rank= "
                                                       f"too")):
            ParquetCorpus(tmp_path, "w", 3, num_replicas=replicas)
    # one process needs no rank; a rank alone means a world of one, as before
    assert (ParquetCorpus(tmp_path, "w", 3, num_replicas=1).rank, ParquetCorpus(tmp_path, "w", 3).rank) == (0, 0)
    with pytest.raises(ValueError, match="0 <= rank < num_replicas, got 2 of 1"):
        ParquetCorpus(tmp_path, "w", 3, rank=2)
    with pytest.raises(ValueError, match="num_replicas >= 1 and 0 <= rank < num_replicas, got 0 of 0"):
        ParquetCorpus(tmp_path, "w", 3, num_replicas=0)


def test_train_tokenizer_takes_numpy_integers():
    pytest.importorskip("tokenizers")
    # the tokenizers trainers take NumPy integers; the check refused them ("vocab_size must be an int > 2, got
    # np.int64(60)", though 60 is one)
    tok = text.train_tokenizer(["the cat sat. the dog ran!"] * 10, vocab_size=np.int64(60), min_frequency=np.int32(1))
    want = text.train_tokenizer(["the cat sat. the dog ran!"] * 10, vocab_size=60, min_frequency=1)
    assert tok.get_vocab_size() == want.get_vocab_size()  # (ids of tied merges vary from run to run)
    assert tok.decode(tok.encode("the dog sat").ids) == "the dog sat"
    for bad in (True, 60.0):
        with pytest.raises(ValueError, match=f"vocab_size must be an int > 2, got {bad!r}"):
            text.train_tokenizer(["a b"], vocab_size=bad)
