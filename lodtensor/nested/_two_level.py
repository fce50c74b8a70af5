"""Two ragged dims (beyond torch.nested): a list of lists of arrays, the LoD's two levels.

``ln.nested_tensor([[s00, s01], [s10]])`` (documents x sentences, each
sentence ``(words, hidden)``) is a nested tensor of shape
``(documents, (sentences), (words), hidden)``: the inner level is an ordinary
nested tensor of the sentences, and ``_outer`` holds the documents' offsets
into it (validated through ``lodtensor.lod.LoD``; built by ``_construct.from_lists``). Every registered op that is
defined per component runs on the inner level, its dims shifted by one
(``dim=2`` of the documents is ``dim=1`` of the sentences), and the result gets
the documents back: a per-sentence reduction over the words gives
``(documents, (sentences), hidden)``. Ops over dim 1 (across the sentences of
a document) raise; pool the words first.
"""

import inspect

import numpy as np

from .._dense import pad_level
from ..errors import ShapeError
from ..lod import LoD
from ..tensor import LoDTensor
from ._construct import attach_documents
from ._jagged import nested_tensor_from_jagged
from ._tensor import NestedTensor, documents, make, normalize_dim

__all__ = ["call", "documents", "padded", "lod_tensor"]

_DIM_PARAMS = ("dim", "dim0", "dim1", "start_dim", "end_dim")
#: ops whose arguments describe the whole shape, not one dim: not defined for two ragged levels
_WHOLE_SHAPE = {"reshape", "view", "reshape_as", "select", "unbind", "to_padded", "to_masked", "to_packed",
                "to_packed_sequence", "expand"}
_SIGNATURES = {}


def strip(nt):
    return make(nt._buffer, nt._struct, nt._layout)


def padded(to_padded_tensor, nt, padding, output_size=None):
    """``(documents, max sentences, *max sizes)``, padded with ``padding``; ``to_padded_tensor`` pads the sentences."""
    inner = to_padded_tensor(strip(nt), padding)
    be = nt.backend
    lod = LoD([nt._outer], num_rows=int(inner.shape[0]))
    out, _ = pad_level(be, inner, lod, 0, padding, None, None, where="to_padded_tensor()")
    if output_size is not None and tuple(output_size) != tuple(out.shape):
        raise ShapeError(f"to_padded_tensor(): output_size {tuple(output_size)} must be {tuple(out.shape)} here")
    return out


def lod_tensor(nt):
    """The two-level :class:`~lodtensor.LoDTensor` (documents, sentences) over the words' rows; shares the buffer."""
    st = nt._struct
    if not st.is_lod:
        raise ShapeError("to_lod_tensor(): the sentences must be ragged in their first dim only")
    offsets, row_shape = st.rows()
    data = nt._buffer.reshape((int(offsets[-1]),) + row_shape)
    return LoDTensor(data, [nt._outer.tolist(), offsets.tolist()])  # the LoD gate checks both levels


def _dims(name, fn, args, kwargs, ndim):
    """``args``/``kwargs`` with the dim arguments moved from the documents' numbering to the sentences'."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            return args, kwargs
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs  # the op itself reports the bad call
    width = ndim + (name == "unsqueeze")
    for key in _DIM_PARAMS:
        if key not in bound.arguments or bound.arguments[key] is None:
            continue
        value = bound.arguments[key]
        many = isinstance(value, (tuple, list))
        moved = []
        for d in value if many else (value,):
            d = normalize_dim(d, width)
            if d == 0:
                raise ShapeError(f"{name}(): dim 0 (the documents) is the batch dim of a two-level nested tensor")
            if d == 1:
                raise ShapeError(
                    f"{name}(): dim 1 is the outer ragged dim (the sentences of each document) of a two-level "
                    f"nested tensor; {name} is defined per sentence (dims 2 and up): pool the words first"
                )
            moved.append(d - 1)
        bound.arguments[key] = type(value)(moved) if many else moved[0]
    return bound.args, bound.kwargs


def call(name, fn, args, kwargs):
    """Run op ``name`` (implementation ``fn``) on the inner level of its two-level arguments."""
    if name == "to_padded_tensor":
        return padded(fn, *args, **kwargs)
    if name == "to_lod_tensor":
        return lod_tensor(*args, **kwargs)
    if name in _WHOLE_SHAPE:
        raise ShapeError(f"{name}() is not defined for a nested tensor with two ragged dims; unbind() the documents")
    outer, originals = None, {}

    def inner(x):
        nonlocal outer
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(inner(v) for v in x)
        o = getattr(x, "_outer", None)
        if o is None:
            return x
        if outer is None:
            outer = o
        elif not np.array_equal(outer, o):
            raise ShapeError(f"{name}(): the two-level nested tensors have different document structures")
        plain = strip(x)
        originals[id(plain)] = (plain, x)
        return plain

    new_args = [inner(a) for a in args]
    new_kwargs = {k: inner(v) for k, v in kwargs.items()}
    ref = next(v for v, _ in originals.values())
    new_args, new_kwargs = _dims(name, fn, new_args, new_kwargs, ref.dim() + 1)
    return _rewrap(fn(*new_args, **new_kwargs), outer, ref._struct.n, originals)


def _rewrap(result, outer, count, originals):
    if isinstance(result, tuple):
        items = [_rewrap(r, outer, count, originals) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    if isinstance(result, NestedTensor):
        if id(result) in originals and originals[id(result)][0] is result:
            return originals[id(result)][1]  # an in-place op returns the tensor it was called on
        return attach_documents(result, outer) if result._struct.n == count else result
    shape = getattr(result, "shape", ())
    if len(shape) >= 1 and int(shape[0]) == count:  # one row per sentence: (documents, (sentences), ...)
        return nested_tensor_from_jagged(result, outer)
    return result
