"""The fused LSTM steps (``backend/torch/_fused_steps.py``, ``cuda/rnn.cu``) on the torch-CUDA route
without a GPU: CPU tensors sent down it (``_cuda._EMULATED``), the kernels emulated on the CPU
(``cuda_emu``). Outputs and every gradient equal the unfused steps' (``_tuning.FUSED_STEPS``
off) and NumPy's, for peepholes or none, reverse, initial states, each activation the kernels
compute; activations they lack keep the unfused steps. Skipped without g++."""

import shutil
import types
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.backend.cupy import _steps as _cupy_steps  # noqa: E402
from lodtensor.backend.cupy import _tuning  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

from . import cuda_emu  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")

LOD = [[0, 5, 5, 7, 13, 14]]  # an empty sequence; lengths 5, 0, 2, 6, 1
ROWS, SEQS = 14, 5


def _inputs(d, peep, states, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 1.6 - 0.8).to(dtype).requires_grad_()

    x, w, b = rand(ROWS, 4 * d), rand(d, 4 * d), rand(1, (7 if peep else 4) * d)
    h0 = rand(SEQS, d) if "h" in states else None
    c0 = rand(SEQS, d) if "c" in states else None
    return x, w, b, h0, c0


def _run(inputs, peep, reverse, acts, monkeypatch, fused):
    monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
    x, w, b, h0, c0 = inputs
    h, c = F.dynamic_lstm(lt.LoDTensor(x, LOD), w, b, h0, c0, use_peepholes=peep, is_reverse=reverse,
                          gate_activation=acts[0], cell_activation=acts[1], candidate_activation=acts[2])
    weights = torch.linspace(-1, 1, h.data.numel(), dtype=h.data.dtype).reshape(h.data.shape)
    loss = (h.data * weights).sum() + (c.data * weights.flip(0)).sum() * 0.5
    leaves = [t for t in inputs if t is not None]
    grads = torch.autograd.grad(loss, leaves)
    return [h.data.detach(), c.data.detach(), *grads]


def _launched(stub):
    return {name for name, *_ in stub.launches}


@pytest.mark.parametrize("acts", [("sigmoid", "tanh", "tanh"), ("sigmoid", "relu", "identity"),
                                  ("tanh", "identity", "relu")])
@pytest.mark.parametrize("peep, reverse, states", [(True, False, "hc"), (False, True, ""), (True, True, "h"),
                                                   (False, False, "c")])
def test_fused_steps_give_the_unfused_values_and_gradients(route, monkeypatch, acts, peep, reverse, states):
    inputs = _inputs(3, peep, states, torch.float64)
    route.launches.clear()
    fused = _run(inputs, peep, reverse, acts, monkeypatch, True)
    assert {"lt_lstm_step<double>", "lt_lstm_step_grad<double>"} <= _launched(route)
    route.launches.clear()
    plain = _run(inputs, peep, reverse, acts, monkeypatch, False)
    assert not any(name.startswith("lt_lstm") for name in _launched(route))
    assert len(fused) == len(plain)  # (no zip(strict=): the tests run on Python 3.9 too)
    for got, want in zip(fused, plain):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_fused_steps_in_float32_and_against_numpy(route, monkeypatch):
    inputs = _inputs(8, True, "hc", torch.float32, seed=3)
    h, c = _run(inputs, True, False, ("sigmoid", "tanh", "tanh"), monkeypatch, True)[:2]
    assert "lt_lstm_step<float>" in _launched(route)
    x, w, b, h0, c0 = (None if t is None else t.detach().double().numpy() for t in inputs)
    hn, cn = F.dynamic_lstm(lt.LoDTensor(x, LOD), w, b, h0, c0)
    np.testing.assert_allclose(h.double().numpy(), hn.data, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.double().numpy(), cn.data, rtol=1e-5, atol=1e-6)


def test_activations_the_kernels_lack_keep_the_unfused_steps(route, monkeypatch):
    inputs = _inputs(3, False, "", torch.float64)
    _run(inputs, False, False, ("sigmoid", "softsign", "tanh"), monkeypatch, True)
    assert not any(name.startswith("lt_lstm") for name in _launched(route))


