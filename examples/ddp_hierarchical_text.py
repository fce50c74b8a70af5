"""The hierarchical attention classifier trained with DistributedDataParallel, from Parquet LoD shards.

1. A raw text corpus is tokenized into document -> sentence -> word Parquet
   shards with the Dask pipeline of examples/preprocess_corpus.py (here on
   Dask's local scheduler; the example itself shows a cluster).
2. The model of examples/hierarchical_text.py trains on 2 gloo processes
   (``torch.multiprocessing.spawn``): each streams its own shards with
   ``lodtensor.text.ParquetCorpus`` (sharded by rank), DDP averages the
   gradients, and ``DistributedDataParallel.join()`` absorbs the ranks' unequal
   batch counts.
3. Each rank predicts its share of the test shards; ``lodtensor.distributed.all_gather``
   brings the (variable-length) prediction tables to every rank.

The same training on one process, with the same global batch size, is the
reference: the two test accuracies agree within noise.

Run: python examples/ddp_hierarchical_text.py
"""

import datetime
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hierarchical_text import HierarchicalAttention  # noqa: E402
from preprocess_corpus import load_vocab, preprocess, write_raw_corpus  # noqa: E402

import lodtensor as lt  # noqa: E402
import lodtensor.distributed as ld  # noqa: E402
from lodtensor.text import ParquetCorpus  # noqa: E402

SEED = 0
EPOCHS = 8
BATCH_TOKENS = 1024  # words per optimizer step, over all ranks


def train(rank, world, init_file, shards, out_file):
    """One rank: DDP training on this rank's shards, then a distributed evaluation."""
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )  # fmt: skip
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    files = sorted(f for f in os.listdir(shards) if f.endswith(".parquet"))
    train_files = [os.path.join(shards, f) for f in files[:-2]]
    test_files = [os.path.join(shards, f) for f in files[-2:]]
    model = HierarchicalAttention(len(load_vocab(shards)))
    ddp = DistributedDataParallel(model)  # rank 0's initial weights on every rank
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    corpus = ParquetCorpus(train_files, "words", BATCH_TOKENS // world, with_columns=["label"], shuffle=True, seed=SEED)
    loader = DataLoader(corpus, batch_size=None)
    start = time.perf_counter()
    for epoch in range(1, EPOCHS + 1):
        corpus.set_epoch(epoch)
        steps = 0
        with ddp.join():  # ranks may hold different numbers of batches
            for words, labels in loader:
                loss = loss_fn(ddp(words.to_torch()), torch.tensor(labels.data))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                steps += 1
        if rank == 0:
            print(f"  [{world} rank(s)] epoch {epoch}: {steps} steps on rank 0, loss {loss.item():.3f}", flush=True)
    elapsed = time.perf_counter() - start

    # evaluation: each rank predicts its test shards; all_gather the variable-length tables
    model.eval()
    rows = []
    with torch.no_grad():
        for words, labels, ids in ParquetCorpus(test_files, "words", 4096, with_columns=["label", "id"]):
            pred = model(words.to_torch()).argmax(1).numpy()
            rows.append(np.stack([ids.data, pred, labels.data], axis=1))
    mine = lt.LoDTensor(np.concatenate(rows) if rows else np.zeros((0, 3), np.int64))
    table = np.concatenate([t.numpy() for t in ld.all_gather(mine, timeout=60)])
    assert len(np.unique(table[:, 0])) == len(table), "every test document predicted once"
    accuracy = float((table[:, 1] == table[:, 2]).mean())
    if rank == 0:
        with open(out_file, "w") as f:
            f.write(f"{accuracy} {len(table)} {elapsed}")
    dist.barrier()
    dist.destroy_process_group()


def run(world, shards, work):
    out_file = os.path.join(work, f"result-{world}.txt")
    init_file = os.path.join(work, f"init-{world}")
    mp.spawn(train, args=(world, init_file, shards, out_file), nprocs=world, join=True)
    with open(out_file) as f:
        accuracy, n, elapsed = f.read().split()
    return float(accuracy), int(n), float(elapsed)


def main():
    with tempfile.TemporaryDirectory(prefix="lodtensor-ddp-") as work:
        raw = os.path.join(work, "raw")
        shards = os.path.join(work, "shards")
        write_raw_corpus(raw, n_docs=2000, n_files=8)
        preprocess(os.path.join(raw, "*.jsonl"), shards)  # Dask's local scheduler
        print(f"8 Parquet shards: 6 for training, 2 for testing; {BATCH_TOKENS} words per step")
        single = run(1, shards, work)
        print(f"1 process : test accuracy {single[0]:.3f} on {single[1]} documents ({single[2]:.1f} s training)")
        double = run(2, shards, work)
        print(f"2 DDP gloo: test accuracy {double[0]:.3f} on {double[1]} documents ({double[2]:.1f} s training)")
    assert single[1] == double[1] == 500
    assert single[0] > 0.85 and double[0] > 0.85, (single, double)
    # within noise: 500 test documents at ~93% give a standard error of ~1.1% per run
    assert abs(single[0] - double[0]) <= 0.05, (single, double)
    return single[0], double[0]


if __name__ == "__main__":
    main()
