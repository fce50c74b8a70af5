"""Second differential pass over the sequence ops against real PaddlePaddle 2.6.2: what
test_paddle_sequence_ops.py leaves out.

- **Gradients.** For every differentiable sequence op, the gradient of ``sum(out * w)`` (random
  ``w``) with respect to each float input: Paddle's backward operators (``paddle.static.gradients``
  in a static Program) against torch autograd through lodtensor, float32 and float64, on lods with
  empty sequences at the start, middle and end, 2-level lods, rows of 1, 3 and 2x2 values.
- **int32** (registered by Paddle's expand, expand_as, pad, unpad, reverse, slice, reshape,
  scatter, enumerate kernels) with empty sequences at the edges and 3-D rows.
- **Differences found here** (docs/porting.md, "Sequence ops: differences from Paddle"): the
  float32 rounding of ``sequence_pool``'s ``pad_value`` attribute, ``edit_distance`` of several
  lod levels, ``sequence_scatter`` of inputs with rows of several dimensions, ``sequence_pad``'s
  broadcast ``pad_value`` and 0-d ``pad_value`` (Paddle: SIGSEGV), ``sequence_mask`` of a
  LoDTensor, ``lod_append`` with a ``level`` tensor that has a lod.

Run with the Paddle venv (``.venv-paddle/bin/python -m pytest tests/paddle/...``); elsewhere it
is skipped.
"""

import signal

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
torch = pytest.importorskip("torch")

from _raw import run as run_raw  # noqa: E402
from _static import OPS, attempt, crash_signal, feed_of, fresh_program, observe, paddle_tensor, run_paddle  # noqa: E402
from paddle.base import core  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.fluid import layers as L  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

FLOATS = ["float32", "float64"]


def T(values, lod=None, dtype="float32"):
    return lt.LoDTensor(np.asarray(values, dtype=dtype), lod)


def X(lod, row=(1,), dtype="float64", seed=0):
    rows = lod[-1][-1]
    return T(np.random.default_rng(seed).standard_normal((rows, *row)), lod, dtype)


# ------------------------------------------------------------------------------------------
# Gradients: Paddle's backward operators against torch autograd through lodtensor
# ------------------------------------------------------------------------------------------
def paddle_grads(op, inputs, attrs, wrt, weights, fixed=(), listed=False):
    """Paddle's ``op`` output 0 and the gradients of ``sum(out0 * weights)`` w.r.t. ``wrt``."""
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            v = {}
            for name, value in inputs.items():
                f = feed_of(value, name in fixed)
                shape = list(f.shape) if f.shape is not None else [-1, *f.row_shape]
                v[name] = paddle.static.data(name, shape=shape, dtype=f.dtype, lod_level=f.lod_level)
                v[name].stop_gradient = name not in wrt
            args = [v[name] for name in inputs]
            out = OPS[op](args, **attrs) if listed else OPS[op](*args, **attrs)
            out = out[0] if isinstance(out, (list, tuple)) else out
            w = paddle.static.data("__w", shape=list(weights.shape), dtype=weights.dtype.name)
            grads = paddle.static.gradients([paddle.sum(out * w)], [v[name] for name in wrt])
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(startup, scope=scope)
        feed = {name: paddle_tensor(value) for name, value in inputs.items()}
        feed["__w"] = weights
        got = exe.run(main, feed=feed, fetch_list=[out, *grads], scope=scope, return_numpy=False)
    return [np.array(g) for g in got]


def ours_grads(fn, inputs, wrt, weights):
    """lodtensor's ``fn(**inputs)`` on torch leaves: output 0 and the gradients of ``sum(out0 * weights)``."""
    leaves, args = {}, {}
    for name, value in inputs.items():
        data = value.numpy() if isinstance(value, lt.LoDTensor) else np.asarray(value)
        leaves[name] = torch.tensor(data, requires_grad=name in wrt)
        args[name] = lt.LoDTensor(leaves[name], value.lod()) if isinstance(value, lt.LoDTensor) else leaves[name]
    out = fn(**args)
    out = out[0] if isinstance(out, tuple) else out
    data = out.data if isinstance(out, lt.LoDTensor) else out
    (data * torch.from_numpy(weights)).sum().backward()
    return [data.detach().numpy()] + [leaves[name].grad.numpy() for name in wrt]


