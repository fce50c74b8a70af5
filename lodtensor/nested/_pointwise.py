"""Every pointwise op, declared in tables: one generic implementation per shape of op.

A pointwise op is one call on the flat buffer (or, with a dense operand, on
the buffer viewed as ``(rows, *regular tail)``), whatever the raggedness: the
components lie one after another, so the buffer *is* the elementwise domain.
The tables give each op's NumPy spelling, torch spelling and dtype rule; the
backend (``be.pointwise``) runs the one it speaks. Every op is registered as
``ln.<name>``, a ``NestedTensor`` method, ``torch.<name>`` /
``torch.Tensor.<name>`` / ``torch.nn.functional.<name>`` through
``__torch_function__``, and an in-place ``<name>_``.
"""

import functools
import numbers

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from . import _holes as holes
from . import _tables as tables
from ._broadcast import align, check_nested, scalar_like
from ._dtypes import (
    _CATEGORY,
    DEFAULT_FLOAT,
    check_alpha,
    check_fits,
    complex_refused,
    kind_of,
    number_dtype,
    promote,
    refused,
    torch_int,
    torch_name,
)
from ._registry import OP_TABLE, implements
from ._tables import _REQUIRED, _SPECS, ALIASES, ARG_RULES, BINARY, SCALAR_ARGS, UNARY, _bind, _params
from ._tensor import NestedTensor, make_view, same_layout
from ._views import through_copies, window_in

_NAMESPACES = ("torch.", "torch.Tensor.", "torch.special.", "torch.nn.functional.")
__all__ = ["UNARY", "BINARY", "where", "clamp", "array_ufunc", "binary", "write_into"]  # + every table op


def _torch_paths(name):
    names = (name, *ALIASES.get(name, ()))
    return tuple(ns + n for n in names for ns in _NAMESPACES if not (n.startswith("__") and ns != "torch.Tensor."))


def _unary_input(name, rule, nt):
    """The buffer (storage: elementwise ops do not care how it is viewed) ready for the library call:
    refused or cast to float32 as torch would."""
    buf = nt._buf
    kind = kind_of(buf.dtype)
    if rule in ("int", "fpi", "real") and kind == "b":
        if name in tables.BOOL_REFUSALS:
            raise DTypeError(tables.BOOL_REFUSALS[name])  # (torch: a RuntimeError)
        raise refused(name, buf.dtype, "numeric (not bool)")
    if kind == "c" and name in tables.COMPLEX_REFUSALS:
        raise complex_refused(name, buf.dtype)
    if rule == "real" and kind == "c":
        raise refused(name, buf.dtype, "real (not complex)")
    if rule == "fp" and kind not in "fc":
        raise refused(name, buf.dtype, "floating point")
    if rule == "bits" and kind in "fc":
        raise refused(name, buf.dtype, "integer or bool")
    be = nt.backend
    if be.follows_torch_promotion:
        return buf
    if rule in ("float", "fpi") and kind in "biu":
        return be.astype(buf, DEFAULT_FLOAT)
    if rule == "bool" and kind in "iu" and name != "logical_not":
        return be.astype(buf, np.float64)
    if rule == "sq" and kind == "b":
        return be.astype(buf, np.int64)
    return buf


def write_into(nt, result, where):
    """The nested tensor ``result`` (``nt``'s structure) written into ``nt``'s buffer (torch's in-place
    rules: no casting to a lower category); a transposed view writes through to its storage, a view of part
    of a regular dim into its window of the input's rows."""
    holes.check_writable(nt)  # (values that take no write: refused before anything is written)
    buf = nt._array()
    if not result._struct.same_as(nt._struct):  # a dense operand broadcast the components' size-1 dims up
        raise ShapeError(f"{where}: the result's component sizes {result._struct.sizes.tolist()} do not match "
                           f"the sizes {nt._struct.sizes.tolist()} of the tensor written in place")
    if _CATEGORY[kind_of(result.dtype)] > _CATEGORY[kind_of(buf.dtype)]:
        raise DTypeError(f"{where}: result type {torch_name(result.dtype)} can't be cast to the desired output "
                         f"type {torch_name(buf.dtype)}")
    out = result._buf if same_layout(nt, result) else nt._stored(result._buffer)
    mine, theirs = holes.whole(nt), holes.whole(result)
    if mine is not None and theirs is not None and holes.same(mine, theirs):  # every row of values, as torch's
        mine[0][...] = theirs[0]
    buf[...] = out.reshape(buf.shape)
    nt._written()
    return nt


