"""Functions the spawned ranks run (module level, so that ``spawn`` children can import them)."""

import time

import numpy as np

import lodtensor as lt
import lodtensor.distributed as ld
from lodtensor.distributed import _wire

CONFIGS = [  # (lod depth, dtype, row shape, library)
    (1, "float32", (3,), "numpy"),
    (2, "int64", (), "numpy"),
    (0, "float64", (2, 2), "torch"),
    (2, "bool", (), "torch"),
    (3, "complex64", (1,), "numpy"),
]


def random_tensor(seed, rank, item, depth, dtype, row_shape, lib, empty=False):
    """A LoDTensor of random lengths (zeros included) that every rank can rebuild from its seed.

    ``empty``: zero rows, every last-level sequence empty.
    """
    rng = np.random.default_rng([seed, rank, item])
    levels = []
    count = int(rng.integers(1, 5))
    for k in range(depth):
        last = k == depth - 1
        lengths = rng.integers(0, 4, size=count)
        if last and empty:
            lengths[:] = 0
        # a level whose lengths are all 0 leaves the next level no sequence (offsets [0]): valid, kept
        levels.append(np.concatenate(([0], np.cumsum(lengths))))
        count = int(levels[-1][-1])
    rows = count if depth else (0 if empty else int(rng.integers(0, 6)))
    data = rng.normal(size=(rows, *row_shape)) * 10
    data = (data > 0) if dtype == "bool" else data.astype(dtype)
    if dtype.startswith("complex"):
        data = data + 1j * rng.normal(size=data.shape).astype(dtype)
    if lib == "torch":
        import torch

        data = torch.from_numpy(np.ascontiguousarray(data))
    return lt.LoDTensor(data, levels or None)


def same(a, b):
    """Exact equality of two LoDTensors: lod, dtype, array library and data."""
    assert a.lod() == b.lod(), (a.lod(), b.lod())
    assert type(a.data) is type(b.data), (type(a.data), type(b.data))
    assert str(a.dtype) == str(b.dtype)
    assert tuple(a.data.shape) == tuple(b.data.shape)
    assert np.array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))


def exact_round_trips(rank, world, seeds):
    """Every collective, for every config and seed; results must equal what each rank held."""
    checked = 0
    for seed in seeds:
        for depth, dtype, row_shape, lib in CONFIGS:
            empty_rank = seed % world  # one rank holds an empty tensor in every round

            def make(
                r, item=0, seed=seed, empty_rank=empty_rank, depth=depth, dtype=dtype, row_shape=row_shape, lib=lib
            ):
                return random_tensor(seed, r, item, depth, dtype, row_shape, lib, empty=(r == empty_rank and item == 0))

            mine = make(rank)
            got = ld.all_gather(mine, timeout=30)
            assert got[rank] is mine
            for r in range(world):
                same(got[r], make(r))
            assert ld.last_call["sent_bytes"] == (world - 1) * _nbytes(mine)
            dst = seed % world
            got = ld.gather(mine, dst=dst, timeout=30)
            if rank == dst:
                for r in range(world):
                    same(got[r], make(r))
            else:
                assert got is None
            src = (seed + 1) % world
            got = ld.broadcast(mine if rank == src else None, src=src, timeout=30)
            same(got, make(src))
            lists = [make(rank, item=j + 1) for j in range(world)]
            got = ld.scatter(lists if rank == src else None, src=src, timeout=30)
            same(got, make(src, item=rank + 1))
            got = ld.all_to_all(lists, timeout=30)
            for r in range(world):
                same(got[r], make(r, item=rank + 1))
            checked += 1
    return checked


def _nbytes(t):
    offsets = sum(len(level) for level in t.lod.levels) * 8
    return _wire.align(offsets) + _wire.align(t.numpy().nbytes)


def mismatches(rank, world):
    """Inputs that disagree across ranks: the message each rank raised, per case."""
    base = np.arange(6, dtype=np.float32).reshape(3, 2)
    cases = {
        "dtype": lt.LoDTensor(base.astype("float64") if rank == world - 1 else base, [[0, 1, 3]]),
        "depth": lt.LoDTensor(base, [[0, 2], [0, 1, 3]] if rank == 0 else [[0, 1, 3]]),
        "row shape": lt.LoDTensor(base.reshape(3, 2, 1) if rank == 1 else base, [[0, 1, 3]]),
        "not a tensor": base if rank == 1 else lt.LoDTensor(base, [[0, 3]]),
    }
    out = {}
    for name, t in cases.items():
        for op in ("all_gather", "gather", "all_to_all"):
            try:
                if op == "all_to_all":
                    ld.all_to_all([t] * world, timeout=30)
                else:
                    getattr(ld, op)(t, timeout=30)
                out[(name, op)] = None
            except (ValueError, TypeError) as err:
                out[(name, op)] = (type(err).__name__, str(err))
    try:  # scatter: the list on src has a bad length
        ld.scatter([lt.LoDTensor(base, [[0, 3]])] * (world + (rank == 0)), src=0, timeout=30)
        out["scatter length"] = None
    except ValueError as err:
        out["scatter length"] = ("ValueError", str(err))
    try:  # ranks disagree on the root
        ld.broadcast(lt.LoDTensor(base, [[0, 3]]), src=rank % 2, timeout=30)
        out["root"] = None
    except ValueError as err:
        out["root"] = ("ValueError", str(err))
    # the group still works after all these errors
    got = ld.all_gather(lt.LoDTensor(base[: rank + 1], [[0, rank + 1]]), timeout=30)
    out["after"] = [g.lod() for g in got]
    return out


