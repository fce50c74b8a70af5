"""The op table behind the function API, the NestedTensor methods and ``__torch_function__``.

Each op registers once with :func:`implements`, under its lodtensor name and
the dotted names of the torch callables it stands for. The torch names are
resolved to objects only when torch itself calls ``__torch_function__`` (so
importing lodtensor never imports torch).
"""

import functools
import operator

__all__ = ["OP_TABLE", "TORCH_NAMES", "implements", "torch_dispatch", "torch_table"]

#: lodtensor op name -> implementation.
OP_TABLE = {}
#: lodtensor op name -> dotted names of the torch callables it implements.
TORCH_NAMES = {}
_RESOLVED = {}


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
    """``fn``, sending calls with a two-level nested tensor (two ragged dims) through ``_two_level.call``."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        for x in args[:3]:
            if getattr(x, "_outer", None) is not None or (
                type(x) in (list, tuple) and x and getattr(x[0], "_outer", None) is not None
            ):
                from ._two_level import call  # noqa: PLC0415 - only two-level tensors get here

                return call(name, fn, args, kwargs)
        return fn(*args, **kwargs)

    return op


def torch_table():
    """torch callable -> implementation (built on first use; needs torch)."""
    if not _RESOLVED:
        import torch  # noqa: PLC0415 - torch is the caller here, so it is loaded already

        for name, paths in TORCH_NAMES.items():
            for path in paths:
                try:
                    obj = operator.attrgetter(path.partition(".")[2])(torch)
                except AttributeError:
                    continue  # not in this torch version
                _RESOLVED[obj] = OP_TABLE[name]
    return _RESOLVED


def torch_dispatch(func, args, kwargs):
    """Run the implementation registered for the torch callable ``func``."""
    impl = torch_table().get(func)
    if impl is None:
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
        module = getattr(func, "__module__", None) or "torch"
        supported = ", ".join(sorted(OP_TABLE))
        raise TypeError(
            f"{module}.{name} is not supported for lodtensor NestedTensor; supported ops: {supported}"
        )
    return impl(*args, **kwargs)
