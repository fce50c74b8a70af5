"""The wire format of the LoD collectives: a fixed-size int64 header per rank, then raw bytes.

Every collective runs in two exchanges:

1. **sizes**: each rank sends one int64 vector of ``HEADER + items * ITEM`` entries
   (an ``all_gather_into_tensor``): the collective's name and root, a status
   (with the text of a local error, so every rank can raise it), the dtype, lod
   depth, row shape and array library of its tensors, and for each tensor its
   number of rows and the sequence count of every lod level. From this table
   every rank computes the same checks and the same byte counts.
2. **data**: one ``uint8`` buffer per (sender, receiver): the offsets of every
   level (int64) then the data rows, each part padded to 16 bytes so that the
   receiver can view them in place. No padding to the longest tensor: the bytes
   sent are the tensor's own bytes (plus at most 30 bytes of alignment).

Nothing received is trusted: header values are range-checked, and every LoD
goes through the validating ``LoD`` constructor.
"""

import numpy as np

from ..errors import LoDError
from ..lod import LoD
from ..tensor import LoDTensor

__all__ = ["MAX_LEVELS", "MAX_ROW_DIMS", "HEADER", "ITEM", "OPS", "LocalError"]

MAX_LEVELS = 8  # lod depth a collective carries
MAX_ROW_DIMS = 8  # trailing (row) dimensions a collective carries
_MSG_WORDS = 32  # 256 bytes of a local error message travel with the header

# header fields (one int64 each)
_OP, _ROOT, _STATUS, _DTYPE, _DEPTH, _NDIM, _LIB, _NITEMS = range(8)
_SHAPE = 8
_MSG = _SHAPE + MAX_ROW_DIMS
HEADER = _MSG + _MSG_WORDS
ITEM = 1 + MAX_LEVELS  # rows, then the sequence count of each level

OPS = ("all_gather", "gather", "broadcast", "scatter", "all_to_all")
_STATUS_OK, _STATUS_VALUE, _STATUS_TYPE = 0, 1, 2
_STATUS_ERRORS = {_STATUS_VALUE: ValueError, _STATUS_TYPE: TypeError}

# dtype names in wire order (code = index + 1); NumPy and torch spell them alike
DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128", "bfloat16", "uint16", "uint32", "uint64",
)  # fmt: skip
_DTYPE_CODE = {name: i + 1 for i, name in enumerate(DTYPES)}
LIBS = ("numpy", "torch", "cupy")
_ALIGN = 16


