"""``fluid.layers``: Paddle's sequence ops under their fluid names (eager, any backend), and the
fluid 1.x model layer calls (``fc``, ``embedding``, ``dynamic_lstm``, ``dynamic_gru``,
``sequence_conv``, ``row_conv``, ``linear_chain_crf``, ``crf_decoding``, ``data``, ``sums``,
``mean``, ``cross_entropy``, ``accuracy``), which create Paddle-named parameters in the running
:class:`~lodtensor.fluid.Program` (see ``docs/porting.md``, "Fluid programs as torch modules").
"""

from ..sequence import *  # noqa: F403 - the whole sequence namespace, by design
from ..sequence import __all__ as _sequence_all
from ._math_layers import *  # noqa: F403
from ._math_layers import __all__ as _math_all
from ._model_layers import *  # noqa: F403
from ._model_layers import __all__ as _model_all

__all__ = list(_sequence_all) + list(_model_all) + list(_math_all)
