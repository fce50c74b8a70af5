"""LoD collectives: exact round trips on 2 and 3 gloo ranks, mismatches, faults; world_size=1 in-process."""

import numpy as np
import pytest

import lodtensor as lt

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
ld = pytest.importorskip("lodtensor.distributed")

from ._harness import run_ranks, values  # noqa: E402
from ._workers import CONFIGS, random_tensor, same  # noqa: E402

W = "tests.distributed._workers"


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_every_collective_returns_exactly_what_each_rank_held(world, tmp_path):
    checked = values(run_ranks(f"{W}:exact_round_trips", world, tmp_path, list(range(6))))
    assert checked == [6 * len(CONFIGS)] * world


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_mismatches_raise_the_same_error_on_every_rank(world, tmp_path):
    per_rank = values(run_ranks(f"{W}:mismatches", world, tmp_path))
    first = per_rank[0]
    for other in per_rank[1:]:
        assert other == first  # the same type and message on every rank
    for op in ("all_gather", "gather", "all_to_all"):
        kind, msg = first[("dtype", op)]
        assert kind == "ValueError" and "same dtype" in msg and f"float64 on rank {world - 1}" in msg, msg
        kind, msg = first[("depth", op)]
        assert kind == "ValueError" and "same lod depth" in msg and "2 on rank 0" in msg, msg
        kind, msg = first[("row shape", op)]
        assert kind == "ValueError" and "same row shape" in msg and "(2, 1) on rank 1" in msg, msg
        kind, msg = first[("not a tensor", op)]
        assert kind == "TypeError" and "on rank 1" in msg and "LoDTensor" in msg and "ndarray" in msg, msg
    scatter_msg = first["scatter length"][1]
    assert "on rank 0" in scatter_msg and f"one LoDTensor per rank ({world})" in scatter_msg
    assert "same collective with the same root" in first["root"][1]
    assert first["after"] == [[[0, r + 1]] for r in range(world)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stay", "exit"])
def test_a_rank_failing_mid_collective_makes_the_others_fail_within_the_timeout(mode, tmp_path):
    timeout = 3.0
    results = values(run_ranks(f"{W}:fault", 3, tmp_path, mode, timeout, pg_timeout=60, wall=90))
    (kind1, msg1), _ = results[1]
    assert kind1 == "RuntimeError" and "injected fault" in msg1
    for rank in (0, 2):
        (kind, msg), elapsed = results[rank]
        assert kind == "CollectiveError", (kind, msg)
        assert "all_gather()" in msg and "data exchange" in msg and f"rank {rank} of 3" in msg, msg
        assert elapsed < timeout + 5, elapsed  # not the process group's 60 s


# -- one process (world_size=1): the default suite --------------------------------------------
def test_collectives_need_an_initialised_group():
    if dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with pytest.raises(RuntimeError, match=r"all_gather\(\): torch.distributed is not initialised"):
        ld.all_gather(_t())


@pytest.fixture(scope="module")
def world_of_one(tmp_path_factory):
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    path = tmp_path_factory.mktemp("pg") / "init"
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("config", CONFIGS, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CONFIGS])
def test_world_of_one(world_of_one, config):
    t = random_tensor(1, 0, 0, *config)
    assert ld.all_gather(t)[0] is t
    assert ld.gather(t)[0] is t
    assert ld.broadcast(t) is t
    assert ld.scatter([t]) is t
    assert ld.all_to_all([t])[0] is t
    assert ld.last_call["sent_bytes"] == 0  # nothing crosses a process boundary
    same(ld.all_gather(t)[0], t)


@pytest.mark.parametrize(
    ("call", "kind", "match"),
    [
        (lambda: ld.all_gather(np.zeros(3)), TypeError, r"all_gather\(\): on rank 0: t must be a LoDTensor, got nd"),
        (lambda: ld.all_gather(lt.LoDTensor()), ValueError, r"t holds no data"),
        (lambda: ld.gather(_t(), dst=2), ValueError, r"dst=2 is out of range for a world of 1 ranks"),
        (lambda: ld.broadcast(_t(), src="a"), TypeError, r"src must be a rank \(int\), got str 'a'"),
        (lambda: ld.scatter([_t(), _t()]), ValueError, r"one LoDTensor per rank \(1\), got a list of 2"),
        (lambda: ld.all_to_all(_t()), TypeError, r"tensors must be a list of 1 LoDTensors, got LoDTensor"),
        (lambda: ld.all_gather(_t(), timeout=-1), ValueError, r"timeout must be a positive number of seconds"),
        (lambda: ld.all_gather(lt.LoDTensor(np.array(["a"]))), TypeError, r"numeric"),
    ],
)
def test_bad_input_in_a_world_of_one(world_of_one, call, kind, match):
    with pytest.raises(kind, match=match):
        call()


def _t():
    return lt.LoDTensor(np.arange(4.0), [[0, 1, 4]])


@pytest.mark.slow
@pytest.mark.parametrize(("world", "workers", "files"), [(2, 2, 7), (3, 2, 3)])  # files per shard; documents per shard
def test_corpus_and_sampler_see_every_document_once_across_ranks(world, workers, files, tmp_path):
    pytest.importorskip("pyarrow")
    from tests.text.test_corpus import make_docs, write_shards

    n_docs = 90
    write_shards(tmp_path, make_docs(np.random.default_rng(4), n_docs), files)
    results = values(run_ranks(f"{W}:corpus_and_sampler_epoch", world, tmp_path, str(tmp_path), n_docs, workers))
    for docs, samples, counts in results:
        assert docs == list(range(n_docs))  # each document once over ranks and DataLoader workers
        assert samples == list(range(n_docs))  # each sample once over ranks
        assert len(set(counts)) == 1  # the same number of batches on every rank
