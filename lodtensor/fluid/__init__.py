"""Drop-in names for ported ``paddle.fluid`` LoD code: ``import lodtensor.fluid as fluid``.

``fluid.LoDTensor`` is the same container as :class:`lodtensor.LoDTensor`
with Paddle's constructor, ``fluid.LoDTensor()`` or
``fluid.LoDTensor(recursive_sequence_lengths)``; ``fluid.layers.<op>`` is every
sequence op of :mod:`lodtensor.sequence`.

>>> import numpy as np
>>> import lodtensor.fluid as fluid
>>> t = fluid.LoDTensor()
>>> t.set(np.arange(10, dtype="float32").reshape(5, 2), fluid.CPUPlace())
>>> t.set_recursive_sequence_lengths([[2, 3]])
>>> t.lod(), t.shape(), t.has_valid_recursive_sequence_lengths()
([[0, 2, 5]], [5, 2], True)
"""

from ..factories import create_lod_tensor, create_random_int_lodtensor
from ..place import CPUPlace, CUDAPinnedPlace, CUDAPlace
from ..sequence import LoDTensorArray
from . import core, io, layers
from .core import LoDTensor

__all__ = [
    "LoDTensor",
    "CPUPlace",
    "CUDAPlace",
    "CUDAPinnedPlace",
    "create_lod_tensor",
    "create_random_int_lodtensor",
    "layers",
    "LoDTensorArray",
    "core",
    "io",
]
