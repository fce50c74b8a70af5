"""Pickling and copying a NestedTensor: ``pickle``, ``torch.save``, ``copy.copy`` and ``copy.deepcopy``
keep what torch's keep, a transposed view's layout (``is_contiguous()`` False, the same storage order)
and the holes of a tensor built from ``offsets`` and ``lengths`` (``lengths()``, ``values()``,
``offsets()``), installed on the class when ``lodtensor.nested`` is imported (``NestedTensor._attach``).

A plain tensor pickles as before (``_tensor._rebuild``); a view or a tensor with holes pickles through
:func:`_rebuild_view`, which passes the buffer through the same gate, then checks the permutation and
rebuilds the holes with ``nested_tensor_from_jagged``'s checks (a pickle is outside data).
"""

import copy

import numpy as np

from ..backend import backend_name_of, backend_of
from ..backend._pickle import portable, unpickled_by
from ..errors import ShapeError
from ._jagged import _from_jagged
from ._permute import permute_view
from ._tensor import NestedTensor, _rebuild, make_view

__all__ = ["Persist"]

_WHERE = "unpickling a NestedTensor"


def _portable_holes(holes):
    values, offsets, lengths = holes  # (detached: a buffer that requires grad unpickles as a leaf over them)
    return (portable(backend_of(values).detach(values)), portable(np.asarray(offsets).copy()),
            None if lengths is None else portable(np.asarray(lengths).copy()))


class Persist:
    """The methods; see each one."""

    def __reduce__(self):
        """Pickle the storage buffer and size table, with the permutation of a transposed view and the holes
        of a tensor built with them (torch keeps both); the autograd history is not kept, ``requires_grad``
        is (a non-leaf unpickles as a leaf that requires grad), as for torch.

        >>> import pickle
        >>> import lodtensor.nested as ln
        >>> nt = ln.narrow(np.arange(8.0).reshape(2, 4), 1, 0, np.array([1, 3]), layout="jagged")
        >>> back = pickle.loads(pickle.dumps(nt))
        >>> back.lengths().tolist(), back.is_contiguous(), back.to_tensor_list()[1].tolist()
        ([1, 3], False, [4.0, 5.0, 6.0])
        >>> pickle.loads(pickle.dumps(ln.nested_tensor([np.ones((2, 3))]).transpose(1, 2))).is_contiguous()
        False
        """
        holes = getattr(self, "_holes", None)
        plain = self._perm is None and holes is None
        buf = self._buffer if plain else self._buf
        # (a tensor with history pickles as a leaf that requires grad where this one does: the history is not
        # kept, ``requires_grad`` is, as torch's pickle of a non-leaf jagged tensor or view)
        outer = tuple(portable(level.copy()) for level in self._st.outer)
        st = self._struct if plain else self._st  # (no component: ``hollow`` keeps its dims)
        args = (portable(buf), portable(st.sizes.copy()), self._layout, outer, st.hollow, st.jag)
        if plain:
            return (_rebuild, args)
        return (_rebuild_view, (*args, self._perm, None if holes is None else _portable_holes(holes)))

    def __deepcopy__(self, memo):
        """A new tensor with its own buffer (and its own ``values()`` where built with holes) and no history:
        a leaf (requiring grad where this one does), as torch's deepcopy of a leaf; a tensor with history
        refuses, as torch's.

        >>> import copy
        >>> import lodtensor.nested as ln
        >>> nt = ln.narrow(np.arange(8.0).reshape(2, 4), 1, 0, np.array([1, 3]), layout="jagged")
        >>> twin = copy.deepcopy(nt)
        >>> twin.lengths().tolist(), np.shares_memory(twin.values(), nt.values())
        ([1, 3], False)
        """
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment; detach() it first")
        be = self.backend
        out = make_view(be.clone(be.detach(self._buf)), self._st, self._perm, self._layout)
        holes = getattr(self, "_holes", None)
        if holes is not None:  # (through memo: deep-copied with the tensor they view, the copy views its copy)
            values = copy.deepcopy(backend_of(holes[0]).detach(holes[0]), memo)
            out._holes = (values, *holes[1:])  # (host index arrays, never written)
        if self.requires_grad:
            out.requires_grad_()
        memo[id(self)] = out
        return out

    def __copy__(self):
        """A new tensor over the same buffer, with this one's layout and holes (as torch's ``copy.copy``): where
        autograd tracks this one, a new leaf that requires grad (its history, a view's or an op's, not kept; a
        backward through it fills its own ``grad``, not this one's).

        >>> import copy
        >>> import lodtensor.nested as ln
        >>> nt = ln.narrow(np.arange(8.0).reshape(2, 4), 1, 0, np.array([1, 3]), layout="jagged")
        >>> copy.copy(nt).lengths().tolist()
        [1, 3]
        """
        buf, holes = self._buf, getattr(self, "_holes", None)
        tracked = self.backend.requires_grad(buf)
        if tracked:  # as torch's: a leaf over the same memory, requiring grad, its history not kept
            buf = self.backend.detach(buf)
            if holes is not None:
                holes = (backend_of(holes[0]).detach(holes[0]), *holes[1:])
        out = make_view(buf, self._st, self._perm, self._layout)
        if holes is not None:
            out._holes = holes
        return out.requires_grad_() if tracked else out