def check_grads(op, fn, inputs, attrs, wrt, fixed=(), listed=False):
    first = fn(**inputs)
    first = first[0] if isinstance(first, tuple) else first
    shape = tuple((first.data if isinstance(first, lt.LoDTensor) else first).shape)
    dtype = np.dtype((first.data if isinstance(first, lt.LoDTensor) else first).dtype)
    weights = np.random.default_rng(7).uniform(0.5, 1.5, shape).astype(dtype)
    theirs = paddle_grads(op, inputs, attrs, wrt, weights, fixed=fixed, listed=listed)
    mine = ours_grads(fn, inputs, wrt, weights)
    tol = 1e-5 if dtype == np.float32 else 1e-10
    for what, a, b in zip(["output", *wrt], theirs, mine):
        assert a.shape == b.shape, (what, a.shape, b.shape)
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, err_msg=f"{op}: {what}")


GRAD_LODS = [[[0, 0, 2, 5]], [[0, 2, 5, 5]], [[0, 1, 3], [0, 2, 3, 5]], [[0, 2, 4], [0, 0, 2, 3, 5]]]


def _lod_ids(lod):
    return str(lod).replace(" ", "")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("row", [(1,), (3,), (2, 2)], ids=str)
@pytest.mark.parametrize("lod", GRAD_LODS, ids=_lod_ids)
@pytest.mark.parametrize("pool_type", ["sum", "average", "sqrt", "max", "first", "last"])
def test_pool_gradient(pool_type, lod, row, dtype):
    x = X(lod, row, dtype)
    check_grads("sequence_pool", lambda input: S.sequence_pool(input, pool_type, pad_value=0.5), {"input": x},
                {"pool_type": pool_type, "pad_value": 0.5}, ["input"])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lod", GRAD_LODS, ids=_lod_ids)
def test_first_last_step_and_softmax_gradients(lod, dtype):
    x = X(lod, (2,), dtype)
    check_grads("sequence_first_step", S.sequence_first_step, {"input": x}, {}, ["input"])
    check_grads("sequence_last_step", S.sequence_last_step, {"input": x}, {}, ["input"])
    column = X(lod, (1,), dtype)
    check_grads("sequence_softmax", S.sequence_softmax, {"input": column}, {}, ["input"])
    check_grads("sequence_softmax", S.sequence_softmax, {"input": X(lod, (), dtype)}, {},
                ["input"])


ONE_LEVEL = [[[0, 0, 2, 5]], [[0, 2, 5, 5]], [[0, 1, 1, 5]]]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("row", [(1,), (3,), (2, 2)], ids=str)
@pytest.mark.parametrize("lod", ONE_LEVEL, ids=_lod_ids)
def test_row_moving_ops_gradients(lod, row, dtype):
    """reverse, pad (with and without maxlen), slice, expand (x with and without lod), expand_as,
    concat: the rows they move carry their gradient back."""
    x = X(lod, row, dtype)
    check_grads("sequence_reverse", S.sequence_reverse, {"x": x}, {}, ["x"])
    pad = np.array([0.25], dtype)
    for attrs in ({}, {"maxlen": 5}):
        check_grads("sequence_pad", lambda x, pad_value, attrs=attrs: S.sequence_pad(x, pad_value, **attrs),
                    {"x": x, "pad_value": pad}, attrs, ["x"], fixed=("pad_value",))
    lengths = np.diff(lod[0])
    offset, length = np.minimum(1, lengths), np.maximum(lengths - 1, 0)
    check_grads("sequence_slice", S.sequence_slice,
                {"input": x, "offset": T(offset.reshape(-1, 1), None, "int64"),
                 "length": T(length.reshape(-1, 1), None, "int64")}, {}, ["input"])
    y = T(np.zeros((3, 1)), [[0, 1, 3, 3]], dtype)
    check_grads("sequence_expand", S.sequence_expand, {"x": x, "y": y}, {}, ["x"])
    plain = X([[0, 3]], row, dtype, seed=1).numpy()
    check_grads("sequence_expand", S.sequence_expand, {"x": T(plain, None, dtype), "y": x}, {},
                ["x"])
    check_grads("sequence_expand_as", S.sequence_expand_as, {"x": T(plain, None, dtype), "y": x},
                {}, ["x"])
    other = X([[0, 1, 1, 3]], row, dtype, seed=2)
    check_grads("sequence_concat", lambda a, b: S.sequence_concat([a, b]), {"a": x, "b": other}, {}, ["a", "b"],
                listed=True)
    if len(row) == 1:
        check_grads("sequence_reshape", lambda input: S.sequence_reshape(input, 1), {"input": x}, {"new_dim": 1},
                    ["input"])


