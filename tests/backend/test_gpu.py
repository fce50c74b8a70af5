"""GPU paths (CuPy, torch CUDA). Marked gpu: skipped without a CUDA device; `make test-gpu` runs them."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S

pytestmark = pytest.mark.gpu


def test_cuda_round_trip_and_ops():
    cupy = pytest.importorskip("cupy")
    t = lt.from_nested_list([[[1.0, 2.0], [3.0]], [[4.0, 5.0, 6.0]]])
    g = t.cuda()
    assert isinstance(g.data, cupy.ndarray) and g.device == "cuda:0" and g.lod is t.lod
    assert g.tolist() == t.tolist() and g.cpu().tolist() == t.tolist()
    padded, lengths = g.to_padded(pad_value=-1)
    assert isinstance(padded, cupy.ndarray) and cupy.asnumpy(padded).tolist() == t.to_padded(pad_value=-1)[0].tolist()
    pooled = S.sequence_pool(g, "max")
    assert isinstance(pooled.data, cupy.ndarray)
    assert np.allclose(cupy.asnumpy(pooled.data), S.sequence_pool(t, "max").data)
    assert np.allclose(cupy.asnumpy((g * 2).data), (t * 2).data)
    p = lt.LoDTensor()
    p.set(np.arange(5.0), lt.CUDAPlace(0))
    assert isinstance(p.data, cupy.ndarray) and p.place() == lt.CUDAPlace(0)


def test_cupy_to_torch_shares_memory():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    g = lt.LoDTensor(cupy.arange(6, dtype=cupy.float32), [[0, 2, 6]])
    tt = g.to_torch()
    assert isinstance(tt.data, torch.Tensor) and tt.data.is_cuda
    assert tt.data.data_ptr() == g.data.data.ptr


def test_torch_cuda_autograd():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    x = torch.randn(6, 3, device="cuda", dtype=torch.float64, requires_grad=True)
    t = lt.from_torch(x, [[0, 2, 2, 6]])
    out = S.sequence_pool(S.sequence_softmax(t), "sum")
    out.data.sum().backward()
    assert x.grad is not None and x.grad.device.type == "cuda"
    assert torch.autograd.gradcheck(lambda v: S.sequence_pool(lt.from_torch(v, [[0, 2, 2, 6]]), "max").data, (x,))


def test_pinned_memory():
    pytest.importorskip("cupy")
    t = lt.LoDTensor()
    t.set(np.arange(4.0), lt.CUDAPinnedPlace())
    assert t.place() == lt.CUDAPinnedPlace() and t.numpy().tolist() == [0, 1, 2, 3]


def _cuda_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def test_torch_cuda_runs_the_project_kernels_and_matches_the_host():
    """Segment sum/mean/max/min, softmax, pad and unpad of CUDA tensors go through the .cu kernels
    (zero-copy on torch's memory) where CuPy is installed, with the host results."""
    torch = _cuda_torch()
    pytest.importorskip("cupy")
    from lodtensor.backend.torch import _cuda  # noqa: PLC0415

    rng = np.random.default_rng(0)
    lens = np.concatenate([rng.integers(0, 9, 2000), [300, 0, 3000]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    for width, dtype in ((1, torch.float32), (3, torch.float64), (128, torch.float32), (8, torch.float16)):
        host = rng.standard_normal((offsets[-1], width)).astype(np.float32)
        x = torch.from_numpy(host).to("cuda", dtype)
        assert _cuda.fits(x)
        t, h = lt.from_torch(x, [offsets]), lt.LoDTensor(host.astype(np.float64), [offsets])
        tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.float16 else {"rtol": 1e-4, "atol": 1e-4}
        for kind in ("sum", "average", "max", "min"):
            got = S.sequence_pool(t, kind).data.double().cpu().numpy()
            np.testing.assert_allclose(got, S.sequence_pool(h, kind).data, err_msg=kind, **tol)
        np.testing.assert_allclose(S.sequence_softmax(t).data.double().cpu().numpy(),
                                   S.sequence_softmax(h).data, **tol)
        padded, lengths = S.sequence_pad(t, 0.0)
        np.testing.assert_allclose(padded.data.double().cpu().numpy(), S.sequence_pad(h, 0.0)[0].data, **tol)
        back = S.sequence_unpad(padded, lengths.data.cpu().numpy())
        assert torch.equal(back.data, x)


@pytest.mark.parametrize("by_block, tiles_first", [(0, False), (1, True), (4, False)])
def test_cupy_block_routes_match_the_host(monkeypatch, by_block, tiles_first):
    """Softmax and pools by blocks (every one-piece sequence one block's) beside the piece kernels
    (for the multi-piece sequences), and the piece kernels alone (``*_BLOCK_STEPS`` 0), in either
    tile order: the host's values for several widths, dtypes, empty sequences and sequences of
    several pieces."""
    cupy = pytest.importorskip("cupy")
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", by_block)
    monkeypatch.setattr(_tuning, "REDUCE_BLOCK_STEPS", by_block)
    monkeypatch.setattr(_tuning, "TILES_FIRST", tiles_first)
    rng = np.random.default_rng(by_block)
    lens = np.concatenate([rng.integers(0, 160, 3000), [0, 700, 9000, 40]])
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64).tolist()
    for width, dtype in ((128, np.float32), (160, np.float32), (3, np.float64), (1, np.float32), (40, np.float64)):
        host = (rng.standard_normal((offsets[-1], width)) * 6).astype(dtype)
        t, h = lt.LoDTensor(cupy.asarray(host), [offsets]), lt.LoDTensor(host.astype(np.float64), [offsets])
        tol = {"rtol": 1e-4 if dtype == np.float32 else 1e-12, "atol": 1e-6}
        np.testing.assert_allclose(cupy.asnumpy(S.sequence_softmax(t).data), S.sequence_softmax(h).data,
                                   err_msg=f"width {width}", **tol)
        for kind in ("sum", "average", "max"):
            np.testing.assert_allclose(cupy.asnumpy(S.sequence_pool(t, kind).data), S.sequence_pool(h, kind).data,
                                       err_msg=f"{kind}, width {width}", rtol=tol["rtol"], atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_cuda_rnn_fused_steps_match_the_unfused(monkeypatch, dtype):
    """dynamic_lstm and dynamic_gru on CUDA tensors with one kernel per element-wise part of a step
    (``_tuning.FUSED_STEPS``) give the outputs and gradients of the step's ops one by one."""
    torch = _cuda_torch()
    pytest.importorskip("cupy")
    from lodtensor.backend.cupy import _steps as _fused_steps  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415
    from lodtensor.nn import functional as F  # noqa: PLC0415

    planned = []  # the fused kernels each loop plans (forward and backward)
    real = _fused_steps._Steps.plan
    monkeypatch.setattr(_fused_steps._Steps, "plan",
                        lambda self, kind, *a: (planned.append(kind), real(self, kind, *a))[1])
    rng = np.random.default_rng(7)
    lens = rng.integers(0, 40, 300)
    offsets = np.concatenate([[0], np.cumsum(lens)]).tolist()
    d = 64
    host = [rng.uniform(-0.8, 0.8, shape) for shape in ((offsets[-1], 4 * d), (d, 4 * d), (1, 7 * d), (300, d))]
    results = []
    for fused in (True, False):
        monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
        x, w, b, c0 = (torch.tensor(a, dtype=getattr(torch, dtype), device="cuda", requires_grad=True) for a in host)
        h, c = F.dynamic_lstm(lt.LoDTensor(x, [offsets]), w, b, None, c0)
        (h.data.sum() + (c.data * 0.5).sum()).backward()
        results.append([h.data.detach(), c.data.detach(), x.grad, w.grad, b.grad, c0.grad])
        assert set(planned) == ({"lstm_step", "lstm_step_grad"} if fused else set()), planned
        planned.clear()
    scale = 5e-4 if dtype == "float32" else 1e-12  # the gradients reach 1e4: rounding, relative to them
    assert len(results[0]) == len(results[1])  # (no zip(strict=): Python 3.9)
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=0, atol=scale * float(want.abs().max()))
    results = []
    for fused in (True, False):  # the GRU likewise
        monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
        x, w, b, h0 = (torch.tensor(a[:, : 3 * d] if a.shape[1] > d else a, dtype=getattr(torch, dtype),
                                    device="cuda", requires_grad=True) for a in host)
        h = F.dynamic_gru(lt.LoDTensor(x, [offsets]), w, b, h0, origin_mode=True)
        h.data.sum().backward()
        results.append([h.data.detach(), x.grad, w.grad, b.grad, h0.grad])
        assert set(planned) == (set(_fused_steps.GRUSteps.KERNELS) if fused else set()), planned
        planned.clear()
    assert len(results[0]) == len(results[1])  # (no zip(strict=): Python 3.9)
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=0, atol=scale * float(want.abs().max()))


def _fused_and_unfused_grads(monkeypatch, switch, op, x, offsets, weights):
    """The gradient of ``(op(x) * weights).sum()`` on CUDA with ``_tuning.<switch>`` on (its backward
    made under ``torch.cuda.set_sync_debug_mode("error")``: no sync) and off."""
    torch = _cuda_torch()
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    grads = []
    for fused in (True, False):
        monkeypatch.setattr(_tuning, switch, fused)
        v = x.clone().requires_grad_()
        y = op(lt.from_torch(v, [offsets])).data
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error" if fused else 0)
        try:
            (y * weights).sum().backward()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        grads.append(v.grad)
    return grads


def _long_and_short_offsets(seed):
    rng = np.random.default_rng(seed)
    lens = np.concatenate([rng.integers(0, 200, 400), [3000]])  # by blocks, and a sequence over pieces
    return rng, lens, np.concatenate([[0], np.cumsum(lens)]).tolist()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_cuda_softmax_fused_backward_matches_the_unfused(monkeypatch, dtype):
    """Segment softmax's backward on CUDA tensors by the fused kernels (``_tuning.FUSED_SOFTMAX_GRAD``)
    gives the unfused ops' gradient, by blocks and over pieces (a sequence of 3000 rows), without
    making the host wait."""
    torch = _cuda_torch()
    pytest.importorskip("cupy")
    rng, _, offsets = _long_and_short_offsets(11)
    for width in (1, 3, 128, 130):
        x = torch.tensor(rng.standard_normal((offsets[-1], width)) * 3, dtype=getattr(torch, dtype), device="cuda")
        fused, unfused = _fused_and_unfused_grads(monkeypatch, "FUSED_SOFTMAX_GRAD", S.sequence_softmax, x, offsets,
                                                  torch.randn_like(x))
        scale = 1e-5 if dtype == "float32" else 1e-12
        torch.testing.assert_close(fused, unfused, rtol=0, atol=scale * float(unfused.abs().max()))


@pytest.mark.parametrize("op", ["max", "min"])
def test_torch_cuda_pool_fused_backward_matches_the_unfused(monkeypatch, op):
    """sequence_pool max/min's backward on CUDA tensors by the fused kernels (``_tuning.FUSED_EXTREME_GRAD``)
    gives the unfused ops' gradient, ties included, by blocks and over pieces, without a sync."""
    torch = _cuda_torch()
    pytest.importorskip("cupy")
    rng, lens, offsets = _long_and_short_offsets(12)
    for width, dtype in ((1, torch.float32), (3, torch.float64), (128, torch.float32), (130, torch.float64)):
        x = torch.tensor(rng.integers(-3, 4, (offsets[-1], width)), dtype=dtype, device="cuda")
        weights = torch.randn((lens.size, width), dtype=dtype, device="cuda")
        fused, unfused = _fused_and_unfused_grads(monkeypatch, "FUSED_EXTREME_GRAD",
                                                  lambda t: S.sequence_pool(t, op), x, offsets, weights)
        torch.testing.assert_close(fused, unfused, rtol=1e-6, atol=1e-6)


def test_torch_cuda_forward_paths_never_synchronise():
    """Pool, softmax, pad and unpad of CUDA tensors never make the host wait for the device
    (``torch.cuda.set_sync_debug_mode("error")``), a new LoD's first use included: its device
    arrays go through page-locked memory, asynchronously."""
    torch = _cuda_torch()
    x = torch.randn(5000, 16, device="cuda")
    col = x[:, :1].contiguous()
    S.sequence_pool(lt.from_torch(x, [[0, 100, 100, 4000, 5000]]), "sum")  # CuPy's kernels compiled once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        t = lt.from_torch(x, [[0, 100, 100, 4000, 5000]])  # a new LoD: nothing cached yet
        for op in (lambda: S.sequence_pool(t, "sum"), lambda: S.sequence_pool(t, "average"),
                   lambda: S.sequence_pool(t, "sqrt"), lambda: S.sequence_pool(t, "max"),
                   lambda: S.sequence_softmax(lt.LoDTensor(col, t.lod)),
                   lambda: S.sequence_pad(t, 0.0), t.to_padded):
            op()
            op()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()


def test_torch_cuda_gradients_through_the_kernels():
    torch = _cuda_torch()
    x = torch.randn(7, 3, device="cuda", dtype=torch.float64, requires_grad=True)
    lod = [[0, 2, 2, 7]]
    for fn in (lambda v: S.sequence_pool(lt.from_torch(v, lod), "sum").data,
               lambda v: S.sequence_pool(lt.from_torch(v, lod), "average").data,
               lambda v: S.sequence_softmax(lt.from_torch(v, lod)).data,
               lambda v: S.sequence_pad(lt.from_torch(v, lod), 0.0)[0].data):
        assert torch.autograd.gradcheck(fn, (x,))


def test_torch_cuda_device_mixing_is_gone():
    """The first GPU run's failures: sqrt pooling, sequence_enumerate and nested masked_fill on CUDA."""
    torch = _cuda_torch()
    t = lt.from_torch(torch.randn(6, 2, device="cuda"), [[0, 2, 6]])
    assert S.sequence_pool(t, "sqrt").data.device.type == "cuda"
    ids = lt.from_torch(torch.arange(6, device="cuda").reshape(6, 1), [[0, 2, 6]])
    assert S.sequence_enumerate(ids, 2).data.device.type == "cuda"


def test_torch_cuda_kernels_launch_on_torch_s_current_stream(monkeypatch):
    """Under ``torch.cuda.stream(side)`` the kernels go on ``side`` (CuPy's current stream inside the launch
    context is torch's), after the work queued there before them; back on the default stream after."""
    torch = _cuda_torch()
    cupy = pytest.importorskip("cupy")
    from lodtensor.backend.torch import _launching  # noqa: PLC0415

    seen = []
    real = _launching.Launch.__enter__

    def enter(self):
        entered = real(self)
        seen.append(cupy.cuda.get_current_stream().ptr)
        return entered

    monkeypatch.setattr(_launching.Launch, "__enter__", enter)
    rng = np.random.default_rng(3)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 300, 2000))]).tolist()
    host = rng.standard_normal((offsets[-1], 64)).astype(np.float32)
    x = torch.tensor(host, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = x * 2  # queued on side: the pool must follow it there
        out = S.sequence_pool(lt.LoDTensor(y, [offsets]), "sum").data
    side.synchronize()
    assert seen and set(seen) == {side.cuda_stream}, (seen, side.cuda_stream)
    want = S.sequence_pool(lt.LoDTensor(host.astype(np.float64) * 2, [offsets]), "sum").data
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-4, atol=1e-3)
    seen.clear()
    S.sequence_pool(lt.LoDTensor(x, [offsets]), "sum")
    assert set(seen) == {torch.cuda.current_stream().cuda_stream}


