"""Bug hunt of lodtensor.text: vocab edge cases, exact ids, Unicode sentence rules, tokenizer settings,
collate, and ParquetCorpus batches/seeds (each test failed before its fix, unless marked as a guard)."""

import os
import re
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import text

pa = pytest.importorskip("pyarrow")


# -- Vocab -------------------------------------------------------------------------------------------------------
def test_vocab_specials_must_be_distinct():
    # was: itos ['<pad>', '<pad>', 'a'], lookup('<pad>') -> 1 but decode(0) -> '<pad>', and text.lookup (Arrow
    # index_in: first match) gave 0 where text.batch gave 1. torchtext refuses duplicates too
    # ("Duplicate token found in tokens list").
    with pytest.raises(ValueError, match="specials must be distinct .* got '<pad>' twice"):
        text.Vocab(["a"], specials=("<pad>", "<unk>", "<pad>"))
    vocab = text.Vocab(["a", "<pad>", "a"])  # repeated tokens (and tokens equal to a special) keep their first id
    assert vocab.itos == ["<pad>", "<unk>", "a"]


@pytest.mark.parametrize("tokens, specials, exc, pattern", [
    ("abc", ("<pad>", "<unk>"), TypeError, "tokens must be an iterable of str, got the single str 'abc'"),
    (["a"], "<unk>", TypeError, "specials must be an iterable of str, got the single str '<unk>'"),
    ([1, 2], ("<pad>", "<unk>"), TypeError, "tokens must be str, got int 1 at position 0"),
    (["a", "b\ud800"], ("<pad>", "<unk>"), ValueError, r"tokens must be valid Unicode, got 'b\\ud800' at position 1"),
], ids=["str tokens", "str specials", "int tokens", "lone surrogate"])
def test_vocab_tokens_must_be_strings(tokens, specials, exc, pattern):
    # was: Vocab("abc") a vocabulary of characters; a surrogate token crashed text.lookup with UnicodeEncodeError
    with pytest.raises(exc, match=pattern):
        text.Vocab(tokens, specials=specials)


def test_vocab_build_limits():
    docs = [["a", "a", "b", "c", "c", "c"]]
    # max_size counts the tokens besides the specials (as legacy torchtext's Vocab(max_size=))
    assert text.Vocab.build(docs, max_size=2).itos == ["<pad>", "<unk>", "c", "a"]
    assert text.Vocab.build(docs, max_size=0).itos == ["<pad>", "<unk>"]
    for bad in (-1, 1.5, True):  # was: -1 silently dropped the rarest token, 1.5 a bare slice TypeError
        with pytest.raises(ValueError, match=f"max_size must be None or an int >= 0, got {bad!r}"):
            text.Vocab.build(docs, max_size=bad)
    with pytest.raises(TypeError, match="min_freq must be a number, got str '2'"):
        text.Vocab.build(docs, min_freq="2")


@pytest.mark.parametrize("nested, pattern", [
    ([["a", 1], ["b", 2]], r"tokens must be str, got int 1 \(leaf 1\)"),
    ([["a", None]], r"got NoneType None \(leaf 1\)"),
], ids=["ints", "None"])
def test_vocab_build_names_a_leaf_that_is_not_a_token(nested, pattern):
    # was: "'<' not supported between instances of 'int' and 'str'" (only when two counts tied)
    with pytest.raises(TypeError, match=pattern):
        text.Vocab.build(nested)


def test_vocab_lookup_takes_token_lists_only():
    vocab = text.Vocab(["a", "b"])
    with pytest.raises(TypeError, match="got the single str 'ab'"):  # was [2, 3]: the characters
        vocab.lookup("ab")
    assert vocab.lookup(iter(["b", "a", "z"])).tolist() == [3, 2, 1]  # was: "has no len()"
    assert vocab["z"] == 1
    with pytest.raises(TypeError, match="a token is a str, got int 3"):  # was 1: <unk>
        vocab[3]
    assert vocab.lookup(np.array(["a", "b"])).tolist() == [2, 3]
    # ids passed with a vocabulary were all <unk> ([1, 1]); a list below lod_level: "unhashable type"
    with pytest.raises(TypeError, match=r"got int 5 \(leaf 0\) where a token \(str\) belongs; pass ids without"):
        text.batch([[5, 6]], vocab=vocab)
    with pytest.raises(TypeError, match=r"got list \['a'\] \(leaf 0\)"):
        text.batch([[["a"]]], vocab=vocab, lod_level=1)
    with pytest.raises(TypeError, match=r"token \['a'\] \(leaf 0\) is a list, not a token"):
        text.batch([[["a"]]], vocab={"a": 0}, lod_level=1)
    with pytest.raises(TypeError, match="vocab must be a text.Vocab or a dict of token -> id, got list"):
        text.batch([["a"]], vocab=["a"])  # was AttributeError


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.lists(st.text(max_size=6), max_size=4), max_size=3), max_size=4))
def test_unicode_tokens_round_trip_through_batch_and_arrow_lookup(docs):
    """Any text tokens (combining marks, RTL, ZWJ sequences, NUL...): encode -> decode is the identity, and
    Arrow's lookup gives batch()'s ids."""
    vocab = text.Vocab.build(docs)  # st.text() draws no lone surrogate
    t = text.batch(docs, vocab=vocab, lod_level=2)
    assert [[vocab.decode(s.data.tolist()) for s in d] for d in t] == docs
    got = text.lookup(pa.array(docs, pa.list_(pa.list_(pa.string()))), vocab)
    assert got.lod() == t.lod() and got.data.tolist() == t.data.tolist()