def _check_args(name, bound, defaults, dtype):
    """A numeric argument that is no number, or one torch refuses (:data:`ARG_RULES`; torch's
    ``RuntimeError``, or ``F.hardtanh``'s ``ValueError``: :class:`~lodtensor.errors.ArgumentError` is both):
    the error, before anything is computed or written. :data:`SCALAR_ARGS` are converted to ``dtype``."""
    for key, value in bound.items():
        default = defaults[key]
        number = default is _REQUIRED or (isinstance(default, (int, float)) and not isinstance(default, bool))
        if number and scalar_like(value) is None:
            raise TypeError(f"{name}(): argument {key!r} must be a number, got {type(value).__name__} {value!r}")
    for key, opmath in SCALAR_ARGS.get(name, {}).items():  # (a 0-d array or tensor as its number: torch's Scalar)
        value = bound[key].item() if hasattr(bound[key], "item") else bound[key]
        bound[key] = check_fits(value, dtype, f"{name}()", key, opmath=opmath)
    rule = ARG_RULES.get(name)
    broken = rule is not None and rule(bound)
    if broken:
        argument, message = broken
        raise ArgumentError(f"{name}(): {message}", argument=argument, value=bound[argument])


_EXAMPLE_ARGS = {"mvlgamma": ", 2", "threshold": ", 0.3, 0.0"}


def _make_unary(name, np_name, torch_path, rule, spec):
    params = _params(spec)
    defaults = dict(params)
    has_inplace = any(key == "inplace" for key, _ in params)

    def op(input, *args, **kwargs):
        check_nested(input, f"{name}()")
        bound = _bind(name, params, args, kwargs)
        inplace = bound.pop("inplace", False) if has_inplace else False
        _check_args(name, bound, defaults, input.dtype)
        bound = {
            k: v for k, v in bound.items() if v is not defaults[k] and v != defaults[k]
        }  # torch.round(t, decimals=0)
        # dispatches to a kernel int64 lacks; defaults are left out, as torch's Python signature does
        if name == "round" and bound.get("decimals") and kind_of(input.dtype) != "f":
            raise refused("round", input.dtype, "floating point (with decimals)")
        src = _history_safe(input, ())[0] if inplace else input
        held = holes.apply(op, (src,), bound)  # over all of values, the holes kept (inplace=True: written there)
        if held is not None:
            return write_into(input, held, f"{name}(inplace=True)") if inplace else held
        buf = _unary_input(name, rule, src)
        out = _wrap(src, src.backend.pointwise(np_name, torch_path, buf, **bound))
        if inplace:
            return write_into(input, out, f"{name}(inplace=True)")
        return out

    op.__name__ = op.__qualname__ = name
    op.arguments = tuple(key for key, _ in params if key != "inplace")  # what the in-place form takes
    sig = f"{name}(input{', ' + spec if spec else ''})"
    op.__doc__ = (
        f"``{sig}``: elementwise ``torch.{torch_path}`` on every component, one call on the flat buffer "
        f"(NumPy: ``{np_name}``). Dtype rule: {rule!r} (see ``lodtensor.nested._pointwise``).\n\n"
        f">>> import lodtensor.nested as ln\n"
        f">>> ln.{name}(ln.nested_tensor({'[[1, 2], [3]]' if rule == 'bits' else '[[0.5, 0.25], [0.75]]'})"
        f"{_EXAMPLE_ARGS.get(name, '')})"  # (torch requires mvlgamma's p, threshold's threshold and value)
        f".nested_size().tolist()\n[[2], [1]]\n"
    )
    return op


def _wrap(nt, out):
    """An elementwise result over ``nt``'s buffer (its storage, for a transposed view): ``nt``'s layout."""
    return make_view(out, nt._st, nt._perm, nt._layout)


