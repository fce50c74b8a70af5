"""Backend methods against the declared contract (lodtensor/backend/_contract.py), on every route.

Regressions found by sweeping the contract's segment kernels, pad and unpad over dtypes, shapes, LoDs and
the NumPy backend's routes (forced), comparing NumPy, torch and the CuPy backend (on the emulated CUDA
kernels: ``LT_CUPY_EMULATED=1``) with each other and with the contract's text.
"""

import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from lodtensor import get_backend  # noqa: E402
from lodtensor.backend.numpy import _routes  # noqa: E402
from lodtensor.errors import ShapeError  # noqa: E402

NP = get_backend("numpy")
TORCH = get_backend("torch")

_CUPY = pytest.mark.skipif(
    os.environ.get("LT_CUPY_EMULATED") != "1" or shutil.which("g++") is None,
    reason="emulated CUDA off (LT_CUPY_EMULATED=1, needs g++)",
)


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _data(dtype, rows, row_shape, seed=0):
    values = np.random.default_rng(seed).integers(0, 100, size=(rows, *row_shape))
    return (values % 2).astype(bool) if dtype == "bool" else values.astype(dtype)


def _sums(data, offsets):
    """The contract's segment sum of integer or bool rows: the data's dtype (wrapping), bool as any."""
    out = np.zeros((offsets.size - 1,) + data.shape[1:], dtype=data.dtype)
    for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        part = data[a:b]
        out[i] = part.any(axis=0) if data.dtype == bool else part.sum(axis=0, dtype=data.dtype)
    return out


# (lengths, row shape): reduceat's routes (one column; few columns of long sequences), with and without
# empty sequences, and the chunk and compiled routes around them
_SUM_CASES = {
    "257+1 width 1": ([257, 1], ()),
    "one row": ([1], (1,)),
    "long, width 4": ([40], (4,)),
    "20 x 20, width 2": ([20] * 20, (2,)),
    "empty among": ([3, 0, 2], (1,)),
    "width 3": ([3, 0, 2], (3,)),
}
_INT_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("case", sorted(_SUM_CASES))
@pytest.mark.parametrize("dtype", _INT_DTYPES)
@pytest.mark.parametrize("compiled", [True, False])
def test_integer_and_bool_sums_keep_their_dtype(case, dtype, compiled, monkeypatch):
    """np.add.reduceat widened int8/16/32, uint8/16/32 and bool sums to int64/uint64 on the reduceat
    route when no sequence was empty (one dtype with empty sequences, another without)."""
    from lodtensor.backend import set_compiled_kernels  # noqa: PLC0415

    lengths, row = _SUM_CASES[case]
    offsets = _offsets(lengths)
    data = _data(dtype, int(offsets[-1]), row)
    data[: min(3, len(data))] = np.iinfo(dtype).max if dtype != "bool" else True  # a sum that wraps
    saved = set_compiled_kernels(compiled)
    try:
        got = NP.segment_sum(data, offsets)
    finally:
        set_compiled_kernels(saved)
    want = _sums(data, offsets)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, want)
    if dtype not in ("uint16", "uint32", "uint64"):  # torch has no index_add_ for these
        got_torch = TORCH.segment_sum(torch.from_numpy(data), torch.from_numpy(offsets))
        assert TORCH.to_numpy(got_torch).dtype == data.dtype
        np.testing.assert_array_equal(TORCH.to_numpy(got_torch), want)


