"""A dense operand of one element (shape (1,), (1, 1)... up to the nested tensor's dims) takes part in a binary op
with a jagged nested tensor as a 0-d one, as in torch 2.13: float32 nested * float64 of shape (1,) is float32,
int32 * int64 (1,) int32 (a dense (3,) still promotes as dense); and ``ldexp`` takes a dense exponent (it was
refused: "pow: expected at least one NestedTensor operand"). Against torch's jagged layout, on torch and NumPy data."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402

OTHERS = [((1,), torch.float64), ((1, 1), torch.float64), ((1, 1, 1), torch.float64), ((3,), torch.float64),
          ((1, 3), torch.float64), ((1,), torch.int64), ((), torch.float64), ((1,), torch.float16)]


def _parts(dtype):
    return [torch.arange(6, dtype=dtype).reshape(2, 3) + 1, torch.arange(3, dtype=dtype).reshape(1, 3) + 1]


@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("shape, other_dtype", OTHERS)
@pytest.mark.parametrize("op", ["mul", "add", "sub", "maximum"])
def test_one_element_dense_operands_promote_as_0d_like_torch(lib, dtype, shape, other_dtype, op):
    theirs = torch.nested.nested_tensor(_parts(dtype), layout=torch.jagged)
    other = (torch.arange(int(np.prod(shape)), dtype=torch.float64) + 2).reshape(shape).to(other_dtype)
    want = getattr(torch, op)(theirs, other)
    if lib == "torch":
        got = getattr(torch, op)(ln.nested_tensor(_parts(dtype), layout="jagged"), other)
        assert got.dtype == want.dtype
    else:
        nt = ln.nested_tensor([p.numpy() for p in _parts(dtype)], layout="jagged")
        got = getattr(ln, op)(nt, other.numpy())
        assert str(got.dtype) == str(want.dtype).split(".")[-1]
    for a, b in zip(got.unbind(), want.unbind()):
        np.testing.assert_array_equal(np.asarray(a), b.numpy())


@pytest.mark.parametrize("exponent", [torch.tensor(2), torch.tensor([1]), torch.tensor(1.5, dtype=torch.float64),
                                      torch.tensor([2.0], dtype=torch.float16)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ldexp_takes_a_dense_exponent_like_torch(exponent, dtype):
    parts = [torch.tensor([1.0, 2.0], dtype=dtype), torch.tensor([3.0], dtype=dtype)]
    want = torch.ldexp(torch.nested.nested_tensor(parts, layout=torch.jagged), exponent)
    got = torch.ldexp(ln.nested_tensor(parts, layout="jagged"), exponent)
    assert got.dtype == want.dtype
    for a, b in zip(got.unbind(), want.unbind()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    host = ln.ldexp(ln.nested_tensor([p.numpy() for p in parts], layout="jagged"), exponent.numpy())
    assert str(host.dtype) == str(want.dtype).split(".")[-1]
    for a, b in zip(host.unbind(), want.unbind()):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-6)
