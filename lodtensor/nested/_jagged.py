"""torch's jagged constructors: ``nested_tensor_from_jagged`` (with holes and ``jagged_dim``),
``narrow`` of a dense tensor, ``masked_select``; and the ``lengths()`` / ``jagged_dim`` metadata.

A nested tensor here always keeps its components one after another in its
buffer. Components with holes (``offsets`` plus ``lengths``: each component
``values[offsets[i]:offsets[i] + lengths[i]]``) are gathered once at
construction, with one vectorised index; the tensor remembers the original
``values``/``offsets``/``lengths`` so that ``values()``, ``offsets()`` and
``lengths()`` answer as torch's do. Elementwise ops keep the holes and in-place
ops write into ``values``, as torch's (``_holes``); other results have none.
"""

import numpy as np

from ..backend import backend_name_of, backend_of
from ..errors import ShapeError
from ..lod import LoD
from ._broadcast import same_backend
from ._construct import JAGGED_WITH_HOLES, as_nested_tensor
from ._dispatch import COMPILE_HOOKS, OP_TABLE, compiling, mark_dynamic
from ._holes import rows_of
from ._tensor import NestedTensor, Structure, make, normalize_dim
from ._views import rows_window

__all__ = ["nested_tensor_from_jagged", "narrow", "masked_select"]


def _host_ints(x, name, where):
    """A 1-D int64 host array from a list, NumPy array or tensor (offsets may live with the values)."""
    if backend_name_of(x) not in (None, "numpy"):
        x = backend_of(x).to_numpy(x)
    arr = np.asarray(x)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{where}: {name} must be a 1-D integer array, got shape {arr.shape} dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None, min_seqlen=None, max_seqlen=None):
    """A jagged-layout nested tensor over ``values`` split at ``offsets`` along ``jagged_dim - 1``.

    - ``offsets`` alone: component ``i`` is ``values[offsets[i]:offsets[i + 1]]`` (shared, a view; strided
      ``values``, a slice or a transpose, too, as torch's: a window view, ``values()`` is ``values``).
    - ``offsets`` and ``lengths``: components with holes, ``values[offsets[i]:offsets[i] + lengths[i]]``
      (``lengths()``, ``values()`` and ``offsets()`` as torch's; a view of torch ``values``: see ``_holes``).
    - ``lengths`` alone stands for ``offsets = [0, *cumsum(lengths)]``.
    - ``offsets`` that span only part of ``values`` (``offsets[0] > 0`` or ``offsets[-1] < len``), or
      ``lengths`` that add up to less, read that run of rows, as torch's (``values()`` and ``offsets()``
      still report all of ``values`` and the given offsets).
    - ``jagged_dim`` (default 1): the nested dim that is ragged; ``values``' dim ``jagged_dim - 1`` is split.

    Offsets may be host values (a list, a NumPy array) whatever library ``values`` belongs to.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor_from_jagged(np.arange(10.0).reshape(5, 2), np.array([0, 2, 5]))
    >>> nt.nested_size().tolist(), nt.layout
    ([[2, 2], [3, 2]], 'jagged')
    >>> holes = ln.nested_tensor_from_jagged(np.arange(5), [0, 2, 5], lengths=[1, 2])
    >>> holes.to_tensor_list(), holes.lengths().tolist()
    ([array([0]), array([2, 3])], [1, 2])
    """
    if compiling():  # under torch.compile: the offsets stay a tensor of the graph (see _compile)
        return COMPILE_HOOKS["from_jagged"](_from_jagged, values, offsets, lengths, jagged_dim, min_seqlen, max_seqlen)
    return mark_dynamic(_from_jagged(values, offsets, lengths, jagged_dim, min_seqlen, max_seqlen))


