"""NumPy ufuncs on LoDTensors: a result keeps (or is written under) a lod only when its rows are the operands' rows."""

import numpy as np
import pytest

from lodtensor import LoDTensor
from lodtensor.errors import LoDError

LOD = [[0, 2, 2, 5]]


def _t(*shape, lod=LOD):
    return LoDTensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape), lod)


KEEP = {
    "scalar": lambda t: t * 2,
    "row vector": lambda t: t + np.arange(2.0),
    "same rows": lambda t: t * np.ones((5, 2)),
    "column": lambda t: t + np.ones((5, 1)),
    "both lod": lambda t: np.add(t, t),
    "two outputs": lambda t: np.divmod(t, 3)[1],
    "matmul weights": lambda t: t @ np.ones((2, 4)),
    "matmul vector": lambda t: np.matmul(t, np.ones(2)),
    "comparison": lambda t: t > 3,
}
PLAIN = {
    "leading broadcast": lambda t: t + np.ones((3, 5, 2)),
    "leading broadcast of equal size": lambda t: t + np.ones((5, 5, 2)),
    "reverse operand order": lambda t: np.ones((5, 5, 2)) - t,
    "rows contracted": lambda t: np.ones((4, 5)) @ t,
    "rows contracted, square": lambda t: np.ones((5, 5)) @ t,
    "batched matmul in front": lambda t: np.matmul(t, np.ones((3, 2, 2))),
    "reduce axis 0": lambda t: np.add.reduce(t, axis=0),
    "reduce axis 1": lambda t: np.add.reduce(t, axis=1),
    "accumulate": np.add.accumulate,
    "outer": lambda t: np.multiply.outer(t, np.arange(3.0)),
    "reduceat": lambda t: np.add.reduceat(t, [0, 2]),
}


@pytest.mark.parametrize("call", KEEP.values(), ids=KEEP.keys())
def test_results_with_the_operands_rows_keep_the_lod(call):
    t = _t(5, 2)
    out = call(t)
    assert isinstance(out, LoDTensor) and out.lod() == LOD
    np.testing.assert_array_equal(out.data, call(t.data))


@pytest.mark.parametrize("call", PLAIN.values(), ids=PLAIN.keys())
def test_results_whose_rows_moved_are_plain_arrays(call):
    t = _t(5, 2)
    out = call(t)
    assert not isinstance(out, LoDTensor)
    np.testing.assert_array_equal(out, call(t.data))


def test_a_one_row_tensor_broadcast_to_more_rows_is_plain():
    one = _t(1, 2, lod=[[0, 1]])
    assert not isinstance(one + np.ones((5, 2)), LoDTensor)
    assert not isinstance(np.ones((1, 2)) + LoDTensor(np.ones(1), [[0, 1]]), LoDTensor)


def test_stacks_of_matrices_keep_their_rows_through_matmul():
    t3 = _t(5, 2, 3)
    out = np.ones((4, 2)) @ t3
    assert isinstance(out, LoDTensor) and out.lod() == LOD and out.data.shape == (5, 4, 3)
    assert isinstance(t3 @ np.ones((3, 2)), LoDTensor)
    out = _t(5, 2) @ np.ones((5, 2, 3))  # the matrix t is broadcast against a stack: its rows become dim 1
    assert not isinstance(out, LoDTensor) and out.shape == (5, 5, 3)


def test_a_tensor_without_lod_is_an_array():
    bare = LoDTensor(np.ones((5, 2)))
    assert (_t(5, 2) + bare).lod() == LOD
    assert isinstance(bare + np.ones((3, 5, 2)), LoDTensor)  # no lod to lose


def test_different_lods_on_aligned_operands_raise():
    with pytest.raises(LoDError, match="different lods"):
        _t(5, 2) + _t(5, 2, lod=[[0, 1, 5]])


