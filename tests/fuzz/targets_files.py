"""Fuzz targets for model files and saved tensors: .pdparams pickles, Paddle binary files, lt.load headers.

Structure-aware: a ``.pdparams`` is mutated opcode by opcode (inserted,
deleted, duplicated, swapped, arguments replaced: dtype strings, byte orders,
shapes, byte counts, memo indices, globals allowed and forbidden), a Paddle
binary record field by field (versions, level counts and sizes, offsets, the
protobuf description's data type and dims), an ``lt.save`` header key by key
(depth, levels, dtypes, shapes, huge numbers). The contract for each door: a
result that is valid data, or a ValueError whose message starts with the
file's name; a crash, a hang or any other exception fails the target.
"""

import io
import json
import os
import pickle
import pickletools
import random
import struct
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor.fluid import io as fio

from .oracle import check_tensor
from .strategies import EDGE_INTS
from .targets import _valid_tensor, target

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "paddle"
PLAIN = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
DTYPE_STRINGS = PLAIN + ["m8", "M8", "O8", "O", "V8", "V0", "<U4", "U4", "S4", "f16", "c32", "b", "?", "i4,f8",
                         "m8[s]", "", "x" * 300]
ORDERS = ["<", ">", "|", "=", "x", ""]
GLOBALS = [
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
    ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"), ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"), ("builtins", "tuple"), ("__builtin__", "list"), ("builtins", "dict"),
    ("__builtin__", "bytes"), ("collections", "OrderedDict"),
    # never admitted: calling any of these would crash (faulthandler) or leak memory
    ("faulthandler", "_sigsegv"), ("ctypes", "string_at"), ("numpy", "frombuffer"), ("os", "system"),
    ("builtins", "eval"), ("numpy.lib.stride_tricks", "as_strided"), ("copyreg", "_reconstructor"),
]


