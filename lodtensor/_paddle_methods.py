"""Paddle's LoDTensor methods on the LoD and the data's facts: a mixin of
:class:`~lodtensor.tensor.LoDTensor` (``set_lod``, ``recursive_sequence_lengths``,
``has_valid_recursive_sequence_lengths``, ``shape()``, ``place()``...).

``set()`` stays with the class (it converts data); these read or replace the LoD, which
goes through the LoD gate (``LoD(...)``, ``LoD.from_lengths``) like every other.
"""

import numpy as np

from ._compile import eager_under_compile
from .errors import LoDError
from .lod import LoD

__all__ = ["PaddleMethods", "ShapeList", "rows_of", "raise_unfit"]


class ShapeList(tuple):
    """A LoDTensor's shape: a tuple of ints, as a fluid ``Variable``'s ``shape`` attribute is
    (``x.shape[1]``, ``x.shape == (5, 2)``, ``x.shape + (k,)``), that is also callable, giving the
    list Paddle's ``core.LoDTensor.shape()`` method returns."""

    __slots__ = ()

    def __call__(self):
        return list(self)


def rows_of(data):
    """The rows (axis 0) of ``data``; None where there is no data, or no axis 0: data that a ``resize_``,
    ``squeeze_()`` or ``shape = ()`` made 0-d in place after the tensor took it (it came in with rows)."""
    return None if data is None or not data.ndim else int(data.shape[0])


def raise_unfit(lod, data, what):
    """Raise the LoDError for a ``lod`` with levels that does not fit the rows of ``data``."""
    if not data.ndim:
        raise LoDError(f"{what}: the lod does not fit the data: the data is 0-d (made so in place after the tensor "
                       f"took it), so it has no rows for {lod!r} to end at; set() an array of rows first",
                       level=len(lod) - 1)
    lod.check_rows(int(data.shape[0]), where=f"{what}: the lod does not fit the data")


class PaddleMethods:
    """The Paddle methods of a LoDTensor that need only its ``_data``, ``_lod`` and ``_where``."""

    __slots__ = ()

    @eager_under_compile  # builds the LoD through the gate (NumPy): eager, behind a graph break
    def set_lod(self, lod):
        """Set the lod from offsets, e.g. ``[[0, 2, 5]]``; validated at once.

        On error the previous lod stays in place.

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> t = LoDTensor(np.arange(3.0))
        >>> t.set_lod([[0, 1, 3]])
        >>> t.lod()
        [[0, 1, 3]]
        >>> t.set_lod([[0, 1, 4]])
        Traceback (most recent call last):
        ...
        lodtensor.errors.LoDError: lod level 0 must end at len(data)=3, got offsets[-1]=4
        >>> t.lod()
        [[0, 1, 3]]
        """
        self._set_checked(LoD(lod, num_rows=rows_of(self._data)), "set_lod()")

    @eager_under_compile  # builds the LoD through the gate (NumPy): eager, behind a graph break
    def set_recursive_sequence_lengths(self, recursive_sequence_lengths):
        """Set the lod from lengths, e.g. ``[[2, 3]]``; validated at once.

        On error the previous lod stays in place.

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> t = LoDTensor(np.arange(5.0))
        >>> t.set_recursive_sequence_lengths([[2, 3]])
        >>> t.lod()
        [[0, 2, 5]]
        """
        lod = LoD.from_lengths(recursive_sequence_lengths, num_rows=rows_of(self._data))
        self._set_checked(lod, "set_recursive_sequence_lengths()")

    def _set_checked(self, lod, what):
        """Take ``lod`` (checked against the rows already, where the data has rows); 0-d data fits no level."""
        if lod.num_levels and self._data is not None and not self._data.ndim:
            raise_unfit(lod, self._data, what)
        self._lod = lod

    @eager_under_compile  # reads the host offsets: eager, behind a graph break, under torch.compile
    def recursive_sequence_lengths(self):
        """The lod as lengths, nested lists of int (Paddle).

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> LoDTensor(np.arange(4), [[0, 1, 2], [0, 1, 4]]).recursive_sequence_lengths()
        [[1, 1], [1, 3]]
        """
        return self._lod.to_lengths_list()

    def has_valid_recursive_sequence_lengths(self):
        """True when the lod fits the data (always True before any data is set, as in Paddle).

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> t = LoDTensor(np.arange(3.0), [[0, 1, 3]])
        >>> t.has_valid_recursive_sequence_lengths()
        True
        >>> t.set(np.zeros(5))  # the lod [[0, 1, 3]] no longer ends at the 5 rows
        >>> t.has_valid_recursive_sequence_lengths()
        False
        """
        data = self._data  # (rows_of inlined: asked per op by fluid code; 0-d data made so in place fits no level)
        return data is None or self._lod.fits(int(data.shape[0]) if data.ndim else None)

    @property
    def shape(self):
        """Shape of the flat data: ``t.shape()`` a list, as Paddle's ``core.LoDTensor`` method, and
        ``t.shape`` a tuple (``t.shape[1]``, ``len(t.shape)``), as a fluid ``Variable``'s attribute, which
        the model code of a fluid program reads from the outputs of its layers (``emission.shape[1]``).
        ``[0]`` when empty.

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> LoDTensor(np.zeros((5, 2)), [[0, 2, 5]]).shape(), LoDTensor().shape()
        ([5, 2], [0])
        >>> t = LoDTensor(np.zeros((5, 2)), [[0, 2, 5]])
        >>> t.shape[1], t.shape == (5, 2), t.shape + (3,)
        (2, True, (5, 2, 3))
        """
        return ShapeList((0,) if self._data is None else tuple(int(s) for s in self._data.shape))

    def _dtype(self):
        """The data type (Paddle's name; a NumPy or torch dtype here)."""
        return self.dtype

    def place(self):
        """Where the data lives (``CPUPlace()``, ``CUDAPlace(i)``, ``CUDAPinnedPlace()``).

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> LoDTensor(np.zeros(3)).place()
        Place(cpu)
        """
        return self._where

    _place = place  # Paddle 2.6 spells it ``_place()``

    def _is_initialized(self):
        """False for ``LoDTensor()`` before ``set()`` (Paddle)."""
        return self._data is not None

    def _numel(self):
        return 0 if self._data is None else int(np.prod(self._data.shape))
