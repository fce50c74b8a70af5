"""A ported Paddle model: a sequence tagger with a bidirectional GRU and a linear-chain CRF
(the shape of Paddle's ``label_semantic_roles`` / LAC taggers).

The Paddle program (fluid 1.x) was::

    word = fluid.data(name="word", shape=[None, 1], dtype="int64", lod_level=1)
    target = fluid.data(name="target", shape=[None, 1], dtype="int64", lod_level=1)
    emb = fluid.embedding(input=word, size=[VOCAB, EMB])
    fwd = fluid.layers.dynamic_gru(input=fluid.layers.fc(input=emb, size=HID * 3), size=HID)
    bwd = fluid.layers.dynamic_gru(input=fluid.layers.fc(input=emb, size=HID * 3), size=HID,
                                   is_reverse=True)
    emission = fluid.layers.fc(input=[fwd, bwd], size=TAGS)
    crf_cost = fluid.layers.linear_chain_crf(input=emission, label=target,
                                             param_attr=fluid.ParamAttr(name="crfw"))
    avg_cost = fluid.layers.mean(crf_cost)
    crf_decode = fluid.layers.crf_decoding(input=emission, param_attr=fluid.ParamAttr(name="crfw"))

The task: tag each word B (begins a name: a capital word after a non-capital), I (a capital
word inside a name) or O, where "capital" words are ids below 8; the tag depends on the
previous word, which the recurrences and the CRF's transitions must learn.

Run: python examples/paddle_crf_tagger.py
"""

import numpy as np
import torch

import lodtensor as lt
from lodtensor import nn
from lodtensor.nn import functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(1)
VOCAB, EMB, HID, TAGS = 24, 12, 8, 3  # tags: 0 = O, 1 = B, 2 = I


def batch(n):
    lengths = rng.integers(2, 10, n)
    words = rng.integers(0, VOCAB, lengths.sum())
    capital = words < 8
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    first = np.zeros(words.size, dtype=bool)
    first[starts] = True
    prev_capital = np.concatenate([[False], capital[:-1]]) & ~first
    tags = np.where(capital, np.where(prev_capital, 2, 1), 0)
    lod = [lengths.tolist()]
    return (lt.LoDTensor(words.reshape(-1, 1), recursive_sequence_lengths=lod),
            lt.LoDTensor(tags.reshape(-1, 1), recursive_sequence_lengths=lod))


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMB)
        self.proj_f, self.proj_b = nn.FC(EMB, 3 * HID), nn.FC(EMB, 3 * HID)
        self.fwd, self.bwd = nn.DynamicGRU(HID), nn.DynamicGRU(HID, is_reverse=True)
        self.emission = nn.FC(2 * HID, TAGS)
        self.crf = nn.LinearChainCRF(TAGS)

    def emissions(self, words):
        emb = self.emb(words)
        fwd = self.fwd(self.proj_f(emb))
        bwd = self.bwd(self.proj_b(emb))
        both = fwd.with_data(torch.cat([fwd.data, bwd.data], dim=1))  # Paddle: fc over [fwd, bwd]
        return self.emission(both)

    def forward(self, words, target):
        return self.crf(self.emissions(words), target)


model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=0.03)
for step in range(35):
    words, tags = batch(24)
    loss = model(words.to_torch(), tags.to_torch()).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"step {step:2d}  crf cost {loss.item():.3f}")

words, tags = batch(100)
with torch.no_grad():
    emission = model.emissions(words.to_torch())
path = F.crf_decoding(emission, model.crf.transition.detach())
accuracy = (path.data.numpy().ravel() == tags.numpy().ravel()).mean()
print(f"tag accuracy of crf_decoding: {accuracy:.3f}")
assert accuracy > 0.9, accuracy
# With a label, crf_decoding marks the correct tags (Paddle's evaluation form).
correct = F.crf_decoding(emission, model.crf.transition.detach(), label=tags.to_torch())
assert correct.data.float().mean().item() == accuracy
print("first sentence:", words[0].numpy().ravel().tolist(), "->", path[0].data.numpy().ravel().tolist())
