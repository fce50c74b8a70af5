"""Launching the CUDA kernels of ``cuda/*.cu`` on device arrays: CuPy's, and torch's through CuPy.

Every function takes the cupy module ``xp`` (so a stub can stand in for it in the tests), device
arrays that already are contiguous, native-dtype and on the current device, host sizes (never
read back from the device: no synchronisation), and ``alloc(shape, dtype)``, which returns a new
device array: CuPy's allocator for the CuPy backend, torch's caching allocator (viewed through
``__cuda_array_interface__``) for torch CUDA data. Kernels run on the current stream, which the
torch route sets to torch's. The launch geometry is the kernels' (see ``cuda/segment.cu``):
pieces of rows, one warp each; 16-byte packs of values where the row width allows; sequences of a
few narrow rows one thread each.
"""

import functools
import weakref

import numpy as np

from .._placement import frozen_fact, is_frozen
from . import _tuning
from . import cuda as _cuda

__all__ = ["kernel", "segment_reduce", "segment_softmax", "segment_softmax_grad", "segment_extreme_grad", "pad",
           "unpad", "pointer"]

_MODULES = {}
# (id(cupy module), module, name expression, device id) -> the kernel
_FUNCTIONS = {}
# (id(offsets owner), chunk, short_max) -> (weak reference of the owner, device plan)
_PLANS = {}
_MAX_GRID_X = 2**31 - 1
_MAX_GRID_Y = 65535
# Host work of a launch, done once per key rather than once per call (the ops are launch-bound on
# small batches: a few microseconds of Python each add up). Every cache below maps immutable keys to
# immutable values, filled by a single dict store (a race computes the same value twice): no lock.
# dtype -> its name ("float32"); the accumulator dtype of (op, native name); (id(cupy module), module,
# kind, op, dtype, pack, device id) -> the kernel (:func:`_kernel`; the function holds its cupy module, so
# that id is never reused while the entry lives)
_DTYPE_NAMES = {}
_ACCUMULATORS = {}
_KERNELS = {}
_FLAGS32 = (np.int32(0), np.int32(1))  # a kernel's int32 flag argument, by its truth


