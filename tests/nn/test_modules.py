"""The torch.nn.Modules of lodtensor.nn: Paddle's parameter shapes, checkpoints load unchanged,
they train."""

import io

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.fluid import io as fio

torch = pytest.importorskip("torch")

from lodtensor import nn  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402


def test_parameter_shapes_are_paddles():
    assert nn.Embedding(10, 4).weight.shape == (10, 4)
    assert nn.FC(6, 3).weight.shape == (6, 3) and nn.FC(6, 3).bias.shape == (3,)
    assert nn.SequenceConv(4, 5, filter_size=3).weight.shape == (12, 5)
    assert nn.RowConv(4, 2).weight.shape == (3, 4)
    assert nn.DynamicLSTM(4).bias.shape == (1, 28) and nn.DynamicLSTM(4, use_peepholes=False).bias.shape == (1, 16)
    assert nn.DynamicGRU(4).weight.shape == (4, 12) and nn.DynamicGRU(4).bias.shape == (1, 12)
    assert nn.LinearChainCRF(5).transition.shape == (7, 5)


def test_a_paddle_checkpoint_loads_unchanged():
    rng = np.random.RandomState(0)
    state = {"w": rng.rand(3, 9).astype("float32"), "b": rng.rand(1, 9).astype("float32")}
    blob = io.BytesIO()
    fio.save_combine(state, blob)
    loaded = fio.load_combine(io.BytesIO(blob.getvalue()), ["w", "b"])
    gru = nn.DynamicGRU(3)
    gru.load_state_dict({"weight": torch.from_numpy(loaded["w"].numpy()),
                         "bias": torch.from_numpy(loaded["b"].numpy())})
    x = lt.LoDTensor(rng.rand(5, 9).astype("float32"), [[0, 2, 5]])
    expected = F.dynamic_gru(x, state["w"], state["b"])
    got = gru(x.with_data(torch.from_numpy(x.numpy())))
    np.testing.assert_allclose(got.data.detach().numpy(), expected.data, rtol=1e-5)


def test_a_small_tagger_trains():
    torch.manual_seed(0)
    rng = np.random.RandomState(1)
    lod = [[0, 4, 7, 12]]
    words = lt.LoDTensor(torch.from_numpy(rng.randint(0, 6, (12, 1))), lod)
    tags = lt.LoDTensor(words.data % 3, lod)  # learnable: the tag is a function of the word
    emb, proj, lstm, out, crf = nn.Embedding(6, 8), nn.FC(8, 16), nn.DynamicLSTM(4), nn.FC(4, 3), nn.LinearChainCRF(3)
    model = torch.nn.ModuleList([emb, proj, lstm, out, crf])
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(60):
        hidden, _ = lstm(proj(emb(words)))
        loss = crf(out(hidden), tags).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    hidden, _ = lstm(proj(emb(words)))
    path = nn.CRFDecoding(crf)(out(hidden))
    assert path.lod() == lod
    assert (path.data.ravel() == tags.data.ravel()).float().mean() > 0.9
