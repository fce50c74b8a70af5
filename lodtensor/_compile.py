"""What the core does while ``torch.compile`` (dynamo) traces: the facts a traced LoDTensor path may read.

A compiled function receives LoDTensors built outside it, in eager code, where
their LoD passed the validation gate. While dynamo traces, LoDTensor code reads
only what stays fixed from batch to batch (the data's rank and row shape, the
LoD's depth, the identity of the LoD object two operands share), never the
offsets or the row count: the LoD's arrays are NumPy, and a traced NumPy call
on them would be wrong twice (torch would trace it as a graph of its own, and
the graph would be guarded on one batch's offsets). The data's dim 0 is marked
dynamic when a LoDTensor is built (once dynamo is loaded), so batches with new
LoDs of the same depth and row shape run one graph.

Code that needs the offsets (the sequence ops, padding, anything reading
``t.lod``) runs eagerly behind a graph break: :func:`eager` runs a call with
dynamo off (``torch._dynamo.disable``), the way torch's own unsupported calls
break a graph. ``HOOKS`` is filled by the layer that speaks torch
(``lodtensor.nested``): the traced forms of the operators live there, so the
core imports neither torch nor the layers above it.

Nothing here imports torch: each check looks in ``sys.modules`` first, so it
costs a dictionary lookup in a process that never compiles.
"""

import functools
import sys

import numpy as np

__all__ = ["HOOKS", "compiling", "mark_rows_dynamic", "eager", "eager_under_compile", "loaded_dynamo", "never",
           "tracing"]

#: traced forms installed by the torch layer: "operator" -> ``fn(name, tensor, *other)``
HOOKS = {}


def loaded_dynamo():
    """``torch._dynamo`` once its import has finished, else None (never imports it).

    A module that another thread is importing already sits in ``sys.modules``, half made (torch._dynamo
    takes seconds): reading a name it defines later raises AttributeError in every other thread. Its
    spec's ``_initializing`` flag is what CPython itself reads to call a module partially initialized.

    >>> loaded_dynamo() is None or hasattr(loaded_dynamo(), "is_compiling")
    True
    """
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or getattr(getattr(dynamo, "__spec__", None), "_initializing", False):
        return None
    return dynamo


def never():
    """False: ``is_compiling`` of a torch._dynamo still being imported, which defines it late (nothing traces
    before the import ends). The hot paths read ``getattr(dynamo, "is_compiling", never)()``."""
    return False


def compiling():
    """True while dynamo traces; False in eager code and when dynamo was never loaded (or is being loaded).

    ``torch._dynamo.is_compiling`` is the form dynamo traces everywhere (it folds to True in a graph).

    >>> compiling()
    False
    """
    dynamo = sys.modules.get("torch._dynamo")
    return dynamo is not None and getattr(dynamo, "is_compiling", never)()


def tracing():
    """:func:`compiling` by ``torch.compiler.is_dynamo_compiling`` where torch has it (27 ns a call against
    120: the check of the per-sequence hot paths, ``t[i]`` and ``len(t)``). The two differ only under
    non-strict ``torch.export``, which runs the Python code eagerly (no graph to break).

    >>> tracing()
    False
    """
    check = getattr(sys.modules.get("torch.compiler"), "is_dynamo_compiling", None)
    return compiling() if check is None else check()


def mark_rows_dynamic(data, dims=0):
    """Mark dim 0 (or ``dims``) of the torch tensor ``data`` dynamic for dynamo, so that graphs compiled for it
    take any row count (``torch._dynamo.maybe_mark_dynamic``: a hint, specialised where a graph needs a fixed
    size). Padded results mark their sequence count and longest length: ``dims=(0, 1)``.

    Does nothing for other arrays, when dynamo is not loaded, and while it traces. Returns ``data``.

    >>> import numpy as np
    >>> mark_rows_dynamic(np.zeros(3)).shape
    (3,)
    """
    dynamo = loaded_dynamo()
    if dynamo is not None and isinstance(data, sys.modules["torch"].Tensor) and not dynamo.is_compiling():
        dynamo.maybe_mark_dynamic(data, dims)
    return data


def _call(fn, args, kwargs):
    return _for_graph(fn(*args, **kwargs))


def _for_graph(result):
    """An eager result as the traced code after the break receives it: NumPy views (the LoD's frozen offsets,
    which dynamo cannot take as inputs) are copied, LoDTensors have their rows marked dynamic (the graph after
    the break takes any batch); everything else is passed on as it is."""
    if isinstance(result, np.ndarray) and result.base is not None:
        return result.copy()
    if type(result) in (tuple, list):
        return type(result)(_for_graph(item) for item in result)
    data = getattr(result, "_data", None)
    if data is not None and hasattr(result, "_lod"):  # a LoDTensor (the core is below this module)
        mark_rows_dynamic(data)
    return result


def eager(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` run eagerly; called while dynamo traces, a graph break around it.

    ``torch._dynamo.disable`` of a module-level function: a wrapper made around ``fn`` itself while dynamo
    traces would be traced. Outside a compiled function this is a plain call.

    >>> eager(sorted, [3, 1, 2])
    [1, 2, 3]
    """
    if not compiling():
        return fn(*args, **kwargs)
    return sys.modules["torch._dynamo"].disable(_call)(fn, args, kwargs)


def eager_under_compile(fn):
    """Decorator: ``fn`` runs eagerly behind a graph break when a compiled function calls it.

    For ops that read the LoD's offsets (NumPy, on the host) or call NumPy kernels: dynamo does not trace
    into them, so the LoD is never traced as NumPy and a graph is never guarded on one batch's offsets. In
    eager code the wrapper costs one dictionary lookup.

    >>> @eager_under_compile
    ... def total(xs):
    ...     return sum(xs)
    >>> total([1, 2, 3]), total.__name__
    (6, 'total')
    """

    @functools.wraps(fn)
    def op(*args, **kwargs):
        dynamo = sys.modules.get("torch._dynamo")  # compiling(), inlined: this runs on every eager call
        if dynamo is not None and getattr(dynamo, "is_compiling", never)():
            return dynamo.disable(_call)(fn, args, kwargs)
        return fn(*args, **kwargs)

    return op
