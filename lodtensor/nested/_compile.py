"""``torch.compile`` of code on nested tensors: what dynamo traces, and what it does not.

Every registered op checks :func:`compiling` first. While dynamo traces, an op
with a *traced form* here runs it: torch calls on the buffer, and a result
whose size table is a lazy :class:`~._structure.Structure` (a recipe over the
input's, resolved on first use outside the graph). A traced form reads only
Python facts that stay fixed from batch to batch (the component rank, the row
shape ``Structure.tail``, the permutation of a transposed view), never the size
table or the offsets: LoD metadata is not traced as NumPy, and the graph is
guarded on the row shape only. Nested tensors made by the constructors mark
their buffer's dim 0 dynamic (``torch._dynamo.maybe_mark_dynamic``, once dynamo
is loaded), so a batch with other lengths but the same row shape runs the same
graph, as torch's jagged layout does with its nested ints.

Any other op (and a traced form's unusual case, which answers
``NotImplemented``) runs eagerly behind ``torch._dynamo.disable``: a graph
break, with the same numbers as eager. ``scaled_dot_product_attention`` is one:
its length groups come from the host size table.

Traced forms: the pointwise tables' unary and binary ops (nested operands
sharing one Structure object, or one lineage of them with the same row shape:
``x + linear(x)``; scalars, dense operands broadcast over the row shape),
``add``/``sub``/``div``, ``linear``, ``layer_norm``, ``softmax`` and
``log_softmax`` over the last dim, ``dropout``, ``clone``, ``detach``,
``chunk``/``split`` of the last dim, ``unflatten``, ``flatten``, ``squeeze``,
``unsqueeze``, ``transpose`` and ``nested_tensor_from_jagged(values, offsets)``.
This module is torch's own integration (it is reached only under
``torch.compile``), so it calls torch directly.
"""

import functools
import operator
import sys

from ._dispatch import COMPILE_HOOKS, compiling, mark_dynamic
from ._permute import compose, regroup_columns, regroup_table
from ._structure import Structure, normalize_dim
from ._tables import BINARY, UNARY, _bind, _params
from ._tensor import NestedTensor, make, make_view

__all__ = ["compiling", "mark_dynamic", "call", "from_jagged"]


def _mark_all(result):
    if isinstance(result, NestedTensor):
        return mark_dynamic(result)
    if isinstance(result, (tuple, list)):
        for item in result:
            _mark_all(item)
    return result


def _run(op, *args, **kwargs):
    """``op`` run eagerly (behind a graph break); its nested results marked dynamic."""
    return _mark_all(op(*args, **kwargs))


def _eager(op, *args, **kwargs):
    """``op(*args, **kwargs)`` from a traced function: a graph break around an eager call (``disable`` of a
    module-level function: one made while dynamo traces would be traced)."""
    return _torch()._dynamo.disable(_run)(op, *args, **kwargs)


def call(name, op, args, kwargs):
    """Op ``name`` (the registered ``op``) under ``torch.compile``: its traced form, else a graph break."""
    traced = TRACED.get(name)
    if traced is not None:
        out = traced(*args, **kwargs)
        if out is not NotImplemented:
            return out
    return _eager(op, *args, **kwargs)


def _torch():
    return sys.modules["torch"]


def _function(path):
    """torch's function at the dotted ``path`` (no cache: a dict filled while dynamo traces would be a guard
    that fails on the next call)."""
    return operator.attrgetter(path)(_torch())


def _plain(x):
    """A nested tensor the traced forms take: one ragged level, no holes."""
    return isinstance(x, NestedTensor) and not x._st.outer and getattr(x, "_holes", None) is None


def _rows(x):
    """The buffer as rows ``(rows, *tail)`` of a contiguous (not transposed) LoD nested tensor, else None."""
    st = x._st
    if x._perm is not None or st.tail is None or 0 in st.tail:
        return None
    return x._buf.reshape((-1,) + st.tail)


def _with_last(sizes, size):
    out = sizes.copy()
    out[:, -1] = size
    return out