class TestOut:
    def test_same_lod_is_written_and_returned(self):
        t = _t(5, 2)
        out = LoDTensor(np.zeros((5, 2)), LOD)
        assert np.multiply(t, 2, out=out) is out
        np.testing.assert_array_equal(out.data, t.data * 2)

    @pytest.mark.parametrize("call, out", [
        (lambda t, o: np.add(t, 1, out=o), LoDTensor(np.full((5, 2), -1.0), [[0, 3, 5]])),
        (lambda t, o: np.add(LoDTensor(np.ones((1, 2)), [[0, 1]]), np.ones((5, 2)), out=o),
         LoDTensor(np.full((5, 2), -1.0), LOD)),
        (lambda t, o: np.add(LoDTensor(np.ones(5), LOD), np.ones((5, 5)), out=o),
         LoDTensor(np.full((5, 5), -1.0), LOD)),
        (lambda t, o: np.add.reduce(t, axis=1, out=o), LoDTensor(np.full(5, -1.0), [[0, 3, 5]])),
        (lambda t, o: np.add.accumulate(t, out=o), LoDTensor(np.full((5, 2), -1.0), LOD)),
        (lambda t, o: np.add.outer(t.data[:, 0], np.ones(2), out=o), LoDTensor(np.full((5, 2), -1.0), LOD)),
        (lambda t, o: np.sum(t, axis=0, out=o[:2]), LoDTensor(np.full((5, 2), -1.0), LOD)),
        (lambda t, o: np.take(t, [1, 0, 2, 3, 4], axis=0, out=o), LoDTensor(np.full((5, 2), -1.0), LOD)),
        (lambda t, o: np.cumsum(t, out=o), LoDTensor(np.full((5, 2), -1.0), LOD)),
    ], ids=["other lod", "one row broadcast", "leading broadcast", "reduce other lod", "accumulate over rows",
            "outer", "sum over rows", "take of rows", "cumsum flattened"])
    def test_refused_before_anything_is_written(self, call, out):
        with pytest.raises(LoDError, match="out="):
            call(_t(5, 2), out)
        assert (out.data == -1).all()

    @pytest.mark.parametrize("call", [
        lambda t, o: np.add.reduce(t, axis=1, out=o),
        lambda t, o: np.maximum.reduce(t, axis=-1, out=o),
        lambda t, o: np.sum(t, axis=1, out=o),
    ], ids=["add.reduce", "maximum.reduce", "np.sum"])
    def test_a_reduction_along_the_row_dims_writes_under_the_lod(self, call):
        """A ufunc method that keeps the rows takes out= with the lod, as np.sum(t, axis=1, out=o) does."""
        t, o = _t(5, 2), LoDTensor(np.zeros(5), LOD)
        assert call(t, o) is o
        want = (t.data.max if "max" in repr(call) else t.data.sum)(axis=1)
        np.testing.assert_array_equal(o.data, call(t, np.zeros(5)))
        assert o.lod() == t.lod() and want.shape == o.data.shape

    def test_the_out_buffer_is_untouched(self):
        t = _t(5, 2)
        out = LoDTensor(np.full((5, 2), -1.0), [[0, 3, 5]])
        with pytest.raises(LoDError, match=r"out= holds lod .*0, 3, 5.* operands have lod"):
            np.add(t, 1, out=out)
        assert (out.data == -1).all() and out.lod() == [[0, 3, 5]]
        t2 = _t(5, 2)
        with pytest.raises(LoDError):
            t2 += _t(5, 2, lod=[[0, 3, 5]])
        np.testing.assert_array_equal(t2.data, _t(5, 2).data)

    def test_plain_out_and_lodless_out_are_fine(self):
        t = _t(5, 2)
        buf = np.zeros((5, 2))
        assert np.add(t, 1, out=buf) is buf
        bare = LoDTensor(np.zeros(5))
        np.add.reduce(t, axis=1, out=bare)
        np.testing.assert_array_equal(bare.data, t.data.sum(1))
        rows = LoDTensor(np.zeros((5, 2)), LOD)
        assert np.add(np.ones((5, 2)), 1, out=rows) is rows  # plain operands: their rows are positional

    def test_two_outputs(self):
        t = _t(5, 2)
        q, r = LoDTensor(np.zeros((5, 2)), LOD), LoDTensor(np.zeros((5, 2)), LOD)
        assert np.divmod(t, 3, out=(q, r)) == (q, r)
        with pytest.raises(LoDError):
            np.divmod(t, 3, out=(q, LoDTensor(np.zeros((5, 2)), [[0, 5]])))


def test_torch_data_follows_the_same_rule():
    torch = pytest.importorskip("torch")
    t = LoDTensor(torch.arange(10.0).reshape(5, 2), [[0, 2, 5]])
    assert isinstance(t + torch.ones(2), LoDTensor)
    out = t + torch.ones(5, 5, 2)
    assert not isinstance(out, LoDTensor) and isinstance(out, torch.Tensor) and out.shape == (5, 5, 2)
    assert not isinstance(np.ones((5, 5)) @ LoDTensor(np.ones((5, 2)), [[0, 2, 5]]), LoDTensor)


@pytest.mark.gpu
def test_device_data_follows_the_same_rule():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    t = LoDTensor(torch.arange(10.0, device="cuda").reshape(5, 2), [[0, 2, 5]])
    assert (t * 2).lod() == [[0, 2, 5]] and (t * 2).data.is_cuda
    assert not isinstance(t + torch.ones(5, 5, 2, device="cuda"), LoDTensor)
    with pytest.raises(LoDError, match="out="):
        np.add(t, 1, out=LoDTensor(torch.zeros(5, 2, device="cuda"), [[0, 1, 5]]))


@pytest.mark.gpu
def test_cupy_data_follows_the_same_rule():
    cupy = pytest.importorskip("cupy")
    t = LoDTensor(cupy.arange(10.0).reshape(5, 2), [[0, 2, 5]])
    assert (t + cupy.ones(2)).lod() == [[0, 2, 5]]
    assert not isinstance(t + cupy.ones((5, 5, 2)), LoDTensor)
    assert not isinstance(cupy.ones((5, 5)) @ t, LoDTensor)
    out = LoDTensor(cupy.full((5, 2), -1.0), [[0, 3, 5]])
    with pytest.raises(LoDError, match="out="):
        np.add(t, 1, out=out)
    assert bool((out.data == -1).all())
