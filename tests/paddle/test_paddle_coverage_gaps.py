"""The public callables of ``lodtensor.fluid`` and ``lodtensor.sequence`` that no other file compared
with real PaddlePaddle 2.6.2 (the coverage list: ``docs/porting.md``, "Checked against Paddle"), and
the attributes and inputs the other files leave out:

- ``LoDRankTable.items()`` (``fluid.core.LodRankTable``) against Paddle's ``lod_rank_table`` operator's
  table, read from the scope: ties, empty sequences, every level of 2- and 3-level lods.
- ``fluid.core.LoDTensorArray`` against ``core.LoDTensorArray``: ``append`` shares the data and copies
  the lod, ``len``, indexing, iteration, ``_move_to_list``.
- ``fluid.initializer``: ``Xavier`` (uniform and normal, with ``fan_in``/``fan_out``, on 1-, 2- and 4-D
  shapes), ``NumpyArrayInitializer``, ``ConstantInitializer``, and the fans of ``MSRA``,
  ``TruncatedNormal``, ``Normal`` and ``Uniform`` on convolution shapes, against Paddle's startup program.
- ``fluid.data``'s feed checks against ``paddle.static.data``'s.
- ``fluid.layers.data`` fed Python numbers, as Paddle 1.x's executor takes them.
- The tensor layers' gradients (Paddle's backward operators against torch autograd): every activation
  layer, ``softmax`` along every axis, ``concat`` along axes 0 and 1 with 2-level lods, ``sums``,
  ``mean``, ``cross_entropy`` (hard labels with ``ignore_index``, soft labels), and ``accuracy``'s ``k``.
- The model layers' attributes that the book networks (test_paddle_fluid_layers.py) leave at their
  defaults, through that file's harness; ``ParamAttr``'s ``learning_rate``, ``regularizer`` and
  ``trainable`` in one SGD step.
- Differences found here (docs/porting.md): Paddle's ``lstm`` backward drops the cell output's
  gradient, its ``gru`` backward is wrong with an ``h_0`` that needs no gradient, its
  ``NumpyArrayInitializer`` takes any shape, its feed check lets a feed of fewer dims through.

Run with the Paddle venv (``.venv-paddle/bin/python -m pytest tests/paddle/...``); elsewhere it is skipped.
"""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

from _raw import TABLE  # noqa: E402
from _static import attempt, fresh_program, paddle_tensor, static_mode  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from paddle.base import core  # noqa: E402

import lodtensor as lt  # noqa: E402
import lodtensor.fluid as fluid  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

L = fluid.layers


@pytest.fixture(autouse=True)
def _own_paddle_names():
    """Each test runs in Paddle's static mode (never toggling it: each toggle switches Paddle's name
    generator) and names Paddle's variables and parameters from fresh counters, leaving the global
    ones as they were (other files compare Paddle's generated names with lodtensor's)."""
    with static_mode(), paddle.utils.unique_name.guard():
        yield


SETTINGS = settings(max_examples=25, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def static_run(build, feeds, wrt=(), weights=None):
    """Paddle: ``build(variables)`` -> list of outputs, on ``feeds`` (name -> LoDTensor / array; an array's
    whole shape is declared, a LoDTensor's rows are any number).
    Returns ``[(data, lod), ...]`` for the outputs, then, with ``wrt``, the gradients of
    ``sum(out0 * weights)`` w.r.t. those feeds."""
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            v = {}
            for name, value in feeds.items():
                data = value.numpy() if isinstance(value, lt.LoDTensor) else np.asarray(value)
                lod_level = value.lod_level if isinstance(value, lt.LoDTensor) else 0
                fixed = not isinstance(value, lt.LoDTensor)  # an array: its whole shape
                shape = list(data.shape) if fixed else [-1, *data.shape[1:]]
                v[name] = paddle.static.data(name, shape, data.dtype.name, lod_level=lod_level)
                v[name].stop_gradient = name not in wrt
            outs = build(v)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            grads = []
            if wrt:
                w = paddle.static.data("__w", list(weights.shape), weights.dtype.name)
                grads = paddle.static.gradients([paddle.sum(outs[0] * w)], [v[n] for n in wrt])
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(startup, scope=scope)
        feed = {name: paddle_tensor(value) for name, value in feeds.items()}
        if wrt:
            feed["__w"] = weights
        got = exe.run(main, feed=feed, fetch_list=outs + list(grads), scope=scope, return_numpy=False)
    return [(np.array(g), g.lod() if k < len(outs) else []) for k, g in enumerate(got)]  # (gradients: no lod)


def weights_like(result, seed=7):
    """``w`` for ``sum(out0 * w)``: uniform in [0.5, 1.5], of the first output's shape and dtype."""
    data = result[0][0]
    return np.random.default_rng(seed).uniform(0.5, 1.5, data.shape).astype(data.dtype)


def torch_run(fn, feeds, wrt=(), weights=None):
    """lodtensor: ``fn(**inputs)`` on torch leaves -> ``[(data, lod), ...]`` and the gradients of
    ``sum(out0 * weights)`` w.r.t. ``wrt``."""
    leaves, args = {}, {}
    for name, value in feeds.items():
        data = value.numpy() if isinstance(value, lt.LoDTensor) else np.asarray(value)
        leaves[name] = torch.tensor(data, requires_grad=name in wrt)
        args[name] = lt.LoDTensor(leaves[name], value.lod()) if isinstance(value, lt.LoDTensor) else leaves[name]
    outs = fn(**args)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    datas = [o.data if isinstance(o, lt.LoDTensor) else o for o in outs]
    results = [(d.detach().numpy(), o.lod() if isinstance(o, lt.LoDTensor) else []) for d, o in zip(datas, outs)]
    if wrt:
        (datas[0] * torch.from_numpy(weights)).sum().backward()
        results += [(leaves[n].grad.numpy(), []) for n in wrt]
    return results


def assert_same(theirs, mine, tol, what=""):
    assert len(theirs) == len(mine), what
    for k, ((a, alod), (b, blod)) in enumerate(zip(theirs, mine)):
        where = f"{what} result {k}"
        assert a.shape == b.shape, (where, a.shape, b.shape)
        assert a.dtype == b.dtype, (where, a.dtype, b.dtype)
        assert alod == blod, (where, alod, blod)
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, err_msg=where)


