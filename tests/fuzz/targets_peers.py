"""Fuzz targets for what peers hand over: DLPack producers, and the collectives' heads from other ranks.

- ``dlpack_producers``: ``lt.from_dlpack`` of producers that report odd
  devices, return odd things from ``__dlpack_ragged__``, or hand over offsets
  of odd dtypes and shapes: a clear allowed error (never torch's or NumPy's
  internals: "cannot unpack", "PyCapsule_GetPointer", "ScalarType"...), or
  the right tensor.
- ``wire_heads``: the collectives' head table, item records and data chunk
  (what a peer sends) mutated field by field, through the decoder every rank
  runs: a ValueError, or a tensor that fits what the heads announced.

Each is deterministic from hypothesis' seed and quick (milliseconds an example).
"""

import numpy as np
from hypothesis import strategies as st

import lodtensor as lt

from .oracle import ALLOWED, check_tensor
from .strategies import EDGE_INTS
from .targets import target

try:
    import torch
except ImportError:  # the torch-only parts are skipped
    torch = None


def _rng(data):
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))


# -- DLPack producers ------------------------------------------------------------------------------
class _Producer:
    def __init__(self, array, device, ragged=None):
        self.array, self.device, self.ragged = array, device, ragged

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**{k: v for k, v in kwargs.items() if k != "stream"})

    def __dlpack_device__(self):
        return self.device


class _Ragged(_Producer):
    def __dlpack_ragged__(self, **kwargs):
        return self.ragged() if callable(self.ragged) else self.ragged


_DEVICES = [(1, 0), (1, 0), (1, 0), (3, 0), (2, 0), (4, 0), (99, 0), ("x", 0), None, (), (1,), "cpu", (1.5, 0),
            (-1, 0), (2**70, 0)]


def _level(data, rng, rows):
    """One offsets level: ints, a NumPy array or a producer of a drawn dtype and shape."""
    count = data.draw(st.integers(0, 4))
    offsets = np.sort(rng.integers(0, rows + 1, count + 1))
    offsets[0], offsets[-1] = 0, rows
    dtype = data.draw(st.sampled_from(["int64", "int64", "int32", "uint64", "int8", "float64", "bool", "float16"]))
    arr = offsets.astype(dtype)
    if data.draw(st.integers(0, 5)) == 0:
        arr = arr.reshape(1, -1) if data.draw(st.booleans()) else arr[:0]
    form = data.draw(st.sampled_from(["list", "numpy", "producer", "torch", "capsule-like"]))
    if form == "list":
        return arr.tolist()
    if form == "numpy":
        return arr
    if form == "torch" and torch is not None:
        tdtype = data.draw(st.sampled_from([torch.int64, torch.int32, torch.float32, torch.bfloat16, torch.uint8]))
        out = torch.from_numpy(np.ascontiguousarray(offsets)).to(tdtype)
        return out[::1] if data.draw(st.booleans()) else torch.stack([out, out], 1)[:, 0]  # strided
    if form == "capsule-like":
        return _Producer(arr, data.draw(st.sampled_from(_DEVICES)))
    return _Producer(arr, (1, 0))


def _ragged_return(data, rng, values, levels):
    """What a ragged producer returns: the convention's pair, or something malformed."""
    how = data.draw(st.sampled_from(["ok", "ok", "ok", "none", "triple", "not-tuple", "list-levels", "bad-values",
                                     "generator", "raises"]))
    caps = lambda: tuple(np.ascontiguousarray(lv, dtype=np.int64).__dlpack__() for lv in levels)  # noqa: E731
    if how == "ok":
        return lambda: (values.__dlpack__(), caps())
    if how == "none":
        return None
    if how == "triple":
        return lambda: (values.__dlpack__(), caps(), None)
    if how == "not-tuple":
        return lambda: (values.__dlpack__(), 5)
    if how == "list-levels":
        return lambda: (values.__dlpack__(), [list(lv) for lv in levels])
    if how == "bad-values":
        return lambda: (values, caps())
    if how == "generator":
        return lambda: (values.__dlpack__(), iter(caps()))
    return lambda: 1 // 0


@target
def dlpack_producers(data):
    """lt.from_dlpack of producers with odd devices, odd ragged returns, odd offsets: a clear error or the tensor."""
    rng = _rng(data)
    rows = data.draw(st.integers(0, 8))
    dtype = data.draw(st.sampled_from(["float64", "float32", "int64", "int8", "bool", "complex64"]))
    values = (rng.integers(-5, 5, (rows, 2))).astype(dtype)
    levels = []
    count = rows
    for _ in range(data.draw(st.integers(0, 2))):
        lv = np.sort(rng.integers(0, count + 1, data.draw(st.integers(1, 4))))
        lv[0], lv[-1] = 0, count
        levels.insert(0, lv)
        count = len(lv) - 1
    use_torch = torch is not None and data.draw(st.integers(0, 3)) == 0
    source = torch.from_numpy(values) if use_torch and dtype != "bool" else values
    kind = data.draw(st.sampled_from(["plain", "producer", "ragged", "lod"]))
    device = data.draw(st.sampled_from(_DEVICES))
    if kind == "plain":
        call = lambda: lt.from_dlpack(source)  # noqa: E731
    elif kind == "producer":
        call = lambda: lt.from_dlpack(_Producer(values, device))  # noqa: E731
    elif kind == "ragged":
        producer = _Ragged(values, device, _ragged_return(data, rng, values, levels))
        call = lambda: lt.from_dlpack(producer)  # noqa: E731
    else:
        lod = [_level(data, rng, rows)] if data.draw(st.booleans()) else [lv.tolist() for lv in levels]
        call = lambda: lt.from_dlpack(_Producer(values, device) if data.draw(st.booleans()) else source, lod)  # noqa: E731
    try:
        t = call()
    except ALLOWED + (BufferError,) as err:  # BufferError: NumPy's own refusal of a dtype DLPack lacks
        assert str(err), f"{type(err).__name__} with an empty message"
        msg = str(err)
        for vague in ("unpack", "PyCapsule_GetPointer", "invalid literal", "not subscriptable", "ScalarType"):
            assert vague not in msg, f"an unclear message: {type(err).__name__}: {msg}"
        return
    except ZeroDivisionError:  # the producer's own error, passed on
        return
    assert isinstance(t, lt.LoDTensor)
    assert np.array_equal(np.asarray(t.numpy()), values), "from_dlpack changed the values"
    check_tensor(t, ops=t.dtype != np.complex64 and "complex" not in str(t.dtype))


