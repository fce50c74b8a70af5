"""Construction from nested Python lists: a 3-level token batch.

Workload: 256 documents, each with 1..16 sentences (uniform), each with 1..64
token ids (uniform, ids in 0..29999): nested Python lists of ints, about 2.1K
sentences and 70K tokens (fixed seed). Every contender returns the token ids
as one int64 array plus the lengths (or offsets) of both levels.

Goal: ``lodtensor.from_nested_list`` is the fastest, NumPy by hand included.
"""

import itertools

import _common
import numpy as np

TITLE = "construction from nested Python lists"

_chain = itertools.chain.from_iterable


def numpy_by_hand(docs):
    """Lengths via map(len), leaves via np.fromiter over itertools.chain: no type checks."""
    sents_per_doc = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    sents = list(_chain(docs))
    tokens_per_sent = np.fromiter(map(len, sents), dtype=np.int64, count=len(sents))
    tokens = np.fromiter(_chain(sents), dtype=np.int64, count=int(tokens_per_sent.sum()))
    return tokens, sents_per_doc, tokens_per_sent


def run(report):
    import lodtensor  # noqa: PLC0415

    docs = _common.token_batch()
    n_sents = sum(map(len, docs))
    n_tokens = sum(map(len, _chain(docs)))
    tokens, l0, l1 = numpy_by_hand(docs)
    report.facts.update(documents=len(docs), sentences=n_sents, tokens=n_tokens)
    workload = (
        f"{len(docs)} documents x 1..16 sentences x 1..64 token ids (nested lists of int): "
        f"{n_sents} sentences, {n_tokens} tokens"
    )
    table = report.table("from nested lists: 3-level token batch", workload, reference="lodtensor.from_nested_list",
                         goal="lodtensor.from_nested_list fastest")

    def check_lod(t):
        assert t.dtype == np.int64 and np.array_equal(t.data, tokens)
        assert np.array_equal(t.lengths(0), l0) and np.array_equal(t.lengths(1), l1)

    table.add("lodtensor.from_nested_list", lambda: lodtensor.from_nested_list(docs), check=check_lod,
              note="dtype inferred (int64)")
    table.add("lodtensor.from_nested_list(dtype=int64)",
              lambda: lodtensor.from_nested_list(docs, dtype=np.int64), check=check_lod)

    def check_hand(r):
        assert np.array_equal(r[0], tokens)

    table.add("NumPy by hand", lambda: numpy_by_hand(docs), check=check_hand,
              note="fromiter(chain) + map(len); no type checks")

    pa = _common.optional("pyarrow")
    if pa is None:
        table.missing("pyarrow.array")
        table.missing("pyarrow.array(type=list<list<int64>>)")
    else:
        def check_pa(arr):
            flat = arr.flatten().flatten()
            assert np.array_equal(flat.to_numpy(), tokens)

        table.add("pyarrow.array", lambda: pa.array(docs), check=check_pa, note="type inferred")
        typ = pa.list_(pa.list_(pa.int64()))
        table.add("pyarrow.array(type=list<list<int64>>)", lambda: pa.array(docs, type=typ), check=check_pa)

    ak = _common.optional("awkward")
    if ak is None:
        table.missing("awkward.from_iter")
    else:
        def check_ak(arr):
            assert np.array_equal(ak.to_numpy(ak.flatten(arr, axis=None)), tokens)

        table.add("awkward.from_iter", lambda: ak.from_iter(docs), check=check_ak)

    torch = _common.optional("torch")
    if torch is None:
        table.missing("torch.tensor(flat) (1 level only)")
    else:
        # torch has no 2-ragged-dim constructor; the closest is a tensor of the flat ids.
        table.add("torch.tensor(flat ids)", lambda: torch.tensor(list(_chain(_chain(docs)))),
                  note="flat ids only, no lengths (lower bound for torch)")

    lod_best = table._best("lodtensor.from_nested_list")
    others = [r["best"] for r in table.rows
              if r["best"] is not None and not r["name"].startswith(("lodtensor", "torch"))]
    if lod_best is not None and others:
        fastest = min(others)
        report.goal("from_nested_list fastest (vs NumPy by hand, pyarrow, awkward)", lod_best <= fastest,
                    f"lodtensor / fastest other = {lod_best / fastest:.2f}")
