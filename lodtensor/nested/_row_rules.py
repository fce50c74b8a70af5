"""Applying the row table to one torch call: does its result keep the lod of its LoDTensor arguments?

:func:`decide` reads the call's real dims by binding its arguments to the
entry of :mod:`._row_table` (positional or keyword, with torch's defaults and
implicit dims) and answers one of:

- ``keep``: the result's rows are the carriers' rows; ``wrap`` then gives each
  output with that row count (and the rank the rule expects) the lod back;
- ``mix``: rows move or mix; the caller raises (a function with per-sequence
  advice) or returns plain torch data;
- ``reshape``: an order-preserving reshape, decided from the result's shape;
- ``plain``: an unknown function, or a LoDTensor outside the slots that carry
  rows: plain torch data.
"""

import numbers
import operator

from .._ufunc import matmul_rows
from ..tensor import LoDTensor
from ._row_table import QUALIFIED, REQUIRED, RULES

__all__ = ["decide", "rule_of", "Decision"]

_MISSING = object()


class _Undecidable(Exception):
    """A dim argument that is not an integer (a named dim, a tensor of dims): treat the call as mixing."""


class Decision:
    """What one call does to the rows: ``kind``, the LoDTensors whose rows it keeps, the rank check."""

    __slots__ = ("kind", "carriers", "rank", "extra", "rule")

    def __init__(self, kind, rule, carriers=(), rank=None, extra=0):
        self.kind, self.rule, self.carriers, self.rank, self.extra = kind, rule, list(carriers), rank, extra

    def fits(self, out):
        """Whether output tensor ``out`` has the carriers' rows (count and, for the rank rules, rank)."""
        if getattr(out, "ndim", 0) < 1 or not self.carriers:
            return False
        first = self.carriers[0]
        if out.shape[0] != first.data.shape[0]:  # no int(): under torch.compile both are one symbolic size
            return False
        if self.rank == "same":  # elementwise: a bigger operand broadcasting in front moves the rows
            return all(out.ndim == c.data.ndim for c in self.carriers)
        if self.rank == "plus":
            return all(out.ndim == c.data.ndim + self.extra for c in self.carriers)
        return True


def rule_of(func):
    """``(name, rule)`` of a torch function; rule None when it is not in the table."""
    name = getattr(func, "__name__", None) or repr(func)
    key = (getattr(func, "__module__", None), name)
    if key in QUALIFIED:
        return name, QUALIFIED[key]
    return name, RULES.get(name)


def _arg(args, kwargs, param, pos):
    if param in kwargs:
        return kwargs[param]
    if pos is not None and len(args) > pos:
        return args[pos]
    return _MISSING


def _lod_tensors(x, found):
    if isinstance(x, LoDTensor):
        found.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _lod_tensors(v, found)
    return found


def _carriers(slots, args, kwargs):
    found = []
    for param, pos in slots:
        value = _arg(args, kwargs, param, pos)
        if isinstance(value, LoDTensor):
            found.append(value)
        elif param == "tensors" and isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, LoDTensor))
    return found


def _norm(d, width):
    """Dim ``d`` in ``[0, width)``, or None when out of range (torch then raises its own error)."""
    if isinstance(d, bool):
        raise _Undecidable
    try:
        d = operator.index(d)
    except TypeError:
        raise _Undecidable from None
    return d % width if -width <= d < width else None


def _dims(value, width):
    items = value if isinstance(value, (tuple, list)) or type(value).__name__ == "Size" else (value,)
    return {n for n in (_norm(d, width) for d in items) if n is not None}


def _default(default, first, args, kwargs, ndim):
    if default is None:
        return set(range(ndim))
    if default == REQUIRED:
        return set()  # torch will say that the argument is missing
    if default == "softmax":  # torch's legacy choice when softmax gets no dim
        return {0 if ndim in (0, 1, 3) else 1}
    if default == "size3":  # cross without dim: the first dim of size 3
        return next(({i} for i, s in enumerate(first.data.shape) if s == 3), set())
    if default == "fftn":  # every dim, or the last len(s) when s is given
        s = _arg(args, kwargs, "s", 1)
        return set(range(ndim)) if s in (_MISSING, None) else set(range(max(ndim - len(s), 0), ndim))
    return _dims(default, ndim)


