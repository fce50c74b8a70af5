"""Bug hunt of lodtensor.distributed: hostile heads, roots that are no int64 rank, subgroups, sampler seeds.

Multi-process cases run on spawned gloo ranks (``_harness.run_ranks``) with a
per-collective ``timeout`` and a wall limit, so a hang or an abort fails the
test instead of blocking pytest.
"""

import numpy as np
import pytest

import lodtensor as lt

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
ld = pytest.importorskip("lodtensor.distributed")

from lodtensor.distributed import _wire  # noqa: E402

from ._harness import run_ranks, values  # noqa: E402

H = "tests.distributed.test_distributed_hunt"


# -- the wire: a head table crafted by a hostile or broken peer ----------------------------------
def _table(op, mod, world=2):
    """The head table of ``op`` (rank 0 the root, holding a 3-row tensor), after ``mod(table)``."""
    t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    multi = op in ("scatter", "all_to_all")
    rows = []
    for r in range(world):
        sender = r == 0 or op not in ("broadcast", "scatter")
        described = [_wire.describe(t, "t")] * ((world if multi else 1) if sender else 0)
        rows.append(_wire.encode_head(op, 0, described, follow=_wire.ITEM if multi else 0, sends=0))
    table = np.stack(rows)
    mod(table)
    return table


def _set(row, field, value):
    def mod(table):
        table[row, field] = value

    return mod


CORRUPT_HEADS = {
    "negative row dim": ("broadcast", _set(0, _wire._SHAPE, -5)),
    "huge row dim": ("all_gather", _set(1, _wire._SHAPE, 1 << 62)),
    "huge row count": ("broadcast", _set(0, _wire._INLINE, 1 << 62)),
    "rows overflowing int64 bytes": ("gather", _set(1, _wire._INLINE, (1 << 63) - 1)),
    "huge sequence count": ("all_gather", _set(1, _wire._INLINE + 1, 1 << 62)),
    "root announces no tensor": ("broadcast", _set(0, _wire._NITEMS, 0)),
    "two roots": ("broadcast", _set(1, _wire._NITEMS, 1)),
    "all_gather rank without tensor": ("all_gather", _set(1, _wire._NITEMS, 0)),
    "negative bytes sent": ("scatter", _set(0, _wire._SENDS, -99)),
    "unknown status": ("all_gather", _set(1, _wire._STATUS, 99)),
}


@pytest.mark.parametrize("case", list(CORRUPT_HEADS))
def test_decode_head_refuses_corrupt_heads(case):
    """Before the fix these decoded (negative or 2**62-row items, an Item of None for the root), and the
    collective then crashed (AttributeError) or asked torch for a negative or exabyte buffer."""
    op, mod = CORRUPT_HEADS[case]
    table = _table(op, mod)
    with pytest.raises(ValueError, match="corrupt") as info:
        heads = _wire.decode_head(op, table, 2)
        if not heads.follow:  # nothing may come out that a collective would allocate for
            assert all(it is None or 0 <= it.nbytes <= _wire.MAX_BYTES for it in heads.inline)
    assert info.value.args[0].startswith(f"{op}(): ")


def test_decode_items_refuses_huge_items():
    table = _table("all_to_all", lambda t: None)
    heads = _wire.decode_head("all_to_all", table, 2)
    records = np.zeros((2, _wire.ITEM), dtype=np.int64)
    records[:, 0] = 3
    records[:, 1] = 2
    records[1, 0] = 1 << 60
    with pytest.raises(ValueError, match=r"all_to_all\(\): the header from rank 1 announces a tensor of \d+ bytes"):
        _wire.decode_items("all_to_all", records, heads, 2)


# workers (module level, so that spawned ranks import them) ---------------------------------------
def hostile_root(rank, world, op, field, value):
    """Rank 0 (the root) sends a head with ``field`` set to ``value``; what every rank sees, then whether
    the group still works."""
    if rank == 0:
        honest = _wire.encode_head

        def forged(*args, **kwargs):
            head = honest(*args, **kwargs)
            head[field] = value
            return head

        _wire.encode_head = forged
    t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    try:
        if op == "broadcast":
            ld.broadcast(t, src=0, timeout=15)
        else:
            ld.scatter([t] * world if rank == 0 else None, src=0, timeout=15)
        outcome = ("returned", None)
    except Exception as err:  # noqa: BLE001 - the test looks at every kind
        outcome = (type(err).__name__, str(err))
    if rank == 0:
        _wire.encode_head = honest
    after = ld.all_gather(lt.LoDTensor(np.arange(rank + 1.0), [[0, rank + 1]]), timeout=15)
    return outcome, [a.lod() for a in after]