def agree(paddle_build, ours_fn, feeds, wrt=(), tol=None, what=""):
    """The outputs (data, lod, dtype) and the gradients w.r.t. ``wrt`` agree."""
    weights = weights_like(torch_run(ours_fn, feeds)) if wrt else None
    theirs = static_run(paddle_build, feeds, wrt, weights)
    mine = torch_run(ours_fn, feeds, wrt, weights)
    if tol is None:
        tol = 1e-5 if theirs[0][0].dtype == np.float32 else 1e-11
    assert_same(theirs, mine, tol, what)


def T(values, lod=None, dtype="float64"):
    return lt.LoDTensor(np.asarray(values).astype(dtype), lod)


def rand(lod, row, dtype="float64", seed=0, low=-2.0, high=2.0):
    rows = lod[-1][-1]
    return T(np.random.default_rng(seed).uniform(low, high, (rows, *row)), lod, dtype)


# ------------------------------------------------------------------------------------------
# LoDRankTable.items(): Paddle's lod_rank_table operator's table, read from the scope
# ------------------------------------------------------------------------------------------
def paddle_rank_table(x, level):
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            v = paddle.static.data("x", [-1, 1], "float32", lod_level=x.lod_level)
            table = main.global_block().create_var(name="rank_table", type=TABLE, persistable=True)
            main.global_block().append_op(type="lod_rank_table", inputs={"X": v}, outputs={"Out": table},
                                          attrs={"level": level})
        paddle.static.Executor(core.CPUPlace()).run(main, feed={"x": paddle_tensor(x)}, fetch_list=[], scope=scope)
        return [tuple(item) for item in scope.find_var("rank_table").get_lod_rank_table().items()]


RANK_LODS = [
    ([[0, 3, 3, 5, 9, 11, 13]], 0),  # ties (kept in order) and an empty sequence
    ([[0, 0, 0]], 0),  # only empty sequences
    ([[0, 5]], 0),  # one sequence
    ([[0, 2, 4], [0, 1, 4, 4, 10]], 0),
    ([[0, 2, 4], [0, 1, 4, 4, 10]], 1),
    ([[0, 1, 3], [0, 2, 2, 6], [0, 1, 3, 4, 6, 7, 10]], 1),
    ([[0, 1, 3], [0, 2, 2, 6], [0, 1, 3, 4, 6, 7, 10]], 2),
]


@pytest.mark.parametrize("lod, level", RANK_LODS, ids=str)
def test_rank_table_items_as_paddle(lod, level):
    x = lt.LoDTensor(np.zeros((lod[-1][-1], 1), "float32"), lod)
    table = L.lod_rank_table(x, level)
    assert isinstance(table, fluid.core.LodRankTable)
    assert table.items() == paddle_rank_table(x, level)


@SETTINGS
@given(lengths=st.lists(st.integers(0, 4), min_size=1, max_size=8))
def test_random_rank_table_items_as_paddle(lengths):
    x = lt.LoDTensor(np.zeros((sum(lengths), 1), "float32"), recursive_sequence_lengths=[lengths])
    assert L.lod_rank_table(x).items() == paddle_rank_table(x, 0)


# ------------------------------------------------------------------------------------------
# fluid.core.LoDTensorArray against core.LoDTensorArray
# ------------------------------------------------------------------------------------------
SIDES = [("paddle", core, core.CPUPlace()), ("lodtensor", fluid.core, fluid.CPUPlace())]


def _tensor(side, values, lod):
    _, mod, place = side
    t = mod.LoDTensor()
    t.set(np.asarray(values, "float32").reshape(-1, 1), place)
    t.set_lod(lod)
    return t


def _observe(arr):
    return [(np.array(t).ravel().tolist(), t.lod()) for t in arr]


def _array_session(side):
    """One session of calls on a tensor array; what each step shows."""
    _, mod, place = side
    seen = {}
    arr = mod.LoDTensorArray()
    seen["empty"] = (len(arr), _observe(arr))
    t = _tensor(side, [1, 2], [[0, 2]])
    arr.append(t)
    t.set_lod([[0, 1, 2]])  # the element keeps the lod it was appended with
    seen["lod after set_lod on t"] = _observe(arr)
    t.set(np.full((3, 1), 7, "float32"), place)  # another shape: the element keeps its data
    t.set_lod([[0, 3]])
    arr.append(t)
    seen["two"] = (len(arr), _observe(arr), arr[1].lod(), [e.lod() for e in arr])
    arr[0].set_lod([[0, 2]])  # an element's lod is its own
    seen["t after element set_lod"] = (t.lod(), _observe(arr))
    seen["past the end"] = attempt(lambda: arr[2])[0]
    seen["append None"] = attempt(arr.append, None)[0]
    moved = arr._move_to_list()
    seen["moved"] = (len(moved), [e.lod() for e in moved], len(arr))
    return seen