@pytest.mark.parametrize("route", ["reduceat", "chunks", "blocks"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32"])
def test_every_forced_route_sums_in_the_data_dtype(route, dtype, monkeypatch):
    if route == "chunks" and dtype == "bool":
        pytest.skip("the chunk kernel needs an identity: no bool")
    offsets = _offsets([5, 0, 17, 1])
    data = _data(dtype, int(offsets[-1]), (3,), seed=1)
    monkeypatch.setattr(_routes, "choose", lambda ufunc, d, o, owner=None: route)
    got = NP.segment_sum(data, offsets)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, _sums(data, offsets))


@pytest.mark.parametrize("row", [(), (1,), (3,), (2, 3)])
@pytest.mark.parametrize("lengths", [[], [0, 0]])
def test_softmax_of_no_rows_keeps_float16(row, lengths):
    """float16 data with no rows came back float32 (with rows it is float16)."""
    offsets = _offsets(lengths)
    data = np.zeros((0, *row), dtype=np.float16)
    got = NP.segment_softmax(data, offsets)
    assert got.dtype == np.float16 and got.shape == data.shape
    assert NP.segment_softmax(np.ones((2, *row), np.float16), _offsets([2])).dtype == np.float16
    got_torch = TORCH.segment_softmax(torch.from_numpy(data), torch.from_numpy(offsets))
    assert got_torch.dtype == torch.float16 and tuple(got_torch.shape) == data.shape


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32"])
@pytest.mark.parametrize("rows", [0, 7])
def test_softmax_of_integers_is_float(dtype, rows):
    """The contract's "integers as float": NumPy raised (exp into an int array), torch raised (or kept the
    int dtype with no rows). Both now give the CuPy backend's dtype, np.result_type(dtype, float32)."""
    offsets = _offsets([3, 0, 4] if rows else [0])
    data = _data(dtype, rows, (2,), seed=2)
    want_dtype = np.result_type(data.dtype, np.float32)
    host = data.astype(want_dtype)
    got = NP.segment_softmax(data, offsets)
    assert got.dtype == want_dtype
    np.testing.assert_allclose(got, NP.segment_softmax(host, offsets), rtol=1e-6)
    got_torch = TORCH.to_numpy(TORCH.segment_softmax(torch.from_numpy(data), torch.from_numpy(offsets)))
    assert got_torch.dtype == want_dtype
    np.testing.assert_allclose(got_torch, got, rtol=1e-6)
    if rows:
        sums = np.add.reduceat(got, offsets[:-1][[0, 2]], axis=0)
        np.testing.assert_allclose(sums, 1.0, rtol=1e-6)


def _truncated_pad(data, lengths, maxlen, pad_value):
    out = np.full((len(lengths), maxlen) + data.shape[1:], pad_value, dtype=data.dtype)
    start = 0
    for i, n in enumerate(lengths):
        keep = min(n, maxlen)
        out[i, :keep] = data[start : start + keep]
        start += n
    return out


@pytest.mark.parametrize("row", [(1,), (3,), (2, 2)])
@pytest.mark.parametrize("generic", [False, True])
def test_pad_keeps_the_first_maxlen_rows_of_a_longer_sequence(row, generic, monkeypatch):
    """pad with a maxlen shorter than a sequence wrote its extra rows into the next sequence's slots (and
    the last one's, clipped, onto the final slot); torch's device-generic path raised IndexError. Now
    each sequence keeps its first maxlen rows, as the CUDA kernel does; the dropped rows get no gradient."""
    from lodtensor.backend.torch import _backend as torch_backend  # noqa: PLC0415

    lengths = [3, 1, 5, 0]
    offsets = _offsets(lengths)
    data = np.arange(9 * int(np.prod(row)), dtype=np.float64).reshape((9, *row))
    want = _truncated_pad(data, lengths, 2, -1.0)
    np.testing.assert_array_equal(NP.pad(data, offsets, 2, -1.0), want)
    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", not generic)
    x = torch.tensor(data, requires_grad=True)
    got = TORCH.pad(x, torch.from_numpy(offsets), 2, -1.0)
    np.testing.assert_array_equal(got.detach().numpy(), want)
    weight = torch.arange(1.0, got.numel() + 1).reshape(got.shape)
    (got * weight).sum().backward()
    expected = np.zeros_like(data)
    kept = [0, 1, 3, 4, 5]  # rows 2 (first sequence) and 6-8 (third) are dropped
    expected[kept] = TORCH.unpad(weight, torch.tensor([0, 2, 3, 5, 5])).numpy()
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_pad_with_a_plan_and_a_short_maxlen_truncates_too():
    from lodtensor import LoDTensor  # noqa: PLC0415
    from lodtensor._dense import pad_plan  # noqa: PLC0415

    t = LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 4, 6]])
    plan = pad_plan(t.lod, 0, 2)  # the plan the public pad builds (it refuses a short maxlen itself)
    got = NP.pad(t.data, t.lod.absolute_offsets(0), 2, 0.0, plan=plan)
    np.testing.assert_array_equal(got[..., 0], [[0.0, 1.0], [4.0, 5.0]])


@pytest.mark.parametrize("generic", [False, True])
def test_unpad_refuses_a_padded_shorter_than_a_sequence(generic, monkeypatch):
    """unpad of (sequences, L) with L shorter than a sequence returned rows of other positions (clipped
    indices) as if they were that sequence's."""
    from lodtensor.backend.torch import _backend as torch_backend  # noqa: PLC0415

    offsets = _offsets([3, 1, 5])
    padded = np.arange(6.0).reshape(3, 2, 1)
    before = padded.copy()
    with pytest.raises(ShapeError, match=r"padded.shape\[1\] >= 5"):
        NP.unpad(padded, offsets)
    np.testing.assert_array_equal(padded, before)
    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", not generic)
    with pytest.raises(ShapeError, match=r"2 rows per sequence"):
        TORCH.unpad(torch.from_numpy(padded), torch.from_numpy(offsets))
    np.testing.assert_array_equal(NP.unpad(NP.pad(padded.reshape(6, 1), _offsets([2, 4]), 4, 0.0), _offsets([2, 4])),
                                  padded.reshape(6, 1))


