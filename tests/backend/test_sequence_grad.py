"""The sequence ops keep autograd on the torch backend (float64 gradcheck)."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.backend.torch import _tuning as torch_tuning
from lodtensor.lod import lengths_to_offsets

torch = pytest.importorskip("torch")

LOD = [[0, 2, 2, 5, 6]]
Y = lt.LoDTensor(np.zeros(4), [[0, 1, 3, 3, 4]])


def t(x):
    return lt.from_torch(x, LOD)


@pytest.fixture(params=[True, False], ids=["cpu-kernels", "generic"])
def shortcuts(request, monkeypatch):
    """Both the torch backend's CPU-only kernels and the device-generic code CUDA runs."""
    from lodtensor.backend.torch import _backend as torch_backend

    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", request.param)
    return request.param


OPS = {
    "pool-sum": lambda x: S.sequence_pool(t(x), "sum", pad_value=1.0).data,
    "pool-average": lambda x: S.sequence_pool(t(x), "average").data,
    "pool-sqrt": lambda x: S.sequence_pool(t(x), "sqrt").data,
    "pool-max": lambda x: S.sequence_pool(t(x), "max").data,
    "pool-min": lambda x: S.sequence_pool(t(x), "min").data,
    "pool-first": lambda x: S.sequence_first_step(t(x)).data,
    "pool-last": lambda x: S.sequence_last_step(t(x)).data,
    "softmax": lambda x: S.sequence_softmax(t(x)).data,
    "expand": lambda x: S.sequence_expand(t(x), Y).data,
    "pad": lambda x: S.sequence_pad(t(x), 0.0, maxlen=4)[0].data,
    "concat": lambda x: S.sequence_concat([t(x), t(x * 2)]).data,
    "reverse": lambda x: S.sequence_reverse(t(x)).data,
    "slice": lambda x: S.sequence_slice(t(x), [1, 0, 0, 0], [1, 0, 3, 1]).data,
    "reshape": lambda x: S.sequence_reshape(t(x), 1).data,
    "unpad": lambda x: S.sequence_unpad(x.reshape(3, 2, 2), [2, 0, 1]).data,
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_gradcheck(name, shortcuts):
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    out = OPS[name](x)
    assert isinstance(out, torch.Tensor) and out.requires_grad
    assert torch.autograd.gradcheck(OPS[name], (x,))


@pytest.mark.parametrize("name", ["pool-sum", "pool-average", "pool-sqrt", "pool-max", "softmax"])
def test_gradcheck_wide_rows(name, shortcuts):
    """Rows of 4+ floats take other kernels on CPU (SpMM segment sums): gradients and
    second derivatives must still flow."""
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(OPS[name], (x,))
    if name != "pool-max":  # max is piecewise linear: its second derivative is zero almost everywhere
        assert torch.autograd.gradgradcheck(OPS[name], (x,))


def test_wide_segment_sum_matches_index_add():
    from lodtensor.backend.torch import _backend as torch_backend

    x = torch.randn(6, 3, 4, dtype=torch.float32)
    offsets = torch.tensor([0, 2, 2, 5, 6])
    ids = torch.tensor([0, 0, 2, 2, 2, 3])
    assert torch_backend._spmm_fits(x, 4) == torch.backends.mkl.is_available()
    out = lt.get_backend("torch").segment_sum(x, offsets)
    assert out.shape == (4, 3, 4)
    torch.testing.assert_close(out, torch.zeros(4, 3, 4).index_add_(0, ids, x))
    strided = torch.randn(4, 6, dtype=torch.float64).t()  # a non-contiguous input
    torch.testing.assert_close(lt.get_backend("torch").segment_sum(strided, offsets),
                               torch.zeros(4, 4, dtype=torch.float64).index_add_(0, ids, strided))


def test_ops_return_torch_for_torch_input():
    x = t(torch.arange(12.0).reshape(6, 2))
    assert isinstance(S.sequence_enumerate(lt.from_torch(torch.arange(6), LOD), 2).data, torch.Tensor)
    assert isinstance(S.sequence_mask(torch.tensor([2, 0, 1])), torch.Tensor)
    scattered = S.sequence_scatter(torch.zeros(4, 3), lt.from_torch(torch.tensor([0, 1, 2, 0, 1, 2]), LOD),
                                   lt.from_torch(torch.ones(6), LOD))
    assert isinstance(scattered, torch.Tensor) and scattered.sum().item() == 6
    assert isinstance(S.lod_reset(x, target_lod=[0, 6]).data, torch.Tensor)


def test_pad_value_tensor_keeps_its_gradient():
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    value = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    out = S.sequence_pad(t(x), value, maxlen=4)[0].data
    out.sum().backward()
    assert value.grad.tolist() == [10.0, 10.0]  # 4 sequences x 4 slots - 6 rows = 10 padded slots
    assert x.grad.tolist() == [[1.0, 1.0]] * 6


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "uncompiled"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
@pytest.mark.parametrize("width", [1, 4, 16, 20, 24, 25, 40, 41, 64, 256])
def test_segment_kernels_agree_across_the_width_thresholds(monkeypatch, dtype, width, compiled):
    """CPU sums switch between SpMM (or the compiled kernel, from 32 bytes a row where built) and
    index_add_, max/min between the NumPy kernels and scatter_reduce, by bytes per row: every side
    gives NumPy's result (empty segment included), and float64 gradients pass gradcheck on both sides."""
    from lodtensor.backend.numpy import _compiled as _np_compiled
    from lodtensor.backend.torch import _backend as torch_backend

    if compiled and _np_compiled._kernel is None:
        pytest.skip("the compiled kernel was not built")
    monkeypatch.setattr(_np_compiled, "_enabled", compiled)
    be, ref = lt.get_backend("torch"), lt.get_backend("numpy")
    offsets = lengths_to_offsets([3, 0, 2, 5, 1])
    g = torch.Generator().manual_seed(width)
    x = (torch.randn(11, width, generator=g, dtype=torch.float64) * 10).to(dtype)
    host = x.numpy()
    row_bytes = width * x.element_size()
    expect_spmm = x.is_floating_point() and (4 <= width and row_bytes <= torch_tuning.SPMM_MAX_ROW_BYTES
                                             or compiled and row_bytes >= 32)
    assert torch_backend._spmm_fits(x, 5) == (expect_spmm and torch.backends.mkl.is_available())
    np.testing.assert_allclose(be.segment_sum(x, offsets).numpy(), ref.segment_sum(host, offsets), rtol=1e-5)
    for kernel in ("segment_max", "segment_min"):
        got = getattr(be, kernel)(x, offsets, empty=-7)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.numpy(), getattr(ref, kernel)(host, offsets, empty=-7))
    if dtype == torch.float64:
        w = x.clone().requires_grad_(True)
        assert torch.autograd.gradcheck(lambda v: be.segment_sum(v, offsets), (w,), fast_mode=True)
        assert torch.autograd.gradcheck(lambda v: be.segment_max(v, offsets, empty=0.0), (w,), fast_mode=True)
