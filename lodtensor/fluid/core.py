"""``fluid.core`` for Paddle 1.x imports: ``from paddle.fluid import core`` ->
``from lodtensor.fluid import core``.

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

from ..place import CPUPlace, CUDAPinnedPlace, CUDAPlace
from ..sequence import LoDRankTable as LodRankTable
from ..sequence import LoDTensorArray
from . import LoDTensor

__all__ = ["LoDTensor", "LoDTensorArray", "LodRankTable", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace"]
