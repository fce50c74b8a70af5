"""More of what torch 2.13's jagged layout runs, written with the table ops: ``polygamma`` (torch's argument
order, ``n`` first), ``ldexp``, ``isclose``, ``broadcast_to``, ``randint_like``, ``resolve_conj``, ``resolve_neg``,
torch.special's orthogonal polynomials (``_tables.POLYNOMIALS``) and ``rrelu`` (which torch's nested layouts
refuse: compared with torch on each component).

Each is one call on the buffer or a few table ops (every backend, autograd on torch), registered as
``ln.<name>``, the method and the torch names.
"""

import numbers

import numpy as np

from ..backend import backend_name_of, backend_of
from ..errors import ArgumentError, ShapeError
from ._broadcast import check_nested, not_implemented, same_backend, scalar_like
from ._dtypes import DEFAULT_FLOAT, kind_of, torch_name
from ._pointwise import _history_safe, _inplace, _unary_input, _wrap, binary, write_into
from ._registry import OP_TABLE, implements
from ._tables import POLYNOMIALS
from ._tensor import NestedTensor, _op

__all__ = ["polygamma", "ldexp", "isclose", "broadcast_to", "randint_like", "resolve_conj", "resolve_neg", "rrelu"]
__all__ += list(POLYNOMIALS)  # (torch.special's orthogonal polynomials, one op each)

_T = "torch.Tensor."


def polygamma(n, input):
    """The ``n``-th derivative of the digamma function, elementwise (``torch.polygamma(n, input)``);
    integers compute in float32, as torch's.

    >>> import lodtensor.nested as ln
    >>> out = ln.polygamma(1, ln.nested_tensor([[1.0, 2.0], [3.0]]))
    >>> [round(v, 4) for v in out.to_tensor_list()[0].tolist()]
    [1.6449, 0.6449]
    """
    check_nested(input, "polygamma()")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise ArgumentError(f"polygamma(n, x) does not support negative n, got n={n}", argument="n", value=n)
    buf = _unary_input("polygamma", "float", input)
    return _wrap(input, input.backend.pointwise("polygamma", "Tensor.polygamma", buf, int(n)))


def _polygamma_method(input, n):
    """``nt.polygamma(n)``: torch's method order, :func:`polygamma` ``(n, nt)``."""
    return polygamma(n, input)


