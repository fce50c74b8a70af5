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


# -- issue #25: duplicate names, the order of combined files, one error class ------------------------
def test_duplicate_names_are_refused_everywhere(tmp_path):
    # issue #25 item 11: load_program_state(path, ["a", "a"]) returned b's data under "a"
    named = {"a": lt.LoDTensor(np.arange(3.0)), "b": lt.LoDTensor(np.ones((2, 2), "float32"))}
    path = str(tmp_path / "all")
    fio.save_combine(named, path)
    with pytest.raises(ValueError, match=r"all: variable name 'a' is given twice"):
        fio.load_program_state(path, ["a", "a"])
    with pytest.raises(ValueError, match=r"all: variable name 'a' is given twice"):
        fio.load_combine(path, ["a", "a"])

    class Var:
        name = "b"

    with pytest.raises(ValueError, match="variable name 'b' is given twice"):
        fio.load_program_state(path, [Var(), "b"])
    d = tmp_path / "d"
    d.mkdir()
    for k, v in named.items():
        fio.save_lod_tensor(v, str(d / k))
    with pytest.raises(ValueError, match=r"d: variable name 'b' is given twice"):
        fio.load_program_state(str(d), ["b", "a", "b"])
    with pytest.raises(TypeError, match="variable names must be strings, got int 3"):
        fio.load_program_state(str(d), ["a", 3])


def test_combined_files_are_written_and_read_sorted_by_name():
    a, b = lt.LoDTensor(np.arange(3.0), [[0, 1, 3]]), lt.LoDTensor(np.ones((2, 2), "float32"))
    buf = io.BytesIO()
    fio.save_combine({"b": b, "a": a}, buf)  # dict order b, a: written a, b (as save_params writes)
    assert buf.getvalue() == _bytes(a) + _bytes(b)
    for names in (["a", "b"], ["b", "a"]):  # read sorted, whatever order the names come in
        got = fio.load_combine(io.BytesIO(buf.getvalue()), names)
        assert list(got) == ["a", "b"]
        assert got["a"].lod() == [[0, 1, 3]] and got["b"].numpy().tolist() == [[1, 1], [1, 1]]
    given = io.BytesIO()
    fio.save_combine({"b": b, "a": a}, given, order="given")  # Paddle's raw save_combine operator order
    assert given.getvalue() == _bytes(b) + _bytes(a)
    got = fio.load_combine(io.BytesIO(given.getvalue()), ["b", "a"], order="given")
    assert got["a"].lod() == [[0, 1, 3]] and list(got) == ["b", "a"]
    with pytest.raises(ValueError, match="order must be 'sorted' or 'given', got 'dict'"):
        fio.save_combine({"a": a}, io.BytesIO(), order="dict")
    with pytest.raises(TypeError, match="variable names must be strings"):
        fio.save_combine({1: a}, io.BytesIO())


def _named(blob, name="v.bin"):
    stream = io.BytesIO(blob)
    stream.name = name
    return stream


def test_dims_whose_product_wraps_int64_name_the_file():
    blob = _bytes(lt.LoDTensor(np.arange(4, dtype="int64")))
    desc = fio._encode_desc(3, [2**32, 2**32])  # 2**64 elements: wraps to 0 in int64
    head = blob[: blob.index(fio._encode_desc(3, [4])) - 4]
    crafted = head + len(desc).to_bytes(4, "little") + desc
    with pytest.raises(ValueError, match=r"^v\.bin: "):
        fio.load_lod_tensor(_named(crafted))
    huge = fio._encode_desc(3, [0, 2**62, 2**62])
    with pytest.raises(ValueError, match=r"^v\.bin: .*exceed any memory"):
        fio.load_lod_tensor(_named(head + len(huge).to_bytes(4, "little") + huge))


def test_bool_bytes_of_a_binary_file_are_normalised():
    blob = bytearray(_bytes(lt.LoDTensor(np.array([True, False, True]))))
    blob[-3:] = b"\x05\x00\xff"
    got = fio.load_lod_tensor(_named(bytes(blob))).numpy()
    assert got.tolist() == [True, False, True] and got.view(np.uint8).tolist() == [1, 0, 1]


def test_every_bit_flip_of_binary_and_combined_files_loads_or_names_the_file():
    t = lt.LoDTensor(np.arange(12, dtype="float32").reshape(6, 2), [[0, 1, 3], [0, 2, 2, 6]])
    blob = _bytes(t)
    combined = io.BytesIO()
    fio.save_combine({"w": t, "b": lt.LoDTensor(np.arange(3))}, combined)
    for reader, data, name in [(fio.load_lod_tensor, blob, "v.bin"),
                               (lambda f: fio.load_combine(f, ["w", "b"]), combined.getvalue(), "c.bin")]:
        for i in range(len(data)):
            for bit in range(8):
                flipped = bytearray(data)
                flipped[i] ^= 1 << bit
                try:
                    reader(_named(bytes(flipped), name))
                except ValueError as err:
                    assert str(err).startswith(name + ": "), err


def test_a_0d_record_loads_as_an_array_in_load_program_state(tmp_path):
    # Paddle 2.x saves scalars as 0-d tensors; a LoDTensor cannot hold one (axis 0 holds the rows)
    d = tmp_path / "d"
    d.mkdir()
    fio.save_lod_tensor(np.float32(2.5), str(d / "lr"))
    fio.save_lod_tensor(np.array(True), str(d / "flag"))
    state = fio.load_program_state(str(d))
    assert state["lr"].shape == () and state["lr"] == np.float32(2.5) and state["flag"].dtype == np.bool_
    fio.save_combine({"lr": np.float32(2.5), "w": np.ones(2, "float32")}, str(tmp_path / "c"))
    assert fio.load_program_state(str(tmp_path / "c"), ["w", "lr"])["lr"].shape == ()
    with pytest.raises(ValueError, match=r"lr: holds a 0-d tensor .*load_program_state\(\) returns it"):
        fio.load_lod_tensor(str(d / "lr"))
