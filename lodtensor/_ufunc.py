"""NumPy's ufunc protocol for LoDTensor: ``np.exp(t)`` and ``t * 2`` keep the lod.

The ufunc runs on the flat data through the backend (torch data stays torch).
A result keeps the lod only when **its rows are the LoD operands' rows**: each
LoDTensor operand has the result's rank and row count (``t + bias`` and
``t * column`` do; ``t + np.ones((k,) + t.shape)`` broadcasts new dims in front,
so result row i is no row of ``t``). Operands whose rows are the result's rows
must share one lod (the same object, or equal offsets).

What NumPy users get otherwise:

- a broadcast that moves the rows, a reduction (``np.add.reduce(t, axis=0)``),
  ``accumulate``, ``reduceat``, ``outer``: **plain data** of the backend, as
  NumPy would return for the flat arrays;
- ``out=`` a LoDTensor with a lod: allowed when the result's rows are its
  rows and, where operands have a lod, the same lod; otherwise a
  :class:`~lodtensor.errors.LoDError` **before anything is written** (pass
  ``out=t.data`` to fill the buffer as plain rows). A ufunc ``reduce``,
  ``accumulate`` or ``reduceat`` along other dims than dim 0 keeps the rows
  (``np.add.reduce(t, axis=1, out=o)``, as ``np.sum``); over dim 0, and
  ``outer``, a LoDTensor with a lod is refused as ``out=``;
- NumPy functions that are not ufuncs (``np.clip``, ``np.sum``, ``np.round``...):
  plain data, or the ``out=`` object; a LoDTensor with a lod as ``out=`` is
  refused before anything is written where an argument holds another lod, or
  where the function's ``axis`` reduces, flattens or reorders the rows;
- a NestedTensor or a NumPy masked array operand: refused (TypeError).
  A LoDTensor such a function writes into (``out=``, ``np.copyto``'s ``dst``,
  ``np.put``'s ``a``...) must be data NumPy sees in place: data on a device or
  of a dtype NumPy lacks (torch's bfloat16) would only fill a host copy, and
  torch data that requires grad would be written around autograd; both are
  refused before anything is written;
- a number operand of torch data (a Python or NumPy scalar, a 0-d NumPy array)
  is read as torch reads one (see ``backend/torch/_ufunc.py``).

For gufuncs the rows are a loop dim of the operand matched by the result;
``np.matmul(t, w)`` keeps ``t``'s rows when ``t`` has at least 2 dims and ``w``
no more than ``t``, and a stack of matrices ``w @ t3`` keeps ``t3``'s.

Under ``torch.compile`` the operators do not go through NumPy (dynamo does not
trace NumPy's mixin): while dynamo traces, each operator calls the traced form
that the torch layer installs (``_compile.HOOKS["operator"]``, in
``lodtensor.nested._lod_compile``), which applies the same rule to the torch data.
"""

import functools
import inspect
import re
import sys
from copy import copy

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import _compile
from ._data import plain_array
from .backend import backend_of
from .errors import LoDError

__all__ = ["UfuncMixin", "matmul_rows", "host_view"]


def matmul_rows(a_ndim, b_ndim):
    """Whether dim 0 of ``a`` (of ``b``) becomes dim 0 of ``a @ b``: ``(a's rows, b's rows)``.

    ``a`` keeps its rows when it is a matrix or a stack of them and ``b`` has no
    more dims (no broadcast in front); ``b`` keeps its rows only as a stack of
    matrices at least as deep as ``a`` (a matrix ``b``'s rows are contracted).

    >>> matmul_rows(2, 2), matmul_rows(2, 1), matmul_rows(2, 3), matmul_rows(1, 2)
    ((True, False), (True, False), (False, True), (False, False))
    """
    return a_ndim >= 2 and b_ndim <= a_ndim, b_ndim >= 3 and a_ndim <= b_ndim


def _shape(x):
    shape = getattr(x, "shape", None)
    return tuple(np.shape(x) if shape is None else shape)


def _core_dims(signature):
    """``(inputs' core dim counts, first output's core dim count)`` of a gufunc signature."""
    ins, outs = signature.split("->")
    count = [len([d for d in group.split(",") if d.strip()]) for group in re.findall(r"\(([^)]*)\)", ins)]
    return count, len([d for d in re.findall(r"\(([^)]*)\)", outs)[0].split(",") if d.strip()])


