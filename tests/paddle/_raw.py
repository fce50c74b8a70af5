"""Run Paddle 2.6 operators that have no Python wrapper any more (``lstm``, ``gru``,
``beam_search``, ``lod_rank_table``, ...): one static Program per call, built from raw
``append_op`` calls, with parameters set in its scope and gradients from
``paddle.static.gradients``.

:func:`run` takes ``build(v, op)`` where ``v`` maps names to the feed and
parameter Variables and ``op(type, inputs, outputs, attrs)`` appends one
operator, creating its output Variables (``outputs``: slot -> dtype, or
``(dtype, VarType)`` for rank tables and tensor arrays, a list of dtypes for a slot of several). ``build`` returns the
Variables to fetch; the result is a list of ``(data, lod)`` (a list of them for a
tensor array).
"""


import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from _static import fresh_program  # noqa: E402
from paddle.base import core  # noqa: E402

import lodtensor as lt  # noqa: E402

__all__ = ["run", "tensor_of", "edit_distance_program", "ARRAY", "TABLE", "RAW"]

ARRAY = core.VarDesc.VarType.LOD_TENSOR_ARRAY
TABLE = core.VarDesc.VarType.LOD_RANK_TABLE
RAW = core.VarDesc.VarType.RAW


def tensor_of(value):
    """A ``core.LoDTensor`` copy of a lodtensor.LoDTensor or NumPy array."""
    t = core.LoDTensor()
    if isinstance(value, lt.LoDTensor):
        t.set(np.ascontiguousarray(value.numpy()), core.CPUPlace())
        if value.lod_level:
            t.set_lod(value.lod())
    else:
        t.set(np.ascontiguousarray(value), core.CPUPlace())
    return t


def _observe(result):
    if isinstance(result, (core.LoDTensorArray, list)):
        return [(np.array(t), t.lod()) for t in result]
    if isinstance(result, core.LoDTensor):
        return (np.array(result), result.lod())
    return (np.asarray(result), [])


def run(build, feeds, params=None, grads_of=None, weights=None):
    """Build and run one Program; returns the fetched outputs (and gradients).

    ``feeds``: name -> LoDTensor / array (fed with their lod); ``params``: name ->
    array (set in the scope, differentiable). With ``grads_of`` (names of feeds and
    params) the target is ``sum(out0 * weights)`` over the first output and the
    gradients of those names follow the outputs, as arrays.
    """
    params = dict(params or {})
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            block = main.global_block()
            v = {}
            for name, value in feeds.items():
                lod_level = value.lod_level if isinstance(value, lt.LoDTensor) else 0
                data = value.numpy() if isinstance(value, lt.LoDTensor) else np.asarray(value)
                v[name] = paddle.static.data(name, shape=[-1, *data.shape[1:]], dtype=data.dtype.name,
                                             lod_level=lod_level)
                v[name].stop_gradient = False
            for name, value in params.items():
                v[name] = paddle.static.create_parameter(list(value.shape), value.dtype.name, name=name)

            def op(type_, inputs, outputs, attrs=None):
                made = {}
                for slot, spec in outputs.items():
                    if isinstance(spec, list):  # a slot of several Variables
                        made[slot] = [block.create_var(name=paddle.utils.unique_name.generate(type_), dtype=d)
                                      for d in spec]
                        continue
                    dtype, vtype = spec if isinstance(spec, tuple) else (spec, None)
                    if vtype is None:
                        made[slot] = block.create_var(name=paddle.utils.unique_name.generate(type_), dtype=dtype)
                    elif vtype != ARRAY:  # rank tables, raw: no dtype
                        made[slot] = block.create_var(name=paddle.utils.unique_name.generate(type_), type=vtype)
                    else:
                        made[slot] = block.create_var(name=paddle.utils.unique_name.generate(type_), type=vtype,
                                                      dtype=dtype)
                block.append_op(type=type_, inputs=inputs, outputs=made, attrs=attrs or {})
                return made

            outs = build(v, op)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            grads = []
            if grads_of:
                w = paddle.static.data("__w", shape=[-1] + [int(s) for s in weights.shape[1:]],
                                       dtype=weights.dtype.name)
                target = paddle.sum(outs[0] * w)
                grads = paddle.static.gradients([target], [v[n] for n in grads_of])
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(startup, scope=scope)
        for name, value in params.items():
            scope.var(name).get_tensor().set(np.ascontiguousarray(value), core.CPUPlace())
        feed = {name: tensor_of(value) for name, value in feeds.items()}
        if grads_of:
            feed["__w"] = tensor_of(np.ascontiguousarray(weights))
        results = exe.run(main, feed=feed, fetch_list=outs + list(grads), scope=scope, return_numpy=False)
    return [_observe(r) for r in results]


def edit_distance_program(normalized, ignored):
    """A :func:`run` builder of Paddle's ``edit_distance`` of feeds ``h`` and ``r`` (both through
    ``sequence_erase`` of ``ignored`` first, when given): ``[Out, SequenceNum]``."""

    def build(v, op):
        a, b = v["h"], v["r"]
        if ignored:
            a = op("sequence_erase", {"X": a}, {"Out": "int64"}, {"tokens": ignored})["Out"]
            b = op("sequence_erase", {"X": b}, {"Out": "int64"}, {"tokens": ignored})["Out"]
        out = op("edit_distance", {"Hyps": a, "Refs": b}, {"Out": "float32", "SequenceNum": "int64"},
                 {"normalized": normalized})
        return [out["Out"], out["SequenceNum"]]

    return build