def test_tensor_array_as_paddle():
    """``append`` shares the data and copies the lod (Paddle's ``ShareDataWith`` + ``set_lod``), so an
    element keeps its lod and, once ``t.set()`` gives ``t`` new data, its data; ``_move_to_list``
    empties the array. (lodtensor's ``append`` stored ``t`` itself, and ``_move_to_list`` copied.)"""
    theirs, mine = (_array_session(side) for side in SIDES)
    for key in theirs:
        assert mine[key] == theirs[key], (key, theirs[key], mine[key])


def test_tensor_array_of_the_rank_table_ops_as_paddle_values():
    """``lod_tensor_to_array`` gives a ``fluid.core.LoDTensorArray`` of time steps; a step appended to
    another array keeps its data and lod there."""
    x = lt.LoDTensor(np.arange(6, dtype="float32").reshape(6, 1), [[0, 3, 4, 6]])
    steps = L.lod_tensor_to_array(x, L.lod_rank_table(x))
    assert isinstance(steps, fluid.core.LoDTensorArray) and len(steps) == 3
    copy = fluid.core.LoDTensorArray()
    for step in steps:
        copy.append(step)
    assert _observe(copy) == _observe(steps)


def test_difference_tensor_array_negative_index():
    """Paddle's pybind array takes an index >= 0 only (-1 is a TypeError); lodtensor's is a list."""
    arrays = []
    for side in SIDES:
        arr = side[1].LoDTensorArray()
        arr.append(_tensor(side, [1, 2], [[0, 2]]))
        arr.append(_tensor(side, [3], [[0, 1]]))
        arrays.append(arr)
    ok, err = attempt(lambda: arrays[0][-1])
    assert not ok and isinstance(err, TypeError)
    assert arrays[1][-1].lod() == arrays[0][1].lod() == [[0, 1]]


# ------------------------------------------------------------------------------------------
# fluid.initializer: Paddle's startup program against lodtensor's initializers
# ------------------------------------------------------------------------------------------
def paddle_parameters(initializers, shape, dtype="float32"):
    """``{name: ndarray}``: a parameter of ``shape`` per initializer, after Paddle's startup program."""
    with fresh_program() as (main, start, scope):
        with paddle.static.program_guard(main, start):
            for name, init in initializers.items():
                paddle.static.create_parameter(shape, dtype, name=name, default_initializer=init)
        paddle.static.Executor(paddle.CPUPlace()).run(start, scope=scope)
        return {name: np.array(scope.find_var(name).get_tensor()) for name in initializers}


def _spread(values, center=0.0):
    return values.std(), np.abs(values - center).max()


INIT = paddle.nn.initializer
#: (name, Paddle's initializer, lodtensor's, whether the draw is bounded): random initializers of Paddle 1.x
RANDOM_INITS = [
    ("xavier-uniform", INIT.xavier.XavierInitializer(), fluid.initializer.Xavier(), True),
    ("xavier-normal", INIT.xavier.XavierInitializer(uniform=False), fluid.initializer.XavierInitializer(uniform=False),
     False),
    ("xavier-fans", INIT.xavier.XavierInitializer(fan_in=7, fan_out=50), fluid.initializer.Xavier(fan_in=7, fan_out=50),
     True),
    ("xavier-normal-fan_in", INIT.xavier.XavierInitializer(uniform=False, fan_in=3),
     fluid.initializer.Xavier(uniform=False, fan_in=3), False),
    ("msra-uniform", INIT.kaiming.MSRAInitializer(), fluid.initializer.MSRA(), True),
    ("msra-normal-fan_in", INIT.kaiming.MSRAInitializer(uniform=False, fan_in=20),
     fluid.initializer.MSRAInitializer(uniform=False, fan_in=20), False),
    ("uniform", INIT.uniform.UniformInitializer(-0.3, 0.7), fluid.initializer.UniformInitializer(-0.3, 0.7), True),
    ("normal", INIT.normal.NormalInitializer(1.0, 0.5), fluid.initializer.NormalInitializer(1.0, 0.5), False),
    ("truncated-normal", INIT.normal.TruncatedNormalInitializer(-1.0, 0.5),
     fluid.initializer.TruncatedNormalInitializer(-1.0, 0.5), True),
]
#: shapes whose fans differ: 1-D (fan_in = fan_out = n), 2-D ([in, out]), a convolution kernel
#: ([out, in, kh, kw]: fan_in = in * kh * kw), 3-D
INIT_SHAPES = [[20000], [120, 160], [64, 32, 3, 3], [40, 25, 30]]


