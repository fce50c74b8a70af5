"""A LoD level of no sequence (offsets ``[0]``) through fluid's Paddle files and layers, the text layer
(encode, batch, lookup, ParquetCorpus) and the LoD collectives. (Real Paddle reading these files:
tests/paddle/test_paddle_hollow_io.py.)"""

import io
import pickle

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.fluid import io as fio
from tests.hollow import hollow_cases

CASES = hollow_cases()


def _same(back, t):
    assert back.lod() == t.lod()
    data = np.asarray(back.numpy())
    assert data.dtype == t.numpy().dtype and data.shape == t.numpy().shape


# -- fluid: Paddle's files -----------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CASES))
def test_fluid_lod_tensor_file_round_trip(tmp_path, name):
    t = CASES[name]
    buf = io.BytesIO()
    fio.save_lod_tensor(t, buf)  # Paddle's own save operator writes such files (sequence_expand, repeats 0)
    _same(fio.load_lod_tensor(io.BytesIO(buf.getvalue())), t)
    fio.save_lod_tensor(t, tmp_path / name)
    state = fio.load_program_state(str(tmp_path))
    assert state[name].shape == t.numpy().shape and state[name].dtype == t.numpy().dtype


def test_fluid_combined_file_round_trip():
    buf = io.BytesIO()
    fio.save_combine(CASES, buf)
    back = fio.load_combine(io.BytesIO(buf.getvalue()), list(CASES))
    for name, t in CASES.items():
        _same(back[name], t)


def test_fluid_file_bytes_of_a_level_of_no_sequence():
    """The lod as Paddle writes it: per level its byte size, then uint64 offsets; [0] is 8 bytes."""
    buf = io.BytesIO()
    fio.save_lod_tensor(CASES["docs_without_sentences"], buf)
    raw = buf.getvalue()
    head = np.frombuffer(raw[4:12], "<u8").tolist() + np.frombuffer(raw[12:60], "<u8").tolist()
    assert head == [2, 24, 0, 0, 0, 8, 0]  # 2 levels: 24 bytes [0, 0, 0], 8 bytes [0]


def test_fluid_layers_on_a_feed_of_no_sequence():
    torch = pytest.importorskip("torch")
    import lodtensor.fluid as fluid

    L = fluid.layers

    def net():
        ids = L.data(name="ids", shape=[1], dtype="int64", lod_level=2)
        emb = L.embedding(input=ids, size=[10, 4])
        hidden, _ = L.dynamic_lstm(input=L.fc(input=emb, size=8), size=8)
        conv = L.sequence_conv(input=emb, num_filters=3)
        return L.sequence_pool(hidden, "max"), L.sequence_last_step(conv), L.sequence_softmax(L.fc(input=emb, size=1))

    program = fluid.Program(net)
    for lod, pooled in [([[0, 0, 0], [0]], [[0, 0, 0]]), ([[0], [0]], [[0]])]:
        ids = lt.LoDTensor(np.zeros((0, 1), "int64"), lod)
        pool, last, soft = program(feed={"ids": ids})
        assert pool.lod() == pooled and tuple(pool.data.shape) == (0, 2)
        assert last.lod() == pooled and tuple(last.data.shape) == (0, 3)
        assert soft.lod() == lod and tuple(soft.data.shape) == (0, 1)
        assert isinstance(pool.data, torch.Tensor)


# -- text ----------------------------------------------------------------------------------------
def test_batch_and_unbind_with_empty_documents():
    from lodtensor import text

    vocab = text.Vocab(["a", "b"])
    t = text.batch([[], []], vocab=vocab, lod_level=2)
    assert t.lod() == [[0, 0, 0], [0]] and t.data.shape == (0,) and t.data.dtype == np.int64
    assert [d.lod() for d in t.unbind()] == [[[0]], [[0]]]
    assert text.batch([], vocab=vocab, lod_level=2).lod() == [[0], [0]]
    mixed = text.batch([[["a", "b"]], []], vocab=vocab, lod_level=2)
    assert mixed.lod() == [[0, 1, 1], [0, 2]] and [d.lod() for d in mixed.unbind()] == [[[0, 2]], [[0]]]
    assert mixed[1:].lod() == [[0, 0], [0]]


def test_lookup_of_documents_without_sentences():
    pa = pytest.importorskip("pyarrow")
    from lodtensor import text

    vocab = text.Vocab(["the"])
    typ = pa.list_(pa.list_(pa.string()))
    for docs, lod in [([[], []], [[0, 0, 0], [0]]), ([], [[0], [0]])]:
        t = text.lookup(pa.array(docs, typ), vocab)  # was "list level 1 holds no lists"
        assert t.lod() == lod and t.data.shape == (0,) and t.data.dtype == np.int64
        ref = text.batch(docs, vocab=vocab, lod_level=2)
        assert ref.lod() == lod


def test_encode_with_no_sentence_anywhere():
    pytest.importorskip("pyarrow")
    pytest.importorskip("tokenizers")
    from lodtensor import text

    tok = text.train_tokenizer(["the cat sat. the dog ran!"] * 20, vocab_size=60, min_frequency=1)
    empty = text.encode(["", "  "], tok)  # was refused: "the documents hold no sentence"
    assert empty.lod() == [[0, 0, 0], [0]] and empty.data.shape == (0,) and empty.data.dtype == np.int64
    assert [d.lod() for d in empty.unbind()] == [[[0]], [[0]]]
    assert text.encode([], tok).lod() == [[0], [0]]
    assert text.encode([], tok, split_sentences=False).lod() == [[0]]
    assert text.encode(["", ""], tok, split_sentences=False).lod() == [[0, 0, 0]]