def ldexp(input, other):
    """``input * 2 ** other`` elementwise, as torch's (integers give float32).

    >>> import lodtensor.nested as ln
    >>> ln.ldexp(ln.nested_tensor([[1.0, 3.0], [0.5]]), ln.nested_tensor([[1, 2], [3]])).to_tensor_list()[0].tolist()
    [2.0, 12.0]
    """
    if isinstance(other, NestedTensor) or backend_name_of(other) is None:
        return OP_TABLE["mul"](input, OP_TABLE["pow"](2.0, other))
    be = backend_of(other)  # a dense exponent (a 0-d tensor, or one that broadcasts): 2 ** other as torch's pow
    scale = be.pointwise("power", "pow", 2.0, other)  # (integers give the default float dtype, as torch's)
    return OP_TABLE["mul"](input, scale if kind_of(other.dtype) in "fc" else be.astype(scale, DEFAULT_FLOAT))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|input - other| <= atol + |rtol * other|`` elementwise, or equal (NaNs equal with ``equal_nan``), as
    torch's: ``other`` a tensor (nested of the same structure or dense) of ``input``'s dtype.

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> ln.isclose(a, a + 1e-7).to_tensor_list()[0].tolist(), ln.isclose(a, a + 1).to_tensor_list()[1].tolist()
    ([True, True], [False])
    """
    check_nested(input, "isclose()")
    number = scalar_like(other) is not None and not hasattr(other, "ndim")
    if number or not isinstance(other, NestedTensor) and getattr(other, "dtype", None) is None:  # None, str...
        raise TypeError(f"isclose(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    same_backend("isclose()", input._buffer, other._buffer if isinstance(other, NestedTensor) else other)
    if other.dtype != input.dtype:
        raise TypeError(f"{torch_name(input.dtype)} did not match {torch_name(other.dtype)}")
    for what, value in (("rtol", rtol), ("atol", atol)):
        if value < 0:
            raise ArgumentError(f"isclose(): {what} must be greater than or equal to zero, but got {value}",
                                argument=what, value=value)
    op = OP_TABLE
    if not isinstance(other, NestedTensor):  # a dense operand, broadcast once into input's structure
        other = op["add"](op["zeros_like"](input), other)
    close = op["eq"](input, other)
    kind = kind_of(input.dtype)
    if equal_nan and kind in "fc":
        close = op["logical_or"](close, op["logical_and"](op["isnan"](input), op["isnan"](other)))
    if rtol == 0 and atol == 0:
        return close
    a, b = (input, other) if kind in "fc" else (input.to(np.float32), other.to(np.float32))  # (bools as 0 and 1)
    actual = op["abs"](op["sub"](a, b))
    allowed = op["add"](op["abs"](op["mul"](b, rtol)), atol)
    return op["logical_or"](close, op["logical_and"](op["isfinite"](actual), op["le"](actual, allowed)))


def broadcast_to(input, size):
    """``input.expand(*size)`` (torch's jagged layout: the ragged dims kept, size-1 regular dims grown).

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([np.ones((2, 1)), np.ones((3, 1))], layout="jagged")
    >>> ln.broadcast_to(a, (2, -1, 4)).nested_size().tolist()
    [[2, 4], [3, 4]]
    """
    check_nested(input, "broadcast_to()")
    return OP_TABLE["expand"](input, *tuple(size))


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,
                 memory_format=None):
    """A nested tensor of ``input``'s structure (and dtype, unless ``dtype``) with integers uniform in
    ``[low, high)``; ``randint_like(input, high)`` as torch's.

    >>> import lodtensor.nested as ln
    >>> out = ln.randint_like(ln.nested_tensor([[1, 2], [3]]), 5)
    >>> out.nested_size().tolist(), bool(ln.all(out < 5)), out.dtype
    ([[2], [1]], True, dtype('int64'))
    """
    check_nested(input, "randint_like()")
    if high is None:
        low, high = 0, low
    if not high > low:
        raise ShapeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    uniform = OP_TABLE["rand_like"](input, dtype=np.float64, device=device)
    values = OP_TABLE["add"](OP_TABLE["floor"](OP_TABLE["mul"](uniform, high - low)), low)
    out = values.to(input.dtype if dtype is None else dtype)
    return out.requires_grad_() if requires_grad else out


def resolve_conj(input):
    """``input`` itself: a nested tensor is never a lazily conjugated view (torch returns ``self`` then).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> ln.resolve_conj(nt) is nt
    True
    """
    check_nested(input, "resolve_conj()")
    return input


def resolve_neg(input):
    """``input`` itself: a nested tensor is never a lazily negated view (torch returns ``self`` then).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])
    >>> ln.resolve_neg(nt) is nt
    True
    """
    check_nested(input, "resolve_neg()")
    return input


def _make_polynomial(name):
    def op(x, n):
        return binary(name, x, n)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"``torch.special.{name}(x, n)``: the polynomial of degree ``n`` at ``x``, elementwise, torch 2.13's "
        f"algorithm on every backend. ``x`` and ``n``: nested tensors of one structure, scalars or dense arrays "
        f"(at least one nested); integers compute in float32, float16 is refused (as torch's CPU kernels); "
        f"``n`` is truncated to an integer, and a negative or non-finite one gives 0. torch's strided layout "
        f"raises NotImplementedError for it; this is its jagged layout's result, on both layouts.\n\n"
        f">>> import lodtensor.nested as ln\n"
        f">>> out = ln.{name}(ln.nested_tensor([[1, 2], [3]]), 2)\n"
        f">>> out.nested_size().tolist(), out.dtype\n([[2], [1]], dtype('float32'))\n"
    )
    return op


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU (``torch.nn.functional.rrelu``): ``x`` where ``x > 0``, else ``x * a`` with ``a``
    the mean slope ``(lower + upper) / 2`` (``training=False``) or drawn per element, uniform in ``[lower,
    upper)`` (``training=True``: torch's random state on torch data, the library's global one on NumPy and CuPy
    data). Floating point data only; ``lower > upper`` is refused. torch 2.13's nested layouts refuse rrelu
    (NotImplementedError); the result here is torch's ``F.rrelu`` on every component.

    >>> import lodtensor.nested as ln
    >>> ln.rrelu(ln.nested_tensor([[2.0, -1.0], [-3.0]]), 0.1, 0.3).to_tensor_list()[0].tolist()
    [2.0, -0.20000000298023224]
    """
    return _rrelu(input, lower, upper, training, None, inplace)