@pytest.mark.parametrize("dtype", FLOATS)
def test_expand_ref_levels_unpad_scatter_gradients(dtype):
    y = X([[0, 2, 3], [0, 1, 3, 3]], (1,), dtype)
    check_grads("sequence_expand", lambda x, y: S.sequence_expand(x, y, ref_level=0),
                {"x": X([[0, 2, 3]], (2,), dtype), "y": y}, {"ref_level": 0}, ["x"])
    check_grads("sequence_expand", lambda x, y: S.sequence_expand(x, y, ref_level=1),
                {"x": X([[0, 1, 1, 3]], (2,), dtype), "y": y}, {"ref_level": 1}, ["x"])
    check_grads("sequence_expand", lambda x, y: S.sequence_expand(x, y, ref_level=0),
                {"x": T(np.ones((2, 2)), None, dtype), "y": y}, {"ref_level": 0}, ["x"])
    length = T([2, 0, 4], None, "int64")
    for shape in [(3, 4, 2), (3, 4)]:
        padded = T(np.random.default_rng(3).standard_normal(shape), None, dtype)
        check_grads("sequence_unpad", S.sequence_unpad, {"x": padded, "length": length},
                    {}, ["x"])
    index = T([[0], [2], [0], [1], [2]], [[0, 3, 3, 5]], "int64")
    check_grads("sequence_scatter", S.sequence_scatter,
                {"input": T(np.random.default_rng(4).standard_normal((3, 4)), None, dtype), "index": index,
                 "updates": X([[0, 3, 3, 5]], (1,), dtype)}, {}, ["input", "updates"])
    check_grads("lod_reset", lambda x: S.lod_reset(x, target_lod=[0, 1, 5]), {"x": X([[0, 2, 5]], (2,), dtype)},
                {"target_lod": [0, 1, 5]}, ["x"])


# ------------------------------------------------------------------------------------------
# int32 and wide rows, with empty sequences at the edges
# ------------------------------------------------------------------------------------------
def _agree(op, inputs, attrs=None, fixed=(), listed=False):
    attrs = dict(attrs or {})
    ok_p, p = run_paddle(op, inputs, attrs, fixed=fixed, listed=listed)
    args = [list(inputs.values())] if listed else list(inputs.values())
    ok_o, o = attempt(lambda: observe(getattr(L, op)(*args, **attrs)))
    assert ok_p, f"Paddle raises: {p}"
    assert ok_o, f"lodtensor raises: {o}"
    assert len(p) == len(o)
    for a, b in zip(p, o):
        assert a.lod == b.lod and a.data.shape == b.data.shape and a.data.dtype == b.data.dtype, (a, b)
        np.testing.assert_array_equal(b.data, a.data)


@pytest.mark.parametrize("lod", [[[0, 0, 2, 5]], [[0, 2, 5, 5]], [[0, 5]]], ids=_lod_ids)
@pytest.mark.parametrize("row", [(1,), (2, 3)], ids=str)
def test_int32_agrees(lod, row):
    x = T(np.arange(5 * int(np.prod(row))).reshape((5, *row)) - 4, lod, "int32")
    n = len(lod[0]) - 1
    _agree("sequence_expand", {"x": x, "y": T(np.zeros((3, 1)), [[0, *range(1, n), 3]])})
    _agree("sequence_expand", {"x": T(np.arange(n * int(np.prod(row))).reshape((n, *row)), None, "int32"), "y": x})
    _agree("sequence_expand_as", {"x": T(np.arange(n * int(np.prod(row))).reshape((n, *row)), None, "int32"), "y": x})
    _agree("sequence_pad", {"x": x, "pad_value": np.array([-7], "int32")}, {"maxlen": 6}, fixed=("pad_value",))
    padded = np.arange(n * 5 * int(np.prod(row))).reshape((n, 5, *row)).astype("int32")
    _agree("sequence_unpad", {"x": T(padded, None, "int32"), "length": T(np.diff(lod[0]), None, "int64")})
    _agree("sequence_reverse", {"x": x})
    lengths = np.diff(lod[0])
    _agree("sequence_slice", {"input": x, "offset": T((lengths > 0).astype(int).reshape(-1, 1), None, "int64"),
                              "length": T(np.maximum(lengths - 1, 0).reshape(-1, 1), None, "int64")})
    if len(row) == 1:
        _agree("sequence_enumerate", {"input": x}, {"win_size": 3, "pad_value": -1})
        _agree("sequence_scatter", {"input": T(np.ones((n, 4)), None, "int32"), "index": T(x.numpy() % 4, lod, "int64"),
                                    "updates": x})
    else:
        _agree("sequence_reshape", {"input": T(x.numpy().reshape(5, 6), lod, "int32")}, {"new_dim": 3})
    _agree("lod_reset", {"x": x}, {"target_lod": [0, 0, 5]})