@pytest.mark.parametrize("tf32", [False, True])
def test_torch_cuda_rnn_gemms_run_on_torch_s_stream_and_math_mode(monkeypatch, tf32):
    """The fused recurrences' GEMMs are cuBLAS calls planned on torch's handle (``_steps._Steps.gemm``): under
    ``torch.cuda.stream(side)`` each runs on ``side``, in torch's math mode (TF32 tensor ops exactly where
    ``torch.backends.cuda.matmul.allow_tf32`` asks for them); the GRU's outputs and gradients match float64
    on the CPU (TF32's 10-bit mantissa: a looser bound)."""
    torch = _cuda_torch()
    cupy = pytest.importorskip("cupy")
    from lodtensor.backend.cupy import _steps  # noqa: PLC0415
    from lodtensor.nn import functional as F  # noqa: PLC0415

    seen = []  # (the stream CuPy's binding sets on the handle, the handle's math mode) at each call
    real = _steps._Steps.gemm

    def gemm(self, *args, **kwargs):
        def watched(fn):
            def call(*a):
                seen.append((cupy.cuda.get_current_stream().ptr, cupy.cuda.cublas.getMathMode(a[0])))
                return fn(*a)

            return call

        return [(watched(fn), a) for fn, a in real(self, *args, **kwargs)]

    monkeypatch.setattr(_steps._Steps, "gemm", gemm)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", tf32)
    rng = np.random.default_rng(11)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 30, 200))]).tolist()
    d = 96
    host = [rng.uniform(-0.5, 0.5, shape) for shape in ((offsets[-1], 3 * d), (d, 3 * d), (1, 3 * d), (200, d))]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x, w, b, h0 = (torch.tensor(a, dtype=torch.float32, device="cuda", requires_grad=True) for a in host)
        h = F.dynamic_gru(lt.LoDTensor(x, [offsets]), w, b, h0)
        (h.data * torch.linspace(-1, 1, h.data.numel(), device="cuda").reshape(h.data.shape)).sum().backward()
    side.synchronize()
    assert seen and {stream for stream, _ in seen} == {side.cuda_stream}
    assert {mode & 0xF for _, mode in seen} == {3 if tf32 else 0}  # CUBLAS_TF32_TENSOR_OP_MATH, CUBLAS_DEFAULT_MATH
    ref = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in host]
    want = F.dynamic_gru(lt.LoDTensor(ref[0], [offsets]), *ref[1:])
    (want.data * torch.linspace(-1, 1, want.data.numel(), dtype=torch.float64).reshape(want.data.shape)).sum() \
        .backward()
    scale = 2e-3 if tf32 else 2e-5
    for got, expected in zip([h.data, x.grad, w.grad, b.grad, h0.grad], [want.data] + [r.grad for r in ref]):
        expected = expected.to(torch.float32)
        torch.testing.assert_close(got.detach().cpu(), expected, rtol=0, atol=scale * float(expected.abs().max()))
