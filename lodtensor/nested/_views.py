"""Views of regular component dims: ``narrow``, ``split``, ``split_with_sizes``, ``chunk``, ``expand``, slices
and int indexing of a regular dim share the input's memory, as torch's jagged layout (whose results are views
of ``values()``: a write into one reaches the input, and the other way round; an expanded window has stride
0 along its grown dims, so the in-place ops that would write one element twice refuse, as torch's, while
``fill_`` and ``zero_`` write each element once: :func:`fill_target`).

A nested tensor keeps its components one after another in one buffer; a window
of a regular dim (``nt[..., 1:3]`` of ``(B, j, 12)``) is no such buffer, its rows
are strided. A :class:`WindowView` holds the window as an array of the input's
library, ``_src`` (shape ``(rows, *row)``: a view of the input's rows, what
torch's ``values()`` is), and reads like a compact nested tensor: its ``_buf``
is a fresh contiguous copy of the window on each read (so it always has the
input's current values; no cache to go stale), which ``_st`` and ``_perm``
describe as any buffer, so every op reads it as it reads any nested tensor.
What keeps the window: ``values()``, ``unbind()``, ``nt[i]``, the ops of this
module's callers (the window ops themselves, ``transpose``, ``permute``,
``detach``, slices of dim 0, and ``unflatten``, ``squeeze``, ``unsqueeze`` and
``view`` where the window reshapes without a copy; ``reshape`` and ``flatten``
copy, as torch's jagged layout) and every write (in-place ops, ``copy_``,
``fill_``, ``out=``), which goes into ``_src`` (``_array()``), so into the
input; torch records it for autograd as it records any write into a view.

Only storage laid out as rows (the ragged dim first in storage, as torch's
jagged layout always has it; transposed views of it included) without outer
ragged levels gets views. Elsewhere (several ragged dims, images) and while
``torch.compile`` traces, the ops copy.

Under ``torch.no_grad()`` a view of a leaf that requires grad reads the leaf's array detached, and
``requires_grad_()`` gives its tensor an array of its own (:mod:`._autograd`): as torch's jagged layout,
where the flag is the nested tensor's and not its ``values``', such views do not require grad.
"""

import numpy as np

from ..backend import backend_of, get_backend
from ._autograd import view_source
from ._dispatch import compiling
from ._holes import carried
from ._holes import component as hole_component
from ._permute import compose, normalize_perm, permute_view, permuted
from ._structure import dropped_jag
from ._tensor import NestedTensor, Structure, make_view

__all__ = ["WindowView", "window", "pieces", "expanded", "aliased", "regrouped", "rebase", "with_perm",
           "components_slice_view", "component", "compact", "write_back", "window_in", "through_copies",
           "padded_permuted", "rows_window", "viewed", "fill_target"]

_object_new = object.__new__


class WindowView(NestedTensor):
    """A nested tensor over a strided window of another one's rows (see the module docstring)."""

    # _src: the window, (rows, *storage dims 1..) of the input's library; _steps: its strides in elements
    __slots__ = ("_src", "_steps")

    @property
    def _buf(self):
        """The window copied into a compact buffer (a new one on each read: the input's current values)."""
        src = self._src
        return backend_of(src).contiguous(src).reshape(-1)

    @property
    def _buffer(self):
        buf = self._buf
        return buf if self._perm is None else permuted(backend_of(buf), buf, self._st, self._perm)

    def _array(self):
        return self._src

    _meta = _tracked = _array

    def _rebind(self, array):
        self._src = array

    def _grad_view(self, grad):
        return make_view(backend_of(grad).contiguous(grad).reshape(-1), self._st, self._perm, self._layout)

    def __copy__(self):
        src = self._src
        be = backend_of(src)
        if not be.requires_grad(src):
            return rebase(self, src)
        return rebase(self, be.detach(src)).requires_grad_()  # as torch's: a leaf, its history not kept

    def to_torch(self):
        """This view with torch data, sharing memory (see :meth:`NestedTensor.to_torch`)."""
        src = get_backend("torch").asarray(self._src)
        return self if src is self._src else rebase(self, src)

    def numpy(self):
        """This view with NumPy data (see :meth:`NestedTensor.numpy`)."""
        src = self.backend.to_numpy(self._src)
        return self if src is self._src else rebase(self, src)


def _window_of(src, storage, perm, layout, steps):
    t = _object_new(WindowView)
    t._src = src
    t._steps = tuple(steps)
    t._st = storage if (storage.jag is None) == (layout != "jagged") else storage.for_layout(layout)
    t._perm = normalize_perm(perm)
    t._layout = layout
    return t


