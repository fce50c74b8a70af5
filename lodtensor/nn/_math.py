"""The few array functions the layers need, for NumPy (forward) and torch (autograd).

``math_for(array)`` returns a namespace whose functions take and return arrays
of that library; the layers are written once against it. Activations are
Paddle's by name (``sigmoid``, ``tanh``, ``relu``, ``identity``/``linear``,
``softmax``).
"""

import types

import numpy as np

from ..backend import backend_name_of

__all__ = ["math_for", "ACTIVATIONS"]

ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity", "linear", "softmax", "leaky_relu", "elu", "softsign")


def _np_sigmoid(x):
    # exp of a non-positive number only: no overflow for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_logsumexp(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def _numpy():
    ns = types.SimpleNamespace(name="numpy")
    ns.act = {
        "sigmoid": _np_sigmoid,
        "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0),
        "identity": lambda x: x,
        "linear": lambda x: x,
        "softmax": _np_softmax,
        "leaky_relu": lambda x: np.where(x > 0, x, 0.02 * x),
        "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
        "softsign": lambda x: x / (1 + np.abs(x)),
    }
    ns.cat = lambda arrays, axis=0: np.concatenate(arrays, axis=axis)
    ns.take = lambda x, index: x[index]
    ns.zeros = lambda shape, like: np.zeros(shape, dtype=like.dtype)
    ns.full = lambda shape, value, like: np.full(shape, value, dtype=like.dtype)
    ns.index = lambda idx, like: np.asarray(idx, dtype=np.int64)
    ns.mask = lambda m, like: np.asarray(m, dtype=like.dtype)
    ns.logsumexp = _np_logsumexp
    ns.exp, ns.log = np.exp, np.log
    ns.maximum = np.maximum
    ns.reshape = lambda x, shape: x.reshape(shape)
    ns.const = lambda values, like: np.asarray(values, dtype=like.dtype)
    ns.where = np.where
    return ns


def _torch():
    import torch  # noqa: PLC0415 - lazily: import lodtensor costs only NumPy

    ns = types.SimpleNamespace(name="torch")
    F = torch.nn.functional
    ns.act = {
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "relu": torch.relu,
        "identity": lambda x: x,
        "linear": lambda x: x,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "leaky_relu": lambda x: F.leaky_relu(x, 0.02),
        "elu": F.elu,
        "softsign": F.softsign,
    }
    ns.cat = lambda arrays, axis=0: torch.cat(arrays, dim=axis)
    ns.take = lambda x, index: x.index_select(0, index)
    ns.zeros = lambda shape, like: torch.zeros(shape, dtype=like.dtype, device=like.device)
    ns.full = lambda shape, value, like: torch.full(shape, value, dtype=like.dtype, device=like.device)
    ns.index = lambda idx, like: torch.from_numpy(np.array(idx, dtype=np.int64)).to(like.device)
    ns.mask = lambda m, like: torch.from_numpy(np.array(m)).to(device=like.device, dtype=like.dtype)
    ns.logsumexp = lambda x, axis: torch.logsumexp(x, dim=axis)
    ns.exp, ns.log = torch.exp, torch.log
    ns.maximum = torch.maximum
    ns.reshape = lambda x, shape: x.reshape(shape)
    ns.const = lambda values, like: torch.from_numpy(np.array(values)).to(device=like.device, dtype=like.dtype)
    ns.where = torch.where
    return ns


_CACHE = {}


def math_for(array):
    """The namespace for ``array``'s library (``numpy`` or ``torch``); CuPy goes through NumPy's
    code only where CuPy accepts it, so it is refused here with a clear error."""
    name = backend_name_of(array)
    if name not in ("numpy", "torch"):
        raise TypeError(
            f"lodtensor.nn layers run on NumPy (forward) or torch (autograd) data, got {type(array).__name__}; "
            f"move the input with .to_torch() or .cpu()"
        )
    ns = _CACHE.get(name)
    if ns is None:
        ns = _CACHE[name] = _numpy() if name == "numpy" else _torch()
    return ns


def activation(m, name, where, arg="act"):
    """Paddle's activation ``name`` (None: identity) from namespace ``m``."""
    if name is None:
        return m.act["identity"]
    fn = m.act.get(str(name).lower()) if isinstance(name, str) else None
    if fn is None:
        raise ValueError(f"{where}: {arg} must be one of {list(ACTIVATIONS)} or None, got {name!r}")
    return fn
