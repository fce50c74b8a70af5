"""Distributed: LoD all_gather over gloo, and ParquetCorpus streaming.

**all_gather** on 2 gloo processes (spawned; one thread each). Every rank holds
a one-level float32 batch of 256 sequences with long-tailed (lognormal) lengths,
mean about 33 rows, one sequence of 672 rows, D=256, different on each rank.
Contenders: ``lodtensor.distributed.all_gather`` (one header all-gather, one
``all_to_all_single`` of the real bytes); the usual workaround (all-gather the
sizes, pad to the global max sequence count and length, ``all_gather_into_tensor``
the padded block and the lengths, unpad with ``lt.from_padded``); and
``all_gather_object`` (pickle). The limit row is one ``all_gather_into_tensor``
of as many bytes as the real data. A call's time is the slowest rank's, after a
barrier. The bytes column counts what leaves the ranks (summed over ranks).

**ParquetCorpus** reads 8 Parquet shards of documents -> sentences -> words
(int64 ids) in batches of at most 4096 words, against pyarrow alone
(``ParquetFile.iter_batches`` over the same files and columns, with the same
record batch size as the corpus's default, touching every batch's offsets).

Goals (issue #11): bytes on the wire equal the real data; all_gather at most
1.1x of the same-bytes ``all_gather_into_tensor`` and faster than both
workarounds; ParquetCorpus at >= 0.9x pyarrow's throughput.
"""

import json
import os
import tempfile

import _common
import numpy as np

TITLE = "distributed: LoD all_gather over gloo, ParquetCorpus streaming"

SPEC = {
    "sequences": 256, "width": 256, "mean_len": 33, "max_len": 672, "seed": _common.SEED,
    "warmup": 2, "min_repeat": 5, "max_repeat": 200, "budget": _common.BUDGET,
}  # fmt: skip
REF = "lodtensor.distributed.all_gather"
LIMIT = "limit: all_gather_into_tensor of the same bytes"


def run(report):
    _all_gather(report)
    _corpus(report)


def _all_gather(report):
    torch = _common.optional("torch")
    if torch is None or not torch.distributed.is_available():
        report.notes.append("all_gather: torch.distributed is not available; skipped")
        return
    import _dist_worker  # noqa: PLC0415
    import torch.multiprocessing as mp  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "result.json")
        mp.spawn(_dist_worker.rank_main, args=(2, os.path.join(tmp, "init"), SPEC, out_file), nprocs=2, join=True)
        with open(out_file) as f:
            info = json.load(f)
    data = sum(info["data_bytes"])
    workload = (
        f"2 gloo ranks, rows per rank {info['rows']}, mean length {info['mean_len']:.1f}, max {info['max_len']}, "
        f"D={SPEC['width']} float32; real data (rows + offsets) {data / 2**20:.2f} MiB over both ranks"
    )
    table = report.table("all_gather of a long-tailed LoD batch", workload, reference=REF, limit=LIMIT,
                         goal="bytes = real data; <= 1.1x the same-bytes all_gather_into_tensor")  # fmt: skip
    for name, r in info["results"].items():
        wire = info["wire"][name]
        note = f"{wire / 2**20:.2f} MiB sent ({wire / data:.2f}x data)"
        table.add_result(name, r["best"], r["median"], r["n"], note=note)
    report.facts.update(all_gather=info)
    measured = info["lodtensor_sent_measured"]
    best = {name: r["best"] for name, r in info["results"].items()}
    report.goal("all_gather: bytes on the wire equal the real data (+ <= 30 B alignment per tensor)",
                measured - data <= 30 * 2, f"sent {measured} B for {data} B of rows + offsets")  # fmt: skip
    ratio = best[REF] / best[LIMIT]
    report.goal("all_gather at most 1.1x of all_gather_into_tensor of the same bytes", ratio <= 1.1, f"{ratio:.2f}x")
    pad = best["pad to global max + all_gather_into_tensor + unpad"] / best[REF]
    obj = best["all_gather_object (pickle)"] / best[REF]
    report.goal("all_gather faster than padding and than all_gather_object", pad > 1 and obj > 1,
                f"padding {pad:.2f}x, all_gather_object {obj:.2f}x slower")  # fmt: skip


def _corpus(report):
    pa = _common.optional("pyarrow")
    lt = _common.optional("lodtensor")
    if pa is None or not hasattr(lt, "read_parquet"):
        report.notes.append("ParquetCorpus: pyarrow or lodtensor.read_parquet missing; skipped")
        return
    import pyarrow.parquet as pq  # noqa: PLC0415

    from lodtensor.text import ParquetCorpus  # noqa: PLC0415

    rng = _common.rng(11)
    n_docs, n_files = 40_000, 8
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        words = 0
        for i in range(n_files):
            docs = n_docs // n_files
            sentences = rng.integers(1, 9, size=docs)
            lengths = rng.integers(1, 25, size=int(sentences.sum()))
            ids = rng.integers(2, 30_000, size=int(lengths.sum()))
            lod = [np.concatenate(([0], np.cumsum(sentences))), np.concatenate(([0], np.cumsum(lengths)))]
            label = lt.LoDTensor(rng.integers(0, 2, size=docs))
            path = os.path.join(tmp, f"part-{i}.parquet")
            lt.write_parquet(path, {"words": lt.LoDTensor(ids, lod), "label": label}, row_group_size=4096)
            files.append(path)
            words += len(ids)
        size = sum(os.path.getsize(f) for f in files)

        def pyarrow_epoch(per_read):
            n = 0
            for f in files:
                for rb in pq.ParquetFile(f).iter_batches(batch_size=per_read, columns=["words", "label"]):
                    col = rb.column(0)
                    col.offsets, col.values.offsets  # noqa: B018 - touch both levels, as a consumer would
                    n += len(rb)
            assert n == n_docs
            return n

        for budget in (4096, 65536):
            corpus = ParquetCorpus(files, "words", budget, with_columns=["label"], num_replicas=1, rank=0)
            per_read = corpus._read_size(files[0])  # the corpus's default: ~4 batches, >= 1024 documents
            workload = (
                f"{n_docs} documents, {words} words in {n_files} files ({size / 2**20:.1f} MiB Parquet); "
                f"record batches of {per_read} documents, LoD batches of <= {budget} words "
                f"(~{n_docs * budget // words} documents)"
            )
            table = report.table(f"ParquetCorpus: one epoch, batch_tokens={budget}", workload,
                                 reference="ParquetCorpus", goal=">= 0.9x pyarrow's throughput")  # fmt: skip

            def lodtensor_epoch(corpus=corpus):
                n = 0
                for batch, _ in corpus:
                    n += len(batch)
                assert n == n_docs
                return n

            table.add("ParquetCorpus", lodtensor_epoch)
            table.add("pyarrow iter_batches alone", lambda per_read=per_read: pyarrow_epoch(per_read))
            table.finish()
            ratio = table._best("pyarrow iter_batches alone") / table._best("ParquetCorpus")
            report.goal(f"ParquetCorpus (batch_tokens={budget}) at >= 0.9x pyarrow's throughput", ratio >= 0.9,
                        f"{ratio:.2f}x")  # fmt: skip
