"""``LoDTensor.__torch_function__``: torch functions and modules on LoDTensors, installed from here.

A result keeps the lod only when **result row i is a function of input row i
alone**, decided from the call's real arguments by the declared table of
:mod:`._row_table` (see there for every rule):

- row-wise calls (``torch.tanh(t)``, ``F.linear``, ``nn.Embedding(...)(ids)``,
  ``F.layer_norm``, a softmax, sort or reduction over a feature dim,
  ``torch.topk(t, k, 1)``) run on the flat data and keep the lod, with
  autograd: the data is a torch tensor and the result holds torch's output;
- calls over the rows whose meaning depends on the sequences (a softmax,
  sort, cumulative sum or reduction over dim 0, ``flip``/``roll``/``msort``/
  ``flipud`` of the rows, reshaping or concatenating rows) raise a TypeError
  naming the sequence op to use instead;
- other calls that move, select or mix rows (``index_select(t, 0, perm)``,
  ``gather``/``narrow``/``split`` along dim 0, an operand that broadcasts new
  dims in front) and **functions the table does not know** return plain
  torch data, without the lod.

NumPy-backed tensors take part too: their data goes to torch without a copy
(``torch.from_numpy``). An ``out=`` LoDTensor is written only when the result
keeps its lod; otherwise the call raises before torch runs.

Under ``torch.compile`` the same rules run in the traced form of
:mod:`._lod_compile` (on the data only, the input's LoD object kept, nothing
read from the offsets); what it does not take runs this eager code behind a
graph break.

The core (``lodtensor.tensor``) imports nothing from here; ``lodtensor``
imports ``lodtensor.nested``, which attaches the method with
``LoDTensor._attach``.
"""

import sys

from .._compile import compiling, eager_under_compile
from ..backend import get_backend
from ..tensor import LoDTensor
from . import _lod_compile
from ._construct import from_lod_tensor
from ._row_rules import decide
from ._row_table import ADVICE

__all__ = ["lod_torch_function", "STRUCTURAL"]

#: functions whose calls over the rows raise with the per-sequence op to use (name -> advice)
STRUCTURAL = ADVICE


def _name(func):
    return getattr(func, "__name__", None) or repr(func)


def _what(rule):
    kind = rule[0] if rule else None
    if kind == "matmul":
        return "with the rows as the contraction dim"
    if kind in ("reshape", "fixed", "ndim", "swap", "permute", "movedim") or (kind == "dim" and rule[3] == "new"):
        return "over the rows"
    return "over dim 0 (the rows)"


def _structural_error(func, t, advice, what):
    return TypeError(
        f"torch.{_name(func)} {what} of a LoDTensor would mix its sequences (lod {t.lod()}); use {advice} "
        f"for the per-sequence result, or call it on t.data for a plain tensor"
    )


def _tensor_type():
    """``torch.Tensor``: this module is torch's ``__torch_function__`` protocol, so torch is loaded when it runs."""
    return sys.modules["torch"].Tensor


def _to_torch(data):
    if isinstance(data, _tensor_type()):
        return data
    return get_backend("torch").asarray(data)  # NumPy rows, shared with torch


def _unwrap(x):
    return _lod_compile.map_items(
        x, lambda v: _to_torch(v._check_fits("torch function")) if isinstance(v, LoDTensor) else v)


def _wrap(result, decision):
    """Outputs with the carriers' rows get their lod back; anything else is returned as torch gave it."""
    def leaf(r):
        if isinstance(r, _tensor_type()) and decision.fits(r):
            first = decision.carriers[0]
            return first._new(r, first._lod)
        return r

    return _lod_compile.map_items(result, leaf)


def _same_lods(name, carriers):
    first = carriers[0]
    other = next((t for t in carriers[1:] if t._lod is not first._lod and t._lod != first._lod), None)
    if other is not None:
        raise TypeError(
            f"torch.{name}: LoDTensor arguments have different lods ({first.lod()} vs {other.lod()}); "
            f"elementwise ops need the same lod"
        )


def _check_out(func, decision, args, kwargs):
    """An ``out=`` LoDTensor with a lod is written only when the result will carry that lod."""
    outs = kwargs.get("out")
    outs = [o for o in (outs if isinstance(outs, (list, tuple)) else (outs,)) if isinstance(o, LoDTensor)]
    if not any(o.lod_level for o in outs):
        return
    ok = decision.kind == "keep"
    if ok and decision.rank == "same":  # elementwise: the broadcast shape must keep the rows in front
        import torch  # noqa: PLC0415 - torch is loaded: a torch function is being called

        shapes = [tuple(a.data.shape) if isinstance(a, LoDTensor) else tuple(a.shape)
                  for a in (*args, *(v for k, v in kwargs.items() if k != "out")) if hasattr(a, "ndim")]
        try:
            shape = torch.broadcast_shapes(*shapes)
        except RuntimeError:
            return  # torch raises its own error
        ins = [c for c in decision.carriers if all(c is not o for o in outs)]
        ok = all(len(shape) == c.data.ndim and shape[:1] == tuple(c.data.shape[:1]) for c in ins)
    if not ok:
        raise TypeError(
            f"torch.{_name(func)}: out= is a LoDTensor with lod {outs[0].lod()}, but the result's rows are not "
            f"the rows of the LoDTensor input(s); pass out=<tensor>.data to write plain rows"
        )


def lod_torch_function(cls, func, types, args=(), kwargs=None):
    """Run ``func`` on the data of the LoDTensor arguments; see the module docstring."""
    kwargs = kwargs or {}
    if compiling():  # the traced form: no lod read, no host check in the graph (see _lod_compile)
        return _lod_compile.torch_function(_eager_torch_function, cls, func, types, args, kwargs)
    return _eager_torch_function(cls, func, types, args, kwargs)


def _eager_torch_function(cls, func, types, args, kwargs):
    name = _name(func)
    decision = decide(func, args, kwargs)
    if decision.kind == "mix" and name in ADVICE and decision.carriers:
        raise _structural_error(func, decision.carriers[0], ADVICE[name], _what(decision.rule))
    _check_out(func, decision, args, kwargs)
    if decision.kind == "keep" and decision.carriers:
        _same_lods(name, decision.carriers)
    result = func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
    if decision.kind == "keep":
        return _wrap(result, decision)
    if decision.kind == "reshape":
        if decision.fits(result):
            return _wrap(result, decision)
        if name in ADVICE:
            raise _structural_error(func, decision.carriers[0], ADVICE[name], _what(decision.rule))
    return result


@eager_under_compile  # the size table comes from the host offsets: under torch.compile, behind a graph break
def to_nested(self, level=-1):
    """The sequences of ``level`` as a :class:`lodtensor.nested.NestedTensor`.

    Each sequence becomes one component of shape ``(length, *row_shape)``.
    The nested tensor's buffer is ``data`` itself (shared, no copy) when
    ``data`` is C-contiguous.

    >>> import numpy as np, lodtensor
    >>> nt = lodtensor.LoDTensor(np.arange(5.0), [[0, 2, 5]]).to_nested()
    >>> nt.nested_size().tolist()
    [[2], [3]]
    """
    return from_lod_tensor(self, level)


LoDTensor._attach(__torch_function__=classmethod(lod_torch_function), to_nested=to_nested)
