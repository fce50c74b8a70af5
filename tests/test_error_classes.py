"""Error classes on the torch-compatible surface, compared with real torch (2.13) and NumPy.

- An argument value torch refuses (hardtanh's ``min_val > max_val``, CELU's ``alpha=0``, rrelu's
  ``lower > upper``, ...) raises :class:`lodtensor.errors.ArgumentError`, a ``ValueError`` and a
  ``RuntimeError``: the ``except`` clause written for torch's error (``RuntimeError``, or ``ValueError``
  where torch's Python layer checks) catches it, on NumPy and torch data alike, and so does the
  ``except ValueError`` of code written for lodtensor's earlier error. It names the argument and its value.
- An in-place operator on a LoDTensor (``t += 1.5`` on integers, ``t /= 2``, ``bool_t *= 1``...) whose result
  its dtype cannot hold raises :class:`lodtensor.errors.DTypeError` (a ``TypeError``, as NumPy's error is, and
  a ``RuntimeError``, as torch's is) naming the op and both dtypes, on NumPy and torch data alike, before
  anything is written. Each case is run on a plain NumPy array and a plain torch tensor first: where the
  library raises its casting error, the LoDTensor raises DTypeError; where it raises another error, the
  LoDTensor's is of that class; where it succeeds, the LoDTensor holds the same values.
"""

import operator

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor.errors import ArgumentError, DTypeError

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")


# -- argument values torch refuses ------------------------------------------------------------------------
def _components(lib):
    rows = [np.array([[1.0, -2.0, 3.0, -4.0], [0.5, -0.5, 2.0, -3.0]], np.float32),
            np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)]
    return [torch.from_numpy(r) for r in rows] if lib == "torch" else rows


def _nested(lib, layout):
    return ln.nested_tensor(_components(lib), layout=layout)


def _torch_jagged():
    return torch.nested.nested_tensor(_components("torch"), layout=torch.jagged)


# name: (call on a tensor, the refused argument, its value, a phrase of the message); the call is made on
# lodtensor's nested tensors (NumPy and torch data) and, as the reference, on a dense torch tensor and a torch
# jagged nested tensor (torch.nested's own)
ARGUMENTS = {
    "hardtanh": (lambda t: F.hardtanh(t, 2.0, 1.0), "min_val", 2.0, "min_val cannot be greater than max_val"),
    "hardtanh inplace": (lambda t: F.hardtanh(t, 2.0, 1.0, inplace=True), "min_val", 2.0, "min_val=2.0"),
    "celu": (lambda t: F.celu(t, 0.0), "alpha", 0.0, "alpha cannot be 0 for CELU, got alpha=0.0"),
    "celu inplace": (lambda t: F.celu(t, 0.0, inplace=True), "alpha", 0.0, "alpha cannot be 0"),
    "softshrink": (lambda t: F.softshrink(t, -1.0), "lambd", -1.0, r"lambda must be in range \[0, inf\)"),
    "gelu": (lambda t: F.gelu(t, approximate="bogus"), "approximate", "bogus", "either none or tanh, got 'bogus'"),
    "rrelu": (lambda t: F.rrelu(t, 0.5, 0.1), "lower", 0.5, "lower=0.5, upper=0.1"),
    "rrelu training": (lambda t: F.rrelu(t, 0.5, 0.1, training=True), "lower", 0.5, "Lower bound should be"),
    "torch.rrelu": (lambda t: torch.rrelu(t, 0.5, 0.1), "lower", 0.5, "Lower bound should be"),
    "rrelu_": (lambda t: torch.rrelu_(t, 0.5, 0.1), "lower", 0.5, "Lower bound should be"),
    "mvlgamma": (lambda t: torch.mvlgamma(t, 0), "p", 0, "p has to be greater than or equal to 1, got p=0"),
    "polygamma": (lambda t: torch.polygamma(-1, t), "n", -1, "does not support negative n, got n=-1"),
    "isclose rtol": (lambda t: torch.isclose(t, t, rtol=-1.0), "rtol", -1.0, "rtol must be greater than or equal"),
    "isclose atol": (lambda t: torch.isclose(t, t, atol=-2.0), "atol", -2.0, "atol must be .* but got -2.0"),
    "div rounding_mode": (lambda t: torch.div(t, 2, rounding_mode="bad"), "rounding_mode", "bad",
                          "but found 'bad'"),
    "dropout": (lambda t: F.dropout(t, 2.0), "p", 2.0, "between 0 and 1, but got 2.0"),
    "scaled_dot_product_attention": (lambda t: F.scaled_dot_product_attention(t, t, t, dropout_p=2.0),
                                     "dropout_p", 2.0, "between 0 and 1, but got dropout_p=2.0"),
}


def _torch_error(call, make):
    try:
        call(make())
    except Exception as err:  # noqa: BLE001 - any class: the test asks whether ours is an instance of it
        return err
    return None


