"""Batched gradients of a graph already built (torch data): ``torch.autograd.grad(out, inputs,
grad_outputs=v, is_grads_batched=True)``, ``autograd.functional.jacobian(vectorize=True)`` and
``torch.func.vmap`` over ``autograd.grad``, through the recurrences (``dynamic_lstm``, ``dynamic_gru``),
the sequence ops and a few nested ops. Each is compared with a loop of plain ``autograd.grad`` over the
batch of gradients, on CPU, on the emulated torch-CUDA route and (marked gpu) on CUDA.

The recurrences' fused backward wrote the batched gradients into unbatched buffers in place ("vmap:
aten::add_ ... is not possible"); it now runs the same steps out of place for them."""

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import sequence as S
from lodtensor.nn.functional import dynamic_gru, dynamic_lstm

torch = pytest.importorskip("torch")

LOD = [[0, 3, 3, 7, 8, 11]]  # five sequences, one empty
D = 3
N = 11
B = 3  # gradients in a batch

LSTM_CASES = {
    "peepholes": dict(use_peepholes=True),
    "plain": dict(use_peepholes=False),
    "reverse": dict(use_peepholes=True, is_reverse=True),
    "softmax gates": dict(use_peepholes=True, gate_activation="softmax", cell_activation="relu",
                          candidate_activation="softsign"),
    "identity gates": dict(use_peepholes=False, gate_activation="identity", cell_activation="sigmoid",
                           candidate_activation="relu"),
}
GRU_CASES = {
    "plain": dict(),
    "origin": dict(origin_mode=True),
    "reverse": dict(is_reverse=True, gate_activation="leaky_relu", candidate_activation="elu"),
    "softmax gates": dict(gate_activation="softmax", candidate_activation="softsign"),
}


def _rand(*shape, device="cpu", dtype=torch.float64, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, dtype=torch.float64, generator=g) * scale).to(device=device, dtype=dtype)


def _leaf(*shape, seed, **kw):
    return _rand(*shape, seed=seed, **kw).requires_grad_()


def _lstm(case, device, dtype=torch.float64, states=False):
    kw = LSTM_CASES[case]
    width = 7 * D if kw["use_peepholes"] else 4 * D
    x = _leaf(N, 4 * D, seed=1, device=device, dtype=dtype)
    w = _leaf(D, 4 * D, seed=2, device=device, dtype=dtype, scale=0.5)
    b = _leaf(1, width, seed=3, device=device, dtype=dtype, scale=0.5)
    inputs = [x, w, b]
    h0 = c0 = None
    if states:
        h0, c0 = _leaf(5, D, seed=4, device=device, dtype=dtype), _leaf(5, D, seed=5, device=device, dtype=dtype)
        inputs += [h0, c0]
    h, c = dynamic_lstm(lt.LoDTensor(x, LOD), w, b, h_0=h0, c_0=c0, **kw)
    return inputs, (h.data, c.data)


def _gru(case, device, dtype=torch.float64, states=False):
    kw = GRU_CASES[case]
    x = _leaf(N, 3 * D, seed=1, device=device, dtype=dtype)
    w = _leaf(D, 3 * D, seed=2, device=device, dtype=dtype, scale=0.5)
    b = _leaf(1, 3 * D, seed=3, device=device, dtype=dtype, scale=0.5)
    inputs = [x, w, b]
    h0 = None
    if states:
        h0 = _leaf(5, D, seed=4, device=device, dtype=dtype)
        inputs.append(h0)
    h = dynamic_gru(lt.LoDTensor(x, LOD), w, b, h_0=h0, **kw)
    return inputs, (h.data,)


def _batched_equals_loop(outputs, inputs, rtol=1e-10, atol=1e-12, seed=7):
    """``is_grads_batched=True`` against a loop of plain ``autograd.grad``, every input."""
    vs = tuple(_rand(B, *o.shape, device=o.device, dtype=o.dtype, seed=seed + k) for k, o in enumerate(outputs))
    got = torch.autograd.grad(outputs, inputs, vs, is_grads_batched=True, retain_graph=True, allow_unused=True)
    for k, inp in enumerate(inputs):
        want = [torch.autograd.grad(outputs, inp, tuple(v[i] for v in vs), retain_graph=True, allow_unused=True)[0]
                for i in range(B)]
        if want[0] is None:
            assert got[k] is None or not got[k].abs().sum()
            continue
        assert got[k].shape == (B, *inp.shape)
        np.testing.assert_allclose(got[k].detach().cpu().numpy(), torch.stack(want).detach().cpu().numpy(),
                                   rtol=rtol, atol=atol)


