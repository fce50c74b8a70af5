"""A hierarchical attention classifier (words -> sentences -> documents) without padding.

The corpus is generated here (two topics; a document's label is its topic,
carried by a few topic words scattered among filler words) and written as raw
text to a Parquet file, as a real corpus would arrive. From there:

1. a WordPiece tokenizer (the ``tokenizers`` package) is trained on the
   training documents themselves (``text.train_tokenizer``);
2. ``text.encode`` splits every document into sentences (in Arrow's string
   kernels) and tokenizes them in one batch call: one 2-level LoDTensor,
   documents -> sentences -> token ids, written back to Parquet with
   ``lt.write_parquet``;
3. training reads that file with ``lt.read_parquet`` and draws length-bucketed
   batches of whole documents (one vectorised selection each, then
   ``.to_torch()``), with a tqdm progress bar; evaluation streams the test file
   with ``lt.read_parquet(batch_size=...)``.

Word vectors are pooled into sentence vectors and sentence vectors into
document vectors by attention written with lodtensor's sequence ops
(``sequence_softmax`` + ``sequence_pool``), and autograd flows through them.

Run: python examples/hierarchical_text.py
"""

import os
import random
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from _synthetic import TOPICS, topic_sentence
from torch import nn
from tqdm import tqdm

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor import text

SEED = 0


def make_corpus(n_docs, rng):
    """Documents as lists of sentences of words, and their labels."""
    docs, labels = [], []
    for _ in range(n_docs):
        label = rng.randrange(2)
        doc = []
        for _ in range(rng.randint(2, 7)):
            doc.append(topic_sentence(rng, label))
        if not any(w in TOPICS[label] for s in doc for w in s):
            doc[0][0] = rng.choice(TOPICS[label])
        docs.append(doc)
        labels.append(label)
    return docs, labels


class Attention(nn.Module):
    """Attention pooling of the rows of each last-level sequence of a LoDTensor."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.context = nn.Linear(dim, 1, bias=False)

    def forward(self, x):
        scores = x.with_data(self.context(torch.tanh(self.proj(x.data))))  # (rows, 1)
        weights = S.sequence_softmax(scores)  # softmax inside every sequence
        return S.sequence_pool(x.with_data(weights.data * x.data), "sum")  # one row per sequence


class HierarchicalAttention(nn.Module):
    def __init__(self, vocab_size, dim=32, classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.words = Attention(dim)
        self.sentences = Attention(dim)
        self.classify = nn.Linear(dim, classes)

    def forward(self, batch):
        words = batch.with_data(self.embed(batch.data))  # lod: docs -> sentences -> words
        sentences = self.words(words)  # lod: docs -> sentences; one row per sentence
        documents = self.sentences(sentences)  # no lod; one row per document
        return self.classify(documents.data)


def write_raw_corpus(path, docs, labels):
    """The documents as raw text in a Parquet file: sentences end with '.', one document per row."""
    texts = [" ".join(" ".join(sentence) + "." for sentence in doc) for doc in docs]
    pq.write_table(pa.table({"text": texts, "label": labels}), path)


def tokenize_to_parquet(raw_path, out_path, tokenizer):
    """Raw text Parquet -> documents -> sentences -> token ids, written as a LoD Parquet file."""
    table = pq.read_table(raw_path)
    tokens = text.encode(table["text"], tokenizer)
    labels = lt.LoDTensor(table["label"].to_numpy())
    lt.write_parquet(out_path, {"tokens": tokens, "label": labels})


def accuracy(model, path, batch_size=64):
    """Accuracy over a tokenized Parquet file, streamed ``batch_size`` documents at a time."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        for cols in lt.read_parquet(path, batch_size=batch_size):
            labels = cols["label"].to_torch().data
            right += (model(cols["tokens"].to_torch()).argmax(1) == labels).sum().item()
            total += len(labels)
    model.train()
    return right / total


def main(epochs=4, n_docs=2000, n_train=1600):
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    docs, labels = make_corpus(n_docs, rng)
    with tempfile.TemporaryDirectory(prefix="hierarchical-text-") as work:
        return train_and_test(docs, labels, n_train, epochs, work)


def train_and_test(docs, labels, n_train, epochs, work):
    n_docs = len(docs)
    raw = {"train": os.path.join(work, "train.raw.parquet"), "test": os.path.join(work, "test.raw.parquet")}
    tok = {"train": os.path.join(work, "train.tokens.parquet"), "test": os.path.join(work, "test.tokens.parquet")}
    write_raw_corpus(raw["train"], docs[:n_train], labels[:n_train])
    write_raw_corpus(raw["test"], docs[n_train:], labels[n_train:])

    tokenizer = text.train_tokenizer(pq.read_table(raw["train"])["text"], vocab_size=600, min_frequency=1)
    for split in ("train", "test"):
        tokenize_to_parquet(raw[split], tok[split], tokenizer)

    train = lt.read_parquet(tok["train"])
    tokens, target = train["tokens"], train["label"].to_torch().data  # (to_torch: read-only Arrow memory handled)
    words_per_doc = np.diff(tokens.lod.absolute_offsets(0))  # tokens per document, for bucketing
    sampler = text.BucketBatchSampler(words_per_doc.tolist(), batch_size=32, seed=SEED)

    model = HierarchicalAttention(tokenizer.get_vocab_size())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    print(f"{len(tokens)} training and {n_docs - n_train} test documents in {work}")
    print(f"tokenizer: WordPiece, {tokenizer.get_vocab_size()} tokens; {tokens.num_rows} training tokens")
    print(f"chance level: {max(np.mean(labels[n_train:]), 1 - np.mean(labels[n_train:])):.2f}")
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        bar = tqdm(sampler, desc=f"epoch {epoch}", unit="batch", file=sys.stdout, mininterval=0.5)
        for idx in bar:
            batch = tokens[np.asarray(idx)].to_torch()  # whole documents, one vectorised selection
            loss = loss_fn(model(batch), target[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        bar.close()
        print(f"epoch {epoch}: test accuracy {accuracy(model, tok['test']):.3f}")
    final = accuracy(model, tok["test"])
    print(f"trained in {time.perf_counter() - start:.1f} s; test accuracy {final:.3f}")
    assert final > 0.85, f"the model should beat chance clearly, got {final:.3f}"
    return final


if __name__ == "__main__":
    main()