def _binary_dtype(rule, arrays):
    """torch's result dtype of ``arrays[0] <op> arrays[1]`` (for NumPy data)."""
    a, b = arrays
    first = a if hasattr(a, "dtype") and getattr(a, "ndim", 0) else b
    other = b if first is a else a
    dtype = promote(first.dtype, other)
    if rule in ("float", "fp") and dtype.kind not in "fc":
        dtype = DEFAULT_FLOAT
    return dtype


def _cast(be, x, dtype):
    if hasattr(x, "dtype") and not isinstance(x, np.generic):
        return be.astype(x, dtype)
    return x


# torch has no bool kernel for these
_NO_BOOL = {"fmod", "remainder", "pow", "div_trunc", "div_floor", "bitwise_left_shift", "bitwise_right_shift"}


def binary(name, a, b, **kwargs):
    """The table's binary op ``name`` on nested/scalar/dense operands."""
    held = holes.apply(functools.partial(binary, name), (a, b), kwargs)  # over all of values, the holes kept
    if held is not None:
        return held
    np_name, torch_path, rule, scalar_ok = _SPECS[name]
    aligned = align(name, (a, b), names=("input", "other"))
    be = aligned.backend
    arrays = aligned.arrays
    # torch takes no Python number here, but a 0-d tensor (array) as any dense operand
    if not scalar_ok and any(isinstance(x, (bool, numbers.Number, np.generic)) for x in (a, b)):
        which, bad = ("input", a) if isinstance(a, (bool, numbers.Number, np.generic)) else ("other", b)
        raise TypeError(f"{name}(): argument '{which}' must be Tensor, not {type(bad).__name__}")
    kinds = [kind_of(x.dtype) if hasattr(x, "dtype") else "b" if isinstance(x, bool) else
             "f" if isinstance(x, float) else "c" if isinstance(x, complex) else "i" for x in arrays]
    if "c" in kinds and name in tables.COMPLEX_REFUSALS:
        raise complex_refused(name, next(getattr(x, "dtype", np.dtype(complex)) for x, k in zip(arrays, kinds)
                                         if k == "c"))
    if name in _NO_BOOL and all(k == "b" for k in kinds) and (name != "pow" or hasattr(arrays[1], "dtype")):
        raise refused(f"{name}_cpu", np.dtype(bool), "numeric (not bool)")
    if rule == "fp" and all(k in "biu" for k in kinds):
        raise refused(name, a.dtype if isinstance(a, NestedTensor) else b.dtype, "floating point")
    if rule == "bits" and any(k in "fc" for k in kinds):
        bad = next(x for x, k in zip(arrays, kinds) if k in "fc")
        raise refused(name, getattr(bad, "dtype", np.dtype(float)), "integer or bool")
    if name == "sub":
        _refuse_bool_sub(arrays)
    if not be.follows_torch_promotion and rule != "bool":
        dtype = _binary_dtype(rule, arrays)
        arrays = [_cast(be, x, dtype) for x in arrays]
        # integers as torch converts them (NumPy: OverflowError); torch's quirks: 2**63 / bool_t computes, the
        # exponent of pow is checked, not wrapped
        arrays = [torch_int(x, dtype, f"{name}()", side, "b" in kinds and (name != "div" or side == "other"),
                            name != "pow" or side == "input")
                  if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) else x
                  for x, side in zip(arrays, ("input", "other"))]
    return aligned.wrap(be.pointwise(np_name, torch_path, *arrays, **kwargs))


def _refuse_bool_sub(operands):
    """torch refuses a subtraction with any bool operand (a Python bool too)."""
    bools = [isinstance(x, (bool, np.bool_)) or kind_of(getattr(x, "dtype", "f")) == "b" for x in operands]
    if all(bools):
        raise DTypeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                        "`logical_xor()` operator instead.")
    if any(bools):
        raise DTypeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
                        "invert a mask, use the `~` or `logical_not()` operator instead.")


