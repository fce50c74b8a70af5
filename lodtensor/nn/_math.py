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
    ns.addmm = lambda a, b, c: a + b @ c
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
    ns.addmm = torch.addmm
    return ns


_CACHE = {}


def math_for(array):
    """The namespace for ``array``'s library (``numpy`` or ``torch``); CuPy goes through NumPy's
    code only where CuPy accepts it, so it is refused here with a clear error."""
    name = backend_name_of(array)
    if name not in ("numpy", "torch"):
        hint = (
            "move the input with .to_torch() or .cpu()" if name is not None
            else "pass a LoDTensor, or a NumPy array or torch tensor"
        )
        raise TypeError(
            f"lodtensor.nn layers run on NumPy (forward) or torch (autograd) data, got {type(array).__name__}; {hint}"
        )
    ns = _CACHE.get(name)
    if ns is None:
        ns = _CACHE[name] = _numpy() if name == "numpy" else _torch()
    return ns


def sigmoid_(x):
    """NumPy sigmoid in place: ``0.5 * tanh(x / 2) + 0.5`` (four passes, no temporaries)."""
    np.multiply(x, 0.5, out=x)
    np.tanh(x, out=x)
    np.multiply(x, 0.5, out=x)
    np.add(x, 0.5, out=x)
    return x


#: NumPy activations applied in place, for the recurrences' fast path.
INPLACE = {
    "sigmoid": sigmoid_,
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, 0, out=x),
    "identity": lambda x: x,
    "linear": lambda x: x,
}


def inplace_ops(array):
    """In-place kernels for the recurrences' fast path (NumPy, or torch without autograd):
    ``(ops, activations)`` or None where the fast path does not apply (torch tracking gradients)."""
    name = backend_name_of(array)
    if name == "numpy":
        ops = types.SimpleNamespace(
            empty=lambda shape, like: np.empty(shape, dtype=like.dtype),
            mm=lambda a, b, out: np.matmul(a, b, out=out),
            mul=lambda a, b, out: np.multiply(a, b, out=out),
            sub=lambda a, b, out: np.subtract(a, b, out=out),
            copy=np.copyto,
            # out += a @ b and out += a * b, through the scratch buffer ``buf``
            addmm=lambda out, a, b, buf: np.add(out, np.matmul(a, b, out=buf), out=out),
            addcmul=lambda out, a, b, buf: np.add(out, np.multiply(a, b, out=buf), out=out),
        )
        return ops, INPLACE
    if name != "torch":
        return None
    import torch  # noqa: PLC0415

    ops = types.SimpleNamespace(
        empty=lambda shape, like: torch.empty(shape, dtype=like.dtype, device=like.device),
        mm=lambda a, b, out: torch.mm(a, b, out=out),
        mul=lambda a, b, out: torch.mul(a, b, out=out),
        sub=lambda a, b, out: torch.sub(a, b, out=out),
        copy=lambda dst, src: dst.copy_(src),
        # accumulated in place by BLAS (beta=1) and by one fused pass: no scratch buffer
        addmm=lambda out, a, b, buf: out.addmm_(a, b),
        addcmul=lambda out, a, b, buf: out.addcmul_(a, b),
    )
    acts = {
        "sigmoid": lambda x: x.sigmoid_(),
        "tanh": lambda x: x.tanh_(),
        "relu": lambda x: x.relu_(),
        "identity": lambda x: x,
        "linear": lambda x: x,
    }
    return ops, acts


def activation(m, name, where, arg="act"):
    """Paddle's activation ``name`` (None: identity) from namespace ``m``."""
    if name is None:
        return m.act["identity"]
    fn = m.act.get(str(name).lower()) if isinstance(name, str) else None
    if fn is None:
        raise ValueError(f"{where}: {arg} must be one of {list(ACTIVATIONS)} or None, got {name!r}")
    return fn
