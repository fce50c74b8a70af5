"""Registering ops: :func:`implements` puts each op in the table of ``_dispatch``.

Each op registers once, under its lodtensor name and the dotted names of the
torch callables it stands for. Calls with a two-level nested tensor (two
ragged dims) go through ``_two_level.call``, which runs the op on the inner
level.
"""

import functools

from ._dispatch import _RESOLVED, COMPILE_HOOKS, OP_TABLE, TORCH_NAMES, compiling, torch_dispatch, torch_table
from ._two_level import call

__all__ = ["OP_TABLE", "TORCH_NAMES", "implements", "torch_dispatch", "torch_table"]


def implements(name, *torch_names):
    """Register the decorated function as op ``name``, standing for ``torch_names`` too.

    ``torch_names`` are dotted paths from the torch package, for example
    ``"torch.nn.functional.softmax"`` or ``"torch.Tensor.softmax"``.
    """

    def register(fn):
        if name in OP_TABLE:
            raise ValueError(f"op {name!r} is registered twice")
        op = _two_level_aware(name, fn)
        OP_TABLE[name] = op
        TORCH_NAMES[name] = tuple(torch_names)
        _RESOLVED.clear()
        return op

    return register


def _two_level_aware(name, fn):
    """``fn``, sending calls with a two-level nested tensor (two ragged dims) through ``_two_level.call``,
    and calls under ``torch.compile`` to ``_compile.call``."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if compiling():
            return COMPILE_HOOKS["call"](name, op, args, kwargs)
        for x in args[:3]:
            if getattr(x, "_outer", None) is not None or (
                type(x) in (list, tuple) and x and getattr(x[0], "_outer", None) is not None
            ):
                return call(name, fn, args, kwargs)
        return fn(*args, **kwargs)

    return op