def _last_changed(x, size):
    """The lazy Structure of ``x`` with its last component dim set to ``size``."""
    st = x._st
    return Structure.derived(st, _with_last, (size,), st.rank, st.tail[:-1] + (size,), same_numel=False)


# -- pointwise ------------------------------------------------------------------------------------
def _unary(name):
    _, path, _, spec = UNARY[name]
    params = _params(spec)
    defaults = dict(params)

    def traced(input, *args, **kwargs):
        if not _plain(input):
            return NotImplemented
        bound = _bind(name, params, args, kwargs)
        if bound.pop("inplace", False):
            return NotImplemented
        bound = {k: v for k, v in bound.items() if v != defaults[k]}
        return make_view(_function(path)(input._buf, **bound), input._st, input._perm, input._layout)

    return traced


def _same_rows(sa, sb, a, b):
    """Whether two untransposed nested tensors have equal size tables, known from Python facts alone: one
    lineage of structures (``Structure.root``: the same component lengths, as ``x`` and ``linear(x)``,
    ``layer_norm(x)``, a ``chunk`` of it) and the same row shape."""
    return (a._perm is None and b._perm is None and sa.rank == sb.rank >= 2 and sa.tail is not None
            and sa.tail == sb.tail and sa.root is sb.root)


def _operands(a, b):
    """``a`` and ``b`` as torch operands over ``ref``'s buffer, and the nested tensor to take the layout from;
    None when the traced form does not apply."""
    torch = _torch()
    nested = [x for x in (a, b) if isinstance(x, NestedTensor)]
    if not nested or not all(_plain(x) for x in nested):
        return None
    ref = nested[0]
    if len(nested) == 2 and not (a._st is b._st and a._perm == b._perm) and not _same_rows(a._st, b._st, a, b):
        return None  # equal structures by value: the eager op compares them on the host
    dense = [x for x in (a, b) if isinstance(x, torch.Tensor) and x.dim()]
    if not dense:
        ops = [x._buf if isinstance(x, NestedTensor) else x for x in (a, b)]
        return ops, ref, False
    rows = _rows(ref)
    if rows is None or any(d.dim() > len(ref._st.tail) for d in dense):
        return None  # a batch dim in the dense operand needs the component count
    return [rows if isinstance(x, NestedTensor) else x for x in (a, b)], ref, True


def _finish(out, ref, on_rows):
    if on_rows:
        if tuple(out.shape[1:]) != ref._st.tail:
            return NotImplemented
        out = out.reshape(-1)
    return make_view(out, ref._st, ref._perm, ref._layout)


def _first_tensor(ops):
    torch = _torch()
    if not isinstance(ops[0], torch.Tensor):  # 2 - nt: torch wants a tensor first (a 0-d one promotes as a number)
        ops = [torch.tensor(ops[0], device=ops[1].device), ops[1]]
    return ops


def _binary(name):
    path = BINARY[name][1]

    def traced(input, other):
        found = _operands(input, other)
        if found is None:
            return NotImplemented
        ops, ref, on_rows = found
        return _finish(_function(path)(*_first_tensor(ops)), ref, on_rows)

    return traced


def _add_sub(path):
    def traced(input, other, *, alpha=1):
        found = _operands(input, other)
        if found is None:
            return NotImplemented
        ops, ref, on_rows = found
        return _finish(_function(path)(*_first_tensor(ops), alpha=alpha), ref, on_rows)

    return traced


def _div(input, other, *, rounding_mode=None):
    found = _operands(input, other)
    if found is None:
        return NotImplemented
    ops, ref, on_rows = found
    return _finish(_torch().div(*_first_tensor(ops), rounding_mode=rounding_mode), ref, on_rows)