def _from_jagged(values, offsets, lengths, jagged_dim, min_seqlen, max_seqlen):
    where = "nested_tensor_from_jagged()"
    if backend_name_of(values) is None or values.ndim < 1:
        raise TypeError(f"{where}: values must be an array or tensor with at least 1 dim")
    jd = 1 if jagged_dim is None else int(jagged_dim)
    if not 1 <= jd <= values.ndim:
        raise ShapeError(f"{where}: jagged_dim must be in [1, {values.ndim}] for {values.ndim}-d values, got {jd}")
    if offsets is None and lengths is None:
        raise ShapeError(f"{where}: At least one of offsets or lengths is required.")
    be = backend_of(values)
    rows_values = values if jd == 1 else be.swapaxes(values, 0, jd - 1)
    rows = int(rows_values.shape[0])
    row_shape = tuple(int(s) for s in rows_values.shape[1:])
    holes = None
    if offsets is not None and lengths is not None:
        offs = _host_ints(offsets, "offsets", where)
        lens = _host_ints(lengths, "lengths", where)
        if offs.size != lens.size + 1:
            raise ShapeError(f"{where}: offsets must have len(lengths) + 1 = {lens.size + 1} entries, got {offs.size}")
        try:  # the gate: lengths are a lod over the rows they select
            lod = LoD.from_lengths([lens], num_rows=int(lens.sum()))
        except ValueError as err:
            raise ShapeError(f"{where}: {err}") from None
        ends = offs[:-1] + lens
        bad = np.flatnonzero((offs[:-1] < 0) | (ends > rows))
        if bad.size:
            i = int(bad[0])
            raise ShapeError(
                f"{where}: component {i} spans rows {int(offs[i])}:{int(ends[i])}, outside the {rows} rows of values"
            )
        flat = be.gather(rows_values, be.from_host(rows_of(offs, lens), like=rows_values))
        holes = (values, offs, lens)
        lengths_rows = lens
    else:
        given = offsets if offsets is not None else lengths
        host = _host_ints(given, "offsets" if offsets is not None else "lengths", where)
        if offsets is None and host.size and (host >= 0).all() and int(host.sum()) < rows:
            host, offsets = np.concatenate([[0], np.cumsum(host)]), host  # lengths over the first rows only
        # offsets over part of the rows (torch's values()/offsets() stay the given ones): the run they span
        first, last = (int(host[0]), int(host[-1])) if offsets is not None and host.size else (0, rows)
        if (first, last) != (0, rows) and 0 <= first <= last <= rows:
            holes = (values, host, None)
        try:  # the gate: offsets and lengths from outside are checked like any lod
            if holes is not None:
                lod = LoD([host - first], num_rows=last - first)
            else:
                lod = LoD([host], num_rows=rows) if offsets is not None else LoD.from_lengths([host], num_rows=rows)
        except ValueError as err:
            raise ShapeError(f"{where}: {err} (values.shape[0]={rows})") from None
        flat = rows_values if holes is None else rows_values[first:last]
        lengths_rows = np.diff(lod.offsets(0))
    storage = Structure.of_rows(lengths_rows, row_shape)
    # strided values (no holes): a window view over them, their memory shared as torch's; else one buffer
    nt = rows_window(flat, storage, "jagged") if holes is None and not be.is_c_contiguous(flat) else None
    nt = make(be.contiguous(flat).reshape(-1), storage, "jagged") if nt is None else nt
    if jd != 1:
        nt = OP_TABLE["transpose"](nt, 1, jd)
        nt._layout = "jagged"
    if holes is not None:
        nt._holes = holes
    return nt


JAGGED_WITH_HOLES["fn"] = lambda values, offsets, lengths: _from_jagged(values, offsets, lengths, None, None, None)


