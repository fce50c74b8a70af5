"""Pointwise ops torch 2.13's jagged layout runs that the tables do not spell: ``clamp_min``/``clamp_max``,
``lerp``, ``float_power``, ``heaviside``, ``gcd``/``lcm``, ``frexp``, ``softmin``, ``fill``,
``view_as``, ``expand_as``, ``is_same_size``, unary ``+`` and the method spellings of the tables' aliases
(``nt.clip``, ``nt.arccos``, ``nt.subtract``...).

Each is written with the table ops (so every backend runs it, with autograd on
torch) and registered as ``ln.<name>``, the method and the torch names.
"""

import collections
import numbers

import numpy as np

from ..errors import DTypeError, ShapeError
from ._broadcast import check_nested, not_implemented, scalar_like
from ._dtypes import kind_of, torch_name
from ._pointwise import _inplace, binary, clamp, div, where
from ._registry import OP_TABLE, implements
from ._structure import implicit_dim
from ._tables import ALIASES
from ._tensor import NestedTensor, _op, make_view

__all__ = [
    "clamp_min",
    "clamp_max",
    "lerp",
    "float_power",
    "floor_divide",
    "heaviside",
    "gcd",
    "lcm",
    "frexp",
    "softmin",
    "fill",
    "view_as",
    "expand_as",
    "is_same_size",
]

_T = "torch.Tensor."
_F = "torch.nn.functional."


def _register(name, fn, *paths, inplace=True):
    op = implements(name, *paths)(fn)
    if inplace:
        implements(f"{name}_", f"torch.{name}_", f"{_T}{name}_")(_inplace(name, fn))
    return op


def _dtype_of(x):
    if isinstance(x, NestedTensor):
        return x.dtype
    return getattr(x, "dtype", None)


def clamp_min(input, min):  # noqa: A002 - torch's names
    """``clamp(input, min=min)``.

    >>> import lodtensor.nested as ln
    >>> ln.clamp_min(ln.nested_tensor([[-1.0, 2.0], [3.0]]), 0.0).to_tensor_list()[0].tolist()
    [0.0, 2.0]
    """
    return clamp(input, min, None)


def clamp_max(input, max):  # noqa: A002 - torch's names
    """``clamp(input, max=max)``.

    >>> import lodtensor.nested as ln
    >>> ln.clamp_max(ln.nested_tensor([[-1.0, 2.0], [3.0]]), 0.0).to_tensor_list()[0].tolist()
    [-1.0, 0.0]
    """
    return clamp(input, None, max)


def lerp(input, end, weight):
    """``input + weight * (end - input)``, computed as torch does (from ``end`` when ``|weight| >= 0.5``);
    floating operands of one dtype, ``weight`` a scalar or a nested/dense operand.

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([[0.0, 1.0], [2.0]])
    >>> ln.lerp(a, a + 2, 0.25).to_tensor_list()[0].tolist()
    [0.5, 1.5]
    """
    check_nested(input, "lerp()")
    if kind_of(input.dtype) not in "fc":
        raise not_implemented("lerp_kernel_scalar", input)
    for name, x in (("end", end), ("weight", weight)):
        dtype = _dtype_of(x)
        if dtype is not None and getattr(x, "ndim", 1) and dtype != input.dtype:
            raise TypeError(f"lerp(): expected dtype {input.dtype} for `{name}` but got dtype {dtype}")
    diff = binary("sub", end, input)
    w = scalar_like(weight)
    if w is not None and not hasattr(w, "ndim"):  # a Python/NumPy number: one branch
        if abs(w) < 0.5:
            return binary("add", input, binary("mul", diff, w))
        return binary("sub", end, binary("mul", diff, 1 - w))
    low = binary("add", input, binary("mul", diff, weight))
    nested = isinstance(weight, NestedTensor)  # (a dense weight: its own library's operators, no nested operand)
    high = binary("sub", end, binary("mul", diff, binary("sub", 1, weight) if nested else 1 - weight))
    return where(binary("lt", weight.abs(), 0.5) if nested else abs(weight) < 0.5, low, high)


def float_power(input, exponent):
    """``input ** exponent`` in double precision (complex128 when an operand is complex), as torch's.

    >>> import lodtensor.nested as ln
    >>> ln.float_power(ln.nested_tensor([[1, 2], [3]]), 2).to_tensor_list()[1].tolist()
    [9.0]
    """
    return binary("float_power", _double(input), _double(exponent))


