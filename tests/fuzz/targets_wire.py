"""Fuzz targets for collectives and deep LoDs: the 2-rank operation matrix, LoDs of many levels, Arrow/Parquet export.

- ``deep_lods``: LoDs of 0 to 20,000 levels (offsets, lengths, nested lists,
  level by level) with row dimensions, through construction, ``to_arrow``,
  ``lt.save`` and ``write_parquet``: a LoD deeper than ``MAX_LOD_LEVELS`` never
  exists, and every one that exists comes back from each format unchanged (or
  the export refuses it with a ValueError naming the limit).
- ``parquet_mutations``: a file ``write_parquet`` wrote (page checksums on),
  mutated with knowledge of its layout (bits and bytes in the pages, in the
  footer, the footer length, truncation, spliced chunks): every read, whole or
  streamed, is a ValueError naming the file or exactly the tensors written.
- ``collective_pairs``: two gloo ranks, started once per process and kept for
  every example, each calling a drawn collective on drawn tensors: the same
  call everywhere gives the right tensors, anything else the same ValueError or
  TypeError on both ranks; a crash, a hang or another exception fails.
"""

import atexit
import datetime
import os
import queue
import random
import struct
import tempfile

import numpy as np
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.lod import MAX_LOD_LEVELS

from .oracle import ALLOWED
from .targets import target

try:
    import torch
except ImportError:  # the collective target is skipped
    torch = None


# -- deep LoDs -------------------------------------------------------------------------------------
def _deep_lod(data, depth):
    """A valid LoD of ``depth`` levels in a drawn form, over ``rows`` rows: ``(form, value, rows)``."""
    rows = data.draw(st.integers(0, 3))
    form = data.draw(
        st.sampled_from(["offsets", "lengths", "nested", "append"] if depth <= 64 else ["offsets", "lengths"])
    )
    inner = [[0, rows]]  # one sequence holding every row, under one-sequence levels
    offsets = [[0, 1]] * (depth - 1) + inner if depth else []
    if form == "lengths":
        return form, [[1]] * (depth - 1) + [[rows]] if depth else [], rows
    if form == "nested":
        value = [0.0] * rows
        for _ in range(depth):
            value = [value]
        return form, value, rows
    return form, offsets, rows


def _same(a, b):
    assert a.lod() == b.lod() and a.shape() == b.shape() and a.dtype == b.dtype, (
        a.lod(),
        b.lod(),
        a.shape(),
        b.shape(),
    )
    assert np.array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))


@target
def deep_lods(data):
    """Any depth through construction; one that exists through Arrow, lt.save and Parquet unchanged."""
    depth = data.draw(
        st.one_of(st.integers(0, MAX_LOD_LEVELS + 2), st.sampled_from([48, 49, 63, 64, 100, 10_000, 20_000]))
    )
    form, value, rows = _deep_lod(data, depth)
    many = data.draw(st.sampled_from([2, 20, 40]))  # up to 40 row dims: past every nesting limit with the levels
    row_shape = tuple(data.draw(st.lists(st.integers(0, 3 if many == 2 else 1), max_size=many)))
    try:
        if form == "nested":
            t = lt.from_nested_list(value, dtype="float32")
            t = t.with_data(np.zeros((rows, *row_shape), np.float32)) if row_shape and rows else t
        else:
            array = np.zeros((rows, *row_shape), np.float32)
            if form == "offsets":
                t = lt.LoDTensor(array, value or None)
            elif form == "lengths":
                t = lt.LoDTensor(array, recursive_sequence_lengths=value) if value else lt.LoDTensor(array)
            else:  # level by level
                t = lt.LoDTensor(array)
                if value:
                    t = lt.LoDTensor(array, [value[-1]])
                    for _ in range(len(value) - 1):
                        t = lt.LoDTensor(array, [[0, 1], *t.lod()])
    except ValueError as err:
        assert depth > MAX_LOD_LEVELS, (depth, form, err)
        assert "MAX_LOD_LEVELS=32" in str(err), err
        return
    except RecursionError:
        assert form == "nested" and depth > MAX_LOD_LEVELS
        return
    assert t.lod_level == depth <= MAX_LOD_LEVELS, (t.lod_level, depth)
    nesting = depth + max(t.data.ndim - 1, 0)
    try:
        arr = t.to_arrow()
    except ValueError as err:
        assert nesting > 63 and "at most 63" in str(err), (nesting, err)
        return
    _same(lt.from_arrow(arr), t)
    with tempfile.TemporaryDirectory() as d:
        try:
            lt.save(f"{d}/t.arrow", t)
        except ValueError as err:  # lt.load reads rows of at most 31 dims (NumPy 1.x's 32 with the rows)
            assert t.data.ndim - 1 > 31 and "reads at most 31" in str(err), err
        else:
            _same(lt.load(f"{d}/t.arrow"), t)
        try:
            lt.write_parquet(f"{d}/t.parquet", {"t": t})
        except ValueError as err:
            assert nesting > 49 and "at most 49" in str(err), (nesting, err)
            return
        _same(lt.read_parquet(f"{d}/t.parquet")["t"], t)


