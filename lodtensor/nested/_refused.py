"""Ops torch 2.13's nested layouts refuse: ``std``, ``var``, ``std_mean``, ``var_mean``, ``nansum``, ``nanmean``,
``norm`` (and ``torch.linalg.norm`` / ``vector_norm``), ``count_nonzero``.

torch raises ``NotImplementedError`` for each (the jagged layout names the aten op, ``aten.std.correction``;
the strided one "Could not run 'aten::std.correction'..."). Here each raises the same type, from the function
form (through ``__torch_function__``) and the method form alike, with a message naming the op and a way
around it. They stay out of the op table: they are no supported op (``_dispatch.REFUSED`` holds them).
"""

from ._dispatch import _RESOLVED, REFUSED
from ._tensor import NestedTensor

__all__ = ["std", "var", "std_mean", "var_mean", "nansum", "nanmean", "norm", "linalg_norm", "vector_norm",
           "count_nonzero"]

_WHY = "torch 2.13's nested tensors (jagged and strided layouts) raise NotImplementedError for {aten}"
_AROUND = {
    "reduce": "reduce each component of unbind(), or values() over a regular dim",
    "nan": "fill the NaNs first (nan_to_num() or masked_fill(isnan(x), 0)) and use sum()/mean()",
    "count": "use (x != 0).sum(dim) for a count along a dim",
}


def _refusal(name, aten, around, method, label):
    def refused(input, *args, **kwargs):
        raise NotImplementedError(
            f"{label}() is not supported for a nested tensor: {_WHY.format(aten=aten)}; {_AROUND[around]}"
        )

    refused.__name__ = refused.__qualname__ = name
    call = f"nt.{name}()" if method else f"from lodtensor.nested._refused import {name}\n>>> {name}(nt)"
    refused.__doc__ = (
        f"Refused, as torch 2.13 refuses it on nested tensors: raises ``NotImplementedError`` ({aten}).\n\n"
        f">>> import lodtensor.nested as ln\n"
        f">>> nt = ln.nested_tensor([[1.0, 2.0], [3.0]])\n"
        f">>> {call}  # doctest: +ELLIPSIS\n"
        f"Traceback (most recent call last):\n    ...\n"
        f"NotImplementedError: {label}() is not supported for a nested tensor: ...\n"
    )
    return refused


def _register(name, aten, around, method=True, label=None, paths=None):
    fn = _refusal(name, aten, around, method, label or name)
    REFUSED[name] = (paths or ("torch." + name, *(["torch.Tensor." + name] if method else [])), fn)
    if method:
        setattr(NestedTensor, name, fn)
    _RESOLVED.clear()
    return fn


std = _register("std", "aten.std.correction", "reduce")
var = _register("var", "aten.var.correction", "reduce")
std_mean = _register("std_mean", "aten.std_mean.correction", "reduce", method=False)
var_mean = _register("var_mean", "aten.var_mean.correction", "reduce", method=False)
nansum = _register("nansum", "aten.nansum.default", "nan")
nanmean = _register("nanmean", "aten.nansum.default", "nan")
norm = _register("norm", "aten.norm.ScalarOpt_dim", "reduce")
linalg_norm = _register("linalg_norm", "aten.linalg_vector_norm.default", "reduce", method=False,
                        label="linalg.norm", paths=("torch.linalg.norm",))
vector_norm = _register("vector_norm", "aten.linalg_vector_norm.default", "reduce", method=False,
                        label="linalg.vector_norm", paths=("torch.linalg.vector_norm",))
count_nonzero = _register("count_nonzero", "aten.count_nonzero.default", "count")
