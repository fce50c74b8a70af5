"""Elementwise ops, comparisons, masked_fill, dropout, clone/detach and the ``*_like`` factories.

Every one is a single call on the flat buffer, whatever the raggedness: the
components are contiguous and in order, so the buffer *is* the elementwise
domain. Results share the input's Structure (sizes, offsets, cached facts).
"""

import numbers

import numpy as np

from ..backend import backend_name_of, backend_of
from ..errors import BackendMismatchError
from ._dtypes import kind_of, promote, resolve_dtype, torch_name
from ._registry import implements
from ._tensor import NestedTensor, make

__all__ = [
    "add", "sub", "mul", "div", "pow", "neg", "abs", "sgn", "logical_not", "relu", "gelu", "silu",
    "masked_fill", "dropout", "clone", "detach", "empty_like", "zeros_like", "randn_like",
]

_T = "torch.Tensor."
_F = "torch.nn.functional."


def same_backend(where, *arrays):
    """The backend shared by ``arrays``; a nested-tensor hint when they differ."""
    try:
        return backend_of(*arrays)
    except BackendMismatchError as err:
        names = sorted({backend_name_of(a) for a in arrays} - {None})
        raise BackendMismatchError(
            f"{where}: cannot combine {names[0]!r} and {names[1]!r} data; convert the nested tensor "
            f"with .to_torch() / .numpy() or the other argument to its library first"
        ) from err


def check_nested(x, where, name="input"):
    if not isinstance(x, NestedTensor):
        raise TypeError(f"{where}: {name} must be a NestedTensor, got {type(x).__name__}")
    return x


def _not_implemented(op, nt, allowed="floating point"):
    dtype = nt._buffer.dtype
    return TypeError(
        f'"{op}" not implemented for \'{torch_name(dtype)}\': {op}() needs {allowed} data, got dtype '
        f"{dtype}; cast it first"
    )


# -- binary ---------------------------------------------------------------------------------
def _scalar_like(x):
    """``x`` as a scalar operand (Python/NumPy number or 0-d array), or None when it is not one."""
    if isinstance(x, (bool, numbers.Number, np.generic)):
        return x
    if backend_name_of(x) is not None and x.ndim == 0:
        return x
    return None


def _operands(name, a, b):
    """(nested, other, nested_first, other_is_nested) with torch's checks; ``other`` a buffer or scalar."""
    if isinstance(a, NestedTensor):
        nt, other, first = a, b, True
    else:
        nt, other, first = b, a, False
    if isinstance(other, NestedTensor):
        if not nt._struct.same_as(other._struct):
            raise ValueError(
                f"{name} does not support broadcasting when given a NestedTensor: the nested "
                f"structures differ ({_describe(nt)} vs {_describe(other)})"
            )
        same_backend(name, nt._buffer, other._buffer)
        return nt, other._buffer, first, True
    scalar = _scalar_like(other)
    if scalar is None:
        what = f"a dense array of shape {tuple(other.shape)}" if hasattr(other, "shape") else type(other).__name__
        raise ValueError(
            f"{name}: Expected both self and other to be nested, but got a nested self and non-nested "
            f"other ({what}); {name} does not support broadcasting when given a NestedTensor: combine "
            f"nested tensors of the same nested structure, or a nested tensor and a scalar"
        )
    if backend_name_of(scalar) is not None:
        same_backend(name, nt._buffer, scalar)
    return nt, scalar, first, False


def _describe(nt):
    st = nt._struct
    return f"{st.n} components of rank {st.rank}" if st.sizes.shape != (st.n, st.rank) or st.n > 4 else (
        f"sizes {st.sizes.tolist()}"
    )


def _binary(name, ufunc, a, b, *, true_div=False):
    nt, other, first, _ = _operands(name, a, b)
    buf = nt._buffer
    ops = nt.backend
    dtype = result_dtype(ops, buf.dtype, other, true_div=true_div)
    args = (buf, other) if first else (other, buf)
    return make(ops.binary(ufunc, *args, dtype=dtype), nt._struct, nt._layout)


