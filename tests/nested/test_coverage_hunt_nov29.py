"""What torch 2.13's jagged layout accepts, run unchanged on lodtensor.nested (a coverage probe's confirmed
findings): 0-d tensor indices, torch's keyword spellings of view/reshape, and torch's exception class for
an op the nested layouts lack."""

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _pair(kind):
    comps = [torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(4, 3) - 5]
    ref = torch.nested.nested_tensor(comps, layout=torch.jagged)
    ours = ln.nested_tensor([c.numpy() if kind == "numpy" else c for c in comps], layout=torch.jagged)
    return ref, ours


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("index", [
    lambda: torch.tensor(1), lambda: torch.tensor(0, dtype=torch.int32), lambda: np.array(1), lambda: np.int64(-1),
    lambda: (Ellipsis, torch.tensor(2)), lambda: (torch.tensor(1), slice(None), torch.tensor(0)),
], ids=["tensor", "int32 tensor", "0-d array", "np.int64", "..., tensor", "tensor, :, tensor"])
def test_a_zero_d_integer_index_is_an_int(kind, index):
    """Before: IndexError "NestedTensor indices must be ints, slices, None or ...", got Tensor tensor(1)
    (the argmax of something is such an index)."""
    ref, ours = _pair(kind)
    want, got = ref[index()], ours[index()]
    if getattr(want, "is_nested", False):
        assert [np.asarray(c).tolist() for c in got.unbind()] == [c.tolist() for c in want.unbind()]
    else:
        assert np.asarray(got).tolist() == want.tolist()


@pytest.mark.parametrize("index", [lambda: torch.tensor(True), lambda: True, lambda: torch.tensor([1])],
                         ids=["bool tensor", "bool", "1-d tensor"])
def test_bools_and_arrays_are_still_refused_as_a_component_index(index):
    with pytest.raises(IndexError, match="must be ints, slices"):
        _pair("numpy")[1][index()]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_view_and_reshape_take_torchs_keywords(kind):
    ref, ours = _pair(kind)
    assert ours.view(size=(2, -1, 3)).shape == ours.view(2, -1, 3).shape
    assert ours.reshape(shape=(2, -1, 3)).shape == ours.reshape(2, -1, 3).shape
    assert tuple(ref.view(size=(2, -1, 3)).shape)[2:] == tuple(ours.view(size=(2, -1, 3)).shape)[2:]
    with pytest.raises(TypeError, match="by position or as size="):
        ours.view(2, -1, 3, size=(2, -1, 3))
    with pytest.raises(TypeError, match="by position or as shape="):
        ours.reshape(shape=(2, -1, 3), other=1)


@pytest.mark.parametrize("call", [
    lambda x: F.pad(x, (1, 1)), lambda x: F.mse_loss(x, x), lambda x: F.normalize(x, dim=-1),
    lambda x: F.cosine_similarity(x, x, dim=-1), lambda x: F.glu(x, -1), lambda x: torch.cumsum(x, 2),
    lambda x: torch.logsumexp(x, 2),
], ids=["pad", "mse_loss", "normalize", "cosine_similarity", "glu", "cumsum", "logsumexp"])
def test_an_op_neither_supports_raises_torchs_not_implemented_error(call):
    """torch raises NotImplementedError (a RuntimeError) for these; lodtensor raised a bare TypeError, so a
    fallback written ``except NotImplementedError`` broke. It is both now."""
    ref, ours = _pair("torch")
    with pytest.raises(NotImplementedError):
        call(ref)
    with pytest.raises(NotImplementedError, match="is not supported for lodtensor NestedTensor") as caught:
        call(ours)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, RuntimeError)