def _c_steps(shape):
    """Element strides of a C-contiguous array of ``shape`` (torch's: a dim of size 0 counts as 1)."""
    steps, acc = [], 1
    for size in reversed(shape):
        steps.append(acc)
        acc *= max(int(size), 1)
    return tuple(reversed(steps))


def _rows_of(nt):
    """``(rows, steps, perm)``: the rows ``nt`` reads (an array ``(rows, *row)``: its buffer's, or its window),
    their strides in elements and ``nt``'s permutation; None where the storage has no rows to view (then the
    caller copies)."""
    st = nt._st
    holes = getattr(nt, "_holes", None)  # with lengths, _buf is a compacted copy of values(): no view of it
    if compiling() or st.outer or st.tail is None or not st.rank or (holes is not None and holes[2] is not None):
        return None
    perm = compose(nt._perm, st.rank)
    if nt._src is not None:
        return view_source(nt._src), list(nt._steps), perm
    if not nt.backend.is_c_contiguous(nt._buf):
        return None
    rows = st.tail_view(view_source(nt._buf), 1)
    return rows, list(_c_steps(rows.shape)), perm


def _rows(nt, axis):
    """``(rows, steps, perm, s)`` of :func:`_rows_of`, with the storage axis ``s`` that component axis ``axis``
    (a regular one) reads; None where the storage has no rows to view, or the axis is the ragged one."""
    found = _rows_of(nt)
    if found is None or found[2][axis] == 0:  # (storage axis 0 holds the rows: the ragged dim)
        return None
    return (*found, found[2][axis])


def expanded(nt, grown):
    """The view of ``nt`` with regular component dims after its ragged one grown as ``grown`` says (component
    axis -> new size; each such dim of size 1 in every component): stride 0 along them, as torch's jagged
    ``expand`` (a view of ``values()`` expanded); None where the storage has no rows to view (then the
    caller copies)."""
    found = _rows_of(nt)
    if found is None:
        return None
    rows, steps, perm = found
    st = nt._st
    tail, table = [int(x) for x in rows.shape[1:]], st.sizes.copy()
    for a, size in grown.items():
        s = perm[a]  # (>= 1: a dim after the ragged one is no storage axis 0)
        tail[s - 1], steps[s] = size, 0
        table[:, s] = size
    src = nt.backend.expand(rows, (int(rows.shape[0]), *tail))
    return _window_of(src, st.derive(table, tail=tuple(tail), jag=st.jag), perm, nt._layout, steps)


def _windowed(nt, rows, steps, perm, s, axis, src, item):
    """The view of ``nt`` whose window ``src`` is ``rows`` indexed by ``item`` along storage axis ``s``."""
    st = nt._st
    steps = list(steps)
    if isinstance(item, slice):
        steps[s] *= item.indices(int(rows.shape[s]))[2]
        sizes = st.sizes.copy()
        sizes[:, s] = int(src.shape[s])
        new_perm, jag = perm, st.jag
    else:
        del steps[s]
        sizes = np.delete(st.sizes, s, axis=1)
        new_perm = [p - (p > s) for i, p in enumerate(perm) if i != axis]
        jag = dropped_jag(st.jag, s)
    storage = st.derive(sizes, tail=tuple(int(x) for x in src.shape[1:]), jag=jag)
    if tuple(steps) == _c_steps(src.shape):  # the window is the rows laid out as a buffer: a plain view
        return make_view(src.reshape(-1), storage, new_perm, nt._layout)
    return _window_of(src, storage, new_perm, nt._layout, steps)


def window(nt, axis, item):
    """The view of component axis ``axis`` (a regular one) of ``nt`` indexed by ``item`` (a slice of positive
    step within the dim, or an index in ``[0, size)``), or None where the storage has no rows to view (then
    the caller copies)."""
    found = _rows(nt, axis)
    if found is None:
        return None
    rows, steps, perm, s = found
    return _windowed(nt, rows, steps, perm, s, axis, rows[(slice(None),) * s + (item,)], item)


def pieces(nt, axis, lengths):
    """Views of consecutive pieces of ``lengths`` elements of component axis ``axis`` (a regular one; the
    lengths add up to its size) of ``nt``, or None where the storage has no rows to view. The windows come
    from one split of the rows, as torch's ``split``/``chunk`` make them: views that are outputs of one
    function returning several, which autograd refuses to let in-place ops write into where the input
    requires grad (torch's "... is a view and is being modified inplace ... multiple views")."""
    found = _rows(nt, axis)
    if found is None:
        return None
    rows, steps, perm, s = found
    be = nt.backend
    bounds = [0]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    parts = be.split_rows(be.swapaxes_view(rows, 0, s), bounds)  # (one multi-output op along axis s)
    return tuple(_windowed(nt, rows, steps, perm, s, axis, be.swapaxes_view(part, 0, s), slice(lo, hi))
                 for part, lo, hi in zip(parts, bounds, bounds[1:]))


