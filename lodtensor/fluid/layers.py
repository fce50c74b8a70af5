"""``fluid.layers``: Paddle's sequence ops under their fluid names (eager, any backend), and the
fluid 1.x model layer calls (``fc``, ``embedding``, ``dynamic_lstm``, ``dynamic_gru``,
``sequence_conv``, ``row_conv``, ``linear_chain_crf``, ``crf_decoding``, ``data``, ``sums``,
``mean``, ``cross_entropy``, ``accuracy``), which create Paddle-named parameters in the running
:class:`~lodtensor.fluid.Program` (see ``docs/porting.md``, "Fluid programs as torch modules"),
and the tensor layers such code calls between them (``tanh``, ``sigmoid``, ``relu``, ``softmax``
and the other activation layers, ``concat``, ``create_parameter``). Any other Paddle layer is not
here: asking for one raises an AttributeError that says so.
"""

from ..sequence import *  # noqa: F403 - the whole sequence namespace, by design
from ..sequence import __all__ as _sequence_all
from ._math_layers import *  # noqa: F403
from ._math_layers import __all__ as _math_all
from ._model_layers import *  # noqa: F403
from ._model_layers import __all__ as _model_all
from ._tensor_layers import *  # noqa: F403
from ._tensor_layers import __all__ as _tensor_all

__all__ = list(_sequence_all) + list(_model_all) + list(_math_all) + list(_tensor_all)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise AttributeError(
        f"module 'lodtensor.fluid.layers' has no attribute {name!r}: lodtensor.fluid ports Paddle's LoD "
        f"layers (the sequence ops, the model layers and the tensor layers listed in docs/porting.md, "
        f"'Porting Paddle models'); fluid.layers.{name} is not one of them. Compute it with torch or NumPy "
        f"on the tensor's .data (x.with_data(...) keeps the lod)"
    )
