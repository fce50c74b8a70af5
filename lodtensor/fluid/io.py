"""Paddle's checkpoint files without Paddle: the binary LoDTensor format and ``.pdparams``.

One LoDTensor record (what ``fluid.io.save_vars`` / ``save_params`` write per
variable, and ``save_combine`` writes one after the other, sorted by name)::

    uint32 version (0)
    uint64 lod_level; per level: uint64 byte size, then that many bytes of uint64 offsets
    uint32 version (0)
    int32  desc size; a protobuf ``VarType.TensorDesc`` {1: data_type (enum), 2: dims (int64)}
    raw data, little-endian, C order (numel * itemsize bytes)

A ``.pdparams`` file is a pickle of ``{name: ndarray}`` (``paddle.save`` /
``paddle.static.save``); it is parsed by :mod:`._pdparams`, which runs no code
from the file and makes arrays only of plain numeric dtypes from bytes present.
Every corrupt file of these formats raises ValueError naming the file.

>>> import io, numpy as np
>>> import lodtensor as lt
>>> buf = io.BytesIO()
>>> save_lod_tensor(lt.LoDTensor(np.arange(6, dtype="float32").reshape(3, 2), [[0, 1, 3]]), buf)
>>> t = load_lod_tensor(io.BytesIO(buf.getvalue()))
>>> t.lod(), t.data.tolist()
([[0, 1, 3]], [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
"""

import math
import os
import struct

import numpy as np

from ..backend import backend_name_of, backend_of
from ..lod import MAX_LOD_LEVELS
from ..tensor import LoDTensor
from ._pdparams import read_pdparams

__all__ = [
    "load_lod_tensor",
    "save_lod_tensor",
    "load_combine",
    "save_combine",
    "load_program_state",
    "load_pdparams",
]

# paddle/fluid/framework/framework.proto, VarType.Type
_DTYPES = {
    0: np.dtype("bool"),
    1: np.dtype("<i2"),
    2: np.dtype("<i4"),
    3: np.dtype("<i8"),
    4: np.dtype("<f2"),
    5: np.dtype("<f4"),
    6: np.dtype("<f8"),
    20: np.dtype("u1"),
    21: np.dtype("i1"),
    22: np.dtype("<u2"),  # BF16: its raw bits, as Paddle's own load_program_state returns it (uint16)
    23: np.dtype("<c8"),
    24: np.dtype("<c16"),
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}  # uint16 saves as BF16, as Paddle's set() takes it
_MAX_LEVELS = MAX_LOD_LEVELS
_MAX_RANK = 32  # NumPy 1.x's limit (Paddle's is 9)


# -- protobuf TensorDesc ------------------------------------------------------------------------
def _varint(value):
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode_desc(code, dims):
    out = b"\x08" + _varint(code)
    for d in dims:
        out += b"\x10" + _varint(int(d))
    return out


def _read_varint(buf, pos, where):
    value, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError(f"{where}: truncated varint in the tensor description")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError(f"{where}: malformed varint in the tensor description")


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def _decode_desc(buf, where):
    pos, code, dims = 0, None, []
    while pos < len(buf):
        key, pos = _read_varint(buf, pos, where)
        field, wire = key >> 3, key & 7
        if field == 1 and wire == 0:
            code, pos = _read_varint(buf, pos, where)
        elif field == 2 and wire == 0:
            d, pos = _read_varint(buf, pos, where)
            dims.append(_signed(d))
        elif field == 2 and wire == 2:  # packed dims
            n, pos = _read_varint(buf, pos, where)
            end = pos + n
            if end > len(buf):
                raise ValueError(f"{where}: truncated dims in the tensor description")
            while pos < end:
                d, pos = _read_varint(buf, pos, where)
                dims.append(_signed(d))
        else:
            raise ValueError(f"{where}: unexpected field {field} (wire type {wire}) in the tensor description")
        if len(dims) > _MAX_RANK:
            raise ValueError(f"{where}: the tensor description has more than {_MAX_RANK} dims")
    if code is None:
        raise ValueError(f"{where}: the tensor description has no data type")
    if code not in _DTYPES:
        raise ValueError(f"{where}: unsupported Paddle data type code {code}; expected one of {sorted(_DTYPES)}")
    if any(d < 0 for d in dims):
        raise ValueError(f"{where}: negative dims {dims} in the tensor description")
    return _DTYPES[code], tuple(dims)


