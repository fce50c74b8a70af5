"""Regressions of the lead's own changes on 2026-11-27 (third day): the orthogonal polynomials' cost at a
low scalar degree, and the in-place dtype error class."""

import numpy as np
import pytest

import lodtensor.nested as ln
from lodtensor.backend.numpy._orthopoly import POLYNOMIALS
from lodtensor.errors import DTypeError

torch = pytest.importorskip("torch")


class _Counting:
    """NumPy, counting the calls of the transcendental functions and the gathers the polynomials make."""

    def __init__(self):
        self.calls = {}

    def __getattr__(self, name):
        fn = getattr(np, name)
        if name in ("arccos", "cos", "sin", "nonzero", "argsort"):
            def counted(*args, **kwargs):
                self.calls[name] = self.calls.get(name, 0) + 1
                return fn(*args, **kwargs)
            return counted
        return fn


@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
def test_a_low_scalar_degree_computes_no_trigonometric_form_and_sorts_nothing(name):
    """Degree 5 on 1e6 values took 613 ms against torch's 7.5 ms: every Chebyshev call computed arccos,
    sin and cos over every element (the form torch uses past degree 6), built full-size degree arrays
    from the scalar, gathered and scattered the recurrence's elements and evaluated every family's
    degree-1 form. Now a scalar degree stays a scalar and the trigonometric form runs only where it
    applies; the values still equal torch's."""
    x = np.linspace(-1.5, 1.5, 1001)
    xp = _Counting()
    got = POLYNOMIALS[name](xp, None, x, 3)  # (below every family's trigonometric form)
    assert not {k: v for k, v in xp.calls.items() if k in ("arccos", "cos", "sin", "argsort")}, xp.calls
    want = getattr(torch.special, name)(torch.from_numpy(x), 3).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                                  "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_w"])
@pytest.mark.parametrize("n", [9, 40, np.array([0, 3, 9, 40, -1, 7, 12, 2] * 125 + [5])])
def test_the_trigonometric_form_only_where_it_applies_still_equals_torch(name, n):
    x = np.random.default_rng(3).uniform(-1.2, 1.2, 1001)
    x[::97] = 1.0
    x[1::101] = -1.0
    x[2::103] = 0.0
    got = POLYNOMIALS[name](np, None, x, n.astype(np.float64) if isinstance(n, np.ndarray) else n)
    nt = torch.from_numpy(n.astype(np.float64)) if isinstance(n, np.ndarray) else n
    want = getattr(torch.special, name)(torch.from_numpy(x), nt).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("data", [np.array, torch.tensor], ids=["numpy", "torch"])
def test_an_in_place_result_of_a_higher_dtype_category_is_a_dtype_error(data):
    """A float result written into integers: a DTypeError, catchable as NumPy's TypeError and torch's
    RuntimeError (it was a plain RuntimeError, which ``except TypeError`` written for NumPy missed)."""
    nt = ln.nested_tensor([data([1, 2]), data([3])])
    for catch in (TypeError, RuntimeError, ValueError, DTypeError):
        with pytest.raises(catch, match="can't be cast to the desired output type Long"):
            nt.add_(1.5)
    assert nt.to_tensor_list()[0].tolist() == [1, 2]


# -- torch 2.14 and 2.15 (whose Function.apply is C code, binding every call): the signature is kept -----------
def test_fast_apply_keeps_forwards_signature_for_torchs_own_binding(monkeypatch):
    """Where the shortcut steps aside (torch 2.14 on: ``Function.apply`` is C code that calls
    ``inspect.signature(forward).bind`` every call; and keyword calls on any torch), the signature is kept
    on ``forward`` (``__signature__``), so torch's binding reads it instead of rebuilding it from the code
    object: 22 -> 15 us a call on torch 2.13, 2.14.1 and 2.15.0 alike."""
    import inspect

    from lodtensor.backend.torch import _vmap

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(x, scale):
            return x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.scale = inputs[1]

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.scale, None

    monkeypatch.setattr(_vmap, "_FUNCTION_APPLY", None)  # as torch 2.14, whose Function.apply is C code
    assert _vmap.fast_apply(Twice) is Twice and "apply" not in Twice.__dict__
    rebuilt = []
    original = inspect._signature_from_function
    monkeypatch.setattr(inspect, "_signature_from_function",
                        lambda *a, **k: rebuilt.append(1) or original(*a, **k))
    x = torch.ones(3, requires_grad=True)
    Twice.apply(x, 2.0).sum().backward()
    Twice.apply(x, scale=3.0).sum().backward()
    assert not rebuilt
    assert x.grad.tolist() == [5.0, 5.0, 5.0]
    assert inspect.signature(Twice.forward) == Twice.forward.__signature__
