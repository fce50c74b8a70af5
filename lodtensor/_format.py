"""Short text previews of arrays and lists, for error messages and reprs (and the nested tensor repr)."""

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


_REPR_EDGE = 3  # components shown at each end of a long nested tensor


def nested_repr(components, *, layout="strided", requires_grad=False, grad_fn=None):
    """torch's nested_tensor repr, with NumPy's (or torch's) repr of each component.

    >>> print(nested_repr([np.zeros(2), np.ones(1)], layout="jagged"))
    nested_tensor([
      array([0., 0.]),
      array([1.])
    ], layout='jagged')
    """
    n = len(components)
    shown = components if n <= 2 * _REPR_EDGE + 2 else components[:_REPR_EDGE] + [None] + components[-_REPR_EDGE:]
    lines = []
    for c in shown:
        if c is None:
            lines.append(f"  ... ({n - 2 * _REPR_EDGE} more components)")
        else:
            lines.append("\n".join("  " + line for line in repr(c).split("\n")))
    body = ",\n".join(lines) if lines else ""
    extra = ""
    if requires_grad:
        extra = f", grad_fn=<{type(grad_fn).__name__}>" if grad_fn is not None else ", requires_grad=True"
    if layout == "jagged":
        extra = ", layout='jagged'" + extra
    return f"nested_tensor([\n{body}\n]{extra})"


def tensor_repr(t):
    """``LoDTensor(lod=[...], shape=..., dtype=..., place=..., data=...)``: a LoDTensor's repr."""
    name = type(t).__name__
    if t._data is None:
        return f"{name}(lod={t._lod()}, uninitialized)"
    levels = ", ".join(preview(level) for level in t._lod._levels)
    try:
        host = t.backend.to_numpy(t._data)
    except (NotImplementedError, RuntimeError):  # no values to read (torch's meta device): the array's own repr
        body = repr(t._data)
    else:
        body = np.array2string(host, threshold=24, edgeitems=3, separator=", ", prefix="       ")
    return f"{name}(lod=[{levels}], shape={t.shape()}, dtype={t.dtype}, place={t._where!r},\n       data={body})"