def _make_binary(name):
    def op(input, other):
        return binary(name, input, other)

    op.__name__ = op.__qualname__ = name
    np_name, torch_path, rule, _ = BINARY[name]
    op.__doc__ = (
        f"Elementwise ``torch.{torch_path}(input, other)`` (NumPy: ``{np_name}``): nested with nested of the "
        f"same structure, a scalar, or a dense array broadcast as torch does. Dtype rule: {rule!r}.\n\n"
        f">>> import lodtensor.nested as ln\n"
        f">>> nt = ln.nested_tensor({'[[1, 2], [3]]' if name.startswith('bitwise') else '[[0.5, 1.0], [2.0]]'})\n"
        f">>> ln.{name}(nt, nt).nested_size().tolist()\n[[2], [1]]\n"
    )
    return op


def _scaled(input, other, alpha, where):
    alpha = check_alpha((input, other), alpha, where)  # (bool operands: a bool alpha, so the result stays bool)
    if alpha is None or alpha == 1:
        return other
    if isinstance(other, NestedTensor):
        return binary("mul", other, alpha)
    return other and alpha if isinstance(other, bool) else other * alpha  # (a bool times a bool is an int)


def add(input, other, *, alpha=1):
    """Elementwise ``input + alpha * other``: nested with nested (same structure), a scalar or a
    dense array (broadcast as torch does).

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1, 2], [3]])
    >>> (nt + 10).to_tensor_list()
    [array([11, 12]), array([13])]
    >>> (nt + nt).to_padded_tensor(0).tolist()
    [[2, 4], [6, 0]]
    """
    return binary("add", input, _scaled(input, other, alpha, "add()"))


def sub(input, other, *, alpha=1):
    """Elementwise ``input - alpha * other`` (nested, scalar or dense ``other``).

    >>> import lodtensor.nested as ln
    >>> (ln.nested_tensor([[1, 2], [3]]) - 1).to_tensor_list()
    [array([0, 1]), array([2])]
    """
    _refuse_bool_sub((input, other))  # before alpha scales a bool ``other`` to integers
    return binary("sub", input, _scaled(input, other, alpha, "sub()"))


def div(input, other, *, rounding_mode=None):
    """Elementwise division; integers give float32 as in torch. ``rounding_mode`` ``'trunc'`` or
    ``'floor'`` rounds the quotient and keeps the promoted dtype.

    >>> import lodtensor.nested as ln
    >>> ln.div(ln.nested_tensor([[1, 2], [3]]), 2).to_tensor_list()[0].tolist()
    [0.5, 1.0]
    """
    if rounding_mode is None:
        return binary("div", input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ArgumentError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'",
            argument="rounding_mode", value=rounding_mode,
        )
    return binary(f"div_{rounding_mode}", input, other, rounding_mode=rounding_mode)


def where(condition, input, other):
    """Elementwise ``input if condition else other``; ``input``, ``other``: nested, scalars or dense arrays.

    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([[1.0, -2.0], [-3.0]])
    >>> ln.where(nt > 0, nt, 0.0).to_tensor_list()
    [array([1., 0.], dtype=float32), array([0.], dtype=float32)]
    """
    held = holes.apply(where, (condition, input, other))  # over all of values, the holes kept
    if held is not None:
        return held
    aligned = align("where", (condition, input, other), names=("condition", "input", "other"))
    be = aligned.backend
    cond, a, b = aligned.arrays
    if kind_of(getattr(cond, "dtype", np.dtype(type(cond)))) != "b":
        raise TypeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype}")
    if be.follows_torch_promotion:
        return aligned.wrap(be.where(cond, a, b))
    arrays = [x for x in (a, b) if hasattr(x, "dtype") and getattr(x, "ndim", 0)]
    dtype = promote(arrays[0].dtype, b if arrays[0] is a else a) if arrays else promote(number_dtype(a), b)
    a, b = (check_fits(x, dtype, "where()", name, ("float16",)) for x, name in ((a, "input"), (b, "other")))
    return aligned.wrap(be.astype(be.where(cond, a, b), dtype))