def _int_op(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -(2**31) <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw if len(raw) < 256 else b"\x8b" + struct.pack("<i", len(raw)) + raw


def _str_op(s):
    raw = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


def _bytes_op(b):
    return b"B" + struct.pack("<I", len(b)) + b


def _global_op(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _palette(data):
    """One opcode (with its argument) of the kinds a .pdparams has, or that an attacker would add."""
    kind = data.draw(st.integers(0, 9))
    if kind == 0:
        return _int_op(data.draw(st.one_of(st.integers(-3, 300), st.sampled_from(EDGE_INTS))))
    if kind == 1:
        return _str_op(data.draw(st.sampled_from(DTYPE_STRINGS + ORDERS + ["latin1", "C", "F", "b"])))
    if kind == 2:
        return _bytes_op(b"\0" * data.draw(st.sampled_from([0, 1, 3, 8, 24, 64])))
    if kind == 3:
        return _global_op(*data.draw(st.sampled_from(GLOBALS)))
    if kind == 4:  # memo: small indices, and the ones that blew CPython's memo up
        index = data.draw(st.sampled_from([0, 1, 2, 5, 255, 1000, 2**31 - 1, 2**32 - 1]))
        put = data.draw(st.sampled_from([b"q", b"r", b"h", b"j"]))
        return put + (bytes([index & 0xFF]) if put in (b"q", b"h") else struct.pack("<I", index))
    if kind == 5:
        return b"\x94"
    if kind == 6:  # protocol 0/1 and object opcodes that a .pdparams never holds
        return data.draw(st.sampled_from([b"I1\n", b"S'a'\n", b"p0\n", b"g0\n", b"\x81", b"o", b"i__main__\nA\n",
                                          b"\x92", b"P0\n", b"Q", b"\x82\x01", b"\x8f", b"\x90", b"\x91", b"\x97",
                                          b"\x98", b"F1.0\n", b"G" + struct.pack(">d", 1.5)]))
    return data.draw(st.sampled_from([b"(", b".", b"t", b"\x85", b"\x86", b"\x87", b"R", b"b", b"s", b"u", b"a", b"e",
                                      b"0", b"1", b"2", b"}", b"]", b")", b"N", b"\x88", b"\x89", b"\x93", b"l", b"d"]))


def _replace_arg(data, arg):
    """A new opcode for an argument: another dtype string, byte order, int, bytes length or global."""
    if isinstance(arg, str):
        if " " in arg:  # a GLOBAL ("module name")
            return _global_op(*data.draw(st.sampled_from(GLOBALS)))
        return _str_op(data.draw(st.sampled_from(DTYPE_STRINGS + ORDERS + [arg[:-1], arg + arg])))
    if isinstance(arg, bool) or arg is None:
        return None
    if isinstance(arg, int):
        return _int_op(data.draw(st.one_of(st.sampled_from([arg - 1, arg + 1, -arg, arg * 2**31, 0]),
                                           st.sampled_from(EDGE_INTS))))
    if isinstance(arg, (bytes, bytearray)):
        cut = data.draw(st.integers(0, len(arg) + 16))
        return _bytes_op(bytes(arg[:cut]) + b"\x7f" * max(0, cut - len(arg)))
    return None


class _Reduce:
    def __init__(self, *reduce):
        self.reduce = reduce

    def __reduce__(self):
        return self.reduce


def _crafted_array(data):
    """A reduced array whose dtype state or call the file picks (what crashed NumPy's own unpickling)."""
    name = data.draw(st.sampled_from(["V8", "i8", "O8", "f4"]))
    offset = data.draw(st.sampled_from([0, 4, 1 << 30, -(1 << 40)]))
    state = data.draw(st.sampled_from([
        (3, "<", None, None, None, -1, -1, 0),
        (3, "|", None, ("a",), {"a": (np.dtype("i8"), offset)}, 8, 1, 16),
        (3, "|", None, None, None, -1, -1, 63),
        (4, "<", None, None, None, -1, -1, 0, {"m": 1}),
        (3, "<", ((np.dtype("f4"), (2,))), None, None, 8, 4, 0),
    ]))
    dtype = _Reduce(np.dtype, (name, False, True), state)
    shape = data.draw(st.sampled_from([(1,), (2, 2), (0,), (3,)]))
    raw = b"\x01" * data.draw(st.sampled_from([0, 4, 8, 16, 32]))
    if data.draw(st.booleans()):
        return _Reduce(np.ndarray, (shape, np.dtype("O"), raw))
    return _Reduce(np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, (0,), b"b"), (1, shape, dtype, False, raw))


def _seed_pickle(data):
    """A pickle to mutate: a Paddle-written fixture, or pickle.dumps of a state dict (some entries crafted)."""
    fixtures = sorted(FIXTURES.glob("*.pdparams"))
    if fixtures and data.draw(st.integers(0, 2)) == 0:
        return data.draw(st.sampled_from(fixtures)).read_bytes()
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    state = OrderedDict() if data.draw(st.booleans()) else {}
    for i in range(data.draw(st.integers(0, 4))):
        dtype = np.dtype(data.draw(st.sampled_from(PLAIN)))
        if data.draw(st.booleans()):
            dtype = dtype.newbyteorder(">")
        shape = data.draw(st.sampled_from([(), (0,), (3,), (2, 3), (1, 0, 2)]))
        value = rng.integers(-5, 6, shape).astype(dtype)
        if data.draw(st.booleans()):
            value = np.asfortranarray(value)
        state[f"p{i}.w_0"] = value if data.draw(st.integers(0, 3)) else (f"p{i}", value)
    if data.draw(st.integers(0, 2)) == 0:
        state["crafted"] = _crafted_array(data)
    if data.draw(st.integers(0, 4)) == 0:
        state["StructuredToParameterName@@"] = {k: k for k in state}
    if data.draw(st.integers(0, 4)) == 0:
        state["big@@.0"], state["big@@.1"] = np.arange(3.0), np.arange(3.0, 6.0)
        state["UnpackBigParamInfor@@"] = {"big": {"OriginShape": data.draw(st.sampled_from([(2, 3), (6,), (7,)])),
                                                  "slices": ["big@@.0", "big@@.1"]}}
    return pickle.dumps(state, protocol=data.draw(st.integers(2, 5)))


def _expect_pdparams(blob, name="fuzz.pdparams"):
    stream = io.BytesIO(blob)
    stream.name = name
    try:
        state = fio.load_pdparams(stream)
    except ValueError as err:
        assert str(err).startswith(name + ": "), err
        return None
    assert type(state) is dict
    for key, value in state.items():
        assert type(key) is str and type(value) is np.ndarray, (key, type(value))
        assert value.dtype.isnative and value.dtype.str[1:] in PLAIN, value.dtype
        assert value.tobytes() is not None and repr(value)  # every byte readable
        if value.dtype.kind == "b":
            assert value.view(np.uint8).max(initial=0) <= 1
    return state


@target
def pdparams_opcodes(data):
    """A .pdparams mutated opcode by opcode: a dict of plain arrays, or a ValueError naming the file."""
    blob = _seed_pickle(data)
    ops = [(op, arg, pos) for op, arg, pos in pickletools.genops(blob)]
    bounds = [pos for _, _, pos in ops] + [len(blob)]
    pieces = [blob[bounds[i] : bounds[i + 1]] for i in range(len(ops))]
    args = [arg for _, arg, _ in ops]
    for _ in range(data.draw(st.integers(0, 4))):
        n = len(pieces)
        i = data.draw(st.integers(1, max(1, n - 1)))  # the PROTO opcode stays, mostly
        action = data.draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "insert", "arg", "arg", "arg"]))
        if action == "delete" and n > 2:
            del pieces[i], args[i]
        elif action == "duplicate":
            j = data.draw(st.integers(1, n))
            pieces.insert(j, pieces[min(i, n - 1)])
            args.insert(j, args[min(i, n - 1)])
        elif action == "swap" and n > 2:
            j = data.draw(st.integers(1, n - 1))
            pieces[i], pieces[j] = pieces[j], pieces[i]
            args[i], args[j] = args[j], args[i]
        elif action == "insert":
            pieces.insert(i, _palette(data))
            args.insert(i, None)
        elif action == "arg":
            with_args = [k for k, a in enumerate(args) if a is not None and k < len(pieces)]
            if with_args:
                k = data.draw(st.sampled_from(with_args))
                new = _replace_arg(data, args[k])
                if new is not None:
                    pieces[k], args[k] = new, None
    if data.draw(st.integers(0, 5)) == 0:  # the first opcode too: another protocol, or none
        pieces[0] = data.draw(st.sampled_from([b"\x80\x01", b"\x80\x05", b"\x80\x06", b"", b"("]))
    mutated = b"".join(pieces)
    state = _expect_pdparams(mutated)
    if mutated == blob and state is not None:  # an unmutated seed: what pickle itself gives, where it is safe
        want = pickle.loads(blob) if b"crafted" not in blob else None
        if isinstance(want, dict):
            for key in set(state) & set(want):  # split big arrays are joined under a new key
                value = want[key][1] if isinstance(want[key], tuple) else want[key]
                np.testing.assert_array_equal(state[key], value)