class LocalError(Exception):
    """An input error found on one rank; it travels in the header so that every rank raises it."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def dtype_name(dtype):
    """``"float32"`` for a NumPy, CuPy or torch dtype."""
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
        row_elems = int(np.prod(row_shape, dtype=np.int64)) if row_shape else 1
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


def encode(op, root, described, slots, error=None):
    """The header vector of this rank: ``HEADER + slots * ITEM`` int64 values.

    ``described`` is a list of at most ``slots`` :func:`describe` results (every
    rank sends ``slots`` item records, used or not, so that the vectors have one
    length); ``error`` a :class:`LocalError` to send instead.
    """
    out = np.zeros(HEADER + slots * ITEM, dtype=np.int64)
    out[_OP] = OPS.index(op)
    out[_ROOT] = root
    if error is not None:
        out[_STATUS] = error.kind
        raw = error.message.encode("utf-8")[: 8 * _MSG_WORDS]
        buf = np.zeros(8 * _MSG_WORDS, dtype=np.uint8)
        buf[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        out[_MSG : _MSG + _MSG_WORDS] = buf.view(np.int64)
        return out
    out[_NITEMS] = len(described)
    if described:
        dtype, depth, row_shape, lib, _, _ = described[0]
        out[_DTYPE] = _DTYPE_CODE[dtype]
        out[_DEPTH] = depth
        out[_NDIM] = len(row_shape)
        out[_SHAPE : _SHAPE + len(row_shape)] = row_shape
        out[_LIB] = LIBS.index(lib) + 1 if lib in LIBS else 0
    for i, (_, _, _, _, rows, counts) in enumerate(described):
        base = HEADER + i * ITEM
        out[base] = rows
        out[base + 1 : base + 1 + len(counts)] = counts
    return out


def pack_into(buf, t):
    """Write ``t``'s offsets and rows into ``buf`` (a uint8 torch tensor of the item's ``nbytes``)."""
    levels = t.lod.levels
    start = 0
    if levels:
        offsets = np.concatenate(levels) if len(levels) > 1 else levels[0]
        _copy_host(buf[: offsets.nbytes], offsets.view(np.uint8))
        start = align(offsets.nbytes)
    data = t.data
    lib = type(data).__module__.split(".", 1)[0]
    if lib == "numpy":
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        _copy_host(buf[start : start + raw.size], raw)
        return
    import torch

    if lib == "torch":
        flat = data.detach().contiguous().reshape(-1)
        raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    else:  # cupy
        raw = torch.from_dlpack(data.ravel().view("uint8"))
    buf[start : start + raw.numel()].copy_(raw)


def _copy_host(dst, src):
    """Copy NumPy bytes ``src`` (possibly read-only, as LoD offsets are) into the torch tensor ``dst``."""
    if dst.device.type == "cpu":
        np.copyto(dst.numpy(), src)
    else:
        import torch

        dst.copy_(torch.from_numpy(src.copy()))


# -- every rank ----------------------------------------------------------------------------------
def decode(op, table, nitems, world):
    """Check the gathered header table (``world`` rows) the same way on every rank.

    Returns, for every rank, its list of :class:`Item` (empty when it sends none).
    Raises the first rank's local error, or ValueError when ranks disagree.
    """
    ops = table[:, _OP]
    roots = table[:, _ROOT]
    if (ops != ops[0]).any() or (roots != roots[0]).any():
        calls = ", ".join(f"rank {r}: {_call(int(ops[r]), int(roots[r]))}" for r in range(world))
        raise ValueError(f"{op}(): every rank must call the same collective with the same root, got {calls}")
    for r in range(world):
        status = int(table[r, _STATUS])
        if status != _STATUS_OK:
            raw = table[r, _MSG : _MSG + _MSG_WORDS].astype(np.int64).view(np.uint8).tobytes().rstrip(b"\0")
            kind = _STATUS_ERRORS.get(status, ValueError)
            raise kind(f"{op}(): on rank {r}: {raw.decode('utf-8', 'replace')}")
    senders = [r for r in range(world) if table[r, _NITEMS] > 0]
    geometry = {}
    for r in senders:
        row = table[r]
        ndim = int(row[_NDIM])
        code = int(row[_DTYPE])
        if not (1 <= code <= len(DTYPES) and 0 <= ndim <= MAX_ROW_DIMS and 0 <= row[_DEPTH] <= MAX_LEVELS):
            raise ValueError(f"{op}(): the header from rank {r} is corrupt (dtype {code}, ndim {ndim})")
        geometry[r] = (int(row[_DEPTH]), DTYPES[code - 1], tuple(int(s) for s in row[_SHAPE : _SHAPE + ndim]))
    if senders:
        for field, label in ((0, "lod depth"), (1, "dtype"), (2, "row shape")):
            values = {r: geometry[r][field] for r in senders}
            if len(set(values.values())) > 1:
                got = ", ".join(f"{_show(v)} on rank {r}" for r, v in values.items())
                raise ValueError(
                    f"{op}(): every rank must pass tensors of the same {label}, got {got}"
                    + (" (the lod depth is the number of lod levels)" if field == 0 else "")
                )
    items = []
    for r in range(world):
        if r not in geometry:
            items.append([])
            continue
        depth, dtype, row_shape = geometry[r]
        itemsize = _itemsize(dtype)
        lib = int(table[r, _LIB])
        lib = LIBS[lib - 1] if 1 <= lib <= len(LIBS) else "numpy"
        mine = []
        for i in range(int(table[r, _NITEMS])):
            base = HEADER + i * ITEM
            rows = int(table[r, base])
            counts = tuple(int(c) for c in table[r, base + 1 : base + 1 + depth])
            if rows < 0 or any(c < 1 for c in counts):
                raise ValueError(f"{op}(): the header from rank {r} is corrupt (rows {rows}, sequences {counts})")
            mine.append(Item(rows, counts, dtype, row_shape, lib, itemsize))
        items.append(mine)
    return items


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
    data = raw.view(_torch_dtype(item.dtype)).reshape((item.rows, *item.row_shape))
    if lib == "numpy":
        data = data.cpu().numpy()
    elif lib == "cupy":
        import cupy

        data = cupy.from_dlpack(data.cuda() if not data.is_cuda else data)
    elif device is not None and data.device != device:
        data = data.to(device)
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
    return f"{name}(root={root})" if root >= 0 else f"{name}()"


def _show(value):
    return repr(value) if isinstance(value, tuple) else str(value)
