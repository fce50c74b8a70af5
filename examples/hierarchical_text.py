"""A hierarchical attention classifier (words -> sentences -> documents) without padding.

The corpus is generated here (two topics; a document's label is its topic,
carried by a few topic words scattered among filler words). Each batch is one
2-level LoDTensor of token ids on the torch backend: documents -> sentences ->
words. Word vectors are pooled into sentence vectors and sentence vectors into
document vectors by attention written with lodtensor's sequence ops
(``sequence_softmax`` + ``sequence_pool``), and autograd flows through them.

Run: python examples/hierarchical_text.py
"""

import random
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from lodtensor import sequence as S
from lodtensor import text

SEED = 0
TOPICS = {
    0: "goal match team score coach league player season win stadium".split(),
    1: "market stock price bank trade profit invest share fund rate".split(),
}
FILLER = [f"w{i}" for i in range(150)]


def make_corpus(n_docs, rng):
    """Documents as lists of sentences of words, and their labels."""
    docs, labels = [], []
    for _ in range(n_docs):
        label = rng.randrange(2)
        doc = []
        for _ in range(rng.randint(2, 7)):
            sentence = [rng.choice(FILLER) for _ in range(rng.randint(3, 12))]
            if rng.random() < 0.5:  # some sentences carry the topic
                sentence[rng.randrange(len(sentence))] = rng.choice(TOPICS[label])
            if rng.random() < 0.1:  # and a little noise from the other topic
                sentence[rng.randrange(len(sentence))] = rng.choice(TOPICS[1 - label])
            doc.append(sentence)
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


def progress(epoch, step, steps, loss, width=30):
    done = int(width * step / steps)
    bar = "#" * done + "." * (width - done)
    sys.stdout.write(f"\repoch {epoch} [{bar}] {step}/{steps} loss {loss:.3f}")
    sys.stdout.flush()


def accuracy(model, loader):
    model.eval()
    right = total = 0
    with torch.no_grad():
        for batch, labels in loader:
            right += (model(batch).argmax(1) == labels).sum().item()
            total += len(labels)
    model.train()
    return right / total


def main(epochs=6):
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    docs, labels = make_corpus(2000, rng)
    train = list(zip(docs[:1600], labels[:1600]))
    test = list(zip(docs[1600:], labels[1600:]))
    vocab = text.Vocab.build([d for d, _ in train])
    collate = text.make_collate(vocab=vocab, backend="torch")
    words_per_doc = [sum(map(len, d)) for d, _ in train]
    train_loader = DataLoader(
        train, batch_sampler=text.BucketBatchSampler(words_per_doc, batch_size=32, seed=SEED), collate_fn=collate
    )
    test_loader = DataLoader(test, batch_size=64, collate_fn=collate)

    model = HierarchicalAttention(len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    print(f"{len(train)} training and {len(test)} test documents, vocabulary of {len(vocab)}")
    print(f"chance level: {max(np.mean(labels[1600:]), 1 - np.mean(labels[1600:])):.2f}")
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        for step, (batch, target) in enumerate(train_loader, 1):
            loss = loss_fn(model(batch), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            progress(epoch, step, len(train_loader), loss.item())
        print(f"  test accuracy {accuracy(model, test_loader):.3f}")
    final = accuracy(model, test_loader)
    print(f"trained in {time.perf_counter() - start:.1f} s; test accuracy {final:.3f}")
    assert final > 0.85, f"the model should beat chance clearly, got {final:.3f}"
    return final


if __name__ == "__main__":
    main()