def _along(rule, first, args, kwargs):
    """The dims a ``("dim", ...)`` rule acts on, normalised."""
    _, params, _, mode = rule
    ndim = first.data.ndim
    width = ndim + 1 if mode == "new" else ndim
    acted = set()
    for param, pos, default in params:
        value = _arg(args, kwargs, param, pos)
        if value is _MISSING or value is None or (isinstance(value, bool) and param == "dim"):
            acted |= _default(default, first, args, kwargs, width)  # std(x, True): the unbiased overload
        elif mode == "red" and isinstance(value, (tuple, list)) and not value:
            acted |= set(range(ndim))  # sum(x, ()) reduces every dim
        else:
            acted |= _dims(value, width)
    return set(range(ndim)) - acted if mode == "except" else acted


def _moved(args, kwargs, ndim):
    src = _arg(args, kwargs, "source", 1)
    dst = _arg(args, kwargs, "destination", 2)
    if src is _MISSING or dst is _MISSING:
        return set()
    src = [_norm(d, ndim) for d in (src if isinstance(src, (tuple, list)) else (src,))]
    dst = [_norm(d, ndim) for d in (dst if isinstance(dst, (tuple, list)) else (dst,))]
    if None in src or None in dst or len(src) != len(dst):
        return set()  # torch raises
    order = [None] * ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(ndim) if i not in src)
    order = [next(rest, None) if o is None else o for o in order]
    return set() if order[0] == 0 else {0}


def _permuted(args, kwargs, ndim):
    dims = args[1:] if len(args) > 2 else (args[1],) if len(args) == 2 else (kwargs.get("dims", kwargs.get("dim")),)
    if len(dims) == 1 and (isinstance(dims[0], (tuple, list)) or type(dims[0]).__name__ == "Size"):
        dims = tuple(dims[0])
    if not dims or dims[0] is None:
        return set()
    first = _norm(dims[0], ndim)
    return set() if first in (0, None) else {0}


