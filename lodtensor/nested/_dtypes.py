"""Dtypes for nested tensors: NumPy, string and torch spellings, and torch's promotion rules.

NumPy data keeps NumPy dtypes and torch data torch dtypes; ``dtype=`` accepts
either spelling (and names such as ``"float32"``) for both. Binary ops on
NumPy data follow torch's type promotion, so a nested tensor gives the same
result dtype on every backend: int64 + 1.5 is float32 (torch's default float
dtype), int64 + float32 is float32.
"""

import math
import numbers
import sys

import numpy as np

from ..backend import backend_of, dtype_kind, dtype_name, get_backend
from ..errors import ArgumentError, DTypeError
from ._tables import COMPLEX_REFUSALS

__all__ = ["kind_of", "torch_name", "resolve_dtype", "promote", "number_dtype", "check_requires_grad", "check_alpha",
           "checked_scalar", "check_fits", "torch_int", "refused", "complex_refused"]

DEFAULT_FLOAT = np.dtype(np.float32)  # torch.get_default_dtype() as shipped
DEFAULT_COMPLEX = np.dtype(np.complex64)
_INT64 = np.dtype(np.int64)

# torch's C type names, used in its "not implemented for 'Long'" messages.
_TORCH_NAMES = {
    "bool": "Bool",
    "uint8": "Byte",
    "int8": "Char",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "float32": "Float",
    "float64": "Double",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def kind_of(dtype):
    """NumPy kind letter of a NumPy or torch dtype: ``'b'``, ``'i'``, ``'u'``, ``'f'`` or ``'c'`` (the
    backend decides: :func:`lodtensor.backend.dtype_kind`)."""
    return dtype_kind(dtype)


def torch_name(dtype):
    """torch's C type name of a dtype (``'Long'`` for int64), as in its error messages."""
    name = dtype_name(dtype)
    return _TORCH_NAMES.get(name, name)


def resolve_dtype(dtype, backend_name, name="dtype"):
    """``dtype`` (NumPy, string or torch spelling) as the dtype type of ``backend_name``.

    Returns None for None. Raises TypeError for something that is not a
    numeric or bool dtype.
    """
    if dtype is None:
        return None
    try:
        kind = dtype_kind(dtype)
    except TypeError:
        raise TypeError(
            f"{name} must be a NumPy dtype, a dtype name or a torch dtype, got {type(dtype).__name__} {dtype!r}"
        ) from None
    if kind not in "biufc":
        raise TypeError(f"{name} must be a numeric or bool dtype, got {dtype_name(dtype)}")
    try:
        return get_backend(backend_name).as_dtype(dtype)  # the backend's own dtype object
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from None


def promote(a, b):
    """Result dtype of a binary op between NumPy dtype ``a`` and operand ``b``, by torch's rules.

    ``b`` may be a Python or NumPy scalar (torch's "wrapped number": torch 2.13
    treats ``np.float64(0.5)`` exactly as ``0.5``): it only raises the category
    (bool < integer < float < complex), to the default dtype of that category.
    A 0-d array counts only when its category is higher, with its own dtype.
    Between two arrays a higher category wins outright (int64 + float32 ->
    float32, int64 + complex64 -> complex64), except float with complex, and
    equal categories, which widen as in NumPy (float64 + complex64 -> complex128).

    >>> promote(np.float32, np.float64(0.5)), promote(np.int32, 0.5), promote(np.int32, np.array(0.5))
    (dtype('float32'), dtype('float32'), dtype('float64'))
    >>> promote(np.int64, np.dtype(np.complex64)), promote(np.float64, np.array(1j, np.complex64))
    (dtype('complex64'), dtype('complex128'))
    """
    a = np.dtype(a)
    if isinstance(b, np.generic) and b.dtype.kind in "biufc":
        b = b.item()
    if isinstance(b, (bool, int, float, complex)):
        cat_b = 0 if isinstance(b, bool) else 1 if isinstance(b, int) else 2 if isinstance(b, float) else 3
        cat_a = _CATEGORY[a.kind]
        if cat_b <= cat_a:
            return a
        if cat_b == 1:
            return _INT64
        if cat_b == 2:
            return DEFAULT_FLOAT
        return _complex_of(a)
    zero_dim = not isinstance(b, np.dtype) and len(getattr(b, "shape", (1,))) == 0
    b = np.dtype(getattr(b, "dtype", b))
    cat_a, cat_b = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if zero_dim:  # (a float array and a complex 0-d one: the complex type of the array's precision, as a number)
        if cat_b <= cat_a:
            return a
        return _complex_of(a) if (cat_a, cat_b) == (2, 3) else b
    if cat_a != cat_b and (max(cat_a, cat_b) <= 2 or min(cat_a, cat_b) < 2):  # (int64 + complex64: complex64)
        return a if cat_a > cat_b else b
    return np.result_type(a, b)


def number_dtype(x):
    """The dtype torch gives Python number ``x`` on its own (a float: the default float32), or a 0-d array's.

    >>> number_dtype(2.5), number_dtype(True), number_dtype(np.array(1, np.int8))
    (dtype('float32'), dtype('bool'), dtype('int8'))
    """
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(x, numbers.Integral):
        return _INT64
    return DEFAULT_FLOAT if isinstance(x, numbers.Real) else DEFAULT_COMPLEX


def _complex_of(dtype):
    """The complex dtype torch gives a float ``dtype`` raised to complex (float16's complex32: complex64 here,
    NumPy has none)."""
    return np.dtype(np.complex128) if dtype == np.float64 else DEFAULT_COMPLEX


def check_alpha(operands, alpha, where="add()"):
    """``add``/``sub``'s ``alpha`` as torch takes it: the result dtype is the operands' alone, ``alpha`` is cast to
    it (a bool for a bool result: nonzero is True; an integer one the integer result's type holds, else torch's
    "value cannot be converted"); a bool ``alpha`` needs a bool result, a float one a floating result, a complex
    one a complex result (torch's ``alpha_check``). Returns ``alpha`` (None stays None)."""
    if alpha is None or (type(alpha) is int and alpha == 1):  # (the default: every dtype holds it; no work)
        return alpha
    if hasattr(alpha, "shape") and not alpha.shape or isinstance(alpha, np.generic):  # a 0-d array: its scalar
        alpha = alpha.item()
    kinds = {kind_of(x.dtype) if hasattr(x, "dtype") else "b" if isinstance(x, bool) else
             "c" if isinstance(x, complex) else "f" if isinstance(x, float) else "i" for x in operands}
    if isinstance(alpha, bool) and kinds != {"b"}:
        raise DTypeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and kinds <= set("biu"):
        raise DTypeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(alpha, complex) and "c" not in kinds:
        raise DTypeError("For non-complex input tensors, argument alpha must not be a complex number.")
    if kinds == {"b"}:
        return bool(alpha)
    dtype = _result_dtype(operands)
    if dtype is not None:  # (int8 data, alpha=300: refused, not wrapped; sub checks -alpha, as torch negates it)
        check_fits(-alpha if where == "sub()" else alpha, dtype, where, "alpha")
    return alpha


def _result_dtype(operands):
    """torch's result dtype of a binary op of ``operands`` (a nested or dense tensor among them), or None where
    NumPy has no such dtype (bfloat16)."""
    arrays = [x for x in operands if hasattr(x, "dtype") and getattr(x, "ndim", 1)]
    if not arrays:
        return None
    other = operands[1] if arrays[0] is operands[0] else operands[0]
    try:
        if hasattr(other, "dtype"):
            other = np.zeros((1,) if getattr(other, "ndim", 1) else (), dtype_name(other.dtype))
        return promote(np.dtype(dtype_name(arrays[0].dtype)), other)
    except TypeError:
        return None


def torch_loaded():
    """The torch module when something has imported it already, else None."""
    return sys.modules.get("torch")


def check_requires_grad(buffer, requires_grad, where):
    """torch's rule: only floating and complex torch data can require gradients."""
    if not requires_grad:
        return
    if kind_of(buffer.dtype) not in "fc":  # (torch's RuntimeError; a TypeError too)
        raise DTypeError(f"{where}: Only Tensors of floating point and complex dtype can require gradients")
    if not backend_of(buffer).records_autograd:
        raise TypeError(
            f"{where}: requires_grad=True needs torch data (NumPy and CuPy arrays have no autograd); "
            f"build the nested tensor from torch tensors, or call .to_torch() first"
        )


# torch's C++ spelling of a type in "value cannot be converted to type ... without overflow"
_C_TYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t",
            "float16": "c10::Half", "float32": "float", "float64": "double",
            "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def checked_scalar(value, dtype, opmath=False):
    """A number argument (Python, NumPy, a 0-d array or tensor) as the NumPy scalar of ``dtype`` torch
    converts it to (``opmath``: the type it computes ``dtype`` in, float32 for float16), integers truncated,
    and ``(None, C type)`` where torch refuses with "value cannot be converted to type ... without
    overflow": out of the type's range (a finite value past a float's), NaN or infinity for an integer
    type, an imaginary part for a real one. A dtype NumPy lacks (bfloat16) keeps the value as given.

    >>> checked_scalar(-5.5, np.dtype(np.int64)), checked_scalar(300.7, np.dtype(np.uint8))
    (np.int64(-5), (None, 'uint8_t'))
    """
    try:
        dtype = np.dtype(dtype_name(dtype))
    except TypeError:
        return value
    if opmath and dtype.kind == "f" and dtype.itemsize < 4:
        dtype = np.dtype(np.float32)
    v = value.item() if hasattr(value, "item") else value
    if dtype.kind == "b":  # (anything nonzero is True, a complex number too)
        return dtype.type(bool(v))
    refused = (None, _C_TYPES.get(dtype.name, dtype.name))
    if isinstance(v, complex) and dtype.kind != "c":
        if v.imag != 0:
            return refused
        v = v.real
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if isinstance(v, float) and not (info.min <= v <= info.max):  # (NaN and infinities too)
            return refused
        v = int(v)
        if dtype.kind == "u" and 0 > v >= -info.max:  # torch lets a negative integer wrap into an unsigned type
            v += info.max + 1
        return dtype.type(v) if info.min <= v <= info.max else refused
    if dtype.kind in "fc":
        try:
            v = complex(v) if dtype.kind == "c" else float(v)
        except OverflowError:  # a Python int past a double
            return refused
        top = float(np.finfo(dtype).max)  # (a complex type's: its parts')
        parts = (v.real, v.imag) if dtype.kind == "c" else (v,)
        return refused if any(math.isfinite(p) and abs(p) > top for p in parts) else dtype.type(v)
    return dtype.type(v)


def check_fits(value, dtype, where, argument, unchecked=(), opmath=False):
    """``value`` as :func:`checked_scalar` converts it to ``dtype`` (``opmath``: to the type the op computes
    ``dtype`` in) where it is a Python or NumPy number (else ``value`` itself: a tensor keeps its graph);
    ArgumentError naming ``argument`` where torch refuses it ("value cannot be converted to type uint8_t
    without overflow"), instead of wrapping it silently.
    ``unchecked``: dtype names the op converts unchecked in torch (``where`` into float16: inf).

    >>> check_fits(-1, np.dtype(np.uint8), "masked_fill()", "value")
    np.uint8(255)
    """
    if not isinstance(value, (numbers.Number, np.generic)) or dtype_name(dtype) in unchecked:
        return value
    cast = checked_scalar(value, dtype, opmath)
    if isinstance(cast, tuple):
        raise ArgumentError(f"{where}: value cannot be converted to type {cast[1]} without overflow: argument "
                            f"{argument!r} is {value!r}, which the dtype {dtype} cannot hold",
                            argument=argument, value=value)
    return cast


def torch_int(value, dtype, where, argument, bool_data=False, wrap=True):
    """A Python or NumPy integer operand of a binary op with a result of ``dtype``, as torch takes it: wrapped
    into an integer ``dtype`` two's complement (``int8 + 300`` adds 44, ``uint8 < -1`` compares with 255), where
    NumPy would raise its OverflowError; ``wrap=False`` (``pow``'s exponent): checked as :func:`check_fits`.
    Refused past what torch converts (below -2**63, from 2**64 on), and from 2**63 on with bool data (torch's
    uint64 promotion).

    >>> torch_int(300, np.dtype(np.int8), "add()", "other"), torch_int(-1, np.dtype(np.uint8), "lt()", "other")
    (44, 255)
    """
    v = int(value)
    if dtype.kind in "iu":  # (the common case first: the number fits the dtype, nothing to convert)
        bits = 8 * dtype.itemsize
        low = -(1 << (bits - 1)) if dtype.kind == "i" else 0
        if low <= v < low + (1 << bits):
            return value
    elif -(1 << 63) <= v < 1 << 63:
        return value
    if not -(1 << 63) <= v < 1 << 64:
        raise ArgumentError(f"{where}: int too big to convert: argument {argument!r} is {value!r}, past the 64-bit "
                            f"integers torch converts", argument=argument, value=value)
    if v >= 1 << 63 and bool_data:
        raise DTypeError(f"{where}: Promotion for uint16, uint32, uint64 types is not supported, attempted to "
                         f"promote Bool and UInt64 (argument {argument!r} is {value!r})")
    if dtype.kind not in "iu" or (not wrap and v < 0):  # (a negative power of integers: NumPy's error, torch's words)
        return value
    if not wrap:
        return check_fits(v, dtype, where, argument)
    bits = 8 * dtype.itemsize
    v &= (1 << bits) - 1
    return v - (1 << bits) if dtype.kind == "i" and v >> (bits - 1) else v


def refused(op, dtype, what):
    """torch's refusal of ``op`` for data of ``dtype``, as a DTypeError (a TypeError, and a RuntimeError:
    torch raises a NotImplementedError, a RuntimeError)."""
    return DTypeError(f"\"{op}\" not implemented for '{torch_name(dtype)}': {op}() needs {what} data, got dtype "
                      f"{dtype}; cast it first")


def complex_refused(name, dtype):
    """torch's refusal of ``name`` for complex data (:data:`._tables.COMPLEX_REFUSALS`), as a DTypeError."""
    words = COMPLEX_REFUSALS[name].format(name)
    return DTypeError(f"{words} ({name}() of dtype {dtype})") if words else refused(name, dtype, "real (not complex)")
