"""NumPy's API on LoDTensor and NestedTensor, against NumPy on the same arrays (a differential probe's
confirmed findings): nested operands, aliasing ufunc results on torch data, out= written before a refusal,
masked arrays, ufunc methods with out=, and NumPy's functions on a NestedTensor."""

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor.errors import LoDError

LOD = [[0, 1, 3]]


def _t():
    return lt.LoDTensor(np.arange(6.0).reshape(3, 2), LOD)


# -- a LoDTensor with a nested tensor ------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda t, nt: t * nt, np.maximum, lambda t, nt: t > nt, lambda t, nt: t == nt,
    lambda t, nt: lt.LoDTensor(np.ones((1, 2)), [[0, 1]]) + nt,
], ids=["mul", "maximum", "greater", "equal", "one-row bias"])
def test_a_lod_tensor_and_a_nested_tensor_are_refused_naming_both(call):
    """Before: a LoDTensor whose data was the NestedTensor (every later read failed), or, for a one-row
    LoDTensor, a NestedTensor with the LoDTensor's rows read as a dense bias (the other order raised)."""
    nt = ln.nested_tensor([np.ones((2, 2)), np.ones((0, 2)), np.ones((4, 2))])
    t = lt.LoDTensor(np.arange(3.0).reshape(3, 1, 1), [[0, 1, 3]])
    with pytest.raises(TypeError, match="a LoDTensor and a nested tensor .*NestedTensor.*to_lod_tensor"):
        call(t, nt)


# -- ufunc results of torch data are new memory, as NumPy's ------------------------------------------
@pytest.mark.parametrize("ufunc", [np.positive, np.conjugate, np.conj, lambda t: +t], ids=["positive", "conjugate",
                                                                                         "conj", "unary plus"])
@pytest.mark.parametrize("complex_data", [False, True])
def test_torch_data_ufunc_results_do_not_alias_the_operand(ufunc, complex_data):
    torch = pytest.importorskip("torch")
    data = torch.tensor([1 + 1j, 2 - 1j, 3 + 0j]) if complex_data else torch.tensor([1.0, 2.0, 3.0])
    t = lt.LoDTensor(data.clone(), LOD)
    r = ufunc(t)
    want = np.asarray(ufunc(lt.LoDTensor(data.numpy(), LOD)).data)
    assert not r.data.is_conj() and not r.data.is_neg()
    np.testing.assert_array_equal(r.data.numpy(), want)
    r += 1
    torch.testing.assert_close(t.data, data)  # before: positive and conj(real) returned t's own tensor


# -- out= is not written when the call is refused ---------------------------------------------------------
@pytest.mark.parametrize("make_out", [lambda: np.full((3, 2), -1.0), lambda: lt.LoDTensor(np.full((3, 2), -1.0))],
                         ids=["ndarray", "LoDTensor without lod"])
def test_operands_of_two_lods_are_refused_before_out_is_written(make_out):
    out = make_out()
    other = lt.LoDTensor(np.ones((3, 2)), [[0, 2, 3]])
    with pytest.raises(LoDError, match="different lods"):
        np.add(_t(), other, out=out)
    assert (np.asarray(out) == -1).all()


# -- masked arrays and other ndarray subclasses -------------------------------------------------------------
def test_a_masked_array_is_refused_as_data_and_as_an_operand():
    """Before: kept as a LoDTensor's data, its mask dropped by every read (np.sum gave 21, NumPy 14)."""
    masked = np.ma.masked_array(np.ones((3, 2)), mask=[[0, 1], [0, 0], [1, 0]])
    with pytest.raises(TypeError, match="data is a NumPy masked array.*filled"):
        lt.LoDTensor(masked, LOD)
    t = _t()
    with pytest.raises(TypeError, match="numpy.add: a LoDTensor holds no mask"):
        t + masked  # noqa: B018
    np.testing.assert_array_equal((t + masked.filled(0)).data, t.data + masked.filled(0))


def test_a_matrix_becomes_plain_rows():
    t = lt.LoDTensor(np.matrix(np.arange(6.0).reshape(3, 2)), LOD)
    assert type(t.data) is np.ndarray
    r = _t() * np.matrix(np.full((3, 2), 2.0))  # elementwise, as np.multiply of the arrays
    assert type(r.data) is np.ndarray and r.lod() == LOD
    np.testing.assert_array_equal(r.data, np.arange(6.0).reshape(3, 2) * 2)


# -- ufunc methods and functions with out= ---------------------------------------------------------------------
@pytest.mark.parametrize("method, function, kwargs", [
    (np.add.reduce, np.sum, {"axis": 1}), (np.add.accumulate, np.cumsum, {"axis": 1}),
    (np.maximum.reduce, np.max, {"axis": -1}), (np.multiply.reduce, np.prod, {"axis": 1}),
    (np.add.reduce, np.sum, {"axis": 1, "keepdims": True}),
], ids=["add.reduce", "add.accumulate", "maximum.reduce", "multiply.reduce", "keepdims"])
def test_ufunc_methods_that_keep_the_rows_take_out_with_the_lod(method, function, kwargs):
    """Before: refused ("its rows are not rows of the operands") where np.sum(t, axis=1, out=o) worked."""
    t = _t()
    want = function(t.data, **kwargs)
    o1, o2 = lt.LoDTensor(np.zeros(want.shape), LOD), lt.LoDTensor(np.zeros(want.shape), LOD)
    assert method(t, out=o1, **kwargs) is o1 and function(t, out=o2, **kwargs) is o2
    np.testing.assert_array_equal(o1.data, want)
    np.testing.assert_array_equal(o2.data, want)
    assert o1.lod() == o2.lod() == LOD


