"""torch: jagged nested tensors, PackedSequence, EmbeddingBag and varlen-attention inputs.

A one-level LoD is exactly the offsets of a ``layout=torch.jagged`` nested
tensor, the bag starts of ``nn.EmbeddingBag`` and the ``cu_seqlens`` of varlen
attention kernels; a PackedSequence is the same rows reordered time-major.

>>> import torch
>>> import lodtensor as lt
>>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
>>> njt = t.to_nested_jagged()
>>> njt.layout, njt.offsets().tolist()
(torch.jagged, [0, 2, 5])
>>> lt.from_torch(njt).lod()
[[0, 2, 5]]
"""

import codecs

import numpy as np

from .._compile import eager_under_compile
from ..backend import backend_name_of
from ..backend._pickle import UNPICKLERS
from ..lod import LoD
from ..tensor import LoDTensor
from ._lazy import lod_tensor_arg
from ._packed import from_packed_sequence, to_packed_sequence
from ._torch_base import _intact, _offsets_on, _torch, _torch_data

__all__ = [
    "from_torch",
    "to_nested_jagged",
    "to_packed_sequence",
    "from_packed_sequence",
    "embedding_bag_inputs",
    "cu_seqlens",
    "torch_safe_globals",
]

_INT32_MAX = np.iinfo(np.int32).max


# -- jagged nested tensors -------------------------------------------------------------------
@eager_under_compile  # reads the host offsets: under torch.compile, behind a graph break
def to_nested_jagged(t, level=None):
    """A ``layout=torch.jagged`` nested tensor whose values and offsets are this tensor's buffers.

    The values are ``t.data`` (a torch tensor sharing NumPy data; autograd kept
    for torch data); the offsets are torch's own small copy of the LoD's, one
    per LoD, shared by its conversions (torch ties a jagged tensor's nested int
    to it, so they combine), made anew once written, and known again by
    :func:`from_torch` without a check while it holds the LoD's offsets. Components have shape
    ``(length, *row_shape)``.

    Parameters
    ----------
    level : int, optional
        Which lod level becomes the jagged dim: its sequences become the
        components, each spanning its data rows (``t.lod.absolute_offsets(level)``,
        so the levels below it are flattened into the rows). Default: the one
        level of a one-level tensor.

    Raises
    ------
    ValueError
        ``level`` is not given and ``lod_level != 1``, or ``level`` is out of range.

    Examples
    --------
    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.arange(6.0), [[0, 2, 3], [0, 1, 3, 6]])   # 2 documents of 3 sentences
    >>> t.to_nested_jagged(level=0).offsets().tolist()                  # documents: rows 0:3 and 3:6
    [0, 3, 6]
    >>> t.to_nested_jagged(level=1).offsets().tolist()                  # sentences
    [0, 1, 3, 6]
    """
    lod_tensor_arg(t, "to_nested_jagged()")
    torch = _torch("to_nested_jagged()")
    if level is None:
        if t.lod_level != 1:
            raise ValueError(
                f"to_nested_jagged(): a jagged nested tensor has one ragged dim, so the tensor needs lod_level 1, "
                f"got {t.lod_level}; pass level=k (0..{t.lod_level - 1}) to make the sequences of level k the "
                f"components"
            )
        level = 0
    elif isinstance(level, bool) or not isinstance(level, (int, np.integer)):
        raise TypeError(f"to_nested_jagged(): level must be an int, got {type(level).__name__} {level!r}")
    elif not -t.lod_level <= level < t.lod_level:
        raise ValueError(
            f"to_nested_jagged(): level must be in [{-t.lod_level}, {t.lod_level - 1}] for lod_level "
            f"{t.lod_level}, got {level}"
        )
    level = int(level) % t.lod_level
    data = t._check_fits("to_nested_jagged()")
    foreign = backend_name_of(data) != "torch"
    values = t.to_torch().data if foreign else data
    # the LoD is immutable: its offsets as a torch tensor on this device and its shortest and
    # longest lengths (as torch stores them: the first dim of an empty (n, 0) tensor) are kept
    # with it, so converting again (or another tensor sharing the LoD) costs only the wrapper
    cache = t.lod._cached()
    key = ("interop.jagged", str(values.device), level)
    hit = cache.get(key)
    if hit is None or _intact(hit[0]) is None:  # (somebody wrote into an earlier njt.offsets(): made anew)
        rows = t.lod.absolute_offsets(level)
        lengths = np.diff(rows)
        offsets = _offsets_on(torch, rows, values.device)
        shortest, longest = (int(lengths.min()), int(lengths.max())) if lengths.size else (0, 0)  # no component
        made = (offsets, torch.zeros(shortest, 0), torch.zeros(longest, 0))
        # a first view, before the offsets are shared: it has torch register their nested int now, by this
        # thread alone (torch's registry looks, then adds: threads asking at once for one offsets tensor
        # got two nested ints, and their jagged tensors did not combine)
        view = _jagged_view(torch, values, *made, fresh=foreign)
        if hit is None:  # threads converting at once keep the first made: torch combines jagged tensors
            hit = cache.setdefault(key, made)  # of one offsets tensor only
        else:
            hit = cache[key] = made
        if hit is made:
            return view
    offsets, shortest, longest = hit
    return _jagged_view(torch, values, offsets, shortest, longest, fresh=foreign)