def test_gradcheck_through_the_fused_steps(route, monkeypatch):
    monkeypatch.setattr(_tuning, "FUSED_STEPS", True)
    x, w, b, h0, c0 = _inputs(2, True, "hc", torch.float64, seed=5)

    def fn(x, w, b, h0, c0):
        h, c = F.dynamic_lstm(lt.LoDTensor(x, LOD), w, b, h0, c0)
        return h.data, c.data

    assert torch.autograd.gradcheck(fn, (x, w, b, h0, c0))
    assert "lt_lstm_step_grad<double>" in _launched(route)


def _run_gru(inputs, origin, reverse, acts, monkeypatch, fused):
    monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
    x, w, b, h0 = inputs
    h = F.dynamic_gru(lt.LoDTensor(x, LOD), w, b, h0, is_reverse=reverse, origin_mode=origin,
                      gate_activation=acts[0], candidate_activation=acts[1])
    weights = torch.linspace(-1, 1, h.data.numel(), dtype=h.data.dtype).reshape(h.data.shape)
    leaves = [t for t in inputs if t is not None]
    return [h.data.detach(), *torch.autograd.grad((h.data * weights).sum(), leaves)]


def _gru_inputs(d, with_h0, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 1.6 - 0.8).to(dtype).requires_grad_()

    return rand(ROWS, 3 * d), rand(d, 3 * d), rand(1, 3 * d), rand(SEQS, d) if with_h0 else None


GRU_KERNELS = {"lt_gru_step_gates<double>", "lt_gru_step_out<double>", "lt_gru_step_grad_out<double>",
               "lt_gru_step_grad_reset<double>"}


@pytest.mark.parametrize("acts", [("sigmoid", "tanh"), ("tanh", "relu"), ("sigmoid", "identity")])
@pytest.mark.parametrize("origin, reverse, with_h0", [(False, False, True), (True, False, False),
                                                      (True, True, True), (False, True, False)])
