"""Second hunt of LoDTensor's (and NestedTensor's) NumPy protocols: each test failed before its fix.

Every case is checked against the same call on ``t.data`` (NumPy's, or torch's for torch data).
"""

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln

torch = pytest.importorskip("torch")


def _torch_t(values, dtype):
    return lt.LoDTensor(torch.tensor(values, dtype=dtype), [[0, 1, len(values)]])


def _same(got, want):
    assert isinstance(got, lt.LoDTensor) and got.lod == [[0, 1, 4]]
    assert got.data.dtype == want.dtype, (got.data.dtype, want.dtype)
    assert torch.equal(got.data, want) or torch.allclose(got.data, want, equal_nan=True), (got.data, want)


# -- torch data: a number operand keeps its value (torch's wrapped number), not the data's dtype ----------------


@pytest.mark.parametrize(("dtype", "op"), [
    (torch.uint8, lambda x: x / -1),  # was [0, 1/255, ...]: -1 became uint8 255 before the division
    (torch.uint8, lambda x: -1 / x),
    (torch.uint8, lambda x: x / np.int64(-1)),
    (torch.int8, lambda x: x + 300),  # was RuntimeError "value cannot be converted to type int8 without overflow"
    (torch.int8, lambda x: 300 - x),
    (torch.int8, lambda x: x / 300),
    (torch.int32, lambda x: x * 2**40),
    (torch.int8, lambda x: x < 300),
    (torch.complex64, lambda x: x ** 0),  # was nan + nanj for 0 ** 0 (a tensor exponent, not the number 0)
    (torch.complex64, lambda x: x ** 2),
], ids=["u8/-1", "-1/u8", "u8/np.int64(-1)", "i8+300", "300-i8", "i8/300", "i32*2**40", "i8<300", "c64**0",
        "c64**2"])
def test_torch_number_operands_are_read_as_torch_reads_them(dtype, op):
    values = [0, 1, 2, 5]
    _same(op(_torch_t(values, dtype)), op(torch.tensor(values, dtype=dtype)))


@pytest.mark.parametrize(("dtype", "op"), [
    (torch.int64, lambda x: x ** -1),
    (torch.int8, lambda x: x ** np.int64(-1)),
    (torch.int64, lambda x: np.power(x, -2) if isinstance(x, lt.LoDTensor) else torch.pow(x, -2)),
    (torch.int64, lambda x: x - True),
    (torch.int64, lambda x: False - x),
], ids=["int**-1", "int8**np.int64(-1)", "np.power(int, -2)", "int-True", "False-int"])
def test_torch_refusals_of_a_number_operand_are_kept(dtype, op):
    """torch refuses an integer to a negative integer power and a subtraction with a bool; the 0-d tensor the
    number became slipped past both (int ** -1 gave [0, 1, 0, 0])."""
    values = [0, 1, 2, 5]
    with pytest.raises(RuntimeError) as want:
        op(torch.tensor(values, dtype=dtype))
    with pytest.raises(RuntimeError) as got:
        op(_torch_t(values, dtype))
    assert str(got.value) == str(want.value)


def test_torch_in_place_operator_with_a_number_wraps_as_torch():
    t, data = _torch_t([0, 1, 2, 5], torch.int8), torch.tensor([0, 1, 2, 5], dtype=torch.int8)
    t += 300
    data += 300
    assert t.data.tolist() == data.tolist() == [44, 45, 46, 49]


@pytest.mark.parametrize("op", [lambda s, x: s < x, lambda s, x: s == x, lambda s, x: s >= x])
@pytest.mark.parametrize("number", [np.int64(-1), np.float64(2.0)])
def test_numpy_scalar_compared_with_torch_data(op, number):
    """np.int64(-1) < t (torch data): NumPy hands the scalar over as a 0-d array, which was refused as
    "cannot combine 'numpy' and 'torch' arrays" while t > np.int64(-1) and np.int64(-1) + t worked."""
    values = [0, 1, 2, 5]
    got = op(number, _torch_t(values, torch.float32))
    _same(got, op(number, torch.tensor(values, dtype=torch.float32)))


# -- NumPy functions writing into torch data they can only see as a copy -------------------------------------


_WRITES = {
    "copyto": lambda t: np.copyto(t, 1.0),
    "copyto dst=": lambda t: np.copyto(dst=t, src=1.0),
    "clip out=": lambda t: np.clip(_torch_t([3.0, 4.0, 5.0, 6.0], torch.float32), 0.0, 1.0, out=t),
    "putmask": lambda t: np.putmask(t, np.ones(4, bool), 1.0),
    "put": lambda t: np.put(t, [0, 1], 1.0),
    "put a=": lambda t: np.put(a=t, ind=[0, 1], v=1.0),
    "place": lambda t: np.place(t, np.ones(4, bool), [1.0]),
    "put_along_axis": lambda t: np.put_along_axis(t, np.array([0, 1]), 1.0, axis=0),
}


