"""The wire format of the LoD collectives: one fixed-size int64 head per rank, then raw bytes.

Every collective runs in two or three exchanges:

1. **head**: each rank sends one int64 vector of ``HEAD`` entries, the same
   size whatever the collective (an ``all_gather_into_tensor``): a wire
   version, the collective and its root, a status (with the text of a local
   error, so every rank can raise it), the dtype, lod depth, row shape and
   array library of its tensors, the size of what follows (item words per
   peer, data bytes sent), and for ``all_gather``, ``gather`` and ``broadcast``
   the one tensor's row count and the sequence count of every level. Every rank
   checks the same table the same way, so ranks that called different
   collectives, with different roots or different tensors, all raise the same
   error before any exchange whose size depends on what they called (gloo
   aborts the process when the sizes of one exchange disagree).
2. **items** (``scatter`` and ``all_to_all`` only, once the heads agree): an
   ``all_to_all_single`` of ``ITEM`` int64 per pair: rank ``i`` tells rank
   ``j`` the rows and sequence counts of the tensor it will send it.
3. **data**: one ``uint8`` buffer per (sender, receiver): the offsets of every
   level (int64) then the data rows, each part padded to 16 bytes so that the
   receiver can view them in place. No padding to the longest tensor: the bytes
   sent are the tensor's own bytes (plus at most 30 bytes of alignment).

Nothing received is trusted: head and item values are range-checked (which
ranks send, non-negative sizes and row dimensions, at most ``MAX_BYTES`` per
tensor, so a forged head cannot make a rank allocate exabytes), the same way on
every rank so that every rank raises the same ValueError, and every LoD goes
through the validating ``LoD`` constructor.
"""

import math

import numpy as np

from ..backend._placement import from_torch_view, torch_view
from ..errors import LoDError
from ..lod import LoD
from ..tensor import LoDTensor

__all__ = ["MAX_LEVELS", "MAX_ROW_DIMS", "MAX_BYTES", "HEAD", "ITEM", "OPS", "LocalError"]

MAX_LEVELS = 8  # lod depth a collective carries
MAX_ROW_DIMS = 8  # trailing (row) dimensions a collective carries
MAX_BYTES = 1 << 48  # bytes of one tensor on the wire (256 TiB): a head announcing more is corrupt
_MSG_WORDS = 32  # 256 bytes of a local error message travel with the head
WIRE_VERSION = (0x4C6F4454 << 8) | 2  # "LoDT", version 2 (version 1 had an op-dependent header size)

# head fields (one int64 each)
_VERSION, _OP, _ROOT, _STATUS, _DTYPE, _DEPTH, _NDIM, _LIB, _NITEMS, _FOLLOW, _SENDS = range(11)
_SHAPE = 11
_MSG = _SHAPE + MAX_ROW_DIMS
ITEM = 1 + MAX_LEVELS  # rows, then the sequence count of each level
_INLINE = _MSG + _MSG_WORDS  # the one item of all_gather / gather / broadcast
HEAD = _INLINE + ITEM

OPS = ("all_gather", "gather", "broadcast", "scatter", "all_to_all")
_ROOT_NAME = {"gather": "dst", "broadcast": "src", "scatter": "src"}
_STATUS_OK, _STATUS_VALUE, _STATUS_TYPE = 0, 1, 2
_STATUS_ERRORS = {_STATUS_VALUE: ValueError, _STATUS_TYPE: TypeError}

# dtype names in wire order (code = index + 1); NumPy and torch spell them alike
DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128", "bfloat16", "uint16", "uint32", "uint64",
)  # fmt: skip
_DTYPE_CODE = {name: i + 1 for i, name in enumerate(DTYPES)}
LIBS = ("numpy", "torch", "cupy")
#: the wire's dtypes an array library has no dtype for: a head naming one with such a library is forged
_CANNOT_HOLD = {"numpy": ("bfloat16",), "cupy": ("bfloat16",)}
_ALIGN = 16


