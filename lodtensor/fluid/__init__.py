"""Drop-in names for ported ``paddle.fluid`` LoD code: ``import lodtensor.fluid as fluid``.

``fluid.LoDTensor`` is the same container as :class:`lodtensor.LoDTensor`
with Paddle's constructor, ``fluid.LoDTensor()`` or
``fluid.LoDTensor(recursive_sequence_lengths)``; ``fluid.layers.<op>`` is every
sequence op of :mod:`lodtensor.sequence`, and the fluid 1.x model layers (``fc``,
``embedding``, ``dynamic_lstm``, ...), which create Paddle-named parameters in the
running ``fluid.Program`` (a ``torch.nn.Module``; needs torch), with ``fluid.nets``,
``fluid.ParamAttr``, ``fluid.initializer`` and ``fluid.regularizer``.

>>> import numpy as np
>>> import lodtensor.fluid as fluid
>>> t = fluid.LoDTensor()
>>> t.set(np.arange(10, dtype="float32").reshape(5, 2), fluid.CPUPlace())
>>> t.set_recursive_sequence_lengths([[2, 3]])
>>> t.lod(), t.shape(), t.has_valid_recursive_sequence_lengths()
([[0, 2, 5]], [5, 2], True)
"""

import types as _types

from ..factories import create_lod_tensor, create_random_int_lodtensor
from ..place import CPUPlace, CUDAPinnedPlace, CUDAPlace
from ..sequence import LoDTensorArray
from . import _param_attr, core, io, layers, nets
from ._model_layers import data_v2 as data
from ._model_layers import embedding_v2 as embedding
from ._param_attr import ParamAttr
from .core import LoDTensor

#: ``fluid.initializer``: Paddle's initializers (``Constant``, ``Uniform``, ``Normal``, ``Xavier``, ...).
initializer = _types.SimpleNamespace(**{
    n: getattr(_param_attr, n) for n in dir(_param_attr) if n[0].isupper() and n not in ("ParamAttr", "L2Decay",
                                                                                         "L2DecayRegularizer")
})
#: ``fluid.regularizer``: ``L2Decay`` (``L2DecayRegularizer``), applied through ``Program.param_groups``.
regularizer = _types.SimpleNamespace(L2Decay=_param_attr.L2Decay, L2DecayRegularizer=_param_attr.L2Decay)

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
    "nets",
    "Program",
    "program_guard",
    "ParamAttr",
    "data",
    "embedding",
    "initializer",
    "regularizer",
]

_TORCH_NAMES = {"Program", "program_guard"}


def __getattr__(name):
    if name in _TORCH_NAMES:
        from . import _program  # noqa: PLC0415 - imports torch

        return getattr(_program, name)
    if name.startswith("__"):
        raise AttributeError(f"module 'lodtensor.fluid' has no attribute {name!r}")
    hint = _NOT_PORTED.get(name, "see docs/porting.md for what lodtensor.fluid covers")
    raise AttributeError(f"module 'lodtensor.fluid' has no attribute {name!r}: {hint}")


_RUN = "a fluid.Program is a torch.nn.Module: run it as net(feed={...}) and train it with a torch optimizer"
_FEED = "build the LoDTensors of a batch with fluid.create_lod_tensor(...) or lodtensor.text.batch(...)"
#: Paddle names that do not port, each with what to write instead (docs/porting.md)
_NOT_PORTED = {"Executor": _RUN, "ParallelExecutor": _RUN, "CompiledProgram": _RUN, "default_main_program": _RUN,
               "default_startup_program": _RUN, "optimizer": _RUN, "DataFeeder": _FEED,
               "metrics": "compute metrics with NumPy or torch on the outputs' .data"}