def test_fused_gru_steps_give_the_unfused_values_and_gradients(route, monkeypatch, acts, origin, reverse, with_h0):
    inputs = _gru_inputs(3, with_h0, torch.float64)
    route.launches.clear()
    fused = _run_gru(inputs, origin, reverse, acts, monkeypatch, True)
    assert GRU_KERNELS <= _launched(route)
    route.launches.clear()
    plain = _run_gru(inputs, origin, reverse, acts, monkeypatch, False)
    assert not any(name.startswith("lt_gru") for name in _launched(route))
    assert len(fused) == len(plain)  # (no zip(strict=): the tests run on Python 3.9 too)
    for got, want in zip(fused, plain):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_fused_gru_against_numpy_and_gradcheck(route, monkeypatch):
    inputs = _gru_inputs(8, True, torch.float32, seed=4)
    h = _run_gru(inputs, False, False, ("sigmoid", "tanh"), monkeypatch, True)[0]
    assert "lt_gru_step_out<float>" in _launched(route)
    x, w, b, h0 = (t.detach().double().numpy() for t in inputs)
    np.testing.assert_allclose(h.double().numpy(), F.dynamic_gru(lt.LoDTensor(x, LOD), w, b, h0).data,
                               rtol=1e-5, atol=1e-6)
    args = _gru_inputs(2, True, torch.float64, seed=6)
    assert torch.autograd.gradcheck(
        lambda x, w, b, h0: F.dynamic_gru(lt.LoDTensor(x, LOD), w, b, h0, origin_mode=True).data, args)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cupy_recurrences_take_the_fused_steps(monkeypatch, kind, dtype):
    """The CuPy backend's forward recurrences (``numpy/_recurrent.py`` on CuPy) launch the same
    kernels, with NumPy's values; with the switch off, none and the same values."""
    stub = cuda_emu.install(monkeypatch)
    rng = np.random.default_rng(9)
    d = 4
    gates = 4 if kind == "lstm" else 3
    host = [rng.uniform(-0.8, 0.8, shape).astype(dtype) for shape in
            ((ROWS, gates * d), (d, gates * d), (1, (7 if kind == "lstm" else 3) * d), (SEQS, d))]

    def run(a):
        x, w, b, h0 = (a(v) for v in host)
        if kind == "lstm":
            return F.dynamic_lstm(lt.LoDTensor(x, LOD), w, b, h0, a(host[3] * 0.5))[1].data
        return F.dynamic_gru(lt.LoDTensor(x, LOD), w, b, h0, origin_mode=True).data

    want = run(np.asarray)
    for fused in (True, False):
        monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
        stub.launches.clear()
        got = run(stub.asarray)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
        assert any(name.startswith(f"lt_{kind}_step") for name in _launched(stub)) is fused


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("case", ["nan input", "infinite gradient"])
def test_relu_steps_keep_nan_and_infinite_gradients_as_the_unfused(route, monkeypatch, kind, case):
    """relu in the fused kernels as torch's: a NaN input stays NaN forward; an infinite output
    gradient past the threshold gives 0 (a select, not a multiply by 0): fused as unfused."""
    gates = 4 if kind == "lstm" else 3
    results = []
    for fused in (True, False):
        monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
        x = torch.linspace(-2, 2, ROWS * gates * 3, dtype=torch.float64).reshape(ROWS, gates * 3)
        if case == "nan input":
            x[0, 0] = float("nan")
        x.requires_grad_()
        w = torch.zeros(3, gates * 3, dtype=torch.float64)
        t = lt.LoDTensor(x, LOD)
        if kind == "lstm":
            b = torch.zeros(1, 4 * 3, dtype=torch.float64)
            out = F.dynamic_lstm(t, w, b, use_peepholes=False, cell_activation="relu",
                                 candidate_activation="relu")[1].data
        else:
            out = F.dynamic_gru(t, w, None, candidate_activation="relu").data
        if case == "nan input":
            results.append(out.detach())
            continue
        grad = torch.ones_like(out)
        grad[:, 0] = float("inf")
        results.append(torch.autograd.grad(out, x, grad)[0])
    torch.testing.assert_close(results[0], results[1], equal_nan=True)
    if case == "nan input":
        assert torch.isnan(results[0]).any()
    else:
        assert torch.isinf(results[0]).any()  # (and NaN where inf meets 0 in a product: in both alike)