def _double(x):
    if isinstance(x, NestedTensor):
        want = np.complex128 if kind_of(x.dtype) == "c" else np.float64
        buf = x._buf
        return make_view(x.backend.astype(buf, want), x._st, x._perm, x._layout)
    if scalar_like(x) is not None and not hasattr(x, "ndim"):
        return complex(x) if isinstance(x, complex) else float(x)
    return x  # a dense array: its dtype meets the nested operand's float64


def floor_divide(input, other):
    """``input // other``: ``div(input, other, rounding_mode='floor')``, as torch's ``floor_divide`` (its jagged
    layout has no kernel for it); also ``nt // x``, ``x // nt`` and ``nt //= x``.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[7, -7], [3]])
    >>> ln.floor_divide(nt, 2).to_tensor_list()[0].tolist(), (nt // 2).to_tensor_list()[1].tolist()
    ([3, -4], [1])
    """
    return div(input, other, rounding_mode="floor")


def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``input > 0`` and ``values`` where it is 0; ``values`` a tensor
    (nested or dense) of ``input``'s dtype, as torch requires.

    >>> import lodtensor.nested as ln
    >>> x = ln.nested_tensor([[-1.0, 0.0], [2.0]])
    >>> ln.heaviside(x, ln.full_like(x, 0.5)).to_tensor_list()[0].tolist()
    [0.0, 0.5]
    """
    if scalar_like(values) is not None and not hasattr(values, "ndim"):
        raise TypeError(f"heaviside(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    if _dtype_of(input) != _dtype_of(values):
        raise TypeError("heaviside is not yet implemented for tensors with different dtypes.")
    return binary("heaviside", input, values)


def _integer_binary(name):
    def op(input, other):
        for x in (input, other):
            dtype = _dtype_of(x)
            kind = (
                kind_of(dtype)
                if dtype is not None
                else ("b" if isinstance(x, bool) else "i" if isinstance(x, numbers.Integral) else "f")
            )
            if kind not in "iu" and dtype is not None:  # (torch: a NotImplementedError, a RuntimeError)
                raise DTypeError(f'"{name}_cpu" not implemented for \'{torch_name(dtype)}\': {name}() needs '
                                 f'integer data, got dtype {dtype}')
            if kind not in "iu":
                raise TypeError(f'"{name}_cpu" not implemented for {type(x).__name__}: {name}() needs integer data')
        return binary(name, input, other)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"Elementwise ``torch.{name}`` of integer tensors (nested or dense; no Python scalar, as "
        f"torch).\n\n"
        f">>> import lodtensor.nested as ln\n"
        f">>> nt = ln.nested_tensor([[4, 6], [9]])\n"
        f">>> ln.{name}(nt, ln.full_like(nt, 6)).to_tensor_list()[0].tolist()\n"
        f"{[int(getattr(np, name)(4, 6)), int(getattr(np, name)(6, 6))]}\n"
    )
    return op


gcd = _integer_binary("gcd")
lcm = _integer_binary("lcm")

#: what ``frexp`` returns, as torch.return_types.frexp
Frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input):
    """``(mantissa, exponent)`` with ``input == mantissa * 2 ** exponent`` (int32 exponents); floating input.

    >>> import lodtensor.nested as ln
    >>> m, e = ln.frexp(ln.nested_tensor([[8.0, 0.5], [3.0]]))
    >>> m.to_tensor_list()[0].tolist(), e.to_tensor_list()[0].tolist()
    ([0.5, 0.5], [4, 0])
    """
    check_nested(input, "frexp()")
    if kind_of(input.dtype) != "f":
        raise TypeError("torch.frexp() only supports floating-point dtypes")
    mantissa, exponent = input.backend.pointwise("frexp", "frexp", input._buf)
    exponent = input.backend.astype(exponent, np.int32)
    return Frexp(*(make_view(x, input._st, input._perm, input._layout) for x in (mantissa, exponent)))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)``: any dim but 0, as :func:`softmax`.

    >>> import lodtensor.nested as ln
    >>> ln.softmin(ln.nested_tensor([[0.0, 0.0], [1.0]]), -1).to_tensor_list()[0].tolist()
    [0.5, 0.5]
    """
    check_nested(input, "softmin()")
    if dim is None:  # torch's legacy implicit dim, warned about under softmin's name
        dim = implicit_dim("softmin", input.dim())
    return OP_TABLE["softmax"](OP_TABLE["neg"](input), dim, dtype=dtype)


