"""Interop on a CUDA device (torch CUDA, CuPy): marked gpu, skipped without one."""

import numpy as np
import pytest

import lodtensor as lt

pytestmark = pytest.mark.gpu


@pytest.fixture
def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def test_jagged_on_cuda_shares_values(torch_cuda):
    torch = torch_cuda
    x = torch.arange(12.0, device="cuda").reshape(6, 2)
    t = lt.from_torch(x, [[0, 2, 2, 6]])
    njt = t.to_nested_jagged()
    assert njt.values().data_ptr() == x.data_ptr() and njt.offsets().device.type == "cuda"
    back = lt.from_torch(njt)
    assert back.lod() == [[0, 2, 2, 6]] and back.data.data_ptr() == x.data_ptr()


def test_torch_inputs_on_cuda(torch_cuda):
    torch = torch_cuda
    ids = torch.tensor([4, 1, 2, 3], device="cuda")
    t = lt.from_torch(ids, [[0, 2, 2, 4]])
    inp, offsets = t.embedding_bag_inputs()
    assert inp.device.type == "cuda" and offsets.device.type == "cuda" and offsets.tolist() == [0, 2, 2]
    cu, longest = t.cu_seqlens()
    assert cu.device.type == "cuda" and cu.dtype == torch.int32 and cu.tolist() == [0, 2, 2, 4] and longest == 2
    seqs = lt.from_torch(torch.randn(5, 3, device="cuda"), [[0, 3, 5]])
    ps = seqs.to_packed_sequence()
    assert ps.data.device.type == "cuda"
    back = lt.from_packed_sequence(ps)
    assert back.lod() == seqs.lod() and torch.equal(back.data, seqs.data)
    m = seqs.to_sparse_csr()
    assert m.device.type == "cuda" and lt.from_sparse(m).lod() == seqs.lod()
    with pytest.raises(ValueError, match=r"call \.cpu\(\) first"):
        seqs.to_arrow()


def test_dlpack_with_cupy():
    cupy = pytest.importorskip("cupy")
    data = cupy.arange(5, dtype=cupy.float32)
    t = lt.from_dlpack(data, [np.array([0, 2, 5])])
    assert t.data.data.ptr == data.data.ptr and t.lod() == [[0, 2, 5]]
    assert t.__dlpack_device__()[0] == 2  # kDLCUDA
    back = lt.from_dlpack(t)
    assert back.data.data.ptr == data.data.ptr and back.lod() == t.lod()