# ------------------------------------------------------------------------------------------
# Differences found by this pass (docs/porting.md)
# ------------------------------------------------------------------------------------------
def test_difference_pool_pad_value_is_not_rounded_to_float32():
    """Paddle's sequence_pool stores pad_value as a float32 attribute, so float64 data pads with
    float32(0.1) = 0.10000000149..., and 1e40 becomes inf; lodtensor pads with the value as given."""
    x = T([[1.0], [2.0]], [[0, 2, 2]], "float64")
    for pad_value, paddle_gives in ((0.1, float(np.float32(0.1))), (1e40, np.inf)):
        ok, (out,) = run_paddle("sequence_pool", {"input": x}, {"pool_type": "sum", "pad_value": pad_value})
        assert ok and out.data.ravel().tolist() == [3.0, paddle_gives]
        assert L.sequence_pool(x, "sum", pad_value=pad_value).data.ravel().tolist() == [3.0, pad_value]


def test_difference_edit_distance_several_levels():
    """Paddle's edit_distance reads the first lod level of a multi-level input as row offsets (so
    compares the wrong rows); lodtensor compares the sequences of the last level, as every other
    op. Paddle's own one-level call on the last level gives lodtensor's answer."""
    hyp = T([[1], [2], [3], [4]], [[0, 1, 3], [0, 2, 3, 4]], "int64")
    ref = T([[1], [2], [3]], [[0, 1, 3], [0, 1, 1, 3]], "int64")

    def edit(h, r):
        def build(v, op):
            out = op("edit_distance", {"Hyps": v["h"], "Refs": v["r"]}, {"Out": "float32", "SequenceNum": "int64"},
                     {"normalized": False})
            return [out["Out"], out["SequenceNum"]]
        return run_raw(build, {"h": h, "r": r})

    (dist, _), (num, _) = edit(hyp, ref)
    assert dist.ravel().tolist() == [0.0, 0.0] and num.tolist() == [2]  # rows [1] | [2, 3] against [1] | [2, 3]
    (last, _), (last_num, _) = edit(T(hyp.numpy(), hyp.lod()[-1:], "int64"), T(ref.numpy(), ref.lod()[-1:], "int64"))
    ours, ours_num = L.edit_distance(hyp, ref, normalized=False)
    np.testing.assert_array_equal(ours, last)
    assert ours.ravel().tolist() == [1.0, 1.0, 2.0] and ours_num.tolist() == last_num.tolist() == [3]


def test_difference_scatter_rows_of_several_dims():
    """For an input of more than 2 dims, Paddle's sequence_scatter indexes the flattened row (index up
    to prod(input.shape[1:]) - 1, one value per index row); lodtensor indexes axis 1 and adds rows of
    input.shape[2:], so it raises for Paddle's (rows, 1) updates and for an index past axis 1."""
    index = T([[0], [5], [1]], [[0, 2, 3]], "int64")
    updates = T([[1.0], [2.0], [3.0]], [[0, 2, 3]])
    ok, (out,) = run_paddle("sequence_scatter", {"input": T(np.zeros((2, 3, 2))), "index": index, "updates": updates})
    assert ok and out.data.tolist() == [[[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]], [[0.0, 3.0], [0.0, 0.0], [0.0, 0.0]]]
    with pytest.raises(IndexError, match="index\\[1\\]=5 is out of range for input width 3"):
        L.sequence_scatter(np.zeros((2, 3, 2), "float32"), index, updates)
    with pytest.raises(ValueError, match="one row of input's row shape \\(2,\\) per index row"):
        L.sequence_scatter(np.zeros((2, 3, 2), "float32"), T([[0], [2], [1]], [[0, 2, 3]], "int64"), updates)
    rows = L.sequence_scatter(np.zeros((2, 3, 2), "float32"), T([[0], [2], [1]], [[0, 2, 3]], "int64"),
                              T([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[0, 2, 3]]))
    assert rows.tolist() == [[[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]], [[0.0, 0.0], [5.0, 6.0], [0.0, 0.0]]]