@pytest.mark.parametrize(
    ("op", "field", "value", "expect"),
    [
        ("broadcast", _wire._SHAPE, -5, "corrupt (row shape (-5,))"),  # was: torch.empty(-80) RuntimeError
        ("broadcast", _wire._INLINE, 1 << 60, "announces a tensor of"),  # was: an exabyte torch.empty
        ("broadcast", _wire._NITEMS, 0, "tensors per rank [0, 0]"),  # was: AttributeError on every rank
    ],
)
def test_a_hostile_root_head_raises_valueerror_on_every_rank(op, field, value, expect, tmp_path):
    results = values(run_ranks(f"{H}:hostile_root", 2, tmp_path, op, field, value, pg_timeout=30, wall=120))
    outcomes = [o for o, _ in results]
    assert outcomes[0] == outcomes[1], outcomes  # the same error on every rank: both decoded the same table
    kind, msg = outcomes[0]
    assert kind == "ValueError" and expect in msg and "corrupt" in msg, outcomes
    assert all(after == [[[0, 1]], [[0, 2]]] for _, after in results)  # the group still works


def test_scatter_root_announcing_no_bytes_is_refused(tmp_path):
    """Root's head says it sends 0 bytes while its items announce tensors: the receiver used to skip the
    data exchange and crash reshaping an empty buffer (RuntimeError); now a ValueError naming the cause."""
    results = values(run_ranks(f"{H}:hostile_root", 2, tmp_path, "scatter", _wire._SENDS, 0, pg_timeout=30, wall=120))
    (kind, msg), after = results[1]
    assert kind == "ValueError" and "corrupt" in msg and "no rank sends any" in msg, (kind, msg)
    assert results[0][0] == ("returned", None)  # the root sends nothing, as its head says
    assert after == results[0][1] == [[[0, 1]], [[0, 2]]]  # the group still works


def bad_root(rank, world, op, root):
    """Rank 1 passes ``root`` (no int64 rank), rank 0 passes 0: the outcome on each rank and its duration."""
    import time

    t = lt.LoDTensor(np.arange(4.0), [[0, 1, 4]])
    r = root if rank == 1 else 0
    start = time.monotonic()
    try:
        if op == "gather":
            ld.gather(t, dst=r, timeout=8)
        elif op == "broadcast":
            ld.broadcast(t, src=r, timeout=8)
        else:
            ld.scatter([t] * world, src=r, timeout=8)
        outcome = ("returned", None)
    except Exception as err:  # noqa: BLE001
        outcome = (type(err).__name__, str(err))
    elapsed = time.monotonic() - start
    after = ld.all_gather(lt.LoDTensor(np.arange(rank + 1.0), [[0, rank + 1]]), timeout=15)
    return outcome, elapsed, [a.lod() for a in after]


@pytest.mark.parametrize(("op", "root"), [("gather", 1 << 70), ("broadcast", float("inf")), ("scatter", 0.5)])
def test_a_root_that_is_no_int64_rank_raises_on_every_rank(op, root, tmp_path):
    """Before the fix, 2**70 and inf raised OverflowError on rank 1 before its head was sent (rank 0 then
    waited for the timeout: CollectiveError), and 0.5 was taken as rank 0 (int(0.5))."""
    results = values(run_ranks(f"{H}:bad_root", 2, tmp_path, op, root, pg_timeout=30, wall=120))
    outcomes = [o for o, _, _ in results]
    assert outcomes[0] == outcomes[1], outcomes
    kind, msg = outcomes[0]
    assert kind in ("ValueError", "TypeError") and "on rank 1" in msg, outcomes
    assert all(elapsed < 6 for _, elapsed, _ in results), results  # no rank waited for the timeout
    assert all(after == [[[0, 1]], [[0, 2]]] for _, _, after in results)


