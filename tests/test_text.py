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


# -- ids that are not ids (#25): a clear error naming the id, never a wrong token or a truncated id -------------
@pytest.mark.parametrize("ids, pattern", [
    ([2, -1], r"id -1 \(position 1\) is out of range for a vocabulary of 4 tokens \(ids 0 to 3\)"),
    ([4], r"id 4 \(position 0\) is out of range for a vocabulary of 4 tokens"),
    (np.array([3, 2**40]), r"id 1099511627776 \(position 1\) is out of range"),
    ([1, 2**70], r"id 1180591620717411303424 \(position 1\) is out of range"),
], ids=["negative", "one past the end", "big", "beyond int64"])
def test_vocab_decode_refuses_ids_out_of_range(ids, pattern):
    with pytest.raises(ValueError, match=pattern):
        text.Vocab(["a", "b"]).decode(ids)


@pytest.mark.parametrize("ids, pattern", [
    ([2, 1.5], r"got float 1.5 at position 1"),
    ([True], r"got bool True at position 0"),
    (["a"], r"got str 'a' at position 0"),
    (np.array([2.0, 3.0]), r"got dtype float64"),
    (5, r"flat sequence of integer ids, got int 5"),
    ([[2, 3]], r"flat \(1-D\) sequence of ids, got shape \(1, 2\)"),
], ids=["float", "bool", "str", "float array", "scalar", "2-D"])
def test_vocab_decode_refuses_ids_that_are_not_integers(ids, pattern):
    with pytest.raises(TypeError, match=pattern):
        text.Vocab(["a", "b"]).decode(ids)


def test_vocab_decode_takes_arrays_tensors_and_lod_tensors():
    vocab = text.Vocab(["a", "b"])
    assert vocab.decode(np.array([2, 3], np.uint8)) == ["a", "b"] and vocab.decode([]) == []
    t = text.batch([["a", "b"], ["b"]], vocab=vocab)
    assert vocab.decode(t) == ["a", "b", "b"]
    torch = pytest.importorskip("torch")
    assert vocab.decode(torch.tensor([3, 0])) == ["b", "<pad>"]


@pytest.mark.parametrize("nested, pattern", [
    ([[1, 2.5]], r"got float 2.5 \(leaf 1\)"),
    ([[1], [2.0]], r"got float 2.0 \(leaf 1\)"),
    ([[True, 2]], r"got bool True \(leaf 0\)"),
    ([[np.float32(1)]], r"got float32"),
    ([["a", "b"]], r"token ids must be integers, got str 'a' \(leaf 0\); pass vocab="),
    ([[1, "a"]], r"token ids must be integers, got str 'a' \(leaf 1\)"),
    ([[1 + 2j]], r"got complex"),
], ids=["float", "integral float", "bool", "numpy float", "str", "mixed", "complex"])
def test_batch_refuses_ids_that_are_not_integers(nested, pattern):
    with pytest.raises(TypeError, match=pattern):
        text.batch(nested)
    with pytest.raises(TypeError, match=pattern):
        text.make_collate()(nested)


def test_batch_ids_must_fit_the_dtype_and_the_dtype_must_be_integer():
    with pytest.raises(ValueError, match=r"id 1099511627776 \(position 1\) does not fit dtype int32"):
        text.batch([[1, 2**40]], dtype="int32")
    with pytest.raises(ValueError, match=r"id -1 \(position 0\) does not fit dtype uint8"):
        text.batch([[-1]], dtype="uint8")
    with pytest.raises(ValueError, match=r"id 300 .* does not fit dtype uint8"):
        text.batch([["x"]], vocab={"x": 300}, dtype="uint8")
    with pytest.raises(TypeError, match="dtype must be an integer dtype for token ids.*float32"):
        text.batch([[1, 2]], dtype="float32")
    t = text.batch([[1, 2], [3]], dtype=np.int16)
    assert t.dtype == np.int16 and t.data.tolist() == [1, 2, 3] and t.lod() == [[0, 2, 3]]
    assert text.batch([[np.int32(3), 4]]).data.tolist() == [3, 4]


@pytest.mark.parametrize("value, exc, pattern", [
    (1.5, TypeError, "maps token 'x' to float 1.5"),
    (True, TypeError, "maps token 'x' to bool True"),
    ("1", TypeError, "maps token 'x' to str '1'"),
    (2**70, ValueError, "does not fit int64"),
], ids=["float", "bool", "str", "huge"])
def test_dict_vocab_ids_must_be_integers(value, exc, pattern):
    with pytest.raises(exc, match=pattern):
        text.batch([["x"]], vocab={"x": value})
    assert text.batch([["x"]], vocab={"x": np.int64(3)}).data.tolist() == [3]


@pytest.mark.gpu
def test_vocab_decode_of_device_ids():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    vocab = text.Vocab(["a", "b"])
    assert vocab.decode(torch.tensor([2, 3], device="cuda")) == ["a", "b"]
    with pytest.raises(ValueError, match="id 7"):
        vocab.decode(torch.tensor([2, 7], device="cuda"))