@pytest.mark.parametrize("write", _WRITES.values(), ids=_WRITES.keys())
def test_numpy_writes_into_bfloat16_data_are_refused_not_lost(write):
    """NumPy has no bfloat16: np.asarray(t) is a float32 copy, so np.copyto(t, 1.0), np.clip(..., out=t),
    np.put(t, ...) wrote into that copy and returned as if done, t unchanged (the same for CUDA data)."""
    t = _torch_t([0.0, 0.0, 0.0, 0.0], torch.bfloat16)
    with pytest.raises(TypeError, match=r"numpy\.\w+: (dst|out|a|arr)= is a LoDTensor of torch\.bfloat16 data "
                                        r"on cpu, which NumPy cannot write in place"):
        write(t)
    assert t.data.tolist() == [0.0] * 4


@pytest.mark.parametrize("write", _WRITES.values(), ids=_WRITES.keys())
def test_numpy_writes_into_torch_float32_data_reach_it(write):
    t = _torch_t([0.0, 0.0, 0.0, 0.0], torch.float32)
    write(t)
    assert t.data[:2].tolist() == [1.0, 1.0]


def test_numpy_write_into_data_that_requires_grad_is_refused():
    """np.copyto(t, 1.0) overwrote a leaf requiring grad behind autograd's back (torch refuses in-place
    writes to such a leaf)."""
    t = lt.LoDTensor(torch.zeros(4, requires_grad=True), [[0, 1, 4]])
    with pytest.raises(RuntimeError, match="requires grad"):
        np.copyto(t, 1.0)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        t.data.copy_(torch.ones(4))  # torch's own refusal
    assert t.data.tolist() == [0.0] * 4


def test_array_copy_false_refuses_data_numpy_can_only_copy():
    """np.asarray(t, copy=False) of bfloat16 data returned a float32 copy: NumPy 2's copy=False must not copy."""
    t = _torch_t([0.0, 1.0, 2.0, 3.0], torch.bfloat16)
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.asarray(t, copy=False)
    assert np.asarray(t).dtype == np.float32  # a copy where one is allowed
    f = _torch_t([0.0, 1.0, 2.0, 3.0], torch.float32)
    view = np.asarray(f, copy=False)
    view[0] = 7.0
    assert f.data[0].item() == 7.0  # float32 data: NumPy's view of its memory


# -- membership ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("lod", [[[0, 3, 6]], [[0, 0, 6]], [[0, 1, 2, 3, 4, 5, 6]]])
def test_in_is_elementwise_as_for_arrays(backend, lod):
    """2.0 in t asked each sequence's truth value: True for 1-row sequences, a ValueError "truth value of a
    LoDTensor of 3 elements is ambiguous" for longer (or empty) ones; NumPy and torch: any element equal."""
    data = np.arange(6.0)
    t = lt.LoDTensor(data if backend == "numpy" else torch.from_numpy(data), lod)
    for value in (2.0, 7.0, np.float32(5)):
        assert (value in t) is (value in data) is (value in torch.from_numpy(data))


# -- NestedTensor: out= with a None entry --------------------------------------------------------------------


def test_nested_two_output_ufunc_with_one_none_out():
    """np.divmod(nt, 2, out=(q, None)) raised ShapeError; NumPy fills q and returns a new array for the None."""
    q = ln.nested_tensor([np.zeros(2), np.zeros(1)])
    got_q, got_r = np.divmod(ln.nested_tensor([np.array([1.0, 2.0]), np.array([3.0])]), 2, out=(q, None))
    want_q, want_r = np.divmod(np.array([1.0, 2.0, 3.0]), 2)
    assert got_q is q and isinstance(got_r, ln.NestedTensor)
    assert np.concatenate(q.to_tensor_list()).tolist() == want_q.tolist()
    assert np.concatenate(got_r.to_tensor_list()).tolist() == want_r.tolist()


@pytest.mark.gpu
def test_numpy_writes_into_cuda_data_are_refused_not_lost():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    t = lt.LoDTensor(torch.zeros(4, device="cuda"), [[0, 1, 4]])
    for write in (lambda: np.copyto(t, 1.0), lambda: np.clip(t, 0, 1, out=t), lambda: np.put(t, [0], 1.0)):
        with pytest.raises(TypeError, match="NumPy cannot write in place"):
            write()
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.asarray(t, copy=False)
    assert t.data.cpu().tolist() == [0.0] * 4


# -- gufuncs with axes= / axis=: where the core dims are decides whose rows the result has ---------------------