def _references(name):
    """torch's own errors for call ``name``: on a dense tensor and on a torch jagged nested tensor (where torch
    runs the op at all: not its NotImplementedError)."""
    call = ARGUMENTS[name][0]
    if "attention" in name:  # (batch, heads, (L), E)
        dense = lambda: torch.ones(2, 1, 3, 4)  # noqa: E731
        jagged = lambda: torch.nested.nested_tensor(  # noqa: E731
            [c.reshape(-1, 1, 4) for c in _components("torch")], layout=torch.jagged).transpose(1, 2)
    else:
        dense, jagged = (lambda: torch.tensor([[1.0, -2.0, 3.0, -4.0]])), _torch_jagged
    refs = [_torch_error(call, dense), _torch_error(call, jagged)]
    return [r for r in refs if r is not None and not isinstance(r, NotImplementedError)]


@pytest.mark.parametrize("name", ARGUMENTS)
def test_torch_refuses_these_arguments_with_a_class_argument_error_is(name):
    """The reference: torch's own error for each call, dense and on its jagged layout, is a RuntimeError or a
    ValueError (where its Python layer checks), both bases of ArgumentError."""
    refs = _references(name)
    assert refs, name
    for ref in refs:
        assert issubclass(ArgumentError, type(ref)), (name, type(ref), ref)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["strided", "jagged"])
@pytest.mark.parametrize("name", ARGUMENTS)
def test_refused_arguments_raise_argument_error(lib, layout, name):
    call, argument, value, phrase = ARGUMENTS[name]
    nt = _nested(lib, layout)
    if "attention" in name:  # (batch, heads, (L), E) views
        nt = ln.nested_tensor([c.reshape(1, -1, 4) for c in _components(lib)], layout=layout).transpose(1, 2)
    before = [np.asarray(c).copy() for c in nt.to_tensor_list()]
    with pytest.raises(ArgumentError, match=phrase) as info:
        call(nt)
    err = info.value
    assert isinstance(err, RuntimeError) and isinstance(err, ValueError)  # torch's class, and the old one
    assert (err.argument, err.value) == (argument, value)
    assert repr(value) in str(err) or str(value) in str(err)  # the message names the value
    for got, want in zip(nt.to_tensor_list(), before):  # nothing written, in place or not
        np.testing.assert_array_equal(np.asarray(got), want)
    for ref in _references(name):  # torch's own except clause catches it: each class torch raised for the call
        assert isinstance(err, type(ref)), (type(ref), ref)


def test_a_layout_or_memory_format_torch_refuses():
    with pytest.raises(RuntimeError, match="Specified layout is unsupported") as torch_err:
        torch.nested.nested_tensor(_components("torch"), layout=torch.sparse_coo)
    with pytest.raises(ArgumentError, match="Specified layout is unsupported.*sparse_coo") as info:
        ln.nested_tensor(_components("numpy"), layout=torch.sparse_coo)
    assert isinstance(info.value, type(torch_err.value)) and info.value.argument == "layout"
    with pytest.raises(RuntimeError) as torch_err:
        _torch_jagged().to(memory_format=torch.channels_last)
    for lib in ("numpy", "torch"):
        with pytest.raises(ArgumentError, match="memory_format must be .*channels_last") as info:
            _nested(lib, "jagged").to(memory_format=torch.channels_last)
        assert isinstance(info.value, type(torch_err.value)) and info.value.argument == "memory_format"


def test_the_backend_formulas_refuse_with_the_same_class():
    """The NumPy/CuPy formulas' own checks (behind the ops' checks) raise ArgumentError too."""
    from lodtensor.backend.numpy._xp_special import XP_FORMULAS

    x = np.ones(3)
    with pytest.raises(ArgumentError, match="lower=0.5, upper=0.1"):
        XP_FORMULAS["rrelu"](np, None, x, 0.5, 0.1)
    with pytest.raises(ArgumentError, match="got p=0"):
        XP_FORMULAS["mvlgamma"](np, None, x, 0)


def test_arguments_torch_accepts_are_still_accepted():
    """elu/softplus/leaky_relu/threshold/hardshrink take any value in torch: no error here either."""
    for lib in ("numpy", "torch"):
        nt = _nested(lib, "jagged")
        for call in (lambda t: F.elu(t, -1.0), lambda t: F.softplus(t, 0.5, 5.0), lambda t: F.leaky_relu(t, -1.0),
                     lambda t: F.threshold(t, 1.0, 2.0), lambda t: F.hardshrink(t, 0.0),
                     lambda t: F.hardtanh(t, 1.0, 1.0), lambda t: F.rrelu(t, 0.2, 0.2)):
            call(nt)


# -- in-place operators on LoDTensors -------------------------------------------------------------------
INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "&=": operator.iand,
    "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
DATA = {
    "int64": np.array([1, 2, 3, 4, 5], np.int64),
    "int32": np.array([1, 2, 3, 4, 5], np.int32),
    "uint8": np.array([1, 2, 3, 4, 5], np.uint8),
    "bool": np.array([True, False, True, True, False]),
    "float32": np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32),
}
OPERANDS = {"1.5": 1.5, "2": 2, "True": True, "1j": 1j, "-1": -1}


