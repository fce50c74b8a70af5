"""Sparse: hybrid CSR / COO (torch and scipy) and back, buffers shared, bad matrices refused."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from tests.strategies import lod_tensors

torch = pytest.importorskip("torch")
sp = pytest.importorskip("scipy.sparse")


def _last_level(t):
    """The expected one-level tensor: the last level's sequences over the rows."""
    return lt.LoDTensor(t.data, [t.lod.levels[-1]])


@given(t=lod_tensors(), fmt=st.sampled_from(["csr", "coo"]))
def test_torch_round_trip_and_dense(t, fmt):
    m = t.to_sparse_csr() if fmt == "csr" else t.to_sparse_coo()
    padded, _ = t.to_padded()
    want = _last_level(t)
    if padded.shape[1]:
        np.testing.assert_array_equal(m.to_dense().numpy(), padded)
    back = lt.from_sparse(m)
    assert back.lod() == want.lod() and np.array_equal(back.data.numpy(), t.data)
    if fmt == "csr":
        assert m.crow_indices().data_ptr() != t.lod.levels[-1].__array_interface__["data"][0]  # torch's own copy
        if t.num_rows:
            assert m.values().data_ptr() == t.data.__array_interface__["data"][0]
            assert back.data.data_ptr() == m.values().data_ptr()


@given(t=lod_tensors(row_shape=()), fmt=st.sampled_from(["csr", "coo"]))
def test_scipy_round_trip(t, fmt):
    m = t.to_sparse_csr(format="scipy") if fmt == "csr" else t.to_sparse_coo(format="scipy")
    padded, _ = t.to_padded()
    np.testing.assert_array_equal(m.toarray(), padded.reshape(m.shape))
    back = lt.from_sparse(m)
    assert back.lod() == _last_level(t).lod() and np.array_equal(back.data, t.data)
    if fmt == "csr":
        assert np.shares_memory(m.indptr, t.lod.levels[-1])
        assert np.shares_memory(m.data, t.data) or t.num_rows == 0


def test_torch_data_keeps_autograd():
    x = torch.arange(5.0, requires_grad=True)
    m = lt.from_torch(x, [[0, 2, 5]]).to_sparse_csr()
    assert m.values().data_ptr() == x.data_ptr()
    m.values().sum().backward()
    assert x.grad.tolist() == [1.0] * 5


def test_uncoalesced_coo_is_summed_like_torch():
    indices = torch.tensor([[1, 0, 1, 0, 1], [0, 0, 1, 0, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    coo = torch.sparse_coo_tensor(indices, values, (3, 4), check_invariants=True)
    t = lt.from_sparse(coo)
    assert t.lod() == [[0, 1, 3, 3]] and t.data.tolist() == [6.0, 6.0, 3.0]
    assert torch.equal(t.to_sparse_coo().to_dense()[:, :2], coo.to_dense()[:, :2])
    scipy_coo = sp.coo_array((values.numpy(), (indices[0].numpy(), indices[1].numpy())), shape=(3, 4))
    assert lt.from_sparse(scipy_coo).tolist() == t.tolist()
    assert not scipy_coo.has_canonical_format  # the caller's matrix is left alone


def test_hybrid_trailing_dims_and_other_scipy_formats():
    t = lt.LoDTensor(np.arange(12.0).reshape(6, 2), [[0, 4, 4, 6]])
    m = t.to_sparse_csr()
    assert m.shape == (3, 4, 2) and lt.from_sparse(m.to_sparse_coo()).tolist() == t.tolist()
    s = lt.LoDTensor(np.array([1.0, 2.0, 3.0]), [[0, 1, 3]]).to_sparse_csr(format="scipy")
    assert lt.from_sparse(s.tocsc()).tolist() == [[1.0], [2.0, 3.0]]


BAD = [
    ("gap", sp.csr_array(np.array([[1.0, 0.0, 2.0]])), ValueError, r"row 0 holds columns \[0, 2\].*0\.\.1 in order"),
    ("late-start", sp.csr_array(np.array([[1.0, 0.0], [0.0, 3.0]])), ValueError, r"row 1 holds columns \[1\]"),
    ("dense", np.eye(2), TypeError, r"expected a scipy sparse matrix or a torch sparse tensor, got ndarray"),
    ("torch-gap", torch.tensor([[0.0, 1.0]]).to_sparse(), ValueError, r"row 0 holds columns \[1\]"),
]


@pytest.mark.parametrize("obj,exc,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_matrices(obj, exc, match):
    with pytest.raises(exc, match=match):
        lt.from_sparse(obj)


def test_bad_calls():
    t = lt.LoDTensor(np.ones((3, 2)), [[0, 3]])
    with pytest.raises(ValueError, match="format='scipy' holds scalars only"):
        t.to_sparse_csr(format="scipy")
    with pytest.raises(ValueError, match="format must be 'torch' or 'scipy', got 'dense'"):
        t.to_sparse_coo(format="dense")
    with pytest.raises(IndexError, match="no lod"):
        lt.LoDTensor(np.ones(3)).to_sparse_csr()