@target
def pdparams_bytes(data):
    """A .pdparams with bytes flipped, cut or appended: a dict of plain arrays, or a ValueError naming the file."""
    blob = bytearray(_seed_pickle(data))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    action = data.draw(st.sampled_from(["flip", "flip", "cut", "append"]))
    if action == "cut":
        blob = blob[: rnd.randrange(len(blob) + 1)]
    elif action == "append":
        blob += bytes(rnd.randrange(256) for _ in range(data.draw(st.integers(1, 8))))
    else:
        for _ in range(data.draw(st.integers(1, 6))):
            blob[rnd.randrange(len(blob))] ^= 1 << rnd.randrange(8)
    _expect_pdparams(bytes(blob))


def _varint(value):
    return fio._varint(value)


def _record_parts(data, t):
    """Paddle's binary record of ``t`` as named fields, some replaced by adversarial values."""
    arr, lod = t.numpy(), t.lod()
    code = fio._CODES[arr.dtype.newbyteorder("<")]
    parts = {"version": struct.pack("<I", 0), "levels": struct.pack("<Q", len(lod))}
    level_parts = [(struct.pack("<Q", 8 * len(lv)), np.asarray(lv, "<u8").tobytes()) for lv in lod]
    desc = fio._encode_desc(code, arr.shape)
    parts.update({"tversion": struct.pack("<I", 0), "desc": desc, "data": np.ascontiguousarray(arr).tobytes()})
    for _ in range(data.draw(st.integers(0, 3))):
        field = data.draw(st.sampled_from(["version", "levels", "level_size", "offset", "tversion", "desc_code",
                                           "desc_dims", "desc_extra", "desc_size", "data"]))
        edge = data.draw(st.one_of(st.integers(-3, 40), st.sampled_from(EDGE_INTS)))
        if field in ("version", "tversion"):
            parts[field] = struct.pack("<I", edge % 2**32)
        elif field == "levels":
            parts["levels"] = struct.pack("<Q", edge % 2**64)
        elif field == "level_size" and level_parts:
            k = data.draw(st.integers(0, len(level_parts) - 1))
            level_parts[k] = (struct.pack("<Q", edge % 2**64), level_parts[k][1])
        elif field == "offset" and level_parts:
            k = data.draw(st.integers(0, len(level_parts) - 1))
            raw = bytearray(level_parts[k][1])
            if raw:
                at = 8 * data.draw(st.integers(0, len(raw) // 8 - 1))
                raw[at : at + 8] = struct.pack("<Q", edge % 2**64)
            level_parts[k] = (level_parts[k][0], bytes(raw))
        elif field == "desc_code":
            parts["desc"] = fio._encode_desc(edge % 2**64, arr.shape)
        elif field == "desc_dims":
            dims = data.draw(st.lists(st.one_of(st.integers(0, 6), st.sampled_from(EDGE_INTS)), max_size=5))
            packed = b"".join(_varint(d) for d in dims)
            parts["desc"] = b"\x08" + _varint(code) + (b"\x12" + _varint(len(packed)) + packed
                                                       if data.draw(st.booleans()) else
                                                       b"".join(b"\x10" + _varint(d) for d in dims))
        elif field == "desc_extra":
            parts["desc"] += data.draw(st.sampled_from([b"\x18\x01", b"\x10", b"\x12\x7f", b"\x08\xff" * 11, b"\xff"]))
        elif field == "desc_size":
            parts["desc_size"] = struct.pack("<I", edge % 2**32)  # read back as int32: negatives too
        elif field == "data":
            cut = data.draw(st.integers(0, len(parts["data"]) + 9))
            parts["data"] = (parts["data"] + b"\x02" * 9)[:cut]
    desc_size = parts.pop("desc_size", struct.pack("<i", len(parts["desc"])))
    return (parts["version"] + parts["levels"] + b"".join(a + b for a, b in level_parts) + parts["tversion"]
            + desc_size + parts["desc"] + parts["data"])


def _paddle_tensor(data):
    t = _valid_tensor(data)
    arr = t.numpy()
    if arr.dtype.kind == "b" or arr.dtype.newbyteorder("<") not in fio._CODES:
        arr = arr.astype("int64")
    return lt.LoDTensor(arr, t.lod()) if t.lod() else lt.LoDTensor(arr)


@target
def paddle_binary_files(data):
    """Paddle binary records (one, or combined) with fields mutated: the tensors, or a ValueError naming the file."""
    tensors = [_paddle_tensor(data) for _ in range(data.draw(st.integers(1, 3)))]
    blobs = [_record_parts(data, t) for t in tensors]
    name = "fuzz.bin"
    stream = io.BytesIO(b"".join(blobs) + data.draw(st.sampled_from([b"", b"", b"\0", b"\0" * 8])))
    stream.name = name
    names = [f"v{i}" for i in range(len(tensors))]
    if data.draw(st.integers(0, 4)) == 0:
        names = data.draw(st.lists(st.sampled_from(names + ["x"]), max_size=4))
    try:
        got = fio.load_lod_tensor(stream) if len(tensors) == 1 else fio.load_combine(stream, names)
    except ValueError as err:
        assert str(err).startswith(name + ": ") or f"of {name}: " in str(err), err
        return
    got = [got] if isinstance(got, lt.LoDTensor) else list(got.values())
    assert len(got) == len(set(names)) or len(tensors) == 1
    for t in got:
        check_tensor(t)
        assert t.numpy().dtype.newbyteorder("<") in fio._CODES or t.numpy().dtype.kind == "b"


_HEADER_VALUES = [0, 1, 2, 3, 64, 100_000, -1, 2**31, 2**63, 2**64, 10**400, 1.5, "1", None, True, [1], [],
                  [[1]], "<f8", "|b1", "|O", "<m8[s]", "i4,f8", ">f8", "<U4", {"a": 1}]


@target
def lt_load_headers(data):
    """lt.load of a file whose JSON header is mutated: the saved tensor, or a ValueError naming the file."""
    t = _valid_tensor(data)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.arrow")
        lt.save(path, t)
        import pyarrow as pa

        reader = pa.ipc.open_file(path)
        header = json.loads(reader.schema.metadata[b"lodtensor"])
        nests = {}
        for _ in range(data.draw(st.integers(1, 3))):
            key = data.draw(st.sampled_from(["lod_level", "num_rows", "row_shape", "dtype", "lod_crc32", "format",
                                             "version", "extra"]))
            how = data.draw(st.sampled_from(["value", "list", "nest", "drop"]))
            if how == "value":
                header[key] = data.draw(st.sampled_from(_HEADER_VALUES))
            elif how == "list":
                header[key] = data.draw(st.lists(st.sampled_from(_HEADER_VALUES[:12]), max_size=40))
            elif how == "nest":  # written as text: json.dumps itself recurses
                depth = data.draw(st.sampled_from([1, 3, 10, 2000]))
                nests[key] = "[" * depth + json.dumps(header.get(key)) + "]" * depth
                header[key] = f"@nest:{key}@"
            else:
                header.pop(key, None)
        text = json.dumps(header)
        for key, value in nests.items():
            text = text.replace(json.dumps(f"@nest:{key}@"), value)
        raw = text.encode()
        choice = data.draw(st.integers(0, 9))
        if choice == 0:
            raw = data.draw(st.sampled_from([b"[" * 50_000 + b"]" * 50_000, b"{" * 3000, b"\xff\xfe", b"", b"null",
                                             b'{"format": "lodtensor.ipc", "version": 1, "lod_level": 1' + b"0" * 5000
                                             + b"}"]))
        elif choice == 1:  # lod_level as deep as the header allows, with checksums to match
            header["lod_level"] = data.draw(st.sampled_from([t.lod_level + 1, 63, 64, 20_000]))
            header["lod_crc32"] = [0] * header["lod_level"]
            raw = json.dumps(header, separators=(",", ":")).encode()
        schema = reader.schema.with_metadata({b"lodtensor": raw})
        batch = pa.record_batch(reader.get_batch(0).columns, schema=schema)
        with pa.OSFile(path + ".h", "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            writer.write_batch(batch)
        del reader, batch
        try:
            got = lt.load(path + ".h", mmap=data.draw(st.booleans()))
        except ValueError as err:
            assert "t.arrow.h" in str(err), err
            return
        # accepted: the header still describes the column, so it is the saved tensor
        assert got.lod() == t.lod() and got.shape() == t.shape(), (got.lod(), t.lod())
        np.testing.assert_array_equal(np.asarray(got.data), t.numpy())
        check_tensor(got)
        del got


def _ipc_slots(buf):
    """Where the first record batch of an Arrow IPC file keeps its numbers: ``{name: [(pos, fmt), ...]}``.

    The batch length, each FieldNode's (length, null_count), each Buffer's
    (offset, length), the footer Block's (metaDataLength, bodyLength).
    """
    from lodtensor.interop.files import _fb_field, _fb_ref, _unpack

    size = len(buf)
    footer = size - 10 - _unpack("<i", buf, size - 10)
    vector = _fb_ref(buf, _fb_field(buf, _fb_ref(buf, footer), 3))
    block = vector + 4
    pos = _unpack("<q", buf, block)
    start = pos + 8 if _unpack("<i", buf, pos) == -1 else pos + 4
    header = _fb_ref(buf, _fb_field(buf, _fb_ref(buf, start), 2))
    slots = {"block": [(block + 8, "<i"), (block + 16, "<q")], "length": [(_fb_field(buf, header, 0), "<q")]}
    for name, slot in (("nodes", 1), ("buffers", 2)):
        vec = _fb_ref(buf, _fb_field(buf, header, slot))
        slots[name] = [(vec + 4 + 8 * i, "<q") for i in range(2 * _unpack("<I", buf, vec))]
    return slots


@target
def lt_load_ipc_body(data):
    """lt.load of a file whose record batch numbers (node lengths, null counts, buffer offsets and lengths,
    the batch and block sizes) are changed in place: a ValueError naming the file, or the saved LoD and shape."""
    t = _valid_tensor(data)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.arrow")
        lt.save(path, t)
        buf = bytearray(Path(path).read_bytes())
        slots = _ipc_slots(bytes(buf))
        for _ in range(data.draw(st.integers(1, 3))):
            group = data.draw(st.sampled_from(sorted(slots)))
            pos, fmt = data.draw(st.sampled_from(slots[group]))
            old = struct.unpack_from(fmt, buf, pos)[0]
            bits = 8 * struct.calcsize(fmt)
            new = data.draw(st.one_of(st.sampled_from([old + 1, old - 1, old + 8, old - 8, old * 2, 0, -1, old + 64]),
                                      st.sampled_from(EDGE_INTS)))
            new = (new + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
            struct.pack_into(fmt, buf, pos, new)
        Path(path).write_bytes(bytes(buf))
        try:
            got = lt.load(path, mmap=data.draw(st.booleans()))
        except ValueError as err:
            assert "b.arrow" in str(err), err
            return
        assert got.lod() == t.lod() and got.shape() == t.shape(), (got.lod(), t.lod(), got.shape(), t.shape())
        check_tensor(got)
        del got
