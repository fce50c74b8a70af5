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


def test_numpy_input_runs_on_torch_and_trains():
    """A NumPy LoDTensor given to a module is converted to torch (the module's dtype, zero-copy for
    float32): the output is torch and the gradient reaches the Parameters (#26: it ran detached)."""
    torch.manual_seed(0)
    ids = lt.LoDTensor(np.array([[1], [2], [0], [3]]), [[0, 3, 4]])
    emb, proj, lstm = nn.Embedding(4, 3), nn.FC(3, 8), nn.DynamicLSTM(2)
    hidden, _ = lstm(proj(emb(ids)))
    assert isinstance(hidden.data, torch.Tensor) and hidden.lod() == ids.lod()
    hidden.data.sum().backward()
    assert all(p.grad is not None for p in (emb.weight, proj.weight, lstm.weight))
    x64 = lt.LoDTensor(np.ones((4, 3)), [[0, 4]])  # float64 NumPy in a float32 module
    assert proj(x64).data.dtype == torch.float32
    x32 = np.ones((4, 3), "float32")
    assert isinstance(proj(x32), torch.Tensor)
    gru = nn.DynamicGRU(2)
    h0 = np.zeros((2, 2), "float32")
    assert gru(lt.LoDTensor(np.ones((4, 6), "float32"), [[0, 1, 4]]), h_0=h0).data.shape == (4, 2)


def test_paddle_size_keyword_and_the_4x_rule():
    assert nn.DynamicLSTM(size=2048).hidden_size == 512 and nn.DynamicLSTM(size=2048).weight.shape == (512, 2048)
    assert nn.DynamicGRU(size=6).hidden_size == 6
    with pytest.raises(ValueError, match="size must be 4 \\* hidden size, got 10"):
        nn.DynamicLSTM(size=10)
    with pytest.raises(ValueError, match="hidden_size=4 and size=32 disagree"):
        nn.DynamicLSTM(4, size=32)
    with pytest.raises(TypeError, match="give hidden_size"):
        nn.DynamicGRU()
    # Paddle's dynamic_lstm(input, size=32) ported as DynamicLSTM(32): the message says what to write
    x = lt.LoDTensor(torch.zeros(3, 32), [[0, 3]])
    with pytest.raises(ValueError, match=r"input must have 4 \* hidden_size = 128 columns .*got 32\. Paddle's "
                                         r"dynamic_lstm\(size=\.\.\.\) is 4 \* hidden size; an input of width 32 "
                                         r"needs hidden size 8: DynamicLSTM\(8\) or DynamicLSTM\(size=32\)"):
        nn.DynamicLSTM(32)(x)
    with pytest.raises(ValueError, match=r"input must have 3 \* hidden_size = 9 columns"):
        nn.DynamicGRU(3)(lt.LoDTensor(torch.zeros(3, 6), [[0, 3]]))


def test_sequence_conv_trainable_padding_learns():
    torch.manual_seed(0)
    conv = nn.SequenceConv(2, 3, filter_size=3, padding_trainable=True)
    assert conv.padding.shape == (2, 2) and float(conv.padding.detach().abs().sum()) == 0.0
    x = lt.LoDTensor(torch.randn(5, 2), [[0, 1, 5]])
    plain = F.sequence_conv(x, conv.weight, conv.bias, filter_size=3)
    np.testing.assert_allclose(conv(x).data.detach().numpy(), plain.data.detach().numpy())  # zero padding at first
    conv(x).data.sum().backward()
    assert conv.padding.grad is not None and float(conv.padding.grad.abs().sum()) > 0
    assert nn.SequenceConv(2, 3, filter_size=1, padding_trainable=True).padding.shape == (0, 2)