# -- records --------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, buf, name):
        self.buf, self.pos, self.name = buf, 0, name

    def take(self, n, what):
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError(
                f"{self.name}: truncated or corrupted LoDTensor file: {what} needs {n} bytes at offset "
                f"{self.pos}, {len(self.buf) - self.pos} left"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]


def _read_record(reader, arrays=False):
    """The next record: a LoDTensor, or with ``arrays`` its data (0-d tensors too, which a LoDTensor cannot hold)."""
    where = reader.name
    version = reader.unpack("<I", "the LoDTensor version")
    if version != 0:
        raise ValueError(
            f"{where}: not a Paddle LoDTensor file (version {version} at offset {reader.pos - 4}, expected 0)"
        )
    n_levels = reader.unpack("<Q", "the lod level count")
    if n_levels > _MAX_LEVELS:
        raise ValueError(f"{where}: corrupted LoDTensor file: {n_levels} lod levels (at most {_MAX_LEVELS} expected)")
    levels = []
    for k in range(n_levels):
        size = reader.unpack("<Q", f"the byte size of lod level {k}")
        if size % 8:
            raise ValueError(f"{where}: corrupted LoDTensor file: lod level {k} has {size} bytes, not a multiple of 8")
        levels.append(np.frombuffer(reader.take(size, f"lod level {k}"), dtype="<u8").astype(np.int64))
    version = reader.unpack("<I", "the tensor version")
    if version != 0:
        raise ValueError(f"{where}: corrupted LoDTensor file: tensor version {version}, expected 0")
    desc_size = reader.unpack("<i", "the tensor description size")
    if desc_size < 0:
        raise ValueError(f"{where}: corrupted LoDTensor file: tensor description size {desc_size}")
    dtype, dims = _decode_desc(reader.take(desc_size, "the tensor description"), where)
    numel = math.prod(dims)  # Python ints: no wrap-around, checked against the bytes present below
    if math.prod(max(d, 1) for d in dims) * dtype.itemsize >= 1 << 62:
        raise ValueError(f"{where}: corrupted LoDTensor file: dims {list(dims)} of {dtype.name} exceed any memory")
    raw = reader.take(numel * dtype.itemsize, f"the data of shape {list(dims)} {dtype.name}")
    flat = np.frombuffer(raw, dtype=dtype) if numel else np.empty(0, dtype)
    if dtype.kind == "b":  # a bool is 0 or 1: other byte values are normalised
        data = flat.view(np.uint8).reshape(dims).astype(np.bool_)  # a 0-d array stays an array
    else:
        data = flat.reshape(dims).astype(dtype.newbyteorder("="), copy=True)
    if data.ndim == 0:
        if levels:
            raise ValueError(f"{where}: corrupted LoDTensor file: a 0-d tensor cannot carry a lod")
        if arrays:
            return data
        raise ValueError(f"{where}: holds a 0-d tensor (a Paddle scalar), which a LoDTensor cannot hold (axis 0 "
                         f"holds the rows); load_program_state() returns it as a 0-d array")
    if not levels:
        return data if arrays else LoDTensor(data)
    try:
        t = LoDTensor(data, levels)
    except ValueError as err:
        raise ValueError(f"{where}: corrupted LoDTensor file: invalid lod: {err}") from None
    return data if arrays else t


def _bf16_bits(data):
    """bfloat16 data (torch's; NumPy has none) as its bits in uint16, Paddle's BF16 record; else None.
    The exact widening to float32 (the backend's to_numpy) keeps the bits in its top half."""
    be = backend_of(data) if backend_name_of(data) is not None else None  # a list, a scalar: NumPy's
    try:
        if be is None or data.dtype != be.as_dtype("bfloat16"):
            return None
    except TypeError:  # a library without bfloat16 holds none
        return None
    wide = np.ascontiguousarray(be.to_numpy(data), dtype=np.float32)
    return (wide.view(np.uint32) >> 16).astype(np.uint16)


