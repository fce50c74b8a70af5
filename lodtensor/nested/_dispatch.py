"""The op table every call goes through: the function API, the NestedTensor methods and ``__torch_function__``.

Ops fill it when their modules are imported (``_registry.implements``); the
lower modules (``_tensor``, ``_jagged``) look ops up here by name at call
time, so they never import the op modules above them. The torch names are
resolved to objects only when torch itself calls ``__torch_function__`` (so
importing lodtensor never imports torch).
"""

import operator

__all__ = ["OP_TABLE", "TORCH_NAMES", "torch_dispatch", "torch_table"]

#: lodtensor op name -> implementation.
OP_TABLE = {}
#: lodtensor op name -> dotted names of the torch callables it implements.
TORCH_NAMES = {}
_RESOLVED = {}


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