def test_lookup_vocab_must_be_a_vocab():
    with pytest.raises(TypeError, match="lookup\\(\\): vocab must be a text.Vocab, got dict"):  # was AttributeError
        text.lookup(pa.array([["a"]]), {"a": 0})


def test_vocab_is_shared_safely_between_threads():
    """Guard: one Vocab used by 4 threads at once gives each the ids it gives alone."""
    vocab = text.Vocab([f"w{i}" for i in range(500)])
    rng = np.random.default_rng(0)
    jobs = [[[f"w{j}" for j in rng.integers(0, 600, 50)] for _ in range(20)] for _ in range(4)]
    want = [text.batch(job, vocab=vocab).data.tolist() for job in jobs]
    got, errors = [None] * 4, []

    def run(k):
        try:
            for _ in range(50):
                got[k] = text.batch(jobs[k], vocab=vocab).data.tolist()
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and got == want


# -- ids that numpy would turn into floats ---------------------------------------------------------------------------
def test_ids_of_mixed_integer_types_are_exact():
    # NumPy makes float64 of [np.uint64, int] and of [1, 2**63]; the ids were refused as "not integers"
    assert text.batch([[np.uint64(1), 2], [np.int8(3)]]).data.tolist() == [1, 2, 3]
    assert text.Vocab(["a", "b"]).decode([np.uint64(2), np.int64(3)]) == ["a", "b"]
    want = np.array([1, 2**63], dtype=np.uint64)  # what NumPy makes of them given the dtype
    got = text.batch([[1, 2**63]], dtype="uint64")
    assert got.dtype == np.uint64 and np.array_equal(got.data, want)  # was "does not fit int64"
    with pytest.raises(ValueError, match=r"id 9223372036854775808 \(position 1\) does not fit dtype int64"):
        text.batch([[1, 2**63]])
    with pytest.raises(ValueError, match=r"id -1 \(position 0\) is out of range"):  # was "got dtype float64"
        text.Vocab(["a"]).decode([-1, 2**63])


# -- sentences: the documented rule, with Unicode white space and line breaks --------------------------------------
_SPACES = " \t\n\r\v\f\x1c\x1f\x85\u00a0\u1680\u2003\u2007\u2028\u2029\u202f\u205f\u3000"
_OTHER = "ab.!?\x00\u0301\u05d0\u200d\U0001F468\u200b"


def _reference_sentences(doc):
    """The rule in plain Python: end after [.!?] + white space (re's Unicode \\s) other than the no-break
    spaces, or at a line break."""
    marked = re.sub(r"([.!?])[^\S\u00a0\u2007\u202f]+", "\\1\n", doc)
    return [s.strip() for s in marked.splitlines() if s.strip()]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=_SPACES + _OTHER, max_size=30), min_size=1, max_size=6))
def test_split_sentences_follows_the_rule_for_unicode_text(docs):
    # was: RE2's \s is ASCII only, so "One.\u3000Two" and "One\rTwo" were one sentence
    sentences, offsets = text.split_sentences(docs)
    got = sentences.to_pylist()
    assert [got[a:b] for a, b in zip(offsets[:-1], offsets[1:])] == [_reference_sentences(d) for d in docs]


def test_split_sentences_names_a_lone_surrogate():
    # was: UnicodeEncodeError from pyarrow, naming neither the document nor the argument
    with pytest.raises(ValueError, match=r"document 1 is not valid Unicode: a lone surrogate '\\ud800' at character 2"):
        text.split_sentences(["fine.", "ab\ud800. c"])


