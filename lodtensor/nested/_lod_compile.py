"""LoDTensors of torch data under ``torch.compile``: the traced forms of ``__torch_function__`` and the operators.

While dynamo traces, a torch function on a LoDTensor (``torch.relu(t)``,
``lin(t)``, ``F.layer_norm(t, ...)``) and an operator (``t * 2``, ``2 - t``,
``t @ w``, ``t > 0``, ``-t``) run here: the same row rules as in eager code
(:mod:`._row_table`), applied to the data only, and a result that keeps the
rows gets the input's LoD object back. A traced form reads the data's rank and
the call's arguments; it never reads the LoD's offsets or its row count (the
LoDTensors were built, and their LoDs checked against their rows, in eager code
before the compiled function received them), so the graph has no NumPy in it
and no guard on one batch's LoD. LoDTensor operands must share one LoD object
(``t * mask`` where ``mask = t > 0``); equal LoDs in two objects are compared
on the host, eagerly.

Everything else runs eagerly behind a graph break (:func:`lodtensor._compile.eager`),
with the same results and errors as eager code: NumPy-backed data, an ``out=``
LoDTensor, in-place operators (``t += 1``), operands with distinct LoD objects,
calls that raise (a softmax over the rows, which names the sequence op to use),
NumPy operands.
"""

import numbers
import operator
import sys

from .. import _compile
from .._ufunc import matmul_rows
from ..tensor import LoDTensor
from ._row_rules import _lod_tensors, decide
from ._row_table import ADVICE

__all__ = ["torch_function", "apply_operator", "OPERATORS"]

#: operator name -> (function on torch data, reflected?); the in-place forms and divmod run eagerly
OPERATORS = {
    **{f"__{n}__": (getattr(operator, n), False) for n in ("lt", "le", "eq", "ne", "gt", "ge")},
    **{f"__{n}__": (getattr(operator, n), False) for n in ("neg", "pos", "abs", "invert")},
}
for _n, _fn in {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "matmul": operator.matmul,
                "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
                "pow": operator.pow, "lshift": operator.lshift, "rshift": operator.rshift,
                "and": operator.and_, "xor": operator.xor, "or": operator.or_}.items():
    OPERATORS[f"__{_n}__"] = (_fn, False)
    OPERATORS[f"__r{_n}__"] = (_fn, True)


def _torch():
    return sys.modules["torch"]


def _traceable(found):
    """Whether every LoDTensor in ``found`` holds torch data (what the traced forms take)."""
    tensor = _torch().Tensor
    return bool(found) and all(isinstance(t._data, tensor) for t in found)


def _one_lod(carriers):
    first = carriers[0]._lod
    return all(c._lod is first for c in carriers[1:])


def _new(like, data):
    """A LoDTensor of ``data`` with ``like``'s LoD object and place (the rows are ``like``'s). Built here rather
    than by ``tensor._wrap``, whose eager-only marking of the rows would be traced for nothing."""
    t = object.__new__(LoDTensor)
    t._data = data
    t._lod = like._lod
    t._where = like._where
    return t


def map_items(x, leaf):
    """``leaf`` of every item of ``x`` through nested lists and tuples (a namedtuple rebuilt as one),
    or of ``x`` itself: the arguments and results of a torch function, in and out of LoDTensors."""
    if isinstance(x, (list, tuple)):
        items = [map_items(v, leaf) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    return leaf(x)


def _unwrap(x):
    return map_items(x, lambda v: v._data if isinstance(v, LoDTensor) else v)


def _wrap(result, decision):
    def leaf(r):
        return _new(decision.carriers[0], r) if isinstance(r, _torch().Tensor) and decision.fits(r) else r

    return map_items(result, leaf)


def torch_function(eager, cls, func, types, args, kwargs):
    """``eager`` (``LoDTensor.__torch_function__``) while dynamo traces: the call on the data, the LoD kept
    where the row table says so; anything the traced form does not take runs ``eager`` behind a graph break."""
    found = _lod_tensors(list(args), [])
    _lod_tensors(list(kwargs.values()), found)
    if not _traceable(found) or _lod_tensors([kwargs.get("out")], []):
        return _compile.eager(eager, cls, func, types, args, kwargs)
    decision = decide(func, args, kwargs, traced=True)
    kind = decision.kind
    name = getattr(func, "__name__", None)
    if kind == "mix" and name in ADVICE and decision.carriers:
        return _compile.eager(eager, cls, func, types, args, kwargs)  # raises, naming the sequence op
    if kind in ("keep", "reshape") and not _one_lod(decision.carriers):
        return _compile.eager(eager, cls, func, types, args, kwargs)  # lods compared by value, on the host
    result = func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
    if kind == "keep":
        return _wrap(result, decision)
    if kind == "reshape":
        if decision.fits(result):
            return _wrap(result, decision)
        if name in ADVICE:
            return _compile.eager(eager, cls, func, types, args, kwargs)  # raises, naming the op to use
    return result


def _operand(x):
    """``x`` as an operand of a traced operator (torch data, a tensor or a Python number), else None."""
    torch = _torch()
    if isinstance(x, LoDTensor):
        return x._data if isinstance(x._data, torch.Tensor) else None
    if isinstance(x, torch.Tensor) or (isinstance(x, numbers.Number) and type(x).__module__ == "builtins"):
        return x
    return None


def _rows_kept(name, shapes, result):
    """Which operand positions' rows are the rows of ``result`` (elementwise: the same rank and dim 0)."""
    if not getattr(result, "ndim", 0):
        return [False] * len(shapes)
    if name in ("__matmul__", "__rmatmul__") and len(shapes) == 2:
        return list(matmul_rows(len(shapes[0]), len(shapes[1])))
    return [shape is not None and len(shape) == result.ndim and len(shape) > 0 and shape[0] == result.shape[0]
            for shape in shapes]


def apply_operator(name, eager, self, *other):
    """Operator ``name`` of LoDTensor ``self`` while dynamo traces (``eager`` is the NumPy-protocol method).

    The operator runs on the torch data; the result keeps the LoD when its rows are the rows of every
    LoDTensor operand with a LoD, as ``__array_ufunc__`` decides in eager code.
    """
    spec = OPERATORS.get(name)
    operands = [self, *other]
    data = [_operand(x) for x in operands]
    if spec is None or any(d is None for d in data):
        return _compile.eager(eager, self, *other)
    fn, reflected = spec
    carriers = [x for x in operands if isinstance(x, LoDTensor) and len(x._lod._levels)]
    if carriers and not _one_lod(carriers):
        return _compile.eager(eager, self, *other)  # lods compared by value (LoDError if they differ)
    if reflected:
        data, operands = data[::-1], operands[::-1]
    result = fn(*data)
    if not isinstance(result, _torch().Tensor):
        return result
    shapes = [tuple(d.shape) if isinstance(d, _torch().Tensor) else None for d in data]
    kept = _rows_kept(name, shapes, result)
    lods = [(x, k) for x, k in zip(operands, kept) if isinstance(x, LoDTensor)]
    with_levels = [(x, k) for x, k in lods if len(x._lod._levels)]
    if with_levels:
        return _new(with_levels[0][0], result) if all(k for _, k in with_levels) else result
    return _new(lods[0][0], result) if result.ndim else result  # LoDTensors without a lod: plain rows


_compile.HOOKS["operator"] = apply_operator
