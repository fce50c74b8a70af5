"""Integer operands of the binary ops on NumPy data, as torch 2.13 takes them.

torch converts a Python (or NumPy) integer to the result's integer dtype by wrapping it, two's complement:
``int8 + 300`` adds 44, ``uint8 < -1`` compares with 255, ``300 ** int8`` raises 44 to the powers. NumPy
raised its OverflowError for these. torch refuses integers below -2**63 or from 2**64 on, and from 2**63 on
with bool data (its uint64 promotion), except ``2**63 / bool``; the exponent of ``pow`` is checked, not wrapped
("value cannot be converted to type int8_t without overflow"). Every case here is compared with dense torch,
operators in both positions and the functions with the number second.
"""

import operator
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402
from lodtensor.nested import BINARY  # noqa: E402

DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float32", "bool"]
NUMBERS = [300, -1, -129, 255, 2**40, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 2**70, -(2**63) - 1, np.int64(300), True]
OPERATORS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "remainder": operator.mod, "pow": operator.pow, "bitwise_and": operator.and_, "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor, "bitwise_left_shift": operator.lshift, "bitwise_right_shift": operator.rshift,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
}


def _data(dtype):
    return np.array([1, 100, 200 if dtype in ("uint8", "bool") else -100, 7], dtype=dtype)


def _outcome(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = call()
        except Exception as err:  # noqa: BLE001 - whether both refuse is compared
            return ("refused", f"{type(err).__name__}: {err}")
    values = np.concatenate(out.unbind()) if hasattr(out, "unbind") and not isinstance(out, torch.Tensor) else (
        out.numpy())
    return str(out.dtype).replace("torch.", ""), np.asarray(values, dtype=float)


def _same(theirs, ours):
    if "refused" in (theirs[0], ours[0]):
        return theirs[0] == ours[0]
    exact = theirs[0] in ("bool", "uint8", "int8", "int16", "int32", "int64")  # (floats: to rounding)
    return theirs[0] == ours[0] and (np.array_equal(theirs[1], ours[1], equal_nan=True) if exact else
                                     np.allclose(theirs[1], ours[1], rtol=1e-6, equal_nan=True))


@pytest.mark.parametrize("name", sorted(n for n, spec in BINARY.items() if spec[3]))
def test_integer_numbers_as_torch_takes_them(name):
    fn = torch
    for part in BINARY[name][1].split("."):
        fn = getattr(fn, part)
    ours_fn = getattr(ln, name)
    forms = [(fn, ours_fn)]
    if name in OPERATORS:  # the number first: torch's reflected operators
        rop = OPERATORS[name]
        forms.append(((lambda t, v: rop(v, t)), (lambda n, v: rop(v, n))))
    wrong = []
    for dtype in DTYPES:
        x = _data(dtype)
        for number in NUMBERS:
            for theirs_fn, mine_fn in forms:
                theirs = _outcome(lambda: theirs_fn(torch.from_numpy(x), number))  # noqa: B023 - called at once
                ours = _outcome(lambda: mine_fn(ln.nested_tensor([x[:1], x[1:]]), number))  # noqa: B023
                if not _same(theirs, ours):
                    wrong.append((dtype, number, theirs_fn is not fn, theirs, ours))
    assert not wrong, f"(dtype, number, number first, torch, ours): {wrong[:5]}"


def test_in_place_and_alpha_wrap_as_torch():
    x = np.array([1, 100, -100], dtype=np.int8)
    nt = ln.nested_tensor([x[:1], x[1:]])
    nt.add_(300)
    t = torch.from_numpy(x.copy()).add_(300)
    assert np.concatenate(nt.unbind()).tolist() == t.tolist() == [45, -112, -56]
    alpha = ln.add(ln.nested_tensor([x[:1], x[1:]]), 300, alpha=3)
    assert np.concatenate(alpha.unbind()).tolist() == torch.add(torch.from_numpy(x), 300, alpha=3).tolist()


def test_a_number_torch_cannot_convert_names_the_argument():
    nt = ln.nested_tensor([np.array([1.0, 2.0], np.float32)])
    with pytest.raises(RuntimeError, match=r"int too big to convert: argument 'other' is 1180591620717411303424"):
        nt + 2**70
    with pytest.raises(RuntimeError, match="cannot be converted to type int8_t without overflow"):
        ln.nested_tensor([np.array([1, 2], np.int8)]) ** 300


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "float32"])
def test_floor_divide_as_dense_torch(dtype, lib):
    """``//``, ``x // nt``, ``//=`` and ``torch.floor_divide`` (torch's jagged layout has no kernel: dense torch is
    the reference), integer operands wrapped as for the other ops; a zero integer divisor refused."""
    x = _data(dtype)
    parts = [x[:1], x[1:]]

    def nested():
        return ln.nested_tensor(parts if lib == "numpy" else [torch.from_numpy(p.copy()) for p in parts])

    t = torch.from_numpy(x.copy())
    for theirs, ours in ((lambda: t // 3, lambda: nested() // 3), (lambda: 300 // t, lambda: 300 // nested()),
                         (lambda: torch.floor_divide(t, 2.5), lambda: torch.floor_divide(nested(), 2.5)),
                         (lambda: t // 0, lambda: nested() // 0)):
        assert _same(_outcome(theirs), _outcome(ours))
    mine = nested()
    mine //= 3
    assert np.concatenate([np.asarray(c) for c in mine.unbind()]).tolist() == (t.clone() // 3).tolist()


@settings(max_examples=150, deadline=None)
@given(dtype=st.sampled_from(DTYPES),
       number=st.one_of(st.integers(-(2**64), 2**65), st.integers(-300, 300)),
       op=st.sampled_from(["add", "sub", "mul", "remainder", "bitwise_and", "bitwise_xor", "lt", "ge", "eq"]),
       first=st.booleans())
def test_any_integer_operand_as_torch_takes_it(dtype, number, op, first):
    """Random integers (past both ends of what torch converts too), either side of the operator."""
    x = _data(dtype)
    rop = OPERATORS[op]
    theirs = _outcome(lambda: rop(number, torch.from_numpy(x)) if first else rop(torch.from_numpy(x), number))
    nt = ln.nested_tensor([x[:1], x[1:]])
    ours = _outcome(lambda: rop(number, nt) if first else rop(nt, number))
    assert _same(theirs, ours), (theirs, ours)