# -- real tokenizers -----------------------------------------------------------------------------------------------
def test_encode_refuses_a_padding_or_truncating_tokenizer():
    pytest.importorskip("tokenizers")
    tok = text.train_tokenizer(["the cat sat. the dog ran far away!"] * 20, vocab_size=60, min_frequency=1)
    docs = ["The cat. The dog ran far away!"]
    want = text.encode(docs, tok)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # was: "The cat." stored with 3 [PAD] ids as its tokens
    with pytest.raises(ValueError, match=r"tokenizer has padding enabled .* call tokenizer.no_padding\(\)"):
        text.encode(docs, tok)
    tok.no_padding()
    tok.enable_truncation(max_length=2)  # was: every sentence silently cut to 2 tokens
    with pytest.raises(ValueError, match=r"truncation enabled .* call tokenizer.no_truncation\(\)"):
        text.encode(docs, tok)
    tok.no_truncation()
    got = text.encode(docs, tok)
    assert got.lod() == want.lod() and got.data.tolist() == want.data.tolist()
    with pytest.raises(ValueError, match="min_frequency must be an int >= 0, got -1"):  # was a Rust OverflowError
        text.train_tokenizer(["a b"], vocab_size=10, min_frequency=-1)


# -- collate -------------------------------------------------------------------------------------------------------
def test_collate_refuses_samples_of_different_widths():
    collate = text.make_collate()
    # was: zip() dropped the third item of sample 0 and returned labels [1, 3]
    with pytest.raises(ValueError, match="sample 0 is a tuple of 3 items but sample 1 is a tuple of 2"):
        collate([([[1]], 1, 2), ([[2]], 3)])
    with pytest.raises(ValueError, match="sample 1 is list"):
        collate([([[1]], 1), [[2]]])
    x, y = collate([([[1]], 1), ([[2]], 3)])
    assert x.tolist() == [[[1]], [[2]]] and y.tolist() == [1, 3]


# -- ParquetCorpus ---------------------------------------------------------------------------------------------------
def _write(directory, docs, n_files, row_group_size=3):
    bounds = np.linspace(0, len(docs), n_files + 1).astype(int)
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if a < b:
            words = lt.from_nested_list(docs[a:b], dtype="int64", lod_level=2)
            ids = lt.LoDTensor(np.arange(a, b, dtype=np.int64))
            lt.write_parquet(os.path.join(directory, f"f{i:02d}.parquet"), {"words": words, "doc": ids},
                             row_group_size=row_group_size)


def test_corpus_seed_and_epoch_are_checked_when_given(tmp_path):
    from lodtensor.text import ParquetCorpus

    _write(tmp_path, [[[1, 2]], [[3]]], 2)
    # was: accepted, then "expected non-negative integer" from NumPy when iterating with shuffle=True
    for seed in (-1, None, 1.5):
        with pytest.raises(ValueError, match=f"seed must be an int >= 0, got {seed!r}"):
            ParquetCorpus(tmp_path, "words", 4, num_replicas=1, rank=0, shuffle=True, seed=seed)
    corpus = ParquetCorpus(tmp_path, "words", 4, num_replicas=1, rank=0, shuffle=True, seed=np.int64(3))
    with pytest.raises(ValueError, match="set_epoch\\(\\): epoch must be an int >= 0, got -1"):
        corpus.set_epoch(-1)
    assert corpus.epoch == 0 and sorted(i for b in corpus for i in b.data.tolist()) == [1, 2, 3]


def test_corpus_with_columns_from_an_iterator(tmp_path):
    from lodtensor.text import ParquetCorpus

    _write(tmp_path, [[[1, 2]], [[3]]], 1)
    # was: the type check ran the iterator dry, so the corpus yielded no "doc" column
    corpus = ParquetCorpus(tmp_path, "words", 4, with_columns=iter(["doc"]), num_replicas=1, rank=0)
    assert corpus.with_columns == ("doc",)
    (words, ids), = list(corpus)
    assert ids.data.tolist() == [0, 1]
    with pytest.raises(TypeError, match="with_columns must be a list of column names, got 5"):
        ParquetCorpus(tmp_path, "words", 4, with_columns=5)


