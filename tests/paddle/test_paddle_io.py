"""Paddle's checkpoint files: written by real Paddle 2.6.2 and read by lodtensor.fluid.io, and
the other way round (the ``save``/``load``/``save_combine``/``load_combine`` operators,
``paddle.save`` / ``paddle.static.save`` ``.pdparams``, ``paddle.static.load_program_state``)."""


import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from _raw import RAW, run  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.fluid import io as fio  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def paddle_save(value, path):
    """Paddle's ``save`` operator (what ``fluid.io.save_vars`` runs per variable)."""

    def build(v, op):
        op("save", {"X": v["x"]}, {}, {"file_path": path})
        return v["x"]

    run(build, {"x": value})


def paddle_load(path, dtype):
    """Paddle's ``load`` operator: ``(data, lod)``."""
    return run(lambda v, op: op("load", {}, {"Out": dtype}, {"file_path": path})["Out"], {})[0]

TENSORS = [
    lt.LoDTensor(np.arange(12, dtype="float32").reshape(6, 2), [[0, 2, 2, 6]]),
    lt.LoDTensor(np.arange(10, dtype="int64").reshape(10, 1), [[0, 1, 3], [0, 2, 2, 10]]),
    lt.LoDTensor(np.linspace(0, 1, 24).reshape(2, 3, 4)),
    lt.LoDTensor(np.array([1, 0, 255], dtype="uint8")),  # bool has no save kernel in Paddle
    lt.LoDTensor(np.arange(6, dtype="int32")),
    lt.LoDTensor(np.zeros((0, 3), "float32"), [[0, 0]]),
]


@pytest.mark.parametrize("t", TENSORS, ids=range(len(TENSORS)))
def test_paddle_writes_we_read(tmp_path, t):
    path = str(tmp_path / "var")
    paddle_save(t, path)
    back = fio.load_lod_tensor(path)
    assert back.lod() == t.lod()
    assert back.numpy().dtype == t.numpy().dtype
    np.testing.assert_array_equal(back.numpy(), t.numpy())


@pytest.mark.parametrize("t", TENSORS, ids=range(len(TENSORS)))
def test_we_write_paddle_reads(tmp_path, t):
    path = str(tmp_path / "var")
    fio.save_lod_tensor(t, path)
    dtype = t.numpy().dtype.name
    data, lod = paddle_load(path, dtype)
    np.testing.assert_array_equal(data, t.numpy())
    assert data.dtype == t.numpy().dtype and lod == t.lod()
    with open(path, "rb") as f:  # byte for byte what Paddle writes
        ours = f.read()
    paddle_save(t, path + ".paddle")
    with open(path + ".paddle", "rb") as f:
        assert f.read() == ours


def test_combined_both_ways(tmp_path):
    named = {"b_w": TENSORS[0], "a_ids": TENSORS[1], "c": TENSORS[2]}
    path = str(tmp_path / "params")
    order = sorted(named)

    def save(v, op):
        op("save_combine", {"X": [v[n] for n in order]}, {"Y": ("uint8", RAW)}, {"file_path": path})
        return v[order[0]]

    run(save, dict(named))
    state = fio.load_program_state(path, var_list=list(named))
    assert sorted(state) == order
    for name in order:
        np.testing.assert_array_equal(state[name], named[name].numpy())
    ours = str(tmp_path / "ours")
    fio.save_combine({n: named[n] for n in order}, ours)
    got = run(lambda v, op: op("load_combine", {}, {"Out": [named[n].numpy().dtype.name for n in order]},
                               {"file_path": ours})["Out"], {})
    for (data, lod), name in zip(got, order):
        np.testing.assert_array_equal(data, named[name].numpy())
        assert lod == named[name].lod()


def test_pdparams_and_directories(tmp_path):
    weights = {"fc_0.w_0": np.random.rand(3, 4).astype("float32"), "emb": np.arange(6, dtype="int64").reshape(3, 2)}
    paddle.disable_static()
    paddle.save({k: paddle.to_tensor(v) for k, v in weights.items()}, str(tmp_path / "m.pdparams"))
    state = fio.load_program_state(str(tmp_path / "m.pdparams"))
    assert sorted(state) == sorted(weights)
    for k, v in weights.items():
        np.testing.assert_array_equal(state[k], v)
    # the suffix may be left out, as in Paddle
    assert sorted(fio.load_program_state(str(tmp_path / "m"))) == sorted(weights)
    # a directory of per-variable files, written by Paddle's save operator, read both ways
    d = tmp_path / "dir"
    d.mkdir()
    for name, value in weights.items():
        paddle_save(value, str(d / name))
    state = fio.load_program_state(str(d))
    for k, v in weights.items():
        np.testing.assert_array_equal(state[k], v)
    ours = tmp_path / "ours"
    ours.mkdir()
    for name, value in weights.items():
        fio.save_lod_tensor(value, str(ours / name))
    for name, value in weights.items():
        data, _ = paddle_load(str(ours / name), value.dtype.name)
        np.testing.assert_array_equal(data, value)