def _core_axes(ufunc, args, result_shape, placed):
    """Each input's and the first output's core axes (non-negative) under gufunc keywords ``placed``
    (``axes=``, ``axis=``, ``keepdims=``): ``([axes of input 0, ...], axes of the output)``."""
    ndims = [len(_shape(a)) for a in args]
    if placed.get("axes") is not None:
        given = [(a,) if isinstance(a, int) else tuple(a) for a in placed["axes"]]
        ins = given[: ufunc.nin]
        out = given[ufunc.nin] if len(given) > ufunc.nin else ()
    else:  # axis=: the one core dim of every operand that has one (the output has none, unless keepdims)
        core_in, core_out = _core_dims(ufunc.signature)
        ins = [(placed["axis"],) if count == 1 else () for count in core_in]
        out = (placed["axis"],) if core_out == 1 else ()
    if len(ins) != ufunc.nin:
        raise ValueError(f"axes= needs an entry for each of the {ufunc.nin} inputs")
    if placed.get("keepdims"):
        out = ins[0]
    ins = [tuple(int(a) % max(n, 1) for a in axes) for axes, n in zip(ins, ndims)]
    return ins, tuple(int(a) % max(len(result_shape), 1) for a in out)


def _core_names(signature, counts, out_count, placed):
    """The core dim names of each input and of the first output, the optional ones (``n?``) dropped where an
    operand has fewer core dims; ``(None, None)`` where the counts fit no reading of the signature."""
    ins, outs = signature.split("->")
    groups = [[d.strip() for d in g.split(",") if d.strip()] for g in re.findall(r"\(([^)]*)\)", ins)]
    out = [d.strip() for d in re.findall(r"\(([^)]*)\)", outs)[0].split(",") if d.strip()]
    dropped = set()
    for k, group in enumerate(groups):
        if len(group) > counts[k]:
            dropped |= {d for d in group if d.endswith("?")}
    groups = [[d for d in g if d not in dropped] for g in groups]
    out = [] if placed.get("keepdims") else [d for d in out if d not in dropped]
    if [len(g) for g in groups] != list(counts) or len(out) != out_count:
        return None, None
    return groups, out


def _aligned(ufunc, j, args, result_shape, placed=None):
    """Whether operand ``j``'s rows (its dim 0) are the rows of a result of ``result_shape``; ``placed``:
    a gufunc's ``axes=``/``axis=``/``keepdims=`` keywords, which put the core dims elsewhere."""
    shape = _shape(args[j])
    if not shape or not result_shape or int(shape[0]) != int(result_shape[0]):
        return False
    if ufunc.signature is None:
        return len(shape) == len(result_shape)
    if placed:
        try:
            ins, out = _core_axes(ufunc, args, result_shape, placed)
        except (IndexError, TypeError, ValueError):  # keywords NumPy refuses (with out=, its call says so)
            return False
        if 0 not in ins[j]:  # a loop dim: the first of the operand and of the result, no loop dim in front
            return 0 not in out and len(shape) - len(ins[j]) == len(result_shape) - len(out)
        names_in, names_out = _core_names(ufunc.signature, [len(a) for a in ins], len(out), placed)
        if names_in is None or 0 not in out:
            return False
        return names_in[j][ins[j].index(0)] == names_out[out.index(0)]  # a core dim the result keeps (matmul's n)
    if ufunc.__name__ == "matmul" and len(args) == 2:
        return matmul_rows(len(_shape(args[0])), len(_shape(args[1])))[j]
    core_in, core_out = _core_dims(ufunc.signature)
    loop = len(shape) - core_in[j]
    return loop >= 1 and loop == len(result_shape) - core_out


def _placed(ufunc, kwargs):
    """A gufunc call's keywords that move its core dims (``axes=``, ``axis=``, ``keepdims=``), or None."""
    if ufunc.signature is None:
        return None
    placed = {k: kwargs[k] for k in ("axes", "axis", "keepdims") if kwargs.get(k) is not None}
    return placed if "axes" in placed or "axis" in placed else None


