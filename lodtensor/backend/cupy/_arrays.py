"""Array functions of the CuPy backend beyond the segment kernels.

The NumPy backend's array functions (``..numpy._arrays``) are written against
``xp``; CuPy reuses those whose NumPy code CuPy runs as is, and overrides the
ones that use host-only machinery (threads, the buffer pool, BLAS calls) or
CuPy's own random numbers and special functions.
"""

import numpy as np

from ..numpy import _recurrent
from ..numpy._arrays import ArrayKernels, _into
from ..numpy._special import SCIPY_SPECIAL
from ..numpy._xp_special import XP_FORMULAS
from . import _launch, _steps, _tuning

__all__ = ["CupyArrayKernels"]

_CUPYX_SPECIAL = {"erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "lgamma": "gammaln", "digamma": "digamma"}


def _cupyx_scipy(name):
    """cupyx.scipy.special's version of the table's ``name`` (``SCIPY_SPECIAL``), in its first operand's dtype;
    a clear error where CuPy has none (the NumPy formula would hand a CuPy array to SciPy)."""
    import cupyx.scipy.special as sp  # noqa: PLC0415 - cupy is loaded already here

    entry = SCIPY_SPECIAL[name]
    scipy_name, adapt = entry if isinstance(entry, tuple) else (entry, None)
    fn = getattr(sp, scipy_name, None)
    if fn is None:
        raise TypeError(f"{name}() on CuPy data: cupyx.scipy.special has no {scipy_name}; compute it on the CPU "
                        f"(.cpu()) or on torch data")

    def run(x, *more):
        out = adapt(fn, x) if adapt else fn(x, *more)
        return out.astype(next(a.dtype for a in (x, *more) if hasattr(a, "dtype")), copy=False)

    return run


class CupyArrayKernels(ArrayKernels):
    """CuPy versions: the NumPy ones written against ``xp`` (no blocking, no host threads).

    Not yet run on a GPU here; the CuPy backend's tests exercise it where one is present.
    """

    def lstm(self, x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes):
        with x.device:
            return _recurrent.lstm(self.xp, x, weight, bias, h_0, c_0, rows, inverse, counts, activations,
                                   peepholes, steps=self._fused_steps)

    def gru(self, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode):
        with x.device:
            return _recurrent.gru(self.xp, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations,
                                  origin_mode, steps=self._fused_steps)

    def _fused_steps(self, kind, gates, acts, operands):
        """The recurrences' fused steps (``_steps``) where the kernels serve, else None."""
        if not _tuning.FUSED_STEPS or not _steps.serves(gates.dtype, acts, operands) or _steps.blas(self.xp) is None:
            return None
        cls = _steps.LSTMSteps if kind == "lstm" else _steps.GRUSteps
        return cls(self.xp, gates.dtype, acts, _launch.pointer)

    def randn(self, shape, dtype, like):
        return self.xp.random.standard_normal(shape).astype(dtype, copy=False)

    def pointwise(self, np_name, torch_name, *args, **kwargs):
        if np_name in XP_FORMULAS:  # written against xp, with cupyx.scipy.special's functions
            return super().pointwise(np_name, torch_name, *args, **kwargs)
        own = getattr(self.xp, np_name, None)  # CuPy's ufunc
        if own is None and np_name in _CUPYX_SPECIAL:  # cupyx.scipy.special's
            import cupyx.scipy.special as sp  # noqa: PLC0415 - cupy is loaded already here

            own = getattr(sp, _CUPYX_SPECIAL[np_name])
        if own is None and np_name in SCIPY_SPECIAL:  # torch.special's, by cupyx.scipy.special (SciPy's on NumPy)
            own = _cupyx_scipy(np_name)
        if own is None and np_name in ("relu", "gelu", "silu"):  # the device versions below
            own = getattr(self, np_name)
        if own is None:  # the NumPy formula, run by CuPy through NumPy's dispatch protocols
            return super().pointwise(np_name, torch_name, *args, **kwargs)
        return own(*args, **kwargs)

    def keep_mask(self, shape, p, like):
        return self.xp.random.random_sample(shape) >= p

    def _special_function(self, name):
        """cupyx.scipy.special's ``name``, or a clear error where CuPy has none."""
        import cupyx.scipy.special as sp  # noqa: PLC0415 - cupy is loaded already here

        fn = getattr(sp, name, None)
        if fn is None:
            raise TypeError(f"{name}() on CuPy data: cupyx.scipy.special has no {name}; compute it on the CPU "
                            f"(.cpu()) or on torch data")
        return fn

    def relu(self, x):
        return self.xp.maximum(x, 0).astype(x.dtype, copy=False)

    def gelu(self, x, approximate="none"):  # the default as in _special.gelu (pointwise passes none)
        xp = self.xp
        if approximate == "tanh":
            return 0.5 * x * (1 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
        from cupyx.scipy.special import erf  # noqa: PLC0415 - cupy is loaded already here

        return x * (0.5 * (1 + erf(x * 0.7071067811865476))).astype(x.dtype, copy=False)

    def silu(self, x):
        return x / (1 + self.xp.exp(-x))

    def sgn(self, x):
        return XP_FORMULAS["sgn"](self.xp, self._special_function, x)

    def linear(self, x, weight, bias):
        out = self.xp.matmul(x, weight.T)
        if bias is not None:
            out += bias
        return out

    def layer_norm(self, x, eps, weight, bias):
        mean = x.mean(axis=1, keepdims=True)
        centred = x - mean
        out = centred / self.xp.sqrt((centred * centred).mean(axis=1, keepdims=True) + eps)
        if weight is not None:
            out *= weight
        if bias is not None:
            out += bias
        return out.astype(x.dtype, copy=False)

    def from_host(self, a, *, like, dtype=None):
        with like.device:  # on the data's GPU, whichever is current
            return self.xp.asarray(a, dtype=dtype)

    def softmax(self, x, axis, out=None):
        if not x.shape[axis]:
            return x.copy() if out is None else out
        res = x - x.max(axis=axis, keepdims=True)
        self.xp.exp(res, out=res)
        res /= res.sum(axis=axis, keepdims=True)
        return _into(res, out)

    def normalize_sum(self, x, axis, out=None):
        return _into(x / x.sum(axis=axis, keepdims=True), out)

    def log_softmax(self, x, axis, out=None):
        xp = self.xp
        if not x.shape[axis]:
            return x.copy() if out is None else out
        res = x - x.max(axis=axis, keepdims=True)
        with np.errstate(divide="ignore"):
            res -= xp.log(xp.exp(res).sum(axis=axis, keepdims=True))
        return _into(res, out)

    def segment_extreme_with_index(self, rows, offsets, kind):
        return None  # one argmax over a padded copy on the device

    def dropout(self, x, p, inplace):
        keep = self.keep_mask(tuple(x.shape), p, x)
        scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        if inplace:
            x *= keep
            x *= scale
            return x
        return (x * keep * scale).astype(x.dtype, copy=False)
