"""``LoDTensor.__torch_function__``: torch functions and modules on LoDTensors, installed from here.

Row-wise functions (``torch.tanh(t)``, ``F.linear``, ``nn.Embedding(...)(ids)``,
``F.layer_norm``, a reduction over a feature dim...) run on the flat data and
keep the lod, with autograd: the data is a torch tensor and the result holds
torch's output. Functions whose meaning depends on the sequence structure (a
softmax or a reduction over dim 0, a reshape or concatenation of rows) raise a
TypeError naming the sequence op to use instead. NumPy-backed tensors take
part too: their data goes to torch without a copy (``torch.from_numpy``).

The core (``lodtensor.tensor``) imports nothing from here; ``lodtensor``
imports ``lodtensor.nested``, which attaches the method with
``LoDTensor._attach``.
"""

import numbers

from ..backend import backend_name_of, get_backend
from ..tensor import LoDTensor
from ._construct import from_lod_tensor

__all__ = ["lod_torch_function", "STRUCTURAL"]

_SEQ = "lodtensor.sequence"

# torch function name -> (what it does over dim 0, the op to use instead). A function here is row-wise when
# called over another dim (``dim=1``), structural over dim 0 or over every dim (``dim=None``).
_POOL = f"{_SEQ}.sequence_pool(t, pool_type)"
_NESTED = "t.to_nested() and the lodtensor.nested reduction with dim=1"
STRUCTURAL = {
    "softmax": f"{_SEQ}.sequence_softmax(t)",
    "log_softmax": f"{_SEQ}.sequence_softmax(t) (then log), or t.to_nested() and ln.log_softmax(nt, 1)",
    "sum": f"{_POOL} with pool_type='sum'",
    "mean": f"{_POOL} with pool_type='average'",
    "max": f"{_POOL} with pool_type='max'",
    "amax": f"{_POOL} with pool_type='max'",
    "min": f"{_POOL} with pool_type='min'" ,
    "amin": f"{_POOL} with pool_type='min'",
    "prod": _NESTED, "any": _NESTED, "all": _NESTED, "argmax": _NESTED, "argmin": _NESTED,
    "std": _NESTED, "var": _NESTED, "logsumexp": _NESTED, "median": _NESTED, "nansum": _NESTED,
    "norm": _NESTED, "count_nonzero": _NESTED,
    "cumsum": f"t.to_nested() (a running sum within each sequence) or {_SEQ} ops",
    "cumprod": "t.to_nested()", "cummax": "t.to_nested()", "cummin": "t.to_nested()",
    "sort": "t.to_nested()", "argsort": "t.to_nested()", "topk": "t.to_nested()",
    "flip": f"{_SEQ}.sequence_reverse(t)", "roll": "t.to_nested()",
}  # fmt: skip

# Functions that always mix or reshape rows: the lod cannot follow their result.
_ROW_MIXING = {
    "reshape": "t.to_nested() and ln.reshape, or t.data.reshape(...) for a plain tensor",
    "view": "t.to_nested() and ln.view, or t.data.view(...) for a plain tensor",
    "flatten": "t.to_nested() and ln.flatten (dims from 1 on), or t.data",
    "transpose": "t.to_nested() and ln.transpose (dims from 1 on), or t.data",
    "permute": "t.to_nested(), or t.data",
    "t": "t.data.t()",
    "cat": f"{_SEQ}.sequence_concat([...]) to join sequences, or t.data",
    "concat": f"{_SEQ}.sequence_concat([...])",
    "stack": "t.to_nested(), or t.data",
    "squeeze": "t.to_nested() and ln.squeeze (dims from 1 on)",
    "unsqueeze": "t.to_nested() and ln.unsqueeze (dims from 1 on)",
}

#: these keep the rows unless a dim argument names dim 0 (or is left to default to it)
_DIM0_ONLY = {"squeeze": None, "unsqueeze": None, "transpose": None, "flatten": 0, "cat": 0, "concat": 0,
              "stack": 0}