# -- nn -------------------------------------------------------------------------------------------
def _linear(input, weight, bias=None):
    if not _plain(input):
        return NotImplemented
    rows = _rows(input)
    if rows is None or input._st.rank < 2 or weight.dim() != 2 or weight.shape[1] != input._st.tail[-1]:
        return NotImplemented
    out = _torch().nn.functional.linear(rows, weight, bias)
    return make(out.reshape(-1), _last_changed(input, int(weight.shape[0])), input._layout)


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not _plain(input) or _rows(input) is None or input._st.tail[len(input._st.tail) - len(shape):] != shape:
        return NotImplemented
    if not shape or len(shape) > len(input._st.tail):
        return NotImplemented
    out = _torch().nn.functional.layer_norm(input._buf.reshape((-1,) + shape), shape, weight, bias, eps)
    return make(out.reshape(-1), input._st, input._layout)


def _softmax_like(path):
    def traced(input, dim=None, _stacklevel=3, dtype=None):
        if not _plain(input) or dim is None or _rows(input) is None or input._st.rank < 2:
            return NotImplemented
        if normalize_dim(dim, input._st.rank + 1) != input._st.rank:
            return NotImplemented  # only the last dim: a ragged or middle dim needs the offsets
        out = _function(path)(_rows(input), -1, dtype=dtype)
        return make(out.reshape(-1), input._st, input._layout)

    return traced


def _dropout(input, p=0.5, training=True, inplace=False):
    if not _plain(input) or inplace:
        return NotImplemented
    out = _torch().nn.functional.dropout(input._buf, p, training)
    return make_view(out, input._st, input._perm, input._layout)


def _same(method):
    def traced(input, **kwargs):
        if not _plain(input) or kwargs.get("memory_format") is not None:
            return NotImplemented
        return make_view(getattr(input._buf, method)(), input._st, input._perm, input._layout)

    return traced


# -- shape ops ------------------------------------------------------------------------------------
def _dim_size(st, perm, axis):
    """The size of component dim ``axis`` (through ``perm``) from the row shape; None for the ragged one."""
    storage = compose(perm, st.rank)[axis]
    return None if storage == 0 or st.tail is None else st.tail[storage - 1]


def _regrouped(input, plan):
    """``input`` viewed with its component dims regrouped by ``plan`` (see ``_permute.regroup``)."""
    st = input._st
    if st.tail is None:
        return NotImplemented

    def column(axis):
        return None if axis == 0 else st.tail[axis - 1]

    out = regroup_columns(column, lambda value: value, st.rank, input._perm, plan)
    if out is None:
        return NotImplemented
    columns, perm = out
    if columns[0] is not None or any(c is None for c in columns[1:]):
        return NotImplemented  # the ragged dim must stay the first storage axis, alone
    new = Structure.derived(st, regroup_table, (input._perm, tuple(plan)), len(columns), tuple(columns[1:]))
    return make_view(input._buf, new, perm, input._layout)


def _keep(axes):
    return [("keep", a) for a in axes]


def _unflatten(input, dim, sizes):
    if not _plain(input):
        return NotImplemented
    st = input._st
    d = normalize_dim(dim, st.rank + 1)
    if d == 0:
        return NotImplemented
    size = _dim_size(st, input._perm, d - 1)
    sizes = [operator.index(s) for s in sizes]
    known = functools.reduce(operator.mul, [s for s in sizes if s != -1], 1)
    if size is None or sizes.count(-1) > 1 or known == 0:
        return NotImplemented
    if -1 in sizes:
        if size % known:
            return NotImplemented
        sizes[sizes.index(-1)] = size // known
    elif known != size:
        return NotImplemented
    a = d - 1
    return _regrouped(input, _keep(range(a)) + [("split", a, tuple(sizes))] + _keep(range(a + 1, st.rank)))


def _flatten(input, start_dim=0, end_dim=-1):
    if not _plain(input):
        return NotImplemented
    rank = input._st.rank
    a, b = normalize_dim(start_dim, rank + 1) - 1, normalize_dim(end_dim, rank + 1) - 1
    if a < 0 or b < a or any(_dim_size(input._st, input._perm, axis) is None for axis in range(a, b + 1)):
        return NotImplemented
    return _regrouped(input, _keep(range(a)) + [("merge", a, b)] + _keep(range(b + 1, rank)))


