"""torch.func over Paddle's recurrences (``dynamic_lstm``, ``dynamic_gru``) on torch tensors.

Samples that share one LoD, vmapped on the data: the autograd Function's vmap rule folds the
samples into more sequences of the same lengths (``_vmap.steps_rule``) and runs once, so a vmapped
forward (also under plain autograd) equals a loop over samples. A gradient transform inside vmap
(per-sample gradients, ``vmap(grad(loss))``), ``jvp`` and weights batched per sample (an
ensemble) take the recurrence as torch ops (``_recurrent_ops``), which every transform follows; so
do second derivatives there. Each is compared with a loop of the plain call, on CPU, on the emulated
torch-CUDA route and (marked gpu) on CUDA."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.nn.functional import dynamic_gru, dynamic_lstm

torch = pytest.importorskip("torch")
from torch.func import grad, jacrev, jvp, vmap  # noqa: E402

LOD = [[0, 3, 3, 7, 8, 11]]  # five sequences, one empty
D = 3
N = 11

LSTM_CASES = {
    "peepholes": dict(use_peepholes=True),
    "plain": dict(use_peepholes=False),
    "reverse": dict(use_peepholes=True, is_reverse=True),
    "softmax gates": dict(use_peepholes=False, gate_activation="softmax", cell_activation="relu",
                          candidate_activation="softsign"),
}
GRU_CASES = {
    "plain": dict(),
    "origin": dict(origin_mode=True),
    "reverse": dict(is_reverse=True, gate_activation="leaky_relu", candidate_activation="elu"),
}


def _params(device, gates, bias_width):
    g = torch.Generator().manual_seed(3)
    w = (torch.randn(D, gates * D, dtype=torch.float64, generator=g) * 0.4).to(device)
    b = (torch.randn(1, bias_width, dtype=torch.float64, generator=g) * 0.4).to(device)
    return w, b


def _samples(device, width, batch=4):
    g = torch.Generator().manual_seed(11)
    return torch.randn(batch, N, width, dtype=torch.float64, generator=g).to(device)


def _lstm_loss(case):
    kw = LSTM_CASES[case]

    def loss(x, w, b, h0=None, c0=None):
        h, c = dynamic_lstm(lt.LoDTensor(x, LOD), w, b, h_0=h0, c_0=c0, **kw)
        return (h.data ** 2).sum() + (c.data * h.data).sum()

    return loss


def _gru_loss(case):
    kw = GRU_CASES[case]

    def loss(x, w, b, h0=None):
        h = dynamic_gru(lt.LoDTensor(x, LOD), w, b, h_0=h0, **kw)
        return (h.data.sin() * h.data).sum()

    return loss


def _setup(kind, case, device):
    if kind == "lstm":
        peep = LSTM_CASES[case]["use_peepholes"]
        w, b = _params(device, 4, 7 * D if peep else 4 * D)
        return _lstm_loss(case), w, b, _samples(device, 4 * D)
    w, b = _params(device, 3, 3 * D)
    return _gru_loss(case), w, b, _samples(device, 3 * D)


CASES = [("lstm", c) for c in LSTM_CASES] + [("gru", c) for c in GRU_CASES]
IDS = [f"{k}-{c}" for k, c in CASES]


def _close(a, b):
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=1e-10, atol=1e-12)


def _loop(fn, xs, *rest):
    return torch.stack([fn(x, *rest) for x in xs])


@pytest.mark.parametrize("kind, case", CASES, ids=IDS)
def test_vmap_forward_equals_a_loop(torch_device, kind, case):
    loss, w, b, xs = _setup(kind, case, torch_device)
    _close(vmap(loss, in_dims=(0, None, None))(xs, w, b), _loop(loss, xs, w, b))
    _close(vmap(loss, in_dims=(1, None, None))(xs.transpose(0, 1), w, b), _loop(loss, xs, w, b))


@pytest.mark.parametrize("kind, case", CASES, ids=IDS)
def test_vmap_forward_under_plain_autograd(torch_device, kind, case):
    """vmap in the forward, ``.backward()`` outside it: the folded Function's own backward."""
    loss, w, b, xs = _setup(kind, case, torch_device)
    grads = []
    for batched in (True, False):
        x, wg = xs.clone().requires_grad_(), w.clone().requires_grad_()
        out = vmap(loss, in_dims=(0, None, None))(x, wg, b) if batched else _loop(loss, x, wg, b)
        (out * torch.arange(1.0, 5.0, dtype=out.dtype, device=out.device)).sum().backward()
        grads.append((x.grad, wg.grad))
    for got, want in zip(*grads):
        _close(got, want)


@pytest.mark.parametrize("kind, case", CASES, ids=IDS)
def test_per_sample_gradients(torch_device, kind, case):
    """``vmap(grad(loss))``: each sample's gradient for its data and for the shared weights."""
    loss, w, b, xs = _setup(kind, case, torch_device)
    per_x, per_w, per_b = vmap(grad(loss, argnums=(0, 1, 2)), in_dims=(0, None, None))(xs, w, b)
    for i, x in enumerate(xs):
        gx, gw, gb = grad(loss, argnums=(0, 1, 2))(x, w, b)
        _close(per_x[i], gx)
        _close(per_w[i], gw)
        _close(per_b[i], gb)