def narrow(tensor, dim, start, length, layout="strided"):
    """torch.nested.narrow on a dense ``tensor``, or NestedTensor.narrow on a nested one.

    Dense ``(B, L, ...)``, ``layout='jagged'``: component ``i`` is
    ``tensor[i, start[i]:start[i] + length[i]]`` (``start``/``length`` ints or per-row arrays), built
    with holes over ``tensor`` viewed as ``(B * L, ...)``, as torch does (``dim`` must be 1).
    ``layout='strided'`` narrows dim 0 (torch's only strided case).

    >>> import lodtensor.nested as ln
    >>> x = np.arange(12).reshape(3, 4)
    >>> ln.narrow(x, 1, np.array([0, 1, 2]), np.array([2, 3, 1]), layout="jagged").to_tensor_list()
    [array([0, 1]), array([5, 6, 7]), array([10])]
    """
    if isinstance(tensor, NestedTensor):
        return OP_TABLE["narrow"](tensor, dim, start, length)
    if backend_name_of(tensor) is None:
        raise TypeError(f"narrow(): tensor must be an array or tensor, got {type(tensor).__name__}")
    layout = _layout_name(layout)
    d = normalize_dim(dim, tensor.ndim)
    if layout == "strided":
        if d != 0:
            raise ShapeError(f"narrow(): only dim=0 supported for nested tensors, but got: {dim}")
        s, n = int(start), int(length)
        return as_nested_tensor(list(tensor[s : s + n]))
    if d != 1 or tensor.ndim < 2:
        raise ShapeError("jagged layout only supports dim=1")
    b, size = int(tensor.shape[0]), int(tensor.shape[1])
    starts = np.broadcast_to(_scalar_or_ints(start, "start"), (b,)).astype(np.int64)
    lens = np.broadcast_to(_scalar_or_ints(length, "length"), (b,)).astype(np.int64)
    bad = np.flatnonzero((starts < 0) | (lens < 0) | (starts + lens > size))
    if bad.size:
        i = int(bad[0])
        raise IndexError(
            f"narrow(): row {i}: start ({int(starts[i])}) + length ({int(lens[i])}) exceeds dimension size ({size})"
        )
    offsets = np.append(starts + np.arange(b, dtype=np.int64) * size, starts[-1] + (b - 1) * size + lens[-1]) \
        if b else np.zeros(1, np.int64)
    values = tensor.reshape((b * size,) + tuple(tensor.shape[2:]))
    if b and not starts[1:].any() and np.all(starts[:-1] + lens[:-1] == size) and starts[0] + lens[0] == size:
        # the rows tile one stretch of the buffer: no holes, a contiguous view (torch's lengths() is None too;
        # as torch's, the first row must reach the end of its row also when it is the only one)
        return nested_tensor_from_jagged(values[int(offsets[0]) : int(offsets[-1])], offsets - offsets[0])
    return nested_tensor_from_jagged(values, offsets, lens)


def _scalar_or_ints(x, name):
    if backend_name_of(x) not in (None, "numpy"):
        x = backend_of(x).to_numpy(x)
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise TypeError(f"narrow(): {name} must be an int or a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
    return arr


def _layout_name(layout):
    name = getattr(layout, "__repr__", None) and str(layout).replace("torch.", "")
    if name not in ("strided", "jagged"):
        raise ValueError(f"narrow(): layout must be 'strided' or 'jagged' (or torch's), got {layout!r}")
    return name


def masked_select(tensor, mask):
    """A jagged nested tensor of the values of ``tensor`` where ``mask`` (broadcast to ``tensor``'s shape) is
    True, one component per row of the last dim: ``(prod(shape[:-1]), (selected))``, as
    torch.nested.masked_select.

    >>> import lodtensor.nested as ln
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> ln.masked_select(x, x > 1.5).to_tensor_list()
    [array([2.]), array([3., 4., 5.])]
    """
    if backend_name_of(tensor) is None or backend_name_of(mask) is None:
        raise TypeError("masked_select(): tensor and mask must be arrays or tensors")
    same_backend("masked_select()", tensor, mask)
    shape = tuple(int(s) for s in tensor.shape)
    mshape = tuple(int(s) for s in mask.shape)
    if len(mshape) > len(shape) or any(m not in (1, s) for m, s in zip(mshape[::-1], shape[::-1])):
        raise ShapeError(f"masked_select(): mask of shape {mshape} does not broadcast to the shape of tensor {shape}")
    if str(mask.dtype).replace("torch.", "") != "bool":
        raise TypeError(f"masked_select(): mask must be a bool array, got {mask.dtype}")
    if tensor.ndim < 1:
        raise ShapeError("masked_select(): tensor must have at least 1 dim (rows of the last dim)")
    be = backend_of(tensor)
    if mshape != shape:  # a mask broadcast over the tensor, as torch's expand
        mask = be.expand(mask.reshape((1,) * (len(shape) - len(mshape)) + mshape), shape)
    rows = int(np.prod(tensor.shape[:-1], dtype=np.int64))
    counts = be.to_numpy(mask.reshape(rows, int(mask.shape[-1])).sum(-1)).astype(np.int64)  # (rows may be 0)
    values = tensor[mask]
    return nested_tensor_from_jagged(values, lengths=counts)
