"""LoDTensor's conversions: to another device or library, and to dense padded arrays (a mixin).

The LoD travels unchanged (shared) in every move; only the data moves. The
dense conversions are copies made by the row-moving kernels of ``_dense``;
under ``torch.compile`` they run eagerly behind a graph break (their plans
come from the host offsets).
"""

from . import _dense
from ._compile import compiling, eager, mark_rows_dynamic
from ._data import to_place
from .backend import backend_name_of, get_backend
from .place import CPUPlace, CUDAPlace, as_place

__all__ = ["ConversionsMixin"]


class ConversionsMixin:
    """``to``, ``cpu``, ``cuda``, ``to_torch``, ``to_padded`` and ``to_padded_all`` of :class:`LoDTensor`.

    For a class with ``_data``, ``_lod``, ``_where``, ``_new`` and the checks ``_check_fits``/``_require_lod``.
    """

    __slots__ = ()

    # -- devices -----------------------------------------------------------------------------
    def to(self, device):
        """This tensor on ``device`` (a place or device string); ``self`` if already there."""
        place = as_place(device, name="device")
        if self._data is None:
            return self._new(None, self._lod, place)
        if place == self._where:
            return self
        data, place = to_place(self._data, place, copy=False)
        return self._new(mark_rows_dynamic(data), self._lod, place)

    def cpu(self):
        """This tensor in host memory."""
        return self.to(CPUPlace())

    def to_torch(self):
        """This tensor with its data as a torch tensor, sharing memory where possible.

        NumPy data on the host and CuPy data on the GPU are shared without a
        copy (read-only NumPy arrays are copied, as torch cannot wrap them).
        The LoD object is shared too.
        """
        data = self._require_data("to_torch()")
        be = get_backend("torch")
        if backend_name_of(data) == be.name:
            return self
        return self._new(mark_rows_dynamic(be.asarray(data)), self._lod)

    def cuda(self, device_id=0):
        """This tensor on GPU ``device_id`` (CuPy data, or torch CUDA for torch data)."""
        return self.to(CUDAPlace(device_id))

    # -- dense conversions -------------------------------------------------------------------
    def to_padded(self, level=-1, pad_value=0, maxlen=None, *, out=None):
        """Dense ``(num_sequences, maxlen, *row_shape)`` array of ``level``; a copy.

        Each sequence of ``level`` (counted in data rows, so outer levels
        concatenate their sub-sequences) fills one row of the result, the rest
        is ``pad_value``. Equivalent to
        ``[seq + [pad] * (maxlen - len(seq)) for seq in sequences]``.

        Parameters
        ----------
        level : int
            The lod level whose sequences become the batch axis (default: last).
        pad_value : scalar or array of the row shape
        maxlen : int, optional
            Padded length; default the longest sequence. Shorter raises (no truncation).
        out : array, optional
            Preallocated C-contiguous result of the right shape and dtype.

        Returns
        -------
        (padded, lengths)
            ``lengths`` is the int64 length of every sequence.

        Examples
        --------
        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> t = LoDTensor(np.arange(1, 6), [[0, 2, 2, 5]])
        >>> padded, lengths = t.to_padded(pad_value=-1)
        >>> padded.tolist(), lengths.tolist()
        ([[1, 2, -1], [-1, -1, -1], [3, 4, 5]], [2, 0, 3])
        """
        if compiling():  # the padding plan comes from the host offsets: eager, behind a graph break
            return eager(_padded, self, level, pad_value, maxlen, out)
        t = self.__copy__()  # one data/lod pair: another thread's set_lod() or set() must not mix two states
        data = t._check_fits("to_padded()")
        t._require_lod("to_padded()")
        return _dense.pad_level(t.backend, data, t._lod, level, pad_value, maxlen, out)

    def to_padded_all(self, pad_value=0):
        """One dense array over every lod level plus one boolean mask per level; a copy.

        The result has shape ``(n0, M1, ..., ML, *row_shape)`` (e.g. documents x
        sentences x words x D); ``masks[k]`` has shape ``padded.shape[:k + 2]``
        and is True where level ``k`` holds a real item.

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> t = LoDTensor(np.arange(1, 5), [[0, 2, 3], [0, 1, 3, 4]])
        >>> padded, masks = t.to_padded_all()
        >>> padded.tolist()
        [[[1, 0], [2, 3]], [[4, 0], [0, 0]]]
        >>> [m.tolist() for m in masks]
        [[[True, True], [True, False]], [[[True, False], [True, True]], [[True, False], [False, False]]]]
        """
        if compiling():  # the padding plan comes from the host offsets: eager, behind a graph break
            return eager(_padded_all, self, pad_value)
        t = self.__copy__()  # one data/lod pair, as in to_padded()
        data = t._check_fits("to_padded_all()")
        t._require_lod("to_padded_all()")
        return _dense.pad_all(t.backend, data, t._lod, pad_value)


def _padded(t, level, pad_value, maxlen, out):
    """``t.to_padded(...)`` for a compiled caller: the sequence count and (unless given) the longest length
    marked dynamic, so the graph after the break takes any batch."""
    padded, lengths = t.to_padded(level, pad_value, maxlen, out=out)
    return mark_rows_dynamic(padded, (0, 1) if maxlen is None else 0), mark_rows_dynamic(lengths)


def _padded_all(t, pad_value):
    """``t.to_padded_all(...)`` for a compiled caller, its counts and lengths marked dynamic."""
    padded, masks = t.to_padded_all(pad_value)
    dims = tuple(range(t.lod_level + 1))
    return mark_rows_dynamic(padded, dims), [mark_rows_dynamic(m, dims[: m.ndim]) for m in masks]
