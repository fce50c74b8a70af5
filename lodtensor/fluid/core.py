"""``fluid.core`` for Paddle 1.x imports: ``from paddle.fluid import core`` ->
``from lodtensor.fluid import core``.

``LoDTensor`` lives here, as in Paddle (``fluid.LoDTensor`` is ``fluid.core.LoDTensor``).

>>> import numpy as np
>>> from lodtensor.fluid import core
>>> t = core.LoDTensor()
>>> t.set(np.zeros((3, 1), "float32"), core.CPUPlace())
>>> t.set_recursive_sequence_lengths([[1, 2]])
>>> arr = core.LoDTensorArray()
>>> arr.append(t)
>>> len(arr), arr[0].lod()
(1, [[0, 1, 3]])
"""

from .. import tensor as _tensor
from ..place import CPUPlace, CUDAPinnedPlace, CUDAPlace
from ..sequence import LoDRankTable as LodRankTable
from ..sequence import LoDTensorArray

__all__ = ["LoDTensor", "LoDTensorArray", "LodRankTable", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace"]


class LoDTensor(_tensor.LoDTensor):
    """Paddle's constructor: ``LoDTensor()`` or ``LoDTensor(recursive_sequence_lengths)``.

    The tensor holds no data until ``set(array, place)``.

    >>> LoDTensor([[2, 3]]).recursive_sequence_lengths()
    [[2, 3]]
    """

    __slots__ = ()

    def __init__(self, recursive_sequence_lengths=None):
        super().__init__()
        if recursive_sequence_lengths is not None:
            self.set_recursive_sequence_lengths(recursive_sequence_lengths)
