"""lodtensor.nn.functional without Paddle: NumPy forward equals torch forward, torch gradients
pass gradcheck (float64), the batched recurrences equal running each sequence alone, the LSTM
equals torch.nn.LSTM with the gates reordered, and bad arguments raise clear errors. The
comparisons with Paddle's own operators are in tests/paddle/test_paddle_layers.py."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.nn import functional as F

torch = pytest.importorskip("torch")

LOD = [[0, 3, 3, 5, 6]]
ROWS = 6


def rand(rng, *shape):
    return rng.uniform(-0.7, 0.7, size=shape)


def as_torch(*arrays):
    return [torch.tensor(a, requires_grad=True) for a in arrays]


def lod_t(data, lod=LOD):
    return lt.LoDTensor(data, lod)


def test_numpy_and_torch_agree_for_every_layer():
    rng = np.random.RandomState(0)
    ids = lod_t(rng.randint(0, 5, (ROWS, 1)))
    labels = lod_t(rng.randint(0, 4, (ROWS, 1)))
    ctc_labels = lt.LoDTensor(np.array([[1], [3], [2]]), [[0, 2, 2, 2, 3]])
    cases = [  # (layer, input width, parameters)
        (lambda x, w: F.embedding(ids, w, padding_idx=1), 1, [rand(rng, 5, 3)]),
        (lambda x, w, b: F.fc(x, w, b, act="relu"), 8, [rand(rng, 8, 3), rand(rng, 3)]),
        (lambda x, w, b: F.sequence_conv(x, w, b, filter_size=3, act="tanh"), 8, [rand(rng, 24, 2), rand(rng, 2)]),
        (F.row_conv, 8, [rand(rng, 3, 8)]),
        (lambda x, w, b: F.dynamic_lstm(x, w, b, is_reverse=True)[0], 8, [rand(rng, 2, 8), rand(rng, 1, 14)]),
        (lambda x, w, b: F.dynamic_gru(x, w, b, origin_mode=True), 6, [rand(rng, 2, 6), rand(rng, 1, 6)]),
        (lambda x, w: F.linear_chain_crf(x, labels, w), 4, [rand(rng, 6, 4)]),
        (lambda x, w: F.warpctc(x, ctc_labels, blank=0), 4, [rand(rng, 1)]),
        (lambda x, w, b: F.sequence_conv_pool(x, w, b, 3, pool_type="average"), 8, [rand(rng, 24, 2), rand(rng, 2)]),
    ]
    for fn, width, params in cases:
        x = rand(rng, ROWS, width)
        out_np = fn(lod_t(x), *params)
        out_t = fn(lod_t(torch.tensor(x)), *[torch.tensor(p) for p in params])
        a = out_np.data if isinstance(out_np, lt.LoDTensor) else out_np
        b = out_t.data if isinstance(out_t, lt.LoDTensor) else out_t
        assert isinstance(a, np.ndarray) and isinstance(b, torch.Tensor)
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-10, atol=1e-12)


def _gradcheck(fn, *inputs):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def test_gradcheck_recurrences():
    rng = np.random.RandomState(3)
    x, w, b, h0, c0 = as_torch(rand(rng, ROWS, 8), rand(rng, 2, 8), rand(rng, 1, 14), rand(rng, 4, 2),
                               rand(rng, 4, 2))
    _gradcheck(lambda x, w, b, h0, c0: F.dynamic_lstm(lod_t(x), w, b, h0, c0)[0].data, x, w, b, h0, c0)
    _gradcheck(lambda x, w, b: F.dynamic_lstm(lod_t(x), w, b[:, :8], use_peepholes=False, is_reverse=True)[1].data,
               x, w, b)
    xg, wg, bg, hg = as_torch(rand(rng, ROWS, 6), rand(rng, 2, 6), rand(rng, 1, 6), rand(rng, 4, 2))
    _gradcheck(lambda x, w, b, h: F.dynamic_gru(lod_t(x), w, b, h, origin_mode=True).data, xg, wg, bg, hg)
    _gradcheck(lambda x, w, b: F.dynamic_gru(lod_t(x), w, b, is_reverse=True).data, xg, wg, bg)


def test_gradcheck_conv_crf_ctc():
    rng = np.random.RandomState(4)
    x, w, b = as_torch(rand(rng, ROWS, 3), rand(rng, 9, 2), rand(rng, 2))
    _gradcheck(lambda x, w, b: F.sequence_conv(lod_t(x), w, b, act="sigmoid").data, x, w, b)
    r, = as_torch(rand(rng, 3, 3))
    _gradcheck(lambda x, r: F.row_conv(lod_t(x), r).data, x, r)
    labels = lod_t(rng.randint(0, 3, (ROWS, 1)))
    trans, = as_torch(rand(rng, 5, 3))
    _gradcheck(lambda x, t: F.linear_chain_crf(lod_t(x), labels, t), x, trans)
    ctc_labels = lt.LoDTensor(np.array([[1], [2], [1]]), [[0, 2, 2, 3, 3]])
    _gradcheck(lambda x: F.warpctc(lod_t(x), ctc_labels, blank=0), x)


def test_batched_recurrence_equals_one_sequence_at_a_time():
    rng = np.random.RandomState(5)
    lod = [[0, 4, 4, 5, 11, 13]]
    x = rand(rng, 13, 12)
    w, b = rand(rng, 3, 12), rand(rng, 1, 21)
    wg, bg = rand(rng, 4, 12), rand(rng, 1, 12)
    h, c = F.dynamic_lstm(lt.LoDTensor(x, lod), w, b, is_reverse=True)
    g = F.dynamic_gru(lt.LoDTensor(x, lod), wg, bg)
    for a, z in zip(lod[0][:-1], lod[0][1:]):
        if a == z:
            continue
        hs, cs = F.dynamic_lstm(lt.LoDTensor(x[a:z], [[0, z - a]]), w, b, is_reverse=True)
        np.testing.assert_allclose(h.data[a:z], hs.data, rtol=1e-12)
        np.testing.assert_allclose(c.data[a:z], cs.data, rtol=1e-12)
        gs = F.dynamic_gru(lt.LoDTensor(x[a:z], [[0, z - a]]), wg, bg)
        np.testing.assert_allclose(g.data[a:z], gs.data, rtol=1e-12)


def test_lstm_equals_torch_lstm_on_a_packed_sequence():
    """Paddle's gate order (c, i, f, o) against torch's (i, f, g, o), no peepholes."""
    rng = np.random.RandomState(6)
    d, lod = 3, [[0, 2, 7, 8]]
    x = torch.tensor(rand(rng, 8, 4 * d))
    w, b = torch.tensor(rand(rng, d, 4 * d)), torch.tensor(rand(rng, 1, 4 * d))
    hidden, _ = F.dynamic_lstm(lt.LoDTensor(x, lod), w, b, use_peepholes=False)
    lstm = torch.nn.LSTM(4 * d, d, dtype=torch.float64)
    i, f, c, o = (torch.arange(k * d, (k + 1) * d) for k in (1, 2, 0, 3))
    reorder = torch.cat([i, f, c, o])
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.eye(4 * d, dtype=torch.float64)[reorder])
        lstm.weight_hh_l0.copy_(w.T[reorder])
        lstm.bias_ih_l0.copy_(b[0][reorder])
        lstm.bias_hh_l0.zero_()
    seqs = [x[a:z] for a, z in zip(lod[0][:-1], lod[0][1:])]
    packed = torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    out, _ = lstm(packed)
    padded, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    expected = torch.cat([padded[i, : len(s)] for i, s in enumerate(seqs)])
    np.testing.assert_allclose(hidden.data.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_crf_decoding_is_the_best_path_and_ctc_matches_torch():
    import itertools

    rng = np.random.RandomState(7)
    x, w = rand(rng, 4, 3) * 3, rand(rng, 5, 3) * 2
    path = F.crf_decoding(lt.LoDTensor(x, [[0, 4]]), w).data.ravel().tolist()

    def score(p):
        return w[0, p[0]] + w[1, p[-1]] + sum(x[i, t] for i, t in enumerate(p)) + sum(
            w[2 + a, b] for a, b in zip(p, p[1:]))

    best = max(itertools.product(range(3), repeat=4), key=score)
    assert path == list(best)
    # the NumPy CTC recursion against torch's ctc_loss (the torch path)
    logits = rand(rng, 9, 4)
    labels = lt.LoDTensor(np.array([[1], [1], [2], [3]]), [[0, 3, 4]])
    ours = F.warpctc(lt.LoDTensor(logits, [[0, 6, 9]]), labels, blank=0)
    ref = F.warpctc(lt.LoDTensor(torch.tensor(logits), [[0, 6, 9]]), labels, blank=0)
    np.testing.assert_allclose(ours.ravel(), ref.detach().numpy().ravel(), rtol=1e-10)


def test_errors_name_the_argument():
    x = lt.LoDTensor(np.zeros((3, 8)), [[0, 1, 3]])
    with pytest.raises(ValueError, match=r"weight must have shape \[2, 8\], got \[3, 8\]"):
        F.dynamic_lstm(x, np.zeros((3, 8)), np.zeros((1, 14)))
    with pytest.raises(ValueError, match=r"bias must have shape \[1, 8\]"):
        F.dynamic_lstm(x, np.zeros((2, 8)), np.zeros((1, 14)), use_peepholes=False)
    with pytest.raises(ValueError, match=r"input width must be 3 \* hidden size \(the input projected by an fc "
                                         r"of size 3 \* hidden\), got 8"):
        F.dynamic_gru(x, np.zeros((2, 6)))
    with pytest.raises(ValueError, match=r"h_0 must have shape \[2, 2\]"):
        F.dynamic_lstm(x, np.zeros((2, 8)), np.zeros((1, 14)), h_0=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="must have a lod"):
        F.sequence_conv(lt.LoDTensor(np.zeros((3, 2))), np.zeros((6, 1)))
    with pytest.raises(ValueError, match=r"weight must have shape \[6, \*\]"):
        F.sequence_conv(lt.LoDTensor(np.zeros((3, 2)), [[0, 3]]), np.zeros((4, 1)))
    with pytest.raises(IndexError, match="id 7 is out of range for a vocabulary of 5"):
        F.embedding(lt.LoDTensor(np.array([[7]]), [[0, 1]]), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="act must be one of"):
        F.fc(x, np.zeros((8, 2)), act="swishy")
    with pytest.raises(ValueError, match="labels must be in"):
        F.linear_chain_crf(lt.LoDTensor(np.zeros((2, 3)), [[0, 2]]), lt.LoDTensor(np.array([[0], [3]]), [[0, 2]]),
                           np.zeros((5, 3)))
    with pytest.raises(ValueError, match="input has 2 sequences but label has 1"):
        F.warpctc(x, lt.LoDTensor(np.array([[1]]), [[0, 1]]))
    with pytest.raises(TypeError, match="input must be a LoDTensor, got object"):
        F.dynamic_lstm(object(), None, None)


@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("state", ["none", "h", "c", "both"])
@pytest.mark.parametrize("acts", [("sigmoid", "tanh", "tanh"), ("tanh", "relu", "identity")])
def test_lstm_inplace_path_equals_autograd_path(peep, state, acts):
    rng = np.random.RandomState(8)
    x, w, b = rand(rng, ROWS, 8), rand(rng, 2, 8), rand(rng, 1, 14 if peep else 8)
    h0 = rand(rng, 4, 2) if state in ("h", "both") else None
    c0 = rand(rng, 4, 2) if state in ("c", "both") else None
    kw = dict(use_peepholes=peep, gate_activation=acts[0], cell_activation=acts[1], candidate_activation=acts[2])
    h, c = F.dynamic_lstm(lod_t(x), w, b, h0, c0, **kw)
    as_t = lambda a: None if a is None else torch.tensor(a, requires_grad=True)  # noqa: E731
    # the in-place path (NumPy; torch without autograd) against the autograd path (torch)
    ht, ct = F.dynamic_lstm(lod_t(as_t(x)), as_t(w), as_t(b), as_t(h0), as_t(c0), **kw)
    with torch.no_grad():
        hn, cn = F.dynamic_lstm(lod_t(as_t(x)), as_t(w), as_t(b), as_t(h0), as_t(c0), **kw)
    for fast in (h.data, hn.data.numpy()):
        np.testing.assert_allclose(fast, ht.data.detach().numpy(), rtol=1e-12, atol=1e-14)
    for fast in (c.data, cn.data.numpy()):
        np.testing.assert_allclose(fast, ct.data.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("origin_mode", [True, False])
@pytest.mark.parametrize("with_h0", [True, False])
@pytest.mark.parametrize("acts", [("sigmoid", "tanh"), ("tanh", "relu")])
def test_gru_inplace_path_equals_autograd_path(origin_mode, with_h0, acts):
    rng = np.random.RandomState(9)
    x, w, b = rand(rng, ROWS, 6), rand(rng, 2, 6), rand(rng, 1, 6)
    h0 = rand(rng, 4, 2) if with_h0 else None
    kw = dict(origin_mode=origin_mode, gate_activation=acts[0], candidate_activation=acts[1])
    h = F.dynamic_gru(lod_t(x), w, b, h0, **kw)
    as_t = lambda a: None if a is None else torch.tensor(a, requires_grad=True)  # noqa: E731
    ht = F.dynamic_gru(lod_t(as_t(x)), as_t(w), as_t(b), as_t(h0), **kw)
    with torch.no_grad():
        hn = F.dynamic_gru(lod_t(as_t(x)), as_t(w), as_t(b), as_t(h0), **kw)
    for fast in (h.data, hn.data.numpy()):
        np.testing.assert_allclose(fast, ht.data.detach().numpy(), rtol=1e-12, atol=1e-14)
    # the caller's arrays are untouched by the in-place path
    assert np.array_equal(x, rand(np.random.RandomState(9), ROWS, 6))


def test_inplace_path_reads_tensors_with_the_negative_bit():
    """The no-grad path takes the gates with NumPy on the tensor's memory: a float view with the
    negative bit (the imaginary part of a conjugate) is read as its values (it raised)."""
    rng = np.random.RandomState(10)
    x, w, b = rand(rng, ROWS, 8), rand(rng, 2, 8), rand(rng, 1, 8)
    # the imaginary part of conj(0 - x i) is x, held as -x with the negative bit set
    neg = torch.complex(torch.zeros_like(torch.tensor(x)), -torch.tensor(x)).conj().imag
    assert neg.is_neg() and np.allclose(neg.resolve_neg().numpy(), x)
    with torch.no_grad():
        h, c = F.dynamic_lstm(lod_t(neg), torch.tensor(w), torch.tensor(b), use_peepholes=False)
        hg = F.dynamic_gru(lod_t(neg[:, :6]), torch.tensor(w[:, :6]), torch.tensor(b[:, :6]))
    want_h, want_c = F.dynamic_lstm(lod_t(x), w, b, use_peepholes=False)
    np.testing.assert_allclose(h.data.numpy(), want_h.data, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(c.data.numpy(), want_c.data, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hg.data.numpy(), F.dynamic_gru(lod_t(x[:, :6]), w[:, :6], b[:, :6]).data,
                               rtol=1e-12, atol=1e-14)


def test_fc_of_a_list_of_inputs():
    """Paddle's fc([a, b], size): one weight per input, the products summed, one bias (#26: F.fc([a, b], w)
    said "move the input with .to_torch()")."""
    rng = np.random.RandomState(0)
    a = lt.LoDTensor(rng.rand(4, 3), [[0, 1, 4]])
    b = lt.LoDTensor(rng.rand(4, 2, 2), [[0, 1, 4]])
    wa, wb, bias = rng.rand(3, 5), rng.rand(4, 5), rng.rand(5)
    out = F.fc([a, b], [wa, wb], bias, act="tanh")
    assert out.lod() == a.lod()
    np.testing.assert_allclose(out.data, np.tanh(a.data @ wa + b.data.reshape(4, 4) @ wb + bias))
    t = F.fc([a.with_data(torch.tensor(a.data)), b.with_data(torch.tensor(b.data))],
             [torch.tensor(wa, requires_grad=True), torch.tensor(wb)])
    t.data.sum().backward()
    with pytest.raises(TypeError, match=r"input is a list of 2 tensors, so weight must be a list of 2 weights "
                                        r"\(one per input, as Paddle stores them: fc_0.w_0, fc_0.w_1, \.\.\.\), "
                                        r"got one weight"):
        F.fc([a, b], wa)
    with pytest.raises(TypeError, match="weight is a list of 2 but input is one tensor"):
        F.fc(a, [wa, wb])
    with pytest.raises(ValueError, match=r"weight\[1\] must have shape \[4, \*\], got \[3, 5\]"):
        F.fc([a, b], [wa, wa])
    with pytest.raises(ValueError, match=r"input\[1\] has leading shape \[2\] \(numpy\) but input\[0\] has \[4\]"):
        F.fc([a, np.ones((2, 3))], [wa, wa])
    with pytest.raises(TypeError, match=r"input must be a LoDTensor or an array \(NumPy, CuPy or torch\), got dict"):
        F.fc({"x": a}, wa)


def test_sequence_conv_padding_errors():
    x = lt.LoDTensor(np.ones((3, 2)), [[0, 3]])
    with pytest.raises(TypeError, match=r"padding_trainable=True needs padding_data of shape \[2, 2\]"):
        F.sequence_conv(x, np.ones((6, 1)), padding_trainable=True)
    with pytest.raises(ValueError, match=r"padding_data must have shape \[2, 2\], got \[3, 2\]"):
        F.sequence_conv(x, np.ones((6, 1)), padding_trainable=True, padding_data=np.ones((3, 2)))
    with pytest.raises(ValueError, match="padding_data is used only with padding_trainable=True"):
        F.sequence_conv(x, np.ones((6, 1)), padding_data=np.ones((2, 2)))
    # a short sequence reads as many padding rows as the window leaves outside it, on both sides
    out = F.sequence_conv(lt.LoDTensor(np.array([[1.0]]), [[0, 1]]), np.ones((5, 1)), filter_size=5,
                          padding_trainable=True, padding_data=np.array([[10.0], [20.0], [30.0], [40.0]]))
    assert out.data.ravel().tolist() == [10.0 + 20.0 + 1.0 + 30.0 + 40.0]
