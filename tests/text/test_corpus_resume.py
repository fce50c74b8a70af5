"""ParquetCorpus.state_dict / load_state_dict: an epoch resumed after any batch yields exactly the batches
that followed, in process and through torchdata's StatefulDataLoader (its workers save and restore the
corpus state themselves)."""

import copy
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt

pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")

from lodtensor.text import ParquetCorpus  # noqa: E402


def write_corpus(folder, lengths_per_file):
    """Files of documents; document d of file f holds ``lengths`` sentences of ids f * 1000 + d."""
    os.makedirs(folder, exist_ok=True)
    for f, lengths in enumerate(lengths_per_file):
        docs = [[[f * 1000 + d] * n] if n else [] for d, n in enumerate(lengths)]
        lt.write_parquet(os.path.join(folder, f"part-{f:02d}.parquet"),
                         {"words": lt.from_nested_list(docs, lod_level=2, dtype="int64")})
    return folder


def as_lists(batches):
    return [b.tolist() for b in batches]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=7), min_size=1, max_size=4),
    budget=st.integers(1, 8),
    docs_per_read=st.integers(1, 4),
    replicas=st.integers(1, 3),
    shuffle=st.booleans(),
    data=st.data(),
)
def test_resume_after_every_batch_gives_the_batches_that_followed(tmp_path_factory, lengths, budget, docs_per_read,
                                                                   replicas, shuffle, data):
    folder = write_corpus(str(tmp_path_factory.mktemp("c")), lengths)
    rank = data.draw(st.integers(0, replicas - 1))
    epoch = data.draw(st.integers(0, 2))

    def make():
        c = ParquetCorpus(folder, "words", batch_tokens=budget, num_replicas=replicas, rank=rank,
                          shuffle=shuffle, seed=3, docs_per_read=docs_per_read)
        c.set_epoch(epoch)
        return c

    full = as_lists(make())
    for k in range(len(full) + 1):
        corpus = make()
        it = iter(corpus)
        head = [next(it).tolist() for _ in range(k)]
        state = json.loads(json.dumps(corpus.state_dict()))  # plain values: they survive JSON
        resumed = make()
        resumed.load_state_dict(state)
        assert head + as_lists(resumed) == full, (k, state)
        assert as_lists(resumed) == full  # the loaded position starts one iteration only


def test_resume_skips_the_files_before_the_position_unread(tmp_path, monkeypatch):
    folder = write_corpus(str(tmp_path / "c"), [[2, 2], [2, 2], [2, 2]])
    corpus = ParquetCorpus(folder, "words", batch_tokens=2, num_replicas=1, rank=0)
    it = iter(corpus)
    for _ in range(5):
        next(it)
    state = corpus.state_dict()
    assert state["position"] == [2, 1, 5] and state["epoch"] == 0 and state["worker"] == [0, 1]
    import lodtensor.interop as interop

    read = []
    real = interop.read_parquet
    monkeypatch.setattr(interop, "read_parquet", lambda path, *a, **k: read.append(os.path.basename(path))
                        or real(path, *a, **k))
    resumed = ParquetCorpus(folder, "words", batch_tokens=2, num_replicas=1, rank=0)
    resumed.load_state_dict(state)
    assert as_lists(resumed) == [[[[2001, 2001]]]] and read == ["part-02.parquet"]


def test_state_after_the_epoch_resumes_to_nothing_and_set_epoch_drops_a_position(tmp_path):
    folder = write_corpus(str(tmp_path / "c"), [[1, 1, 1]])
    corpus = ParquetCorpus(folder, "words", batch_tokens=1, num_replicas=1, rank=0)
    full = as_lists(corpus)
    resumed = ParquetCorpus(folder, "words", batch_tokens=1, num_replicas=1, rank=0)
    resumed.load_state_dict(corpus.state_dict())
    assert as_lists(resumed) == [] and as_lists(resumed) == full
    it = iter(corpus)
    next(it)
    state = corpus.state_dict()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state  # a loaded position is reported until an iteration takes it
    resumed.set_epoch(0)  # the same epoch: kept
    assert as_lists(resumed) == full[1:]
    resumed.load_state_dict(state)
    resumed.set_epoch(1)  # another epoch: its own batches from the start
    assert as_lists(resumed) == full


