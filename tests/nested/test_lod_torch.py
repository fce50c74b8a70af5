"""LoDTensor in torch code: row-wise functions and modules keep the lod (with autograd), structure-dependent
ones raise a TypeError naming the sequence op to use."""

import numpy as np
import pytest

import lodtensor
from lodtensor import LoDTensor
from lodtensor.sequence import sequence_pool, sequence_softmax

torch = pytest.importorskip("torch")
F = torch.nn.functional

LOD = [[0, 2, 2, 5]]


def _t(requires_grad=False, dtype=torch.float64):
    data = torch.randn(5, 4, dtype=dtype, requires_grad=requires_grad)
    return LoDTensor(data, LOD), data


@pytest.mark.parametrize("call", [
    torch.tanh, torch.exp, F.relu, F.gelu,
    lambda x: torch.clamp(x, -0.5, 0.5), lambda x: torch.where(x > 0, x, 0.0),
    lambda x: F.layer_norm(x, (4,)), lambda x: F.softmax(x, dim=1), lambda x: torch.sum(x, dim=1, keepdim=True),
    lambda x: torch.cat([x, x], dim=1), lambda x: torch.unsqueeze(x, 1),
    lambda x: torch.transpose(torch.unsqueeze(x, 2), 1, 2), lambda x: F.dropout(x, 0.0),
], ids=["tanh", "exp", "relu", "gelu", "clamp", "where", "layer_norm", "softmax-dim1", "sum-dim1", "cat-dim1",
        "unsqueeze1", "transpose12", "dropout"])
def test_row_wise_functions_keep_the_lod_and_match_torch(call):
    t, data = _t()
    out = call(t)
    assert isinstance(out, LoDTensor) and out.lod() == LOD
    torch.testing.assert_close(out.data, call(data))


def test_modules_keep_the_lod_with_autograd():
    t, data = _t(requires_grad=True, dtype=torch.float32)
    lin = torch.nn.Linear(4, 8)
    out = torch.nn.Sequential(lin, torch.nn.ReLU(), torch.nn.LayerNorm(8))(t)
    assert isinstance(out, LoDTensor) and out.lod() == LOD and out.data.shape == (5, 8)
    pooled = sequence_pool(out, "sum")
    pooled.data.sum().backward()
    assert lin.weight.grad is not None and data.grad is not None and data.grad.shape == (5, 4)

    ids = LoDTensor(torch.tensor([1, 2, 3, 0, 4]), LOD)
    emb = torch.nn.Embedding(5, 3, padding_idx=0)
    vec = emb(ids)
    assert isinstance(vec, LoDTensor) and vec.lod() == LOD and vec.data.shape == (5, 3)
    vec.data.sum().backward()
    assert emb.weight.grad[0].abs().sum() == 0


def test_gradcheck_through_torch_function():
    data = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)

    def f(d, w):
        return F.linear(torch.sigmoid(LoDTensor(d, LOD)), w).data

    assert torch.autograd.gradcheck(f, (data, weight))


@pytest.mark.parametrize("call, advice", [
    (lambda x: torch.softmax(x, 0), "sequence_softmax"),
    (lambda x: F.softmax(x, dim=0), "sequence_softmax"),
    (torch.sum, "sequence_pool"),
    (lambda x: torch.mean(x, 0), "pool_type='average'"),
    (lambda x: torch.max(x, dim=0), "pool_type='max'"),
    (torch.argmax, "to_nested"),
    (lambda x: torch.cumsum(x, 0), "to_nested"),
    (lambda x: torch.flip(x, (0,)), "sequence_reverse"),
    (lambda x: torch.cat([x, x]), "sequence_concat"),
    (lambda x: torch.reshape(x, (-1,)), "to_nested"),
    (torch.flatten, "to_nested"),
    (lambda x: torch.transpose(x, 0, 1), "to_nested"),
    (lambda x: torch.matmul(x.data.T, x), "to_nested"),
], ids=["softmax0", "F.softmax0", "sum", "mean0", "max0", "argmax", "cumsum0", "flip0", "cat0", "reshape",
        "flatten", "transpose01", "matmul-rows"])
def test_structure_dependent_functions_raise(call, advice):
    t, _ = _t()
    with pytest.raises(TypeError, match="would mix its sequences") as err:
        call(t)
    assert advice in str(err.value)


def test_the_suggested_sequence_ops_give_per_sequence_results():
    t, data = _t()
    soft = sequence_softmax(LoDTensor(data[:, :1], LOD))
    torch.testing.assert_close(soft.data[:2, 0], torch.softmax(data[:2, 0], 0))
    torch.testing.assert_close(sequence_pool(t, "max").data[2], data[2:5].max(0).values)


def test_numpy_data_goes_to_torch_and_mismatched_lods_raise():
    t = LoDTensor(np.ones((5, 4), np.float32), LOD)
    out = torch.exp(t)
    assert isinstance(out, LoDTensor) and out.backend.name == "torch" and out.lod() == LOD
    other = LoDTensor(torch.ones(5, 4), [[0, 1, 5]])
    with pytest.raises(TypeError, match="different lods"):
        torch.add(LoDTensor(torch.ones(5, 4), LOD), other)
    assert torch.add(out, LoDTensor(torch.ones(5, 4), [[0, 2, 2, 5]])).lod() == LOD  # equal by value is fine
    assert isinstance(lodtensor.LoDTensor(np.arange(5.0), [[0, 2, 5]]).to_nested(), lodtensor.nested.NestedTensor)