@pytest.mark.parametrize("shape", INIT_SHAPES, ids=str)
def test_random_initializers_spread_as_paddle(shape):
    """The same distribution as Paddle's draws (the values come from different generators): the mean,
    the standard deviation, and for a bounded draw the largest distance from the mean."""
    theirs = paddle_parameters({name: p for name, p, _, _ in RANDOM_INITS}, shape)
    torch.manual_seed(0)
    for name, _, init, bounded in RANDOM_INITS:
        ours = init(torch.empty(shape)).numpy()
        assert ours.dtype == theirs[name].dtype and ours.shape == theirs[name].shape, name
        center = theirs[name].mean()
        assert abs(ours.mean() - center) < 0.05 * theirs[name].std() + 1e-3, (name, ours.mean(), center)
        (s_ours, m_ours), (s_theirs, m_theirs) = _spread(ours, center), _spread(theirs[name], center)
        assert s_ours == pytest.approx(s_theirs, rel=0.04), (name, s_ours, s_theirs)
        if bounded:
            assert m_ours == pytest.approx(m_theirs, rel=0.02), (name, m_ours, m_theirs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_constant_and_numpy_array_initializers_as_paddle(dtype):
    value = np.random.default_rng(3).standard_normal((3, 4))
    theirs = paddle_parameters({"c": INIT.constant.ConstantInitializer(0.37),
                                "a": INIT.assign.NumpyArrayInitializer(value.astype(dtype))}, [3, 4], dtype)
    like = torch.empty(3, 4, dtype=getattr(torch, dtype))
    for name, init in (("c", fluid.initializer.ConstantInitializer(0.37)),
                       ("a", fluid.initializer.NumpyArrayInitializer(value.astype(dtype)))):
        ours = init(like.clone()).numpy()
        assert ours.dtype == theirs[name].dtype
        np.testing.assert_array_equal(ours, theirs[name])


def test_difference_numpy_array_initializer_of_another_shape():
    """Paddle's ``assign_value`` gives the parameter the array's shape, whatever shape the parameter
    declares ([2, 3] values make a [3, 2] parameter hold [2, 3]); lodtensor raises, naming both."""
    value = np.arange(6, dtype="float32").reshape(2, 3)
    theirs = paddle_parameters({"a": INIT.assign.NumpyArrayInitializer(value)}, [3, 2])["a"]
    np.testing.assert_array_equal(theirs, value)
    with pytest.raises(ValueError, match=r"the array has shape \[2, 3\] but the parameter \[3, 2\]"):
        fluid.initializer.NumpyArrayInitializer(value)(torch.empty(3, 2))


def test_create_parameter_default_initializer_as_paddle():
    """``fluid.layers.create_parameter(default_initializer=...)`` fills as Paddle's (an ``attr`` with an
    initializer of its own wins); ``is_bias`` starts at 0."""
    value = np.arange(6, dtype="float32").reshape(2, 3)
    with fresh_program() as (main, start, scope):
        with paddle.static.program_guard(main, start):
            made = [paddle.static.create_parameter([2, 3], "float32",
                                                   default_initializer=INIT.assign.NumpyArrayInitializer(value)),
                    paddle.static.create_parameter([2, 3], "float32", attr=paddle.ParamAttr(
                        initializer=INIT.constant.ConstantInitializer(2.0)),
                        default_initializer=INIT.assign.NumpyArrayInitializer(value)),
                    paddle.static.create_parameter([3], "float32", is_bias=True)]
        paddle.static.Executor(paddle.CPUPlace()).run(start, scope=scope)
        theirs = [np.array(scope.find_var(p.name).get_tensor()) for p in made]

    def build():
        given = fluid.initializer.NumpyArrayInitializer(value)
        return [L.create_parameter([2, 3], "float32", default_initializer=given),
                L.create_parameter([2, 3], "float32", attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(2.0)),
                                   default_initializer=given),
                L.create_parameter([3], "float32", is_bias=True)]

    net = fluid.Program(build)
    mine = [p.detach().numpy() for p in net()]
    assert net.paddle_names() == [p.name for p in made]
    for a, b in zip(theirs, mine):
        np.testing.assert_array_equal(b, a)


# ------------------------------------------------------------------------------------------
# fluid.data: the feed checks of paddle.static.data (Paddle's executor, check_feed_shape_type)
# ------------------------------------------------------------------------------------------
def paddle_feed(shape, dtype, value, lod_level=0):
    """Paddle's value of ``paddle.static.data("x", shape, dtype)`` fed ``value``: ``(data, lod)``."""
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", shape, dtype, lod_level=lod_level)
            out = paddle.assign(x)
        exe = paddle.static.Executor(core.CPUPlace())
        feed = paddle_tensor(value) if isinstance(value, lt.LoDTensor) else value
        (got,) = exe.run(main, feed={"x": feed}, fetch_list=[out], scope=scope, return_numpy=False)
    return np.array(got), got.lod()


def ours_feed(shape, dtype, value, lod_level=0):
    out = fluid.Program(lambda: fluid.data(name="x", shape=shape, dtype=dtype, lod_level=lod_level))(feed={"x": value})
    return (out.data.detach().numpy(), out.lod()) if isinstance(out, lt.LoDTensor) else (out.detach().numpy(), [])


F32 = np.ones((2, 3), "float32")
FEED_CASES = [
    ([None, 3], "float32", F32),
    ([-1, 3], "float32", np.ones((2, 4), "float32")),  # a row of the wrong size
    ([2, 3], "float32", F32),
    ([2, 3], "float32", np.ones((4, 3), "float32")),  # a fixed batch dim that differs: refused
    ([0, 3], "float32", F32),
    ([None, 3], "float32", np.ones((2, 3, 1), "float32")),  # one dim too many
    ([None, 1, 3], "float32", F32),
    ([None, None], "float32", np.ones((2, 5), "float32")),
    ([None], "int64", np.arange(3)),
    ([None, 3], "float32", np.ones((0, 3), "float32")),
    ([], "float32", np.array(2.5, "float32")),
    ([None, 1], "int64", [[1], [2]]),  # Python lists: np.array, in the layer's dtype
    ([None, 2], "float32", [[1, 2], [3, 4.5]]),
    ([None, 1], "int64", 3),  # a Python scalar: 0-d, not [-1, 1]
    ([None, 1], "int64", [[1], [2, 3]]),  # ragged
    ([None, 1], "float32", lt.LoDTensor(np.ones((3, 1), "float32"), [[0, 1, 3]])),
    ([5, 1], "float32", lt.LoDTensor(np.ones((3, 1), "float32"), [[0, 1, 3]])),  # with a lod dim 0 is not checked
]


