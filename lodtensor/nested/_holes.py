"""Components with holes: torch's jagged ``offsets`` plus ``lengths``, component ``i`` the rows
``values[offsets[i]:offsets[i] + lengths[i]]`` (``nested_tensor_from_jagged``, ``narrow`` of a dense tensor).

The nested tensor keeps a gathered copy of those rows as its buffer and remembers ``values``, ``offsets`` and
``lengths`` (``_holes``), so that ``values()``, ``offsets()`` and ``lengths()`` answer as torch's. torch's
tensor is a view of ``values``, and its elementwise ops compute over all of ``values``, the holes too; here:

- an elementwise op (unary, binary with a scalar, a dense operand over the row dims or a nested operand with the
  same holes), ``clone``, ``to()`` (the casts), and the reductions, softmax and ``layer_norm`` over the row dims
  alone (:func:`over_row_dims`), and ``matmul`` by a dense matrix, compute over the rows of ``values`` and keep
  the holes (:func:`apply`, :func:`converted`), on a transposed view too (over ``values`` read through its
  permutation: one component); the result's buffer is gathered on its first read (``over(lazy=True)``: these
  ops and ``unbind()`` read none); ``F.<activation>(inplace=True)`` writes every row, as its ``<name>_``;
- an in-place op writes into ``values``: the whole of it where the result keeps the holes (``write_into``,
  ``fill_``), else the components' rows, written back after any in-place write (``NestedTensor._written``);
  values that take no in-place write (a leaf that requires grad) are refused first (:func:`check_writable`).

Other ops (over the ragged dim, ``to_padded_tensor``...) compute on the components alone and give a tensor
without holes.

With values that count their writes (torch's version counter, ``Backend.version``) the tensor is a view of them,
as torch's: its buffer is stamped with their version when gathered and gathered again on the next read after
it moved on (a write from outside, through ``values()``, through a view: ``NestedTensor._buf``), and its
components are views of them (:func:`component`). Its views keep the holes: transposed ones (:func:`carried`,
``values`` read through the permutation), regrouped ones (:func:`reshaped`) and slices of dim 0
(:func:`sliced`); those that could not keep them copy. NumPy, CuPy and torch's inference tensors count no
writes, nor torch values over memory that ``to_torch()`` or ``numpy()`` shared with NumPy (CuPy) values
(:func:`twinned`): over them the buffer is gathered again, in place, on each read of it (a view of them too, at
the cost of a gather per read: ``dtype`` and ``device`` read ``NestedTensor._meta``, the autograd state
``_tracked``, no gather).

>>> import lodtensor.nested as ln
>>> base = np.arange(8.0).reshape(2, 4)
>>> nt = ln.narrow(base, 1, np.array([0, 1]), np.array([2, 3]), layout="jagged")
>>> doubled = nt * 2
>>> doubled.values().tolist(), doubled.lengths().tolist(), doubled.unbind()[1].tolist()
([0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0], [2, 3], [10.0, 12.0, 14.0])
>>> _ = nt.add_(1)
>>> base.tolist()
[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]
"""

import weakref

import numpy as np

from ..backend import backend_of
from ._autograd import view_source
from ._permute import permute_view
from ._tensor import NestedTensor, Structure, make, make_view

__all__ = ["rows_of", "whole", "gathered", "live", "carried", "component", "sliced", "copied", "reshaped", "over",
           "apply", "over_row_dims", "converted", "twinned", "check_writable", "same", "written"]


def rows_of(offsets, lengths):
    """The rows of ``values`` holding the components (host int64), in component order."""
    counts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    return np.repeat(offsets[:-1] - counts[:-1], lengths) + np.arange(int(counts[-1]), dtype=np.int64)


_INDEX = {}  # (id(offsets), id(lengths), id(backend), device) -> (weakrefs of offsets and lengths, the index there)
_MAX_INDEX = 64