def rows_window(rows, storage, layout):
    """A window view over ``rows`` (an array ``(rows, *row)`` that is not C-contiguous, a transposed or sliced
    one) laid out as ``storage`` (one ragged dim, the first): its memory shared, as torch's
    ``nested_tensor_from_jagged`` shares strided ``values``. None where a stride is negative or zero, or not
    a whole number of elements (then the caller copies)."""
    stride = getattr(rows, "stride", None)  # torch's strides (elements); NumPy's and CuPy's ``strides`` (bytes)
    raw = tuple(stride()) if callable(stride) else tuple(getattr(rows, "strides", ()))
    unit = 1 if callable(stride) else int(rows.dtype.itemsize)
    if len(raw) != rows.ndim or any(t <= 0 or t % unit for t, size in zip(raw, rows.shape) if size > 1):
        return None
    return _window_of(rows, storage, None, layout, (int(t) // unit for t in raw))


def regrouped(nt, table, perm, jag):
    """The window view ``nt`` with its storage regrouped as ``table`` (the same elements in the same order:
    size-1 dims added or dropped, dims split or merged; ``jag`` its jagged axis), read through ``perm``; None
    where the window cannot be reshaped so without a copy, or its rows would not stay first."""
    st = nt._st
    table = np.asarray(table, dtype=np.int64)
    if not st.n or not table.shape[1] or not np.array_equal(table[:, 0], st.sizes[:, 0]) or (
            table[:, 1:] != table[:1, 1:]).any():
        return None
    shape = (int(nt._src.shape[0]), *(int(s) for s in table[0, 1:]))
    steps = _reshape_steps(tuple(int(s) for s in nt._src.shape), nt._steps, shape)
    if steps is None:
        return None
    storage = st.derive(table, st.offsets, tail=shape[1:], jag=jag)
    return _window_of(view_source(nt._src).reshape(shape), storage, perm, nt._layout, steps)


def _reshape_steps(old_shape, old_steps, new_shape):
    """The strides (elements) of ``new_shape`` viewing, in the same C order, the elements of an array of
    ``old_shape`` and strides ``old_steps``; None where no strides can (NumPy's no-copy reshape rule). Both
    shapes hold the same number of elements."""
    if 0 in old_shape or 0 in new_shape:  # no element: any strides read them all
        return _c_steps(new_shape)
    old = [(s, t) for s, t in zip(old_shape, old_steps) if s != 1]
    wide = [k for k, s in enumerate(new_shape) if s != 1]
    steps = [1] * len(new_shape)
    i = j = 0
    while i < len(wide):
        group, count = [wide[i]], new_shape[wide[i]]
        first, total = j, old[j][0]
        j += 1
        while count != total:  # the smallest runs of new and old dims that hold the same elements
            if count < total:
                i += 1
                group.append(wide[i])
                count *= new_shape[wide[i]]
            else:
                total *= old[j][0]
                j += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(first, j - 1)):
            return None  # old dims merged here that are not one run in memory
        step = old[j - 1][1]
        for k in reversed(group):
            steps[k] = step
            step *= new_shape[k]
        i += 1
    for k in reversed(range(len(new_shape))):  # a dim of size 1: torch's stride for it (unsqueeze's)
        if new_shape[k] == 1:
            steps[k] = steps[k + 1] * new_shape[k + 1] if k + 1 < len(new_shape) else 1
    return tuple(steps)


def rebase(nt, src):
    """The window view ``nt`` over another array ``src`` of its shape (``detach``, a conversion)."""
    return _window_of(src, nt._st, nt._perm, nt._layout, nt._steps)


def aliased(array):
    """``array`` as the array of a view of the tensor that holds it: where autograd tracks it, a view of it (a
    result of an op, as torch's views: ``is_leaf`` False, a ``grad_fn``, in-place writes refused as into a view
    of a leaf; its own node, so ``retain_grad()`` of the view keeps the gradient through the view alone, not
    its input's); else ``array`` itself (detached where it is a leaf and grad mode is off:
    :func:`~lodtensor.nested._autograd.view_source`)."""
    array = view_source(array)
    if backend_of(array).requires_grad(array):
        return array[:]
    return array


def with_perm(nt, perm):
    """``nt`` reading its storage through ``perm`` (``transpose``, ``permute``): a window view stays one; a
    view, so never a leaf where autograd tracks ``nt`` (as torch's)."""
    if nt._src is None:  # (with holes: kept, read through perm)
        return carried(nt, make_view(aliased(nt._buf), nt._st, perm, nt._layout))
    return _window_of(aliased(nt._src), nt._st, perm, nt._layout, nt._steps)


def viewed(nt):
    """Whether ``nt`` is a view whose components, slices of dim 0 and same-shape ``view()`` are views of its
    storage: a window view, or a transposed view without holes (with them, its buffer is a compacted copy of
    ``values()``, so these copy, as the window ops do on such a tensor)."""
    return nt._src is not None or (nt._perm is not None and getattr(nt, "_holes", None) is None)


def components_slice_view(nt, lo, hi):
    """Components ``lo:hi`` (top-level entries) of the window view or transposed view ``nt``: a view of the same
    window, or of the storage read through the same permutation (``lo <= hi`` in range)."""
    st = nt._st
    if nt._src is None:  # a transposed view: the storage's components lo:hi, still read through _perm
        lo, hi, levels = st.top_slice(lo, hi)
        storage = Structure(st.sizes[lo:hi].copy(), outer=levels, tail=st.tail, jag=st.jag)
        buf = view_source(nt._buf)
        return make_view(buf[int(st.offsets[lo]) : int(st.offsets[hi])], storage, nt._perm, nt._layout)
    rows = st.rows()[0]
    storage = Structure(st.sizes[lo:hi].copy(), tail=st.tail, jag=st.jag)
    src = view_source(nt._src)
    return _window_of(src[int(rows[lo]) : int(rows[hi])], storage, nt._perm, nt._layout, nt._steps)


def component(nt, i):
    """Component ``i`` (in range) of ``nt`` (one ragged level): a view of its window, or of its storage read
    through its permutation (as torch's ``nt.transpose(1, 2)[i]``)."""
    st = nt._st
    live = hole_component(nt, i)  # (holes: a view of their values, as torch's)
    if live is not None:
        return live
    if nt._src is None:
        buf = view_source(nt._buf)
        part = buf[int(st.offsets[i]) : int(st.offsets[i + 1])].reshape(tuple(int(s) for s in st.sizes[i]))
    else:
        rows = st.rows()[0]
        part = view_source(nt._src)[int(rows[i]) : int(rows[i + 1])]
    return part if nt._perm is None else permute_view(nt.backend, part, nt._perm)


def fill_target(nt):
    """The array ``fill_`` writes into: ``nt``'s (``_array()``); of an expanded view (a window with steps of 0),
    the window with one index along each such dim, so each element is written once (torch's ``fill_`` and
    ``zero_`` write into an expanded view, where its other in-place ops refuse)."""
    src = nt._array()
    if nt._src is None or 0 not in nt._steps:
        return src
    return src[tuple(slice(0, 1) if step == 0 else slice(None) for step in nt._steps)]


def compact(nt):
    """A nested tensor of its own over a compact copy of the window view ``nt`` (for an in-place op to write
    into, then :func:`write_back`)."""
    return make_view(nt._buf, nt._st, nt._perm, nt._layout)


def write_back(nt, done):
    """The values of ``done`` (a :func:`compact` copy of ``nt``, written) into ``nt``'s window; returns ``nt``."""
    target = nt._src
    target[...] = done._buf.reshape(target.shape)
    return nt


def window_in(out):
    """Whether ``out`` (an ``out=`` argument: a nested tensor, or a tuple of them and None) holds a window view."""
    return any(o._src is not None for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, NestedTensor))


