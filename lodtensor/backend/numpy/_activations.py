"""Paddle's activations by name, for the NumPy backend (and CuPy's, written against ``xp``).

``OUT_OF_PLACE[name](xp, x)`` returns a new array; ``IN_PLACE[name](xp, x)`` writes into ``x``
(the recurrences' per-step fast path) and returns it. The sigmoid reads ``exp`` of a
non-positive number only, so it never overflows.

>>> import numpy as np
>>> np.round(OUT_OF_PLACE["sigmoid"](np, np.array([-1000.0, 0.0, 2.0])), 4).tolist()
[0.0, 0.5, 0.8808]
>>> x = np.array([-1.0, 0.5])
>>> IN_PLACE["relu"](np, x) is x, x.tolist()
(True, [0.0, 0.5])
"""

__all__ = ["OUT_OF_PLACE", "IN_PLACE"]


def _sigmoid(xp, x):
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sigmoid_(xp, x):
    """``0.5 * tanh(x / 2) + 0.5`` in place: four passes, no temporaries."""
    xp.multiply(x, 0.5, out=x)
    xp.tanh(x, out=x)
    xp.multiply(x, 0.5, out=x)
    xp.add(x, 0.5, out=x)
    return x


OUT_OF_PLACE = {
    "sigmoid": _sigmoid,
    "tanh": lambda xp, x: xp.tanh(x),
    "relu": lambda xp, x: xp.maximum(x, 0),
    "identity": lambda xp, x: x,
    "linear": lambda xp, x: x,
    "softmax": _softmax,
    "leaky_relu": lambda xp, x: xp.where(x > 0, x, 0.02 * x),
    "elu": lambda xp, x: xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0))),
    "softsign": lambda xp, x: x / (1 + xp.abs(x)),
}

IN_PLACE = {
    "sigmoid": _sigmoid_,
    "tanh": lambda xp, x: xp.tanh(x, out=x),
    "relu": lambda xp, x: xp.maximum(x, 0, out=x),
    "identity": lambda xp, x: x,
    "linear": lambda xp, x: x,
}
