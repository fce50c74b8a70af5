"""Bugs found by a hunt of LoDTensor's NumPy protocol, each checked against NumPy on the flat data."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.errors import LoDError


def _t(lod=((0, 2, 5),)):
    return lt.LoDTensor(np.arange(5), [list(level) for level in lod])


def test_two_outputs_with_one_none_out_return_a_new_array_for_the_none():
    given = np.empty(5, np.int64)
    q, r = np.divmod(_t(), 2, out=(given, None))
    want_q, want_r = np.divmod(np.arange(5), 2)
    assert q is given and q.tolist() == want_q.tolist()
    assert isinstance(r, lt.LoDTensor) and r.lod() == [[0, 2, 5]] and r.data.tolist() == want_r.tolist()


@pytest.mark.parametrize(("method", "out"), [("accumulate", lambda: lt.LoDTensor(np.empty(5, np.int64))),
                                           ("reduce", lambda: np.empty((), np.int64))])
def test_ufunc_methods_return_the_out_object(method, out):
    o = out()
    got = getattr(np.add, method)(_t(), out=o)
    assert got is o
    assert np.asarray(got).tolist() == getattr(np.add, method)(np.arange(5)).tolist()


def test_array_function_returns_the_out_lodtensor():
    t = _t()
    assert np.clip(t, 1, 3, out=t) is t
    assert t.data.tolist() == [1, 1, 2, 3, 3] and t.lod() == [[0, 2, 5]]


def test_where_mask_lod_is_checked_against_every_operand_and_out():
    t, plain = _t(), lt.LoDTensor(np.arange(5))
    mask = lt.LoDTensor(np.arange(5) > 2, [[0, 3, 5]])
    buf = np.zeros(5, np.int64)
    with pytest.raises(LoDError, match=r"where=.*\[\[0, 3, 5\]\].*\[\[0, 2, 5\]\]"):
        np.add(plain, t, out=buf, where=mask)
    assert buf.tolist() == [0] * 5
    out = lt.LoDTensor(np.zeros(5, np.int64), [[0, 2, 5]])
    with pytest.raises(LoDError, match="where="):
        np.add(plain, 1, out=out, where=mask)
    assert out.data.tolist() == [0] * 5


@pytest.mark.parametrize(("op", "fill"), [("__eq__", False), ("__ne__", True)])
def test_comparison_without_a_loop_is_elementwise_like_ndarray(op, fill):
    t = _t()
    want = getattr(np.arange(5), op)("a")
    got = getattr(t, op)("a")
    assert isinstance(got, lt.LoDTensor) and got.lod() == [[0, 2, 5]]
    assert got.dtype == want.dtype and got.data.tolist() == want.tolist() == [fill] * 5


def test_other_comparison_errors_still_raise():
    with pytest.raises(LoDError):
        _t() == _t(((0, 1, 5),))  # noqa: B015


def test_array_function_refuses_an_out_of_another_lod_before_writing():
    """np.clip(t, ..., out=o) with o under another lod wrote t's rows under o's lod; now a LoDError, o intact."""
    t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    o = lt.LoDTensor(np.full((3, 2), 7.0), [[0, 2, 3]])
    for call in (lambda: np.clip(t, 0, 4, out=o), lambda: np.negative(t, out=o),
                 lambda: np.sum([t, t], axis=0, out=o), lambda: np.round(t, out=o)):
        with pytest.raises(LoDError, match="another lod"):
            call()
        assert o.data.tolist() == [[7.0, 7.0]] * 3 and o.lod == [[0, 2, 3]]
    same = lt.LoDTensor(np.zeros((3, 2)), [[0, 1, 3]])
    assert np.clip(t, 0, 4, out=same) is same and same.data[2].tolist() == [4.0, 4.0]
    plain = lt.LoDTensor(np.zeros((3, 2)))  # no lod: plain rows
    assert np.clip(t, 0, 4, out=plain) is plain
    assert np.clip(t.data, 0, 4, out=o) is o  # plain arguments: o keeps its lod

def test_copyto_and_putmask_refuse_a_destination_of_another_lod_before_writing():
    """np.copyto(dst, src) and np.putmask(a, mask, v) write into their first argument, which has no out= name:
    src's rows (mask's rows) under another lod were written silently under dst's lod."""
    dst = lt.LoDTensor(np.zeros((3, 2)), [[0, 1, 3]])
    other = lt.LoDTensor(np.ones((3, 2)), [[0, 2, 3]])
    for call, name in ((lambda: np.copyto(dst, other), "dst"), (lambda: np.copyto(dst, other, where=True), "dst"),
                       (lambda: np.putmask(dst, other > 0, 5.0), "a")):
        with pytest.raises(LoDError, match=rf"numpy\.\w+: {name}= holds lod .* another lod"):
            call()
        assert dst.data.tolist() == [[0.0, 0.0]] * 3 and dst.lod == [[0, 1, 3]]
    np.copyto(dst, lt.LoDTensor(np.ones((3, 2)), [[0, 1, 3]]))  # the same lod, a plain array, a scalar: written
    assert dst.data.tolist() == [[1.0, 1.0]] * 3
    np.copyto(dst, np.full((3, 2), 2.0))
    np.putmask(dst, dst.data > 1.5, 7.0)
    assert dst.data.tolist() == [[7.0, 7.0]] * 3 and dst.lod == [[0, 1, 3]]
    np.copyto(dst.data, other)  # a plain destination keeps no lod to protect
    assert dst.data.tolist() == [[1.0, 1.0]] * 3



def test_torch_data_takes_lists_as_numpy_does_and_names_other_operands():
    """t + [1, 2] on torch data raised torch's result_type() overload TypeError; t == None too."""
    torch = pytest.importorskip("torch")
    t = lt.LoDTensor(torch.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    want = (np.arange(6.0).reshape(3, 2) + [1, 2]).tolist()
    for got in (t + [1, 2], [1, 2] + t, t + (1, 2), t + [[1, 2]] * 3):
        assert isinstance(got, lt.LoDTensor) and got.lod == [[0, 1, 3]] and got.data.tolist() == want
    assert (t * [True, False]).data.tolist() == [[0.0, 0.0], [2.0, 0.0], [4.0, 0.0]]
    assert not (t == None).data.any() and (t != None).data.all()  # noqa: E711 - ndarray's meaning
    assert not (t == "a").data.any()
    assert (t + [0.5, 1.5]).data.dtype == torch.float32  # torch's reading of a list: no silent float64
    assert (t.with_data(t.data.double()) + [0.5, 1.5]).data.dtype == torch.float64
    with pytest.raises(TypeError, match=r"got \[1180591620717411303424, 1\] of type list"):
        t + [2**70, 1]
    for bad in ("a", None, [1, "a"], object()):
        with pytest.raises(TypeError, match="must be a number, a tensor, an array or a list of numbers"):
            t + bad