def _index(values, offsets, lengths):
    """:func:`rows_of` on ``values``' library and device, made once per (offsets, lengths) arrays (the results of
    ops share their operand's) and device: an op then makes no host pass over the rows and no copy to a GPU."""
    be = backend_of(values)
    key = (id(offsets), id(lengths), id(be), be.device_of(values))
    hit = _INDEX.get(key)
    if hit is not None and hit[0]() is offsets and hit[1]() is lengths:
        return hit[2]
    index = be.from_host(rows_of(offsets, lengths), like=values)
    if len(_INDEX) >= _MAX_INDEX:  # (tensors made and dropped: forget the old ones)
        _INDEX.clear()
    _INDEX[key] = (weakref.ref(offsets), weakref.ref(lengths), index)
    return index


def whole(nt):
    """``(values, offsets, lengths)`` of a nested tensor whose ops run over all of ``values`` (:func:`live`
    holes, transposed views too), else None."""
    holes = live(nt)
    if holes is None:
        return None
    be = backend_of(holes[0])  # (a buffer made to require grad, ``requires_grad_()``, over values that do not:
    return None if be.requires_grad(nt._meta()) and not be.requires_grad(holes[0]) else holes  # its graph)


def gathered(nt):
    """:func:`whole`'s holes of a nested tensor that is no transposed view (its ``values`` are its storage's
    rows), else None."""
    return whole(nt) if nt._perm is None else None


def over(values, offsets, lengths, lazy=False):
    """A jagged nested tensor with holes: the components ``values[offsets[i]:offsets[i] + lengths[i]]``
    (``values`` as rows ``(rows, *row)``; host int64 ``offsets`` and ``lengths``, already checked); ``lazy``:
    the buffer gathered on its first read (an op's result: ops over all of values and ``unbind()`` need none)."""
    be = backend_of(values)
    flat = None if lazy else be.contiguous(be.gather(values, _index(values, offsets, lengths))).reshape(-1)
    nt = make(flat, Structure.of_rows(lengths, tuple(int(s) for s in values.shape[1:])), "jagged")
    nt._holes = (values, offsets, lengths)
    return nt


def same(a, b):
    """Whether the holes of ``a`` and ``b`` (:func:`gathered`) are the same: values of one shape, the same
    offsets and lengths."""
    return (tuple(a[0].shape) == tuple(b[0].shape) and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2]))


def _rows_tensor(nt):
    """A one-component jagged nested tensor over every row of ``nt``'s holes' values, read through ``nt``'s
    permutation (its component is ``values()``)."""
    rows = _storage_rows(nt, nt._holes[0])
    be = backend_of(rows)
    one = make(be.contiguous(rows).reshape(-1), Structure.of_rows([int(rows.shape[0])], tuple(
        int(s) for s in rows.shape[1:])), "jagged")
    return one if nt._perm is None else make_view(one._data, one._st, nt._perm, "jagged")


def _ragged_axis(nt):
    """The component axis of ``nt``'s ragged dim (0 but for a transposed view), None where there is none."""
    return nt._struct.jag


def apply(fn, args, kwargs=None):
    """``fn(*args, **kwargs)`` computed over all the rows of the holes' values of its first nested operand (read
    through its permutation: one component, its ``values()``), as torch's elementwise ops on a tensor with holes,
    with the holes kept; None where that does not apply: that operand has no such holes, another nested operand
    has other holes (or none, or another layout), or a dense operand has a dim that is not 1 along the batch or
    the ragged dim (it would broadcast per component)."""
    kwargs = kwargs or {}
    operands = (*args, *kwargs.values())
    first = next((x for x in operands if isinstance(x, NestedTensor)), None)
    holes = None if first is None else whole(first)
    ragged = None if holes is None else _ragged_axis(first)
    if ragged is None:
        return None
    dims = first.dim() - 1  # (the component dims; a dense operand's last ones line up with them)
    swapped = {}
    for value in operands:
        if isinstance(value, NestedTensor):
            theirs = whole(value)
            if theirs is None or value._perm != first._perm or not same(holes, theirs):
                return None
            swapped[id(value)] = _rows_tensor(value)
        elif hasattr(value, "shape") and hasattr(value, "ndim"):
            lead = value.ndim - dims  # (its dims before those of the components: along the batch dim and beyond)
            if any(int(s) != 1 for s in value.shape[:max(lead, 0)]) or (
                    0 <= lead + ragged < value.ndim and int(value.shape[lead + ragged]) != 1):
                return None

    def swap(value):
        return swapped[id(value)] if isinstance(value, NestedTensor) else value

    out = fn(*(swap(a) for a in args), **{k: swap(v) for k, v in kwargs.items()})
    rows = int(_storage_rows(first, holes[0]).shape[0])
    if isinstance(out, tuple):  # (values, indices) of max/min over row dims: both keep the holes
        kept = [_kept(part, holes, rows) for part in out]
        return None if any(part is None for part in kept) else type(out)(*kept)
    return _kept(out, holes, rows)