def _torch_rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``'s signature (its fifth argument is a ``generator``, for torch data; no ``inplace``)."""
    return _rrelu(input, lower, upper, training, generator, False)


def _rrelu(input, lower, upper, training, generator, inplace):
    check_nested(input, "rrelu()")
    for key, value in (("lower", lower), ("upper", upper)):  # (the NumPy formula would fail on them unnamed)
        if not (isinstance(value, numbers.Real) or scalar_like(value) is not None and kind_of(value.dtype) in "biuf"):
            raise TypeError(f"rrelu(): argument {key!r} must be a real number, got {type(value).__name__} {value!r}")
    if lower > upper:  # (torch's RuntimeError names neither bound)
        raise ArgumentError(f"rrelu(): Lower bound should be less than or equal to the upper bound, got "
                            f"lower={lower}, upper={upper}", argument="lower", value=lower)
    if kind_of(input.dtype) == "c":  # torch's leaky_relu kernel refuses complex data (NumPy would compare them)
        raise not_implemented("rrelu", input, "real floating point")
    src = _history_safe(input, ())[0] if inplace else input
    buf = _unary_input("rrelu", "fp", src)
    kwargs = {"lower": lower, "upper": upper, "training": bool(training)}
    if generator is not None:
        kwargs["generator"] = generator
    out = _wrap(src, src.backend.pointwise("rrelu", "rrelu", buf, **kwargs))
    return write_into(input, out, "rrelu(inplace=True)") if inplace else out


for _name in POLYNOMIALS:
    globals()[_name] = implements(_name, "torch.special." + _name)(_make_polynomial(_name))
implements("rrelu", "torch.nn.functional.rrelu")(rrelu)
implements("torch_rrelu", "torch.rrelu")(_torch_rrelu)
implements("rrelu_", "torch.rrelu_", "torch.nn.functional.rrelu_")(_inplace("rrelu", _torch_rrelu))
implements("polygamma", "torch.polygamma", "torch.special.polygamma")(polygamma)
implements("polygamma_method", _T + "polygamma")(_polygamma_method)
implements("polygamma_", _T + "polygamma_")(_inplace("polygamma", _polygamma_method))
NestedTensor.polygamma = _op("polygamma_method")
NestedTensor.polygamma_ = _op("polygamma_")
implements("ldexp", "torch.ldexp", _T + "ldexp")(ldexp)
implements("ldexp_", _T + "ldexp_", "torch.ldexp_")(_inplace("ldexp", ldexp))
implements("isclose", "torch.isclose", _T + "isclose")(isclose)
implements("broadcast_to", "torch.broadcast_to", _T + "broadcast_to")(broadcast_to)
implements("randint_like", "torch.randint_like")(randint_like)
implements("resolve_conj", "torch.resolve_conj", _T + "resolve_conj")(resolve_conj)
implements("resolve_neg", "torch.resolve_neg", _T + "resolve_neg")(resolve_neg)