def _acted(rule, first, args, kwargs):
    """Dims of the input that the call moves or mixes along (0 among them: the rows mix)."""
    kind = rule[0]
    ndim = first.data.ndim
    if kind == "dim":
        return _along(rule, first, args, kwargs)
    if kind == "fixed":
        return set(range(ndim)) if rule[1] == "all" else _dims(rule[1], ndim)
    if kind == "last":
        return set(range(ndim - rule[1], ndim)) if ndim >= rule[1] else set()
    if kind == "ndim":
        return set(rule[1].get(ndim, rule[2]))
    if kind == "trailing":
        _, param, pos, per = rule
        value = _arg(args, kwargs, param, pos)
        count = 1 if isinstance(value, numbers.Integral) else len(value) // per if value is not _MISSING else 0
        return set(range(max(ndim - count, 0), ndim))
    if kind == "pad":  # (left, right) pairs from the last dim backwards; a zero pair leaves its dim alone
        pad = _arg(args, kwargs, "pad", 1)
        pad = [] if pad is _MISSING else list(pad)
        return {ndim - 1 - k for k in range(len(pad) // 2) if ndim - 1 - k >= 0 and (pad[2 * k] or pad[2 * k + 1])}
    if kind == "swap":
        a, b = (_arg(args, kwargs, p, pos) for p, pos in rule[1:])
        if a is _MISSING or b is _MISSING:
            return set()
        a, b = _norm(a, ndim), _norm(b, ndim)
        return set() if a == b else {d for d in (a, b) if d is not None}
    if kind == "movedim":
        return _moved(args, kwargs, ndim)
    if kind == "permute":
        return _permuted(args, kwargs, ndim)
    if kind == "batched":
        return set() if ndim == rule[1] + 2 else {0}
    if kind == "flag":
        return {0} if _arg(args, kwargs, rule[1], rule[2]) is True else set()
    return set()


def _slots(rule):
    """The ``(parameter, position)`` slots whose rows are the input rows."""
    kind = rule[0]
    if kind in ("dim", "last"):
        return rule[2]
    if kind == "map":
        return rule[1]
    if kind == "ndim":
        return rule[3]
    return (("input", 0),)


def _matmul(rule, args, kwargs, found):
    _, lhs_pos, rhs_pos = rule
    names = ("input", "other") if lhs_pos == 0 else ("other", "input")
    lhs, rhs = _arg(args, kwargs, names[0], lhs_pos), _arg(args, kwargs, names[1], rhs_pos)
    if lhs is _MISSING or rhs is _MISSING:
        return Decision("plain", rule)
    a_rows, b_rows = matmul_rows(getattr(lhs, "ndim", 0), getattr(rhs, "ndim", 0))
    carriers = [x for x, rows in ((lhs, a_rows), (rhs, b_rows)) if rows and isinstance(x, LoDTensor)]
    lods = [x for x in (lhs, rhs) if isinstance(x, LoDTensor)]
    if len(carriers) < len(lods) or any(f is not lhs and f is not rhs for f in found):
        return Decision("mix", rule, lods)
    return Decision("keep", rule, carriers)


def decide(func, args, kwargs, *, traced=False):
    """The :class:`Decision` for ``func(*args, **kwargs)`` whose arguments hold LoDTensors.

    ``traced``: called while ``torch.compile`` traces, where the LoDTensors were built (and their lods
    checked against their rows) in eager code; the fit is not read again, so the graph is not guarded on
    one batch's row count. A rule reads only the data's rank and the call's arguments either way.
    """
    name, rule = rule_of(func)
    found = _lod_tensors(list(args), [])
    _lod_tensors(list(kwargs.values()), found)
    if not traced:
        for t in found:  # data present, and a lod that fits it, before any rule reads a shape
            t._check_fits(f"torch.{name}")
    if rule is None:
        return Decision("plain", rule, found)
    kind = rule[0]
    if kind == "maxmin":  # max(x) | max(x, dim) | max(x, other)
        second = _arg(args, kwargs, "dim", 1)
        if second is _MISSING and "other" in kwargs:
            second = kwargs["other"]
        if hasattr(second, "shape") and not isinstance(second, numbers.Integral):
            kind, rule = "ew", ("ew",)
        else:
            rule = ("dim", (("dim", 1, None),), (("input", 0),), "red")
            kind = "dim"
    if kind == "where":
        kind, rule = ("ew", ("ew",)) if len(args) + len(kwargs) > 1 else ("fixed", ("fixed", "all"))
    if kind == "ew":
        return Decision("keep", rule, found, rank="same")
    if kind == "matmul":
        return _matmul(rule, args, kwargs, found)
    carriers = _carriers(_slots(rule), args, kwargs)
    carriers += [o for o in _lod_tensors([kwargs.get("out")], []) if all(o is not c for c in carriers)]
    # identity, not id(): under torch.compile an id() is a guard on that one object (a recompile per batch)
    if not carriers or any(all(f is not c for c in carriers) for f in found):
        return Decision("mix" if carriers else "plain", rule, found)
    if kind == "reshape":
        return Decision("reshape", rule, carriers)
    if kind == "map":
        return Decision("keep", rule, carriers, rank=None if rule[2] is None else "plus", extra=rule[2] or 0)
    try:
        acted = _acted(rule, carriers[0], args, kwargs)
    except _Undecidable:
        return Decision("mix", rule, carriers)
    if 0 in acted:
        return Decision("mix", rule, carriers)
    width = carriers[0].data.ndim
    others = [a for a in (*args, *kwargs.values()) if hasattr(a, "ndim") and not isinstance(a, LoDTensor)]
    if any(getattr(a, "ndim", 0) > width for a in others):  # a bigger operand broadcasts new dims in front
        return Decision("plain", rule, carriers)
    return Decision("keep", rule, carriers, rank="plus" if kind in ("batched", "flag") else None)