def fault(rank, world, mode, timeout):
    """Rank 1 raises inside all_gather (after the sizes exchange); what the others see, and when."""
    t = lt.LoDTensor(np.ones((4 + rank, 8), np.float32), [[0, 2, 4 + rank]])
    if rank == 1:

        def broken(buf, t):
            raise RuntimeError("injected fault while packing on rank 1")

        _wire.pack_into = broken
    start = time.monotonic()
    try:
        ld.all_gather(t, timeout=timeout)
        outcome = ("returned", None)
    except Exception as err:  # noqa: BLE001
        outcome = (type(err).__name__, str(err))
    elapsed = time.monotonic() - start
    if rank == 1 and mode == "stay":
        time.sleep(timeout + 3)  # alive but gone from the collective: the others must time out
    return outcome, elapsed


def corpus_and_sampler_epoch(rank, world, directory, n_docs, workers):
    """One epoch of ParquetCorpus (rank from the group, DataLoader workers) and of the sampler; all ids seen."""
    import torch

    from lodtensor.text import ParquetCorpus

    corpus = ParquetCorpus(directory, "words", 40, with_columns=["doc"], shuffle=True, seed=3)
    corpus.set_epoch(1)
    loader = torch.utils.data.DataLoader(corpus, batch_size=None, num_workers=workers)
    ids = np.array([i for _, doc in loader for i in doc.data.tolist()], dtype=np.int64)
    seen_docs = np.concatenate([t.numpy() for t in ld.all_gather(lt.LoDTensor(ids), timeout=60)])
    lengths = np.random.default_rng(5).integers(0, 30, size=n_docs)
    sampler = ld.DistributedBucketSampler(lengths, batch_tokens=60, seed=9)  # world and rank from the group
    sampler.set_epoch(2)
    mine = np.array([i for b in sampler for i in b], dtype=np.int64)
    counts = ld.all_gather(lt.LoDTensor(np.array([len(sampler)])), timeout=60)
    seen_samples = np.concatenate([t.numpy() for t in ld.all_gather(lt.LoDTensor(mine), timeout=60)])
    return sorted(seen_docs.tolist()), sorted(seen_samples.tolist()), [int(c.numpy()[0]) for c in counts]


# -- the operation matrix: every rank calls its own collective --------------------------------
OPS = ("all_gather", "gather", "broadcast", "scatter", "all_to_all")


def call_op(op, root, t, world, rank, timeout=30):
    """Call collective ``op`` (with ``root`` where it takes one) on ``t``, as a caller would."""
    if op == "all_gather":
        return ld.all_gather(t, timeout=timeout)
    if op == "gather":
        return ld.gather(t, dst=root, timeout=timeout)
    if op == "broadcast":
        return ld.broadcast(t if rank == root else None, src=root, timeout=timeout)
    if op == "scatter":
        return ld.scatter([t] * world if rank == root else None, src=root, timeout=timeout)
    return ld.all_to_all([t] * world, timeout=timeout)


def _summary(out):
    """A comparable digest of a collective's result (lods and data of every tensor, None kept)."""
    if out is None or isinstance(out, lt.LoDTensor):
        out = [out]
    return [None if x is None else (x.lod(), np.asarray(x.numpy()).tolist()) for x in out]


def op_matrix(rank, world, cases):
    """Run ``cases`` (per case, one ``(op, root, rows, dtype)`` per rank); the outcome of each, in order.

    An outcome is ``("ok", digest)`` or ``(exception type, message)``. After the
    cases, one all_gather shows that the group still works.
    """
    outcomes = []
    for case in cases:
        op, root, rows, dtype = case[rank]
        t = lt.LoDTensor(np.arange(rows * 2, dtype=dtype).reshape(rows, 2), [[0, rows // 2, rows]])
        try:
            outcomes.append(("ok", _summary(call_op(op, root, t, world, rank))))
        except (ValueError, TypeError) as err:
            outcomes.append((type(err).__name__, str(err)))
    after = ld.all_gather(lt.LoDTensor(np.arange(rank + 1), [[0, rank + 1]]), timeout=30)
    return outcomes, [g.lod() for g in after]


def cuda_collectives(rank, world):
    """Every collective over the default (nccl) group with CUDA tensors: the results on this rank's GPU
    with what each rank held (returned as host lists for the test to compare)."""
    import torch  # noqa: PLC0415

    device = torch.device("cuda", torch.cuda.current_device())
    mine = [random_tensor(7, rank, k, *config) for k, config in enumerate(CONFIGS) if config[3] == "torch"]
    mine = [lt.LoDTensor(torch.as_tensor(t.numpy()).to(device), t.lod()) for t in mine]
    out = {}
    for k, t in enumerate(mine):
        gathered = ld.all_gather(t)
        assert all(g.data.device == device for g in gathered)
        out[f"all_gather{k}"] = [(g.lod(), g.data.cpu().numpy().tolist()) for g in gathered]
        b = ld.broadcast(t, src=0)
        out[f"broadcast{k}"] = (b.lod(), b.data.cpu().numpy().tolist())
        parts = ld.all_to_all([t] * world)
        out[f"all_to_all{k}"] = [(p.lod(), p.data.cpu().numpy().tolist()) for p in parts]
    return out
