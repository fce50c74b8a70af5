"""lodtensor.text from real data: Arrow / Parquet / datasets columns and real tokenizers."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import text

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

docs_st = st.lists(st.text(alphabet="ab .!?\n\t", max_size=30), min_size=1, max_size=8)


def _reference_sentences(doc):
    """The documented rule, in plain Python: split after [.!?] + white space, or at line breaks."""
    marked = re.sub(r"([.!?])\s+", "\\1\n", doc)
    return [s.strip() for s in marked.split("\n") if s.strip()]


@given(docs=docs_st)
def test_split_sentences_follows_the_rule(docs):
    sentences, offsets = text.split_sentences(docs)
    want = [_reference_sentences(d) for d in docs]
    got = sentences.to_pylist()
    assert [got[a:b] for a, b in zip(offsets[:-1], offsets[1:])] == want


words_st = st.lists(
    st.lists(st.lists(st.sampled_from(["the", "cat", "sat", "dog", "zebra"]), max_size=4), max_size=3),
    min_size=1,
    max_size=5,
)


@given(docs=words_st)
def test_lookup_equals_batch(docs):
    vocab = text.Vocab(["the", "cat", "sat", "dog"])
    col = pa.array(docs, type=pa.list_(pa.list_(pa.string())))
    # no sentence anywhere: the word level holds no sequence ([0]), as batch() gives too
    ref = text.batch(docs, vocab=vocab, lod_level=2)
    got = text.lookup(col, vocab)
    assert got.lod() == ref.lod() and got.data.tolist() == ref.data.tolist()


def test_lookup_columns_and_bad_input():
    vocab = text.Vocab(["the", "cat"])
    table = pa.table({"words": pa.array([[["the", "cat"]], [["cat", "owl"]]])})
    t = text.lookup(table, vocab, column="words")
    assert t.tolist() == [[[2, 3]], [[3, 1]]]
    datasets = pytest.importorskip("datasets")
    assert text.lookup(datasets.Dataset(table), vocab, column="words").tolist() == t.tolist()
    strict = text.Vocab(["the"], specials=(), unk=None)
    with pytest.raises(KeyError, match="token 'cat' \\(position 1\\)"):
        text.lookup(pa.array([["the", "cat"]]), strict)
    with pytest.raises(TypeError, match="innermost values must be strings"):
        text.lookup(pa.array([[1, 2]]), vocab)
    with pytest.raises(ValueError, match="null"):
        text.lookup(pa.array([["the", None]]), vocab)


CORPUS = [
    "The cat sat on the mat. The dog barked!\nA bird sang.",
    "",
    "Markets rose today? Stocks fell.",
    "One more sentence without an end",
] * 10


@pytest.fixture(scope="module", params=["wordpiece", "bpe"])
def tokenizer(request):
    pytest.importorskip("tokenizers")
    return text.train_tokenizer(CORPUS, model=request.param, vocab_size=120, min_frequency=1)


def test_encode_equals_per_sentence_tokenizer(tokenizer):
    t = text.encode(CORPUS, tokenizer)
    assert t.lod_level == 2 and t.data.dtype == np.int64 and len(t) == len(CORPUS)
    for doc, got in zip(CORPUS[:4], t.unbind()):
        sentences = _reference_sentences(doc)
        assert len(got) == len(sentences)
        for s, ids in zip(sentences, got.unbind() if len(sentences) else []):
            assert ids.data.tolist() == tokenizer.encode(s, add_special_tokens=False).ids
    flat = text.encode(CORPUS, tokenizer, split_sentences=False)
    assert flat.lod_level == 1 and flat[0].data.tolist() == tokenizer.encode(CORPUS[0]).ids


def test_encode_from_parquet_and_datasets(tokenizer, tmp_path):
    path = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"text": CORPUS, "label": list(range(len(CORPUS)))}), path, row_group_size=7)
    column = pq.read_table(path)["text"]  # several chunks
    want = text.encode(CORPUS, tokenizer)
    got = text.encode(column, tokenizer)
    assert got.lod() == want.lod() and np.array_equal(got.data, want.data)
    # the tokenized corpus goes back to Parquet as a 2-level column
    out = tmp_path / "tokens.parquet"
    lt.write_parquet(out, {"tokens": got})
    assert lt.read_parquet(out)["tokens"].lod() == want.lod()
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": CORPUS})
    assert text.encode(ds, tokenizer, column="text").lod() == want.lod()
    assert text.encode(ds["text"], tokenizer).lod() == want.lod()


def test_tokenizer_special_ids_and_bad_input(tokenizer):
    assert tokenizer.token_to_id("[PAD]") == 0 and tokenizer.token_to_id("[UNK]") == 1
    with pytest.raises(ValueError, match="model must be 'wordpiece' or 'bpe'"):
        text.train_tokenizer(CORPUS, model="unigram")
    with pytest.raises(ValueError, match="null"):
        text.encode(pa.array(["a.", None]), tokenizer)
    with pytest.raises(TypeError, match="documents must be str"):
        text.encode(["a", 3], tokenizer)
    with pytest.raises(TypeError, match="tokenizer must be a tokenizers.Tokenizer"):
        text.encode(CORPUS, object())
    empty = text.encode(["", "  "], tokenizer)  # no sentence anywhere: was refused, now a valid batch
    assert empty.lod() == [[0, 0, 0], [0]] and empty.data.shape == (0,) and empty.data.dtype == np.int64