def fill(input, value):
    """A nested tensor of ``input``'s structure and dtype, every element ``value`` (out of place).

    >>> import lodtensor.nested as ln
    >>> ln.fill(ln.nested_tensor([[1, 2], [3]]), 7).to_tensor_list()
    [array([7, 7]), array([7])]
    """
    check_nested(input, "fill()")
    if scalar_like(value) is None:
        raise TypeError(f"fill(): value must be a number or a 0-d array, got {type(value).__name__}")
    return OP_TABLE["masked_fill"](input, True, value)  # on torch's graph: a zero gradient for input


def _keep_dtype(input, out):
    if out.dtype == input.dtype:
        return out
    return make_view(input.backend.astype(out._buf, input.dtype), out._st, out._perm, out._layout)


def view_as(input, other):
    """``input.view(other.shape)``: ``other`` a nested tensor (or a dense array when ``input`` is regular).

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([np.ones((2, 4)), np.ones((3, 4))])
    >>> a.view_as(a.unflatten(-1, [2, 2])).nested_size().tolist()
    [[2, 2, 2], [3, 2, 2]]
    """
    check_nested(input, "view_as()")
    if not isinstance(other, NestedTensor):
        raise ShapeError(f"view_as(): other must be a NestedTensor of the same components, got {type(other).__name__}")
    return OP_TABLE["view"](input, tuple(other.shape))


def expand_as(input, other):
    """``input.expand(other.shape)``: ``other`` a nested tensor whose ragged dims match ``input``'s.

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([np.ones((2, 1)), np.ones((3, 1))], layout="jagged")
    >>> a.expand_as(ln.zeros_like(a).expand(-1, -1, 4)).nested_size().tolist()
    [[2, 4], [3, 4]]
    """
    check_nested(input, "expand_as()")
    if not isinstance(other, NestedTensor):
        raise ShapeError(f"expand_as(): other must be a NestedTensor, got {type(other).__name__}")
    return OP_TABLE["expand"](input, *other.shape)


def is_same_size(input, other):
    """True when ``other`` is a nested tensor with the same component sizes.

    >>> import lodtensor.nested as ln
    >>> a = ln.nested_tensor([[1, 2], [3]])
    >>> a.is_same_size(a + 1), a.is_same_size(ln.nested_tensor([[1], [3]]))
    (True, False)
    """
    check_nested(input, "is_same_size()")
    if not isinstance(other, NestedTensor):
        raise ShapeError("is_same_size(): expected both self and other to be nested tensors")
    return input._struct.same_as(other._struct)


_register("clamp_min", clamp_min, "torch.clamp_min", _T + "clamp_min")
_register("clamp_max", clamp_max, "torch.clamp_max", _T + "clamp_max")
_register("lerp", lerp, "torch.lerp", _T + "lerp")
_register("float_power", float_power, "torch.float_power", _T + "float_power")
_register("floor_divide", floor_divide, "torch.floor_divide", _T + "floor_divide")
_register("heaviside", heaviside, "torch.heaviside", _T + "heaviside")
_register("gcd", gcd, "torch.gcd", _T + "gcd")
_register("lcm", lcm, "torch.lcm", _T + "lcm")
_register("frexp", frexp, "torch.frexp", _T + "frexp", inplace=False)
_register("softmin", softmin, _F + "softmin", inplace=False)
_register("fill", fill, "torch.fill", inplace=False)
_register("view_as", view_as, _T + "view_as", inplace=False)
_register("expand_as", expand_as, _T + "expand_as", inplace=False)
_register("is_same_size", is_same_size, _T + "is_same_size", inplace=False)


def _method_aliases():
    """The tables' torch aliases as methods too (``nt.clip(...)``, ``nt.arccos()``, ``nt.subtract(...)``)."""
    for name, aliases in ALIASES.items():
        for alias in aliases:
            if "." in alias or alias.startswith("__") or hasattr(NestedTensor, alias):
                continue
            setattr(NestedTensor, alias, getattr(NestedTensor, name, None) or _op(name))
            if hasattr(NestedTensor, f"{name}_") and not hasattr(NestedTensor, f"{alias}_"):
                setattr(NestedTensor, f"{alias}_", getattr(NestedTensor, f"{name}_"))


NestedTensor.__pos__ = _op("positive")
