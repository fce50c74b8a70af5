"""Porting a Paddle LoD program: run it unchanged on lodtensor, then hand it to PyTorch.

The model is the kind of thing Paddle's sequence ops were made for: two
documents of sentences of word ids (a 2-level LoD, with an empty sentence),
attention over the words of each sentence, a max over the sentences of each
document, and a padded (documents, sentences, features) batch at the end.

1. The Paddle-style code (``import lodtensor.fluid as fluid``; ``fluid.LoDTensor``,
   ``fluid.create_lod_tensor``, ``fluid.layers.sequence_*``) runs on NumPy data.
2. The same function runs on torch data (``t.to_torch()``); the sequence ops
   keep autograd, so a backward pass gives gradients for the word embeddings.
3. The same steps written in plain PyTorch (no LoD object, just offsets)
   give the same values and the same gradients.

Run: python examples/port_from_paddle.py
"""

import numpy as np

import lodtensor.fluid as fluid  # was: import paddle.fluid as fluid

place = fluid.CPUPlace()
rng = np.random.default_rng(0)
VOCAB, DIM = 10, 4
table = rng.standard_normal((VOCAB, DIM))  # an embedding table
w = rng.standard_normal((DIM, 1))  # attention weights

# Two documents: [[3, 1, 4], []] and [[1, 5, 9, 2, 6]] (sentences of word ids).
words = fluid.create_lod_tensor(
    np.array([[3], [1], [4], [1], [5], [9], [2], [6]], dtype="int64"), [[2, 1], [3, 0, 5]], place
)
print("words lod     ", words.lod())


def model(emb, w):
    """The Paddle program, written once with fluid.layers; ``emb`` holds one row per word."""
    scores = emb @ w  # (words, 1), same lod (Paddle: fluid.layers.fc / matmul)
    attention = fluid.layers.sequence_softmax(scores)  # over the words of each sentence
    sentences = fluid.layers.sequence_pool(emb * attention, pool_type="sum")  # one row per sentence
    docs = fluid.layers.sequence_pool(sentences, pool_type="max")  # one row per document
    per_sentence = fluid.layers.sequence_expand(docs, y=words, ref_level=0)  # each doc, once per sentence
    centered = sentences - fluid.layers.lod_reset(per_sentence, y=sentences)
    padded, length = fluid.layers.sequence_pad(centered, pad_value=0.0)  # (docs, sentences, DIM)
    return attention, sentences, padded, length


# 1. Paddle-style, NumPy data.
emb = fluid.LoDTensor()
emb.set(table[np.array(words).ravel()], place)
emb.set_lod(words.lod())
attention, sentences, padded, length = model(emb, w)
print("sentence lod  ", sentences.lod(), "(one row per sentence, grouped by document)")
print("attention     ", np.round(attention.data.ravel(), 3).tolist())
print("padded shape  ", padded.data.shape, "sentences per document", length.data.tolist())
assert sentences.lod() == [[0, 2, 3]] and padded.data.shape == (2, 2, DIM)
assert np.allclose(sentences.data[1], 0.0)  # the empty sentence pools to pad_value 0
assert length.data.tolist() == [2, 1]

# 2. The same function on torch data: ops keep autograd.
try:
    import torch
except ImportError:
    print("torch is not installed: skipping the PyTorch half")
    raise SystemExit(0) from None

emb_t = emb.to_torch()  # the same lod; the data is a torch tensor sharing NumPy's memory
emb_t.data.requires_grad_(True)
w_t = torch.from_numpy(w)
attention_t, sentences_t, padded_t, length_t = model(emb_t, w_t)
assert isinstance(padded_t.data, torch.Tensor) and padded_t.data.requires_grad
loss = padded_t.data.pow(2).sum()
loss.backward()
print("torch loss    ", round(loss.item(), 6))
print("grad, word 0  ", np.round(emb_t.data.grad[0].numpy(), 3).tolist())
assert np.allclose(padded_t.data.detach().numpy(), padded.data)
assert np.allclose(attention_t.data.detach().numpy(), attention.data)
assert sentences_t.lod() == sentences.lod()

# 3. The same steps in plain PyTorch: flat rows plus one offsets tensor per level.
word_offsets = torch.tensor(words.lod()[1])  # words of each sentence
sentence_offsets = torch.tensor(words.lod()[0])  # sentences of each document
emb_p = torch.tensor(np.array(emb), requires_grad=True)
word_lengths, sentence_lengths = word_offsets.diff(), sentence_offsets.diff()
seg = torch.repeat_interleave(torch.arange(len(word_lengths)), word_lengths)  # sentence of each word
scores = emb_p @ w_t
peak = torch.stack([s.max() if len(s) else s.new_zeros(()) for s in scores.split(word_lengths.tolist())])
e = (scores.ravel() - peak[seg]).exp()
attention_p = e / torch.zeros(len(word_lengths), dtype=e.dtype).index_add(0, seg, e)[seg]
sentences_p = torch.zeros(len(word_lengths), DIM, dtype=e.dtype).index_add(0, seg, emb_p * attention_p[:, None])
docs_p = torch.stack([s.max(0).values for s in sentences_p.split(sentence_lengths.tolist())])
centered_p = sentences_p - docs_p.repeat_interleave(sentence_lengths, dim=0)
padded_p = torch.nn.utils.rnn.pad_sequence(list(centered_p.split(sentence_lengths.tolist())), batch_first=True)
padded_p.pow(2).sum().backward()
print("plain torch   ", "same values:", torch.allclose(padded_p, padded_t.data),
      "same gradients:", torch.allclose(emb_p.grad, emb_t.data.grad))
assert torch.allclose(padded_p, padded_t.data)
assert torch.allclose(attention_p, attention_t.data.ravel())
assert torch.allclose(emb_p.grad, emb_t.data.grad)
print("port_from_paddle finished")
