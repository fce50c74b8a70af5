"""Per-sequence access: ``t[i]`` over all i, ``for s in t``, ``t.unbind()``.

Workloads (int64 token ids, fixed seed):

- one level: 100,000 sequences of 1..63 tokens (about 3.2M rows);
- two levels: 10,000 documents x 1..16 sentences x 1..64 tokens (about 85K sentences, 2.8M rows).

Reported in microseconds per top-level sequence. Beside them: NumPy by hand
(a list of slices ``data[a:b]`` over a precomputed offsets list, the floor for
views), ``torch.split`` and ``torch.nested`` unbind (jagged and strided). torch.nested
holds one ragged dimension only, so for two levels torch gets documents -> tokens
(the sentence level dropped) as a lower bound. "fresh LoD" rows build a new LoD
object per call, so that nothing cached on the LoD by an earlier call helps.

Goal: at most 0.5 us per sequence for t[i], iteration and unbind.
"""

import _common
import numpy as np

TITLE = "indexing: t[i], iteration, unbind"

GOAL_US = 0.5


def _index_all(t, n):
    return [t[i] for i in range(n)]


def _iterate(t):
    for _ in t:
        pass


def run_tensor(report, label, t, workload, torch_parts):
    from lodtensor.lod import LoD  # noqa: PLC0415
    from lodtensor.tensor import _wrap  # noqa: PLC0415

    n = len(t)
    data = t.data
    levels = t.lod.levels
    table = report.table(f"per-sequence access, {label}", workload, reference="lodtensor unbind()", per=n,
                         unit="us", goal=f"<= {GOAL_US} us/sequence for t[i], iteration, unbind")

    def fresh():
        return _wrap(data, LoD._from_valid(levels), t.place())

    ok = [len(_index_all(t, n)) == n]
    table.add("lodtensor t[i] for all i", lambda: _index_all(t, n))
    table.add("lodtensor for s in t", lambda: _iterate(t))
    table.add("lodtensor unbind()", t.unbind)
    table.add("lodtensor t[i] for all i, fresh LoD", lambda: _index_all(fresh(), n))
    table.add("lodtensor unbind(), fresh LoD", lambda: fresh().unbind())
    offs = t.lod.absolute_offsets(0).tolist()
    table.add("NumPy by hand: [data[a:b] ...]", lambda: [data[a:b] for a, b in zip(offs, offs[1:])],
              note="views, no LoD; the floor")

    torch = _common.optional("torch")
    if torch is None:
        table.missing("torch.nested unbind")
    else:
        values, lengths, what = torch_parts(torch)
        lengths_list = lengths.tolist()
        offsets = torch.from_numpy(_common.offsets_of(lengths))
        table.add(f"torch.split{what}", lambda: values.split(lengths_list))
        jagged = torch.nested.nested_tensor_from_jagged(values, offsets)
        table.add(f"torch.nested jagged unbind(){what}", jagged.unbind)
        strided = torch.nested.nested_tensor(list(values.split(lengths_list)), layout=torch.strided)
        table.add(f"torch.nested strided unbind(){what}", strided.unbind)

    table.finish()
    for row in table.rows:
        if row["name"] in ("lodtensor t[i] for all i", "lodtensor for s in t", "lodtensor unbind()"):
            us = row["per_item"] * 1e6 if row["per_item"] is not None else None
            report.goal(f"{label}: {row['name'][len('lodtensor '):]} <= {GOAL_US} us/seq",
                        None if us is None else us <= GOAL_US, f"{us:.3f} us/seq" if us is not None else row["status"])
    assert all(ok)


def run(report):
    import lodtensor  # noqa: PLC0415

    g = _common.rng(10)
    n = 100_000
    lengths = g.integers(1, 64, size=n)
    data = g.integers(0, 30000, size=int(lengths.sum()))
    t1 = lodtensor.LoDTensor.from_lengths(data, lengths)
    report.facts["one_level"] = {"sequences": n, "rows": int(data.size)}
    run_tensor(report, "one level", t1, f"{n} sequences x 1..63 int64 tokens ({data.size} rows)",
               lambda torch: (torch.from_numpy(data), lengths, ""))

    g = _common.rng(11)
    docs = 10_000
    sents = g.integers(1, 17, size=docs)
    tokens = g.integers(1, 65, size=int(sents.sum()))
    data2 = g.integers(0, 30000, size=int(tokens.sum()))
    t2 = lodtensor.LoDTensor(data2, recursive_sequence_lengths=[sents, tokens])
    doc_tokens = np.add.reduceat(tokens, _common.offsets_of(sents)[:-1])
    report.facts["two_level"] = {"documents": docs, "sentences": int(sents.sum()), "rows": int(data2.size)}
    run_tensor(report, "two levels", t2,
               f"{docs} documents x 1..16 sentences x 1..64 int64 tokens ({int(sents.sum())} sentences, "
               f"{data2.size} rows)",
               lambda torch: (torch.from_numpy(data2), doc_tokens, " (docs -> tokens)"))