# -- the recurrences --------------------------------------------------------------------------------
@pytest.mark.parametrize("case", LSTM_CASES)
def test_lstm_batched_gradients_equal_a_loop(torch_device, case):
    inputs, (h, c) = _lstm(case, torch_device)
    _batched_equals_loop((h,), inputs)
    _batched_equals_loop((h, c), inputs)  # both outputs' gradients batched


@pytest.mark.parametrize("case", GRU_CASES)
def test_gru_batched_gradients_equal_a_loop(torch_device, case):
    inputs, outputs = _gru(case, torch_device)
    _batched_equals_loop(outputs, inputs)


def test_lstm_cell_output_alone_and_initial_states(torch_device):
    inputs, (h, c) = _lstm("peepholes", torch_device, states=True)
    _batched_equals_loop((c,), inputs)
    _batched_equals_loop((h, c), inputs)


def test_gru_initial_state(torch_device):
    inputs, outputs = _gru("origin", torch_device, states=True)
    _batched_equals_loop(outputs, inputs)
    inputs, outputs = _gru("plain", torch_device, states=True)
    _batched_equals_loop(outputs, inputs)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_float32(kind):
    inputs, outputs = (_lstm("peepholes", "cpu", torch.float32) if kind == "lstm"
                       else _gru("plain", "cpu", torch.float32))
    _batched_equals_loop(outputs, inputs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_only_some_inputs(kind):
    """Gradients for the data only, or the weights only: the unused ones are not computed."""
    inputs, outputs = _lstm("plain", "cpu") if kind == "lstm" else _gru("plain", "cpu")
    _batched_equals_loop(outputs, inputs[:1])
    _batched_equals_loop(outputs, inputs[1:])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_vectorized_jacobian(kind):
    """``autograd.functional.jacobian(vectorize=True)`` (is_grads_batched inside) equals the plain one."""
    if kind == "lstm":
        w, b = _rand(D, 4 * D, seed=2, scale=0.5), _rand(1, 7 * D, seed=3, scale=0.5)

        def f(x, w):
            return dynamic_lstm(lt.LoDTensor(x, LOD), w, b)[0].data

        x = _rand(N, 4 * D, seed=1)
    else:
        w, b = _rand(D, 3 * D, seed=2, scale=0.5), _rand(1, 3 * D, seed=3, scale=0.5)

        def f(x, w):
            return dynamic_gru(lt.LoDTensor(x, LOD), w, b, origin_mode=True).data

        x = _rand(N, 3 * D, seed=1)
    got = torch.autograd.functional.jacobian(f, (x, w), vectorize=True)
    want = torch.autograd.functional.jacobian(f, (x, w))
    for a, e in zip(got, want):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_func_vmap_over_autograd_grad(kind):
    """torch.func's vmap over ``autograd.grad`` of a graph built outside it hands the backward torch.func's
    batch: the same out-of-place steps."""
    inputs, outputs = _lstm("peepholes", "cpu") if kind == "lstm" else _gru("reverse", "cpu")
    out = outputs[0]
    vs = _rand(B, *out.shape, seed=9)
    got = torch.func.vmap(lambda v: torch.autograd.grad(out, inputs, v, retain_graph=True))(vs)
    for k, inp in enumerate(inputs):
        want = torch.stack([torch.autograd.grad(out, inp, v, retain_graph=True)[0] for v in vs])
        np.testing.assert_allclose(got[k].numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_graph_of_batched_gradients_is_refused_clearly(kind):
    """``create_graph=True``: a clear error (the gradients could not carry the recurrence's second
    derivative), not a gradient silently cut from the graph."""
    inputs, outputs = _lstm("plain", "cpu") if kind == "lstm" else _gru("plain", "cpu")
    vs = _rand(B, *outputs[0].shape, seed=9)
    with pytest.raises(RuntimeError, match="batched gradients.*create_graph=True.*not supported"):
        torch.autograd.grad(outputs[0], inputs, vs, is_grads_batched=True, create_graph=True)


def test_a_plain_backward_still_takes_the_fused_steps(monkeypatch):
    """Unbatched gradients keep the in-place backward (the out-of-place steps are not called)."""
    from lodtensor.backend.torch import _recurrent_grads

    def boom(*args):
        raise AssertionError("the out-of-place steps ran for unbatched gradients")

    monkeypatch.setattr(_recurrent_grads, "lstm_backward", boom)
    monkeypatch.setattr(_recurrent_grads, "gru_backward", boom)
    from lodtensor.backend.torch import _recurrent

    monkeypatch.setattr(_recurrent, "_BATCHED", {k: boom for k in _recurrent._BATCHED})
    for make in (lambda: _lstm("peepholes", "cpu"), lambda: _gru("plain", "cpu")):
        inputs, outputs = make()
        grads = torch.autograd.grad(outputs[0].sum(), inputs)
        assert all(g is not None for g in grads)


# -- the sequence ops and nested ops ------------------------------------------------------------------
def _seq_case(fn, width=4, device="cpu"):
    x = _leaf(N, width, seed=1, device=device)
    out = fn(lt.LoDTensor(x, LOD))
    out = out[0] if isinstance(out, tuple) else out
    return [x], (out if isinstance(out, torch.Tensor) else out.data,)


SEQUENCE_OPS = {
    **{f"pool {p}": (lambda t, p=p: S.sequence_pool(t, p)) for p in
       ("sum", "average", "sqrt", "max", "min", "first", "last")},
    "first_step": S.sequence_first_step,
    "last_step": S.sequence_last_step,
    "softmax": S.sequence_softmax,
    "pad": lambda t: S.sequence_pad(t, torch.tensor(0.0, dtype=torch.float64, device=t.data.device)),
    "pad then unpad": lambda t: S.sequence_unpad(
        S.sequence_pad(t, torch.tensor(-1.0, dtype=torch.float64, device=t.data.device))[0],
        torch.tensor([3, 0, 4, 1, 3], device=t.data.device)),
    "reverse": S.sequence_reverse,
    "concat": lambda t: S.sequence_concat([t, t * 2]),
    "expand_as": lambda t: S.sequence_expand_as(S.sequence_pool(t, "sum"), t),
}


@pytest.mark.parametrize("name", SEQUENCE_OPS)
def test_sequence_ops(torch_device, name):
    width = 1 if name == "softmax" else 4
    inputs, outputs = _seq_case(SEQUENCE_OPS[name], width, torch_device)
    _batched_equals_loop(outputs, inputs)


def test_sequence_ops_of_a_larger_batch():
    """Sizes where the CPU kernels (compiled, pooled buffers) take over from the small-input paths."""
    lod = [list(range(0, 6001, 60))]
    x = _leaf(6000, 16, seed=1)
    t = lt.LoDTensor(x, lod)
    outs = (S.sequence_pool(t, "max").data, S.sequence_pool(t, "average").data,
            S.sequence_pad(t, torch.tensor(0.0, dtype=torch.float64))[0])
    for out in outs:
        _batched_equals_loop((out,), [x])


NESTED_OPS = {
    "softmax over the ragged dim": lambda nt: torch.softmax(nt, 1),
    "log_softmax over the ragged dim": lambda nt: torch.log_softmax(nt, 1),
    "sum over the ragged dim": lambda nt: nt.sum(1),
    "amax over the ragged dim": lambda nt: nt.amax(1),
    "to_padded_tensor": lambda nt: ln.to_padded_tensor(nt, 0.0),
    "layer_norm": lambda nt: torch.nn.functional.layer_norm(nt, (4,)),
    "leaky_relu": lambda nt: torch.nn.functional.leaky_relu(nt, 0.1),
}


@pytest.mark.parametrize("name", NESTED_OPS)
def test_nested_ops(name):
    x = _leaf(N, 4, seed=1)
    nt = ln.nested_tensor_from_jagged(x, torch.tensor(LOD[0]))
    out = NESTED_OPS[name](nt)
    _batched_equals_loop((out.values() if isinstance(out, ln.NestedTensor) else out,), [x])


def test_through_a_whole_layer_stack():
    """fc -> dynamic_lstm -> sequence_pool, with is_grads_batched over the pooled output."""
    from lodtensor.nn.functional import fc

    x = _leaf(N, 5, seed=1)
    w_fc, w, b = _leaf(5, 4 * D, seed=2, scale=0.5), _leaf(D, 4 * D, seed=3, scale=0.5), _leaf(1, 7 * D, seed=4)
    proj = fc(lt.LoDTensor(x, LOD), w_fc, None)
    h, _ = dynamic_lstm(proj, w, b)
    pooled = S.sequence_pool(h, "max").data
    _batched_equals_loop((pooled,), [x, w_fc, w, b])
