"""Registering ops: :func:`implements` puts each op in the table of ``_dispatch``.

Each op registers once, under its lodtensor name and the dotted names of the
torch callables it stands for. An op is written for components and maps dims
through ``_structure.op_dim``, so it serves nested tensors with any number of
outer ragged levels as it is. While ``torch.compile`` traces, a call goes to
``_compile.call`` (the op's traced form, or the op itself behind a graph
break).
"""

import functools

from ._dispatch import _RESOLVED, COMPILE_HOOKS, OP_TABLE, TORCH_NAMES, compiling, torch_dispatch, torch_table

__all__ = ["OP_TABLE", "TORCH_NAMES", "implements", "torch_dispatch", "torch_table"]


def implements(name, *torch_names):
    """Register the decorated function as op ``name``, standing for ``torch_names`` too.

    ``torch_names`` are dotted paths from the torch package, for example
    ``"torch.nn.functional.softmax"`` or ``"torch.Tensor.softmax"``.
    """

    def register(fn):
        if name in OP_TABLE:
            raise ValueError(f"op {name!r} is registered twice")
        op = _compile_aware(name, fn)
        OP_TABLE[name] = op
        TORCH_NAMES[name] = tuple(torch_names)
        _RESOLVED.clear()
        return op

    return register


def _compile_aware(name, fn):
    """``fn``, sending calls made while ``torch.compile`` traces to ``_compile.call``; on nested tensors of no
    component, through ``_hollow`` (the op on a probe of one empty component)."""
    from ._hollow import probed_op  # noqa: PLC0415 - _hollow needs _tensor, which needs this module's table

    eager = probed_op(name, fn) or fn

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if compiling():
            return COMPILE_HOOKS["call"](name, fn, args, kwargs)
        return eager(*args, **kwargs)

    return op
