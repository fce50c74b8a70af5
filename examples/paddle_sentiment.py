"""A ported Paddle model: the text-CNN + LSTM sentiment classifier of Paddle's book
(``understand_sentiment``), on lodtensor with PyTorch training it.

The Paddle program (fluid 1.x) was::

    data = fluid.data(name="words", shape=[None, 1], dtype="int64", lod_level=1)
    emb = fluid.embedding(input=data, size=[dict_dim, emb_dim])
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3,
                                           act="tanh", pool_type="max")
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4,
                                           act="tanh", pool_type="max")
    fc1 = fluid.layers.fc(input=emb, size=hid_dim * 4)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim * 4)
    lstm_max = fluid.layers.sequence_pool(input=lstm1, pool_type="max")
    prediction = fluid.layers.fc(input=[conv_3, conv_4, lstm_max], size=2, act="softmax")

Here the same layers come from ``lodtensor.nn`` with Paddle's parameter shapes: the weights
are trained with torch, saved as a Paddle checkpoint directory (``fluid.io`` format, one
file per parameter, as ``fluid.io.save_params`` writes), loaded back with
``load_program_state`` and run on NumPy with ``lodtensor.nn.functional`` for inference.

Run: python examples/paddle_sentiment.py
"""

import tempfile

import numpy as np
import torch

import lodtensor as lt
from lodtensor import nn
from lodtensor.fluid import io as fio
from lodtensor.nn import functional as F
from lodtensor.sequence import sequence_pool

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)
VOCAB, EMB, HID = 30, 16, 8
GOOD, BAD = range(2, 6), range(6, 10)  # sentiment words; the rest are neutral


def batch(n):
    """``n`` reviews of 3..11 words; label 1 when good words outnumber bad ones."""
    lengths = rng.integers(3, 12, n)
    words = rng.integers(10, VOCAB, lengths.sum())
    labels = rng.integers(0, 2, n)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for s, n_words, y in zip(starts, lengths, labels):
        k = rng.integers(1, max(2, n_words // 2) + 1)
        pos = rng.choice(n_words, k, replace=False)
        words[s + pos] = rng.choice(list(GOOD if y else BAD), k)
    ids = lt.LoDTensor(words.reshape(-1, 1), recursive_sequence_lengths=[lengths.tolist()])
    return ids, labels


class SentimentNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMB)
        self.conv3 = nn.SequenceConv(EMB, HID, filter_size=3, act="tanh")
        self.conv4 = nn.SequenceConv(EMB, HID, filter_size=4, act="tanh")
        self.fc1 = nn.FC(EMB, HID * 4)
        self.lstm = nn.DynamicLSTM(HID)
        self.out = nn.FC(3 * HID, 2, act="softmax")

    def forward(self, words):
        emb = self.emb(words)
        conv_3 = sequence_pool(self.conv3(emb), "max")
        conv_4 = sequence_pool(self.conv4(emb), "max")
        lstm1, _ = self.lstm(self.fc1(emb))
        lstm_max = sequence_pool(lstm1, "max")
        features = torch.cat([conv_3.data, conv_4.data, lstm_max.data], dim=1)  # Paddle: fc over a list
        return self.out(features)


model = SentimentNet()
opt = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(25):
    words, labels = batch(32)
    prob = model(words.to_torch())
    loss = torch.nn.functional.nll_loss(torch.log(prob + 1e-9), torch.as_tensor(labels))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"step {step:2d}  loss {loss.item():.3f}")

test_words, test_labels = batch(200)
with torch.no_grad():
    accuracy = (model(test_words.to_torch()).argmax(1).numpy() == test_labels).mean()
print(f"test accuracy (torch): {accuracy:.2f}")
assert accuracy > 0.8, accuracy

# Save in Paddle's format, under Paddle's parameter names, and load back without torch.
names = {
    "emb.weight": "embedding_0.w_0", "conv3.weight": "sequence_conv_0.w_0", "conv3.bias": "sequence_conv_0.b_0",
    "conv4.weight": "sequence_conv_1.w_0", "conv4.bias": "sequence_conv_1.b_0", "fc1.weight": "fc_0.w_0",
    "fc1.bias": "fc_0.b_0", "lstm.weight": "lstm_0.w_0", "lstm.bias": "lstm_0.b_0", "out.weight": "fc_1.w_0",
    "out.bias": "fc_1.b_0",
}
with tempfile.TemporaryDirectory() as checkpoint:
    for key, value in model.state_dict().items():
        fio.save_lod_tensor(value.numpy(), f"{checkpoint}/{names[key]}")
    p = fio.load_program_state(checkpoint)
print("checkpoint:", sorted(p))


def infer(words):
    """The Paddle program again, on NumPy, with the loaded arrays: forward only."""
    emb = F.embedding(words, p["embedding_0.w_0"])
    conv_3 = F.sequence_conv_pool(emb, p["sequence_conv_0.w_0"], p["sequence_conv_0.b_0"], 3, act="tanh")
    conv_4 = F.sequence_conv_pool(emb, p["sequence_conv_1.w_0"], p["sequence_conv_1.b_0"], 4, act="tanh")
    lstm1, _ = F.dynamic_lstm(F.fc(emb, p["fc_0.w_0"], p["fc_0.b_0"]), p["lstm_0.w_0"], p["lstm_0.b_0"])
    lstm_max = sequence_pool(lstm1, "max")
    features = np.concatenate([conv_3.data, conv_4.data, lstm_max.data], axis=1)
    return F.fc(features, p["fc_1.w_0"], p["fc_1.b_0"], act="softmax")


prob_np = infer(test_words)
with torch.no_grad():
    prob_torch = model(test_words.to_torch()).numpy()
np.testing.assert_allclose(prob_np, prob_torch, rtol=1e-4, atol=1e-5)
accuracy_np = (prob_np.argmax(1) == test_labels).mean()
print(f"NumPy inference from the Paddle checkpoint equals torch: accuracy {accuracy_np:.2f}")