@pytest.mark.parametrize("call", [
    lambda t, o: np.sum(t, axis=0, out=o),
    lambda t, o: np.take(t, [1, 0, 2], axis=0, out=o),
    lambda t, o: np.cumsum(t, out=o),
    lambda t, o: np.add.reduce(t, axis=0, keepdims=True, out=o),
    lambda t, o: np.add.reduce(t, axis=1, out=lt.LoDTensor(o.data[:, 0], [[0, 2, 3]])),
], ids=["sum over rows", "take of rows", "cumsum flattened", "reduce over rows", "reduce under another lod"])
def test_out_with_a_lod_is_refused_where_the_rows_move(call):
    """Before: np.sum(t, axis=0, out=o) and np.take(t, [1, 0], axis=0, out=o) wrote column sums and
    reordered rows under the row lod."""
    o = lt.LoDTensor(np.full((3, 2), -1.0), LOD)
    with pytest.raises(LoDError, match="out="):
        call(_t(), o)
    assert (o.data == -1).all()


def test_out_with_a_lod_along_the_row_dims_still_works():
    t, o = _t(), lt.LoDTensor(np.zeros((3, 2)), LOD)
    assert np.take(t, [1, 0], axis=1, out=o) is o
    np.testing.assert_array_equal(o.data, t.data[:, ::-1])
    assert np.clip(t, 1, 4, out=o) is o and o.lod() == LOD


# -- NumPy's functions and gufuncs on a NestedTensor --------------------------------------------------------
def _nt(kind="numpy"):
    comps = [np.arange(6.0).reshape(2, 3), np.arange(3.0).reshape(1, 3) - 1]
    if kind == "torch":
        torch = pytest.importorskip("torch")
        comps = [torch.from_numpy(c) for c in comps]
    return ln.nested_tensor(comps, layout="jagged")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_numpy_reductions_run_the_nested_ones(kind):
    nt = _nt(kind)
    dense = [np.asarray(c) for c in _nt().unbind()]
    assert float(np.sum(nt)) == sum(c.sum() for c in dense)
    np.testing.assert_array_equal(np.asarray(np.sum(nt, axis=1)), [c.sum(0) for c in dense])
    np.testing.assert_array_equal(np.asarray(np.max(nt, axis=1)), [c.max(0) for c in dense])
    got = np.mean(nt, axis=-1, keepdims=True)
    assert [np.asarray(c).tolist() for c in got.unbind()] == [c.mean(-1, keepdims=True).tolist() for c in dense]
    assert bool(np.any(nt)) and not bool(np.all(nt > 0))
    assert str(np.sum(nt, dtype=np.float32).dtype).endswith("float32")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_numpy_structure_functions_answer_for_the_nested_tensor(kind):
    """Before: np.array_equal(nt, nt) was False (NumPy swallowed the refusal); np.size(nt) was a method."""
    nt = _nt(kind)
    assert np.array_equal(nt, nt) and np.array_equal(nt, nt * 1)
    assert not np.array_equal(nt, nt * 2)
    assert not np.array_equal(nt, ln.nested_tensor([nt.unbind()[0]], layout="jagged"))  # another structure
    assert np.ndim(nt) == 3 and np.size(nt) == 9 and np.size(nt, 0) == 2 and np.shape(nt) == nt.shape
    assert np.concatenate([nt, nt], axis=-1).shape[-1] == 6 and np.stack([nt, nt], axis=1).shape[1] == 2
    eye = np.eye(3) if kind == "numpy" else pytest.importorskip("torch").eye(3, dtype=nt.dtype)
    np.testing.assert_array_equal(np.asarray(np.matmul(nt, eye).values()), np.asarray(nt.values()))


@pytest.mark.parametrize("call, match", [
    (lambda nt: np.allclose(nt, nt), "numpy.allclose is not supported on a NestedTensor"),
    (lambda nt: np.array_equiv(nt, nt), "numpy.array_equiv"),
    (lambda nt: np.sum(nt, out=np.zeros(())), "numpy.sum is not supported on a NestedTensor with out="),
    (lambda nt: np.fill_diagonal(nt, 0), "numpy.fill_diagonal"),
    (lambda nt: np.vecdot(nt, np.ones(3)), r"numpy.vecdot \(signature"),
    (lambda nt: np.matmul(nt, np.eye(3), out=None, axes=[(-2, -1)] * 3), "numpy.matmul with out= or other"),
], ids=["allclose", "array_equiv", "sum out", "fill_diagonal", "vecdot", "matmul axes"])
def test_other_numpy_functions_are_refused_by_name(call, match):
    nt = _nt()
    before = np.asarray(nt.values()).copy()
    with pytest.raises(TypeError, match=match):
        call(nt)
    np.testing.assert_array_equal(np.asarray(nt.values()), before)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_numpy_functions_read_their_arguments_by_position_too(kind):
    """np.max's third positional parameter is out= and its fourth keepdims (np.sum's third is dtype=): a first
    version read every reduction as np.sum's signature, and np.concatenate's positional out= was ignored."""
    nt = _nt(kind)
    assert tuple(np.max(nt, -1, None, True).shape)[2:] == (1,)
    assert tuple(np.any(nt, -1, None, True).shape)[2:] == (1,)
    assert str(np.sum(nt, -1, np.float32).dtype).endswith("float32")
    with pytest.raises(TypeError, match="numpy.max is not supported on a NestedTensor with out="):
        np.max(nt, 1, np.zeros(3))
    with pytest.raises(TypeError, match="numpy.concatenate is not supported on a NestedTensor with out="):
        np.concatenate([nt, nt], -1, nt)