def clamp(input, min=None, max=None):  # noqa: A002 - torch's names
    """Elementwise ``min(max(x, min), max)``; bounds are scalars, or nested/dense like ``input``.

    >>> import lodtensor.nested as ln
    >>> ln.clamp(ln.nested_tensor([[-1.0, 2.0], [3.0]]), 0.0, 2.5).to_tensor_list()[1].tolist()
    [2.5]
    """
    check_nested(input, "clamp()")
    if min is None and max is None:
        raise ShapeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if kind_of(input.dtype) == "c" or any(isinstance(b, complex) or (hasattr(b, "dtype") and kind_of(b.dtype) == "c")
                                          for b in (min, max)):
        raise DTypeError(f"clamp is not supported for complex types (input {input.dtype}, min={min!r}, max={max!r})")
    held = holes.apply(clamp, (input, min, max))  # over all of values, the holes kept
    if held is not None:
        return held
    out = input
    for bound, side in ((min, "min"), (max, "max")):
        if bound is not None:
            out = _clamp_one(out, bound, side)
    return out


def _clamp_one(nt, bound, side):
    """``clamp`` to one bound, a scalar or a tensor (nested or dense, aligned with ``nt``), by the library's own
    clamp: its gradient is torch's (a value equal to the bound passes it to ``nt``; ``maximum`` splits it)."""
    scalar = scalar_like(bound) is not None
    aligned = None if scalar else align("clamp", (nt, bound), names=("input", side))
    be = nt.backend
    x, b = (nt._buf, bound) if scalar else aligned.arrays
    if not be.follows_torch_promotion:
        dtype = _binary_dtype("promote", [x, b])
        x, b = _cast(be, x, dtype), (check_fits(b, dtype, "clamp()", side) if scalar else _cast(be, b, dtype))
    out = be.pointwise("clamp", "clamp", x, *((b, None) if side == "min" else (None, b)))
    return _wrap(nt, out) if scalar else aligned.wrap(out)


def _history_safe(input, args):
    """``(input, args)`` for computing a result to write into ``input`` in place. With autograd
    history on ``input``'s buffer, a clone of ``input`` stands for it (also where an argument is
    ``input`` itself): the backward of ``clamp``, ``mul``, ``leaky_relu``... reads the values it was
    given, which the write would overwrite (torch saves the original for its in-place ops too)."""
    if not input.backend.requires_grad(input._meta()):
        return input, args
    kept = holes.gathered(input)  # (a copy with the same holes: the write then reaches every row of values)
    copy = holes.over(input.backend.clone(kept[0]), *kept[1:]) if kept else make_view(
        input.backend.clone(input._buf), input._st, input._perm, input._layout)
    return copy, tuple(copy if a is input else a for a in args)


def _inplace(name, fn):
    def op(input, *args, **kwargs):
        if not isinstance(input, NestedTensor) and any(isinstance(a, NestedTensor) for a in args):
            raise ShapeError(f"{name}_(): output with shape {list(getattr(input, 'shape', ()))} doesn't match the "
                             f"broadcast shape: a dense tensor cannot hold the result of an op with a nested tensor")
        check_nested(input, f"{name}_()")
        takes = getattr(fn, "arguments", None)  # a unary op's parameters: an extra one was bound to inplace=
        if takes is not None and (len(args) > len(takes) or "inplace" in kwargs):
            raise TypeError(f"{name}_() takes {len(takes)} argument(s) after the tensor "
                            f"({', '.join(takes) or 'none'}), got {len(args)} positional"
                            f"{' and inplace=' if 'inplace' in kwargs else ''}")
        src, args = _history_safe(input, args)
        return write_into(input, fn(src, *args, **kwargs), f"{name}_()")

    op.__name__ = op.__qualname__ = f"{name}_"
    op.__doc__ = f"In-place :func:`{name}`: the result written into ``input``'s buffer; returns ``input``."
    return op


def _register(name, fn, extra=(), skip=()):
    paths = [p for p in _torch_paths(name) if p not in skip]
    globals()[name] = implements(name, *paths, *extra)(fn)
    implements(f"{name}_", f"torch.Tensor.{name}_", f"torch.{name}_", f"torch.nn.functional.{name}_")(
        _inplace(name, fn)
    )


for _name, _spec in UNARY.items():
    _register(_name, _make_unary(_name, *_spec))
for _name in BINARY:
    if _name not in ("add", "sub", "div"):
        _register(_name, _make_binary(_name))
