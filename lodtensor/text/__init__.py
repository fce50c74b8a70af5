"""Hierarchical text batching: documents -> sentences -> words as one LoDTensor.

- :class:`Vocab` maps tokens to ids (one dict lookup per token, done with
  ``map`` at C speed).
- :func:`batch` builds a LoDTensor from nested lists of ids or of strings,
  one pass per level.
- :class:`BucketBatchSampler` groups samples of similar length, so padded
  kernels waste little; it is a valid ``batch_sampler`` for
  ``torch.utils.data.DataLoader``.
- :func:`make_collate` returns a ``collate_fn`` producing LoDTensors (NumPy or
  torch data).
- :class:`ParquetCorpus` streams LoD batches of whole documents from Parquet
  files, sharded by rank and DataLoader worker (an ``IterableDataset``; torch
  loads when the class is first used).
- :func:`to_dense` / :func:`from_dense` pad every level with one mask per
  level and come back; :func:`pad_batch` pads one level to a multiple of a
  size (for kernels that want aligned shapes).
- From real data (Arrow, Parquet, ``datasets``): :func:`split_sentences`
  splits documents by a documented rule in Arrow's string kernels,
  :func:`lookup` maps a column of word lists through a :class:`Vocab` in one
  vectorised call, :func:`train_tokenizer` trains a WordPiece or BPE
  tokenizer (the ``tokenizers`` package) on the corpus itself, and
  :func:`encode` turns a text column into documents -> sentences -> token ids.

>>> docs = [[["the", "cat"], ["sat"]], [["a", "dog"]]]
>>> vocab = Vocab.build(docs)
>>> t = batch(docs, vocab=vocab)
>>> t.lod(), t.data.tolist()
([[0, 2, 3], [0, 2, 3, 5]], [6, 3, 5, 2, 4])
>>> vocab.decode(t.data.tolist())
['the', 'cat', 'sat', 'a', 'dog']
"""

from ._arrow import SENTENCE_END, lookup, split_sentences, text_column
from ._batch import (
    Collate,
    Vocab,
    batch,
    from_dense,
    make_collate,
    pad_batch,
    to_dense,
)
from ._sampler import BucketBatchSampler
from ._tokenize import encode, train_tokenizer

__all__ = [
    "Vocab",
    "batch",
    "BucketBatchSampler",
    "Collate",
    "make_collate",
    "to_dense",
    "from_dense",
    "pad_batch",
    "ParquetCorpus",
    "split_sentences",
    "SENTENCE_END",
    "lookup",
    "text_column",
    "train_tokenizer",
    "encode",
]


def __getattr__(name):
    if name == "ParquetCorpus":  # built on first use: it subclasses torch's IterableDataset
        from ._corpus import _build

        return _build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