def _jagged_view(torch, values, offsets, shortest, longest, *, fresh):
    """``nested_tensor_from_jagged(values, offsets, min_seqlen, max_seqlen)``, without its dispatch cost.

    torch builds a jagged tensor as a view op whose kernel is Python: about 50 us of
    argument normalisation around a 20 us constructor. When ``values`` is a tensor made
    just now (from NumPy or CuPy data, so no caller holds it and it has no autograd
    history), the view relation is unobservable and the NestedTensor is made directly,
    as torch itself does when it unpickles one (``_rebuild_njt``). Caller-held torch data
    keeps the view op, so autograd and in-place version checks are torch's own; only
    the torch-function layer (a no-op for this call) is skipped.
    """
    cls = _jagged_class()
    as_tensors = getattr(cls, "_max_seqlen_tensor", None) is not None  # (torch 2.4 caches ints, no tensors)
    if cls is not None and fresh and not values.requires_grad:
        cache = {"min_seqlen": shortest, "max_seqlen": longest} if as_tensors else _seqlens(shortest, longest)
        try:
            return cls(values, offsets, _metadata_cache=cache)
        except TypeError:  # a torch version changed the private constructor: the public one below
            pass
    view = _jagged_view_op(torch) if as_tensors else None
    if view is not None:
        view_op, dummy = view
        try:
            with torch._C.DisableTorchFunctionSubclass():
                return view_op(values, offsets, dummy(), None, 1, shortest, longest)
        except TypeError:  # a torch version changed the private op's arguments: the public one below
            pass
    try:  # the public constructor: the same tensor
        return torch.nested.nested_tensor_from_jagged(values, offsets, **_seqlens(shortest, longest))
    except TypeError:  # torch 2.4 takes neither length: it finds them from the offsets when asked
        return torch.nested.nested_tensor_from_jagged(values, offsets)


def _seqlens(shortest, longest):
    """The shortest and longest component lengths, as ints (held as the first dim of a (n, 0) tensor)."""
    return {"min_seqlen": shortest.shape[0], "max_seqlen": longest.shape[0]}


