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

__all__ = ["kind_of", "torch_name", "resolve_dtype", "promote", "check_requires_grad", "check_alpha", "checked_scalar",
           "check_fits"]

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
    float32) and equal categories widen as in NumPy.

    >>> promote(np.float32, np.float64(0.5)), promote(np.int32, 0.5), promote(np.int32, np.array(0.5))
    (dtype('float32'), dtype('float32'), dtype('float64'))
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
        return np.dtype(np.complex128) if a == np.float64 else DEFAULT_COMPLEX
    zero_dim = not isinstance(b, np.dtype) and len(getattr(b, "shape", (1,))) == 0
    b = np.dtype(getattr(b, "dtype", b))
    cat_a, cat_b = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if zero_dim:
        return a if cat_b <= cat_a else b
    if cat_a != cat_b and max(cat_a, cat_b) <= 2:
        return a if cat_a > cat_b else b
    return np.result_type(a, b)


def check_alpha(operands, alpha):
    """``add``/``sub``'s ``alpha`` as torch takes it: the result dtype is the operands' alone, ``alpha`` is cast to
    it (a bool for a bool result: nonzero is True); a bool ``alpha`` needs a bool result, a float one a floating
    result, a complex one a complex result (torch's ``alpha_check``). Returns ``alpha`` (None stays None)."""
    if alpha is None:
        return None
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
    return bool(alpha) if kinds == {"b"} else alpha


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
    if dtype.kind == "f":
        try:
            v = float(v)
        except OverflowError:  # a Python int past a double
            return refused
        return refused if math.isfinite(v) and abs(v) > float(np.finfo(dtype).max) else dtype.type(v)
    return dtype.type(v)


def check_fits(value, dtype, where, argument, unchecked=()):
    """``value`` as :func:`checked_scalar` converts it to ``dtype`` where it is a Python or NumPy number (else
    ``value`` itself: a tensor keeps its graph); ArgumentError naming ``argument`` where torch refuses it
    ("value cannot be converted to type uint8_t without overflow"), instead of wrapping it silently.
    ``unchecked``: dtype names the op converts unchecked in torch (``where`` into float16: inf)."""
    if not isinstance(value, (numbers.Number, np.generic)) or dtype_name(dtype) in unchecked:
        return value
    cast = checked_scalar(value, dtype)
    if isinstance(cast, tuple):
        raise ArgumentError(f"{where}: value cannot be converted to type {cast[1]} without overflow: argument "
                            f"{argument!r} is {value!r}, which the dtype {dtype} cannot hold",
                            argument=argument, value=value)
    return cast
