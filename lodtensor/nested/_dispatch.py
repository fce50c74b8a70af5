"""The op table every call goes through: the function API, the NestedTensor methods and ``__torch_function__``.

Ops fill it when their modules are imported (``_registry.implements``); the
lower modules (``_tensor``, ``_jagged``) look ops up here by name at call
time, so they never import the op modules above them. The torch names are
resolved to objects only when torch itself calls ``__torch_function__`` (so
importing lodtensor never imports torch).
"""

import operator
import sys
import threading

from .._compile import loaded_dynamo
from ..errors import UnsupportedOpError

__all__ = ["OP_TABLE", "TORCH_NAMES", "REFUSED", "COMPILE_HOOKS", "torch_dispatch", "torch_table", "compiling",
           "mark_dynamic"]

#: lodtensor op name -> implementation.
OP_TABLE = {}
#: filled by ``_compile`` when it loads: "call" (an op under torch.compile), "from_jagged"
COMPILE_HOOKS = {}
#: lodtensor op name -> dotted names of the torch callables it implements.
TORCH_NAMES = {}
#: ops torch's nested layouts refuse (std, var, norm...): name -> (dotted torch names, the function raising
#: torch's error); filled by ``_refused``, kept out of OP_TABLE (they are no supported op)
REFUSED = {}
_RESOLVED = {}
_RESOLVE_LOCK = threading.Lock()


def torch_table():
    """torch callable -> implementation (built on first use; needs torch).

    Built aside and published whole: another thread finding it half filled would refuse a supported op.
    """
    if not _RESOLVED:
        import torch  # noqa: PLC0415 - torch is the caller here, so it is loaded already

        with _RESOLVE_LOCK:
            if not _RESOLVED:
                resolved = {}
                entries = [(paths, OP_TABLE[name]) for name, paths in TORCH_NAMES.items()]
                for paths, impl in [*entries, *REFUSED.values()]:
                    for path in paths:
                        try:
                            obj = operator.attrgetter(path.partition(".")[2])(torch)
                        except AttributeError:
                            continue  # not in this torch version
                        resolved[obj] = impl
                _RESOLVED.update(resolved)  # one step for the readers, who look without the lock
    return _RESOLVED


#: torch functions whose arguments come in another order than the NestedTensor method of their name
#: (``torch.embedding(weight, input)``, ``nt.embedding(weight)``): never run as the method
_OTHER_ORDER = frozenset({"embedding", "embedding_bag"})


def torch_dispatch(func, args, kwargs):
    """Run the implementation registered for the torch callable ``func``; ``torch.<name>(nt, ...)`` where only
    the method ``nt.<name>(...)`` is registered (``torch.narrow``, ``torch.numel``, ``torch.arccos_``...) runs
    the method, as torch's functions and methods of one name are one op."""
    impl = torch_table().get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    name = getattr(func, "__name__", None)
    torch = sys.modules["torch"]
    if name and args and getattr(torch, name, None) is func and not name.startswith("_") and name not in _OTHER_ORDER:
        ours = type(args[0]).__module__.startswith("lodtensor.nested")  # (torch's jagged class has the same name)
        method = getattr(type(args[0]), name, None) if ours else None
        if callable(method):
            return method(*args, **kwargs)
    import difflib  # noqa: PLC0415 - the failure path only

    if name and getattr(torch, name, None) is func:
        label = f"torch.{name}"
    else:
        label = f"{getattr(func, '__module__', None) or 'torch'}.{getattr(func, '__qualname__', None) or name}"
    close = difflib.get_close_matches(name or "", OP_TABLE, n=5, cutoff=0.6)
    hint = f"; the closest supported ops: {', '.join(close)}" if close else ""
    raise UnsupportedOpError(  # (a TypeError and a NotImplementedError, which torch raises)
        f"{label} is not supported for lodtensor NestedTensor{hint} ({len(OP_TABLE)} ops are, listed by "
        f"sorted(lodtensor.nested.OP_TABLE))"
    )


def compiling():
    """True while ``torch.compile`` (dynamo) traces; False in eager code and when dynamo is not loaded.

    ``torch._dynamo.is_compiling`` is the form dynamo traces (it answers True in the graph everywhere;
    ``torch.compiler.is_compiling`` is one it skips in some frames, such as a ``__torch_function__``
    reached from ``F.scaled_dot_product_attention``, and then answers False).
    """
    dynamo = loaded_dynamo()  # (None while another thread still imports it)
    return dynamo is not None and dynamo.is_compiling()


def mark_dynamic(nt):
    """Mark ``nt``'s buffer dim 0 dynamic for dynamo (when dynamo is loaded and the buffer is a torch tensor),
    so that a batch with other lengths but the same row shape reuses a compiled graph. Returns ``nt``.

    Called by the constructors: it costs a dictionary lookup when dynamo is not loaded.
    """
    dynamo = loaded_dynamo()  # (None while another thread still imports it: nothing traces yet)
    if dynamo is None:
        return nt
    if not _RESOLVED:  # built here, outside any graph: built while dynamo traces, it is a guard that then fails
        torch_table()
    torch = sys.modules["torch"]
    buf = nt._buf
    if isinstance(buf, torch.Tensor) and buf.dim() and not dynamo.is_compiling():
        dynamo.maybe_mark_dynamic(buf, 0)
    return nt