def result_dtype(be, dtype, other, *, true_div=False):
    """torch's result dtype for ``array(dtype) <op> other`` on ``be`` (None: the library follows torch itself)."""
    if be.follows_torch_promotion:
        return None
    out = promote(dtype, other)
    if true_div and out.kind not in "fc":
        return np.dtype(np.float32)
    return out


def _check_bool_sub(a, b):
    kinds = [kind_of(x._buffer.dtype) if isinstance(x, NestedTensor) else ("b" if isinstance(x, (bool, np.bool_)) else
             kind_of(x.dtype) if hasattr(x, "dtype") else "f") for x in (a, b)]
    if kinds == ["b", "b"]:
        raise TypeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
            "`logical_xor()` operator instead."
        )


def _scaled(other, alpha, where):
    if alpha is None or alpha == 1:
        return other
    if isinstance(other, NestedTensor):
        return mul(other, alpha)
    return other * alpha


@implements("pow", "torch.pow", _T + "pow", _T + "__pow__", _T + "__rpow__")
def pow(input, exponent):  # noqa: A001 - torch's name
    """Elementwise ``input ** exponent``: nested with nested (same structure) or with a scalar,
    either side; torch's dtype rules (an integer to a float power is float).

    >>> import lodtensor.nested as ln
    >>> (ln.nested_tensor([[1, 2], [3]]) ** 2).to_tensor_list()
    [array([1, 4]), array([9])]
    """
    return _binary("pow", "power", input, exponent)


@implements("add", "torch.add", _T + "add", _T + "__add__", _T + "__radd__")
def add(input, other, *, alpha=1):
    """Elementwise ``input + alpha * other``: nested with nested (same structure) or with a scalar.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1, 2], [3]])
    >>> (nt + 10).to_tensor_list()
    [array([11, 12]), array([13])]
    >>> (nt + nt).to_padded_tensor(0).tolist()
    [[2, 4], [6, 0]]
    """
    return _binary("add", "add", input, _scaled(other, alpha, "add"))


@implements("sub", "torch.sub", "torch.subtract", _T + "sub", _T + "__sub__")
def sub(input, other, *, alpha=1):
    """Elementwise ``input - alpha * other`` (nested and nested, or nested and scalar)."""
    _check_bool_sub(input, other)
    return _binary("sub", "subtract", input, _scaled(other, alpha, "sub"))


@implements("rsub", _T + "__rsub__")
def _rsub(input, other):
    return sub(other, input)


@implements("mul", "torch.mul", "torch.multiply", _T + "mul", _T + "__mul__", _T + "__rmul__")
def mul(input, other):
    """Elementwise product (nested and nested, or nested and scalar)."""
    return _binary("mul", "multiply", input, other)


@implements("div", "torch.div", "torch.true_divide", _T + "div", _T + "__truediv__")
def div(input, other):
    """Elementwise true division; integer operands give float32, as in torch."""
    return _binary("div", "true_divide", input, other, true_div=True)


@implements("rdiv", _T + "__rtruediv__")
def _rdiv(input, other):
    return div(other, input)


def _compare(name, ufunc):
    def compare(input, other):
        nt, value, first, _ = _operands(name, input, other)
        args = (nt._buffer, value) if first else (value, nt._buffer)
        return make(nt.backend.binary(ufunc, *args, dtype=None), nt._struct, nt._layout)

    compare.__name__ = name
    compare.__doc__ = f"Elementwise ``{name}`` comparison (nested and nested, or nested and scalar); bool result."
    return compare