def _jagged_view_op(torch):
    """torch's jagged view op and its dummy tensor (private names: None if a torch version moves them)."""
    try:
        from torch.nested._internal.nested_tensor import _nt_view_dummy  # noqa: PLC0415

        return torch._nested_view_from_jagged, _nt_view_dummy
    except (ImportError, AttributeError):
        return None


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def from_torch(tensor, lod=None, *, recursive_sequence_lengths=None):
    """A LoDTensor whose data is the torch tensor ``tensor`` (no copy; autograd kept).

    ``tensor`` may also be a torch nested tensor ragged in its first component
    dim: a jagged one becomes a one-level LoDTensor over its values buffer
    (shared) and its offsets (shared when they came from
    :meth:`LoDTensor.to_nested_jagged`, else copied once into the LoD's frozen
    memory and checked); a strided one is concatenated into a new buffer.

    Raises
    ------
    TypeError
        ``tensor`` is not a torch tensor, or ``lod`` is given for a nested tensor.
    ValueError
        A jagged tensor with holes (``njt.lengths()`` set: its rows are not
        contiguous, compact it first with ``torch.nested.nested_tensor_from_jagged(
        torch.cat(njt.unbind()), ...)``), ragged in another dim, or an invalid lod.

    >>> import torch
    >>> t = from_torch(torch.arange(5.0), [[0, 2, 5]])
    >>> t.lod(), t.data.dtype
    ([[0, 2, 5]], torch.float32)
    """
    torch = _torch("from_torch()")
    if type(tensor) is _jagged_class():  # the common case, without torch's attribute dispatch
        if lod is not None or recursive_sequence_lengths is not None:
            raise TypeError("from_torch(): a nested tensor carries its own lod; do not pass lod")
        return _from_jagged(tensor, torch)
    if not isinstance(tensor, torch.Tensor):
        hint = "; a lodtensor NestedTensor converts with nt.to_lod_tensor()" if hasattr(tensor, "to_lod_tensor") else ""
        raise TypeError(f"from_torch(): tensor must be a torch.Tensor, got {type(tensor).__name__}{hint}")
    if getattr(tensor, "is_nested", False):
        if lod is not None or recursive_sequence_lengths is not None:
            raise TypeError("from_torch(): a nested tensor carries its own lod; do not pass lod")
        return _from_torch_nested(tensor, torch)
    return LoDTensor(tensor, lod, recursive_sequence_lengths=recursive_sequence_lengths)


def _jagged_class():
    """torch's jagged NestedTensor class (a private module: None if a torch version moves it)."""
    try:
        from torch.nested._internal.nested_tensor import NestedTensor  # noqa: PLC0415
    except ImportError:
        return None
    return NestedTensor


def _from_jagged(nt, torch):
    ragged = getattr(nt, "_ragged_idx", 1)
    if ragged != 1:
        raise ValueError(
            f"from_torch(): only nested tensors ragged in the first component dim become a "
            f"LoDTensor; this one is ragged in dim {ragged}"
        )
    holes = nt._lengths if hasattr(nt, "_lengths") else nt.lengths()
    if holes is not None:
        raise ValueError(
            "from_torch(): this jagged tensor has holes (njt.lengths() is set, so its components "
            "are not contiguous in values); a LoD has none. Compact it first: "
            "torch.nested.as_nested_tensor(list(njt.unbind()), layout=torch.jagged)"
        )
    # to_nested_jagged()'s own offsets, still holding their level: the LoD's frozen level, no check; else
    # the host offsets (the LoD lives on the host), copied and checked
    offsets = nt.offsets()
    level = _intact(offsets)
    if level is None:
        level = offsets.detach().cpu().numpy()
    # values(): the differentiable view; without autograd the buffer itself is the same memory
    # and skips torch's dispatch (the private attribute, where this torch version has it)
    inner = getattr(nt, "_values", None)
    values = inner if inner is not None and not nt.requires_grad else nt.values()
    # the gate: a frozen level is recognised by address (O(1)), foreign offsets are copied and checked
    return LoDTensor(values, LoD([level], num_rows=int(values.shape[0])))


def _from_torch_nested(nt, torch):
    if nt.layout == torch.jagged:
        return _from_jagged(nt, torch)
    parts = nt.unbind()
    trailing = {tuple(p.shape[1:]) for p in parts}
    if len(trailing) > 1 or any(p.dim() == 0 for p in parts):
        raise ValueError(
            f"from_torch(): the components must differ in their first dim only to form a "
            f"LoDTensor, got trailing shapes {sorted(trailing)}"
        )
    if not parts:  # torch.nested.nested_tensor([]): no component, so no row shape either
        return LoDTensor(torch.zeros(0, dtype=nt.dtype, device=nt.device), [[0]])
    lengths = [p.shape[0] for p in parts]
    return LoDTensor(torch.cat(parts), recursive_sequence_lengths=[lengths])


