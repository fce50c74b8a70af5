"""``fluid.layers``: Paddle's sequence ops under their fluid names (eager)."""

from ..sequence import *  # noqa: F403 - the whole sequence namespace, by design
from ..sequence import __all__  # noqa: F401
