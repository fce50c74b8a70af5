"""Short text previews of arrays and lists, for error messages and reprs."""

import numpy as np

PREVIEW_ITEMS = 8


def preview(values, limit=PREVIEW_ITEMS):
    """Return ``values`` as ``[a, b, ...]`` showing at most ``limit`` items.

    >>> preview(range(20))
    '[0, 1, 2, 3, 4, 5, 6, 7, ...]'
    """
    if isinstance(values, np.ndarray):
        head = values.ravel()[:limit].tolist()
        more = values.size > limit
    else:
        values = list(values) if not isinstance(values, (list, tuple)) else values
        head = list(values[:limit])
        more = len(values) > limit
    return "[" + ", ".join(repr(v) for v in head) + (", ..." if more else "") + "]"