def _kept(out, holes, rows):
    """``out``, a result over every one of the ``rows`` rows of ``holes``' values (one component:
    :func:`_rows_tensor`), as a tensor with those holes (a transposed view where its ragged dim is not its
    first); None where it is no such result."""
    axis = _ragged_axis(out) if isinstance(out, NestedTensor) and out._src is None and out._st.n == 1 else None
    if axis is None or out._st.outer or int(out._struct.sizes[0, axis]) != rows:
        return None  # (not a result row for row over the values: the caller computes on the components)
    component = view_source(out._buffer).reshape(tuple(int(s) for s in out._struct.sizes[0]))
    if axis == 0:
        return over(component, holes[1], holes[2], lazy=True)
    order = (axis, *(a for a in range(component.ndim) if a != axis))  # the ragged dim first: the rows
    base = over(permute_view(backend_of(component), component, order), holes[1], holes[2], lazy=True)
    return carried(base, make_view(base._data, base._st, tuple(int(a) for a in np.argsort(order)), "jagged"))


def over_row_dims(nt, dims):
    """Whether ``nt`` has holes its ops run over (:func:`whole`) and ``dims`` (an int or ints, negative from the
    end; None: every dim) are all dims of its rows (neither dim 0 nor the ragged dim): an op reducing or
    normalising over them alone keeps the holes."""
    if whole(nt) is None or dims is None or _ragged_axis(nt) is None:
        return False
    ndim, ragged = nt.dim(), _ragged_axis(nt) + 1
    return all(isinstance(d, int) and d % ndim not in (0, ragged) for d in (
        dims if isinstance(dims, (tuple, list)) else (dims,)))


def converted(nt, convert):
    """``convert`` (a cast or a move, NestedTensor to NestedTensor) over every row of the holes' values of
    ``nt``, with the holes kept, as torch's ``to()``: ``nt`` itself where ``convert`` changes nothing; None
    where ``nt`` has no gathered holes (the caller converts the components)."""
    holes = whole(nt)
    if holes is None or _ragged_axis(nt) is None:
        return None
    rows = _rows_tensor(nt)
    out = convert(rows)
    return nt if out is rows else _kept(out, holes, int(_storage_rows(nt, holes[0]).shape[0]))


def twinned(ours, theirs):
    """After ``to_torch()`` or ``numpy()`` of a tensor with holes: where one of ``ours`` and ``theirs`` has values
    that count writes (torch's) over the memory of the other's values that count none (NumPy's, CuPy's), the
    former (every array over their memory: the original's views too) count none from now on either
    (``Backend.uncount``): gathered again on each read, so a write through the twin shows in ops reading the
    buffer."""
    a, b = live(ours), live(theirs)
    if a is None or b is None or ours is theirs:
        return
    counted = [v for v in (a[0], b[0]) if backend_of(v).version(v) is not None]
    if len(counted) == 1:
        other = b[0] if counted[0] is a[0] else a[0]
        backend_of(counted[0]).uncount(counted[0], other)