eq = implements("eq", "torch.eq", _T + "eq", _T + "__eq__")(_compare("eq", "equal"))
ne = implements("ne", "torch.ne", _T + "ne", _T + "__ne__")(_compare("ne", "not_equal"))
lt = implements("lt", "torch.lt", _T + "lt", _T + "__lt__")(_compare("lt", "less"))
le = implements("le", "torch.le", _T + "le", _T + "__le__")(_compare("le", "less_equal"))
gt = implements("gt", "torch.gt", _T + "gt", _T + "__gt__")(_compare("gt", "greater"))
ge = implements("ge", "torch.ge", _T + "ge", _T + "__ge__")(_compare("ge", "greater_equal"))


# -- unary ----------------------------------------------------------------------------------
def _unary(nt, out, inplace=False):
    """``out`` (a flat buffer) as a nested tensor of ``nt``'s structure; with ``inplace``,
    written into ``nt`` itself, which is returned (torch's ``inplace=True``)."""
    if inplace:
        nt._buffer[...] = out  # torch: a copy_ that autograd records (and refuses on a leaf, as torch does)
        return nt
    return make(out, nt._struct, nt._layout)


@implements("neg", "torch.neg", "torch.negative", _T + "neg", _T + "__neg__")
def neg(input):
    """Elementwise negation."""
    check_nested(input, "neg()")
    if kind_of(input._buffer.dtype) == "b":
        raise TypeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return _unary(input, input.backend.xp.negative(input._buffer))


@implements("abs", "torch.abs", "torch.absolute", _T + "abs", _T + "__abs__")
def abs(input):  # noqa: A001 - torch's name
    """Elementwise absolute value."""
    check_nested(input, "abs()")
    if kind_of(input._buffer.dtype) == "b":
        raise _not_implemented("abs", input, "numeric (not bool)")
    return _unary(input, input.backend.xp.abs(input._buffer))


@implements("sgn", "torch.sgn", _T + "sgn")
def sgn(input):
    """Elementwise sign (``x / |x|`` for complex values, 0 at 0)."""
    check_nested(input, "sgn()")
    return _unary(input, input.backend.sgn(input._buffer))


@implements("logical_not", "torch.logical_not", _T + "logical_not", _T + "__invert__")
def logical_not(input):
    """Elementwise logical not; a bool result."""
    check_nested(input, "logical_not()")
    return _unary(input, input.backend.xp.logical_not(input._buffer))


@implements("relu", "torch.relu", _F + "relu", _T + "relu")
def relu(input, inplace=False):
    """Elementwise ``max(x, 0)``, one call on the flat buffer (threaded for large NumPy buffers);
    ``inplace=True`` writes the result into ``input`` and returns it."""
    check_nested(input, "relu()")
    if kind_of(input._buffer.dtype) == "b":
        raise TypeError("Boolean inputs not supported for relu")
    return _unary(input, input.backend.relu(input._buffer), inplace)


@implements("gelu", _F + "gelu")
def gelu(input, approximate="none"):
    """Elementwise GELU (exact erf form, or ``approximate='tanh'``), one pass over the flat buffer."""
    check_nested(input, "gelu()")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    if kind_of(input._buffer.dtype) != "f":
        raise _not_implemented("GeluKernelImpl", input)
    return _unary(input, input.backend.gelu(input._buffer, approximate))


@implements("silu", _F + "silu")
def silu(input, inplace=False):
    """Elementwise SiLU, ``x * sigmoid(x)``; ``inplace=True`` writes into ``input`` and returns it."""
    check_nested(input, "silu()")
    if kind_of(input._buffer.dtype) != "f":
        raise _not_implemented("silu_cpu", input)
    return _unary(input, input.backend.silu(input._buffer), inplace)


