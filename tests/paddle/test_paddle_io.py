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