def _feed_id(case):
    shape, dtype, value = case
    what = str(value).replace("\n", "") if isinstance(value, (list, int)) else list(value.shape)
    return f"{shape}-{dtype}-{type(value).__name__}{what}".replace(" ", "")


@pytest.mark.parametrize("shape, dtype, value", FEED_CASES, ids=[_feed_id(c) for c in FEED_CASES])
def test_fluid_data_feed_as_paddle(shape, dtype, value):
    lod_level = value.lod_level if isinstance(value, lt.LoDTensor) else 0
    ok_p, theirs = attempt(paddle_feed, shape, dtype, value, lod_level)
    ok_o, mine = attempt(ours_feed, shape, dtype, value, lod_level)
    assert ok_p == ok_o, (theirs, mine)
    if ok_p:
        assert_same([theirs], [mine], 0)
    else:
        assert isinstance(mine, (ValueError, TypeError)), mine


@pytest.mark.parametrize("dtype, value", [("int64", [[1], [2], [5]]), ("float32", [[0.5, 1], [2, 3]]),
                                          ("float64", 2.5)], ids=["int-list", "float-list", "scalar"])
def test_layers_data_feeds_python_numbers_as_paddle(dtype, value):
    """Paddle 1.x's ``fluid.layers.data`` (a data variable whose feed is not checked) fed Python numbers:
    the executor makes ``np.array(feed)`` in the layer's dtype. lodtensor refused a list."""
    shape = list(np.shape(value)[1:])
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, *shape] if shape else [], dtype)
            x.desc.set_need_check_feed(False)
            out = paddle.assign(x)
        (theirs,) = paddle.static.Executor(core.CPUPlace()).run(main, feed={"x": value}, fetch_list=[out], scope=scope)
    mine = fluid.Program(lambda: L.data(name="x", shape=shape or [], dtype=dtype, append_batch_size=bool(shape)))(
        feed={"x": value})
    mine = (mine.data if isinstance(mine, lt.LoDTensor) else mine).numpy()
    assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
    np.testing.assert_array_equal(mine, theirs)


def test_difference_fluid_data_casts_the_feed():
    """Paddle refuses a NumPy feed of another dtype; lodtensor casts it to the declared dtype (whole
    numbers only, for an integer layer, also from Python numbers, which Paddle truncates: docs/porting.md)."""
    for dtype, value in (("float32", np.ones((2, 3))), ("int64", np.ones((2, 1), "int32"))):
        ok, err = attempt(paddle_feed, [None, value.shape[1]], dtype, value)
        assert not ok and "data type of fed Variable" in str(err)
        data, _ = ours_feed([None, value.shape[1]], dtype, value)
        assert data.dtype == np.dtype(dtype) and np.array_equal(data, value)
    # Python numbers go through np.array(feed).astype(dtype) in Paddle, which truncates 1.5 to the id 1
    assert paddle_feed([None, 1], "int64", [[1.5], [2]])[0].ravel().tolist() == [1, 2]
    with pytest.raises(ValueError, match="which is not a whole number"):
        ours_feed([None, 1], "int64", [[1.5], [2]])


def test_difference_fluid_data_feed_of_fewer_dims():
    """Paddle's shape check (``DiffTensorShape``) compares only the feed's dims, so a feed of fewer dims
    than declared passes ([2, 3] for [-1, 3, 2]), against its documented rule (the same number of
    dims); lodtensor refuses it. A declared shape one dim short of the feed is taken as its rows
    (``fluid.layers.data``'s reading; Paddle refuses it)."""
    for shape in ([None, 3, 1], [None, 3, 2], [2, 3, 1]):
        data, _ = paddle_feed(shape, "float32", F32)
        assert data.shape == (2, 3)
        with pytest.raises(ValueError, match="but the data layer declares"):
            ours_feed(shape, "float32", F32)
    assert not attempt(paddle_feed, [3], "float32", F32)[0]
    assert ours_feed([3], "float32", F32)[0].shape == (2, 3)


# ------------------------------------------------------------------------------------------
# The tensor layers: values, lods and gradients (Paddle's backward operators against torch autograd)
# ------------------------------------------------------------------------------------------
PF = paddle.nn.functional
#: lodtensor's activation layer -> Paddle 2.6's operator function
ACTIVATIONS = {"tanh": paddle.tanh, "sigmoid": PF.sigmoid, "relu": PF.relu, "softsign": PF.softsign, "exp": paddle.exp,
               "square": paddle.square, "sin": paddle.sin, "cos": paddle.cos, "ceil": paddle.ceil,
               "floor": paddle.floor, "softplus": PF.softplus, "logsigmoid": PF.log_sigmoid,
               "tanh_shrink": PF.tanhshrink, "erf": paddle.erf, "sqrt": paddle.sqrt, "rsqrt": paddle.rsqrt,
               "log": paddle.log, "reciprocal": paddle.reciprocal, "abs": paddle.abs}
POSITIVE = {"sqrt", "rsqrt", "log", "reciprocal"}
LOD2 = [[0, 2, 2, 4], [0, 1, 3, 3, 5]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_activation_layer_gradient_as_paddle(act, dtype):
    """On a 2-level lod, rows of 2 x 3; values away from the kinks (relu, abs, ceil, floor)."""
    low, high = (0.3, 3.0) if act in POSITIVE else (-2.0, 2.0)
    x = rand(LOD2, (2, 3), dtype, seed=1, low=low, high=high)
    if act not in POSITIVE:  # keep off 0 and the integers, where the gradient has a kink
        x = x.with_data(np.where(np.abs(x.numpy() - np.round(x.numpy())) < 0.05, 0.37, x.numpy()).astype(dtype))
    weights = weights_like(torch_run(getattr(L, act), {"x": x}))
    theirs = static_run(lambda v: ACTIVATIONS[act](v["x"]), {"x": x}, ["x"], weights)
    if act == "abs":  # Paddle 2.6.2's abs drops the lod (test_difference_abs_keeps_the_lod)
        theirs[0] = (theirs[0][0], LOD2)
    mine = torch_run(getattr(L, act), {"x": x}, ["x"], weights)
    assert_same(theirs, mine, 2e-6 if dtype == "float32" else 1e-12, act)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3])