_register("add", add)
_register("sub", sub)
_register("div", div)
_register("where", where, skip=("torch.Tensor.where",))
_register("clamp", clamp)


@implements("where_method", "torch.Tensor.where")
def _where_method(input, condition, other):
    """``nt.where(condition, other)``: torch's method order, :func:`where` ``(condition, nt, other)``."""
    return where(condition, input, other)


def _where(self, condition, other):
    """``where(condition, self, other)``, as torch's ``Tensor.where(condition, other)``."""
    return _where_method(self, condition, other)


NestedTensor.where = _where


@implements("rsub", "torch.Tensor.__rsub__", "torch.rsub")
def _rsub(input, other, alpha=1):
    """``other - alpha * input`` (``torch.rsub``; also ``other - nt`` for a dense or scalar ``other``).

    >>> import lodtensor.nested as ln
    >>> ln.rsub(ln.nested_tensor([[1, 2], [3]]), 10, alpha=2).to_tensor_list()
    [array([8, 6]), array([4])]
    """
    return sub(other, input, alpha=alpha)


@implements("rdiv", "torch.Tensor.__rtruediv__")
def _rdiv(input, other):
    return div(other, input)


@implements("rpow", "torch.Tensor.__rpow__")
def _rpow(input, other):
    return binary("pow", other, input)


# -- NumPy ufuncs on nested tensors ---------------------------------------------------------
# keyed by the ufunc's own name (np.true_divide is np.divide, named "divide", in NumPy 2)
_BY_UFUNC = {
    getattr(getattr(np, spec[0], None), "__name__", spec[0]): name for name, spec in {**UNARY, **BINARY}.items()
}


def array_ufunc(ufunc, method, *inputs, out=None, **kwargs):
    """``np.<ufunc>(nt, ...)``: a NestedTensor of the same structure (``out=`` nested tensors too).

    Plain calls of a ufunc the tables know run the table op (torch's dtype
    rules, any backend); calls with ``out=`` or other keywords run the ufunc
    itself on the buffers (NumPy's rules).
    """
    where = f"numpy.{ufunc.__name__}"
    if method != "__call__":
        raise TypeError(f"{where}.{method} is not supported on a NestedTensor; use lodtensor.nested's "
                        f"sum/amax/... with dim, or unbind()")
    if ufunc.signature is not None:  # np.matmul: nested matmul; other gufuncs refused (_numpy_api)
        return OP_TABLE["array_gufunc"](ufunc, inputs, out, kwargs)
    name = _BY_UFUNC.get(ufunc.__name__)
    if ufunc.__name__ == "floor_divide" and out is None and not kwargs:  # torch's floor_divide: its dtypes
        return OP_TABLE["div"](*inputs, rounding_mode="floor")
    if name is not None and out is None and not kwargs:
        scalars = any(not isinstance(x, NestedTensor) and scalar_like(x) is not None for x in inputs)
        if name in UNARY or BINARY[name][3] or not scalars:
            return OP_TABLE[name](*inputs)
    if out is not None and window_in(out):  # views of part of a regular dim: through compact copies
        return through_copies(out, lambda copies: array_ufunc(ufunc, method, *inputs, out=copies, **kwargs))
    aligned = align(where, inputs)
    if out is not None:
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:  # (None: NumPy allocates that output, as in out=(q, None))
            if o is not None and (not isinstance(o, NestedTensor) or not o._struct.same_as(aligned.nt._struct)):
                raise ShapeError(f"{where}: out= must be NestedTensors of the inputs' nested structure (or None)")
            holes.check_writable(o)  # (holes' values that take no write: refused before anything is written)
        kwargs["out"] = tuple(None if o is None else aligned.view(o) for o in outs)
    res = aligned.backend.apply_ufunc(ufunc, "__call__", *aligned.arrays, **kwargs)
    holes.written(out)  # (out= with holes: the components' rows written back into the values)
    if isinstance(res, tuple):  # each output: the out= tensor given for it, else a new one
        given = out if isinstance(out, tuple) else (None,) * len(res)
        return tuple(aligned.wrap(r) if o is None else o for r, o in zip(res, given))
    if out is not None:
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    return aligned.wrap(res)


implements("array_ufunc")(array_ufunc)
