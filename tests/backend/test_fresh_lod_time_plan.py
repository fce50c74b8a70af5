"""The recurrences' time plan on a fresh LoD costs no host pass over its rows on a device.

``dynamic_lstm``, ``dynamic_gru`` and the CRF layers run over the sequences sorted by length
(``lodtensor.nn._common.TimePlan``). The plan held, besides its per-step and per-sequence host
arrays, two host arrays over every row (the step-major ``rows`` and their ``inverse``), built with
NumPy for every new LoD and copied to the device: a training step makes a new LoD per batch, so
each paid a host pass and a host-to-device copy of 16 bytes per row that the device could make
itself (host time of the plan for 2M rows of torch ``meta`` data: about 26 ms, 2 ms after). Device
data now get both made on their device from the per-step and per-sequence arrays
(``step_rows``/``step_inverse``); CPU data keep the host arrays.

Runs the torch-CUDA route's host code on CPU tensors (kernels emulated; ``cuda`` adds the GPU), and
compares values and gradients with the same layer on plain CPU tensors.
"""


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor.nn import _common  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

# many short sequences, empty ones included: far fewer steps (12) than rows, so per-step and
# per-sequence arrays take far fewer bytes than one int64 per row
LENGTHS = [3, 0, 12, 1, 0, 7, 9, 2, 5, 5, 11, 4] * 6
OFFSETS = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
ROWS, SEQS, D = int(OFFSETS[-1]), len(LENGTHS), 3




def _refuse_host_rows(monkeypatch):
    """From now on, fail where a time plan's rows or inverse are built on the host."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a host pass over the LoD's rows on the device route")

    monkeypatch.setattr(_common, "_host_rows", refuse, raising=False)


def _host(*shape, seed):
    return np.random.RandomState(seed).uniform(-1, 1, size=shape)


def _inputs(name, h0):
    """The host arrays of one call: input, weight, bias, initial states (or None), output weights."""
    gates, bias = (4, 7) if name == "lstm" else (3, 3)
    init = [_host(SEQS, D, seed=10 + i) if h0 else None for i in range(2 if name == "lstm" else 1)]
    return [_host(ROWS, gates * D, seed=1), _host(D, gates * D, seed=2) * 0.5, _host(1, bias * D, seed=3), *init]


def _run(name, host, reverse, device):
    """Values and gradients (input, weight, bias, initial states) of one layer call on a fresh LoD."""
    leaves = [None if a is None else torch.tensor(a, device=device, requires_grad=True) for a in host]
    x = lt.LoDTensor(leaves[0], [OFFSETS.copy()])
    if name == "lstm":
        outs = F.dynamic_lstm(x, leaves[1], leaves[2], h_0=leaves[3], c_0=leaves[4], is_reverse=reverse)
    else:
        outs = (F.dynamic_gru(x, leaves[1], leaves[2], h_0=leaves[3], is_reverse=reverse),)
    loss = sum((o.data * torch.tensor(_host(ROWS, D, seed=20 + i), device=device)).sum() for i, o in enumerate(outs))
    loss.backward()
    values = [o.data.detach().cpu().numpy() for o in outs]
    grads = [None if a is None else a.grad.cpu().numpy() for a in leaves]
    return x, values, grads


@pytest.mark.parametrize("h0", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_recurrence_makes_its_time_plan_on_the_device(enter_route, monkeypatch, name, reverse, h0):
    host = _inputs(name, h0)
    _, want_values, want_grads = _run(name, host, reverse, "cpu")  # plain CPU tensors: the host plan
    device = enter_route()
    _refuse_host_rows(monkeypatch)
    x, values, grads = _run(name, host, reverse, device)
    for got, want in zip(values + grads, want_values + want_grads):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # the plan cached on the fresh LoD holds its per-step and per-sequence arrays only, no host array
    # over the rows (the rows and inverse alone would be 16 bytes per row)
    assert _common.time_plan(x, reverse).nbytes < 8 * ROWS


def test_crf_decoding_makes_its_time_plan_on_the_device(device_route, monkeypatch):
    scores, transition = _host(ROWS, 4, seed=5), _host(6, 4, seed=6)
    want = F.crf_decoding(lt.LoDTensor(scores, [OFFSETS.copy()]), transition).data
    device = device_route
    _refuse_host_rows(monkeypatch)
    x = lt.LoDTensor(torch.tensor(scores, device=device), [OFFSETS.copy()])
    got = F.crf_decoding(x, transition).data
    np.testing.assert_array_equal(got.cpu().numpy(), np.asarray(want))
    assert _common.time_plan(x).nbytes < 8 * ROWS


@pytest.mark.parametrize("data", ["numpy", "torch_cpu"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_cpu_data_keep_the_host_time_plan(monkeypatch, data, reverse):
    """Off the route, CPU data take the plan's host rows and inverse (NumPy builds them for less)."""
    calls = []
    real = _common._host_rows
    monkeypatch.setattr(_common, "_host_rows", lambda plan: calls.append(plan) or real(plan))
    host = _inputs("gru", True)
    if data == "numpy":
        x = lt.LoDTensor(host[0], [OFFSETS.copy()])
        got = F.dynamic_gru(x, host[1], host[2], h_0=host[3], is_reverse=reverse).data
    else:
        x = lt.LoDTensor(torch.tensor(host[0]), [OFFSETS.copy()])
        got = F.dynamic_gru(x, host[1], host[2], h_0=host[3], is_reverse=reverse).data.numpy()
    assert len(calls) == 1
    plan = _common.time_plan(x, reverse)
    assert plan.nbytes >= 16 * ROWS  # the host rows and inverse, kept with the plan
    np.testing.assert_array_equal(np.sort(plan.rows), np.arange(ROWS))
    np.testing.assert_array_equal(plan.rows[plan.inverse], np.arange(ROWS))
    _, values, _ = _run("gru", host, reverse, "cpu")
    np.testing.assert_allclose(got, values[0], rtol=1e-12, atol=1e-12)
