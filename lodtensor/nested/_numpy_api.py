"""NumPy's functions and generalized ufuncs on a NestedTensor (``__array_function__``, ``np.matmul``).

A NestedTensor has no single dense array, so NumPy's own implementations cannot read one: without this
protocol ``np.array_equal(nt, nt)`` answered False (NumPy swallowed the refusal), ``np.size(nt)`` returned
the bound method ``nt.size`` and ``np.sum(nt)`` failed on an unknown ``axis`` keyword. Here:

- the reductions (``np.sum``, ``np.mean``, ``np.prod``, ``np.max``/``np.amax``, ``np.min``/``np.amin``,
  ``np.any``, ``np.all``) run lodtensor.nested's, ``axis`` read as ``dim`` and ``keepdims`` as ``keepdim``
  (``dtype=`` for sum, mean and prod);
- ``np.concatenate`` and ``np.stack`` run ``cat`` and ``stack``; ``np.ndim``, ``np.shape``, ``np.size`` and
  ``np.array_equal`` answer for the nested structure;
- ``np.matmul(nt, w)`` is ``nt @ w``; other generalized ufuncs (``np.vecdot``, ``np.matvec``...) are refused;
- every other NumPy function is refused with a TypeError that names it and says what to use instead.
"""

import numpy as np

from .._ufunc import _signature
from ..errors import ShapeError
from ._registry import OP_TABLE, implements
from ._tensor import NestedTensor

__all__ = ["array_function", "array_gufunc"]

#: NumPy reductions -> the lodtensor.nested op, and whether it takes ``dtype=``
_REDUCTIONS = {
    np.sum: ("sum", True), np.mean: ("mean", True), np.prod: ("prod", True), np.max: ("amax", False),
    np.amax: ("amax", False), np.min: ("amin", False), np.amin: ("amin", False), np.any: ("any", False),
    np.all: ("all", False),
}
_JOINS = {np.concatenate: "cat", np.stack: "stack"}


def _refused(func, detail=""):
    return TypeError(
        f"numpy.{func.__name__} is not supported on a NestedTensor{detail}; use lodtensor.nested's functions "
        f"(nt.sum(dim=...), ln.cat...), nt.values() for the flat buffer, or nt.to_padded_tensor(padding)"
    )


def _arguments(func, args, kwargs):
    """The call's arguments by parameter name (NumPy's own signatures: ``np.max(nt, 1, None, True)`` passes
    ``keepdims`` by position), the unbound parameter ``casting`` left out; a given ``out=``, ``where=``,
    ``initial=``... is refused."""
    given = dict(_signature(func).bind(*args, **kwargs).arguments)
    given.pop("casting", None)  # (no cast: the nested op keeps torch's promotion)
    taken = {k: given.pop(k) for k in ("a", "arrays", "axis", "keepdims", "dtype") if k in given}
    extra = sorted(k for k, v in given.items() if v is not None and v is not np._NoValue)
    if extra:
        raise _refused(func, f" with {', '.join(k + '=' for k in extra)}")
    return taken


def _reduce(func, args, kwargs):
    name, takes_dtype = _REDUCTIONS[func]
    given = _arguments(func, args, kwargs)
    options = {"dtype": given["dtype"]} if takes_dtype and given.get("dtype") is not None else {}
    axis = given.get("axis")
    keepdims = given.get("keepdims", False)
    return OP_TABLE[name](given["a"], dim=tuple(axis) if isinstance(axis, list) else axis,
                          keepdim=bool(keepdims) if keepdims is not np._NoValue else False, **options)


def _join(func, args, kwargs):
    given = _arguments(func, args, kwargs)
    if given.get("dtype") is not None:
        raise _refused(func, " with dtype=")
    return OP_TABLE[_JOINS[func]](list(given["arrays"]), dim=given.get("axis", 0))


def _array_equal(a1, a2, equal_nan=False):
    if not (isinstance(a1, NestedTensor) and isinstance(a2, NestedTensor)):
        raise TypeError("numpy.array_equal: a NestedTensor compares with another NestedTensor only; compare "
                        "nt.to_padded_tensor(padding) with a padded array, or the components of nt.unbind()")
    try:
        same = OP_TABLE["isclose"](a1, a2, rtol=0.0, atol=0.0, equal_nan=bool(equal_nan))
    except ShapeError:  # another nested structure: not equal, as NumPy answers for other shapes
        return False
    return bool(same.all())


def array_function(self, func, types, args, kwargs):
    """``NestedTensor.__array_function__``: the NumPy functions above, every other one refused."""
    if func in _REDUCTIONS:
        return _reduce(func, args, kwargs)
    if func in _JOINS:
        return _join(func, args, kwargs)
    if func is np.ndim:
        return self.dim()
    if func is np.shape:
        return self.shape
    if func is np.size:
        axis = args[1] if len(args) > 1 else kwargs.get("axis")
        return self.numel() if axis is None else self.size(axis)
    if func is np.array_equal:
        return _array_equal(*args, **kwargs)
    raise _refused(func)


def array_gufunc(ufunc, inputs, out, kwargs):
    """A generalized ufunc (``np.matmul``) called on a NestedTensor: ``matmul`` is lodtensor.nested's (as the
    ``@`` operator); the others are refused."""
    if ufunc.__name__ == "matmul" and out is None and not kwargs and len(inputs) == 2:
        return OP_TABLE["matmul"](*inputs)
    detail = " with out= or other keywords" if ufunc.__name__ == "matmul" else f" (signature {ufunc.signature})"
    raise TypeError(f"numpy.{ufunc.__name__}{detail} is not supported on a NestedTensor; use "
                    f"lodtensor.nested.matmul (the @ operator), or apply it to each of nt.unbind()")


NestedTensor._attach(__array_function__=array_function)
implements("array_gufunc")(array_gufunc)
