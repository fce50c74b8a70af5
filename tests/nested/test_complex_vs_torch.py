"""Complex data against torch 2.13 (dense torch: its jagged layout lacks some complex kernels).

NumPy computes where torch refuses complex data: it orders complex numbers (real part, then imaginary), so
``lt``, ``maximum``, ``amax``, ``argmax`` gave answers, and it has a complex erf, round, sign, relu... Those
ops are refused on every backend, as torch refuses them. ``logaddexp`` of complex operands computes as
torch's (NumPy's ufunc refuses them). Promotion between real and complex operands is torch's:
int64 + complex64 is complex64 (NumPy's: complex128), float64 with a 0-d complex64 is complex128.
"""

import itertools
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402
from lodtensor.nested import BINARY, UNARY  # noqa: E402

from ._cases import run_call as _run  # noqa: E402

LENGTHS = (2, 0, 3)


def _values(seed, dtype, width=3):
    g = np.random.default_rng(seed)
    n = sum(LENGTHS)
    if np.dtype(dtype).kind == "c":
        return (g.uniform(-1.5, 1.5, (n, width)) + 1j * g.uniform(-1.5, 1.5, (n, width))).astype(dtype)
    return g.uniform(-1.5, 1.5, (n, width)).astype(dtype) if np.dtype(dtype).kind == "f" else (
        g.integers(-3, 4, (n, width)).astype(dtype))


def _nested(values, lib):
    cut = np.cumsum(LENGTHS)[:-1]
    parts = np.split(values, cut)
    return ln.nested_tensor([torch.from_numpy(p.copy()) for p in parts] if lib == "torch" else parts)


def _torch_fn(spec):
    obj = torch
    for part in spec[1].split("."):
        obj = getattr(obj, part)
    return obj


def _flat(nt):
    return np.concatenate([np.asarray(c.detach().resolve_conj() if hasattr(c, "detach") else c)
                           for c in nt.to_tensor_list()])


def _agree(ours_call, torch_call):
    theirs, their_err = _run(torch_call)
    ours, our_err = _run(ours_call)
    if their_err is not None:
        assert our_err is not None, f"torch refuses ({their_err}), we computed"
        return
    assert our_err is None, f"we refused ({our_err!r}), torch computes"
    got, want = _flat(ours), theirs.detach().resolve_conj().numpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=2e-4, atol=2e-4, equal_nan=True)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_on_complex_data_as_torch(name, lib):
    values = _values(1, np.complex64)
    _agree(lambda: getattr(ln, name)(_nested(values, lib)), lambda: _torch_fn(UNARY[name])(torch.from_numpy(values)))


OTHERS = {
    "nested": (_nested, torch.from_numpy),
    "complex_scalar": (lambda v, lib: 0.5 + 0.25j, lambda v: 0.5 + 0.25j),
    "float_scalar": (lambda v, lib: 0.75, lambda v: 0.75),
}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("other", sorted(OTHERS))
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_on_complex_data_as_torch(name, other, lib):
    a, b = _values(1, np.complex64), _values(2, np.complex64)
    ours_other, their_other = OTHERS[other]
    fn = _torch_fn(BINARY[name])
    _agree(lambda: getattr(ln, name)(_nested(a, lib), ours_other(b, lib)),
           lambda: fn(torch.from_numpy(a), their_other(b)))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_of_real_data_with_complex_operands_as_torch(name, dtype, lib):
    """A Python complex, or a dense complex64 bias, with real data: promoted to complex (int64 + complex64 is
    complex64), and refused where torch refuses complex operands (``lt``, ``maximum``...)."""
    a = _values(3, dtype)
    bias = np.array([1 + 1j, 0.5, -1j], dtype=np.complex64)
    fn = _torch_fn(BINARY[name])
    for ours_other, their_other in ((0.5 + 0.25j, 0.5 + 0.25j),
                                    (torch.from_numpy(bias) if lib == "torch" else bias, torch.from_numpy(bias))):
        _agree(lambda o=ours_other: getattr(ln, name)(_nested(a, lib), o),
               lambda o=their_other: fn(torch.from_numpy(a), o))


DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64",
          "complex128"]


@pytest.mark.parametrize("left", DTYPES)
def test_add_promotes_every_pair_of_dtypes_as_torch(left):
    """Nested NumPy data of ``left`` plus a dense bias, a 0-d array and Python numbers of every dtype: torch's
    result dtype (float16 with a complex number is torch's complex32, which NumPy lacks: complex64 here)."""
    values = _values(4, left).astype(left) if left != "bool" else _values(4, "int8") > 0
    nt = _nested(values, "numpy")
    dense = torch.from_numpy(values)
    mismatches = []
    for right in DTYPES:
        for shape in ((3,), ()):
            other = np.ones(shape, dtype=right)
            want = str((dense + torch.from_numpy(other)).dtype).replace("torch.", "")
            got = str((nt + other).dtype)
            if got != want and (want, got) != ("complex32", "complex64"):
                mismatches.append((right, shape, got, want))
    for number in (True, 2, 2.5, 1j):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch warns that complex32 is experimental)
            want = str((dense + number).dtype).replace("torch.", "")
        got = str((nt + number).dtype)
        if got != want and (want, got) != ("complex32", "complex64"):
            mismatches.append((number, got, want))
    assert not mismatches, f"{left} + ...: (other, ours, torch's) {mismatches}"


REDUCTIONS = {
    "amax": (lambda m, x: m.amax(x, -1)), "amin": (lambda m, x: m.amin(x, -1)),
    "argmax": (lambda m, x: m.argmax(x, -1)), "argmin": (lambda m, x: m.argmin(x, -1)),
    "max_dim": (lambda m, x: m.max(x, -1)), "min_dim": (lambda m, x: m.min(x, 1)),
    "max_all": (lambda m, x: m.max(x)), "argmax_all": (lambda m, x: m.argmax(x)),
}


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_ordering_reductions_refuse_complex_data_as_torch(name, lib):
    values = _values(5, np.complex64)
    fn = REDUCTIONS[name]
    assert _run(lambda: fn(torch, torch.from_numpy(values)))[1] is not None  # torch orders no complex numbers
    _, err = _run(lambda: fn(ln, _nested(values, lib)))
    assert isinstance(err, RuntimeError) and "complex" in str(err).lower(), err


_SPECIAL = [0, 1 + 2j, -3 + 0.5j, complex(np.inf, 0), complex(-np.inf, 0), complex(np.inf, 1), complex(-np.inf, 2),
            complex(np.nan, 0), complex(0, np.nan), complex(0, np.inf), 50 + 1j, -50 - 1j, complex(np.inf, np.inf),
            complex(-np.inf, np.inf), complex(1, -np.inf)]


def test_complex_logaddexp_formula_matches_torch_on_special_values():
    """Every pair of finite, infinite and NaN values (complex128: torch's complex64 kernel gives NaN where
    exp(-100) underflows, ours 0), to a tiny real part (0 + log1p(exp(-50 - 1j)): 1.04e-22)."""
    from lodtensor.backend.numpy._xp_special import XP_FORMULAS

    logaddexp = XP_FORMULAS["logaddexp"]
    pairs = list(itertools.product(_SPECIAL, _SPECIAL))
    a = np.array([p[0] for p in pairs], dtype=np.complex128)
    b = np.array([p[1] for p in pairs], dtype=np.complex128)
    want = torch.logaddexp(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = logaddexp(np, None, a, b)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.real, want.real, equal_nan=True)
    np.testing.assert_allclose(got.imag, want.imag, equal_nan=True)