_W = np.arange(9.0).reshape(3, 3)
_GUFUNC_CALLS = {  # call on (t, t3) -> whether the result's dim 0 is t's rows
    "vecdot axis=0": (lambda t, t3: np.vecdot(t, np.ones(3), axis=0), False),  # rows contracted: columns remain
    "vecdot axis=-1": (lambda t, t3: np.vecdot(t, np.ones(3), axis=-1), True),
    "vecdot axis=1 keepdims": (lambda t, t3: np.vecdot(t, np.ones((3, 3)), axis=1, keepdims=True), True),
    "matmul t core (1, 0)": (lambda t, t3: np.matmul(t, _W, axes=[(1, 0), (0, 1), (1, 0)]), False),
    "matmul default axes spelled out": (lambda t, t3: np.matmul(t, _W, axes=[(-2, -1), (-2, -1), (-2, -1)]), True),
    "matmul t as b, its m at dim 0": (lambda t, t3: np.matmul(_W, t, axes=[(0, 1), (1, 0), (1, 0)]), True),
    "matmul t as b, n in front": (lambda t, t3: np.matmul(_W, t, axes=[(0, 1), (1, 0), (0, 1)]), False),
    "matmul stack, out core in front": (lambda t, t3: np.matmul(t3, _W, axes=[(1, 2), (0, 1), (0, 1)]), False),
    "matmul stack, loop dim first": (lambda t, t3: np.matmul(t3, _W, axes=[(1, 2), (0, 1), (1, 2)]), True),
    "matmul stack, rows as n": (lambda t, t3: np.matmul(t3, _W, axes=[(0, 1), (0, 1), (0, 1)]), True),
    "matvec core (1, 0)": (lambda t, t3: np.matvec(t3, np.ones(3), axes=[(1, 0), (0,), (0,)]), False),
}


@pytest.mark.parametrize(("call", "keeps"), _GUFUNC_CALLS.values(), ids=_GUFUNC_CALLS.keys())
def test_gufunc_axes_decide_whose_rows_the_result_has(call, keeps):
    """np.vecdot(t, v, axis=0) sums over t's rows: result[j] belongs to column j, but it came back under t's
    lod (the core dims were taken to be the last ones whatever axes= / axis= said)."""
    t = lt.LoDTensor(np.arange(9.0).reshape(3, 3), [[0, 1, 3]])
    t3 = lt.LoDTensor(np.arange(27.0).reshape(3, 3, 3), [[0, 1, 3]])
    got = call(t, t3)
    assert isinstance(got, lt.LoDTensor) is keeps
    if keeps:
        assert got.lod == [[0, 1, 3]]
    np.testing.assert_array_equal(np.asarray(got), call(t.data, t3.data))


def test_gufunc_out_under_the_lod_is_refused_where_axes_move_the_rows():
    t = lt.LoDTensor(np.arange(9.0).reshape(3, 3), [[0, 1, 3]])
    o = lt.LoDTensor(np.full(3, -1.0), [[0, 1, 3]])
    with pytest.raises(lt.errors.LoDError, match="out="):
        np.vecdot(t, np.ones(3), axis=0, out=o)  # column sums written under the rows' lod
    assert o.data.tolist() == [-1.0] * 3
    assert np.vecdot(t, np.ones(3), axis=-1, out=o) is o and o.data.tolist() == [3.0, 12.0, 21.0]


@pytest.mark.parametrize("call", [
    lambda t, m: np.place(t, m, [9.0]),
    lambda t, m: np.place(t, mask=m, vals=[9.0]),
    lambda t, m: np.place(arr=t, mask=m, vals=[9.0]),
], ids=["by-position", "mask-by-name", "all-by-name"])
def test_place_refuses_a_mask_of_another_lod_as_putmask_does(call):
    """np.putmask(t, m, 9) with m under another lod was refused, np.place(t, m, [9]) wrote m's rows over t's."""
    t = lt.LoDTensor(np.zeros((3, 2)), [[0, 1, 3]])
    m = lt.LoDTensor(np.array([[1, 1], [0, 0], [0, 0]], bool), [[0, 2, 3]])
    with pytest.raises(lt.errors.LoDError, match=r"numpy\.place: arr= holds lod"):
        call(t, m)
    assert t.data.tolist() == [[0.0, 0.0]] * 3
    call(t, m.data)  # a plain mask: NumPy's own call
    assert t.data.tolist() == [[9.0, 9.0], [0.0, 0.0], [0.0, 0.0]]
    call(t, lt.LoDTensor(m.data, [[0, 1, 3]]))  # the same lod


@pytest.mark.parametrize("axes", [[(0, 1)], [(0, 1), (0, 1), (0,)], "x"], ids=["too-few", "short-entry", "not-a-list"])
def test_gufunc_axes_numpy_refuses_give_numpys_error_with_a_lod_out(axes):
    """The out= check read axes= before NumPy did: IndexError / "invalid literal for int()" / a LoDError
    for keywords NumPy itself refuses; now NumPy's error, with nothing written."""
    t = lt.LoDTensor(np.arange(9.0).reshape(3, 3), [[0, 1, 3]])
    o = lt.LoDTensor(np.full((3, 3), -1.0), [[0, 1, 3]])
    with pytest.raises(Exception) as want:
        np.matmul(t.data, np.eye(3), out=o.data.copy(), axes=axes)
    with pytest.raises(type(want.value)) as got:
        np.matmul(t, np.eye(3), out=o, axes=axes)
    assert str(got.value) == str(want.value)
    assert (o.data == -1).all()
