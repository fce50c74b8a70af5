"""NumPy ufunc calls on torch data: each runs the torch function of the same meaning (torch's dtype rules).

A number operand (Python's, a NumPy scalar or 0-d array) reaches torch as a Python number wherever the
ufunc is one of Python's operators, so torch reads it as it reads ``t.data + 300`` or ``t.data / -1``
(a wrapped number: its value is not first cast to the data's dtype, and torch's own refusals, such as an
integer to a negative integer power, apply). Other functions (``np.maximum``, ``np.arctan2``...) take it as
a 0-d tensor of the dtype torch would promote to.
"""

import operator

import numpy as np
import torch

from ..numpy._ufunc import out_cast_error

__all__ = ["apply_ufunc"]

# NumPy ufunc names whose torch function has another name (or another meaning).
_UFUNC_RENAMES = {
    "equal": torch.eq,
    "not_equal": torch.ne,
    "power": torch.pow,
    "absolute": torch.abs,
    "conjugate": torch.conj,
    "invert": torch.bitwise_not,
    "left_shift": torch.bitwise_left_shift,
    "right_shift": torch.bitwise_right_shift,
    "matmul": torch.matmul,
    "rint": torch.round,
    "isnan": torch.isnan,
}

# ufuncs that are Python operators: with a number operand, torch runs the operator on the number itself
_OPERATORS = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": operator.truediv,
    "floor_divide": operator.floordiv, "remainder": operator.mod, "power": operator.pow,
    "left_shift": operator.lshift, "right_shift": operator.rshift, "bitwise_and": operator.and_,
    "bitwise_or": operator.or_, "bitwise_xor": operator.xor, "equal": operator.eq, "not_equal": operator.ne,
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
}

_COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}
#: binary ufuncs whose torch function's result dtype is ``torch.result_type`` of the operands (true division:
#: then a floating type): their ``out=`` is checked before the call (:func:`_check_out`)
_PROMOTING = frozenset(_OPERATORS).difference(_COMPARISONS) | {"true_divide", "maximum", "minimum", "fmod"}


def _check_out(name, operands, out):
    """torch's own check of an ``out=`` (the result type castable to its dtype: ``torch.can_cast``), made
    before the call so that the error is lodtensor's DTypeError, as on NumPy data, and nothing is written."""
    if len(operands) != 2 or name not in _PROMOTING:
        return  # (other calls: torch's own check and error)
    try:
        result = torch.result_type(*operands)
    except (TypeError, RuntimeError):
        return
    if name in ("divide", "true_divide") and not (result.is_floating_point or result.is_complex):  # (NumPy 1.x)
        result = torch.get_default_dtype()
    if not torch.can_cast(result, out.dtype):
        raise out_cast_error(name, result, out.dtype)


def _number(value):
    """``value`` as a Python number where it is one (Python's, a NumPy scalar, a 0-d NumPy array), else None."""
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 and value.dtype.kind in "biufc":
        return value.item()
    return value if isinstance(value, (bool, int, float, complex)) else None


def apply_ufunc(ufunc, method, *args, **kwargs):
    """Run a NumPy ufunc call with the torch function of the same meaning."""
    name = ufunc.__name__
    if method != "__call__":
        raise TypeError(f"numpy.{name}.{method} is not supported on torch data; use the torch function on t.data")
    fn = _UFUNC_RENAMES.get(name) or getattr(torch, name, None)
    if fn is None:
        raise TypeError(f"numpy.{name} has no torch equivalent; call a torch function on t.data")
    out = kwargs.pop("out", None)
    if kwargs:
        raise TypeError(f"numpy.{name}: keyword arguments {sorted(kwargs)} are not supported on torch data")
    if out is not None and len(out) != 1:
        raise TypeError(f"numpy.{name}: only one out= tensor is supported on torch data")
    if len(args) == 2 and name in _OPERATORS:
        numbers = [_number(a) for a in args]
        if isinstance(args[0], torch.Tensor) and numbers[1] is not None:  # t <op> number (out=: the function's)
            if out is None:
                return _OPERATORS[name](args[0], numbers[1])
            _check_out(name, (args[0], numbers[1]), out[0])
            return fn(args[0], numbers[1], out=out[0])
        if isinstance(args[1], torch.Tensor) and numbers[0] is not None and out is None:  # number <op> t
            return _OPERATORS[name](numbers[0], args[1])
    if len(args) > 1:  # torch's binary functions want tensors: Python and NumPy numbers become 0-d tensors
        like = next(a for a in args if isinstance(a, torch.Tensor))
        args = [a if isinstance(a, torch.Tensor) else _scalar_tensor(a, like) for a in args]
    if out is None:
        return _own(fn(*args), args)
    _check_out(name, args, out[0])
    return fn(*args, out=out[0])


def _own(result, args):
    """``result`` in memory of its own, as a NumPy ufunc's result is: ``torch.positive`` returns its operand
    and ``torch.conj`` a lazy view of it (``conj_physical`` of real data: the operand again), so a write into
    ``np.positive(t)`` or ``np.conj(t)`` reached ``t``."""
    if not isinstance(result, torch.Tensor):  # (frexp, modf: new tensors)
        return result
    if result.is_conj() or result.is_neg():
        return result.resolve_conj().resolve_neg()
    return result.clone() if any(result is a for a in args) else result


def _scalar_tensor(value, like):
    """A Python or NumPy number as a 0-d tensor on ``like``'s device, promoting as torch
    promotes a Python number (its kind, not its width: float32 data and 0.5 stay float32);
    an array, or a list or tuple of numbers (read as ``torch.tensor`` reads it: floats in torch's default
    dtype, so float32 data stays float32), as a tensor there."""
    if isinstance(value, np.ndarray) and value.ndim:
        return torch.as_tensor(value, device=like.device)
    given = value
    if type(value) in (list, tuple):
        array = np.asarray(value) if len(value) else np.zeros(0)  # NumPy's reading: numbers only
        if array.dtype.kind in "biufc":
            try:  # torch's reading of the numbers (floats: its default dtype, as torch.tensor(list))
                return torch.as_tensor(value, device=like.device)
            except (TypeError, ValueError, RuntimeError, OverflowError):  # (NumPy scalars, 2**70...)
                return torch.as_tensor(array, device=like.device)
        value = array
    value = value.item() if hasattr(value, "item") and np.ndim(value) == 0 else value
    if not isinstance(value, (bool, int, float, complex)):
        raise TypeError(
            f"an operand of torch data must be a number, a tensor, an array or a list of numbers, "
            f"got {given!r} of type {type(given).__name__}"
        )
    return torch.as_tensor(value, dtype=torch.result_type(like, value), device=like.device)
