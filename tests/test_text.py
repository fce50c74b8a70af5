import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import text

from .reference import flatten_levels, nest
from .strategies import lengths_levels

DOCS = [[["the", "cat", "sat"], ["on", "the", "mat"]], [["a", "dog"]], [[], ["the", "end"]]]


def test_vocab_build_and_lookup():
    vocab = text.Vocab.build(DOCS, min_freq=1)
    assert vocab.itos[:3] == ["<pad>", "<unk>", "the"]
    assert vocab["the"] == 2 and vocab["zebra"] == vocab.unk_id == 1
    assert "cat" in vocab and "zebra" not in vocab
    assert vocab.lookup(["the", "zebra"]).tolist() == [2, 1]
    small = text.Vocab.build(DOCS, min_freq=2)
    assert small.itos == ["<pad>", "<unk>", "the"]
    with pytest.raises(ValueError, match="unk='<oov>' must be one of"):
        text.Vocab(["a"], unk="<oov>")


def test_batch_of_strings_three_levels():
    vocab = text.Vocab.build(DOCS)
    t = text.batch(DOCS, vocab=vocab)
    assert t.lod() == [[0, 2, 3, 5], [0, 3, 6, 8, 8, 10]] and t.dtype == np.int64
    assert vocab.decode(t[2].data.tolist()) == ["the", "end"]
    assert t.tolist()[1] == [[vocab["a"], vocab["dog"]]]


def test_batch_missing_token_without_unk():
    with pytest.raises(KeyError, match="token 'dog' \\(position 1\\) is not in the vocabulary"):
        text.batch([["cat", "dog"]], vocab={"cat": 0})
    strict = text.Vocab(["cat"], specials=(), unk=None)
    with pytest.raises(KeyError, match="no unknown token"):
        text.batch([["cat", "cow"]], vocab=strict)


@given(lengths_levels(min_levels=1, max_levels=3))
def test_batch_of_ids_matches_reference(levels):
    nested = nest(list(range(sum(levels[-1]))), levels)
    t = text.batch(nested, lod_level=len(levels))
    rows, ref = flatten_levels(nested, len(levels))
    assert t.recursive_sequence_lengths() == ref and t.data.tolist() == rows


def test_bucket_sampler():
    lengths = np.random.default_rng(0).integers(1, 100, 1000)
    sampler = text.BucketBatchSampler(lengths, batch_size=32, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 32
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = np.mean([np.ptp(lengths[b]) for b in batches])
    assert spread < 0.2 * np.ptp(lengths)  # buckets group similar lengths
    assert list(sampler) != batches  # a new order each epoch
    dropped = text.BucketBatchSampler(lengths, batch_size=32, drop_last=True)
    assert len(dropped) == 31 and all(len(b) == 32 for b in dropped)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        text.BucketBatchSampler(lengths, batch_size=0)


def test_collate_numpy_and_torch():
    collate = text.make_collate(vocab=text.Vocab.build(DOCS))
    x, y = collate([(DOCS[0], 1), (DOCS[1], 0)])
    assert isinstance(x, lt.LoDTensor) and x.lod() == [[0, 2, 3], [0, 3, 6, 8]] and y.tolist() == [1, 0]
    torch = pytest.importorskip("torch")
    collate_t = text.make_collate(backend="torch")
    xt = collate_t([[[1, 2], [3]], [[4]]])
    assert isinstance(xt.data, torch.Tensor) and xt.lod() == [[0, 2, 3], [0, 2, 3, 4]]


def test_dataloader_end_to_end():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    data = [([[i, i + 1], [i + 2]], i % 2) for i in range(10)]
    loader = DataLoader(data, batch_sampler=text.BucketBatchSampler([3] * 10, batch_size=4, seed=0),
                        collate_fn=text.make_collate(backend="torch"))
    seen = 0
    for x, y in loader:
        assert isinstance(x.data, torch.Tensor) and x.lod_level == 2 and len(x) == len(y)
        seen += len(x)
    assert seen == 10


def test_dense_round_trip_and_pad_batch():
    t = text.batch([[[1, 2], [3]], [[4, 5, 6]]])
    dense, masks = text.to_dense(t)
    assert dense.shape == (2, 2, 3) and text.from_dense(dense, masks).tolist() == t.tolist()
    padded, mask = text.pad_batch(t, multiple_of=8)
    assert padded.shape == (3, 8) and mask.sum() == 6 and mask[2].tolist() == [True] * 3 + [False] * 5
    docs, doc_mask = text.pad_batch(t, level=0)
    assert docs.tolist() == [[1, 2, 3], [4, 5, 6]] and doc_mask.all()


@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=5), min_size=1, max_size=6))
def test_string_batch_decodes_back(sentences):
    vocab = text.Vocab.build([sentences]) if any(sentences) else text.Vocab([])
    t = text.batch(sentences, vocab=vocab)
    assert [vocab.decode(s.data.tolist()) for s in t] == sentences
