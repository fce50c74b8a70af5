"""The fixed cost of an op (issue #27): small batches, where a call does little work.

Workload: 16 sequences of 1..4 rows, width 16, float32 (42 rows, 2.7 KB): the work itself is
a microsecond or two, so the time of a lodtensor call is almost all fixed cost - argument
checks, dispatch to the backend, the route decision, the output's allocation and its LoD.
Each row times lodtensor's call beside the same work by hand in NumPy (the kernel alone,
no checks, no LoD); "overhead" is the difference. The goal: under 20 us per call.

Where the time goes is shown by ``BENCH_OVERHEAD_PROFILE=1``: a cProfile of each lodtensor
call, its five most expensive functions by own time.

With torch installed, a second table times the same ops on torch data (the torch backend) beside torch by
hand and torch.nested's jagged layout (no goal: a torch op has a fixed cost of its own).
"""

import os

import _common
import numpy as np

import lodtensor as lt
from lodtensor import sequence as S

TITLE = "Per-call cost of ops on a small batch (16 sequences x 1..4 rows x 16)"
GOAL_US = 20.0
TIMING = {"budget": 0.3, "min_repeat": 200, "max_repeat": 20000}


def _workload():
    g = _common.rng(5)
    lengths = g.integers(1, 5, size=16).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    data = g.standard_normal((int(offsets[-1]), 16), dtype=np.float32)
    return data, lengths, offsets


def _by_hand(data, lengths, offsets):
    starts = offsets[:-1]
    maxlen = int(lengths.max())
    mask = np.arange(maxlen) < lengths[:, None]

    def pad():
        out = np.zeros((lengths.size, maxlen, data.shape[1]), data.dtype)
        out[mask] = data
        return out

    padded = pad()

    def softmax():
        e = np.exp(data[:, :1] - np.repeat(np.maximum.reduceat(data[:, :1], starts), lengths, axis=0))
        return e / np.repeat(np.add.reduceat(e, starts), lengths, axis=0)

    return {
        "sequence_pool sum": lambda: np.add.reduceat(data, starts, axis=0),
        "sequence_pool average": lambda: np.add.reduceat(data, starts, axis=0) / lengths[:, None],
        "sequence_pool max": lambda: np.maximum.reduceat(data, starts, axis=0),
        "sequence_softmax": softmax,
        "to_padded": pad,
        "from_padded": lambda: padded[mask],
        "relu (np.maximum)": lambda: np.maximum(data, 0),
        "t * 2": lambda: data * 2,
    }


def _ours(data, lengths, offsets):
    t = lt.LoDTensor(data, [offsets.tolist()])
    col = lt.LoDTensor(np.ascontiguousarray(data[:, :1]), t.lod)
    padded, _ = t.to_padded()
    return {
        "sequence_pool sum": lambda: S.sequence_pool(t, "sum"),
        "sequence_pool average": lambda: S.sequence_pool(t, "average"),
        "sequence_pool max": lambda: S.sequence_pool(t, "max"),
        "sequence_softmax": lambda: S.sequence_softmax(col),
        "to_padded": t.to_padded,
        "from_padded": lambda: lt.from_padded(padded, lengths),
        "relu (np.maximum)": lambda: np.maximum(t, 0),
        "t * 2": lambda: t * 2,
    }