def live(nt):
    """``(values, offsets, lengths)`` of a nested tensor whose buffer is a gathered copy of rows of ``values``,
    read through its ``_perm`` (``values`` as its components read: a transposed view's are transposed, as
    torch's ``values()``), else None."""
    holes = getattr(nt, "_holes", None)
    return None if holes is None or holes[2] is None or nt._src is not None else holes


def _storage_rows(nt, values):
    """``values`` (as ``nt``'s components read) as its storage's rows: read through the inverse of ``_perm``."""
    if nt._perm is None:
        return values
    return permute_view(backend_of(values), values, tuple(int(a) for a in np.argsort(nt._perm)))


def carried(nt, view):
    """``view``, a transposed view of ``nt``'s storage (``with_perm``), with ``nt``'s holes read through its
    permutation (as torch's transposed view of a tensor with holes: its ``values()`` transposed, writes into it
    reaching them); ``view`` as it is where ``nt`` has none."""
    holes = live(nt)
    if holes is not None:
        rows = _storage_rows(nt, holes[0])
        view._holes = (rows if view._perm is None else permute_view(backend_of(rows), rows, view._perm), *holes[1:])
    return view


def check_writable(nt):
    """Refuse an in-place write into ``nt`` whose holes' values take no in-place write (with autograd, a leaf
    that requires grad: torch's tensor is a view of them), before anything is written: an empty write into the
    values raises what the real one would, with the library's words."""
    holes = live(nt)
    if holes is not None:
        values = holes[0]
        be = backend_of(values)  # (only where it may refuse: the empty write moves a version counter)
        leaf = getattr(values, "is_leaf", False) or getattr(getattr(values, "_base", None), "is_leaf", False)
        if be.version(values) is None or (be.requires_grad(values) and leaf):  # (a leaf, or a view of one)
            be.scatter(values, be.from_host(np.empty(0, dtype=np.int64), like=values), values[:0])


def written(out):
    """After a write into ``out`` from outside the in-place ops (NumPy's ``out=``: a nested tensor, or a tuple of
    them and None): the ``_written()`` hook of each nested tensor (with holes: their rows into the values)."""
    for target in out if isinstance(out, tuple) else (out,):
        if isinstance(target, NestedTensor):
            target._written()


def _write_holes(self):
    """After an in-place write into the buffer: the components' rows written back into the holes' values (and
    the buffer stamped with their version: it holds what they do)."""
    holes = live(self)
    if holes is None:
        return
    values, offsets, lengths = holes
    be = backend_of(values)
    target = _storage_rows(self, values)
    rows = self._data.reshape((-1, *tuple(int(s) for s in target.shape[1:])))
    be.scatter(target, _index(target, offsets, lengths), rows)
    self._restamp()


def _restamp(self):
    """Stamp the buffer as gathered from the holes' values now: with their version, or -1 where they count no
    writes (NumPy, CuPy, torch's inference tensors: gathered again, in place, on each read, :func:`_regather`);
    None without holes over all of them (``lengths`` None)."""
    holes = self._hole_parts
    version = None if holes is None or holes[2] is None else backend_of(holes[0]).version(holes[0])
    self._stamp = None if holes is None or holes[2] is None else -2 if self._data is None else (
        -1 if version is None else version)  # (-2: not gathered yet, ``over(lazy=True)``)


def _regather(self):
    """The buffer gathered again from the holes' values, written since it was (their version moved on: from
    outside, through ``values()`` or a view): a new buffer, or where the buffer is a leaf that requires grad
    (``requires_grad_()``), the same one rewritten without recording it."""
    values, offsets, lengths = self._hole_parts
    be = backend_of(values)
    rows = _storage_rows(self, values)
    fresh = be.contiguous(be.gather(rows, _index(rows, offsets, lengths))).reshape(-1)
    data = self._data
    if data is None:  # (the first read of a result not gathered yet)
        self._data = fresh
    elif self._stamp == -1 and not (be.requires_grad(data) or be.requires_grad(fresh)):  # (on each read: in
        # place, so an array read before is the one an in-place op wrote; not into autograd's: torch values twinned)
        try:
            data[...] = fresh
        except RuntimeError:  # (a torch inference tensor, read outside inference mode, takes no write: a new one,
            self._data = fresh  # over which no in-place op of the tensor runs there: its values take none either)
    elif be.requires_grad(data) and (getattr(data, "is_leaf", False) or not be.requires_grad(values)):
        be.detach(data)[...] = be.detach(fresh)  # (made to require grad, requires_grad_(): its graph kept)
    else:
        self._data = fresh
    self._restamp()