class _CountOps(TorchDispatchMode):
    """Counts the torch ops that compute (on a GPU: launches), not views and allocations."""

    _FREE = ("empty", "zeros", "new_empty", "new_zeros", "detach", "_to_copy", "lift_fresh", "alias", "_unsafe_view",
             "clone")

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and not func.__name__.startswith(self._FREE):
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind, most, fewer", [("lstm", 4.5, 6), ("gru", 8.5, 2)])
def test_fused_steps_launch_a_few_kernels_a_step(route, monkeypatch, kind, most, fewer):
    """Forward and backward over 64 steps: torch ops and cuBLAS calls (GEMMs) plus step kernels per step, fused, at
    most ``most`` (LSTM: a GEMM and a kernel each way; GRU: two of each) and ``fewer`` times fewer
    than the unfused steps' (measured: LSTM 4.2 against 27.1, GRU 8.1 against 19.0)."""
    gates, steps = (4 if kind == "lstm" else 3), 64
    offsets = list(range(0, 20 * steps + 1, steps))
    per_step = {}
    for fused in (True, False):
        monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
        g = torch.Generator().manual_seed(1)
        x, w = (torch.rand(shape, generator=g, dtype=torch.float64, requires_grad=True) - 0.5
                for shape in ((offsets[-1], gates * 8), (8, gates * 8)))
        b = torch.zeros(1, (7 if kind == "lstm" else 3) * 8, dtype=torch.float64, requires_grad=True)
        route.launches.clear()
        route.blas_calls.clear()
        counter = _CountOps()
        with counter:
            t = lt.LoDTensor(x, [offsets])
            out = F.dynamic_lstm(t, w, b)[0] if kind == "lstm" else F.dynamic_gru(t, w, b)
            out.data.sum().backward()
        kernels = sum(1 for name, *_ in route.launches if name.startswith(f"lt_{kind}"))
        if fused:  # the steps' GEMMs are cuBLAS calls, no torch ops: one a step each way (LSTM), two (GRU), none
            assert len(route.blas_calls) == (2 if kind == "lstm" else 4) * (steps - 1)  # at step 0 (no h0)
        else:
            assert not route.blas_calls
        per_step[fused] = (counter.count + len(route.blas_calls) + kernels) / steps
    assert per_step[True] <= most and per_step[False] >= fewer * per_step[True], per_step


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_fused_loops_take_their_addresses_once_not_per_step(route, monkeypatch, kind):
    """The fused loops plan every step's launch before the loop (``_steps._Steps.plan``): the operands'
    device addresses are read a few times per loop, the same number for 3 steps as for 40 (a loop
    reading them per step spent more host time on them than on its GEMMs' launches); the GEMMs' too."""
    from lodtensor.backend.torch import _fused_steps  # noqa: PLC0415

    reads = []
    made = _fused_steps.steps

    def counting(*args):
        fused = made(*args)
        if fused is not None:
            ptr = fused.ptr
            fused.ptr = lambda a: reads.append(1) or ptr(a)
        return fused

    monkeypatch.setattr(_fused_steps, "steps", counting)
    monkeypatch.setattr("lodtensor.backend.torch._recurrent.fused_steps", counting)
    gates, per_loop = (4 if kind == "lstm" else 3), {}
    for steps in (3, 40):
        offsets = [0, steps, steps + 1, 2 * steps + 1]
        x = torch.rand(offsets[-1], gates * 4, dtype=torch.float64, requires_grad=True)
        w = torch.rand(4, gates * 4, dtype=torch.float64, requires_grad=True)
        reads.clear()
        t = lt.LoDTensor(x, [offsets])
        out = F.dynamic_lstm(t, w, torch.zeros(1, 7 * 4, dtype=torch.float64))[0] if kind == "lstm" \
            else F.dynamic_gru(t, w)
        out.data.sum().backward()
        per_loop[steps] = len(reads)
    assert 0 < per_loop[3] == per_loop[40] <= 24, per_loop  # (the kernels' and the cuBLAS GEMMs' operands)


@pytest.mark.parametrize("cupy_is", ["v8", "without cuBLAS"])
def test_fused_steps_need_cupy_s_cublas_by_address(route, monkeypatch, cupy_is):
    """The steps' GEMMs are cuBLAS calls through CuPy's binding with alpha and beta by address (CuPy 10 on; v8
    took them by value, which an address would silently turn into a huge scale): with an older CuPy, or one
    whose cuBLAS cannot load, the recurrences keep their unfused steps (no step kernel, no cuBLAS call), with
    the same values."""
    inputs = _inputs(3, True, "hc", torch.float64)
    fused = _run(inputs, True, False, ("sigmoid", "tanh", "tanh"), monkeypatch, True)
    assert route.blas_calls and "lt_lstm_step<double>" in _launched(route)
    if cupy_is == "v8":
        monkeypatch.setattr(route, "__version__", "8.6.0")
    else:
        namespace = {k: v for k, v in vars(route.cuda).items() if k != "cublas"}

        class Cuda(types.SimpleNamespace):
            def __getattr__(self, name):  # (CuPy loads cupy.cuda.cublas on first use, as this module's __getattr__)
                raise ImportError("libcublas.so.12: cannot open shared object file")

        monkeypatch.setattr(route, "cuda", Cuda(**namespace))
    monkeypatch.setattr(_cupy_steps, "_BLAS", weakref.WeakKeyDictionary())  # (found once per CuPy module)
    route.launches.clear()
    route.blas_calls.clear()
    plain = _run(inputs, True, False, ("sigmoid", "tanh", "tanh"), monkeypatch, True)
    assert not route.blas_calls and not any(name.startswith("lt_lstm") for name in _launched(route))
    for got, want in zip(fused, plain):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