def test_corpus_batches_of_only_empty_documents_are_exact(tmp_path):
    pytest.importorskip("pyarrow")
    from lodtensor.text import ParquetCorpus

    path = str(tmp_path / "docs.parquet")
    lt.write_parquet(path, {"w": lt.from_nested_list([[], [[1, 2, 3]], [], []], lod_level=2),
                            "label": lt.LoDTensor(np.arange(4))})  # fmt: skip
    corpus = ParquetCorpus(path, "w", batch_tokens=1, num_replicas=1, rank=0, with_columns=["label"])
    batches = list(corpus)
    assert [(w.lod(), label.tolist()) for w, label in batches] == [
        ([[0, 0], [0]], [0]),  # the first document alone: the next does not fit the budget
        ([[0, 1], [0, 3]], [1]),
        ([[0, 0, 0], [0]], [2, 3]),  # two documents without sentences: one batch (was joined to the one before)
    ]
    for w, _ in batches:
        _same(pickle.loads(pickle.dumps(w)), w)


def test_pieces_take_documents_without_sentences():
    from lodtensor.text._pieces import join, split, take

    t = lt.LoDTensor(np.arange(3), [[0, 1, 1, 1, 2], [0, 2, 3]])
    piece = take(t, np.array([1, 2]))
    assert piece.lod() == [[0, 0, 0], [0]] and piece.data.shape == (0,)
    assert [p.lod() for p in split(t, [0, 1, 3, 4])] == [[[0, 1], [0, 2]], [[0, 0, 0], [0]], [[0, 1], [0, 1]]]
    (joined,) = join([[piece], [take(t, np.array([3]))], [piece]])
    assert joined.lod() == [[0, 0, 0, 1, 1, 1], [0, 1]] and joined.data.tolist() == [2]


def test_fold_hollow_is_gone():
    from lodtensor.text import _pieces

    assert not hasattr(_pieces, "fold_hollow") and "fold_hollow" not in _pieces.__all__


# -- distributed ---------------------------------------------------------------------------------
def _hollow_mix(rank):
    """Rank 0 holds documents without sentences, rank 1 an ordinary batch, rank 2 no document at all."""
    if rank == 0:
        return lt.LoDTensor(np.zeros((0, 2), "float32"), [[0, 0, 0], [0]])
    if rank == 1:
        return lt.LoDTensor(np.arange(6, dtype="float32").reshape(3, 2), [[0, 1, 2], [0, 2, 3]])
    return lt.LoDTensor(np.zeros((0, 2), "float32"), [[0], [0]])


def hollow_collectives(rank, world):
    """Run on every rank: every collective with hollow tensors on some ranks; returns what it saw."""
    import lodtensor.distributed as ld

    mine = _hollow_mix(rank)
    out = {"all_gather": [t.lod() for t in ld.all_gather(mine, timeout=30)]}
    got = ld.gather(mine, dst=world - 1, timeout=30)
    out["gather"] = None if got is None else [t.lod() for t in got]
    out["broadcast"] = ld.broadcast(mine if rank == 0 else None, src=0, timeout=30).lod()
    lists = [_hollow_mix((rank + j) % 3) for j in range(world)]
    out["scatter"] = ld.scatter(lists if rank == 1 else None, src=1 % world, timeout=30).lod()
    out["all_to_all"] = [t.lod() for t in ld.all_to_all(lists, timeout=30)]
    out["shapes"] = [tuple(t.data.shape) for t in ld.all_gather(mine, timeout=30)]
    return out


@pytest.mark.slow
def test_collectives_with_hollow_tensors_on_two_ranks(tmp_path):
    pytest.importorskip("torch.distributed")
    from tests.distributed._harness import run_ranks, values

    lods = [_hollow_mix(r).lod() for r in range(3)]
    results = values(run_ranks("tests.test_hollow_io:hollow_collectives", 2, tmp_path))
    for rank, got in enumerate(results):
        assert got["all_gather"] == lods[:2]  # was "the header from rank 0 is corrupt (sequences (2, 0))"
        assert got["gather"] == (lods[:2] if rank == 1 else None)
        assert got["broadcast"] == lods[0]
        assert got["scatter"] == lods[(1 + rank) % 3]  # rank 1's list: its item j is _hollow_mix(1 + j)
        assert got["all_to_all"] == [lods[(r + rank) % 3] for r in range(2)]
        assert got["shapes"] == [(0, 2), (3, 2)]


def test_collectives_with_hollow_tensors_in_a_world_of_one(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    import lodtensor.distributed as ld

    if dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        for t in CASES.values():
            assert ld.all_gather(t)[0] is t and ld.broadcast(t) is t and ld.scatter([t]) is t
            assert ld.all_to_all([t])[0] is t and ld.gather(t)[0] is t
    finally:
        dist.destroy_process_group()


def test_wire_items_of_no_sequence_decode():
    from lodtensor.distributed import _wire

    geom = (2, "float32", (2,), "numpy")
    item = _wire._item("all_gather", 0, np.array([0, 2, 0] + [0] * (_wire.ITEM - 3)), geom)
    assert (item.rows, item.counts) == (0, (2, 0))
    with pytest.raises(ValueError, match="corrupt"):
        _wire._item("all_gather", 0, np.array([0, 2, -1] + [0] * (_wire.ITEM - 3)), geom)