@_CUPY
@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "uint8", "int32", "uint32"])
def test_cupy_and_numpy_agree_on_integer_sums_and_softmax(emulated, dtype):
    lengths, row = [257, 1], ()
    offsets = _offsets(lengths)
    data = _data(dtype, int(offsets[-1]), row, seed=3)
    got = emulated.numpy(emulated.be.segment_sum(emulated.array(data), emulated.array(offsets)))
    want = NP.segment_sum(data, offsets)
    assert got.dtype == want.dtype == data.dtype
    np.testing.assert_array_equal(got, want)
    got = emulated.numpy(emulated.be.segment_softmax(emulated.array(data), emulated.array(offsets)))
    want = NP.segment_softmax(data, offsets)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)


@_CUPY
def test_cupy_and_numpy_pad_a_longer_sequence_alike(emulated):
    lengths = [3, 1, 5, 0]
    offsets = _offsets(lengths)
    data = np.arange(18.0).reshape(9, 2)
    got = emulated.numpy(emulated.be.pad(emulated.array(data), emulated.array(offsets), 2, -1.0))
    np.testing.assert_array_equal(got, NP.pad(data, offsets, 2, -1.0))
    np.testing.assert_array_equal(got, _truncated_pad(data, lengths, 2, -1.0))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "float16", "float64"])
@pytest.mark.parametrize("rows", [0, 1, 5])
def test_exclusive_cumsum_has_the_dtype_of_the_inclusive_one(dtype, rows):
    """cumsum(x, exclusive=True) kept int8/uint8/bool/int32 while cumsum(x) (np.cumsum) gives int64/uint64,
    as torch's and CuPy's exclusive cumsum do."""
    x = _data(dtype, rows, (2,), seed=4)
    inclusive = NP.cumsum(x)
    got = NP.cumsum(x, exclusive=True)
    assert got.dtype == inclusive.dtype == np.cumsum(x, axis=0).dtype
    np.testing.assert_array_equal(got, np.concatenate([np.zeros_like(inclusive[:1]), inclusive[:-1]])[:rows])
    if dtype != "uint8":  # torch's cumsum of uint8 is int64, NumPy's uint64
        assert TORCH.to_numpy(TORCH.cumsum(torch.from_numpy(x), exclusive=True)).dtype == got.dtype


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_torch_unsigned_segment_reductions_and_pools(dtype):
    """torch has no scatter_add / scatter_reduce amax, amin or masked_fill for uint16/32/64: the torch backend's
    sums, maxima and minima raised NotImplementedError (uint64 sums too, though torch.sum has them), and a pool
    with an empty sequence failed to fill it. They run in int64 now (uint64: the sign bit flipped for the
    order) and equal the NumPy backend's, bit for bit, at the type's extremes."""
    torch = pytest.importorskip("torch")
    import lodtensor as lt
    from lodtensor import sequence as S

    TB = TORCH
    hi = np.iinfo(dtype).max
    x = np.random.default_rng(3).integers(0, hi, size=(9, 3), dtype=dtype, endpoint=True)
    x[0, 0], x[1, 1], x[2, 2] = hi, 0, hi
    offsets = np.array([0, 2, 2, 6, 9])
    tx = torch.from_numpy(x)
    np.testing.assert_array_equal(TB.segment_sum(tx, offsets).numpy(), NP.segment_sum(x, offsets))
    for name in ("segment_max", "segment_min"):
        for empty in (7, int(hi)):
            got = getattr(TB, name)(tx, offsets, empty=empty)
            assert got.dtype == tx.dtype
            np.testing.assert_array_equal(got.numpy(), getattr(NP, name)(x, offsets, empty=empty))
    t, n = lt.LoDTensor(tx, [[0, 2, 2, 6, 9]]), lt.LoDTensor(x, [[0, 2, 2, 6, 9]])
    for pool in ("sum", "max", "min", "first", "last", "average"):
        got, want = S.sequence_pool(t, pool).data, S.sequence_pool(n, pool).data
        assert str(got.dtype).replace("torch.", "") == str(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want)