def test_a_bad_or_foreign_state_is_refused_and_leaves_the_corpus_as_it_was(tmp_path):
    folder = write_corpus(str(tmp_path / "c"), [[1, 2, 3]])
    corpus = ParquetCorpus(folder, "words", batch_tokens=2, num_replicas=1, rank=0)
    it = iter(corpus)
    next(it)
    good = corpus.state_dict()
    fresh = ParquetCorpus(folder, "words", batch_tokens=2, num_replicas=1, rank=0)
    before = (fresh.epoch, fresh._resume, fresh._position)
    bad = [
        (None, TypeError, "state must be a dict"),
        ({**good, "extra": 1}, TypeError, "keys"),
        ({**good, "epoch": -1}, ValueError, r"state\['epoch'\] must be an int >= 0, got -1"),
        ({**good, "position": [0, -1, 0]}, ValueError, r"state\['position'\] must be an int >= 0"),
        ({**good, "position": [0, 1]}, ValueError, r"state\['position'\] must be a list of 3 ints"),
        ({**good, "worker": [2, 2]}, ValueError, r"id < count"),
        ({**good, "corpus": {**good["corpus"], "batch_tokens": 3}}, ValueError, r"batch_tokens differ: \[3\] saved"),
        ({**good, "corpus": {**good["corpus"], "files": ["other.parquet"]}}, ValueError, "files differ"),
        ({**good, "corpus": "x"}, ValueError, "another corpus"),
    ]
    for state, kind, message in bad:
        saved = copy.deepcopy(state)
        with pytest.raises(kind, match=message):
            fresh.load_state_dict(state)
        assert state == saved and (fresh.epoch, fresh._resume, fresh._position) == before
    other_worker = {**good, "worker": [1, 2]}
    fresh.load_state_dict(other_worker)
    with pytest.raises(ValueError, match="saved by worker 1 of 2 .* this is worker 0 of 1"):
        iter(fresh)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stateful_dataloader_resumes_through_the_corpus_state(tmp_path, num_workers, caplog):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    folder = write_corpus(str(tmp_path / "c"), [[1, 2, 0, 3], [2, 2, 1], [4, 1], [1, 1, 1, 1]])

    def loader():
        corpus = ParquetCorpus(folder, "words", batch_tokens=3, num_replicas=1, rank=0)
        return sdl.StatefulDataLoader(corpus, batch_size=None, num_workers=num_workers,
                                      multiprocessing_context="fork" if num_workers else None)

    full = as_lists(loader())
    for k in (1, 3, len(full) - 1):
        first = loader()
        it = iter(first)
        head = [next(it).tolist() for _ in range(k)]
        state = first.state_dict()
        del it
        second = loader()
        second.load_state_dict(state)
        with caplog.at_level("WARNING"):
            rest = as_lists(second)
        assert head + rest == full, k
        assert "fast-forwarding" not in caplog.text  # the corpus state was used, not a replay of k batches


def test_a_position_past_its_files_documents_is_refused(tmp_path):
    folder = write_corpus(str(tmp_path / "c"), [[1, 1, 1, 1], [2]])
    corpus = ParquetCorpus(folder, "words", batch_tokens=1, num_replicas=1, rank=0)
    it = iter(corpus)
    for _ in range(3):
        next(it)
    state = corpus.state_dict()
    assert state["position"] == [0, 3, 3]
    write_corpus(folder, [[1, 1], [2]])  # the first file rewritten shorter since the state was saved
    resumed = ParquetCorpus(folder, "words", batch_tokens=1, num_replicas=1, rank=0)
    resumed.load_state_dict(state)
    with pytest.raises(ValueError, match="document 3 of the shard's file 0, which holds 2: the file changed"):
        list(resumed)
    write_corpus(folder, [[], [2]])  # now without documents at all
    resumed.load_state_dict(state)
    with pytest.raises(ValueError, match="which holds 0"):
        list(resumed)