# -- masks, dropout, copies -----------------------------------------------------------------
@implements("masked_fill", "torch.masked_fill", _T + "masked_fill")
def masked_fill(input, mask, value):
    """A copy of ``input`` with ``value`` where ``mask`` (a bool nested tensor of the same structure,
    or a bool scalar) is True.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, -2.0], [-3.0]])
    >>> nt.masked_fill(nt < 0, 0.0).to_tensor_list()
    [array([1., 0.], dtype=float32), array([0.], dtype=float32)]
    """
    check_nested(input, "masked_fill()")
    if isinstance(mask, NestedTensor):
        if not input._struct.same_as(mask._struct):
            raise ValueError(
                f"masked_fill does not support broadcasting when given a NestedTensor: the mask's "
                f"nested structure differs ({_describe(mask)} vs {_describe(input)})"
            )
        m = mask._buffer
        same_backend("masked_fill()", input._buffer, m)
    else:
        m = _scalar_like(mask)
        if m is None:
            raise ValueError(
                "masked_fill(): Expected both self and other to be nested, but got a nested self and "
                "non-nested other; pass a nested bool mask of the same structure or a bool scalar"
            )
    mdtype = getattr(m, "dtype", np.dtype(bool) if isinstance(m, (bool, np.bool_)) else np.asarray(m).dtype)
    if kind_of(mdtype) != "b":
        raise TypeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mdtype}")
    value = _scalar_like(value)
    if value is None:
        raise TypeError("masked_fill(): value must be a scalar (a number or a 0-d array)")
    buf = input._buffer
    ops = input.backend
    if isinstance(m, (bool, np.bool_)):
        out = ops.full(tuple(buf.shape), value, buf.dtype, buf) if m else ops.clone(buf)
    else:
        out = ops.where(m, value, buf) if not hasattr(value, "shape") else ops.where(m, value, buf)
        out = ops.astype(out, buf.dtype)
    return make(out, input._struct, input._layout)


@implements("dropout", _F + "dropout", "torch.dropout")
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (when training).

    NumPy data draws from NumPy's global random state (``np.random.seed``
    applies), torch data from torch's. ``training=False`` returns ``input``.
    """
    check_nested(input, "dropout()")
    if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if kind_of(input._buffer.dtype) not in "fc":
        raise _not_implemented("dropout", input)
    if not training or p == 0:
        return input
    out = input.backend.dropout(input._buffer, p, inplace)
    return input if inplace else make(out, input._struct, input._layout)


@implements("clone", "torch.clone", _T + "clone")
def clone(input, *, memory_format=None):
    """A copy with its own buffer (keeps autograd history on torch)."""
    check_nested(input, "clone()")
    return make(input.backend.clone(input._buffer), input._struct, input._layout)


@implements("detach", "torch.detach", _T + "detach")
def detach(input):
    """The same data without autograd history (shares the buffer)."""
    check_nested(input, "detach()")
    return make(input.backend.detach(input._buffer), input._struct, input._layout)


def _like(where, input, dtype, device, requires_grad, fill):
    from ._construct import _place, check_requires_grad  # noqa: PLC0415 - avoids an import cycle

    check_nested(input, where)
    buf = input._buffer
    target = resolve_dtype(dtype, input.backend.name) or buf.dtype
    ops = input.backend
    out = fill(ops, (int(buf.shape[0]),), target, buf)
    out = _place(out, device)
    check_requires_grad(out, requires_grad, where)
    if requires_grad:
        out.requires_grad_(True)
    return make(out, input._struct, input._layout)


@implements("empty_like", "torch.empty_like")
def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure with uninitialised values."""
    return _like("empty_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.empty(s, d, b))


@implements("zeros_like", "torch.zeros_like")
def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure filled with zeros."""
    return _like("zeros_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.zeros(s, d, b))


@implements("randn_like", "torch.randn_like")
def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """A nested tensor of the same structure with standard normal values (floating dtypes only)."""
    target = resolve_dtype(dtype, input.backend.name) if isinstance(input, NestedTensor) else None
    if isinstance(input, NestedTensor) and kind_of(target or input._buffer.dtype) not in "fc":
        raise _not_implemented("normal_kernel_cpu", input)
    return _like("randn_like()", input, dtype, device, requires_grad, lambda o, s, d, b: o.randn(s, d, b))
