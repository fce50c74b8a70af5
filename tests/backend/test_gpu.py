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