_DIM_POSITION = 1  # where a torch function takes ``dim`` positionally


def _mixes_rows(name, args, kwargs, ndim):
    if name not in _DIM0_ONLY:
        return True
    dims = [a for a in args[1:] if isinstance(a, numbers.Integral)]
    dims += [kwargs[k] for k in ("dim", "dim0", "dim1", "start_dim") if k in kwargs]
    if not dims and _DIM0_ONLY[name] is not None:
        dims = [_DIM0_ONLY[name]]
    width = ndim + (name in ("unsqueeze", "stack"))  # these count the new dim too
    return any(int(d) % max(width, 1) == 0 for d in dims)


def _name(func):
    return getattr(func, "__name__", None) or repr(func)


def _dim_of(func, args, kwargs):
    """The ``dim`` argument of a call (None when absent)."""
    if "dim" in kwargs:
        return kwargs["dim"]
    if "axis" in kwargs:
        return kwargs["axis"]
    if len(args) > _DIM_POSITION and isinstance(args[_DIM_POSITION], (numbers.Integral, tuple, list)):
        return args[_DIM_POSITION]
    return None


def _touches_rows(dim, ndim):
    if dim is None:
        return True
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return any(int(d) % max(ndim, 1) == 0 for d in dims)


def _structural_error(func, t, advice, what):
    return TypeError(
        f"torch.{_name(func)} {what} of a LoDTensor would mix its sequences (lod {t.lod()}); use {advice} "
        f"for the per-sequence result, or call it on t.data for a plain tensor"
    )


def _to_torch(data):
    if backend_name_of(data) == "torch":
        return data
    return get_backend("torch").asarray(data)


def _unwrap(x, found):
    if isinstance(x, LoDTensor):
        found.append(x)
        return _to_torch(x._check_fits("torch function"))
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, found) for v in x)
    return x


def _wrap(result, t):
    """Tensors with one row per data row get ``t``'s lod back; anything else is returned as torch gave it."""
    if isinstance(result, (list, tuple)):
        items = [_wrap(r, t) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else type(result)(items)
    rows = t._num_rows_or_none()
    if getattr(result, "ndim", 0) >= 1 and rows is not None and int(result.shape[0]) == rows and \
            backend_name_of(result) == "torch":
        return t._new(result, t._lod)
    return result


def lod_torch_function(cls, func, types, args=(), kwargs=None):
    """Run ``func`` on the data of the LoDTensor arguments; see the module docstring."""
    kwargs = kwargs or {}
    name = _name(func)
    first = next((x for x in (*args, *kwargs.values()) if isinstance(x, LoDTensor)), None)
    if first is None:  # a LoDTensor inside a list (torch.cat([t, t]))
        first = next(x for a in args if isinstance(a, (list, tuple)) for x in a if isinstance(x, LoDTensor))
    ndim = first.data.ndim if first.data is not None else 1
    if name in _ROW_MIXING and _mixes_rows(name, args, kwargs, ndim):
        raise _structural_error(func, first, _ROW_MIXING[name], "over the rows")
    if name in STRUCTURAL and _touches_rows(_dim_of(func, args, kwargs), ndim):
        raise _structural_error(func, first, STRUCTURAL[name], "over dim 0 (the rows)")
    if name == "matmul" and len(args) > 1 and isinstance(args[1], LoDTensor):
        raise _structural_error(func, first, "t.to_nested() and ln.matmul / ln.bmm", "with the rows as the "
                                "contraction dim")
    found = []
    new_args = _unwrap(args, found)
    new_kwargs = {k: _unwrap(v, found) for k, v in kwargs.items()}
    lods = {id(t._lod): t for t in found}
    if len(lods) > 1 and any(t._lod != first._lod for t in found):
        raise TypeError(
            f"torch.{name}: LoDTensor arguments have different lods ({first.lod()} vs "
            f"{next(t for t in found if t._lod != first._lod).lod()}); elementwise ops need the same lod"
        )
    result = func(*new_args, **new_kwargs)
    return _wrap(result, first)


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
