"""Reading ``.pdparams`` pickles without running NumPy's (or anyone's) constructors.

A ``.pdparams`` file (``paddle.save`` / ``paddle.static.save``) is a pickle of
``{name: ndarray}``. Python's unpickler would hand the file's arguments to
NumPy's ``_reconstruct``, ``ndarray.__setstate__`` and ``dtype.__setstate__``,
which trust them: a crafted dtype state or buffer is a memory-corruption
primitive. The file is parsed by the machine of :mod:`._pickle_machine`
instead, which runs no code: the globals a ``.pdparams`` names resolve to the
inert stand-ins defined here, never to the named objects. A stand-in only
records its arguments, and the one place an array is made is
:func:`_make_array`: dtype from a fixed allow-list of plain numeric and bool
dtypes (object, structured, datetime, void and string dtypes refused), shape a
tuple of non-negative ints, byte count equal to ``prod(shape) * itemsize``
checked before one ``np.frombuffer``, then a copy in native byte order.
Nothing is allocated from a declared size, only from bytes present.

>>> import pickle, numpy as np
>>> state = read_pdparams(pickle.dumps({"w": np.arange(3.0)}, protocol=2), "m.pdparams")
>>> state["w"].tolist()
[0.0, 1.0, 2.0]
>>> read_pdparams(pickle.dumps({"w": np.array(["a"])}, protocol=4), "m.pdparams")
Traceback (most recent call last):
...
ValueError: m.pdparams: dtype 'U1' is not a plain numeric or bool dtype (a .pdparams array holds one of
b1, c16, c8, f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8)
"""

import contextvars

import numpy as np

from ._pickle_machine import Global as _Global
from ._pickle_machine import Refused as _Refused
from ._pickle_machine import run as _run
from ._pickle_machine import short as _short

__all__ = ["read_pdparams"]

