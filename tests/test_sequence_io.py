"""lodtensor.fluid.io: Paddle's LoDTensor files and .pdparams without Paddle (the files real Paddle
writes and reads are checked in tests/paddle/test_paddle_io.py)."""

import io
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.fluid import io as fio
from tests.strategies import lod_tensors


def _bytes(t):
    buf = io.BytesIO()
    fio.save_lod_tensor(t, buf)
    return buf.getvalue()


@settings(max_examples=40, deadline=None)
@given(lod_tensors(min_levels=1, max_levels=3), st.sampled_from(["float32", "float64", "int64", "int32", "bool", "u1"]))
def test_round_trip(t, dtype):
    t = t.with_data(t.numpy().astype(dtype))
    back = fio.load_lod_tensor(io.BytesIO(_bytes(t)))
    assert back.lod() == t.lod()
    assert back.numpy().dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_every_truncation_and_trailing_bytes_raise_value_error():
    blob = _bytes(lt.LoDTensor(np.arange(12, dtype="float32").reshape(6, 2), [[0, 1, 3], [0, 2, 2, 6]]))
    for n in range(len(blob)):
        with pytest.raises(ValueError, match="truncated|corrupted|not a Paddle"):
            fio.load_lod_tensor(io.BytesIO(blob[:n]))
    with pytest.raises(ValueError, match="bytes after the tensor"):
        fio.load_lod_tensor(io.BytesIO(blob + b"\0"))


def test_corrupted_fields_raise_value_error():
    blob = bytearray(_bytes(lt.LoDTensor(np.arange(4, dtype="int64"), [[0, 1, 4]])))
    bad_version = bytes([7]) + bytes(blob[1:])
    with pytest.raises(ValueError, match="version 7"):
        fio.load_lod_tensor(io.BytesIO(bad_version))
    bad_lod = bytearray(blob)
    bad_lod[20] = 9  # second offset 1 -> 9: past the rows
    with pytest.raises(ValueError, match="invalid lod"):
        fio.load_lod_tensor(io.BytesIO(bytes(bad_lod)))
    huge_levels = bytes(blob[:4]) + (10**6).to_bytes(8, "little") + bytes(blob[12:])
    with pytest.raises(ValueError, match="lod levels"):
        fio.load_lod_tensor(io.BytesIO(huge_levels))


def test_combined_and_directories(tmp_path):
    named = {"b": lt.LoDTensor(np.ones((2, 2), "float32")), "a": lt.LoDTensor(np.arange(3), [[0, 3]])}
    fio.save_combine({k: named[k] for k in sorted(named)}, str(tmp_path / "all"))
    state = fio.load_program_state(str(tmp_path / "all"), var_list=["b", "a"])
    assert sorted(state) == ["a", "b"] and state["a"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="does not store variable names"):
        fio.load_program_state(str(tmp_path / "all"))
    with pytest.raises(ValueError, match="more variables than names"):
        fio.load_combine(str(tmp_path / "all"), ["a"])
    d = tmp_path / "d"
    d.mkdir()
    for k, v in named.items():
        fio.save_lod_tensor(v, str(d / k))
    (d / "__model__").write_bytes(b"program")
    assert sorted(fio.load_program_state(str(d))) == ["a", "b"]
    (d / "junk").write_bytes(b"\1\2\3")
    with pytest.raises(ValueError, match="junk"):
        fio.load_program_state(str(d))


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_pdparams_loads_arrays_only(tmp_path):
    good = tmp_path / "m.pdparams"
    with open(good, "wb") as f:
        pickle.dump({"w": np.arange(3.0), "StructuredToParameterName@@": {"w": "w"}, "t": ("t", np.ones(2))}, f,
                    protocol=4)
    state = fio.load_program_state(str(tmp_path / "m"))
    assert sorted(state) == ["t", "w"] and state["t"].tolist() == [1.0, 1.0]
    evil = tmp_path / "evil.pdparams"
    with open(evil, "wb") as f:
        pickle.dump({"w": _Evil()}, f, protocol=4)
    with pytest.raises(ValueError, match="refusing to load"):
        fio.load_program_state(str(evil))
    with open(tmp_path / "cut.pdparams", "wb") as f:
        f.write(good.read_bytes()[:-5])
    with pytest.raises(ValueError, match="truncated or corrupted"):
        fio.load_pdparams(str(tmp_path / "cut.pdparams"))