def _unsqueeze(input, dim):
    if not _plain(input):
        return NotImplemented
    rank = input._st.rank
    d = normalize_dim(dim, rank + 2)
    if d == 0:
        return NotImplemented
    return _regrouped(input, _keep(range(d - 1)) + [("new",)] + _keep(range(d - 1, rank)))


def _squeeze(input, dim=None):
    if not _plain(input) or dim is None or isinstance(dim, (tuple, list)):
        return NotImplemented
    rank = input._st.rank
    d = normalize_dim(dim, rank + 1)
    size = _dim_size(input._st, input._perm, d - 1) if d else None
    if size is None:
        return NotImplemented
    if size != 1:
        return input
    return _regrouped(input, _keep([a for a in range(rank) if a != d - 1]))


def _transpose(input, dim0, dim1):
    if not _plain(input):
        return NotImplemented
    rank = input._st.rank
    d0, d1 = normalize_dim(dim0, rank + 1), normalize_dim(dim1, rank + 1)
    if d0 == 0 or d1 == 0:
        return NotImplemented
    perm = list(compose(input._perm, rank))
    perm[d0 - 1], perm[d1 - 1] = perm[d1 - 1], perm[d0 - 1]
    return make_view(input._buf, input._st, perm, input._layout)


def _pieces(input, lengths):
    rows = _rows(input)
    out, start = [], 0
    for length in lengths:
        piece = rows[..., start : start + length].contiguous().reshape(-1)
        out.append(make(piece, _last_changed(input, length), input._layout))
        start += length
    return tuple(out)


def _last_dim(input, dim):
    if not _plain(input) or _rows(input) is None or input._st.rank < 2:
        return None
    return input._st.tail[-1] if normalize_dim(dim, input._st.rank + 1) == input._st.rank else None


def _chunk(input, chunks, dim=0):
    size = _last_dim(input, dim)
    if size is None or chunks <= 0:
        return NotImplemented
    step = -(-size // chunks) if size else 1
    return _pieces(input, [min(step, size - s) for s in range(0, size, step)] if size else [0])


def _split(input, split_size_or_sections, dim=0):
    size = _last_dim(input, dim)
    if size is None:
        return NotImplemented
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            return NotImplemented
        lengths = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    else:
        lengths = [operator.index(s) for s in split_size_or_sections]
        if sum(lengths) != size:
            return NotImplemented
    return _pieces(input, lengths)


def from_jagged(eager, values, offsets=None, lengths=None, jagged_dim=None, min_seqlen=None, max_seqlen=None):
    """``nested_tensor_from_jagged`` in a traced function: with tensor ``values`` and ``offsets`` (no holes,
    ragged dim 1) the offsets stay a tensor of the graph (checked through the LoD gate when the size table
    is first needed, outside it); anything else runs ``eager`` behind a graph break."""
    torch = _torch()
    if isinstance(values, torch.Tensor) and isinstance(offsets, torch.Tensor) and lengths is None and \
            jagged_dim in (None, 1) and values.dim() >= 1:
        row_shape = tuple(int(s) for s in values.shape[1:])
        return make(values.reshape(-1), Structure.from_jagged(offsets, row_shape), "jagged")
    return _eager(eager, values, offsets, lengths, jagged_dim, min_seqlen, max_seqlen)



COMPILE_HOOKS.update(call=call, from_jagged=from_jagged, eager=_eager)

TRACED = {
    **{name: _unary(name) for name in UNARY},
    **{name: _binary(name) for name in BINARY if name not in ("add", "sub", "div")},
    "add": _add_sub("add"),
    "sub": _add_sub("sub"),
    "div": _div,
    "linear": _linear,
    "layer_norm": _layer_norm,
    "softmax": _softmax_like("softmax"),
    "log_softmax": _softmax_like("log_softmax"),
    "dropout": _dropout,
    "clone": _same("clone"),
    "detach": _same("detach"),
    "unflatten": _unflatten,
    "flatten": _flatten,
    "unsqueeze": _unsqueeze,
    "squeeze": _squeeze,
    "transpose": _transpose,
    "chunk": _chunk,
    "split": _split,
}