# -- mutated Parquet files -------------------------------------------------------------------------
def _parquet_tensor(data):
    depth = data.draw(st.integers(0, 3))
    rows = 0 if depth == 0 else None
    lengths, count = [], data.draw(st.integers(1, 4))
    for k in range(depth):
        lv = data.draw(st.lists(st.integers(0 if k == depth - 1 else 1, 4), min_size=count, max_size=count))
        lengths.append(lv)
        count = sum(lv)
    rows = count if depth else data.draw(st.integers(1, 6))
    row_shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    dtype = data.draw(st.sampled_from(["float32", "int64", "int8", "bool", "float64", "uint16"]))
    array = (np.arange(rows * int(np.prod(row_shape, dtype=np.int64))) % 7).astype(dtype).reshape((rows, *row_shape))
    return lt.LoDTensor(array, recursive_sequence_lengths=lengths) if depth else lt.LoDTensor(array)


def _mutate(data, blob):
    """``blob`` mutated knowing where Parquet keeps what: pages first, then the footer, its length, 'PAR1'."""
    blob = bytearray(blob)
    footer_len = struct.unpack("<I", blob[-8:-4])[0]
    footer = max(4, len(blob) - 8 - footer_len)
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(["pages", "footer", "footer", "length", "anywhere", "truncate", "splice"]))
        if not blob:  # truncated to nothing already
            break
        if where == "truncate":
            del blob[rnd.randrange(len(blob)) :]
            continue
        if where == "splice":  # a chunk of the file copied over another place
            a, b, n = rnd.randrange(len(blob)), rnd.randrange(len(blob)), rnd.randrange(1, 64)
            blob[b : b + n] = blob[a : a + n]
            continue
        lo, hi = {
            "pages": (4, footer),
            "footer": (footer, len(blob) - 8),
            "length": (len(blob) - 8, len(blob) - 4),
        }.get(where, (0, len(blob)))
        lo, hi = max(0, min(lo, len(blob) - 1)), max(1, min(hi, len(blob)))
        pos = rnd.randrange(lo, max(lo + 1, hi))
        if data.draw(st.booleans()):
            blob[pos] ^= 1 << rnd.randrange(8)
        else:
            blob[pos] = rnd.randrange(256)
    return bytes(blob)


@target
def parquet_mutations(data):
    """A mutated write_parquet file (checksums on): a ValueError naming it, or exactly what was written."""
    want = {"t": _parquet_tensor(data)}
    if data.draw(st.booleans()):
        want["n"] = lt.LoDTensor(np.arange(len(want["t"]), dtype=np.int32))
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/m.parquet"
        options = data.draw(
            st.sampled_from([{}, {"compression": "none"}, {"use_dictionary": False}, {"row_group_size": 1}])
        )
        lt.write_parquet(path, want, **options)
        with open(path, "rb") as f:
            blob = _mutate(data, f.read())
        with open(path, "wb") as f:
            f.write(blob)
        batch_size = data.draw(st.sampled_from([None, 1, 2]))
        try:
            if batch_size is None:
                got = lt.read_parquet(path)
            else:
                batches = list(lt.read_parquet(path, batch_size=batch_size))
                got = {name: _join([b[name] for b in batches]) for name in want} if batches else {}
        except ValueError as err:
            assert "m.parquet" in str(err), err
            return
        except KeyError as err:  # a column name changed in the footer would be a KeyError only if asked by name
            raise AssertionError(f"KeyError reading all columns: {err}") from None
        assert sorted(got) == sorted(want), (sorted(got), sorted(want))
        for name, t in want.items():
            _same(got[name], t)