def _hole_leaf(self, requires_grad):
    """``requires_grad_()`` of a tensor with holes over torch values that require no grad (no transposed view):
    as torch's, the tensor becomes a leaf over the values' memory (``_leaf``, a detached alias of them; its
    ``values()`` a view of that leaf, so its ops keep the holes and its ``grad`` has them: values-shaped, zeros
    in the holes); ``requires_grad_(False)`` undoes it. True where done, else False (the caller's path)."""
    leaf = getattr(self, "_leaf", None)
    if leaf is not None:
        if not requires_grad:
            leaf.requires_grad_(False)
            self._leaf, self._data = None, backend_of(leaf).detach(self._buf)
            self._holes = (leaf, *self._hole_parts[1:])
            self._regather()
        return True
    holes = live(self)
    stamp = getattr(self, "_stamp", None)
    if not requires_grad or holes is None or self._perm is not None or stamp is None or (
            stamp == -1 and not backend_of(holes[0]).uncount(holes[0])):  # (NumPy's, CuPy's, inference: no leaf)
        return False
    be = backend_of(holes[0])
    if be.requires_grad(holes[0]) or be.requires_grad(self._buf):
        return False
    self._leaf = be.detach(holes[0]).requires_grad_(True)
    self._holes = (self._leaf[:], *holes[1:])  # (a view of the leaf, as torch's values(): its writes refused)
    self._regather()
    return True


def _leaf_grad(self, grad):
    """The gradient of a tensor made a leaf over its values (:func:`_hole_leaf`), values-shaped, as a tensor with
    its holes (torch's ``grad``)."""
    return over(grad, *self._hole_parts[1:])


def _leaf_array(self, value):
    """A nested tensor like ``self`` (made a leaf over its values) as a values-shaped array: its values where it
    has the same holes, else its components scattered into zeros (the holes' rows)."""
    holes, theirs = self._hole_parts, whole(value) if isinstance(value, NestedTensor) else None
    if theirs is not None and value._perm is None and same(holes, theirs):
        return theirs[0]
    be = backend_of(self._leaf)
    out = be.zeros(tuple(self._leaf.shape), self._leaf.dtype, like=self._leaf)
    rows = value._buffer_like(value).reshape((-1, *tuple(int(s) for s in self._leaf.shape[1:])))
    return be.scatter(out, _index(out, holes[1], holes[2]), rows)


def _live_rows(nt):
    """The storage's rows of ``nt``'s holes' values (a view of them), where ``nt`` reads them again after a write
    (:func:`_regather`) and their views carry ``nt``'s autograd state; else None (the buffer requires grad and the
    values do not, ``requires_grad_()``: its views carry it)."""
    if getattr(nt, "_stamp", None) is None:
        return None
    values = nt._hole_parts[0]
    if backend_of(values).requires_grad(nt._meta()) and not backend_of(values).requires_grad(values):
        return None
    return view_source(_storage_rows(nt, values))


def component(nt, i):
    """Component ``i`` of ``nt`` as a view of its holes' values, as torch's (a write into it reaches
    ``values()``, which ``nt`` reads again), where :func:`_live_rows` gives them; else None (then the caller
    gives a view of the buffer)."""
    rows = _live_rows(nt)
    if rows is None:
        return None
    start = int(nt._hole_parts[1][i])
    part = rows[start:start + int(nt._hole_parts[2][i])]
    return part if nt._perm is None else permute_view(backend_of(rows), part, nt._perm)