def through_copies(out, run):
    """``run(copies)`` with a :func:`compact` copy standing for each window view of ``out`` (``out=``), the
    copies then written into the windows; returns ``out`` as ``out=`` calls return it."""
    outs = out if isinstance(out, tuple) else (out,)
    copies = tuple(compact(o) if isinstance(o, NestedTensor) and o._src is not None else o for o in outs)
    run(copies)
    for o, c in zip(outs, copies):
        if c is not o:
            write_back(o, c)
    return out[0] if isinstance(out, tuple) and len(out) == 1 else out


def padded_permuted(nt, pad, output_size):
    """``to_padded_tensor`` of the transposed view ``nt`` whose storage is rows (ragged dim first): the storage
    padded by ``pad(storage, size)`` (one pass), then its axes permuted as ``nt`` reads them (one copy): the
    components are never materialised through the permutation, which takes one gather per group of equal
    shapes."""
    perm = nt._perm
    inverse = tuple(int(a) for a in np.argsort(perm))
    size = None if output_size is None else (output_size[0], *(output_size[1 + inverse[a]] for a in range(len(perm))))
    dense = pad(make_view(nt._buf, nt._st, None, nt._layout), size)
    be = nt.backend
    return be.contiguous(permute_view(be, dense, (0, *(1 + p for p in perm))))