def _dtype_name(dtype):
    """``np.dtype(dtype).name``, looked up once per dtype (NumPy computes the name in Python each time)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


def _accumulator(op, native):
    """``np.dtype(cuda.accumulator(op, native))``, once per (op, native dtype name)."""
    acc = _ACCUMULATORS.get((op, native))
    if acc is None:
        acc = _ACCUMULATORS[(op, native)] = np.dtype(_cuda.accumulator(op, native))
    return acc


def _kernel(xp, module, kind, op=None, dtype=None, pack=1):
    """:func:`kernel` of ``cuda.kernel_name(kind, op=op, dtype=dtype, pack=pack)``: one lookup per launch
    (the name, the module and the function found once per cupy module, name and device)."""
    key = (id(xp), module, kind, op, dtype, pack, xp.cuda.Device().id)
    fn = _KERNELS.get(key)
    if fn is None:
        fn = _KERNELS[key] = kernel(xp, module, _cuda.kernel_name(kind, op=op, dtype=dtype, pack=pack))
    return fn


def kernel(xp, module, name):
    """The kernel ``name`` (a name expression of ``module``), compiled once per process and cupy module,
    and looked up once per device (a recurrence launches a few kernels per time step)."""
    device = xp.cuda.Device().id
    fn = _FUNCTIONS.get((id(xp), module, name, device))
    if fn is not None:
        return fn
    key = (id(xp), module)
    mod = _MODULES.get(key)
    if mod is None:
        mod = xp.RawModule(code=_cuda.source_text(module), options=("-std=c++14",),
                           name_expressions=_cuda.name_expressions(module))
        _MODULES[key] = mod
    fn = _FUNCTIONS[(id(xp), module, name, device)] = mod.get_function(name)
    return fn


def blocks(items, per_block, cap=_MAX_GRID_X):
    return int(max(1, min(-(-int(items) // per_block), cap)))


def pointer(a):
    """The device address of ``a`` (the stub's arrays: their host address)."""
    ptr = getattr(getattr(a, "data", None), "ptr", None)
    return int(ptr) if ptr is not None else int(a.__array_interface__["data"][0])


class Layout:
    """Launch geometry of the piece kernels for ``rows`` x ``width`` values in ``n`` sequences, the
    row read as ``width / pack`` packs, sequences of at most ``short_max`` rows left to a short kernel.
    ``longest``: the most rows of a sequence where the host knows it (a LoD's offsets:
    ``_placement.frozen_fact``), so that no combine pass is launched when no sequence has two pieces."""

    def __init__(self, rows, width, n, pack=1, short_max=-1, longest=None):
        packs = width // pack
        self.pack, self.short_max = pack, short_max
        self.log2cw = _cuda.lanes_log2(packs)
        cw = 1 << self.log2cw
        self.chunk = _cuda.CHUNK_STEPS * (32 >> self.log2cw)  # rows per piece (one warp)
        # threads per block of the piece kernels (``grid``): a block's warp slots free together
        self.threads = int(_tuning.PIECE_THREADS)
        if self.threads % 32 or not 32 <= self.threads <= _cuda.BLOCK:
            raise ValueError(f"_tuning.PIECE_THREADS must be a multiple of 32 from 32 to {_cuda.BLOCK}, "
                             f"got {_tuning.PIECE_THREADS!r}")
        warps = self.threads // 32
        planned = min(n, rows // (short_max + 1)) if short_max >= 0 else n  # sequences with pieces
        pieces = planned + rows // self.chunk + 1  # bound on their pieces
        self.tiles = -(-packs // cw)
        self.tiles_first = bool(_tuning.TILES_FIRST)
        self.grid = self.over_tiles(blocks(pieces, warps, _tuning.MAX_PIECE_BLOCKS * (_cuda.BLOCK // self.threads)))
        # else no sequence has two pieces: no combine pass
        self.multi = rows > self.chunk and (longest is None or longest > self.chunk)
        self.slots = 2 * (rows // self.chunk) + 1  # bound on the pieces of multi-piece sequences
        multi = min(n, rows // (self.chunk + 1)) + 1  # bound on the multi-piece sequences
        self.combine_grid = (int(min(multi, _tuning.COMBINE_BLOCKS)), int(min(-(-width // 32), _MAX_GRID_Y)), 1)
        self.short_grid = (blocks(n, _cuda.BLOCK, _tuning.MAX_SHORT_BLOCKS),)
        self.block_grid = self.over_tiles(blocks(n, 1, _tuning.MAX_PIECE_BLOCKS))  # one block per sequence
        # the kernels' scalar arguments of these sizes, made once (NumPy scalars are immutable: shared)
        self.n64, self.width64, self.short64 = np.int64(n), np.int64(width), np.int64(short_max)
        self.log2cw32, self.chunk64 = np.int32(self.log2cw), np.int64(self.chunk)
        self.tiles32 = np.int32(self.tiles_first)

    def over_tiles(self, count):
        """The grid of ``count`` blocks (over pieces or sequences) for each column tile: tiles along x
        where ``tiles_first`` (``_tuning.TILES_FIRST``; the kernels' argument of that name), else along y."""
        if self.tiles_first:
            return (int(min(self.tiles, _MAX_GRID_X)), int(min(count, _MAX_GRID_Y)), 1)
        return (int(count), int(min(self.tiles, _MAX_GRID_Y)), 1)


def layout(x, n, pack=None, owner=None):
    """The :class:`Layout` for contiguous ``[rows, width]`` data ``x`` in ``n`` sequences (``pack``:
    the widest pack the kernel has, by default :func:`cuda.pack_of` the dtype; ``owner``: the
    offsets as the caller holds them, see :func:`plan`)."""
    rows, width = int(x.shape[0]), int(x.shape[1])
    pack = _cuda.pack_of(x.dtype) if pack is None else pack
    if width % pack or pointer(x) % 16:
        pack = 1
    narrow = width * x.dtype.itemsize <= _tuning.SHORT_ROW_BYTES
    longest = frozen_fact(owner, "longest") if owner is not None else None
    return _layout(rows, width, int(n), pack, _tuning.SHORT_ROWS if narrow else -1, longest,
                   _tuning.PIECE_THREADS, _tuning.TILES_FIRST, _tuning.MAX_PIECE_BLOCKS, _tuning.COMBINE_BLOCKS,
                   _tuning.MAX_SHORT_BLOCKS, _cuda.CHUNK_STEPS)


@functools.lru_cache(maxsize=256)
def _layout(rows, width, n, pack, short_max, longest, *tuning):
    """The :class:`Layout` of these sizes, made once per sizes and ``tuning`` (the ``_tuning`` values it
    reads and ``cuda.CHUNK_STEPS``, in the key so that a changed setting, as the launch sweep makes, makes a
    new one). A Layout is never written after it is made: the launches share it."""
    return Layout(rows, width, n, pack, short_max, longest)


def plan(xp, offsets, n, chunk, short_max=-1, owner=None):
    """Device prefix sums of the pieces (see segment.cu), no sync: for fewer than
    ``_tuning.PLAN_ONE_BLOCK`` sequences one launch (``lt_piece_plan``), else a count kernel and three
    1-d scans.

    (One scan per third of the counts, each over one contiguous run: a scan along an axis of a
    ``(3, n + 1)`` array is far slower for millions of sequences.) Where ``owner`` (the offsets as
    the caller holds them: a CuPy array, or the torch tensor ``offsets`` views) is a LoD's frozen
    device copy (``_placement.is_frozen``), the plan is kept for it (``_tuning.CACHE_PLANS``): the
    next op on the same LoD and layout launches none of these (a count kernel and three scans cost
    a few launches of host time per call, and for millions of sequences more device time than the
    reduction). A plan goes with its owner; it holds 24 bytes per sequence on the device (three
    times the offsets) for each layout used, while the LoD lives.
    """
    key = None
    if owner is not None and _tuning.CACHE_PLANS and is_frozen(owner):
        key = (id(owner), int(chunk), int(short_max))
        hit = _PLANS.get(key)
        if hit is not None and hit[0]() is owner:
            return hit[1]
    out = xp.empty(3 * (n + 1), dtype=np.int64)
    sizes = (offsets, np.int64(n), np.int64(chunk), np.int64(short_max))
    if n < _tuning.PLAN_ONE_BLOCK:  # one launch: the counts and their scans by one block
        kernel(xp, "segment", "lt_piece_plan")((1,), (_cuda.BLOCK,), (*sizes, out))
    else:
        counts = xp.empty(3 * (n + 1), dtype=np.int64)
        kernel(xp, "segment", "lt_piece_counts")((blocks(n + 1, _cuda.BLOCK, 4096),), (_cuda.BLOCK,), (*sizes, counts))
        for k in range(3):
            xp.cumsum(counts[k * (n + 1) : (k + 1) * (n + 1)], out=out[k * (n + 1) : (k + 1) * (n + 1)])
    if key is not None:
        _PLANS[key] = (weakref.ref(owner, lambda _ref, key=key, plans=_PLANS: plans.pop(key, None)), out)
    return out


def segment_reduce(xp, op, x, offsets, n, empty, alloc, owner=None):
    """``op`` ("sum", "mean", "max", "min") over the rows of each sequence of ``[rows, width]``
    native-dtype ``x``: an ``[n, width]`` array of the accumulator dtype (empty sequences: ``empty``).
    ``owner``: see :func:`plan`. Where the sequences average ``_tuning.REDUCE_BLOCK_STEPS`` block
    steps of rows or more (:func:`_by_block`), every one-piece sequence is one block's
    (``lt_segment_reduce_block``) and the piece kernel takes only the multi-piece sequences."""
    native = _dtype_name(x.dtype)
    acc = _accumulator(op, native)
    width = int(x.shape[1])
    out = alloc((n, width), acc)
    lay = layout(x, n, owner=owner)
    pieces = plan(xp, offsets, n, lay.chunk, lay.short_max, owner)
    fill = acc.type(empty)
    if lay.short_max >= 0:
        _kernel(xp, "segment", "reduce_short", op=op, dtype=native)(
            lay.short_grid, (_cuda.BLOCK,),
            (x, offsets, out, lay.n64, lay.width64, lay.short64, fill))
    by_block = _by_block(lay, int(x.shape[0]), n, _tuning.REDUCE_BLOCK_STEPS)
    if by_block:
        _kernel(xp, "segment", "reduce_block", op=op, dtype=native, pack=lay.pack)(
            lay.block_grid, (_cuda.BLOCK,),
            (x, offsets, pieces, out, lay.n64, lay.width64, lay.log2cw32, fill, lay.tiles32))
        if not lay.multi:
            return out
    partial = _workspace(alloc, lay, (width,), acc, out)
    _kernel(xp, "segment", "reduce", op=op, dtype=native, pack=lay.pack)(
        lay.grid, (lay.threads,),
        (x, offsets, pieces, out, partial, lay.n64, lay.width64, lay.log2cw32, lay.chunk64, fill,
         _FLAGS32[by_block], lay.tiles32))
    if lay.multi:
        _kernel(xp, "segment", "combine", op=op, dtype=native)(
            lay.combine_grid, (_cuda.BLOCK,), (offsets, pieces, partial, out, lay.n64, lay.width64, fill))
    return out


def _workspace(alloc, lay, row, dtype, spare, lead=()):
    """The ``partial`` workspace of the piece kernels: ``lead + (lay.slots,) + row`` values of ``dtype``
    where some sequence has several pieces (``lay.multi``). Else ``spare`` (an array the same kernel
    writes, of ``dtype`` and ``lead`` + [n] + ``row``: its output), with no allocation: a kernel writes
    a piece's partial only for a sequence of several pieces (``pieces == 1 ? out : partial`` in
    cuda/segment.cu and cuda/softmax.cu), so where there are none that pointer is passed but never
    read or written (it was a fresh one-row array, which a write would have overrun just as well)."""
    if lay.multi:
        return alloc(tuple(lead) + (lay.slots,) + tuple(row), dtype)
    return spare


def _by_block(lay, rows, n, steps):
    """Whether the one-piece sequences go one per block: they average ``steps`` block steps of rows
    or more (a block step: 8 warps x 32 / cw rows; 0 steps: never). A block over a few rows would
    leave most of its warps idle."""
    return bool(steps) and rows >= steps * (_cuda.BLOCK // 32) * (32 >> lay.log2cw) * n


def segment_softmax(xp, x, offsets, n, alloc, owner=None):
    """Softmax over the rows of each sequence of ``[rows, width]`` native-dtype ``x``, per column:
    a ``[rows, width]`` array of the accumulator dtype. ``owner``: see :func:`plan`.

    Where the sequences average at least ``_tuning.SOFTMAX_BLOCK_STEPS`` block steps (8 warp steps)
    of rows, every one-piece sequence is one block's (``lt_softmax_block``: its rows read from HBM
    once, the second read served by L2) and the three-pass kernels take only the multi-piece
    sequences; else the three passes take every planned sequence (a block over a few rows would
    leave most of its warps idle).
    """
    native = _dtype_name(x.dtype)
    acc = _accumulator("softmax", native)
    rows, width = int(x.shape[0]), int(x.shape[1])
    lay = layout(x, n, _cuda.softmax_pack(native), owner)
    pieces = plan(xp, offsets, n, lay.chunk, lay.short_max, owner)
    out = alloc((rows, width), acc)
    if lay.short_max >= 0:
        _kernel(xp, "softmax", "softmax_short", dtype=native)(
            lay.short_grid, (_cuda.BLOCK,), (x, offsets, out, lay.n64, lay.width64, lay.short64))
    by_block = _by_block(lay, rows, n, _tuning.SOFTMAX_BLOCK_STEPS)
    if by_block:
        _kernel(xp, "softmax", "softmax_block", dtype=native, pack=lay.pack)(
            lay.block_grid, (_cuda.BLOCK,),
            (x, offsets, pieces, out, lay.n64, lay.width64, lay.log2cw32, lay.tiles32))
        if not lay.multi:
            return out
    stats = alloc((2, n, width), acc)  # running max, sum of exp
    peak, total = stats[0], stats[1]  # (each view made once: the launches share them)
    partial = _workspace(alloc, lay, (width,), acc, stats, lead=(2,))
    part_peak, part_total = (partial[0], partial[1]) if lay.multi else (peak, total)  # (the same views)
    geometry = (lay.n64, lay.width64, lay.log2cw32, lay.chunk64, _FLAGS32[by_block], lay.tiles32)
    _kernel(xp, "softmax", "softmax_stats", dtype=native, pack=lay.pack)(
        lay.grid, (lay.threads,), (x, offsets, pieces, peak, total, part_peak, part_total) + geometry)
    if lay.multi:
        _kernel(xp, "softmax", "softmax_combine", dtype=native)(
            lay.combine_grid, (_cuda.BLOCK,), (pieces, part_peak, part_total, peak, total, lay.n64, lay.width64))
    _kernel(xp, "softmax", "softmax_apply", dtype=native, pack=lay.pack)(
        lay.grid, (lay.threads,), (x, offsets, pieces, peak, total, out) + geometry)
    return out


def segment_softmax_grad(xp, grad, y, offsets, n, alloc, owner=None):
    """The gradient of segment softmax: ``y * (grad - dot)``, ``dot`` the sum over each sequence's
    rows of ``grad * y``, for ``[rows, width]`` float32 or float64 ``grad`` and ``y`` (the softmax's
    output) of one dtype: a ``[rows, width]`` array. ``owner``: see :func:`plan`. The routes of
    :func:`_backward`: ``lt_softmax_grad_block`` (``grad`` and ``y`` read from HBM once), or
    ``lt_segment_dot`` then ``lt_softmax_grad_apply``, and ``lt_softmax_grad_short``."""
    return _backward(xp, ("softmax", "softmax_grad", "dot"), (grad, y), (grad, y), offsets, n, alloc, owner)


def segment_extreme_grad(xp, x, m, grad, offsets, n, alloc, owner=None):
    """The gradient of segment max or min: each sequence's ``grad`` (``[n, width]``) shared evenly, per
    column, among its rows of ``x`` (``[rows, width]``) equal to its result ``m`` (``[n, width]``), as
    ``scatter_reduce``'s; zeros elsewhere. float32 or float64, all of one dtype: a ``[rows, width]``
    array. ``owner``: see :func:`plan`. The routes of :func:`_backward`: ``lt_extreme_grad_block``, or
    ``lt_segment_hits`` (the rows equal to the result, counted) then ``lt_extreme_grad_apply``, and
    ``lt_extreme_grad_short``."""
    return _backward(xp, ("segment", "extreme_grad", "hits"), (x, m, grad), (x, m), offsets, n, alloc, owner)


def _backward(xp, kernels, operands, counted, offsets, n, alloc, owner):
    """A backward pass that reads each sequence's rows twice and writes them once: a per-column sum over
    the rows (of ``counted``, by the segment module's ``kernels[2]`` kernel), then each row's result.
    ``kernels``: (module, prefix of the ``_block`` / ``_apply`` / ``_short`` kernels, the sum's kernel);
    ``operands``: the kernels' array arguments, the first ``[rows, width]`` (the output's shape and
    dtype; float32 or float64).

    The routes of :func:`segment_softmax`: where the sequences average at least
    ``_tuning.SOFTMAX_BLOCK_STEPS`` block steps, a block per one-piece sequence (the sum, then the
    rows again from L2); else, and for the multi-piece sequences, the sum over the pieces (and the
    sum's combine pass), then the apply kernel; sequences of a few narrow rows one thread each.
    """
    module, prefix, summed = kernels
    x = operands[0]
    native = _dtype_name(x.dtype)
    rows, width = int(x.shape[0]), int(x.shape[1])
    aligned = all(pointer(a) % 16 == 0 for a in operands)
    lay = layout(x, n, None if aligned else 1, owner)  # every operand read in packs, or none
    pieces = plan(xp, offsets, n, lay.chunk, lay.short_max, owner)
    out = alloc((rows, width), x.dtype)
    if lay.short_max >= 0:
        _kernel(xp, module, f"{prefix}_short", dtype=native)(
            lay.short_grid, (_cuda.BLOCK,),
            operands + (offsets, out, lay.n64, lay.width64, lay.short64))
    by_block = _by_block(lay, rows, n, _tuning.SOFTMAX_BLOCK_STEPS)
    if by_block:
        _kernel(xp, module, f"{prefix}_block", dtype=native, pack=lay.pack)(
            lay.block_grid, (_cuda.BLOCK,),
            operands + (offsets, pieces, out, lay.n64, lay.width64, lay.log2cw32, lay.tiles32))
        if not lay.multi:
            return out
    total = alloc((n, width), x.dtype)
    partial = _workspace(alloc, lay, (width,), x.dtype, total)
    geometry = (lay.n64, lay.width64, lay.log2cw32, lay.chunk64, _FLAGS32[by_block], lay.tiles32)
    _kernel(xp, "segment", summed, dtype=native, pack=lay.pack)(
        lay.grid, (lay.threads,), counted + (offsets, pieces, total, partial) + geometry)
    if lay.multi:
        _kernel(xp, "segment", "combine", op="sum", dtype=native)(
            lay.combine_grid, (_cuda.BLOCK,),
            (offsets, pieces, partial, total, lay.n64, lay.width64, x.dtype.type(0)))
    _kernel(xp, module, f"{prefix}_apply", dtype=native, pack=lay.pack)(
        lay.grid, (lay.threads,), operands + (offsets, pieces, total, out) + geometry)
    return out


def pad(xp, words, offsets, n, maxlen, fill, out):
    """Rows of ``words`` (``[rows, width]`` unsigned words of the data's itemsize) into ``out``
    (``[n, maxlen, width]`` words), ``fill`` (``[width]`` words) past each sequence's end."""
    width = int(words.shape[1])
    log2cw = _cuda.lanes_log2(width)
    per_block = _cuda.BLOCK >> log2cw
    kernel(xp, "dense", _cuda.kernel_name("pad", itemsize=words.dtype.itemsize))(
        (blocks(n * int(maxlen), per_block, 1 << 20),), (_cuda.BLOCK,),
        (words, offsets, out, np.int64(n), np.int64(maxlen), np.int64(width), np.int32(log2cw), fill))
    return out


def unpad(xp, padded, offsets, n, total, alloc, owner=None):
    """The first rows of every padded sequence of ``padded`` (``[n, maxlen, width]`` words):
    ``[total, width]`` words."""
    maxlen, width = int(padded.shape[1]), int(padded.shape[2])
    out = alloc((total, width), padded.dtype)
    lay = Layout(total, width, n)
    pieces = plan(xp, offsets, n, lay.chunk, owner=owner)
    kernel(xp, "dense", _cuda.kernel_name("unpad", itemsize=padded.dtype.itemsize))(
        lay.grid, (lay.threads,),
        (padded, offsets, pieces, out, np.int64(n), np.int64(maxlen), np.int64(width), np.int32(lay.log2cw),
         np.int64(lay.chunk), np.int32(lay.tiles_first)))
    return out