docs_st = st.lists(st.lists(st.integers(0, 6), max_size=3), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(lengths=docs_st, budget=st.integers(1, 12), docs_per_read=st.integers(1, 7), n_files=st.integers(1, 3),
       replicas=st.integers(1, 3))
def test_corpus_batches_do_not_depend_on_record_batches(tmp_path_factory, lengths, budget, docs_per_read, n_files,
                                                        replicas):
    """Greedy batches: each is as full as the budget lets it be (the next document would not fit), and the same
    whatever ``docs_per_read``. Was: documents without words after a batch the budget filled exactly formed a
    batch of their own where a record batch ended there, but joined it inside one record batch."""
    from lodtensor.text import ParquetCorpus

    directory = tmp_path_factory.mktemp("corpus")
    docs = [[[k] * w for w in doc] for k, doc in enumerate(lengths)]
    _write(directory, docs, n_files)
    rows = [sum(doc) for doc in lengths]
    for rank in range(replicas):
        runs = []
        for per_read in (docs_per_read, 10**6):
            corpus = ParquetCorpus(directory, "words", budget, with_columns=["doc"], num_replicas=replicas,
                                   rank=rank, docs_per_read=per_read)
            runs.append([ids.data.tolist() for _, ids in corpus])
        assert runs[0] == runs[1]
        for batch, following in zip(runs[0], runs[0][1:]):
            assert sum(rows[k] for k in batch) + rows[following[0]] > budget
            assert sum(rows[k] for k in batch) <= budget or len(batch) == 1


def test_exactly_full_batch_takes_the_empty_documents_after_it(tmp_path):
    from lodtensor.text import ParquetCorpus

    _write(tmp_path, [[[1, 2, 3]], [], [[]], [[4]]], 1)
    for per_read in (1, 2, 4):
        corpus = ParquetCorpus(tmp_path, "words", 3, with_columns=["doc"], num_replicas=1, rank=0,
                               docs_per_read=per_read)
        assert [ids.data.tolist() for _, ids in corpus] == [[0, 1, 2], [3]]  # was [[0], [1, 2], [3]] for 1 and 2


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage"])
def test_hostile_shard_is_named(tmp_path, damage):
    """Guard: a truncated, empty or foreign file under the corpus directory is refused naming it."""
    from lodtensor.text import ParquetCorpus

    _write(tmp_path, [[[1]], [[2]], [[3]]], 3)
    victim = os.path.join(tmp_path, "f01.parquet")
    blob = open(victim, "rb").read()
    with open(victim, "wb") as f:
        f.write({"truncate": blob[: len(blob) // 2], "empty": b"", "garbage": os.urandom(300)}[damage])
    with pytest.raises(ValueError, match="f01.parquet"):
        ParquetCorpus(tmp_path, "words", 4, num_replicas=1, rank=0)


def test_corpus_shuffle_is_deterministic_with_dataloader_workers(tmp_path):
    """Guard: with workers, the same (seed, epoch) gives the same batches in the same order; epochs differ;
    every document once per epoch."""
    torch = pytest.importorskip("torch")
    from lodtensor.text import ParquetCorpus

    rng = np.random.default_rng(0)
    docs = [[rng.integers(1, 9, rng.integers(1, 4)).tolist()] for _ in range(60)]
    _write(tmp_path, docs, 6)

    def epoch(e):
        corpus = ParquetCorpus(tmp_path, "words", 6, with_columns=["doc"], num_replicas=1, rank=0, shuffle=True,
                               seed=7)
        corpus.set_epoch(e)
        loader = torch.utils.data.DataLoader(corpus, batch_size=None, num_workers=2)
        return [ids.data.tolist() for _, ids in loader]

    first, again, other = epoch(1), epoch(1), epoch(2)
    assert first == again and first != other
    for run in (first, other):
        assert sorted(i for ids in run for i in ids) == list(range(60))


def test_a_no_break_space_ends_no_sentence():
    sentences, offsets = text.split_sentences(["Dr.\u00a0Who came. See p.\u202f5 now!\u3000Done"])
    assert sentences.to_pylist() == ["Dr.\u00a0Who came.", "See p.\u202f5 now!", "Done"]


def test_sampler_and_corpus_arguments_are_checked(tmp_path):
    """bucket_factor=0 or -3 became 1 silently; rank=0.7 was cut to 0."""
    with pytest.raises(ValueError, match="bucket_factor must be >= 1, got 0"):
        text.BucketBatchSampler([1, 2, 3], 2, bucket_factor=0)
    from lodtensor.text import ParquetCorpus
    _write(tmp_path, [[[1, 2]], [[3]]], 1)
    for bad in (0.7, "x", 1.5):
        with pytest.raises(TypeError, match="rank must be an integer"):
            ParquetCorpus(tmp_path, "words", 4, num_replicas=2, rank=bad)
    corpus = ParquetCorpus(tmp_path, "words", 4, num_replicas="2", rank="1")  # os.environ's strings
    assert (corpus.num_replicas, corpus.rank) == (2, 1)