#: The dtypes a .pdparams array may have (NumPy's pickled names, without byte order).
_DTYPES = {name: np.dtype(name) for name in
           ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")}
_MAX_RANK = 32  # NumPy 1.x's limit (2.x takes 64); Paddle's is 9
# The bytes the arrays of the file being read may still take: each array's bytes stand in the file
# once, so all of them fit in its length (plus room for the one-byte and empty strings CPython
# shares between arrays). A byte string that the pickle memo hands to many arrays would otherwise
# make gigabytes from a small file.
_BUDGET = contextvars.ContextVar("pdparams_budget")
_SHARED_SLACK = 1 << 16
_NAME_TABLE = "StructuredToParameterName@@"
_BIG_PARAMS = "UnpackBigParamInfor@@"  # protocol 2/3 files split arrays over 1 GiB into slices


# -- the stand-ins the admitted globals resolve to ------------------------------------------------
class _Dtype:
    """``numpy.dtype(name, align, copy)`` awaiting its BUILD state (the byte order)."""

    def __init__(self, name):
        if type(name) is not str or name not in _DTYPES:
            raise _Refused(f"dtype {_short(name)} is not a plain numeric or bool dtype (a .pdparams array holds one of "
                           f"{', '.join(sorted(_DTYPES))})")
        self.name, self.order = name, "="

    def build(self, state):
        # (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
        if type(state) is not tuple or len(state) not in (8, 9) or state[0] not in (3, 4):
            raise _Refused(f"dtype {self.name!r} has an unexpected state {_short(state)}")
        order, rest, meta = state[1], state[2:8], state[8:]
        if rest != (None, None, None, -1, -1, 0) or any(m is not None for m in meta):
            raise _Refused(f"dtype {self.name!r} state {_short(state)} describes fields, a subarray, flags or "
                           f"metadata; a plain dtype has (3, order, None, None, None, -1, -1, 0)")
        if order not in ("<", ">", "|", "="):
            raise _Refused(f"dtype {self.name!r} has byte order {order!r}; expected '<', '>', '|' or '='")
        if order == "|" and _DTYPES[self.name].itemsize != 1:
            raise _Refused(f"dtype {self.name!r} has byte order '|', which only 1-byte dtypes have")
        self.order = order

    def dtype(self):
        base = _DTYPES[self.name]
        return base if self.order in "|=" or base.itemsize == 1 else base.newbyteorder(self.order)


class _Array:
    """An array: made by ``_reconstruct`` and filled by BUILD, or made whole (``scalar``, ``_frombuffer``)."""

    def __init__(self, array=None):
        self.array = array

    def build(self, state):
        if self.array is not None:
            raise _Refused("an array is filled twice")
        if type(state) is tuple and len(state) == 5 and state[0] == 1:
            state = state[1:]
        if type(state) is not tuple or len(state) != 4:
            raise _Refused(f"an array has an unexpected state {_short(state)}; expected (1, shape, dtype, "
                           f"fortran_order, bytes)")
        shape, dtype, fortran, raw = state
        if type(fortran) not in (bool, int) or fortran not in (0, 1):
            raise _Refused(f"an array's Fortran-order flag is {_short(fortran)}, expected a bool")
        self.array = _make_array(raw, dtype, shape, "F" if fortran else "C")


def _data(raw):
    """The bytes of an array: bytes from the file, or a latin-1 str (Python 2 pickles)."""
    if isinstance(raw, memoryview):
        return raw
    if type(raw) is str:
        try:
            return memoryview(raw.encode("latin-1"))
        except UnicodeEncodeError:
            raise _Refused("an array's data is text that is not latin-1 bytes") from None
    raise _Refused(f"an array's data is {_short(raw)}, expected bytes (object arrays are refused)")


def _count(shape, itemsize, what):
    """The element count of ``shape`` (a tuple of at most _MAX_RANK non-negative ints) that fits in memory."""
    if type(shape) not in (tuple, list) or len(shape) > _MAX_RANK or not all(
            type(d) is int and d >= 0 for d in shape):
        raise _Refused(f"{what} shape is {_short(shape)}, expected a tuple of at most {_MAX_RANK} non-negative ints")
    count, span = 1, itemsize
    for d in shape:
        count *= d
        span *= max(d, 1)
    if span >= 1 << 62:  # even with a zero dim NumPy refuses such a shape
        raise _Refused(f"{what} shape {tuple(shape)} of {itemsize}-byte items is larger than any memory")
    return count


def _make_array(raw, dtype, shape, order):
    """The one place an array is made: every part checked, then one frombuffer and a copy."""
    if not isinstance(dtype, _Dtype):
        raise _Refused(f"an array's dtype is {_short(dtype)}, expected numpy.dtype(...)")
    dtype = dtype.dtype()
    if type(shape) is not tuple:
        raise _Refused(f"an array's shape is {_short(shape)}, expected a tuple")
    count = _count(shape, dtype.itemsize, "an array's")
    raw = _data(raw)
    if raw.nbytes != count * dtype.itemsize:
        raise _Refused(f"an array of shape {shape} and dtype {dtype} needs {count * dtype.itemsize} bytes, "
                       f"the file holds {raw.nbytes}")
    budget = _BUDGET.get(None)
    if budget is not None:
        budget[0] -= raw.nbytes
        if budget[0] < 0:
            raise _Refused(f"the arrays would hold more bytes than the file ({budget[1]}): a byte string is "
                           f"used by several arrays")
    flat = np.frombuffer(raw, dtype=dtype) if count else np.empty(0, dtype=dtype)
    shaped = flat.reshape(shape, order=order)
    if dtype.kind == "b":  # a bool is 0 or 1: other byte values are normalised
        return shaped.view(np.uint8).astype(np.bool_)  # (not `!= 0`: a 0-d array would give a scalar)
    return shaped.astype(dtype.newbyteorder("="), order="K", copy=True)


def _reconstruct(args):
    # numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b'): an empty array for BUILD to fill
    if type(args) is not tuple or len(args) != 3 or args[0] is not _NDARRAY or args[1] != (0,):
        raise _Refused(f"_reconstruct{_short(args)}: expected (numpy.ndarray, (0,), b'b')")
    code = args[2]
    if not (isinstance(code, memoryview) and code.tobytes() == b"b" or code == "b"):
        raise _Refused(f"_reconstruct{_short(args)}: expected (numpy.ndarray, (0,), b'b')")
    return _Array()


def _scalar(args):
    # numpy.core.multiarray.scalar(dtype, bytes): a NumPy scalar, here a 0-d array
    if type(args) is not tuple or len(args) != 2:
        raise _Refused(f"scalar{_short(args)}: expected (dtype, bytes)")
    return _Array(_make_array(args[1], args[0], (), "C"))


def _frombuffer(args):
    # numpy.core.numeric._frombuffer(buffer, dtype, shape, order): protocol 5's array
    if type(args) is not tuple or len(args) != 4 or args[3] not in ("C", "F"):
        raise _Refused(f"_frombuffer{_short(args)}: expected (bytes, dtype, shape, 'C' or 'F')")
    return _Array(_make_array(args[0], args[1], args[2], args[3]))


def _new_dtype(args):
    if type(args) is not tuple or len(args) != 3 or args[1:] != (False, True):
        raise _Refused(f"numpy.dtype{_short(args)}: expected (name, False, True)")
    return _Dtype(args[0])


def _encode(args):
    # _codecs.encode(text, 'latin1'): how protocol 2 stores bytes
    if type(args) is not tuple or len(args) != 2 or type(args[0]) is not str or args[1] not in ("latin1", "latin-1"):
        raise _Refused(f"_codecs.encode{_short(args)}: expected (str, 'latin1')")
    try:
        return memoryview(args[0].encode("latin-1"))
    except UnicodeEncodeError:
        raise _Refused("_codecs.encode: the text is not latin-1") from None


def _empty(kind):
    def make(args):
        if args == ():
            return kind()
        if kind is not dict and type(args) is tuple and len(args) == 1 and type(args[0]) in (tuple, list):
            return kind(args[0])
        raise _Refused(f"{kind.__name__}{_short(args)}: expected no arguments or one tuple or list")

    return make


def _bytes(args):
    if args != ():
        raise _Refused(f"bytes{_short(args)}: expected no arguments")
    return memoryview(b"")


def _not_callable(args):
    raise _Refused("numpy.ndarray is called directly; a .pdparams array is made by _reconstruct")


_NDARRAY = _Global("numpy.ndarray", _not_callable)
_GLOBALS = {("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _Global("numpy.dtype", _new_dtype),
            ("_codecs", "encode"): _Global("_codecs.encode", _encode),
            ("collections", "OrderedDict"): _Global("OrderedDict", _empty(dict))}
for _np in ("numpy.core", "numpy._core"):
    _GLOBALS[(f"{_np}.multiarray", "_reconstruct")] = _Global("_reconstruct", _reconstruct)
    _GLOBALS[(f"{_np}.multiarray", "scalar")] = _Global("scalar", _scalar)
    _GLOBALS[(f"{_np}.numeric", "_frombuffer")] = _Global("_frombuffer", _frombuffer)
for _mod in ("builtins", "__builtin__"):
    for _kind in (tuple, list, dict):
        _GLOBALS[(_mod, _kind.__name__)] = _Global(_kind.__name__, _empty(_kind))
    _GLOBALS[(_mod, "bytes")] = _Global("bytes", _bytes)


# -- what the pickle must hold ---------------------------------------------------------------------
def _array_of(key, value):
    if type(value) is tuple and len(value) == 2 and type(value[0]) is str:
        value = value[1]  # paddle.save of a Tensor: (name, array)
    if isinstance(value, _Array):
        if value.array is None:
            raise _Refused(f"entry {_short(key)} is an array that is never filled")
        return value.array
    raise _Refused(f"entry {_short(key)} is a {type(value).__name__}, expected an array")


def _join_big(out, info):
    """Paddle's arrays over 1 GiB, which protocol 2/3 files store as 1-D slices listed in ``info``."""
    if type(info) is not dict:
        raise _Refused(f"{_BIG_PARAMS!r} is a {type(info).__name__}, expected a dict")
    used = set()
    for key, spec in info.items():
        if type(key) is not str or type(spec) is not dict or set(spec) != {"OriginShape", "slices"}:
            raise _Refused(f"{_BIG_PARAMS!r} entry {_short(key)}: expected {{'OriginShape': shape, 'slices': names}}")
        shape, names = spec["OriginShape"], spec["slices"]
        if type(names) is not list or not names or not all(type(n) is str and n in out for n in names):
            raise _Refused(
                f"{_BIG_PARAMS!r} entry {_short(key)}: slices {_short(names)} are not names of stored arrays")
        if key in out or used & set(names) or len(set(names)) != len(names):
            raise _Refused(f"{_BIG_PARAMS!r} entry {_short(key)}: the name or a slice is used twice")
        used.update(names)
        parts = [out[n] for n in names]
        if any(p.ndim != 1 or p.dtype != parts[0].dtype for p in parts):
            raise _Refused(f"{_BIG_PARAMS!r} entry {_short(key)}: the slices are not 1-D arrays of one dtype")
        count = _count(shape, parts[0].itemsize, f"{_BIG_PARAMS!r} entry {_short(key)}:")
        if sum(p.size for p in parts) != count:
            raise _Refused(f"{_BIG_PARAMS!r} entry {_short(key)}: the slices hold {sum(p.size for p in parts)} values, "
                           f"shape {tuple(shape)} needs {count}")
        out[key] = np.concatenate(parts).reshape(tuple(shape))
    for name in used:
        del out[name]


def read_pdparams(buf, where):
    """``{name: ndarray}`` from the bytes of a ``.pdparams`` file; ValueError naming ``where`` otherwise.

    Arrays are fresh copies in native byte order (a NumPy scalar entry becomes a
    0-d array); Paddle's name table (``StructuredToParameterName@@``) is dropped and
    its split big arrays (``UnpackBigParamInfor@@``) are joined back.

    Examples
    --------
    >>> import pickle, numpy as np
    >>> blob = pickle.dumps({"fc.w": np.ones((2, 2), ">f4"), "ids": ("ids", np.arange(3))}, protocol=4)
    >>> state = read_pdparams(blob, "m.pdparams")
    >>> {k: (v.dtype.str, v.shape) for k, v in state.items()} == {"fc.w": ("<f4", (2, 2)), "ids": ("<i8", (3,))}
    True
    >>> read_pdparams(blob[:-9], "m.pdparams")
    Traceback (most recent call last):
    ...
    ValueError: m.pdparams: truncated or corrupted .pdparams file: SHORT_BINBYTES at offset ... needs 24 bytes, 23 left
    """
    view = memoryview(buf).cast("B")
    token = _BUDGET.set([view.nbytes + _SHARED_SLACK, view.nbytes])
    try:
        obj = _run(view, _GLOBALS, (_Array, _Dtype))
        if type(obj) is not dict:
            raise _Refused(f"a .pdparams file holds a dict, got {type(obj).__name__}")
        out = {}
        for key, value in obj.items():
            if type(key) is not str:
                raise _Refused(f"a key is a {type(key).__name__} ({_short(key)}), expected a str")
            if key not in (_NAME_TABLE, _BIG_PARAMS):
                out[key] = _array_of(key, value)
        if _BIG_PARAMS in obj:
            _join_big(out, obj[_BIG_PARAMS])
        return out
    except _Refused as err:
        raise ValueError(f"{where}: {err}") from None
    except (ValueError, TypeError, OverflowError, IndexError, KeyError, RecursionError) as err:
        # not expected (every check above raises _Refused); kept so that no file can break the contract
        raise ValueError(f"{where}: corrupted .pdparams file: {type(err).__name__}: {err}") from None
    finally:
        _BUDGET.reset(token)