def _hole_components(self):
    """The components as :func:`component` gives them (one pass over the offsets); None where it gives none."""
    rows = _live_rows(self)
    if rows is None:
        return None
    offsets, lengths = self._hole_parts[1], self._hole_parts[2]
    be = backend_of(rows)
    order = np.argsort(offsets[:-1], kind="stable") if be.requires_grad(rows) else None
    cuts = None if order is None else np.stack([offsets[:-1][order], (offsets[:-1] + lengths)[order]], 1).ravel()
    if cuts is not None and (cuts[1:] >= cuts[:-1]).all():  # (with autograd, components apart: every other
        pieces = be.split_rows(rows, [0, *cuts.tolist(), int(rows.shape[0])])[1::2]  # piece of one split, as
        parts = [pieces[k] for k in np.argsort(order)]  # torch's unbind(): in place, "multiple views" refused)
    else:
        parts = [rows[o:o + n] for o, n in zip(offsets[:-1].tolist(), lengths.tolist())]
    return parts if self._perm is None else [permute_view(be, p, self._perm) for p in parts]


def sliced(nt, out, lo, hi):
    """``out``, components ``lo:hi`` of ``nt`` over its buffer (a slice of dim 0), with those components' holes:
    over the run of rows of values from the first one's start to the last one's end where they lie there in
    order (that run holds none of the other components' rows, which an op over all of it would write), else
    a copy without holes; ``out`` itself where ``nt`` has none (or is transposed: ``out`` is a copy then)."""
    holes = live(nt)
    if holes is None or nt._perm is not None:
        return out
    starts, lengths = holes[1][lo:hi], holes[2][lo:hi]
    ends = starts + lengths
    first, last = (int(starts[0]), int(ends[-1])) if starts.size else (0, 0)
    other = np.ones(holes[2].size, dtype=bool)
    other[lo:hi] = False
    theirs = holes[1][:-1][other]  # (a component outside the slice with a row in the run would be written too)
    if not starts.size or (starts[1:] < ends[:-1]).any() or (
            (theirs < last) & (theirs + holes[2][other] > first) & (holes[2][other] > 0)).any():
        out._buf = backend_of(out._data).clone(out._data)
        return out
    out._holes = (holes[0][first:last], np.append(starts - first, last - first), lengths)
    return out


def copied(nt, array):
    """``array``, a result's buffer made from ``nt``'s, as a copy of its own where ``nt`` has holes (it may be
    ``nt``'s buffer itself, which holds what the values do: a result without the holes must not share it)."""
    return array if live(nt) is None else backend_of(array).clone(array)


def reshaped(nt, out, view=True):
    """``out``, a view of ``nt``'s storage regrouped (``view``, ``unflatten``, ``unsqueeze``...), with ``nt``'s
    holes where its storage keeps the same rows first: their values viewed with its row shape (C-contiguous
    ones: a view, as torch's ``values()`` of the result), read through ``out``'s permutation. Elsewhere, and
    for ``reshape`` (``view`` False: torch's copies a tensor with holes), a copy of the components without
    holes (not a view of the buffer, which holds what the values do); ``out`` itself where ``nt`` has none."""
    holes = live(nt)
    if holes is None:
        return out
    st = out._st
    rows = _storage_rows(nt, holes[0])
    be = backend_of(rows)
    if not (view and st.tail is not None and not st.outer and np.array_equal(st.sizes[:, 0], nt._st.sizes[:, 0])
            and be.is_c_contiguous(rows)):
        out._buf = be.clone(out._data)
        return out
    rows = rows.reshape((int(rows.shape[0]), *st.tail))
    out._holes = (rows if out._perm is None else permute_view(be, rows, out._perm), *holes[1:])
    return out


NestedTensor._attach(_write_holes=_write_holes, _regather=_regather, _restamp=_restamp,
                     _hole_components=_hole_components, _hole_leaf=_hole_leaf, _leaf_grad=_leaf_grad,
                     _leaf_array=_leaf_array)