class LocalError(Exception):
    """An input error found on one rank; it travels in the header so that every rank raises it."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def dtype_name(dtype):
    """``"float32"`` for a NumPy, CuPy or torch dtype (NumPy's other byte order too: its values are
    sent in native order, as ``torch_view`` converts them, and arrive native)."""
    if isinstance(dtype, np.dtype) and not dtype.isnative:
        dtype = dtype.newbyteorder("=")
    return str(dtype).rsplit(".", 1)[-1]


def align(n):
    return -(-n // _ALIGN) * _ALIGN


class Item:
    """What a receiver knows of one tensor from the header table: its geometry and byte counts."""

    __slots__ = ("rows", "counts", "dtype", "row_shape", "lib", "offsets_bytes", "data_bytes", "nbytes")

    def __init__(self, rows, counts, dtype, row_shape, lib, itemsize):
        self.rows = rows
        self.counts = counts  # sequences per level
        self.dtype = dtype
        self.row_shape = row_shape
        self.lib = lib
        self.offsets_bytes = align(8 * sum(c + 1 for c in counts))
        row_elems = math.prod(row_shape)  # Python ints: a forged row shape cannot wrap past int64 to a small size
        self.data_bytes = rows * row_elems * itemsize
        self.nbytes = self.offsets_bytes + align(self.data_bytes)


# -- the sending side ---------------------------------------------------------------------------
def describe(t, name):
    """Check one tensor on the sending rank: ``(dtype name, depth, row shape, lib, rows, counts)``.

    Raises :class:`LocalError` (never a collective) so the caller can still
    take part in the sizes exchange and let every rank raise the same error.
    """
    if not isinstance(t, LoDTensor):
        raise LocalError(_STATUS_TYPE, f"{name} must be a LoDTensor, got {type(t).__name__}")
    data = t.data
    if data is None:
        raise LocalError(_STATUS_VALUE, f"{name} holds no data (LoDTensor() before set())")
    if not t.has_valid_recursive_sequence_lengths():
        raise LocalError(
            _STATUS_VALUE, f"{name}'s lod does not fit its data: it ends at {t.lod.num_rows} rows, data has {len(data)}"
        )
    dtype = dtype_name(data.dtype)
    if dtype not in _DTYPE_CODE:
        raise LocalError(_STATUS_TYPE, f"{name} has dtype {dtype}, which the collectives do not carry")
    depth = t.lod_level
    if depth > MAX_LEVELS:
        raise LocalError(_STATUS_VALUE, f"{name} has {depth} lod levels; the collectives carry at most {MAX_LEVELS}")
    row_shape = tuple(int(s) for s in data.shape[1:])
    if len(row_shape) > MAX_ROW_DIMS:
        raise LocalError(
            _STATUS_VALUE, f"{name} has {len(row_shape)} row dimensions; the collectives carry at most {MAX_ROW_DIMS}"
        )
    lib = type(data).__module__.split(".", 1)[0]
    # found here, not when packing: a rank failing after the heads went out leaves its peers waiting
    layout = str(getattr(data, "layout", "strided"))  # (arrays without a layout are dense)
    if not layout.endswith("strided") or getattr(data, "is_nested", False):
        raise LocalError(
            _STATUS_TYPE, f"{name} holds {lib} data of layout {layout}; the collectives carry dense (strided) "
            f"tensors: call .to_dense() first"
        )
    if t.backend.device_of(data) == "meta":
        raise LocalError(_STATUS_VALUE, f"{name} holds {lib} data on the meta device, which has no values to send")
    counts = tuple(len(level) - 1 for level in t.lod.levels)
    return dtype, depth, row_shape, lib, int(data.shape[0]), counts


def describe_list(items, name, world):
    """``describe`` for a list of ``world`` tensors that must agree in dtype, depth and row shape."""
    if not isinstance(items, (list, tuple)):
        raise LocalError(_STATUS_TYPE, f"{name} must be a list of {world} LoDTensors, got {type(items).__name__}")
    if len(items) != world:
        raise LocalError(
            _STATUS_VALUE, f"{name} must hold one LoDTensor per rank ({world}), got a list of {len(items)}"
        )
    described = [describe(t, f"{name}[{i}]") for i, t in enumerate(items)]
    first = described[0]
    for i, d in enumerate(described[1:], 1):
        for field, label in ((1, "lod depth"), (0, "dtype"), (2, "row shape")):
            if d[field] != first[field]:
                raise LocalError(
                    _STATUS_VALUE,
                    f"{name}[{i}] has {label} {_show(d[field])} but {name}[0] has {_show(first[field])}; "
                    f"every tensor must have the same {label}",
                )
    return described


def item_of(described):
    """The :class:`Item` of one :func:`describe` result (the sending rank's own view of its tensor)."""
    dtype, _, row_shape, lib, rows, counts = described
    return Item(rows, counts, dtype, row_shape, lib, _itemsize(dtype))


def encode_head(op, root, described, *, follow, sends, error=None):
    """The head of this rank: ``HEAD`` int64 values, the same count for every collective.

    ``described`` is a list of :func:`describe` results (their geometry is the
    first one's; :func:`describe_list` made them agree); with ``follow == 0``
    the first one's rows and sequence counts travel in the head itself,
    otherwise every tensor's go in the items exchange (``follow`` words per
    peer). ``sends``: the data bytes this rank sends to the others. ``error``: a
    :class:`LocalError` to send instead.
    """
    out = np.zeros(HEAD, dtype=np.int64)
    out[_VERSION] = WIRE_VERSION
    out[_OP] = OPS.index(op)
    out[_ROOT] = root
    out[_FOLLOW] = follow
    if error is not None:
        out[_STATUS] = error.kind
        raw = error.message.encode("utf-8")[: 8 * _MSG_WORDS]
        buf = np.zeros(8 * _MSG_WORDS, dtype=np.uint8)
        buf[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        out[_MSG : _MSG + _MSG_WORDS] = buf.view(np.int64)
        return out
    out[_NITEMS] = len(described)
    out[_SENDS] = sends
    if described:
        dtype, depth, row_shape, lib, rows, counts = described[0]
        out[_DTYPE] = _DTYPE_CODE[dtype]
        out[_DEPTH] = depth
        out[_NDIM] = len(row_shape)
        out[_SHAPE : _SHAPE + len(row_shape)] = row_shape
        out[_LIB] = LIBS.index(lib) + 1 if lib in LIBS else 0
        if not follow:
            out[_INLINE] = rows
            out[_INLINE + 1 : _INLINE + 1 + len(counts)] = counts
    return out


def encode_items(described, world):
    """The items this rank sends: row ``j`` (``ITEM`` int64) describes the tensor for rank ``j`` (zeros: none)."""
    out = np.zeros((world, ITEM), dtype=np.int64)
    for j, (_, _, _, _, rows, counts) in enumerate(described):
        out[j, 0] = rows
        out[j, 1 : 1 + len(counts)] = counts
    return out


def pack_into(buf, t):
    """Write ``t``'s offsets and rows into ``buf`` (a uint8 torch tensor of the item's ``nbytes``)."""
    levels = t.lod.levels
    start = 0
    if levels:
        offsets = np.concatenate(levels) if len(levels) > 1 else levels[0]
        _copy_host(buf[: offsets.nbytes], offsets.view(np.uint8))
        start = align(offsets.nbytes)
    import torch  # noqa: PLC0415 - the transport is torch.distributed

    flat = torch_view(t.data).detach().contiguous().reshape(-1)  # NumPy and CuPy data: a view, no copy
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    buf[start : start + raw.numel()].copy_(raw)


def _copy_host(dst, src):
    """Copy NumPy bytes ``src`` (possibly read-only, as LoD offsets are) into the torch tensor ``dst``."""
    if dst.device.type == "cpu":
        np.copyto(dst.numpy(), src)
    else:
        import torch

        dst.copy_(torch.from_numpy(src.copy()))


# -- every rank ----------------------------------------------------------------------------------
class Heads:
    """What every rank knows after the head exchange: each sender's geometry, its one item, its bytes sent."""

    __slots__ = ("geometry", "inline", "sends", "follow")

    def __init__(self, geometry, inline, sends, follow):
        self.geometry = geometry  # {rank: (depth, dtype, row_shape, lib)} for ranks that send tensors
        self.inline = inline  # by rank: the Item in its head, or None
        self.sends = sends  # by rank: data bytes it sends to the others
        self.follow = follow  # item words per peer in the items exchange (0: none)


def decode_head(op, table, world):
    """Check the gathered head table (``world`` rows) the same way on every rank.

    Returns :class:`Heads`. Raises the same error on every rank: ValueError
    when ranks run different wire versions, call different collectives or
    roots, or pass tensors that disagree; the first failing rank's local error.
    """
    versions = table[:, _VERSION]
    if (versions != WIRE_VERSION).any():
        r = int(np.flatnonzero(versions != WIRE_VERSION)[0])
        raise ValueError(
            f"rank {r} sent a head that is not lodtensor wire version {WIRE_VERSION & 0xFF} "
            f"(got {int(versions[r]):#x}): "
            f"every rank must run the same lodtensor and call the same collective"
        )
    ops = table[:, _OP]
    roots = table[:, _ROOT]
    same_op = (ops == ops[0]).all()
    if same_op and ((roots == roots[0]).all() or (roots == -2).any()):
        # a local error first where the roots agree, or differ because a rank's root is no rank (-2)
        _raise_local_error(op, table, world)
    if not same_op or (roots != roots[0]).any():
        calls = ", ".join(f"rank {r}: {_call(int(ops[r]), int(roots[r]))}" for r in range(world))
        raise ValueError(f"every rank must call the same collective with the same root, got {calls}")
    follow = int(table[0, _FOLLOW])
    if (table[:, _FOLLOW] != follow).any() or follow not in (0, ITEM):
        raise ValueError(f"{op}(): the heads disagree on what follows them (corrupt: {table[:, _FOLLOW].tolist()})")
    _check_senders(op, table[:, _NITEMS], table[:, _SENDS], world)
    senders = [r for r in range(world) if table[r, _NITEMS] > 0]
    geometry = {}
    for r in senders:
        row = table[r]
        ndim = int(row[_NDIM])
        code = int(row[_DTYPE])
        if not (1 <= code <= len(DTYPES) and 0 <= ndim <= MAX_ROW_DIMS and 0 <= row[_DEPTH] <= MAX_LEVELS):
            raise ValueError(f"{op}(): the head from rank {r} is corrupt (dtype {code}, ndim {ndim})")
        shape = row[_SHAPE : _SHAPE + ndim]
        if (shape < 0).any() or (shape > MAX_BYTES).any():
            raise ValueError(f"{op}(): the head from rank {r} is corrupt (row shape {tuple(shape.tolist())})")
        lib = int(row[_LIB])
        lib = LIBS[lib - 1] if 1 <= lib <= len(LIBS) else "numpy"
        if DTYPES[code - 1] in _CANNOT_HOLD.get(lib, ()):
            raise ValueError(f"{op}(): the head from rank {r} is corrupt (dtype {DTYPES[code - 1]} from a {lib} array)")
        geometry[r] = (int(row[_DEPTH]), DTYPES[code - 1], tuple(int(s) for s in shape), lib)
    if senders:
        for field, label in ((0, "lod depth"), (1, "dtype"), (2, "row shape")):
            values = {r: geometry[r][field] for r in senders}
            if len(set(values.values())) > 1:
                got = ", ".join(f"{_show(v)} on rank {r}" for r, v in values.items())
                raise ValueError(
                    f"{op}(): every rank must pass tensors of the same {label}, got {got}"
                    + (" (the lod depth is the number of lod levels)" if field == 0 else "")
                )
    inline = [None] * world
    if not follow:
        for r in senders:
            inline[r] = _item(op, r, table[r, _INLINE : _INLINE + ITEM], geometry[r])
    sends = [int(v) for v in table[:, _SENDS]]
    return Heads(geometry, inline, sends, follow)


def _raise_local_error(op, table, world):
    """The first rank's local error (its status and message travelled in its head), if any."""
    for r in np.flatnonzero(table[:, _STATUS] != _STATUS_OK).tolist():
        status = int(table[r, _STATUS])
        if status not in _STATUS_ERRORS:
            raise ValueError(f"{op}(): the head from rank {r} is corrupt (status {status})")
        raw = table[r, _MSG : _MSG + _MSG_WORDS].astype(np.int64).view(np.uint8).tobytes().rstrip(b"\0")
        raise _STATUS_ERRORS[status](f"{op}(): on rank {r}: {raw.decode('utf-8', 'replace')}")


def decode_items(op, records, heads, world):
    """The items received from every sending rank (``records``: ``world`` rows of ``ITEM``): an Item or None each."""
    out = [None] * world
    for r, geom in heads.geometry.items():
        out[r] = _item(op, r, records[r], geom)
    return out


def _item(op, r, record, geom):
    depth, dtype, row_shape, lib = geom
    rows = int(record[0])
    counts = tuple(int(c) for c in record[1 : 1 + depth])
    if rows < 0 or any(c < 0 for c in counts):  # a count of 0: a level of no sequence (offsets [0])
        raise ValueError(f"{op}(): the header from rank {r} is corrupt (rows {rows}, sequences {counts})")
    item = Item(rows, counts, dtype, row_shape, lib, _itemsize(dtype))  # Python ints: no overflow
    if item.nbytes > MAX_BYTES:  # a corrupt or hostile head: refuse before allocating anything
        raise ValueError(
            f"{op}(): the header from rank {r} announces a tensor of {item.nbytes} bytes (rows {rows}, "
            f"row shape {row_shape}, sequences {counts}), more than the {MAX_BYTES} bytes one collective carries: "
            f"corrupt"
        )
    return item


def _check_senders(op, nitems, sends, world):
    """Which ranks send tensors, and how many, must be what ``op`` implies (else a corrupt head)."""
    if op in ("all_gather", "gather"):
        ok = (nitems == 1).all()
    elif op == "all_to_all":
        ok = (nitems == world).all()
    else:  # broadcast, scatter: the root alone
        ok = ((nitems == 0) | (nitems == (1 if op == "broadcast" else world))).all() and (nitems > 0).sum() == 1
    if not ok or (sends < 0).any() or (sends > MAX_BYTES * world).any():
        raise ValueError(
            f"{op}(): the heads are corrupt: tensors per rank {nitems.tolist()}, bytes sent per rank {sends.tolist()}"
        )


def unpack(chunk, item, lib, device):
    """The LoDTensor in ``chunk`` (a uint8 torch tensor of ``item.nbytes``), its data as ``lib`` arrays.

    The data is a view of ``chunk`` where the library allows; the offsets go
    through the validating ``LoD`` constructor.
    """
    levels = []
    if item.counts:
        total = sum(c + 1 for c in item.counts)
        flat = chunk[: 8 * total].cpu().numpy().view(np.int64)
        start = 0
        for c in item.counts:
            levels.append(flat[start : start + c + 1])
            start += c + 1
    lod = LoD(levels, num_rows=item.rows)
    raw = chunk[item.offsets_bytes : item.offsets_bytes + item.data_bytes]
    data = from_torch_view(lib, raw.view(_torch_dtype(item.dtype)).reshape((item.rows, *item.row_shape)), device)
    try:
        return LoDTensor(data, lod)
    except LoDError as err:  # pragma: no cover - the header's row count made both
        raise ValueError(f"received tensor is inconsistent: {err}") from None


# -- helpers -------------------------------------------------------------------------------------
def _itemsize(dtype):
    if dtype == "bfloat16":
        return 2
    return np.dtype(dtype).itemsize


def _torch_dtype(name):
    import torch

    return getattr(torch, name)


def _call(op_code, root):
    name = OPS[op_code] if 0 <= op_code < len(OPS) else f"collective #{op_code}"
    return f"{name}({_ROOT_NAME.get(name, 'root')}={root})" if root >= 0 or name in _ROOT_NAME else f"{name}()"


def _show(value):
    return repr(value) if isinstance(value, tuple) else str(value)