@pytest.mark.parametrize("pad_shape", [(3,), (1, 3), (2, 1)], ids=str)
def test_difference_pad_value_broadcast(pad_shape):
    """Paddle's sequence_pad takes a pad_value of shape [1] or exactly the row shape; lodtensor also
    takes any shape that broadcasts to the row shape."""
    x = X([[0, 2, 2, 5]], (2, 3), "float32")
    pad = np.arange(int(np.prod(pad_shape)), dtype="float32").reshape(pad_shape) + 10
    ok, err = run_paddle("sequence_pad", {"x": x, "pad_value": pad}, fixed=("pad_value",))
    assert not ok, "Paddle now accepts a broadcast pad_value; update docs/porting.md"
    padded, length = L.sequence_pad(x, pad)
    np.testing.assert_array_equal(padded.data[1], np.broadcast_to(pad, (3, 2, 3)))
    full = np.broadcast_to(pad, (2, 3)).copy()
    ok, (theirs, _) = run_paddle("sequence_pad", {"x": x, "pad_value": full}, fixed=("pad_value",))
    assert ok
    np.testing.assert_array_equal(padded.data, theirs.data)


def test_difference_pad_value_0d_crashes_paddle():
    """A 0-d pad_value tensor kills Paddle's sequence_pad (SIGSEGV); lodtensor pads with it."""
    x = T(np.arange(5.0).reshape(5, 1), [[0, 2, 5]])
    pad = np.array(1.5, "float32")
    assert crash_signal("sequence_pad", {"x": x, "pad_value": pad}, fixed=("pad_value",)) == signal.SIGSEGV
    padded, length = L.sequence_pad(x, pad)
    assert padded.data.ravel().tolist() == [0.0, 1.0, 1.5, 2.0, 3.0, 4.0] and length.data.tolist() == [2, 3]


def test_difference_mask_keeps_the_lod():
    """sequence_mask of a LoDTensor keeps its lod here (the rows are the same); Paddle's drops it."""
    x = T([[2], [0], [3]], [[0, 1, 3]], "int64")
    ok, (out,) = run_paddle("sequence_mask", {"x": x}, {"maxlen": 4})
    ours = L.sequence_mask(x, maxlen=4)
    assert ok and out.lod == [] and ours.lod() == [[0, 1, 3]]
    np.testing.assert_array_equal(ours.data, out.data)


def test_difference_lod_append_level_with_a_lod():
    """lod_append(x, level) with ``level`` a tensor that has a lod: Paddle's lod_reset kernel takes that
    lod and replaces x's (append is ignored; it raises when the lod does not end at x's rows);
    lodtensor appends ``level``'s data as offsets, as for any other ``level``."""
    level = T([0, 1, 3], [[0, 3]], "int32")
    x = T(np.arange(3.0).reshape(3, 1))
    ok, (out,) = run_paddle("lod_append", {"x": x, "level": level})
    assert ok and out.lod == [[0, 3]]
    assert L.lod_append(x, level).lod() == [[0, 1, 3]]
    x2 = T(np.arange(6.0).reshape(6, 1), [[0, 2, 6]])
    ok, (out,) = run_paddle("lod_append", {"x": x2, "level": T(np.zeros((6, 1)), [[0, 1, 6]])})
    assert ok and out.lod == [[0, 1, 6]]  # x2's lod is gone, and nothing was appended
    with pytest.raises(TypeError, match="lod_append\\(\\): level must hold integers, got float32"):
        L.lod_append(x2, T(np.zeros((6, 1)), [[0, 1, 6]]))
