"""Paddle's sequence ops, eager, with Paddle's names, arguments and defaults.

Every op takes and returns :class:`~lodtensor.LoDTensor` (``sequence_pad``
returns two, ``sequence_scatter`` and ``sequence_mask`` return arrays for
array input) and runs on every backend (NumPy, CuPy, torch with autograd).
Unless an op takes a level argument it acts on the LAST lod level, as in
Paddle; the outer levels are kept. Where Paddle accepts only one lod level,
these ops accept several whenever the meaning is clear; each docstring says
how. The differences from Paddle are listed in ``docs/porting.md``.

>>> import numpy as np
>>> import lodtensor as lt
>>> from lodtensor.sequence import sequence_pool
>>> x = lt.LoDTensor(np.arange(1.0, 6.0).reshape(5, 1), [[0, 2, 2, 5]])
>>> sequence_pool(x, "sum", pad_value=-1.0).data.ravel().tolist()
[3.0, -1.0, 12.0]
"""

from ._basic import *  # noqa: F403 - re-exported, listed in __all__
from ._basic import __all__ as _basic_all
from ._beam import *  # noqa: F403
from ._beam import __all__ as _beam_all
from ._decode import *  # noqa: F403
from ._decode import __all__ as _decode_all
from ._rank import *  # noqa: F403
from ._rank import __all__ as _rank_all
from ._topk import *  # noqa: F403
from ._topk import __all__ as _topk_all

__all__ = list(_basic_all) + list(_decode_all) + list(_beam_all) + list(_rank_all) + list(_topk_all)


def _eager_under_torch_compile():
    """Every op reads the LoD's host offsets: under torch.compile it runs eagerly behind a graph break."""
    import inspect  # noqa: PLC0415 - used once, here

    from .._compile import eager_under_compile  # noqa: PLC0415

    for name in __all__:
        if inspect.isfunction(globals()[name]):
            globals()[name] = eager_under_compile(globals()[name])


_eager_under_torch_compile()