def _record(t, where="save_lod_tensor()"):
    if isinstance(t, LoDTensor):
        t._check_fits(where)  # a lod that does not fit the rows would make a file no reader takes
        bits = _bf16_bits(t.data)
        data, lod = t.numpy() if bits is None else bits, t.lod()
    else:
        bits = _bf16_bits(t)
        data, lod = np.asarray(t) if bits is None else bits, []
    dtype = data.dtype.newbyteorder("<")
    code = _CODES.get(dtype)
    if code is None:
        raise TypeError(f"save_lod_tensor(): dtype {data.dtype} has no Paddle data type; expected one of "
                        f"{sorted(d.name for d in _CODES)}")
    parts = [struct.pack("<IQ", 0, len(lod))]
    for level in lod:
        parts.append(struct.pack("<Q", 8 * len(level)))
        parts.append(np.asarray(level, dtype="<u8").tobytes())
    desc = _encode_desc(code, data.shape)
    parts.append(struct.pack("<Ii", 0, len(desc)))
    parts.append(desc)
    parts.append(np.ascontiguousarray(data, dtype=dtype).tobytes())
    return b"".join(parts)


def _read_bytes(file):
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as f:
            return f.read(), os.fspath(file)
    if hasattr(file, "read"):
        return file.read(), getattr(file, "name", "<stream>")
    raise TypeError(f"file must be a path or a binary file object, got {type(file).__name__}")


def _write_bytes(file, payload):
    if isinstance(file, (str, os.PathLike)):
        with open(file, "wb") as f:
            f.write(payload)
    elif hasattr(file, "write"):
        file.write(payload)
    else:
        raise TypeError(f"file must be a path or a binary file object, got {type(file).__name__}")


def load_lod_tensor(file):
    """Read one LoDTensor (data and lod) from Paddle's binary format (a path or a binary file).

    Raises ``ValueError`` naming the file and the offset for a truncated or corrupted file,
    or for bytes left over after the tensor.

    >>> import io
    >>> import lodtensor as lt
    >>> buf = io.BytesIO()
    >>> save_lod_tensor(lt.LoDTensor(np.arange(3, dtype="int64"), [[0, 1, 3]]), buf)
    >>> t = load_lod_tensor(io.BytesIO(buf.getvalue()))
    >>> t.lod(), t.data.tolist()
    ([[0, 1, 3]], [0, 1, 2])
    >>> load_lod_tensor(io.BytesIO(buf.getvalue()[:-4]))
    Traceback (most recent call last):
    ...
    ValueError: <stream>: truncated or corrupted LoDTensor file: the data of shape [3] int64 needs 24 bytes ...
    """
    return _read_one(file, arrays=False)


def _read_one(file, arrays):
    buf, name = _read_bytes(file)
    reader = _Reader(buf, name)
    t = _read_record(reader, arrays)
    if reader.pos != len(buf):
        raise ValueError(f"{name}: {len(buf) - reader.pos} bytes after the tensor; is this a combined file? "
                         f"use load_combine() or load_program_state()")
    return t


def save_lod_tensor(t, file):
    """Write ``t`` (a LoDTensor or an array) in Paddle's binary LoDTensor format, lod included;
    Paddle's ``load`` operator (``fluid.io.load_vars``) reads it back. torch bfloat16 data, and
    NumPy uint16 (its bits, as Paddle takes uint16), are written as Paddle's BF16.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "fc_0.w_0")  # one file per variable, as fluid.io.save_params
    >>> save_lod_tensor(np.ones((2, 3), "float32"), path)
    >>> load_lod_tensor(path).shape(), load_program_state(os.path.dirname(path))["fc_0.w_0"].shape
    ([2, 3], (2, 3))
    """
    _write_bytes(file, _record(t))


def _names(names, where):
    """``names`` (strings, or objects with ``.name``) as a list of str, each once."""
    if isinstance(names, (str, bytes)):
        raise TypeError(f"{where}: the variable names must be a list of names, got the {type(names).__name__} "
                        f"{names!r} (write [{names!r}])")
    out = [getattr(v, "name", v) for v in names]
    bad = next((n for n in out if not isinstance(n, str)), None)
    if bad is not None:
        raise TypeError(f"{where}: variable names must be strings, got {type(bad).__name__} {bad!r}")
    if len(set(out)) != len(out):
        seen = set()
        dup = next(n for n in out if n in seen or seen.add(n))
        raise ValueError(f"{where}: variable name {dup!r} is given twice; name each variable once")
    return out