def subgroup(rank, world):
    """Every collective over the group {0, 2} of a world of 3 (roots given as global ranks, as torch does)."""
    group = dist.new_group([0, 2])
    t = lt.LoDTensor(np.arange(rank + 2.0), [[0, 1, rank + 2]])
    if rank == 1:
        try:
            ld.all_gather(t, group=group, timeout=10)
        except ValueError as err:
            return str(err)
        return "returned"
    out = {}
    out["all_gather"] = [(g.lod(), g.numpy().tolist()) for g in ld.all_gather(t, group=group, timeout=10)]
    got = ld.gather(t, dst=2, group=group, timeout=10)
    out["gather"] = None if got is None else [g.numpy().tolist() for g in got]
    out["broadcast"] = ld.broadcast(t if rank == 2 else None, src=2, group=group, timeout=10).numpy().tolist()
    parts = [lt.LoDTensor(np.full(k + 1, 10.0 * k), [[0, k + 1]]) for k in range(2)]
    out["scatter"] = ld.scatter(parts if rank == 2 else None, src=2, group=group, timeout=10).numpy().tolist()
    mine = [lt.LoDTensor(np.full(k + 1, rank * 10.0 + k), [[0, k + 1]]) for k in range(2)]
    out["all_to_all"] = [g.numpy().tolist() for g in ld.all_to_all(mine, group=group, timeout=10)]
    try:
        ld.broadcast(t, src=1, group=group, timeout=10)  # global rank 1 is not in the group
    except ValueError as err:
        out["outside"] = str(err)
    return out


@pytest.mark.slow
def test_collectives_over_a_subgroup(tmp_path):
    r0, r1, r2 = values(run_ranks(f"{H}:subgroup", 3, tmp_path, pg_timeout=30, wall=150))
    assert "not a member" in r1
    for rank, out in ((0, r0), (2, r2)):
        assert out["all_gather"] == [([[0, 1, 2]], [0.0, 1.0]), ([[0, 1, 4]], [0.0, 1.0, 2.0, 3.0])]
        assert out["broadcast"] == [0.0, 1.0, 2.0, 3.0]
        g = rank // 2  # group rank
        assert out["scatter"] == [10.0 * g] * (g + 1)
        assert out["all_to_all"] == [[0.0 + g] * (g + 1), [20.0 + g] * (g + 1)]
        assert "src=1 is not a rank of the group" in out["outside"]
    assert r0["gather"] is None and r2["gather"] == [[0.0, 1.0], [0.0, 1.0, 2.0, 3.0]]


# -- the sampler ---------------------------------------------------------------------------------
def test_sampler_takes_negative_seeds_and_epochs_as_torch_does():
    """torch's DistributedSampler seeds a torch.Generator with ``seed + epoch``, which takes negative
    values (modulo 2**64); NumPy's SeedSequence refuses them, and the sampler used to fail at its
    first ``iter()`` with NumPy's bare 'expected non-negative integer'."""
    lengths = [5, 1, 4, 2, 3, 6, 2]

    def plan(seed, epoch):
        s = ld.DistributedBucketSampler(lengths, 6, num_replicas=1, rank=0, seed=seed)
        s.set_epoch(epoch)
        return list(s)

    for seed, epoch in [(-1, 0), (0, -3), (-(2**63), -1)]:
        batches = plan(seed, epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        assert plan(seed, epoch) == batches  # deterministic
        assert plan(seed % 2**64, epoch % 2**64) == batches  # torch's modulo 2**64
    assert plan(3, 1) == plan(3, 1)


def test_sampler_seed_must_be_an_int():
    with pytest.raises(TypeError, match=r"seed must be an int, got 1.7"):
        ld.DistributedBucketSampler([1, 2], 4, num_replicas=1, rank=0, seed=1.7)  # was: silently seed 1


def other_byte_order(rank, world):
    """Every rank sends big-endian NumPy data (other byte order): what arrives (the own tensor of all_gather
    is the rank's own), as dtype names and values."""
    t = lt.LoDTensor(np.arange(rank * 10, rank * 10 + 4, dtype=">f8").reshape(2, 2), [[0, 1, 2]])
    got = ld.all_gather(t, timeout=15)
    one = ld.broadcast(t if rank == 0 else None, src=0, timeout=15)
    return [(a.data.dtype.name, a.data.dtype.isnative or i == rank, a.data.tolist(), a.lod()) for i, a in enumerate(got)
            ] + [(one.data.dtype.name, one.data.dtype.isnative or rank == 0, one.data.tolist())]


def test_data_of_the_other_byte_order_is_carried():
    """Big-endian NumPy data was refused ("has dtype >f8, which the collectives do not carry")."""
    t = lt.LoDTensor(np.arange(4, dtype=">i4"), [[0, 4]])
    assert _wire.describe(t, "t")[0] == "int32"


def test_other_byte_order_across_ranks(tmp_path):
    results = values(run_ranks(f"{H}:other_byte_order", 2, tmp_path, pg_timeout=30, wall=120))
    want = [("float64", True, [[r * 10.0, r * 10 + 1.0], [r * 10 + 2.0, r * 10 + 3.0]], [[0, 1, 2]]) for r in (0, 1)]
    for got in results:
        assert got[:2] == want and got[2] == ("float64", True, want[0][2])