def _library_outcome(lib, dtype, op, rhs):
    """``op`` on a plain NumPy array or torch tensor: ("ok", values) or ("error", the exception)."""
    data = DATA[dtype].copy() if lib == "numpy" else torch.from_numpy(DATA[dtype].copy())
    try:
        out = INPLACE[op](data, rhs)
    except Exception as err:  # noqa: BLE001 - the reference's class, whatever it is
        return "error", err
    return "ok", np.asarray(out)


def _is_cast_error(lib, err):
    if lib == "numpy":
        return type(err).__qualname__ == "_UFuncOutputCastingError"
    return isinstance(err, RuntimeError) and "can't be cast to the desired output type" in str(err)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", DATA)
@pytest.mark.parametrize("rhs", OPERANDS)
def test_inplace_operators_raise_dtype_error_where_the_library_cannot_cast(lib, dtype, rhs):
    casts = 0
    for op, apply in INPLACE.items():
        kind, ref = _library_outcome(lib, dtype, op, OPERANDS[rhs])
        data = DATA[dtype].copy()
        t = lt.LoDTensor(data if lib == "numpy" else torch.from_numpy(data), [[0, 2, 2, 5]])
        held = t.data
        if kind == "ok":
            apply(t, OPERANDS[rhs])
            assert t.data is held  # in place
            np.testing.assert_array_equal(np.asarray(t.data), ref, err_msg=f"{dtype} {op} {rhs}")
            continue
        if _is_cast_error(lib, ref):
            casts += 1
            with pytest.raises(DTypeError, match="can't be cast to the desired output type") as info:
                apply(t, OPERANDS[rhs])
            message = str(info.value)
            assert f"({op} or out=)" in message, message  # names the op
            assert dtype in message and "result type" in message, message  # and both dtypes
            public = next(c for c in type(ref).__mro__ if c.__module__ == "builtins")  # (NumPy's class is private)
            assert public in (TypeError, RuntimeError) and isinstance(info.value, public)  # still caught
            assert isinstance(info.value, (TypeError, RuntimeError, ValueError))
        else:  # another refusal (no loop, a bool subtraction, an int out of range): the library's class
            with pytest.raises(Exception) as info:  # noqa: PT011 - checked just below
                apply(t, OPERANDS[rhs])
            assert isinstance(info.value, type(ref)), (dtype, op, rhs, info.value, ref)
        assert t.data is held
        np.testing.assert_array_equal(np.asarray(t.data), DATA[dtype], err_msg=f"{dtype} {op} {rhs} wrote")
    if (dtype, rhs) in (("int64", "1.5"), ("bool", "2"), ("float32", "1j")):
        assert casts, "the table has cast errors to check"


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_the_torch_data_cases_of_the_brief(lib):
    """``t += 1.5`` and ``t *= 0.5`` on int64, ``t /= 2`` on ints, bool data: DTypeError, the data untouched."""
    wrap = (lambda a: a) if lib == "numpy" else torch.from_numpy
    for dtype, op, rhs in (("int64", "+=", 1.5), ("int64", "*=", 0.5), ("int32", "/=", 2), ("bool", "+=", 1),
                           ("bool", "/=", True), ("uint8", "-=", 0.5)):
        t = lt.LoDTensor(wrap(DATA[dtype].copy()), [[0, 2, 5]])
        for catch in (DTypeError, TypeError, RuntimeError, ValueError):
            with pytest.raises(catch, match=rf"\({op[0]}"):
                INPLACE[op](t, rhs)
        np.testing.assert_array_equal(np.asarray(t.data), DATA[dtype])


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_other_operands_and_out(lib):
    """A 0-d tensor or array, a NumPy scalar, an array of rows, and the ufunc's ``out=`` form."""
    wrap = (lambda a: a) if lib == "numpy" else torch.from_numpy
    operands = [np.float64(1.5), np.array(1.5)]
    operands += [torch.tensor(1.5), torch.full((5,), 1.5)] if lib == "torch" else [np.full(5, 1.5)]
    for rhs in operands:
        t = lt.LoDTensor(wrap(DATA["int64"].copy()), [[0, 5]])
        with pytest.raises(DTypeError, match="int64"):
            t += rhs
        np.testing.assert_array_equal(np.asarray(t.data), DATA["int64"])
    t = lt.LoDTensor(wrap(DATA["int32"].copy()), [[0, 5]])
    with pytest.raises(DTypeError, match=r"numpy.multiply \(\*= or out=\).*int32"):
        np.multiply(t, 0.5, out=t)
    np.testing.assert_array_equal(np.asarray(t.data), DATA["int32"])
    t += 2  # what fits is written
    np.testing.assert_array_equal(np.asarray(t.data), DATA["int32"] + 2)