@pytest.mark.parametrize("kind, case", [("lstm", "peepholes"), ("gru", "origin")], ids=["lstm", "gru"])
def test_batched_initial_states(torch_device, kind, case):
    loss, w, b, xs = _setup(kind, case, torch_device)
    g = torch.Generator().manual_seed(5)
    states = [torch.randn(4, 5, D, dtype=torch.float64, generator=g).to(torch_device) for _ in range(2)]
    states = states if kind == "lstm" else states[:1]
    dims = (0, None, None) + (0,) * len(states)
    want = torch.stack([loss(xs[i], w, b, *(s[i] for s in states)) for i in range(4)])
    _close(vmap(loss, in_dims=dims)(xs, w, b, *states), want)
    shared = (None,) * len(states)  # one initial state for every sample
    want = torch.stack([loss(xs[i], w, b, *(s[0] for s in states)) for i in range(4)])
    _close(vmap(loss, in_dims=(0, None, None) + shared)(xs, w, b, *(s[0] for s in states)), want)
    got = vmap(grad(loss, argnums=3), in_dims=dims)(xs, w, b, *states)
    for i in range(4):
        _close(got[i], grad(loss, argnums=3)(xs[i], w, b, *(s[i] for s in states)))


@pytest.mark.parametrize("kind, case", [("lstm", "plain"), ("gru", "plain")], ids=["lstm", "gru"])
def test_weights_per_sample_an_ensemble(torch_device, kind, case):
    loss, w, b, xs = _setup(kind, case, torch_device)
    ws = torch.stack([w * (1 + 0.1 * i) for i in range(4)])
    want = torch.stack([loss(xs[i], ws[i], b) for i in range(4)])
    _close(vmap(loss, in_dims=(0, 0, None))(xs, ws, b), want)
    _close(vmap(loss, in_dims=(None, 0, None))(xs[0], ws, b), torch.stack([loss(xs[0], wi, b) for wi in ws]))


@pytest.mark.parametrize("kind, case", [("lstm", "peepholes"), ("gru", "plain")], ids=["lstm", "gru"])
def test_jvp_and_jacobian(torch_device, kind, case):
    loss, w, b, xs = _setup(kind, case, torch_device)
    x, t = xs[0], xs[1]
    value, tangent = jvp(lambda v: loss(v, w, b), (x,), (t,))
    _close(value, loss(x, w, b))
    _close(tangent, (grad(loss)(x, w, b) * t).sum())
    _close(jacrev(loss)(x, w, b), grad(loss)(x, w, b))


def test_second_derivative_inside_vmap(torch_device):
    """The ops path is differentiable to any order: the per-sample Hessian-vector product of an LSTM
    (which the Function's fused backward refuses) equals a finite difference of its gradient."""
    loss, w, b, xs = _setup("lstm", "peepholes", torch_device)
    v = torch.ones_like(xs[0])

    def hvp(x):
        return jvp(lambda y: grad(loss)(y, w, b), (x,), (v,))[1]

    got = vmap(hvp)(xs)
    eps = 1e-6
    for i in range(2):
        fd = (grad(loss)(xs[i] + eps * v, w, b) - grad(loss)(xs[i] - eps * v, w, b)) / (2 * eps)
        np.testing.assert_allclose(got[i].cpu().numpy(), fd.cpu().numpy(), rtol=1e-5, atol=1e-6)


def test_a_lod_per_sample_is_still_refused():
    offsets = torch.tensor([[0, 3, 11], [0, 5, 11]])
    w, b = _params("cpu", 4, 4 * D)

    def f(x, offs):
        return dynamic_lstm(lt.LoDTensor(x, [offs]), w, b, use_peepholes=False)[0].data

    with pytest.raises((TypeError, ValueError), match="vmap|per sample|LoD"):
        vmap(f)(_samples("cpu", 4 * D, batch=2), offsets)


@pytest.mark.parametrize("kind, case", [("lstm", "peepholes"), ("gru", "origin")], ids=["lstm", "gru"])
def test_forward_ad_dual_tensors(torch_device, kind, case):
    """``torch.autograd.forward_ad``: the recurrence of a dual tensor carries its tangent (it was dropped
    silently: the Function has no jvp, and a dual tensor does not require grad)."""
    import torch.autograd.forward_ad as fwad

    loss, w, b, xs = _setup(kind, case, torch_device)
    x, t = xs[0], xs[1]
    with fwad.dual_level():
        out = loss(fwad.make_dual(x, t), w, b)
        value, tangent = fwad.unpack_dual(out)
    assert tangent is not None
    _close(value, loss(x, w, b))
    _close(tangent, (grad(loss)(x, w, b) * t).sum())
