"""lodtensor.nn as PyTorch users use it: the recurrences against torch.nn.LSTM / torch.nn.GRU on a
PackedSequence (values and every gradient), the CRF against brute force over all tag paths, and the
modules' hygiene (state_dict, torch.save, deepcopy, casting, freezing, functional_call, repr,
reset_parameters, argument checks at construction)."""

import copy
import io
import itertools

import numpy as np
import pytest

import lodtensor as lt

torch = pytest.importorskip("torch")

from torch.nn.utils.rnn import pack_sequence, pad_packed_sequence  # noqa: E402

from lodtensor import nn  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

LODS = {"mixed": [0, 2, 7, 8], "one": [0, 3], "empties": [0, 0, 3, 3, 5]}
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def _torch_rnn(rnn, x, offs, reverse, state):
    """``rnn`` (one layer; bidirectional where ``reverse``) over the non-empty sequences of ``x`` packed:
    the outputs of the direction that matters, in ``x``'s row order."""
    seqs = [x[a:z] for a, z in zip(offs[:-1], offs[1:])]
    live = [i for i, s in enumerate(seqs) if len(s)]

    def initial(s):
        s = s[live]
        return torch.stack([torch.zeros_like(s), s]) if reverse else s[None]

    args = () if state is None else (tuple(initial(s) for s in state) if len(state) == 2 else initial(state[0]),)
    out, _ = rnn(pack_sequence([seqs[i] for i in live], enforce_sorted=False), *args)
    padded, _ = pad_packed_sequence(out, batch_first=True)
    rows = torch.cat([padded[j, : len(seqs[i])] for j, i in enumerate(live)])
    d = rnn.hidden_size
    return rows[:, d:] if reverse else rows