def _torch_rows(torch, data, lengths, offsets):
    """The same ops on torch data (the torch backend: NumPy kernels under autograd Functions), each with
    torch by hand (the same work on the flat tensor) and torch.nested's jagged layout where it has the op."""
    import lodtensor.nested as ln  # noqa: PLC0415 - torch rows only

    flat = torch.from_numpy(data)
    toffsets, tlengths = torch.from_numpy(offsets), torch.from_numpy(lengths)
    ids = torch.repeat_interleave(torch.arange(lengths.size), tlengths)
    t = lt.LoDTensor(flat, [offsets.tolist()])
    col = lt.LoDTensor(flat[:, :1].contiguous(), t.lod)
    padded, _ = t.to_padded()
    mask = torch.arange(padded.shape[1]) < tlengths[:, None]
    nt = t.to_nested()
    njt = torch.nested.nested_tensor_from_jagged(flat, toffsets)

    index = ids[:, None].expand(flat.shape)

    def segment_max():
        return torch.zeros(lengths.size, data.shape[1]).scatter_reduce_(0, index, flat, "amax", include_self=False)

    def softmax_by_hand(x):
        return torch.softmax(x.masked_fill(~mask[..., None], float("-inf")), dim=1)

    def pad():
        out = flat.new_zeros(padded.shape)
        out[mask] = flat
        return out

    return {
        "sequence_pool sum": (lambda: S.sequence_pool(t, "sum"),
                              lambda: torch.zeros(lengths.size, data.shape[1]).index_add_(0, ids, flat),
                              lambda: njt.sum(dim=1)),
        "sequence_pool max": (lambda: S.sequence_pool(t, "max"), segment_max, lambda: njt.amax(dim=1)),
        "sequence_softmax": (lambda: S.sequence_softmax(col), lambda: softmax_by_hand(padded[..., :1]), None),
        "to_padded": (t.to_padded, pad, lambda: njt.to_padded_tensor(0.0)),
        "from_padded": (lambda: lt.from_padded(padded, tlengths), lambda: padded[mask], None),
        "nested softmax over the ragged dim": (lambda: ln.softmax(nt, 1), lambda: softmax_by_hand(padded), None),
        "t * 2": (lambda: t * 2, lambda: flat * 2, lambda: njt * 2),
    }


def _profile(fn, calls=2000):
    lines = [line for line in _common.profile_text(fn, calls, 5).splitlines() if line.strip()[:1].isdigit()]
    return lines[-5:]


def run(report):
    data, lengths, offsets = _workload()
    ours, hand = _ours(data, lengths, offsets), _by_hand(data, lengths, offsets)
    workload = f"[{data.shape[0]}, {data.shape[1]}] float32 in {lengths.size} sequences"
    profile = os.environ.get("BENCH_OVERHEAD_PROFILE", "") not in ("", "0")
    table = report.table("per-call cost", workload, reference="lodtensor", unit="us")
    for op in ours:
        mine = table.add(f"lodtensor: {op}", ours[op], **TIMING)
        theirs = table.add(f"NumPy by hand: {op}", hand[op], **TIMING)
        if mine["best"] is None or theirs["best"] is None:
            continue
        cost = (mine["best"] - theirs["best"]) * 1e6
        mine["note"] = f"overhead {cost:.1f} us"
        report.goal(f"{op}: fixed cost under {GOAL_US:.0f} us", cost < GOAL_US, f"{cost:.1f} us")
        if profile:
            for line in _profile(ours[op]):
                report.notes.append(f"{op}: {line}")
    table.reference = "lodtensor: sequence_pool sum"
    table.finish()
    torch = _common.optional("torch")
    if torch is None:
        return
    torch.set_num_threads(1)  # (per-call costs: one thread, as the NumPy rows)
    table = report.table("per-call cost, torch backend", workload, reference="lodtensor (torch): sequence_pool sum",
                         unit="us")
    for op, (mine, by_hand, jagged) in _torch_rows(torch, data, lengths, offsets).items():
        row = table.add(f"lodtensor (torch): {op}", mine, **TIMING)
        theirs = table.add(f"torch by hand: {op}", by_hand, **TIMING)
        if jagged is not None:
            table.add(f"torch.nested jagged: {op}", jagged, **TIMING)
        if row["best"] is not None and theirs["best"] is not None:
            row["note"] = f"overhead {(row['best'] - theirs['best']) * 1e6:.1f} us"
        if profile:
            for line in _profile(mine):
                report.notes.append(f"torch {op}: {line}")
    table.finish()
