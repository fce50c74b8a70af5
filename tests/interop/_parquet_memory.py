"""Run in child processes by test_parquet_memory.py: write a big Parquet file, or stream one and report RSS.

``python tests/interop/_parquet_memory.py write PATH MB``: a file of about ``MB``
MiB of random int64 word ids (incompressible), 2-level documents, one row group.
``python tests/interop/_parquet_memory.py read PATH`` / ``corpus PATH``: stream
it with ``lt.read_parquet(batch_size=)`` / ``ParquetCorpus`` and print JSON:
the RSS growth (MiB) from before the first batch to the peak, and from after
the first batch (allocator pools and thread stacks warmed up) to the peak.
"""

import json
import os
import sys

import numpy as np


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def write(path, mib):
    import lodtensor as lt

    rng = np.random.default_rng(0)
    words = int(mib * 2**20 // 8)
    docs = words // 160
    sentences = rng.integers(1, 16, docs)
    lengths = rng.multinomial(words - int(sentences.sum()), np.full(int(sentences.sum()), 1 / sentences.sum())) + 1
    data = rng.integers(0, 2**62, int(lengths.sum()), dtype=np.int64)
    t = lt.LoDTensor(data, recursive_sequence_lengths=[sentences.tolist(), lengths.tolist()])
    lt.write_parquet(path, {"words": t, "doc": lt.LoDTensor(np.arange(docs, dtype=np.int64))}, row_group_size=1 << 30)


def stream(path, how):
    import lodtensor as lt
    from lodtensor.text import ParquetCorpus

    if how == "read":
        batches = lt.read_parquet(path, batch_size=512)
    else:
        batches = iter(ParquetCorpus(path, "words", 1 << 15, with_columns=["doc"], num_replicas=1, rank=0))
    before = rss_mib()
    first = next(batches)
    after_first = peak = rss_mib()
    n, docs = 1, len(first[0] if isinstance(first, tuple) else first["words"])
    del first
    for b in batches:
        n += 1
        docs += len(b[0] if isinstance(b, tuple) else b["words"])
        peak = max(peak, rss_mib())
    print(json.dumps({"batches": n, "docs": docs, "growth": peak - before, "after_first": peak - after_first,
                      "file_mib": os.path.getsize(path) / 2**20}))  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], float(sys.argv[3]))
    else:
        stream(sys.argv[2], sys.argv[1])