def _flat(x, written=None):
    """``x`` with every LoDTensor in it (nested in lists and tuples too) as its flat data (NumPy's view);
    ``written``: ``(func, name, targets)``, the LoDTensors ``func`` writes into, as views of their memory."""
    if isinstance(x, UfuncMixin):
        if written is not None and any(x is w for w in written[2]):
            return _written(x, written[0], written[1])
        return x.__array__()
    if isinstance(x, (list, tuple)):
        return type(x)(_flat(v, written) for v in x) if type(x) in (list, tuple) else x
    return x


def _lod_tensors(x):
    """Every LoDTensor in ``x`` (an argument, or lists, tuples and dicts of them)."""
    if isinstance(x, UfuncMixin):
        yield x
    elif type(x) in (list, tuple):
        for v in x:
            yield from _lod_tensors(v)
    elif type(x) is dict:
        for v in x.values():
            yield from _lod_tensors(v)


@functools.lru_cache(maxsize=512)
def _out_position(func):
    """The position of ``func``'s ``out`` parameter where it may be passed by position, else None."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # no signature to read: only out= by name is seen
        return None
    for i, p in enumerate(parameters):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            return None
        if p.name == "out":
            return i
    return None


#: NumPy functions that write elementwise into their first argument (no ``out`` parameter) -> its name;
#: that argument is checked as an ``out=`` is
_WRITE_FIRST = {np.copyto: "dst", np.putmask: "a"}
#: NumPy functions that write into their first argument by position (no lod to check: flat positions) -> its name
_WRITE_AT = {np.put: "a", np.place: "arr", np.fill_diagonal: "a", np.put_along_axis: "arr", **_WRITE_FIRST}


def host_view(data, be):
    """``data`` as a NumPy array of its own memory, or None where NumPy cannot see it without a copy
    (data on a device, a dtype NumPy lacks such as torch's bfloat16: ``to_numpy`` gives a copy)."""
    if be.device_of(data) != "cpu":
        return None
    host = be.to_numpy(data)
    if host is data or host.size == 0:
        return host
    try:  # the data's own memory, as DLPack lends it to NumPy (which refuses a dtype it lacks)
        own = np.from_dlpack(be.detach(data))
    except (BufferError, RuntimeError, TypeError, ValueError):
        return None
    same = host.__array_interface__["data"][0] == own.__array_interface__["data"][0] and host.dtype == own.dtype
    return host if same else None


def _written(x, func, name):
    """The NumPy view of LoDTensor ``x`` that ``func`` writes into; refused where a write could not reach
    ``x``'s data (it would fill a copy and be lost) or would go around torch's autograd."""
    data = x._check_fits(f"numpy.{func.__name__}")
    where = f"numpy.{func.__name__}: {name}= is a LoDTensor of {data.dtype} data"
    if x.backend.requires_grad(data):
        raise RuntimeError(f"{where} that requires grad; a NumPy write goes around autograd (torch refuses "
                           f"such in-place writes too). Write into <tensor>.data.detach() or use torch's functions")
    host = host_view(data, x.backend)
    if host is None:
        raise TypeError(f"{where} on {x.backend.device_of(data)}, which NumPy cannot write in place (it would "
                        f"fill a host copy and lose the result); use the torch/CuPy function on <tensor>.data")
    return host


def _keeps_rows(axis, ndim):
    """Whether a reduction (an accumulation) along ``axis`` of an operand of ``ndim`` dims keeps its rows:
    ``axis`` names dims and none of them is dim 0."""
    if axis is None or ndim < 2:
        return False
    try:
        return all(int(a) % ndim != 0 for a in (axis if isinstance(axis, tuple) else (axis,)))
    except (TypeError, ValueError):  # NumPy's own error, from the call
        return True


@functools.lru_cache(maxsize=512)
def _signature(func):
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def _check_rows_kept(func, args, kwargs, o):
    """A NumPy function with an ``axis`` (``np.sum``, ``np.cumsum``, ``np.take``...) writing into ``out=`` a
    LoDTensor with a lod: refused, before anything is written, where the axis reduces, flattens or reorders
    the rows of its first LoDTensor argument (``np.sum(t, axis=0, out=o)`` gave column sums under a row lod)."""
    first = next((x for x in _lod_tensors((args, kwargs)) if x is not o and x._lod._levels), None)
    signature = _signature(func)
    if first is None or signature is None or "axis" not in signature.parameters:
        return
    try:
        axis = signature.bind(*args, **kwargs).arguments.get("axis", signature.parameters["axis"].default)
    except TypeError:  # NumPy's own error, from the call
        return
    if not _keeps_rows(axis, len(_shape(first._data))):
        raise LoDError(
            f"numpy.{func.__name__}: out= is a LoDTensor with lod {o._lod!r}, but axis={axis!r} reduces, flattens "
            f"or reorders the rows of the argument with that lod; pass out=<tensor>.data for plain values"
        )


def _refuse_foreign(name, operands):
    """A LoDTensor with a nested tensor or a masked array in one NumPy call: refused, naming them (a
    NestedTensor would have been wrapped as a LoDTensor's data, or a one-row LoDTensor read as a dense bias;
    a masked result's mask would be dropped by every later read)."""
    for x in operands:
        if isinstance(x, np.ma.MaskedArray):
            raise TypeError(f"numpy.{name}: a LoDTensor holds no mask, so a masked array operand's mask would be "
                            f"lost; pass <masked>.filled(<value>) or np.ma.getdata(<masked>)")
        if not isinstance(x, UfuncMixin) and getattr(x, "is_nested", False) is True:
            raise TypeError(
                f"numpy.{name}: a LoDTensor and a nested tensor ({type(x).__module__}.{type(x).__name__}) do "
                f"not combine; convert one first: nt.to_lod_tensor(), or lodtensor.nested.as_nested_tensor(t)"
            )


def _check_function_out(func, arguments, o):
    name = _WRITE_AT.get(func, "out")
    for x in _lod_tensors(arguments):
        if x is not o and x._lod._levels and x._lod is not o._lod and x._lod != o._lod:
            raise LoDError(
                f"numpy.{getattr(func, '__name__', func)}: {name}= holds lod {o._lod!r} but an argument has lod "
                f"{x._lod!r}; the result would be written under another lod. Use a {name}= with the arguments' "
                f"lod, or {name}=<tensor>.data"
            )


class UfuncMixin(NDArrayOperatorsMixin):
    """Operators and ``__array_ufunc__`` for a class with ``_data``, ``_lod`` and ``_new``."""

    __slots__ = ()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        _refuse_foreign(name, (*inputs, *(kwargs.get("out") or ())))
        # each operand's data and lod read once (a shallow copy): another thread's set_lod() midway
        # must not give the result one state's rows under the other's lod
        inputs = tuple(copy(x) if isinstance(x, UfuncMixin) else x for x in inputs)
        args = [x._check_fits(name) if isinstance(x, UfuncMixin) else x for x in inputs]
        out = kwargs.get("out")
        if out is not None:
            lod_outs = [o for o in out if isinstance(o, UfuncMixin) and o._lod._levels]
            kwargs["out"] = tuple(o._check_fits(name) if isinstance(o, UfuncMixin) else o for o in out)
            for o in lod_outs:
                self._check_out(ufunc, method, inputs, args, o, kwargs)
            given = next((o for o in kwargs["out"] if o is not None), None)
            if method == "__call__" and not lod_outs and given is not None:  # operands of two lods: refused
                self._row_lod(ufunc, inputs, args, _shape(given), _placed(ufunc, kwargs))  # before a write
        where = kwargs.get("where")
        if isinstance(where, UfuncMixin):  # a mask of the same rows: its lod must be the operands' (and out's)
            for x in (*inputs, *(out or ())):
                if where._lod._levels and isinstance(x, UfuncMixin) and x._lod._levels and where._lod != x._lod:
                    raise LoDError(f"{name}: where= has lod {where._lod!r} but the operands have {x._lod!r}; "
                                   f"a mask over the rows needs the same lod")
            kwargs["where"] = where._check_fits(name)
        # a 0-d NumPy array is a number here (NumPy makes one of the scalar in ``np.int64(1) < t``)
        args = [a[()] if type(a) is np.ndarray and not a.ndim else a for a in args]
        be = backend_of(*args, *kwargs.get("out", ()))
        result = be.apply_ufunc(ufunc, method, *args, **kwargs)
        if method != "__call__":
            return result if out is None or out[0] is None else out[0]  # NumPy returns the out= object
        first = result[0] if isinstance(result, tuple) else result
        lod = self._row_lod(ufunc, inputs, args, _shape(first), _placed(ufunc, kwargs))
        if isinstance(result, tuple):  # out=(o, None): NumPy returns o and a new array for the None
            given = out or (None,) * len(result)
            return tuple(self._wrap_result(r, lod) if o is None else o for r, o in zip(result, given))
        return self._wrap_result(result, lod) if out is None else out[0]

    def __contains__(self, value):
        """``value in t``: whether an element equals ``value``, as ``value in t.data`` for NumPy's and torch's
        arrays (iteration gives the sequences, but without this Python asked each sequence's truth value: an
        answer or an "ambiguous" error depending on the sequence lengths)."""
        equal = self == value
        return bool((equal._data if isinstance(equal, UfuncMixin) else equal).any())

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions that are not ufuncs (``np.sum``, ``np.concatenate``, ``np.flip``, ``np.shape``,
        ...) see every LoDTensor among their arguments as its flat data and return plain arrays.

        ``out=`` a LoDTensor with a lod is refused, before anything is written, where an argument holds
        another lod (``np.clip(t, 0, 1, out=o)`` would write ``t``'s rows under ``o``'s lod)."""
        out, at, key = kwargs.get("out"), None, "out"
        if func in _WRITE_FIRST:  # np.copyto(dst, src) / np.putmask(a, mask, v): by position or dst= by name
            if args:
                out, at = args[0], 0
            else:
                key = _WRITE_FIRST[func]
                out = kwargs.get(key)
        elif out is None and len(args) > 1:  # out given by position: np.clip(t, 0, 4, o)
            at = _out_position(func)
            if at is not None and at < len(args):
                out = args[at]
            else:
                at = None
        targets = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, UfuncMixin)]
        for o in targets:
            if o._lod._levels:
                others = args if at is None else args[:at] + args[at + 1 :]
                _check_function_out(func, (others, {k: v for k, v in kwargs.items() if k != key}), o)
                _check_rows_kept(func, args, kwargs, o)
        name = _WRITE_AT.get(func, "out")
        if func in _WRITE_AT and func not in _WRITE_FIRST:  # np.put(a, ...): a is written, by position or name
            first = args[0] if args else kwargs.get(name)
            if isinstance(first, UfuncMixin):
                targets.append(first)
                if func is np.place and first._lod._levels:  # its mask is elementwise over arr's rows, as putmask's
                    _check_function_out(func, args[1:2] or kwargs.get("mask"), first)
        written = (func, name, targets) if targets else None
        flat = {k: _flat(value, written) for k, value in kwargs.items()}
        flat_args = _flat(args, written)
        result = func(*flat_args, **flat)
        given = flat.get(key) if at is None else flat_args[at]  # what NumPy was given as its out
        if isinstance(out, UfuncMixin) and result is given:  # NumPy returns the out= object itself
            return out
        return result

    @staticmethod
    def _row_lod(ufunc, inputs, args, result_shape, placed=None):
        """The lod of a ``__call__`` result of ``result_shape``, or None when its rows are not the operands'."""
        lod = None
        for j, x in enumerate(inputs):
            if not isinstance(x, UfuncMixin):
                continue
            mine = x._lod
            if not mine._levels:  # a LoDTensor without a lod is a plain array here
                lod = mine if lod is None else lod
                continue
            if not _aligned(ufunc, j, args, result_shape, placed):  # (shapes asked only of LoDTensor operands)
                return None
            if lod is not None and lod._levels and lod is not mine and lod != mine:
                raise LoDError(
                    f"{ufunc.__name__}: operands have different lods, {lod!r} and {mine!r}; "
                    f"elementwise ops need the same lod"
                )
            if lod is None or not lod._levels:
                lod = mine
        return lod

    def _check_out(self, ufunc, method, inputs, args, o, kwargs):
        """Refuse, before anything is written, an ``out=`` LoDTensor whose lod would not describe the result."""
        name = ufunc.__name__
        if method in ("reduce", "accumulate", "reduceat") and _keeps_rows(kwargs.get("axis", 0), len(_shape(args[0]))):
            source = inputs[0]._lod if isinstance(inputs[0], UfuncMixin) else None
            if source is not None and source._levels and source is not o._lod and source != o._lod:
                raise LoDError(f"numpy.{name}.{method}: out= holds lod {o._lod!r} but the operand has lod "
                               f"{source!r}; use an out= with the operand's lod, or out=<tensor>.data")
            return  # along other dims than the rows, as np.sum(t, axis=1, out=o)
        if method != "__call__":
            raise LoDError(
                f"numpy.{name}.{method}: out= is a LoDTensor with lod {o._lod!r}, but this {method} does not "
                f"keep the operand's rows (dim 0 reduced, or no rows of its own); pass out=<tensor>.data"
            )
        lod = self._row_lod(ufunc, inputs, args, _shape(o._data), _placed(ufunc, kwargs))
        rows_moved = lod is None and any(isinstance(x, UfuncMixin) and x._lod._levels for x in inputs)
        if rows_moved and _placed(ufunc, kwargs):  # axes= NumPy refuses: its error, from a call that writes nothing
            backend_of(*args).apply_ufunc(ufunc, method, *args, **{k: v for k, v in kwargs.items() if k != "out"})
        if rows_moved:
            raise LoDError(
                f"numpy.{name}: out= is a LoDTensor of shape {tuple(o._data.shape)} with lod {o._lod!r}, but the "
                f"result's rows are not the rows of the LoDTensor operands (broadcast to new leading dims or other "
                f"rows); pass out=<tensor>.data to write plain rows"
            )
        if lod is not None and lod._levels and lod is not o._lod and lod != o._lod:
            raise LoDError(
                f"numpy.{name}: out= holds lod {o._lod!r} but the operands have lod {lod!r}; the result would be "
                f"written under another lod. Use an out= with the operands' lod, or out=<tensor>.data"
            )

    def _wrap_result(self, result, lod):
        if lod is not None and getattr(result, "ndim", 0) >= 1 and lod.fits(result.shape[0]):
            return self._new(plain_array(result), lod)  # (np.matrix operand: a matrix result, its rows plain)
        return result


def _comparison(operator, name):
    """``==``/``!=`` as ndarray's: where NumPy has no loop for the operand types (``t == "a"``), all
    False (``!=``: True) rows under the lod instead of the ufunc's error."""

    def method(self, other):
        try:
            return operator(self, other)
        except TypeError as error:  # NumPy's _UFuncNoLoopError only; other TypeErrors propagate
            no_loop = type(error).__qualname__ == "_UFuncNoLoopError" or other is None or isinstance(
                other, (str, bytes))  # NumPy has no loop; torch data takes no such operand
            if not no_loop or np.ndim(other) != 0 or self._data is None:  # scalars only
                raise
            # on the data's own backend and device (torch data stays torch; nothing is read back)
            be = self.backend
            data = be.full(tuple(self._data.shape), name == "__ne__", be.as_dtype("bool"), self._data)
            return self._new(data, self._lod) if self._lod.fits(data.shape[0]) else data

    return method


def _operator(name):
    """Operator ``name`` of the NumPy mixin, with a traced form while ``torch.compile`` traces."""
    eager = NDArrayOperatorsMixin.__dict__[name]

    def method(self, *other):
        dynamo = sys.modules.get("torch._dynamo")  # _compile.compiling(), inlined: every eager operator runs this
        if dynamo is not None and getattr(dynamo, "is_compiling", _compile.never)():  # (half imported: no)
            traced = _compile.HOOKS.get("operator")
            if traced is not None:
                return traced(name, eager, self, *other)
            return _compile.eager(eager, self, *other)
        return eager(self, *other)

    if name in ("__eq__", "__ne__"):
        method = _comparison(method, name)
    method.__name__ = name
    method.__qualname__ = f"UfuncMixin.{name}"
    method.__doc__ = eager.__doc__
    return method


for _name, _method in list(vars(NDArrayOperatorsMixin).items()):
    if callable(_method):  # every operator the mixin defines (comparisons, arithmetic, reflected, in-place, unary)
        setattr(UfuncMixin, _name, _operator(_name))