# -- issue #25: .pdparams from every Paddle writer, and combined files in Paddle's order ---------------
DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64"]


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_pdparams_of_every_protocol_and_dtype(tmp_path, protocol):
    rng = np.random.RandomState(protocol)
    weights = {d: (rng.rand(3, 4) * 100 - 50).astype(d) for d in DTYPES}
    weights["scalar"] = np.float32(1.5)
    weights["empty"] = np.zeros((0, 2), "float32")
    paddle.disable_static()
    path = str(tmp_path / "m.pdparams")
    paddle.save({k: paddle.to_tensor(v) for k, v in weights.items()}, path, protocol=protocol)
    ours = fio.load_pdparams(path)
    theirs = paddle.load(path, return_numpy=True)
    assert list(ours) == list(theirs) == list(weights)
    for k in weights:
        assert ours[k].dtype == theirs[k].dtype and ours[k].shape == theirs[k].shape, k
        np.testing.assert_array_equal(ours[k], theirs[k])


def test_static_save_and_layer_state_dicts(tmp_path):
    paddle.enable_static()
    try:
        main, start = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, start):
            x = paddle.static.data("x", [None, 3], "float32")
            paddle.static.nn.fc(paddle.static.nn.fc(x, 4), 2)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(start)
        paddle.static.save(main, str(tmp_path / "model"))
        theirs = paddle.static.load_program_state(str(tmp_path / "model"))
    finally:
        paddle.disable_static()
    ours = fio.load_program_state(str(tmp_path / "model"))
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        np.testing.assert_array_equal(ours[k], theirs[k])
    layer = paddle.nn.LSTM(3, 4)
    paddle.save(layer.state_dict(), str(tmp_path / "lstm.pdparams"))
    state = fio.load_pdparams(str(tmp_path / "lstm.pdparams"))
    assert sorted(state) == sorted(k for k in layer.state_dict())
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(state[k], v.numpy())


def test_big_param_slices_join_as_paddle_joins_them(tmp_path):
    import pickle

    from paddle.framework.io_utils import _pack_loaded_dict

    w = np.arange(20, dtype="float32").reshape(4, 5)
    state = {"w@@.0": w.reshape(-1)[:7], "w@@.1": w.reshape(-1)[7:], "b": np.ones(3, "float64"),
             "UnpackBigParamInfor@@": {"w": {"OriginShape": (4, 5), "slices": ["w@@.0", "w@@.1"]}}}
    path = tmp_path / "big.pdparams"
    path.write_bytes(pickle.dumps(state, protocol=2))
    theirs = _pack_loaded_dict(pickle.loads(path.read_bytes(), encoding="latin1"))
    ours = fio.load_pdparams(str(path))
    assert sorted(ours) == sorted(theirs) == ["b", "w"]
    for k in theirs:
        np.testing.assert_array_equal(ours[k], theirs[k])


def test_save_combine_writes_what_save_vars_writes(tmp_path):
    # Paddle's save_vars(filename=) sorts by name; lodtensor's save_combine writes the same bytes from any dict order
    values = {"zeta.w": np.arange(6, dtype="float32").reshape(2, 3), "alpha.b": np.arange(3, dtype="int64"),
              "mid": np.ones((2, 2), "float64")}
    paddle.enable_static()
    try:
        main, start = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, start):
            zero = paddle.nn.initializer.Constant(0)
            params = [paddle.static.create_parameter(list(v.shape), v.dtype.name, name=k, default_initializer=zero)
                      for k, v in values.items()]
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(start)
        scope = paddle.static.global_scope()
        for k, v in values.items():
            scope.find_var(k).get_tensor().set(v, paddle.CPUPlace())
        paddle.static.io.save_vars(exe, str(tmp_path), main, vars=params, filename="combined")
        theirs = paddle.static.load_program_state(str(tmp_path / "combined"), var_list=params)
    finally:
        paddle.disable_static()
    fio.save_combine(values, str(tmp_path / "ours"))
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "combined").read_bytes()
    ours = fio.load_program_state(str(tmp_path / "combined"), list(values))
    for k, v in values.items():
        np.testing.assert_array_equal(ours[k], theirs[k])
        np.testing.assert_array_equal(ours[k], v)
    with pytest.raises(ValueError, match="'mid' is given twice"):
        fio.load_program_state(str(tmp_path / "combined"), ["mid", "zeta.w", "mid"])


def test_0d_tensors_are_paddle_scalars(tmp_path):
    # a record with no dims is what Paddle's load operator reads as a 0-d tensor
    d = tmp_path / "d"
    d.mkdir()
    fio.save_lod_tensor(np.float32(1.5), str(d / "lr"))
    data, lod = paddle_load(str(d / "lr"), "float32")
    assert data.shape == () and data == np.float32(1.5) and lod == []
    state = fio.load_program_state(str(d))
    assert state["lr"].shape == () and state["lr"] == np.float32(1.5)
    with pytest.raises(ValueError, match="holds a 0-d tensor"):
        fio.load_lod_tensor(str(d / "lr"))