def test_softmax_every_axis_as_paddle(axis, dtype):
    x = rand([[0, 1, 4]], (3, 2), dtype, seed=2)
    agree(lambda v: PF.softmax(v["x"], axis=axis), lambda x: L.softmax(x, use_cudnn=True, axis=axis), {"x": x},
          wrt=["x"], what=f"softmax axis={axis}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_concat_two_level_lods_and_gradients_as_paddle(dtype):
    """Axis 0 appends the 2-level lods; axis 1 (and -1) keeps the first input's; gradients reach every input."""
    a = rand(LOD2, (2,), dtype, seed=3)
    b = rand([[0, 1, 3], [0, 0, 2, 4]], (2,), dtype, seed=4)
    c = rand(LOD2, (3,), dtype, seed=5)
    agree(lambda v: paddle.concat([v["a"], v["b"], v["a"]], axis=0),
          lambda a, b: L.concat([a, b, a], axis=0), {"a": a, "b": b}, wrt=["a", "b"], what="axis 0")
    for axis in (1, -1):
        agree(lambda v, axis=axis: paddle.concat([v["a"], v["c"]], axis=axis),
              lambda a, c, axis=axis: L.concat([a, c], axis=axis), {"a": a, "c": c}, wrt=["a", "c"],
              what=f"axis {axis}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_and_mean_gradients_as_paddle(dtype):
    a, b = rand([[0, 2, 5]], (3,), dtype, seed=6), rand([[0, 1, 5]], (3,), dtype, seed=7)
    agree(lambda v: paddle.add_n([v["a"], v["b"], v["a"]]), lambda a, b: L.sums([a, b, a]), {"a": a, "b": b},
          wrt=["a", "b"], what="sums")
    weights = np.array(1.25, dtype)
    theirs = static_run(lambda v: paddle.mean(v["x"]), {"x": a}, ["x"], weights)
    mine = torch_run(L.mean, {"x": a}, ["x"], weights)
    assert_same(theirs, mine, 1e-6 if dtype == "float32" else 1e-12, "mean")


def _cross_entropy(soft_label, ignore_index):
    def build(v):
        helper = paddle.base.layer_helper.LayerHelper("cross_entropy")
        out = helper.create_variable_for_type_inference(v["p"].dtype)
        helper.append_op(type="cross_entropy", inputs={"X": v["p"], "Label": v["y"]}, outputs={"Y": out},
                         attrs={"soft_label": soft_label, "ignore_index": ignore_index})
        return out

    return build


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_hard_labels_as_paddle(ignore_index, dtype):
    """Values, the input's lod and the gradient, with rows whose label is ``ignore_index`` (0 and no gradient)."""
    rng = np.random.default_rng(8)
    p = T(rng.dirichlet(np.ones(4), size=6) * 0.9 + 0.025, [[0, 2, 2, 6]], dtype)
    y = np.array([[0], [2], [3], [2], [1], [0]], "int64")
    agree(_cross_entropy(False, ignore_index), lambda p, y: L.cross_entropy(p, y, ignore_index=ignore_index),
          {"p": p, "y": y}, wrt=["p"])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_soft_labels_as_paddle(dtype):
    rng = np.random.default_rng(9)
    p = T(rng.dirichlet(np.ones(3), size=5) * 0.9 + 0.03, [[0, 3, 5]], dtype)
    y = rng.dirichlet(np.ones(3), size=5).astype(dtype)
    agree(_cross_entropy(True, -100), lambda p, y: L.cross_entropy(p, y, soft_label=True), {"p": p, "y": y},
          wrt=["p"])  # (Paddle's operator has no gradient for the label)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_accuracy_every_k_and_labels_past_the_classes_as_paddle(k):
    """``k`` up to the number of classes, a label no class has (never counted), rows without ties."""
    rng = np.random.default_rng(10)
    scores = rng.permutation(np.arange(24, dtype="float32")).reshape(6, 4)
    label = np.array([[0], [3], [2], [7], [1], [3]], "int64")
    (theirs, _), = static_run(lambda v: paddle.static.accuracy(v["s"], v["y"], k=k), {"s": scores, "y": label})
    assert float(L.accuracy(scores, label, k=k)) == pytest.approx(float(theirs))
    assert float(L.accuracy(torch.from_numpy(scores), label, k=k)) == pytest.approx(float(theirs))


# ------------------------------------------------------------------------------------------
# The fluid model layers' attributes the book networks leave at their defaults
# ------------------------------------------------------------------------------------------
from test_paddle_fluid_layers import Ours, PaddleFluid, _check  # noqa: E402

H, V, E, TAGS = 6, 15, 4, 4


PaddleFluidMore = PaddleFluid  # (its dynamic_gru has Paddle 1.8's whole signature: activations, h_0)


def tagger_with_attributes(L, words, h0, target):
    """Every fluid layer with attributes off their defaults: a negative ``padding_idx`` and a named table,
    ``sequence_conv`` of filter 5 without bias, ``fc`` of two inputs with a list of attrs and no bias,
    ``dynamic_lstm`` reversed without peepholes and other activations, ``dynamic_gru`` with ``h_0``,
    other activations and ``origin_mode``, ``crf_decoding`` with a label."""
    emb = L.embedding(input=words, size=[V, E], padding_idx=-1, param_attr=L.ParamAttr(name="word_emb"))
    conv = L.sequence_conv(input=emb, num_filters=H, filter_size=5, bias_attr=False, act="relu", param_attr="convw")
    x = L.fc(input=[emb, conv], size=4 * H, param_attr=[None, L.ParamAttr(name="fc_second")], bias_attr=False,
             act="tanh")
    hidden, cell = L.dynamic_lstm(input=x, size=4 * H, use_peepholes=False, is_reverse=True,
                                  gate_activation="sigmoid", cell_activation="relu", candidate_activation="tanh")
    gru_in = L.fc(input=[hidden, cell], size=3 * H)
    gru = L.dynamic_gru(input=gru_in, size=H, gate_activation="tanh", candidate_activation="relu", h_0=h0,
                        origin_mode=True)
    emission = L.fc(input=gru, size=TAGS)
    cost = L.linear_chain_crf(input=emission, label=target, param_attr=L.ParamAttr(name="crfw"))
    return cost, L.crf_decoding(input=emission, param_attr=L.ParamAttr(name="crfw"), label=target)


class OursMore(Ours):
    """lodtensor.fluid, but with ``dynamic_lstm``'s cell output cut from the gradient, as Paddle's ``lstm``
    backward cuts it (``test_difference_lstm_cell_output_gradient``)."""

    @staticmethod
    def dynamic_lstm(*args, **kwargs):
        hidden, cell = fluid.layers.dynamic_lstm(*args, **kwargs)
        return hidden, cell.with_data(cell.data.detach())


@pytest.mark.parametrize("lod", [[[0, 3, 4, 9]], [[0, 1, 6]]], ids=str)
def test_fluid_layer_attributes_as_paddle(lod):
    """The same parameter names, order and shapes; on Paddle's initial values the same cost, decoded
    agreement and parameter gradients."""
    rng = np.random.RandomState(4)
    rows, seqs = lod[-1][-1], len(lod[-1]) - 1
    feeds = {"words": lt.LoDTensor(rng.randint(0, V, (rows, 1)).astype("int64"), lod),
             "h0": lt.LoDTensor(rng.uniform(-0.5, 0.5, (seqs, H)).astype("float32")),
             "target": lt.LoDTensor(rng.randint(0, TAGS, (rows, 1)).astype("int64"), lod)}
    import test_paddle_fluid_layers as harness  # noqa: PLC0415 - its _run_paddle builds with PaddleFluid

    saved = harness.PaddleFluid
    harness.PaddleFluid = PaddleFluidMore
    try:
        _check(lambda L, **kw: tagger_with_attributes(OursMore if L is Ours else L, **kw), feeds,
               load_before_first_run=True)
    finally:
        harness.PaddleFluid = saved


@pytest.mark.parametrize("peepholes", [False, True])
def test_difference_lstm_cell_output_gradient(peepholes):
    """Paddle's ``lstm_grad`` takes the gradient of ``Hidden`` only (its grad op maker never passes
    ``Cell@GRAD``), so whatever reaches ``dynamic_lstm``'s second output, the cell state, is dropped:
    a loss on ``hidden + cell`` gets the gradient of a loss on ``hidden``. lodtensor's gradient is the
    forward's (torch autograd; the forwards agree, test_paddle_layers.py); cutting the cell from the
    graph gives Paddle's."""
    from paddle.base.layer_helper import LayerHelper  # noqa: PLC0415

    from lodtensor.nn import functional as NF  # noqa: PLC0415

    d = 3
    rng = np.random.default_rng(11)
    feeds = {"x": T(rng.uniform(-1, 1, (7, 4 * d)), [[0, 3, 3, 7]]), "w": rng.uniform(-0.5, 0.5, (d, 4 * d)),
             "b": rng.uniform(-0.5, 0.5, (1, (7 if peepholes else 4) * d))}

    def build(v):
        helper = LayerHelper("lstm")
        outs = {k: helper.create_variable_for_type_inference("float64")
                for k in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
        helper.append_op(type="lstm", inputs={"Input": v["x"], "Weight": v["w"], "Bias": v["b"]}, outputs=outs,
                         attrs={"use_peepholes": peepholes})
        return paddle.add(outs["Hidden"], outs["Cell"])

    def ours(cut):
        def fn(x, w, b):
            hidden, cell = NF.dynamic_lstm(x, w, b, use_peepholes=peepholes)
            return hidden.with_data(hidden.data + (cell.data.detach() if cut else cell.data))

        return fn

    wrt = ["x", "w", "b"]
    weights = weights_like(torch_run(ours(False), feeds))
    theirs = static_run(build, feeds, wrt, weights)
    assert_same(theirs, torch_run(ours(True), feeds, wrt, weights), 1e-11)
    full = torch_run(ours(False), feeds, wrt, weights)
    np.testing.assert_allclose(full[0][0], theirs[0][0], rtol=1e-12)  # the same forward
    assert not np.allclose(full[1][0], theirs[1][0])  # but the input's gradient differs
    x = torch.tensor(feeds["x"].numpy(), requires_grad=True)
    w, b = torch.tensor(feeds["w"]), torch.tensor(feeds["b"])
    assert torch.autograd.gradcheck(lambda x: ours(False)(lt.LoDTensor(x, feeds["x"].lod()), w, b).data, (x,))


def _gru_build(dtype, attrs):
    def build(v):
        from paddle.base.layer_helper import LayerHelper  # noqa: PLC0415

        helper = LayerHelper("gru")
        outs = {k: helper.create_variable_for_type_inference(dtype)
                for k in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
        helper.append_op(type="gru", inputs={"Input": v["x"], "Weight": v["w"], "Bias": v["b"], "H0": v["h0"]},
                         outputs=outs, attrs={"gate_activation": "sigmoid", "activation": "tanh", **attrs})
        return outs["Hidden"]

    return build


@pytest.mark.parametrize("attrs", [{}, {"is_reverse": True, "origin_mode": True}], ids=["default", "reverse-origin"])
def test_difference_gru_h0_without_gradient(attrs):
    """Paddle 2.6.2's ``gru_grad`` gets the gradients of the input, weight and bias wrong when ``H0`` is
    given but needs no gradient itself (``stop_gradient``, as a fed ``h_0`` data layer is by default);
    when ``H0`` needs one, they are right. lodtensor's are right either way: they agree with Paddle's
    in the second case and with central differences of Paddle's own forward in the first."""
    from lodtensor.nn import functional as NF  # noqa: PLC0415

    d, lod = 3, [[0, 2, 2, 5]]
    rng = np.random.default_rng(12)
    feeds = {"x": T(rng.uniform(-1, 1, (5, 3 * d)), lod), "w": rng.uniform(-0.5, 0.5, (d, 3 * d)),
             "b": rng.uniform(-0.5, 0.5, (1, 3 * d)), "h0": rng.uniform(-0.5, 0.5, (3, d))}
    build = _gru_build("float64", attrs)

    def ours(x, w, b, h0):
        return NF.dynamic_gru(x, w, b, h_0=h0, is_reverse=attrs.get("is_reverse", False),
                              origin_mode=attrs.get("origin_mode", False))

    weights = weights_like(torch_run(ours, feeds))
    mine = torch_run(ours, feeds, ["x", "w", "b"], weights)
    assert_same(static_run(build, feeds, ["x", "w", "b", "h0"], weights)[:4], mine, 1e-11)  # H0 needs a gradient
    wrong = static_run(build, feeds, ["x", "w", "b"], weights)  # H0 does not: Paddle's gradients are off
    np.testing.assert_allclose(wrong[0][0], mine[0][0], rtol=1e-12)
    assert not np.allclose(wrong[3][0], mine[3][0])

    def loss(bias):  # Paddle's own forward, for central differences of the bias
        (out, _), = static_run(build, dict(feeds, b=bias))
        return float((out * weights).sum())

    eps, numeric = 1e-6, np.zeros_like(feeds["b"])
    for j in range(numeric.shape[1]):
        step = np.zeros_like(numeric)
        step[0, j] = eps
        numeric[0, j] = (loss(feeds["b"] + step) - loss(feeds["b"] - step)) / (2 * eps)
    np.testing.assert_allclose(mine[3][0], numeric, atol=1e-8)


# ------------------------------------------------------------------------------------------
# ParamAttr's learning_rate, regularizer and trainable: one SGD step, Paddle's optimizer against torch's
# ------------------------------------------------------------------------------------------
def test_param_attr_learning_rate_l2decay_and_trainable_in_an_sgd_step_as_paddle():
    """``ParamAttr(learning_rate=...)`` scales the step of its parameter, ``regularizer=L2Decay(c)`` adds
    ``c * param`` to its gradient, ``trainable=False`` freezes it: ``torch.optim.SGD(net.param_groups(lr))``
    takes the step Paddle's ``SGD(lr).minimize`` takes."""
    x = np.random.default_rng(13).uniform(-1, 1, (4, 3)).astype("float32")

    def attrs(P, R):
        return dict(
            w1=P(name="w1", learning_rate=0.5, regularizer=R(0.1)), b1=P(name="b1", learning_rate=2.0),
            w2=P(name="w2", trainable=False), b2=P(name="b2", regularizer=R(0.3)),
        )

    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            a = attrs(paddle.ParamAttr, paddle.regularizer.L2Decay)
            v = paddle.static.data("x", [4, 3], "float32")
            h = paddle.static.nn.fc(v, 5, weight_attr=a["w1"], bias_attr=a["b1"], activation="tanh")
            out = paddle.static.nn.fc(h, 2, weight_attr=a["w2"], bias_attr=a["b2"])
            loss = paddle.mean(out * out)
            paddle.optimizer.SGD(learning_rate=0.1).minimize(loss)
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(startup, scope=scope)
        names = ["w1", "b1", "w2", "b2"]
        before = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
        exe.run(main, feed={"x": x}, fetch_list=[loss], scope=scope)
        after = {n: np.array(scope.find_var(n).get_tensor()) for n in names}

    def build(x):
        a = attrs(fluid.ParamAttr, fluid.regularizer.L2Decay)
        h = L.fc(x, 5, param_attr=a["w1"], bias_attr=a["b1"], act="tanh")
        return L.fc(h, 2, param_attr=a["w2"], bias_attr=a["b2"])

    net = fluid.Program(build)
    net.set_state_dict(before)
    out = net(torch.from_numpy(x))
    optimizer = torch.optim.SGD(net.param_groups(0.1))
    optimizer.zero_grad()
    L.mean(out * out).backward()
    optimizer.step()
    assert not np.array_equal(after["w1"], before["w1"]) and np.array_equal(after["w2"], before["w2"])
    for name in names:
        np.testing.assert_allclose(net.get_parameter(name).detach().numpy(), after[name], rtol=1e-5, atol=1e-7,
                                   err_msg=name)
