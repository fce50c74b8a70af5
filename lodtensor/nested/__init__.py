"""lodtensor.nested: the torch.nested API on the LoD core.

A :class:`NestedTensor` packs arrays of equal rank and different sizes into
one flat buffer with a size table; code calls the same functions it would call
on dense arrays (``softmax``, ``linear``, ``matmul``, ``layer_norm``...) and
skips padding. When only the first component dim is ragged the nested tensor
is a one-level :class:`~lodtensor.LoDTensor` and the ops are single calls on
the flat buffer. With torch installed, ``torch.relu(nt)``, ``F.linear``,
``nn.LayerNorm`` and friends accept a NestedTensor through
``__torch_function__``.

>>> import numpy as np
>>> import lodtensor.nested as ln
>>> nt = ln.nested_tensor([np.ones((2, 4)), np.ones((3, 4))])
>>> ln.softmax(ln.linear(nt, np.eye(4)), 1).to_padded_tensor(0.0)[:, :, 0].round(3).tolist()
[[0.5, 0.5, 0.0], [0.333, 0.333, 0.333]]
"""

from ..backend._threads import get_num_threads, set_num_threads
from . import (  # noqa: F401 - importing them fills the op table (and _convert the conversion methods)
    _accessors,
    _attention,
    _compile,
    _convert,
    _dims,
    _index_put,
    _layouts,
    _lod_torch,
    _methods,
    _more_ops,
    _more_pointwise,
    _nn,
    _numpy_api,
    _ops,
    _persist,
    _pointwise,
    _reductions,
    _refused,
    _shape,
    _storage,
    _tables,
    _torch_funcs,
)
from ._attention import embedding, log_softmax, rms_norm, scaled_dot_product_attention
from ._construct import as_nested_tensor, nested_tensor
from ._dims import cat, chunk, expand, flatten, split, split_with_sizes, squeeze, stack, unflatten, unsqueeze
from ._index_put import index_put, index_put_, setitem
from ._jagged import masked_select, narrow, nested_tensor_from_jagged
from ._layouts import (
    Layout,
    to_lod_tensor,
    to_masked,
    to_packed,
    to_packed_sequence,
    to_padded,
    to_tensor_list,
)
from ._matmul import bmm, matmul
from ._nn import embedding_bag, layer_norm, linear, softmax
from ._ops import (  # noqa: F401 - alpha_dropout, feature_alpha_dropout: ln.<name> as native_dropout (not __all__)
    alpha_dropout,
    clone,
    copy_,
    detach,
    dropout,
    empty_like,
    feature_alpha_dropout,
    fill_,
    full_like,
    masked_fill,
    masked_fill_,
    ones_like,
    rand_like,
    randn_like,
    zero_,
    zeros_like,
)
from ._pointwise import BINARY, UNARY
from ._reductions import all, amax, amin, any, argmax, argmin, max, mean, min, prod, sum
from ._registry import OP_TABLE
from ._shape import getitem, permute, reshape, reshape_as, select, to_padded_tensor, transpose, unbind, view
from ._storage import native_dropout  # noqa: F401 - ln.native_dropout (torch.native_dropout's; docs/nested.md)
from ._symbolic import RaggedSize, Size
from ._tensor import NestedTensor, attach_ops

#: op names that are not NestedTensor methods (they take no nested tensor first, or are protocol hooks, or
#: torch.Tensor has no such method either: native_dropout, alpha_dropout, feature_alpha_dropout)
_NOT_METHODS = {"array_ufunc", "array_gufunc", "rsub", "rdiv", "rpow", "getitem", "where_method", "polygamma_method",
                "randint_like", "torch_rrelu", "native_dropout", "alpha_dropout", "feature_alpha_dropout",
                "autograd_grad", "autograd_backward"}
attach_ops(name for name in OP_TABLE if name not in _NOT_METHODS)
_more_ops._method_aliases()

__all__ = [
    "NestedTensor",
    "nested_tensor",
    "as_nested_tensor",
    "nested_tensor_from_jagged",
    "to_padded_tensor",
    "matmul",
    "bmm",
    "linear",
    "softmax",
    "dropout",
    "masked_fill",
    "select",
    "clone",
    "detach",
    "unbind",
    "reshape",
    "view",
    "reshape_as",
    "transpose",
    "permute",
    "empty_like",
    "zeros_like",
    "randn_like",
    "layer_norm",
    "embedding_bag",
    "sum",
    "mean",
    "amax",
    "amin",
    "to_padded",
    "to_masked",
    "to_packed",
    "to_packed_sequence",
    "to_tensor_list",
    "to_lod_tensor",
    "set_num_threads",
    "get_num_threads",
    "OP_TABLE",
    "ones_like",
    "full_like",
    "rand_like",
    "fill_",
    "zero_",
    "copy_",
    "masked_fill_",
    "squeeze",
    "unsqueeze",
    "flatten",
    "unflatten",
    "expand",
    "narrow",
    "chunk",
    "split",
    "split_with_sizes",
    "cat",
    "masked_select",
    "Layout",
    "scaled_dot_product_attention",
    "log_softmax",
    "rms_norm",
    "embedding",
    "prod",
    "any",
    "all",
    "argmax",
    "argmin",
    "max",
    "min",
    "stack",
    "getitem",
    "index_put",
    "index_put_",
    "setitem",
    "Size",
    "RaggedSize",
]
# the pointwise tables' ops (exp, tanh, maximum, atan2, eq...), each generated once in _pointwise
globals().update({name: getattr(_pointwise, name) for name in (*UNARY, *BINARY, "where", "clamp")})
__all__.extend(["where", "clamp", *UNARY, *BINARY])
# torch's other pointwise ops on the jagged layout (clamp_min, lerp, float_power, threshold, softmin...)
globals().update({name: getattr(_more_ops, name) for name in _more_ops.__all__})
__all__.extend(_more_ops.__all__)
# the tables' torch aliases (clip, subtract, true_divide, arccos, less...) and rsub under their torch names too
_ALIAS_NAMES = {a: n for n, aliases in _tables.ALIASES.items() for a in aliases if "." not in a and a[0] != "_"}
globals().update({alias: OP_TABLE[name] for alias, name in {**_ALIAS_NAMES, "rsub": "rsub"}.items()})
__all__.extend([*_ALIAS_NAMES, "rsub"])
# polygamma, isclose, broadcast_to, randint_like, resolve_conj, resolve_neg
globals().update({name: getattr(_more_pointwise, name) for name in _more_pointwise.__all__})
__all__.extend(_more_pointwise.__all__)
# swapaxes, swapdims, movedim, moveaxis, adjoint, diff, isreal (and their methods; mT, is_complex, cfloat...)
globals().update({name: getattr(_methods, name) for name in _methods.__all__})
__all__.extend(_methods.__all__)
# result_type, tensor_split, dstack, repeat_interleave, l1_loss, one_hot
globals().update({name: getattr(_torch_funcs, name) for name in _torch_funcs.__all__})
__all__.extend(_torch_funcs.__all__)
