"""NestedTensor's jagged-layout accessors: ``values()``, ``offsets()``, ``lengths()``, ``jagged_dim``,
``is_contiguous()``, ``contiguous()`` and the DLPack export, installed on the class when
``lodtensor.nested`` is imported (``NestedTensor._attach``)."""

import numpy as np

from ..errors import ShapeError
from . import _dispatch
from ._autograd import view_source
from ._permute import permute_view, permuted
from ._structure import op_dim
from ._tensor import NestedTensor, make

__all__ = ["JaggedAccessors"]


class JaggedAccessors:
    """The methods; see each one."""

    def is_contiguous(self, memory_format=None):
        """True unless built with holes (``offsets`` and ``lengths``), a transposed view of another
        tensor's buffer or a view of part of a regular dim whose ``values()`` are strided (``narrow``,
        ``chunk``, ``nt[..., 1:3]``... of more than one row), as torch reports (``contiguous()`` copies
        such a view into order).

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[[1, 2]], [[3, 4], [5, 6]]])
        >>> nt.is_contiguous(), nt.transpose(1, 2).is_contiguous(), nt[..., :1].is_contiguous()
        (True, False, False)
        >>> ln.nested_tensor_from_jagged(np.arange(6.0), np.array([0, 2, 6]), lengths=np.array([1, 3])).is_contiguous()
        False
        """
        if memory_format is not None and "contiguous_format" not in str(memory_format):
            return False  # (channels_last...: never, as torch's jagged layout answers)
        if self._src is not None:  # a view of part of a regular dim: as its values(), as torch's
            return self._perm is None and self.backend.is_c_contiguous(self._src)
        holes = getattr(self, "_holes", None)  # offsets over part of values, without lengths: no hole
        if holes is not None and holes[2] is not None:
            return False
        if self._perm is None:
            return True
        # a transposed view: as its values() (the rows read through the permutation), by the library's rule
        # (no element, or the dims that move of size 1: contiguous, as torch answers)
        return self._st.is_lod and self.backend.is_c_contiguous(self.values())

    def nelement(self):
        """``numel()``, as torch's alias.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1, 2], [3]]).nelement()
        3
        """
        return self.numel()

    def ndimension(self):
        """``dim()``, as torch's alias.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1, 2], [3]]).ndimension()
        2
        """
        return self.dim()

    def lengths(self):
        """Component lengths (int64) when built with holes (``offsets`` and ``lengths``), else None, as torch.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([[1, 2], [3]]).lengths() is None
        True
        """
        holes = getattr(self, "_holes", None)
        return None if holes is None or holes[2] is None else self._index_array(holes[2])

    @property
    def jagged_dim(self):
        """The ragged dim: the first irregular dim (1 when every dim is regular), None when several are ragged.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))]).jagged_dim
        1
        """
        irregular = [a + 1 for a, r in enumerate(self._struct.regular) if not r]
        if len(irregular) > 1:
            return None
        return irregular[0] if irregular else 1

    def contiguous(self):
        """This nested tensor, whose components lie one after another in one buffer; a transposed view
        is copied into that order (a new buffer each time, of the values it reads now), and so is a
        tensor with holes (``narrow`` of a padded tensor, ``offsets`` with ``lengths``): the copy has
        no holes, its ``values()`` the components' rows alone and its ``offsets()`` theirs, as torch's.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([[[1, 2]], [[3, 4], [5, 6]]])
        >>> nt.contiguous() is nt, nt.transpose(1, 2).contiguous().is_contiguous()
        (True, True)
        >>> packed = ln.narrow(np.arange(8.0).reshape(2, 4), 1, 0, np.array([1, 3]), layout="jagged").contiguous()
        >>> packed.is_contiguous(), packed.values().tolist(), packed.offsets().tolist()
        (True, [0.0, 4.0, 5.0, 6.0], [0, 1, 4])
        """
        if self._src is not None:  # a view of part of a regular dim: its window, copied into order
            return self if self.is_contiguous() else make(self._buffer, self._struct, self._layout)
        if self._perm is None:
            holes = getattr(self, "_holes", None)
            if holes is None or holes[2] is None:
                return self
            # the buffer holds the gathered components already: a copy of it, without the holes
            return make(self.backend.clone(self._buf), self._struct, self._layout)
        if _dispatch.compiling():  # the copy's plan comes from the host size table: behind a graph break
            return _dispatch.COMPILE_HOOKS["eager"](JaggedAccessors.contiguous, self)
        return make(permuted(self.backend, self._buf, self._st, self._perm), self._struct, self._layout)

    def values(self):
        """The buffer as rows ``(total rows, *row)`` when only the first component dim is ragged
        (torch's jagged ``values()``), else the flat buffer; a view either way. A transposed view's
        values are its storage's read through the same permutation, as torch's
        (``nt.transpose(1, 2).values()`` is ``nt.values().transpose(0, 1)``), and a view of part of a
        regular dim's are its input's, strided (``nt[..., 1:3].values()`` is ``nt.values()[:, 1:3]``).

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))]).values().shape
        (6, 3)
        """
        holes = getattr(self, "_holes", None)
        if holes is not None:
            return holes[0]
        if self._src is not None:  # a view of part of a regular dim: its rows, strided (torch's values())
            src = view_source(self._src)
            return src if self._perm is None else permute_view(self.backend, src, self._perm)
        st = self._st
        traced = _dispatch.compiling()
        buf = view_source(self._buf)  # (detached where this is a leaf and grad mode is off, as torch's)
        if st.tail is not None and 0 not in st.tail and (traced or st._sizes is None):
            rows = buf.reshape((-1,) + st.tail)  # traced, or a lazy size table: the offsets are not read
        elif traced:  # the row count comes from the host size table: read behind a graph break
            return _dispatch.COMPILE_HOOKS["eager"](JaggedAccessors.values, self)
        elif st.tail is not None:
            rows = buf.reshape((int(st.rows()[0][-1]),) + st.tail)
        else:
            return buf if self._perm is None else self._buffer
        # the rows axis stands for the ragged dim: a transposed view moves it as torch's values() does
        return rows if self._perm is None else permute_view(self.backend, rows, self._perm)

    def offsets(self):
        """Row offsets of the components (torch's jagged ``offsets()``), as an int64 array of the
        buffer's library; only when the first component dim is the one ragged dim.

        >>> import lodtensor.nested as ln
        >>> ln.nested_tensor([np.ones((2, 3)), np.ones((4, 3))]).offsets().tolist()
        [0, 2, 6]
        """
        holes = getattr(self, "_holes", None)
        if holes is not None:
            return self._index_array(holes[1])
        if _dispatch.compiling():  # host offsets: read behind a graph break, never traced as NumPy
            return _dispatch.COMPILE_HOOKS["eager"](JaggedAccessors.offsets, self)
        st = self._st
        if not st.is_lod:
            raise ShapeError(
                "offsets(): only a nested tensor ragged in its first component dim alone has row offsets; "
                "use nested_size() for the sizes of every dim"
            )
        return self._index_array(st.rows()[0])

    def stride(self, dim=None):
        """``stride(dim)`` for a component dim (``dim >= 1``): the step between neighbours along it, in
        elements, when every component has the same one (torch's jagged layout gives these ints; a
        transposed view's are its storage's, permuted; a view of part of a regular dim's are its input's
        rows', ``nt[..., 1:3].stride(1) == nt.stride(1)``). ``stride()`` and ``stride(0)`` raise ShapeError (a
        RuntimeError): torch's jagged layout answers with a nested int (``3*j1``), which has no value here,
        and its strided layout refuses any stride; ``nested_strides()`` gives every component's strides.

        >>> import lodtensor.nested as ln
        >>> nt = ln.nested_tensor([np.zeros((2, 3, 4)), np.zeros((5, 3, 4))])
        >>> nt.stride(1), nt.stride(-1), nt.transpose(1, 2).stride(2), nt[..., ::2].stride(-1)
        (12, 1, 12, 2)
        >>> nt.stride()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        lodtensor.errors.ShapeError: stride(): dim 0 of a nested tensor has no int stride (...); use stride(dim) ...
        """
        d = None if dim is None else op_dim(self, dim, "stride()")
        if not d:
            raise ShapeError("stride(): dim 0 of a nested tensor has no int stride (torch's jagged layout gives a "
                             "nested int); use stride(dim) for a dim >= 1 or nested_strides() for every "
                             "component's strides")
        sizes = self._st.sizes  # the storage's: a transposed view reads its axes through _perm
        if self._src is not None:  # a view of part of a regular dim: its window's strides, as torch's
            return int(self._steps[d - 1 if self._perm is None else self._perm[d - 1]])
        strides = np.ones_like(sizes)
        if sizes.shape[1] > 1:
            strides[:, :-1] = np.cumprod(sizes[:, :0:-1], axis=1)[:, ::-1]
        column = strides[:, d - 1 if self._perm is None else self._perm[d - 1]]
        if column.size == 0:
            raise ShapeError("stride(): a nested tensor of no component has no strides")
        if (column != column[0]).any():
            raise ShapeError(f"stride(): dim {dim} has a different stride in each component (a ragged dim "
                             f"after it); nested_strides() gives every component's strides")
        return int(column[0])

    # -- DLPack (the flat buffer; see docs/interop.md for the ragged convention) ----------------
    def __dlpack__(self, **kwargs):
        """A DLPack capsule over ``values()`` (shared): ``np.from_dlpack(nt)``, ``torch.from_dlpack(nt)``.

        >>> import lodtensor.nested as ln
        >>> np.from_dlpack(ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))])).shape
        (3, 3)
        """
        return self.values().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        """``(device_type, device_id)`` of the buffer, as DLPack defines them."""
        return self._array().__dlpack_device__()


NestedTensor._attach(**{name: JaggedAccessors.__dict__[name] for name in (
    "is_contiguous", "lengths", "jagged_dim", "contiguous", "values", "offsets", "stride", "__dlpack__",
    "__dlpack_device__", "nelement", "ndimension")})
