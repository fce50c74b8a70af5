"""Tokenize a raw text corpus into document -> sentence -> word LoD Parquet shards, on Dask.

Raw input: JSON-lines files, one document per line (``{"text": ..., "label": ...}``).
Output: one Parquet shard per input partition, each with a ``words`` column
(a 2-level LoD of word ids: documents -> sentences -> words) and a ``label``
column, plus ``vocab.json``. ``lodtensor.text.ParquetCorpus`` streams the
shards back as LoD batches (see examples/ddp_hierarchical_text.py).

Two passes over the data, both on the Dask cluster:

1. count words per partition and merge the counts (``dask.bag.frequencies``),
   keep the most frequent as the vocabulary;
2. tokenize and encode each partition with that vocabulary and write its shard
   (one ``dask.delayed`` task per partition, so a shard is never split over workers).

Run::

    python examples/preprocess_corpus.py                      # a LocalCluster started here
    python examples/preprocess_corpus.py tcp://scheduler:8786 # an existing Dask cluster

On a real cluster the input and output directories must be visible to every
worker (a shared file system, or s3://... paths with s3fs installed).
"""

import json
import os
import random
import re
import sys
import tempfile
import time

import numpy as np
from _synthetic import TOPICS, topic_sentence

import lodtensor as lt
from lodtensor import text

SEED = 0
_SENTENCE = re.compile(r"[^.!?]+")
_WORD = re.compile(r"\w+")


# -- a raw corpus to work on ----------------------------------------------------------------------
def write_raw_corpus(directory, n_docs, n_files=8, seed=SEED):
    """Synthetic raw text: two topics, a document's label is its topic. JSON-lines files; their paths."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f"raw-{i:03d}.jsonl") for i in range(n_files)]
    files = [open(p, "w") for p in paths]  # noqa: SIM115 - closed below
    try:
        for d in range(n_docs):
            label = rng.randrange(2)
            sentences = []
            for _ in range(rng.randint(2, 7)):
                words = topic_sentence(rng, label)
                sentences.append(" ".join(words).capitalize() + rng.choice(".!?"))
            if not any(w in TOPICS[label] for s in sentences for w in _WORD.findall(s.lower())):
                sentences[0] = rng.choice(TOPICS[label]) + " " + sentences[0]
            record = {"id": d, "text": " ".join(sentences), "label": label}
            files[d % n_files].write(json.dumps(record) + "\n")
    finally:
        for f in files:
            f.close()
    return paths


# -- the two passes (plain functions: Dask ships them to its workers) -----------------------------
def tokenize(record):
    """A document as a list of sentences, each a list of lower-case words."""
    sentences = (_WORD.findall(s.lower()) for s in _SENTENCE.findall(record["text"]))
    return [s for s in sentences if s]


def encode_partition(records, index, vocab_tokens, out_dir):
    """Tokenize one partition, encode it with the vocabulary and write its shard; (path, documents)."""
    records = list(records)
    path = os.path.join(out_dir, f"part-{index:05d}.parquet")
    if not records:
        return path, 0
    vocab = text.Vocab(vocab_tokens)
    docs = [tokenize(r) for r in records]
    words = text.batch(docs, vocab=vocab)  # documents -> sentences -> words, one pass per level
    labels = lt.LoDTensor(np.array([r["label"] for r in records], dtype=np.int64))
    ids = lt.LoDTensor(np.array([r["id"] for r in records], dtype=np.int64))
    tmp = path + ".tmp"
    lt.write_parquet(tmp, {"words": words, "label": labels, "id": ids}, row_group_size=256)
    os.replace(tmp, path)  # a shard appears whole or not at all
    return path, len(records)


def preprocess(raw_pattern, out_dir, client=None, vocab_size=20000):
    """Tokenize the JSON-lines files ``raw_pattern`` into Parquet shards in ``out_dir`` on Dask.

    ``client`` is a ``dask.distributed.Client`` (a LocalCluster's or a real
    cluster's); None runs the same graph on Dask's local threaded scheduler.
    Returns the shard paths.
    """
    import dask
    import dask.bag as db

    os.makedirs(out_dir, exist_ok=True)
    records = db.read_text(raw_pattern).map(json.loads)  # one partition per file
    counts = records.map(tokenize).flatten().flatten().frequencies()
    top = counts.topk(vocab_size, key=lambda kv: (kv[1], kv[0]))
    if client is not None:
        vocab_pairs = client.compute(top).result()
    else:
        (vocab_pairs,) = dask.compute(top)
    vocab_tokens = sorted(word for word, _ in vocab_pairs)
    with open(os.path.join(out_dir, "vocab.json"), "w") as f:
        json.dump(text.Vocab(vocab_tokens).itos, f)
    parts = records.to_delayed()
    tasks = [dask.delayed(encode_partition)(p, i, vocab_tokens, out_dir) for i, p in enumerate(parts)]
    if client is not None:
        written = client.gather(client.compute(tasks))
    else:
        (written,) = dask.compute(tasks)
    return [path for path, n in written if n]


def load_vocab(out_dir):
    with open(os.path.join(out_dir, "vocab.json")) as f:
        itos = json.load(f)
    return text.Vocab(itos[2:])  # the first two are the specials <pad>, <unk>


def main(scheduler=None, n_docs=2000):
    with tempfile.TemporaryDirectory(prefix="lodtensor-corpus-") as work:
        return run(work, scheduler, n_docs)


def run(work, scheduler=None, n_docs=2000):
    """Write a raw corpus under ``work``, preprocess it on Dask, check the shards; the shard directory."""
    from dask.distributed import Client, LocalCluster

    raw = os.path.join(work, "raw")
    out = os.path.join(work, "shards")
    write_raw_corpus(raw, n_docs)
    start = time.perf_counter()
    if scheduler:  # a real cluster: the same code, only the client differs
        cluster, client = None, Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        print(f"dask cluster: {client}")
        shards = preprocess(os.path.join(raw, "*.jsonl"), out, client=client)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print(f"{len(shards)} shards in {out} ({time.perf_counter() - start:.1f} s)")

    # check: the shards hold every document once, as the tokenizer made it
    vocab = load_vocab(out)
    raw_docs = {}
    for name in os.listdir(raw):
        with open(os.path.join(raw, name)) as f:
            raw_docs.update((r["id"], r) for r in map(json.loads, f))
    seen = 0
    for path in shards:
        cols = lt.read_parquet(path)
        words, ids = cols["words"], cols["id"].data
        assert words.lod_level == 2 and len(words) == len(ids)
        seen += len(ids)
        first = vocab.decode(words[0].data.tolist())
        assert words[0].lengths().tolist() == [len(s) for s in tokenize(raw_docs[int(ids[0])])]
        assert first == [w for s in tokenize(raw_docs[int(ids[0])]) for w in s]
        print(f"  {os.path.basename(path)}: {len(ids)} documents, {words.num_rows} words; doc {ids[0]}: {first[:6]}")
    assert seen == n_docs, (seen, n_docs)
    corpus = text.ParquetCorpus(out, "words", batch_tokens=2048, num_replicas=1, rank=0)
    batches = list(corpus)
    assert sum(len(b) for b in batches) == n_docs
    print(f"ParquetCorpus: {len(batches)} batches of at most 2048 words, {n_docs} documents")
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