@pytest.mark.parametrize("lod", sorted(LODS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("state", [False, True])
def test_dynamic_lstm_equals_torch_lstm_values_and_every_gradient(lod, dtype, reverse, state):
    """Paddle's gate columns (c, i, f, o) are torch's rows (i, f, g, o): weight_hh = weight.T reordered,
    bias_ih = bias reordered, weight_ih the identity reordered (the input is already projected)."""
    torch.manual_seed(0)
    offs, d = LODS[lod], 3
    n = len(offs) - 1
    lstm = nn.DynamicLSTM(d, use_peepholes=False, is_reverse=reverse).to(dtype)
    with torch.no_grad():
        lstm.bias.normal_()
    x = torch.randn(offs[-1], 4 * d, dtype=dtype, requires_grad=True)
    h0, c0 = (torch.randn(n, d, dtype=dtype, requires_grad=True) for _ in range(2))
    hidden, _ = lstm(lt.LoDTensor(x, [offs]), *((h0, c0) if state else ()))
    out_grad = torch.randn_like(hidden.data)
    ours = torch.autograd.grad(hidden.data, [x, lstm.weight, lstm.bias] + ([h0, c0] if state else []), out_grad)

    order = torch.cat([torch.arange(k * d, (k + 1) * d) for k in (1, 2, 0, 3)])
    ref = torch.nn.LSTM(4 * d, d, dtype=dtype, bidirectional=reverse)
    sfx = "_l0_reverse" if reverse else "_l0"
    w_ih, w_hh, b_ih, b_hh = (getattr(ref, p + sfx) for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    with torch.no_grad():
        w_ih.copy_(torch.eye(4 * d, dtype=dtype)[order])
        w_hh.copy_(lstm.weight.T[order])
        b_ih.copy_(lstm.bias[0][order])
        b_hh.zero_()
    xr = x.detach().clone().requires_grad_()
    h0r, c0r = (s.detach().clone().requires_grad_() for s in (h0, c0))
    expected = _torch_rnn(ref, xr, offs, reverse, (h0r, c0r) if state else None)
    torch.testing.assert_close(hidden.data, expected, **TOL[dtype])
    theirs = torch.autograd.grad(expected, [xr, w_hh, b_ih] + ([h0r, c0r] if state else []), out_grad)
    back = torch.argsort(order)
    theirs = [theirs[0], theirs[1].T[:, back], theirs[2][back][None]] + list(theirs[3:])
    for name, a, b in zip(["input", "weight", "bias", "h_0", "c_0"], ours, theirs):
        torch.testing.assert_close(a, b, **TOL[dtype], msg=lambda m, name=name: f"{name}: {m}")


def test_dynamic_lstm_with_zero_peepholes_equals_torch_lstm():
    torch.manual_seed(1)
    offs, d = LODS["empties"], 2
    lstm = nn.DynamicLSTM(d).double()  # peepholes, starting at zero
    x = torch.randn(offs[-1], 4 * d, dtype=torch.float64)
    order = torch.cat([torch.arange(k * d, (k + 1) * d) for k in (1, 2, 0, 3)])
    ref = torch.nn.LSTM(4 * d, d, dtype=torch.float64)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.eye(4 * d, dtype=torch.float64)[order])
        ref.weight_hh_l0.copy_(lstm.weight.T[order])
        ref.bias_ih_l0.zero_()
        ref.bias_hh_l0.zero_()
    torch.testing.assert_close(lstm(lt.LoDTensor(x, [offs]))[0].data, _torch_rnn(ref, x, offs, False, None))


@pytest.mark.parametrize("lod", sorted(LODS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("state", [False, True])
@pytest.mark.parametrize("origin_mode", [False, True])
def test_dynamic_gru_equals_torch_gru_values_and_every_gradient(lod, dtype, reverse, state, origin_mode):
    """Paddle resets before the candidate's product ((r * h) @ W_c), torch after (r * (W_hn h)): the same
    for hidden size 1, where the mapping is exact. origin_mode is torch's update; without it Paddle's
    update gate is 1 - torch's, so its weights go in negated."""
    torch.manual_seed(2)
    offs, n = LODS[lod], len(LODS[lod]) - 1
    gru = nn.DynamicGRU(1, is_reverse=reverse, origin_mode=origin_mode).to(dtype)
    with torch.no_grad():
        gru.bias.normal_()
    x = torch.randn(offs[-1], 3, dtype=dtype, requires_grad=True)
    h0 = torch.randn(n, 1, dtype=dtype, requires_grad=True)
    hidden = gru(lt.LoDTensor(x, [offs]), *((h0,) if state else ()))
    out_grad = torch.randn_like(hidden.data)
    ours = torch.autograd.grad(hidden.data, [x, gru.weight, gru.bias] + ([h0] if state else []), out_grad)

    s = 1.0 if origin_mode else -1.0
    sign = torch.tensor([1.0, s, 1.0], dtype=dtype)  # torch's rows r, z, n
    pick = torch.tensor([1, 0, 2])  # the Paddle column (u, r, c) of each torch row
    ref = torch.nn.GRU(3, 1, dtype=dtype, bidirectional=reverse)
    sfx = "_l0_reverse" if reverse else "_l0"
    w_ih, w_hh, b_ih, b_hh = (getattr(ref, p + sfx) for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    with torch.no_grad():
        w_ih.copy_(torch.eye(3, dtype=dtype)[pick] * sign[:, None])
        w_hh.copy_((gru.weight[0][pick] * sign)[:, None])  # d = 1: the flat weight is [W_u, W_r, W_c]
        b_ih.copy_(gru.bias[0][pick] * sign)
        b_hh.zero_()
    xr = x.detach().clone().requires_grad_()
    h0r = h0.detach().clone().requires_grad_()
    expected = _torch_rnn(ref, xr, offs, reverse, (h0r,) if state else None)
    torch.testing.assert_close(hidden.data, expected, **TOL[dtype])
    theirs = torch.autograd.grad(expected, [xr, w_hh, b_ih] + ([h0r] if state else []), out_grad)
    back = torch.argsort(pick)
    theirs = [theirs[0], (theirs[1][:, 0] * sign)[back][None], (theirs[2] * sign)[back][None]] + list(theirs[3:])
    for name, a, b in zip(["input", "weight", "bias", "h_0"], ours, theirs):
        torch.testing.assert_close(a, b, **TOL[dtype], msg=lambda m, name=name: f"{name}: {m}")


def _brute_crf(x, w, offs, labels):
    """Negative log-likelihood and Viterbi path of every sequence, by enumerating every tag path."""
    k = x.shape[1]

    def score(xs, p):
        return (w[0, p[0]] + w[1, p[-1]] + sum(xs[i, t] for i, t in enumerate(p))
                + sum(w[2 + a, b] for a, b in zip(p, p[1:])))

    nll, path = [], []
    for a, z in zip(offs[:-1], offs[1:]):
        if z == a:
            nll.append(0.0)
            continue
        paths = list(itertools.product(range(k), repeat=z - a))
        scores = np.array([score(x[a:z], p) for p in paths])
        nll.append(np.logaddexp.reduce(scores) - score(x[a:z], list(labels[a:z])))
        path += paths[int(np.argmax(scores))]
    return np.array(nll), np.array(path, dtype=np.int64)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_crf_equals_brute_force_over_every_path(library):
    rng = np.random.RandomState(3)
    for _ in range(12):
        k = rng.randint(1, 4)
        offs = np.concatenate([[0], np.cumsum(rng.randint(0, 4, size=rng.randint(1, 5)))]).tolist()
        x, w = rng.randn(offs[-1], k) * 2, rng.randn(k + 2, k) * 2
        labels = rng.randint(0, k, size=offs[-1])
        nll, path = _brute_crf(x, w, offs, labels)
        wrap = np.asarray if library == "numpy" else torch.tensor
        got = F.linear_chain_crf(lt.LoDTensor(wrap(x), [offs]), lt.LoDTensor(wrap(labels[:, None]), [offs]), wrap(w))
        got = got.detach().numpy() if library == "torch" else got
        np.testing.assert_allclose(np.asarray(got).ravel(), nll, rtol=1e-10, atol=1e-10)
        decoded = F.crf_decoding(lt.LoDTensor(wrap(x), [offs]), wrap(w)).data
        np.testing.assert_array_equal(np.asarray(decoded).ravel(), path)


def test_crf_module_gradcheck_and_decode_with_empty_sequences():
    rng = np.random.RandomState(4)
    offs = [0, 2, 2, 5, 6]
    crf = nn.LinearChainCRF(3).double()
    x = torch.tensor(rng.randn(6, 3), requires_grad=True)
    labels = lt.LoDTensor(rng.randint(0, 3, (6, 1)), [offs])
    transition = crf.transition.detach().clone().requires_grad_()

    def nll(x, transition):
        return torch.func.functional_call(crf, {"transition": transition}, (lt.LoDTensor(x, [offs]), labels))

    assert torch.autograd.gradcheck(nll, (x, transition))
    expected_nll, expected_path = _brute_crf(x.detach().numpy(), transition.detach().numpy(), offs,
                                             labels.numpy().ravel())
    np.testing.assert_allclose(nll(x, transition).detach().numpy().ravel(), expected_nll, rtol=1e-10)
    decoding = nn.CRFDecoding(crf)
    np.testing.assert_array_equal(decoding(lt.LoDTensor(x, [offs])).data.numpy().ravel(), expected_path)


LOD = [[0, 2, 2, 5]]


MAKERS = {
    "Embedding": lambda: nn.Embedding(6, 4, padding_idx=0),
    "FC": lambda: nn.FC(3, 2, act="tanh"),
    "SequenceConv": lambda: nn.SequenceConv(2, 4, filter_size=3, padding_trainable=True),
    "RowConv": lambda: nn.RowConv(2, 1),
    "DynamicLSTM": lambda: nn.DynamicLSTM(2),
    "DynamicGRU": lambda: nn.DynamicGRU(2),
    "LinearChainCRF": lambda: nn.LinearChainCRF(3),
    "CRFDecoding": lambda: nn.CRFDecoding(3),
}


def _inputs(name):
    """An input for the module ``name`` (NumPy data: the modules convert it)."""
    rng = np.random.RandomState(5)
    ids = lt.LoDTensor(np.array([[1], [0], [3], [2], [1]]), LOD)
    width = {"FC": 3, "SequenceConv": 2, "RowConv": 2, "DynamicLSTM": 8, "DynamicGRU": 6}.get(name, 3)
    rows = lt.LoDTensor(rng.rand(5, width).astype("float32"), LOD)
    return {"Embedding": (ids,), "LinearChainCRF": (rows, ids.with_data(ids.data % 3))}.get(name, (rows,))


def _out(module, args):
    out = module(*args)
    out = out[0] if isinstance(out, tuple) else out
    return out.data if isinstance(out, lt.LoDTensor) else out


def _randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(-1, 1)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_state_dict_torch_save_deepcopy_and_casting(name):
    torch.manual_seed(6)
    module, args = MAKERS[name](), _inputs(name)
    _randomize(module)
    expected = _out(module, args)
    keys = list(module.state_dict())
    # torch.save + torch.load(weights_only=True) of the state_dict into a fresh module, strictly
    blob = io.BytesIO()
    torch.save(module.state_dict(), blob)
    blob.seek(0)
    fresh = MAKERS[name]()
    assert fresh.load_state_dict(torch.load(blob, weights_only=True), strict=True) is not None
    assert list(fresh.state_dict()) == keys
    torch.testing.assert_close(_out(fresh, args), expected)
    # deepcopy: same outputs, independent parameters
    twin = copy.deepcopy(module)
    torch.testing.assert_close(_out(twin, args), expected)
    with torch.no_grad():
        next(twin.parameters()).add_(1.0)
    assert not torch.equal(next(twin.parameters()), next(module.parameters()))
    # .double(): every parameter cast and the forward computing with them
    module.double()
    assert all(p.dtype == torch.float64 for p in module.parameters())
    out64 = _out(module, args)
    if out64.is_floating_point():
        assert out64.dtype == torch.float64
        torch.testing.assert_close(out64.float(), expected, rtol=1e-5, atol=1e-5)
    else:
        torch.testing.assert_close(out64, expected)
    module.half()
    out16 = _out(module, args)
    assert out16.dtype == (torch.float16 if out16.is_floating_point() else torch.int64)


@pytest.mark.parametrize("name", sorted(set(MAKERS) - {"CRFDecoding"}))
def test_functional_call_freezing_clipping_and_an_optimizer(name):
    torch.manual_seed(7)
    module, args = MAKERS[name](), _inputs(name)
    swapped = {k: torch.rand_like(v) - 0.5 for k, v in module.named_parameters()}
    got = torch.func.functional_call(module, swapped, args)
    loaded = copy.deepcopy(module)
    loaded.load_state_dict(swapped)
    got = got[0] if isinstance(got, tuple) else got
    torch.testing.assert_close(got.data if isinstance(got, lt.LoDTensor) else got, _out(loaded, args))
    # an optimizer step over parameters(), after the gradient is clipped
    module.zero_grad()
    _out(module, args).sum().backward()
    assert all(p.grad is not None for p in module.parameters())
    torch.nn.utils.clip_grad_norm_(module.parameters(), 1e-3)
    before = [p.detach().clone() for p in module.parameters()]
    torch.optim.SGD(module.parameters(), lr=1.0).step()
    assert any(not torch.equal(a, p) for a, p in zip(before, module.parameters()))
    # frozen: no gradient reaches the parameters (the input's still does)
    module.zero_grad(set_to_none=True)
    module.requires_grad_(False)
    assert not _out(module, args).requires_grad or name == "Embedding"
    assert all(p.grad is None for p in module.parameters())


@pytest.mark.parametrize("make, error, message", [
    (lambda: nn.FC(-2, 3), ValueError, r"FC\(\): in_features must be >= 1, got -2"),
    (lambda: nn.FC(3, 0), ValueError, r"FC\(\): out_features must be >= 1, got 0"),
    (lambda: nn.FC(2.5, 3), TypeError, r"FC\(\): in_features must be an integer, got float 2.5"),
    (lambda: nn.FC(2, 3, num_flatten_dims=0), ValueError, r"FC\(\): num_flatten_dims must be -1 or >= 1, got 0"),
    (lambda: nn.FC(2, 3, bias="no"), TypeError, r"FC\(\): bias must be True or False, got str 'no'"),
    (lambda: nn.Embedding(-1, 2), ValueError, r"Embedding\(\): num_embeddings must be >= 1, got -1"),
    (lambda: nn.Embedding(5, "4"), TypeError, r"Embedding\(\): embedding_dim must be an integer, got str '4'"),
    (lambda: nn.Embedding(3, 2, padding_idx=5), ValueError,
     r"Embedding\(\): padding_idx must be in \[-3, 3\) for num_embeddings=3, got 5"),
    (lambda: nn.SequenceConv(-2, 3), ValueError, r"SequenceConv\(\): input_dim must be >= 1, got -2"),
    (lambda: nn.SequenceConv(2, 0), ValueError, r"SequenceConv\(\): num_filters must be >= 1, got 0"),
    (lambda: nn.RowConv(-2, 1), ValueError, r"RowConv\(\): input_dim must be >= 1, got -2"),
    (lambda: nn.DynamicLSTM(2, gate_activation="gelu"), ValueError,
     r"DynamicLSTM\(\): gate_activation must be one of \[.*\] or None, got 'gelu'"),
    (lambda: nn.DynamicLSTM(2, use_peepholes="False"), TypeError,
     r"DynamicLSTM\(\): use_peepholes must be True or False, got str 'False'"),
    (lambda: nn.DynamicGRU(2, candidate_activation="bogus"), ValueError,
     r"DynamicGRU\(\): candidate_activation must be one of \[.*\] or None, got 'bogus'"),
    (lambda: nn.DynamicGRU(2, origin_mode="yes"), TypeError, r"DynamicGRU\(\): origin_mode must be True or False"),
])
def test_module_arguments_are_checked_at_construction(make, error, message):
    """Before: FC(-2, 3) raised ZeroDivisionError, SequenceConv(-2, 3) 'math domain error', FC(2.5, 3)
    torch.empty()'s message, Embedding(-1, 2) torch's negative-dimension RuntimeError; Embedding(3, 2,
    padding_idx=5) was accepted (torch refuses it at construction); DynamicLSTM(use_peepholes="False")
    built a [1, 7D] bias by the string's truth and failed only at the first forward, as did unknown
    activation names."""
    with pytest.raises(error, match=message):
        make()


def test_repr_names_the_sizes():
    """Before: every module printed as ``FC()``, ``DynamicLSTM()`` (no extra_repr)."""
    assert repr(nn.FC(3, 2, act="relu")) == "FC(3, 2, act='relu')"
    assert repr(nn.FC(3, 2, bias=False, num_flatten_dims=2)) == "FC(3, 2, num_flatten_dims=2, bias=False)"
    assert repr(nn.Embedding(10, 4, padding_idx=0)) == "Embedding(10, 4, padding_idx=0)"
    assert repr(nn.SequenceConv(2, 4, bias=False)) == "SequenceConv(2, 4, bias=False)"
    assert repr(nn.SequenceConv(2, 4, 5, padding_trainable=True)) == (
        "SequenceConv(2, 4, filter_size=5, padding_trainable=True)")
    assert repr(nn.RowConv(2, 1, act="relu")) == "RowConv(2, 1, act='relu')"
    assert repr(nn.DynamicLSTM(4)) == "DynamicLSTM(4)"
    assert repr(nn.DynamicLSTM(4, use_peepholes=False, is_reverse=True, cell_activation="relu")) == (
        "DynamicLSTM(4, use_peepholes=False, is_reverse=True, cell_activation='relu')")
    assert repr(nn.DynamicGRU(2, origin_mode=True)) == "DynamicGRU(2, origin_mode=True)"
    assert repr(nn.CRFDecoding(3)) == "CRFDecoding(\n  (crf): LinearChainCRF(3)\n)"


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_reset_parameters_draws_as_construction_does(name):
    """Before: no module had reset_parameters, so torch's ``for m in model.modules(): if hasattr(m,
    'reset_parameters'): m.reset_parameters()`` silently skipped them all."""
    module = MAKERS[name]()
    torch.manual_seed(8)
    fresh = MAKERS[name]()
    _randomize(module)
    torch.manual_seed(8)
    module.reset_parameters() if name != "CRFDecoding" else module.crf.reset_parameters()
    for (key, a), b in zip(module.state_dict().items(), fresh.state_dict().values()):
        torch.testing.assert_close(a, b, msg=lambda m, key=key: f"{key}: {m}")


@pytest.mark.parametrize("make, message", [
    (lambda: nn.FC(3, 2), r"FC\(in_features=3\)\.forward\(\): input must have in_features = 3 values per "
                          r"row, got 4 \(input shape \[5, 4\]\)"),
    (lambda: nn.SequenceConv(3, 2), r"SequenceConv\(input_dim=3\)\.forward\(\): input must have input_dim = 3"),
    (lambda: nn.RowConv(3, 1), r"RowConv\(input_dim=3\)\.forward\(\): input must have input_dim = 3 values "
                               r"per row, got 4"),
    (lambda: nn.LinearChainCRF(3),
     r"LinearChainCRF\(num_tags=3\)\.forward\(\): input must have num_tags = 3 values per row, got 4"),
    (lambda: nn.CRFDecoding(3), r"LinearChainCRF\(num_tags=3\)\.decode\(\): input must have num_tags = 3"),
])
def test_a_module_fed_the_wrong_width_names_its_size_not_its_weight(make, message):
    """Before: ``fc(): weight must have shape [4, *], got [3, 2]`` (and the like for sequence_conv, row_conv,
    the CRF's transition): the module's own parameter blamed for the caller's input."""
    module = make()
    label = (lt.LoDTensor(np.zeros((5, 1), "int64"), LOD),) if isinstance(module, nn.LinearChainCRF) else ()
    with pytest.raises(ValueError, match=message):
        module(lt.LoDTensor(np.zeros((5, 4), "float32"), LOD), *label)


def test_fc_width_check_follows_num_flatten_dims():
    x = lt.LoDTensor(torch.randn(5, 2, 3), LOD)
    assert nn.FC(3, 2, num_flatten_dims=2)(x).data.shape == (5, 2, 2)
    assert nn.FC(3, 2, num_flatten_dims=-1)(x).data.shape == (5, 2, 2)
    assert nn.FC(6, 2)(x).data.shape == (5, 2)
    with pytest.raises(ValueError, match=r"in_features = 3 values per row, got 6 \(input shape \[5, 2, 3\]\)"):
        nn.FC(3, 2)(x)