# -- EmbeddingBag and varlen attention -------------------------------------------------------
@eager_under_compile  # reads the host offsets: under torch.compile, behind a graph break
def embedding_bag_inputs(t):
    """``(input, offsets)`` torch tensors for ``nn.EmbeddingBag`` (``include_last_offset=False``).

    ``input`` is the 1-D int64 data (shared when it already is int64 torch or
    NumPy data), ``offsets`` the start of each last-level sequence in it (a
    small copy, on the data's device). Empty sequences are empty bags.

    >>> import torch
    >>> import lodtensor as lt
    >>> ids, offsets = lt.LoDTensor(np.array([4, 1, 2]), [[0, 2, 2, 3]]).embedding_bag_inputs()
    >>> ids.tolist(), offsets.tolist()
    ([4, 1, 2], [0, 2, 2])
    """
    lod_tensor_arg(t, "embedding_bag_inputs()")
    torch = _torch("embedding_bag_inputs()")
    t._require_lod("embedding_bag_inputs()")
    data = _torch_data(t, "embedding_bag_inputs()")
    if data.dim() != 1 or data.is_floating_point() or data.is_complex() or data.dtype == torch.bool:
        raise ValueError(
            f"embedding_bag_inputs(): the data must be 1-D integer ids, got shape {tuple(data.shape)} of {data.dtype}"
        )
    if data.dtype == torch.uint64 and bool((data.view(torch.int64) < 0).any()):  # past int64: .long() wraps
        j = int(torch.nonzero(data.view(torch.int64) < 0)[0, 0])
        raise ValueError(
            f"embedding_bag_inputs(): id {int(data[j].item())} at row {j} does not fit int64, the ids "
            f"nn.EmbeddingBag takes"
        )
    if data.dtype != torch.int64:
        data = data.long()  # EmbeddingBag wants int64 (or int32 offsets to match): a copy
    starts = t.lod.absolute_offsets(-1)[:-1].copy()
    return data, torch.from_numpy(starts).to(data.device)


@eager_under_compile  # reads the host offsets: under torch.compile, behind a graph break
def cu_seqlens(t, level=-1):
    """``(cu_seqlens, max_seqlen)`` for varlen attention kernels: ``level``'s offsets in data rows.

    ``cu_seqlens`` is int32 (what flash-attention style kernels take) on the
    data's device (a torch tensor for torch data, else a NumPy array);
    ``max_seqlen`` is a Python int.

    Raises
    ------
    ValueError
        More rows than int32 can index.

    >>> import lodtensor as lt
    >>> cu, longest = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]]).cu_seqlens()
    >>> cu.tolist(), cu.dtype, longest
    ([0, 2, 5], dtype('int32'), 3)
    """
    lod_tensor_arg(t, "cu_seqlens()")
    t._require_lod("cu_seqlens()")
    data = t._check_fits("cu_seqlens()")
    offsets = t.lod.absolute_offsets(level)
    if offsets[-1] > _INT32_MAX:
        raise ValueError(f"cu_seqlens(): {int(offsets[-1])} rows do not fit int32 offsets (at most {_INT32_MAX})")
    cu = offsets.astype(np.int32)
    longest = int(np.diff(offsets).max()) if offsets.size > 1 else 0  # no sequence: cu_seqlens [0], 0
    if backend_name_of(data) == "torch":
        torch = _torch("cu_seqlens()")
        return torch.from_numpy(cu).to(data.device), longest
    return t.backend.asarray(cu), longest


def torch_safe_globals():
    """What ``torch.load(..., weights_only=True)`` must admit to load LoDTensors, LoDs and nested tensors
    saved with ``torch.save``: lodtensor's rebuild functions and classes, each of which checks what a file
    gives it (no code of the file runs).

    >>> import io
    >>> import torch
    >>> import lodtensor as lt
    >>> buf = io.BytesIO()
    >>> torch.save({"batch": lt.LoDTensor(torch.arange(3.0), [[0, 1, 3]])}, buf)
    >>> _ = buf.seek(0)
    >>> with torch.serialization.safe_globals(torch_safe_globals()):
    ...     torch.load(buf, weights_only=True)["batch"].lod()
    [[0, 1, 3]]

    It includes ``_codecs.encode``, how ``torch.save``'s pickle protocol writes bytes (the arrays' raw
    data): a recent torch (2.13) admits it by default, torch 2.4's loader only when it is listed.
    """
    return [*UNPICKLERS, codecs.encode]
