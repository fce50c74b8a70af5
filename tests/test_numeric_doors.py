"""Issue #25's silent wrong values of the numeric kind: float16 sums and means accumulate in float32 on
every backend, unsigned 64-bit sums and means do not wrap, strided float32 data through GELU."""

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import sequence as S


@pytest.fixture
def case(backend):
    return backend


def _num(case, x):
    return np.asarray(case.numpy(x), dtype=np.float64)


@pytest.mark.parametrize("rows", [3000, 70000])
def test_float16_pools_accumulate_in_float32(case, rows):
    t = lt.LoDTensor(case.array(np.ones((rows, 4), np.float16)), [[0, rows, rows]])
    assert _num(case, S.sequence_pool(t, "average", pad_value=-1.0).data)[:, 0].tolist() == [1.0, -1.0]
    total = _num(case, S.sequence_pool(t, "sum").data)[0, 0]
    assert total == (rows if rows <= 65504 else np.inf)  # the exact count, or float16's overflow (as torch)
    assert _num(case, S.sequence_pool(t, "sqrt").data)[0, 0] == pytest.approx(np.sqrt(rows), rel=1e-3)
    assert str(S.sequence_pool(t, "average").data.dtype).endswith("float16")


def test_float16_nested_mean_over_many_rows():
    nt = ln.nested_tensor([np.ones((70000, 2), np.float16)])
    assert np.asarray(ln.mean(nt, dim=1)).tolist() == [[1.0, 1.0]]


@pytest.mark.parametrize("dtype", ["<u8", ">u8"])
def test_unsigned_64_bit_sums_and_means_do_not_wrap(dtype):
    x = lt.LoDTensor(np.array([2**64 - 1, 3], dtype=dtype), [[0, 1, 2]])
    assert S.sequence_pool(x, "sum").data.tolist() == [2**64 - 1, 3]
    big = lt.LoDTensor(np.array([2**63 + 5] * 4, dtype=dtype), [[0, 4]])
    assert S.sequence_pool(big, "average").data.tolist() == [float(2**63 + 5)]  # NumPy's float64 mean
    assert np.mean(np.array([2**63 + 5] * 4, dtype=np.uint64)) == float(2**63 + 5)


def test_int64_means_do_not_wrap():
    x = lt.LoDTensor(np.array([2**62, 2**62, 2**62], dtype=np.int64), [[0, 3]])
    assert S.sequence_pool(x, "average").data.tolist() == [float(2**62)]


def test_gelu_of_strided_float32():
    nt = ln.nested_tensor([np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4), np.ones((2, 4), np.float32)])
    for view in (nt.transpose(1, 2), nt[:, :, ::2]):
        got = ln.gelu(view).to_padded_tensor(0.0)
        want = ln.gelu(ln.nested_tensor([np.ascontiguousarray(c) for c in view.unbind()])).to_padded_tensor(0.0)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    from lodtensor.backend.numpy import _special

    x = np.linspace(-2, 2, 24, dtype=np.float32)[::2]
    np.testing.assert_allclose(_special.gelu(x), _special.gelu(x.copy()), rtol=0)


def test_pad_values_at_the_edge_of_the_dtype_round_as_a_cast(case):
    """A float32 max that arrives as a slightly larger float64 (3.402823466385289e+38, from a
    float32 round trip) fills as float32's max, as NumPy and a torch cast round it; the fuzzer
    found torch's fill functions refusing it (found by the 30-minute `make fuzz`)."""
    edge = 3.402823466385289e38
    t = lt.LoDTensor(case.array(np.zeros((3, 2), np.float32)), [[0, 0, 3]])
    pooled = _num(case, S.sequence_pool(t, "sum", pad_value=edge).data)
    assert pooled[0, 0] == float(np.float32(edge)) and pooled[1, 0] == 0
    padded = _num(case, t.to_padded(pad_value=edge)[0])
    assert padded[0, 0, 0] == float(np.float32(edge))