def _join(parts):
    data = np.concatenate([np.asarray(p.numpy()) for p in parts])
    levels = []
    for k in range(parts[0].lod_level):
        lengths = np.concatenate([np.diff(p.lod.levels[k]) for p in parts])
        levels.append(np.concatenate(([0], np.cumsum(lengths))))
    return lt.LoDTensor(data, levels or None)


# -- the 2-rank collective matrix ------------------------------------------------------------------
OPS = ("all_gather", "gather", "broadcast", "scatter", "all_to_all")
WORLD = 2
_RANKS = {}


def _tensor(spec):
    """The LoDTensor a case spec describes (rebuilt alike on the ranks and in the checking process)."""
    depth, dtype, row_shape, lib, rows, seed = spec
    rng = np.random.default_rng(seed)
    levels, count = [], rows % 3 + 1
    for k in range(depth):  # every level but the last holds at least one sequence per parent
        lengths = rng.integers(0 if k == depth - 1 else 1, 3, size=count)
        levels.append(np.concatenate(([0], np.cumsum(lengths))))
        count = int(levels[-1][-1])
    rows = count if depth else rows
    array = (rng.normal(size=(rows, *row_shape)) * 5).astype(dtype)
    if lib == "torch" and torch is not None:
        array = torch.from_numpy(np.ascontiguousarray(array))
    return lt.LoDTensor(array, levels or None)


def _argument(case, rank):
    """What rank ``rank`` passes: a tensor, a list of tensors, None (non-root), or something bad."""
    op, root, specs, bad = case[rank]
    if op in ("broadcast", "scatter") and rank != root:
        return None
    if bad == "not a tensor":
        return np.zeros(3)
    if op in ("scatter", "all_to_all"):
        items = [_tensor(s) for s in specs]
        return items + items[:1] if bad == "long list" else items
    return _tensor(specs[0])


def _digest(out):
    if out is None or isinstance(out, lt.LoDTensor):
        out = [out]
    return [
        None if x is None else (x.lod(), str(x.dtype).rsplit(".", 1)[-1], np.asarray(x.numpy()).tolist()) for x in out
    ]


def _run_case(rank, case):
    import lodtensor.distributed as ld

    op, root = case[rank][:2]
    arg = _argument(case, rank)
    try:
        if op == "all_gather":
            out = ld.all_gather(arg, timeout=20)
        elif op == "gather":
            out = ld.gather(arg, dst=root, timeout=20)
        elif op == "broadcast":
            out = ld.broadcast(arg, src=root, timeout=20)
        elif op == "scatter":
            out = ld.scatter(arg, src=root, timeout=20)
        else:
            out = ld.all_to_all(arg, timeout=20)
    except (ValueError, TypeError) as err:
        return (type(err).__name__, str(err))
    except Exception as err:  # noqa: BLE001 - reported, fails the target
        return ("UNEXPECTED " + type(err).__name__, str(err))
    return ("ok", _digest(out))