# -- the collectives' wire -------------------------------------------------------------------------
def _described(data, rng):
    depth = data.draw(st.integers(0, 3))
    dtype = data.draw(st.sampled_from(["float32", "int64", "bool", "float64", "uint8"]))
    row_shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    count = data.draw(st.integers(1, 3))
    levels = []
    for _ in range(depth):
        lengths = rng.integers(0, 3, count)
        levels.append(np.concatenate(([0], np.cumsum(lengths))))
        count = int(levels[-1][-1])
    rows = count if depth else data.draw(st.integers(0, 4))
    array = (rng.integers(0, 5, (rows, *row_shape))).astype(dtype)
    return lt.LoDTensor(array, levels or None)


@target
def wire_heads(data):
    """The collectives' decoder on forged heads, items and chunks: a ValueError, or what the heads announce."""
    if torch is None:
        return
    from lodtensor.distributed import _wire as w

    rng = _rng(data)
    world = data.draw(st.integers(1, 3))
    op = data.draw(st.sampled_from(w.OPS))
    root = data.draw(st.integers(0, world - 1))
    many = op in ("scatter", "all_to_all")
    tensors = {r: [_described(data, rng) for _ in range(world if many else 1)] for r in range(world)}
    heads, described = [], {}
    for r in range(world):
        sends_tensors = not (op in ("broadcast", "scatter") and r != root)
        described[r] = [w.describe(t, "x") for t in tensors[r]] if sends_tensors else []
        nbytes = sum(w.item_of(d).nbytes for d in described[r])
        heads.append(w.encode_head(op, root if op in ("gather", "broadcast", "scatter") else -1, described[r],
                                   follow=w.ITEM if many else 0, sends=nbytes))
    table = np.stack(heads)
    for _ in range(data.draw(st.integers(0, 4))):
        r, col = data.draw(st.integers(0, world - 1)), data.draw(st.integers(0, w.HEAD - 1))
        table[r, col] = data.draw(st.one_of(st.integers(-3, 12), st.sampled_from(EDGE_INTS).map(
            lambda v: (v + 2**63) % 2**64 - 2**63)))
    try:
        decoded = w.decode_head(op, table, world)
        if decoded.follow:
            records = np.zeros((world, w.ITEM), np.int64)
            for r in decoded.geometry:
                row = w.encode_items(described[r], world) if described[r] else np.zeros((world, w.ITEM), np.int64)
                records[r] = row[0]
            for _ in range(data.draw(st.integers(0, 2))):
                r, col = data.draw(st.integers(0, world - 1)), data.draw(st.integers(0, w.ITEM - 1))
                records[r, col] = data.draw(st.one_of(st.integers(-2, 12), st.sampled_from([2**40, 2**62, -(2**63)])))
            items = w.decode_items(op, records, decoded, world)
        else:
            items = decoded.inline
    except ValueError as err:
        assert str(err) and op in str(err) or "rank" in str(err), err
        return
    except TypeError as err:  # a rank's local TypeError, forwarded
        assert str(err), err
        return
    for r, item in enumerate(items):
        if item is None:
            continue
        assert item.nbytes <= w.MAX_BYTES and item.rows >= 0
        if item.nbytes > 1 << 16:
            continue  # a forged but in-range size: the transport would allocate it; nothing to decode here
        chunk = torch.zeros(item.nbytes, dtype=torch.uint8)
        source = tensors[r][0] if tensors.get(r) else None
        if source is not None and w.item_of(w.describe(source, "x")).nbytes == item.nbytes:
            w.pack_into(chunk, source)
        raw = chunk.numpy()
        for _ in range(data.draw(st.integers(0, 3))):
            if raw.size:
                raw[int(rng.integers(0, raw.size))] ^= 1 << int(rng.integers(0, 8))
        try:
            t = w.unpack(chunk, item, item.lib, "cpu")
        except ValueError as err:
            assert str(err), err
            continue
        assert t.num_rows == item.rows and tuple(t.shape()[1:]) == item.row_shape
        assert [len(lv) - 1 for lv in t.lod()] == list(item.counts)
        check_tensor(t, ops=item.nbytes < 4096)