def _checked_perm(perm, rank):
    if not isinstance(perm, tuple) or sorted(p if isinstance(p, int) else -1 for p in perm) != list(range(rank)):
        raise ShapeError(f"{_WHERE}: perm must be a permutation of the {rank} component dims, got {perm!r}")
    return perm


def _check_like_buffer(values, buf):
    """The holes' ``values`` hold the components' data: the buffer's library, dtype and device (``values()``
    and the components must agree on what they are)."""
    lib, want = backend_name_of(values), backend_name_of(buf)
    be = backend_of(buf)
    if lib != want or values.dtype != buf.dtype or be.device_of(values) != be.device_of(buf):
        got = (lib, str(values.dtype), str(backend_of(values).device_of(values)))
        raise TypeError(f"{_WHERE}: the holes' values must be {want} data of dtype {buf.dtype} on "
                        f"{be.device_of(buf)}, as the buffer, got {got[0]} data of dtype {got[1]} on {got[2]}")


@unpickled_by
def _rebuild_view(buffer, sizes, layout, outer, hollow, jag, perm, holes):
    """Unpickle a transposed view or a tensor with holes: the storage through ``_rebuild``'s gate, the
    permutation checked, the holes rebuilt by ``nested_tensor_from_jagged`` (its checks) and compared with
    the components."""
    base = _rebuild(buffer, sizes, layout, outer, hollow, jag)
    if perm is not None:
        perm = _checked_perm(perm, int(base._st.sizes.shape[1]))
    out = make_view(base._buf, base._st, perm, layout)
    if holes is None:
        return out
    if not isinstance(holes, tuple) or len(holes) != 3 or base._st.outer:
        raise ShapeError(f"{_WHERE}: holes must be (values, offsets, lengths) of a one-level tensor")
    values = holes[0]  # (as the components read: the storage's rows read through perm)
    if perm is not None and getattr(values, "ndim", None) != len(perm):
        raise ShapeError(f"{_WHERE}: the holes' values must have {len(perm)} dims, as the components")
    rows = values if perm is None else permute_view(backend_of(values), values, tuple(np.argsort(perm).tolist()))
    gated = _from_jagged(rows, holes[1], holes[2], 1, None, None)
    _check_like_buffer(values, base._buf)
    if not np.array_equal(gated._st.sizes, out._st.sizes):
        raise ShapeError(f"{_WHERE}: the holes (values, offsets, lengths) do not describe the components: "
                         f"sizes {gated._st.sizes.tolist()[:8]}, expected {out._st.sizes.tolist()[:8]}")
    out._holes = (values, *gated._holes[1:])
    be = backend_of(values)
    if perm is None and be.requires_grad(out._buf) and not be.requires_grad(values):  # (as torch's: a leaf with
        out._buf = be.detach(out._buf)  # its holes, over its values: _holes._hole_leaf)
        out.requires_grad_()
    return out


NestedTensor._attach(**{name: Persist.__dict__[name] for name in ("__reduce__", "__deepcopy__", "__copy__")})