def _rank_main(rank, init_file, tasks, results, parent):
    """A rank of the fuzz group: run the cases it is sent until told to stop (or its parent is gone)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))  # fmt: skip
    while True:
        try:
            case = tasks.get(timeout=2)
        except queue.Empty:
            if os.getppid() != parent:
                os._exit(0)
            continue
        if case is None:
            break
        results.put((rank, _run_case(rank, case)))
    dist.destroy_process_group()


def _ranks():
    """The two rank processes of this fuzz process (started on first use, stopped at exit)."""
    if not _RANKS:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        init_file = os.path.join(tempfile.mkdtemp(prefix="lt-fuzz-pg-"), "init")
        results = ctx.Queue()
        tasks = [ctx.Queue() for _ in range(WORLD)]
        procs = [ctx.Process(target=_rank_main, args=(r, init_file, tasks[r], results, os.getpid()), daemon=True)
                 for r in range(WORLD)]  # fmt: skip
        for p in procs:
            p.start()
        _RANKS.update(procs=procs, tasks=tasks, results=results)
        atexit.register(_stop_ranks)
    return _RANKS


def _stop_ranks():
    for q in _RANKS.get("tasks", []):
        q.put(None)
    for p in _RANKS.get("procs", []):
        p.join(timeout=10)
        if p.is_alive():
            p.kill()


def _expected(case):
    """The digests each rank must return when every rank made the same valid call."""
    op, root = case[0][:2]
    args = [_argument(case, r) for r in range(WORLD)]
    if op == "all_gather":
        return [_digest(args)] * WORLD
    if op == "gather":
        return [_digest(args) if r == root else _digest(None) for r in range(WORLD)]
    if op == "broadcast":
        return [_digest(args[root])] * WORLD
    if op == "scatter":
        return [_digest(args[root][r]) for r in range(WORLD)]
    return [_digest([args[s][r] for s in range(WORLD)]) for r in range(WORLD)]


def _draw_case(data):
    geometry = (
        data.draw(st.sampled_from([0, 1, 2, 3, 0, 1, 2, 9])),  # 9: past what a collective carries
        data.draw(st.sampled_from(["float32", "int64", "bool", "float64"])),
        tuple(data.draw(st.lists(st.integers(0, 3), max_size=2))),
    )
    case = []
    for _ in range(WORLD):
        op = data.draw(st.sampled_from(OPS))
        root = data.draw(st.integers(0, WORLD - 1)) if op in ("gather", "broadcast", "scatter") else -1
        if data.draw(st.integers(0, 4)) == 0:  # this rank's tensors disagree with the others'
            geometry = (data.draw(st.sampled_from([0, 1, 2])), data.draw(st.sampled_from(["float32", "int8"])), ())
        lib = data.draw(st.sampled_from(["numpy", "torch"]))
        specs = tuple(
            (*geometry, lib, data.draw(st.integers(0, 5)), data.draw(st.integers(0, 2**16))) for _ in range(WORLD)
        )
        bad = data.draw(st.sampled_from([None] * 8 + ["not a tensor", "long list"]))
        case.append((op, root, specs, bad))
    return case


def _exchange(ranks, case):
    """Send ``case`` to both ranks; their outcomes by rank. Fails at once if a rank died, after 60 s if one hangs."""
    for r in range(WORLD):
        ranks["tasks"][r].put(case)
    got = {}
    for _ in range(60):
        dead = [(r, p.exitcode) for r, p in enumerate(ranks["procs"]) if not p.is_alive()]
        if dead:
            raise AssertionError(f"rank(s) died (rank, exit code; negative: a signal): {dead}; case {case}")
        try:
            r, outcome = ranks["results"].get(timeout=1)
        except queue.Empty:
            continue
        got[r] = outcome
        if len(got) == WORLD:
            return got
    raise AssertionError(f"no result from ranks {sorted(set(range(WORLD)) - set(got))} in 60 s (a hang); case {case}")


@target
def collective_pairs(data):
    """Two ranks, each a drawn collective on drawn tensors: right results, or one error on both ranks."""
    if torch is None:
        return
    import torch.distributed as dist

    if not dist.is_available():
        return
    if data.draw(st.booleans()):  # as often as not, both ranks make the same call
        case = _draw_case(data)
        case = [case[0][:2] + c[2:] for c in case]
    else:
        case = _draw_case(data)
    ranks = _ranks()
    if "failed" in ranks:  # the group is in an unknown state after a failure: report that one again
        raise AssertionError(ranks["failed"])
    try:
        got = _exchange(ranks, case)
    except AssertionError as err:
        ranks["failed"] = f"an earlier example broke the rank group: {err}"
        raise
    outcomes = [got[r] for r in range(WORLD)]
    for kind, _ in outcomes:
        assert not kind.startswith("UNEXPECTED"), (case, outcomes)
    calls = {(op, root) for op, root, _, _ in case}
    if all(kind == "ok" for kind, _ in outcomes):
        assert len(calls) == 1, (case, outcomes)
        assert [d for _, d in outcomes] == _expected(case), case
        return
    assert len(set(outcomes)) == 1, (case, outcomes)  # the same error, word for word, on every rank
    kind, msg = outcomes[0]
    assert kind in {e.__name__ for e in ALLOWED}, outcomes
    if len(calls) > 1:
        assert "every rank must call the same collective with the same root" in msg, msg
