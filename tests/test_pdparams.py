"""``.pdparams`` files (lodtensor.fluid.io.load_pdparams): what real Paddle writes loads, and a crafted
pickle raises ValueError naming the file, without running NumPy's constructors or crashing (issue #25).

Repros that crashed the process (SIGSEGV) run in a child interpreter, so a regression fails the test
instead of killing the run. The Paddle-written fixtures are in tests/data/paddle (make_fixtures.py).
"""

import collections
import io
import os
import pickle
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lodtensor.fluid import _pdparams, _pickle_machine
from lodtensor.fluid import io as fio
from tests.data.paddle.values import expected

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "paddle"
ALLOWED = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
           "float32", "float64", "complex64", "complex128"]


def _limit_memory():
    limit = 4 << 30  # a memo blown up to 2**32 entries must fail, not take the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_child(code, timeout=120):
    """Run ``code`` in a fresh interpreter under a 4 GiB address-space limit; its stdout, failing on a signal."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_limit_memory)
    assert done.returncode == 0, f"exit {done.returncode} (negative: killed by a signal)\n{done.stdout}\n{done.stderr}"
    return done.stdout


def load(blob, name="m.pdparams"):
    stream = io.BytesIO(blob)
    stream.name = name
    return fio.load_pdparams(stream)


class _Reduce:
    """Pickles as ``(fn, args[, state])``: a hand-made pickle."""

    def __init__(self, *reduce):
        self.reduce = reduce

    def __reduce__(self):
        return self.reduce


# -- what Paddle writes ------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_paddle_state_dicts_at_every_protocol(protocol):
    state = fio.load_pdparams(str(FIXTURES / f"layer_p{protocol}.pdparams"))
    shapes = {"0.weight": (3, 2), "0.bias": (2,), "1.weight": (5, 2)}
    assert list(state) == list(shapes)  # the name table entry is dropped
    for name, shape in shapes.items():
        np.testing.assert_array_equal(state[name], expected(name, "float32", shape))
        assert state[name].dtype == np.float32 and state[name].flags.writeable and state[name].flags.owndata


def test_paddle_dtypes():
    state = fio.load_pdparams(str(FIXTURES / "dtypes.pdparams"))
    for name in ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64"]:
        assert state[name].dtype == np.dtype(name), name
        np.testing.assert_array_equal(state[name], expected(name, name, (2, 3)))
    bits = (expected("bfloat16", "float32", (4,)).view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(state["bfloat16"], bits)  # Paddle saves bfloat16 as its uint16 bits
    assert state["scalar"].shape == () and state["scalar"] == expected("scalar", "float32", ())
    assert state["empty"].shape == (0, 3) and state["empty"].dtype == np.float32


def test_paddle_static_save_and_load_program_state(tmp_path):
    state = fio.load_program_state(str(FIXTURES / "static"))  # the suffix may be left out, as in Paddle
    assert sorted(state) == ["fc_0.b_0", "fc_0.w_0"]
    np.testing.assert_array_equal(state["fc_0.w_0"], expected("fc_0.w_0", "float32", (3, 4)))
    assert list(fio.load_program_state(str(FIXTURES / "static.pdparams"), ["fc_0.w_0"])) == ["fc_0.w_0"]
    with pytest.raises(ValueError, match=r"static\.pdparams has no variable 'fc_1\.w_0'"):
        fio.load_program_state(str(FIXTURES / "static.pdparams"), ["fc_0.w_0", "fc_1.w_0"])
    with pytest.raises(ValueError, match="'fc_0.w_0' is given twice"):
        fio.load_program_state(str(FIXTURES / "static.pdparams"), ["fc_0.w_0", "fc_0.w_0"])


def test_a_saved_tensor_is_not_a_state_dict():
    with pytest.raises(ValueError, match=r"tensor\.pdtensor: a \.pdparams file holds a dict, got tuple"):
        fio.load_pdparams(str(FIXTURES / "tensor.pdtensor"))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_allowed_dtype_byte_order_and_layout(protocol):
    state = {}
    for name in ALLOWED:
        a = expected(name, name, (2, 3))
        state[name] = a
        state[name + ">"] = a.astype(a.dtype.newbyteorder(">"))
        state[name + "F"] = np.asfortranarray(a)
    state["scalar"] = np.float32(2.5)
    state["0-d"] = np.array(7, np.int16)
    state["empty"] = np.zeros((0, 4), "float64")
    state["tuple"] = ("tuple", np.arange(3))  # paddle.save of a Tensor inside a dict
    state["nd"] = np.arange(24, dtype="f4").reshape(2, 3, 4)[:, ::2]
    got = load(pickle.dumps(collections.OrderedDict(state), protocol=protocol))
    assert list(got) == list(state)
    for name, want in state.items():
        want = np.asarray(want[1] if isinstance(want, tuple) else want)
        assert got[name].dtype == want.dtype.newbyteorder("=") and got[name].shape == want.shape, name
        np.testing.assert_array_equal(got[name], want)
    assert got["boolF"].flags.f_contiguous


def test_bool_bytes_are_normalised():
    blob = pickle.dumps({"b": np.array([False, True, True])}, protocol=4).replace(b"\x00\x01\x01", b"\x00\x02\xff")
    got = load(blob)["b"]
    assert got.tolist() == [False, True, True] and got.view(np.uint8).tolist() == [0, 1, 1]
    zero_d = load(pickle.dumps({"b": np.array(True), "s": np.bool_(False)}, protocol=4))  # arrays, not scalars
    assert type(zero_d["b"]) is np.ndarray and zero_d["b"].shape == () and zero_d["b"]
    assert type(zero_d["s"]) is np.ndarray and not zero_d["s"]


def test_no_numpy_callable_is_ever_admitted():
    for key, stand_in in _pdparams._GLOBALS.items():
        assert isinstance(stand_in, _pickle_machine.Global), key
        assert getattr(stand_in.fn, "__module__", "").startswith("lodtensor."), key


# -- the crashes, in a child process ---------------------------------------------------------
def test_datetime_dtype_swapped_in_is_refused():
    # issue #25 item 1: 'i8' -> 'm8' in a protocol-2 pickle segfaulted
    out = run_child("""
        import io, pickle, numpy as np
        from lodtensor.fluid.io import load_pdparams
        blob = pickle.dumps({"w": np.arange(3)}, protocol=2).replace(b"i8", b"m8", 1)
        try:
            print(repr(load_pdparams(io.BytesIO(blob))))
        except ValueError as err:
            print("ValueError", err)
    """)
    assert out.startswith("ValueError <stream>: dtype 'm8' is not a plain numeric or bool dtype"), out


def test_object_array_over_file_bytes_is_refused():
    out = run_child("""
        import io, pickle, numpy as np
        from lodtensor.fluid.io import load_pdparams
        class A:
            def __reduce__(self):
                return (np.ndarray, ((4,), np.dtype("O"), b"A" * 32))
        for protocol in (2, 4):
            try:
                print(load_pdparams(io.BytesIO(pickle.dumps({"w": A()}, protocol=protocol)))["w"])
            except ValueError as err:
                print("ValueError", err)
    """)
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.startswith("ValueError <stream>: dtype 'O8'") for line in lines), out


def test_structured_dtype_with_a_huge_field_offset_is_refused():
    out = run_child("""
        import io, pickle, numpy as np
        from lodtensor.fluid.io import load_pdparams
        class R:
            def __init__(self, *r):
                self.r = r
            def __reduce__(self):
                return self.r
        fields = (3, "|", None, ("a",), {"a": (np.dtype("i8"), 1 << 30)}, 8, 1, 16)
        for name in ("V8", "i8"):  # a void dtype, and a plain name with a structured state
            dtype = R(np.dtype, (name, False, True), fields)
            arr = R(np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, (0,), b"b"),
                    (1, (1,), dtype, False, b"\\0" * 8))
            try:
                print(load_pdparams(io.BytesIO(pickle.dumps({"w": arr}, protocol=2)))["w"]["a"])
            except ValueError as err:
                print("ValueError", err)
    """)
    lines = out.splitlines()
    assert lines[0].startswith("ValueError <stream>: dtype 'V8' is not a plain"), out
    assert lines[1].startswith("ValueError <stream>: dtype 'i8' state") and "describes fields" in lines[1], out


def test_a_memo_index_past_the_opcodes_is_refused_without_allocating():
    out = run_child("""
        import io, pickle, numpy as np
        from lodtensor.fluid.io import load_pdparams
        blob = pickle.dumps({"w": np.arange(3)}, protocol=2)
        at = blob.index(b"q\\x00")
        try:
            load_pdparams(io.BytesIO(blob[:at] + b"r\\xff\\xff\\xff\\xff" + blob[at + 2:]))
        except ValueError as err:
            print("ValueError", err)
    """)
    assert out.startswith("ValueError <stream>: memo index 4294967295"), out


def test_single_bit_flips_of_paddle_files_load_or_name_the_file():
    out = run_child("""
        import io
        from lodtensor.fluid.io import load_pdparams
        count = {"loaded": 0, "refused": 0}
        for name in ("layer_p2", "layer_p4", "static"):
            blob = open(f"tests/data/paddle/{name}.pdparams", "rb").read()
            for i in range(len(blob)):
                for bit in range(8):
                    flipped = bytearray(blob)
                    flipped[i] ^= 1 << bit
                    stream = io.BytesIO(bytes(flipped))
                    stream.name = f"{name}.pdparams"
                    try:
                        state = load_pdparams(stream)
                    except ValueError as err:
                        assert str(err).startswith(stream.name + ": "), err
                        count["refused"] += 1
                    else:
                        assert all(type(k) is str and v.flags.owndata for k, v in state.items())
                        count["loaded"] += 1
        print(count["loaded"], count["refused"])
    """)
    loaded, refused = map(int, out.split())
    assert refused > 5000 and loaded > 1000, out  # flips in data bytes load other values; the rest is refused


def test_every_truncation_names_the_file():
    blob = (FIXTURES / "layer_p2.pdparams").read_bytes()
    for n in range(len(blob)):
        with pytest.raises(ValueError, match=r"^cut\.pdparams: "):
            load(blob[:n], "cut.pdparams")
    with pytest.raises(ValueError, match="3 bytes after the end of the pickle"):
        load(blob + b"abc")


# -- refused pickles ---------------------------------------------------------------------------------
def _reconstructed(shape, dtype_name, data, state=(3, "<", None, None, None, -1, -1, 0), fortran=False):
    dtype = _Reduce(np.dtype, (dtype_name, False, True), state)
    return _Reduce(np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, (0,), b"b"), (1, shape, dtype, fortran, data))


REFUSED = {
    "os.system": ({"w": _Reduce(os.system, ("echo pwned",))}, "refusing to load posix.system"),
    "eval": ({"w": _Reduce(eval, ("1",))}, r"refusing to load (__)?builtin(s|__)\.eval"),
    "np.frombuffer": ({"w": _Reduce(np.frombuffer, (b"\0" * 8,))}, "refusing to load numpy"),
    "ndarray called": ({"w": _Reduce(np.ndarray, ((2,), np.dtype("f8")))}, "numpy.ndarray is called directly"),
    "too few bytes": ({"w": _reconstructed((2, 3), "f4", b"\0" * 20)}, r"needs 24 bytes, the file holds 20"),
    "too many bytes": ({"w": _reconstructed((2,), "f4", b"\0" * 12)}, r"needs 8 bytes, the file holds 12"),
    "negative dim": ({"w": _reconstructed((-1, 2), "f4", b"")}, "non-negative ints"),
    "float dim": ({"w": _reconstructed((2.0,), "f4", b"\0" * 8)}, "non-negative ints"),
    "huge dims": ({"w": _reconstructed((0, 1 << 40, 1 << 40), "f4", b"")}, "larger than any memory"),
    "rank 33": ({"w": _reconstructed((1,) * 33, "f4", b"\0" * 4)}, "at most 32"),
    "object data": ({"w": _reconstructed((1,), "f8", [1.0])}, "object arrays are refused"),
    "unicode": ({"w": np.array(["ab"])}, "dtype 'U2'"),
    "bytes": ({"w": np.array([b"ab"])}, "dtype 'S2'"),
    "datetime": ({"w": np.zeros(2, "M8[s]")}, "dtype 'M8'"),
    "timedelta": ({"w": np.zeros(2, "m8[s]")}, "dtype 'm8'"),
    "void": ({"w": np.zeros(2, "V8")}, "dtype 'V8'"),
    "structured": ({"w": np.zeros(2, "i4,f8")}, "dtype 'V12'"),
    "longdouble": ({"w": np.zeros(2, np.longdouble)}, "dtype 'f16'"),
    "metadata": ({"w": np.zeros(2, np.dtype("f4", metadata={"a": 1}))}, "metadata"),
    "bad byte order": ({"w": _reconstructed((1,), "f4", b"\0" * 4, (3, "|", None, None, None, -1, -1, 0))},
                       "byte order '|'"),
    "dtype flags": ({"w": _reconstructed((1,), "f8", b"\0" * 8, (3, "<", None, None, None, -1, -1, 63))},
                    "describes fields"),
    "fortran flag": ({"w": _reconstructed((1,), "f8", b"\0" * 8, fortran=2)}, "Fortran-order flag"),
    "not an array": ({"w": [1, 2]}, "entry 'w' is a list, expected an array"),
    "int key": ({1: np.zeros(1)}, "a key is a int"),
    "not a dict": ([np.zeros(1)], "holds a dict, got list"),
    "deep": ({"w": [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}, "entry 'w' is a list"),
}


@pytest.mark.parametrize("name", list(REFUSED))
@pytest.mark.parametrize("protocol", [2, 4])
def test_refused(name, protocol):
    obj, match = REFUSED[name]
    with pytest.raises(ValueError, match=r"^bad\.pdparams: .*" + match):
        load(pickle.dumps(obj, protocol=protocol), "bad.pdparams")


def test_crafted_opcode_streams():
    ok = b"\x80\x04}\x94."  # {}
    assert load(ok) == {}
    for blob, match in [
        (b"", "does not start with a pickle protocol 2-5 marker"),
        (b"\x80\x01}.", "protocol 2-5"),
        (b"(dp0\n.", "protocol 2-5"),  # protocol 0
        (b"\x80\x04}\x94\x8a\xff" + b"\0" * 255 + b"0.", "at most 32"),  # LONG1 of 255 bytes
        (b"\x80\x04}I1\n0.", r"opcode INT \(b'I'\)"),  # text opcodes are not in a .pdparams
        (b"\x80\x04}\x94\x81.", r"opcode NEWOBJ"),
        (b"\x80\x04}P1\n.", r"opcode PERSID"),
        (b"\x80\x04}h\x05.", "memo entry 5 is read before it is written"),
        (b"\x80\x04}}b.", "BUILD sets the state of a dict"),
        (b"\x80\x04K\x01)R.", "REDUCE calls a int"),
        (b"\x80\x04}(\x8c\x01au.", "SETITEMS with an odd number"),
        (b"\x80\x04}(]Nu.", "a dict key is a list"),
        (b"\x80\x04}0.", "STOP at offset 4 leaves 0 objects"),
        (b"\x80\x04}}.", "leaves 2 objects"),
        (b"\x80\x04" + b"(" * 65, "more than 64 nested MARKs"),
        (b"\x80\x04}\x8c\x05numpy\x8c\x05dtype\x93\x8c\x02f4\x89\x88\x87R\x87.", r"REDUCE|TUPLE"),
        (b"\x80\x04c__builtin__\nexec\n.", "refusing to load __builtin__.exec"),
        (b"\x80\x04c" + b"a" * 300, "no line end within 256 bytes"),
        (b"\x80\x04X\xff\xff\xff\xff", r"BINUNICODE at offset 2 needs 4294967295 bytes, 0 left"),
        (b"\x80\x04\x8c\x02\xff\xfe.", "is not utf-8 text"),
    ]:
        with pytest.raises(ValueError, match=r"^m\.pdparams: .*" + match):
            load(blob)


def test_deep_nesting_is_no_recursion():
    # 1,000,000 nested tuples (TUPLE1): no RecursionError, the entry is simply not an array
    blob = b"\x80\x04}\x94\x8c\x01wN" + b"\x85" * 1_000_000 + b"s."
    with pytest.raises(ValueError, match="entry 'w' is a tuple, expected an array"):
        load(blob)


def test_opcode_and_stack_bounds(monkeypatch):
    blob = pickle.dumps({"w": np.arange(3)}, protocol=4)
    monkeypatch.setattr(_pickle_machine, "MAX_OPS", 10)
    with pytest.raises(ValueError, match="more than 10 pickle opcodes"):
        load(blob)
    monkeypatch.setattr(_pickle_machine, "MAX_OPS", 1 << 22)
    monkeypatch.setattr(_pickle_machine, "MAX_STACK", 100)
    with pytest.raises(ValueError, match="stack grows past 100 items"):
        load(b"\x80\x04" + b"N" * 101)
    assert list(load(blob)) == ["w"]


# -- Paddle's big-array slices (protocol 2/3 files of arrays over 1 GiB) ------------------------------
def test_big_params_are_joined():
    w = np.arange(12, dtype="f4").reshape(3, 4)
    info = {"w": {"OriginShape": (3, 4), "slices": ["w@@.0", "w@@.1"]}}
    state = {"b": np.ones(2), "w@@.0": w.reshape(-1)[:5], "w@@.1": w.reshape(-1)[5:], "UnpackBigParamInfor@@": info}
    got = load(pickle.dumps(state, protocol=2))
    assert sorted(got) == ["b", "w"]
    np.testing.assert_array_equal(got["w"], w)
    for bad, match in [
        ({"w": {"OriginShape": (3, 5), "slices": ["w@@.0", "w@@.1"]}}, "the slices hold 12 values, shape"),
        ({"w": {"OriginShape": (3, 4), "slices": ["w@@.0", "nope"]}}, "are not names of stored arrays"),
        ({"w": {"OriginShape": (3, 4), "slices": ["w@@.0", "w@@.0"]}}, "used twice"),
        ({"b": {"OriginShape": (12,), "slices": ["w@@.0", "w@@.1"]}}, "used twice"),
        ({"w": {"OriginShape": (-3, -4), "slices": ["w@@.0", "w@@.1"]}}, "non-negative ints"),
        ({"w": {"OriginShape": (0, 2**62, 2**62), "slices": ["w@@.0", "w@@.1"]}}, "larger than any memory"),
        ({"w": {"OriginShape": (3, 4)}}, "expected {'OriginShape'"),
        ([1], "expected a dict"),
    ]:
        with pytest.raises(ValueError, match=r"^m\.pdparams: 'UnpackBigParamInfor@@'.*" + match):
            load(pickle.dumps({**state, "UnpackBigParamInfor@@": bad}, protocol=2))


def test_messages_stay_short_whatever_the_file_built():
    deep = b"N" + b"\x85" * 200_000  # a 200,000-deep tuple as _reconstruct's argument
    blob = b"\x80\x04}\x94\x8c\x01wcnumpy.core.multiarray\n_reconstruct\n" + deep + b"\x85Rs."
    with pytest.raises(ValueError, match=r"^m\.pdparams: _reconstruct\(\(\(\(\.\.\.") as err:
        load(blob)
    assert len(str(err.value)) < 200
    long_key = pickle.dumps({"k" * 10**6: [1]}, protocol=4)
    with pytest.raises(ValueError, match="is a list, expected an array") as err:
        load(long_key)
    assert len(str(err.value)) < 200


def _memo_shared_bytes(arrays, size):
    """A pickle whose one byte string (memo 1) is the data of ``arrays`` arrays of ``size`` uint8."""
    import struct

    def text(x):  # SHORT_BINUNICODE
        return b"\x8c" + bytes([len(x)]) + x.encode()

    out = bytearray(b"\x80\x05")
    out += text("numpy._core.numeric") + text("_frombuffer") + b"\x93\x940"  # memo 0: the global (popped)
    out += b"\x8e" + struct.pack("<Q", size) + b"\0" * size + b"\x940"  # memo 1: BINBYTES8
    out += text("numpy") + text("dtype") + b"\x93" + text("u1") + b"\x89\x88\x87R\x940"  # memo 2: dtype('u1')
    out += b"(J" + struct.pack("<i", size) + b"t\x940"  # memo 3: the shape (size,)
    out += b"}("
    for i in range(arrays):
        out += text(f"w{i}") + b"h\x00(h\x01h\x02h\x03" + text("C") + b"tR"  # _frombuffer(bytes, dtype, shape, 'C')
    return bytes(out + b"u.")


def test_a_byte_string_shared_by_many_arrays_cannot_amplify_the_file():
    """Each array's bytes stand in a file once: a pickle memo entry handed to many arrays (1 MiB to
    5,000 of them: 5 GiB from a 1 MiB file) is refused before the memory is taken."""
    blob = _memo_shared_bytes(5000, 1 << 20)
    with pytest.raises(ValueError, match="the arrays would hold more bytes than the file"):
        fio.load_pdparams(io.BytesIO(blob))
    # the same byte string twice, tiny (CPython shares one-byte and empty strings between arrays): taken
    state = fio.load_pdparams(io.BytesIO(_memo_shared_bytes(3, 1)))
    assert [a.tolist() for a in state.values()] == [[0], [0], [0]]