def _ordered(names, order, what):
    if order == "sorted":
        return sorted(names)
    if order == "given":
        return list(names)
    raise ValueError(f"{what}: order must be 'sorted' or 'given', got {order!r}")


def load_combine(file, names, *, order="sorted"):
    """``{name: LoDTensor}`` from a combined file (:func:`save_combine`, ``save_params(..., filename=...)``).

    A combined file stores the tensors one after the other, without their
    names. Paddle's ``fluid.io.save_vars`` / ``save_params`` / ``load_vars`` with
    ``filename=`` write and read them sorted by name, and so does
    :func:`save_combine`: with ``order="sorted"`` (the default) the file is read
    as ``sorted(names)``, whatever order ``names`` has. ``order="given"`` reads
    them in the order of ``names`` (Paddle's ``load_combine`` operator), for a
    file a program wrote in another order.

    Raises
    ------
    ValueError
        A name given twice, a truncated or corrupted file, or bytes left
        after the named tensors; the message names the file.

    Examples
    --------
    >>> import io
    >>> import lodtensor as lt
    >>> buf = io.BytesIO()
    >>> save_combine({"w": np.ones((2, 2), "float32"), "b": lt.LoDTensor(np.arange(3), [[0, 3]])}, buf)
    >>> state = load_combine(io.BytesIO(buf.getvalue()), ["w", "b"])
    >>> state["b"].lod(), state["w"].shape()
    ([[0, 3]], [2, 2])
    """
    return _read_combined(file, names, order, arrays=False)


def _read_combined(file, names, order, arrays):
    buf, where = _read_bytes(file)
    wanted = _ordered(_names(names, f"load_combine() of {where}"), order, "load_combine()")
    reader = _Reader(buf, where)
    out = {}
    for name in wanted:
        out[name] = _read_record(reader, arrays)
    if reader.pos != len(buf):
        raise ValueError(f"{where}: {len(buf) - reader.pos} bytes left after the {len(out)} named tensors; "
                         f"the file holds more variables than names were given")
    return out


def save_combine(tensors, file, *, order="sorted"):
    """Write ``{name: tensor}`` (LoDTensors or arrays) as one combined file, sorted by name.

    Sorted, as ``fluid.io.save_params(..., filename=...)`` writes and as
    :func:`load_combine`, :func:`load_program_state` and Paddle's ``load_vars``
    read. ``order="given"`` writes the dict's order instead (for Paddle's raw
    ``load_combine`` operator with its inputs in that order).

    Examples
    --------
    >>> import io
    >>> buf = io.BytesIO()
    >>> save_combine({"b": np.zeros(2, "int64"), "a": np.ones(1, "int64")}, buf)
    >>> [t.numpy().tolist() for t in load_combine(io.BytesIO(buf.getvalue()), ["a", "b"], order="given").values()]
    [[1], [0, 0]]
    """
    names = _ordered(_names(list(tensors), "save_combine()"), order, "save_combine()")
    _write_bytes(file, b"".join(_record(tensors[n], f"save_combine(): {n!r}") for n in names))


def load_pdparams(file):
    """``{name: ndarray}`` from a ``.pdparams`` pickle (``paddle.save`` / ``paddle.static.save``).

    The pickle is parsed without running code from it, and without NumPy's
    unpickling constructors (which trust the file's dtype state and buffers):
    an array comes back only when its dtype is a plain numeric or bool dtype,
    its shape a tuple of non-negative ints and its byte count
    ``prod(shape) * itemsize``. Arrays are fresh copies in native byte order;
    Paddle's name table entry (``StructuredToParameterName@@``) is dropped and
    arrays it split into slices (``UnpackBigParamInfor@@``) are joined back.

    Raises
    ------
    ValueError
        Naming the file and the problem, for anything else: other globals
        (code), object / structured / datetime / string dtypes, shapes that do
        not match the bytes, a truncated or corrupted pickle, entries that are
        not arrays.

    Examples
    --------
    >>> import io, pickle
    >>> blob = pickle.dumps({"fc_0.w_0": np.ones((2, 3), "float32")}, protocol=4)
    >>> load_pdparams(io.BytesIO(blob))["fc_0.w_0"].shape
    (2, 3)
    >>> load_pdparams(io.BytesIO(pickle.dumps({"f": print}, protocol=4)))
    Traceback (most recent call last):
    ...
    ValueError: <stream>: refusing to load builtins.print: only the listed NumPy and container globals are admitted
    """
    buf, where = _read_bytes(file)
    return read_pdparams(buf, where)


