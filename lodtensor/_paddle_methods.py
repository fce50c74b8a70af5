"""Paddle's LoDTensor methods on the LoD and the data's facts: a mixin of
:class:`~lodtensor.tensor.LoDTensor` (``set_lod``, ``recursive_sequence_lengths``,
``has_valid_recursive_sequence_lengths``, ``shape()``, ``place()``...).

``set()`` stays with the class (it converts data); these read or replace the LoD, which
goes through the LoD gate (``LoD(...)``, ``LoD.from_lengths``) like every other.
"""

import numpy as np

from ._compile import eager_under_compile
from .lod import LoD

__all__ = ["PaddleMethods"]


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
        self._lod = LoD(lod, num_rows=self._num_rows_or_none())

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
        self._lod = LoD.from_lengths(recursive_sequence_lengths, num_rows=self._num_rows_or_none())

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
        return self._data is None or self._lod.fits(int(self._data.shape[0]))

    def shape(self):
        """Shape of the flat data as a list (Paddle: a method). ``[0]`` when empty.

        >>> import numpy as np
        >>> from lodtensor import LoDTensor
        >>> LoDTensor(np.zeros((5, 2)), [[0, 2, 5]]).shape(), LoDTensor().shape()
        ([5, 2], [0])
        """
        return [0] if self._data is None else [int(s) for s in self._data.shape]

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