_SKIP = ("__model__", ".pdmodel", ".pdopt", ".pdiparams.info")
_STATIC_SAVE = (".pdparams", ".pdopt", ".pdmodel")  # the files of paddle.static.save(program, prefix)


def load_program_state(model_path, var_list=None):
    """``{name: ndarray}`` from a Paddle checkpoint, as ``paddle.static.load_program_state``.

    ``model_path`` is one of:

    - a directory of per-variable files (``fluid.io.save_params(exe, dir)``): every
      file but the program (``__model__``, ``*.pdmodel``) is a variable named by its file;
      with ``var_list`` only those names are read;
    - a ``.pdparams`` pickle (``paddle.save`` / ``paddle.static.save``); as in Paddle, the
      prefix without the suffix, or the ``.pdopt`` / ``.pdmodel`` file of the same prefix, reads
      ``prefix.pdparams`` (and it comes first when ``prefix`` is also a directory). Paddle
      also merges the optimizer's ``.pdopt`` into the result; here only the parameters are read;
    - a combined file (``save_params(..., filename=...)``, ``*.pdiparams``): ``var_list``
      (names, or objects with ``.name``) says which variables it holds; they are read in
      sorted order, as Paddle writes them.

    Raises
    ------
    ValueError
        A name given twice in ``var_list`` (it would read another variable's
        data under it), a variable the checkpoint does not hold, or a corrupt
        file (the message names it). ``FileNotFoundError`` when nothing is at
        ``model_path``.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "params")
    >>> save_combine({"fc_0.w_0": np.ones((2, 2), "float32"), "fc_0.b_0": np.zeros(2, "float32")}, path)
    >>> sorted(load_program_state(path, ["fc_0.w_0", "fc_0.b_0"]))
    ['fc_0.b_0', 'fc_0.w_0']
    >>> load_program_state(path, ["fc_0.w_0", "fc_0.w_0"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: load_program_state() of .../params: variable name 'fc_0.w_0' is given twice; name each variable once
    """
    path = os.fspath(model_path)
    names = None if var_list is None else _names(var_list, f"load_program_state() of {path}")
    prefix = next((path[: -len(s)] for s in _STATIC_SAVE if path.endswith(s)), path)
    if os.path.isfile(prefix + ".pdparams"):  # as Paddle: paddle.static.save's prefix, or any file it wrote
        path = prefix + ".pdparams"
    if os.path.isdir(path):
        files = sorted(f for f in os.listdir(path) if not f.startswith(".") and not f.endswith(_SKIP))
        wanted = names if names is not None else [f for f in files if os.path.isfile(os.path.join(path, f))]
        out = {}
        for name in wanted:
            file = os.path.join(path, name)
            if not os.path.isfile(file):
                raise ValueError(f"load_program_state(): variable {name!r} has no file in {path}")
            out[name] = _read_one(file, arrays=True)
        return out
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_program_state(): {path} is neither a directory nor a file")
    with open(path, "rb") as f:
        head = f.read(2)
    if head[:1] == b"\x80":  # a pickle protocol marker: .pdparams
        state = load_pdparams(path)
        if names is None:
            return state
        missing = [n for n in names if n not in state]
        if missing:
            raise ValueError(f"load_program_state(): {path} has no variable {missing[0]!r} "
                             f"({len(missing)} of the {len(names)} names missing; it holds {sorted(state)[:8]})")
        return {n: state[n] for n in names}
    if names is None:
        raise ValueError(
            f"load_program_state(): {path} is a combined file, which does not store variable names; "
            f"pass var_list with the names of the variables saved in it"
        )
    return _read_combined(path, names, "sorted", arrays=True)
