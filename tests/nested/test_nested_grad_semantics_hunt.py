"""Differential hunt of GRADIENT semantics: lodtensor.nested (torch data) against torch 2.13's own jagged
layout, on inputs that make the gradient rules visible: ties (max/min/amax/argmax, sort-like ops, maximum
with equal operands), values exactly at a boundary (clamp, hardtanh, relu, leaky_relu, abs/sign at 0, where
with equal branches), NaN/inf (nan_to_num, softmax over -inf, sqrt/pow/div at 0), empty components,
dtype promotion of gradients, dense operands that receive gradients (F.linear, layer_norm, broadcast
weights), in-place ops followed by backward (torch's version-counter errors), leaf ``.grad`` and
``retain_grad()``.

Every case runs the same function on both libraries over the same float64 data, then one backward with the
same (non-uniform) output gradient, and compares the forward values, the output structure and every
gradient (``None`` included). Where torch itself fails (it raises in the forward, or its backward is not
implemented on the jagged layout) the case is skipped at run time with torch's message: only divergences
where torch gives an answer count. Those skips are listed in ``TORCH_FAILS`` below (checked: a case there
whose torch side starts to work fails the test, so the list stays true).
"""

import math
import warnings
from types import SimpleNamespace

import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812 - after the importorskip; torch's own spelling

F64 = torch.float64
INF, NAN = math.inf, math.nan

TORCH = SimpleNamespace(name="torch", from_jagged=torch.nested.nested_tensor_from_jagged,
                        nested_tensor=torch.nested.nested_tensor, narrow=torch.nested.narrow)
OURS = SimpleNamespace(name="ours", from_jagged=ln.nested_tensor_from_jagged,
                       nested_tensor=ln.nested_tensor, narrow=ln.narrow)


def _t(rows, dtype=F64):
    return torch.tensor(rows, dtype=dtype)


# data name -> (values, offsets); every set has an empty component; rows of 4 (dim 2 of the nested tensor)
DATA = {
    # ties inside rows (dim -1) and down the ragged dim (dim 1), zeros, a constant row
    "ties": (_t([[1, 1, 0, 2], [1, 0, 0, 2], [2, 2, -1, 0], [2, 3, 0, 0], [0, 3, 1, 1], [5, 5, 5, 5]]),
             [0, 2, 2, 5, 6]),
    # values exactly at the boundaries of clamp(-1, 1), hardtanh, relu, relu6(6), threshold, hardsigmoid(+-3)
    "bounds": (_t([[-1, 0, 1, 2], [-3, 3, 6, 0.5], [0, 0, -1, 1], [1, -1, 0, -2], [6, -6, 3, -3], [0, 1, -1, 0]]),
               [0, 2, 2, 5, 6]),
    # zeros everywhere but a few entries: sqrt/pow/norm/div/log/prod at 0
    "zeros": (_t([[0, 0, 0, 0], [0, 1, 0, 2], [0, 0, 3, 0], [4, 0, 0, 0], [0, 0, 0, 0], [0, 2, 0, -2]]),
              [0, 2, 2, 5, 6]),
    # NaN and infinities
    "nonfinite": (_t([[NAN, 1, INF, -INF], [0, NAN, 2, 3], [-INF, 1, 2, INF], [1, 2, 3, 4], [INF, INF, 0, 1],
                      [NAN, -INF, 1, 0]]), [0, 2, 2, 5, 6]),
    # -inf entries, a row of only -inf, and a whole component of -inf (softmax / logsumexp)
    "neginf": (_t([[-INF, 0, 1, -INF], [-INF, -INF, -INF, -INF], [2, -INF, 0, 0], [-INF, 1, -INF, 1],
                   [3, -INF, -INF, 0], [-INF, -INF, -INF, -INF]]), [0, 2, 2, 5, 6]),
    # distinct values (no ties): the control set
    "plain": (_t([[0.3, -1.2, 0.7, 2.1], [1.5, 0.2, -0.4, -2.2], [0.9, 1.7, -0.8, 0.1], [-1.1, 0.6, 1.3, -0.5],
                  [0.4, -0.9, 2.4, 1.8], [-0.6, 1.1, 0.05, -1.4]]), [0, 2, 2, 5, 6]),
    # components that are all empty but one, and a leading empty one
    "mostly_empty": (_t([[1, 2, 2, 0], [2, 2, 1, 1]]), [0, 0, 2, 2]),
    # ties down the ragged dim with no empty component (the per-component dense reference needs rows)
    "ties_full": (_t([[1, 1, 0, 2], [1, 0, 0, 2], [2, 2, -1, 0], [2, 3, 0, 0], [0, 3, 1, 1], [2, 3, 1, 1],
                      [5, 5, 5, 5], [-1, 0, 0, 7]]), [0, 2, 5, 6, 8]),
    # components of shape (length, 2, 3), ties inside and across
    "ties3d": (_t([[[1, 1, 0], [2, 2, 2]], [[1, 0, 0], [2, 3, 3]], [[0, 0, 0], [1, -1, 1]], [[4, 4, 1], [0, 0, 0]],
                   [[2, 1, 2], [3, 3, -3]]]), [0, 2, 2, 4, 5]),
    # token ids for embedding (integer values: no gradient)
    "ids": (torch.tensor([0, 1, 1, 3, 0, 2]), [0, 2, 2, 5, 6]),
}


def _grad_output(t, seed):
    """A non-uniform output gradient (distinct values, both signs) so routing rules show."""
    g = torch.arange(1, t.numel() + 1, dtype=t.dtype).reshape(t.shape) * 0.25
    return g * ((-1.0) ** torch.arange(t.numel()).reshape(t.shape)) + 0.125 * seed


def _flat_outputs(out):
    """(tensor, description) pairs of a result: nested -> its values() and component shapes."""
    if isinstance(out, (tuple, list)):
        return [pair for item in out for pair in _flat_outputs(item)]
    if getattr(out, "is_nested", False):
        return [(out.values(), ("nested", [tuple(c.shape) for c in out.unbind()]))]
    return [(out, ("dense", tuple(out.shape)))]


def _compare(ours, ref):
    assert len(ours["out"]) == len(ref["out"])
    for (a, da, ta, ra), (b, db, tb, rb) in zip(ours["out"], ref["out"]):
        assert da == db, f"structure {da} != torch's {db}"
        assert ta == tb, f"dtype {ta} != torch's {tb}"
        assert ra == rb, f"requires_grad {ra} != torch's {rb}"
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-12, equal_nan=True)
    for i, (a, b) in enumerate(zip(ours["grads"], ref["grads"])):
        assert (a is None) == (b is None), f"gradient {i}: {a} vs torch's {b}"
        if a is not None:
            assert a.dtype == b.dtype, f"gradient {i} dtype {a.dtype} != torch's {b.dtype}"
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-12, equal_nan=True, msg=lambda m, i=i: f"grad {i}: {m}")


CASES = {}


def case(name, fn, data="ties", dense=(), dtype=F64, oracle=True, per_batch=()):
    """``oracle``: the case is a function of each component alone, so it also runs on each component as a
    dense ``(1, length, 4)`` tensor (the per-component dense reference); ``per_batch``: the indices of dense
    operands with one entry per component along dim 0 (sliced for that reference)."""
    assert name not in CASES, name
    CASES[name] = SimpleNamespace(fn=fn, data=data, dense=tuple(dense), dtype=dtype, oracle=oracle,
                                  per_batch=per_batch)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


# ---- reductions over the row dim (dim -1 / 2) and over the ragged dim (dim 1), on ties, zeros and NaN/inf --
REDUCTIONS = {
    "max": torch.max,
    "max_keepdim": lambda x, d: torch.max(x, d, keepdim=True),
    "min": torch.min,
    "amax": torch.amax,
    "amin": torch.amin,
    "argmax": torch.argmax,
    "argmin": torch.argmin,
    "sum": torch.sum,
    "mean": torch.mean,
    "prod": torch.prod,
    "logsumexp": torch.logsumexp,
    "median": torch.median,
    "kthvalue": lambda x, d: torch.kthvalue(x, 2, d),
    "topk": lambda x, d: torch.topk(x, 1, d),
    "sort": torch.sort,
    "cummax": torch.cummax,
    "cumsum": torch.cumsum,
    "cumprod": torch.cumprod,
    "var": torch.var,
    "vector_norm": lambda x, d: torch.linalg.vector_norm(x, dim=d),
}
for _red, _f in REDUCTIONS.items():
    for _data in ("ties", "zeros", "nonfinite"):
        case(f"row-{_red}-{_data}", lambda nt, d, L, _f=_f: _f(nt, -1), data=_data)
    case(f"row2-{_red}-ties", lambda nt, d, L, _f=_f: _f(nt, 2), data="ties")
    case(f"ragged-{_red}-ties", lambda nt, d, L, _f=_f: _f(nt, 1), data="ties")
    case(f"ragged-{_red}-zeros", lambda nt, d, L, _f=_f: _f(nt, 1), data="zeros")

for _red in ("max", "max_keepdim", "min", "amax", "amin", "argmax", "sum", "mean", "prod"):
    case(f"ragged-{_red}-ties_full", lambda nt, d, L, _f=REDUCTIONS[_red]: _f(nt, 1), data="ties_full")
    case(f"row-{_red}-ties_full", lambda nt, d, L, _f=REDUCTIONS[_red]: _f(nt, -1), data="ties_full")
for _red in ("max", "min", "amax", "argmax", "sum", "mean", "prod"):
    for _dim in (2, 3, -1, -2):
        case(f"3d-{_red}-dim{_dim}", lambda nt, d, L, _f=REDUCTIONS[_red], _dim=_dim: _f(nt, _dim), data="ties3d")
case("3d-sum-dims23", lambda nt, d, L: nt.sum((2, 3)), data="ties3d")
case("3d-amax-dims23", lambda nt, d, L: torch.amax(nt, (2, 3)), data="ties3d")
case("3d-softmax-dim2", lambda nt, d, L: torch.softmax(nt, 2), data="ties3d")
case("3d-softmax-last", lambda nt, d, L: torch.softmax(nt, -1), data="ties3d")
case("3d-transpose-max-ragged", lambda nt, d, L: torch.max(nt.transpose(1, 2), 2), data="ties3d")
case("3d-transpose-relu", lambda nt, d, L: torch.relu(nt.transpose(1, 2) - 1).transpose(1, 2), data="ties3d")
case("3d-flatten-amax", lambda nt, d, L: torch.amax(nt.flatten(-2), -1), data="ties3d")
case("3d-layer_norm-2d", lambda nt, d, L: F.layer_norm(nt, (2, 3), d[0], d[1]), data="ties3d",
     dense=[_t([[1.0, 2.0, -1.0], [0.5, 1.5, 1.0]]), _t([[0.0, 0.1, 0.2], [0.3, 0.4, 0.5]])])
case("keepdim-sub-mean", lambda nt, d, L: nt - nt.mean(-1, keepdim=True))
case("keepdim-mul-amax", lambda nt, d, L: nt * torch.amax(nt, -1, keepdim=True))
case("keepdim-sub-max", lambda nt, d, L: nt - torch.max(nt, -1, keepdim=True)[0])
case("keepdim-div-sum", lambda nt, d, L: nt / (nt.sum(-1, keepdim=True) + 10))
case("keepdim-ragged-amax", lambda nt, d, L: torch.amax(nt, 1, keepdim=True))
case("keepdim-ragged-mean", lambda nt, d, L: torch.mean(nt, 1, keepdim=True), data="ties_full")
case("sdpa-heads", lambda nt, d, L: F.scaled_dot_product_attention(*[
    (nt * k).unflatten(-1, (2, 2)).transpose(1, 2) for k in (1.0, 0.5, 2.0)]).transpose(1, 2).flatten(-2),
    data="ties_full")
case("sdpa-heads-plain", lambda nt, d, L: F.scaled_dot_product_attention(*[
    (nt * k).unflatten(-1, (2, 2)).transpose(1, 2) for k in (1.0, 0.5, 2.0)]).transpose(1, 2).flatten(-2),
    data="plain", oracle=False)
W43 = _t([[0.5, -1, 2], [1, 0, 3], [2, 2, 2], [-1, 1, 0]])
case("embedding", lambda nt, d, L: F.embedding(nt, d[0]), data="ids", dense=[W43])
case("embedding-padding_idx", lambda nt, d, L: F.embedding(nt, d[0], padding_idx=1), data="ids", dense=[W43])
case("embedding-scale_grad_by_freq", lambda nt, d, L: F.embedding(nt, d[0], scale_grad_by_freq=True), data="ids",
     dense=[W43])
case("embedding-then-max", lambda nt, d, L: torch.max(F.embedding(nt, d[0]), -1), data="ids", dense=[W43])
case("embedding-then-softmax", lambda nt, d, L: torch.softmax(F.embedding(nt, d[0]), -1), data="ids", dense=[W43])
case("full-sum", lambda nt, d, L: nt.sum(), oracle=False)
case("full-mean", lambda nt, d, L: nt.mean(), oracle=False)
case("full-amax", lambda nt, d, L: torch.amax(nt), oracle=False)
case("full-max", lambda nt, d, L: torch.max(nt), oracle=False)
case("sum-dims-12", lambda nt, d, L: nt.sum((1, 2)))
case("mean-dims-12", lambda nt, d, L: nt.mean((1, 2)))
case("amax-dims-12", lambda nt, d, L: torch.amax(nt, (1, 2)))
case("row-max-mostly-empty", lambda nt, d, L: torch.max(nt, -1), data="mostly_empty")
case("row-amax-mostly-empty", lambda nt, d, L: torch.amax(nt, -1), data="mostly_empty")
case("row-sum-mostly-empty", lambda nt, d, L: nt.sum(-1), data="mostly_empty")

# ---- softmax family --------------------------------------------------------------------------------------
for _data in ("ties", "neginf", "nonfinite", "mostly_empty"):
    case(f"softmax-last-{_data}", lambda nt, d, L: torch.softmax(nt, -1), data=_data)
    case(f"log_softmax-last-{_data}", lambda nt, d, L: F.log_softmax(nt, -1), data=_data)
    case(f"softmax-ragged-{_data}", lambda nt, d, L: torch.softmax(nt, 1), data=_data)
    case(f"log_softmax-ragged-{_data}", lambda nt, d, L: F.log_softmax(nt, 1), data=_data)
case("softmin-last-ties", lambda nt, d, L: F.softmin(nt, -1))
case("softmax-last-float32-out", lambda nt, d, L: torch.softmax(nt, -1, dtype=torch.float32))

# ---- unary pointwise at the boundaries -------------------------------------------------------------------
BOUNDARY = {
    "clamp": lambda x: torch.clamp(x, -1, 1),
    "clamp_min_kw": lambda x: torch.clamp(x, min=0),
    "clamp_max_kw": lambda x: torch.clamp(x, max=0),
    "clamp_min": lambda x: torch.clamp_min(x, 0),
    "clamp_max": lambda x: torch.clamp_max(x, 1),
    "clip": lambda x: torch.clip(x, -1, 1),
    "clamp_equal_bounds": lambda x: torch.clamp(x, 1, 1),
    "clamp_crossed_bounds": lambda x: torch.clamp(x, 1, -1),
    "hardtanh": F.hardtanh,
    "hardtanh_3": lambda x: F.hardtanh(x, -3.0, 3.0),
    "relu": torch.relu,
    "relu6": F.relu6,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "elu": F.elu,
    "celu": lambda x: F.celu(x, 0.5),
    "selu": F.selu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus_threshold": lambda x: F.softplus(x, beta=1.0, threshold=1.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "hardshrink": lambda x: F.hardshrink(x, 1.0),
    "softshrink": lambda x: F.softshrink(x, 1.0),
    "threshold": lambda x: F.threshold(x, 1.0, 0.0),
    "abs": torch.abs,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "square": torch.square,
    "floor": torch.floor,
    "round": torch.round,
    "trunc": torch.trunc,
    "frac": torch.frac,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "logit_eps": lambda x: torch.logit(x, eps=0.25),
}
for _name, _f in BOUNDARY.items():
    case(f"unary-{_name}-bounds", lambda nt, d, L, _f=_f: _f(nt), data="bounds")
for _name in ("clamp", "relu", "abs", "sign", "hardtanh", "leaky_relu", "sigmoid", "floor"):
    case(f"unary-{_name}-nonfinite", lambda nt, d, L, _f=BOUNDARY[_name]: _f(nt), data="nonfinite")

AT_ZERO = {
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "pow_half": lambda x: torch.pow(x, 0.5),
    "pow_2": lambda x: torch.pow(x, 2),
    "pow_0": lambda x: torch.pow(x, 0),
    "pow_1": lambda x: x ** 1,
    "pow_3": lambda x: x ** 3,
    "pow_neg1": lambda x: x ** -1,
    "reciprocal": torch.reciprocal,
    "log": torch.log,
    "log1p": torch.log1p,
    "rdiv": lambda x: 1.0 / x,
    "div_self": lambda x: x / x,
    "xlogy_self": lambda x: torch.xlogy(x, x),
    "atan2_self": lambda x: torch.atan2(x, x),
    "abs": torch.abs,
    "sgn": torch.sgn,
    "copysign": lambda x: torch.copysign(x, -1.0),
    "norm_like": lambda x: torch.sqrt(x * x),
    "exp_pow": lambda x: torch.pow(2.0, x),
    "float_power": lambda x: torch.float_power(x, 0.5),
}
for _name, _f in AT_ZERO.items():
    case(f"zero-{_name}", lambda nt, d, L, _f=_f: _f(nt), data="zeros")

case("nan_to_num-default", lambda nt, d, L: torch.nan_to_num(nt), data="nonfinite")
case("nan_to_num-values", lambda nt, d, L: torch.nan_to_num(nt, 0.5, 1e3, -1e3), data="nonfinite")
case("nan_to_num-exp", lambda nt, d, L: torch.nan_to_num(torch.exp(nt)), data="nonfinite")
case("where-isnan", lambda nt, d, L: torch.where(torch.isnan(nt), 0.0, nt), data="nonfinite")
case("masked_fill-isnan", lambda nt, d, L: nt.masked_fill(torch.isnan(nt), 0.0), data="nonfinite")
case("exp-nonfinite", lambda nt, d, L: torch.exp(nt), data="nonfinite")
case("mul-self-nonfinite", lambda nt, d, L: nt * nt, data="nonfinite")

# ---- binary ops with ties: equal operands, equal branches --------------------------------------------------
BINARY_TIES = {
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
}
for _name, _f in BINARY_TIES.items():
    case(f"{_name}-same", lambda nt, d, L, _f=_f: _f(nt, nt))
    case(f"{_name}-equal-copy", lambda nt, d, L, _f=_f: _f(nt, nt * 1.0))
    case(f"{_name}-dense-row", lambda nt, d, L, _f=_f: _f(nt, d[0]), dense=[_t([1, 1, 0, 2])])
    case(f"{_name}-dense-scalar", lambda nt, d, L, _f=_f: _f(nt, d[0]), dense=[_t(2.0)])
    case(f"{_name}-nonfinite", lambda nt, d, L, _f=_f: _f(nt, torch.nan_to_num(nt * 0.5)), data="nonfinite")
case("where-equal-branches", lambda nt, d, L: torch.where(nt > 0, nt, nt))
case("where-equal-branches-copy", lambda nt, d, L: torch.where(nt > 1, nt, nt * 1.0))
case("where-dense-branch", lambda nt, d, L: torch.where(nt > 1, nt, d[0]), dense=[_t([1, 1, 0, 2])])
case("where-scalar-branch", lambda nt, d, L: torch.where(nt >= 1, nt, 0.0))
case("eq-mask-mul", lambda nt, d, L: (nt == 2) * nt)
case("lerp-dense-weight", lambda nt, d, L: torch.lerp(nt, nt * 2, d[0]), dense=[_t([0.0, 0.5, 1.0, 0.25])])
case("addcmul", lambda nt, d, L: torch.addcmul(nt, nt, nt, value=0.5))
case("sub-self", lambda nt, d, L: nt - nt)
case("pow-nt-nt", lambda nt, d, L: torch.pow(nt, nt), data="zeros")
case("pow-dense-exp", lambda nt, d, L: torch.pow(nt, d[0]), data="zeros", dense=[_t([0.0, 0.5, 1.0, 2.0])])
case("div-dense-zero", lambda nt, d, L: nt / d[0], dense=[_t([0.0, 1.0, -1.0, 0.5])])

# ---- dense operands that receive gradients ----------------------------------------------------------------
W34 = _t([[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.5, 1.0], [-2.0, 0.75, 1.0, 0.5]])
case("linear-weight-bias", lambda nt, d, L: F.linear(nt, d[0], d[1]), dense=[W34, _t([0.1, -0.2, 0.3])])
case("linear-weight", lambda nt, d, L: F.linear(nt, d[0]), dense=[W34])
case("linear-empty-comps", lambda nt, d, L: F.linear(nt, d[0], d[1]), data="mostly_empty",
     dense=[W34, _t([0.1, -0.2, 0.3])])
case("matmul-dense", lambda nt, d, L: nt @ d[0], dense=[W34.t().contiguous()])
case("matmul-dense-3d", lambda nt, d, L: torch.matmul(nt, d[0]), dense=[W34.t().contiguous()[None]])
case("layer_norm-weight-bias", lambda nt, d, L: F.layer_norm(nt, (4,), d[0], d[1]),
     dense=[_t([1.0, 2.0, -1.0, 0.5]), _t([0.0, 0.1, 0.2, 0.3])])
case("layer_norm-plain", lambda nt, d, L: F.layer_norm(nt, (4,), d[0], d[1]), data="plain",
     dense=[_t([1.0, 2.0, -1.0, 0.5]), _t([0.0, 0.1, 0.2, 0.3])])
case("layer_norm-no-affine", lambda nt, d, L: F.layer_norm(nt, (4,)))
case("layer_norm-constant-rows", lambda nt, d, L: F.layer_norm(nt, (4,), d[0]), data="zeros",
     dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("layer_norm-ragged", lambda nt, d, L: F.layer_norm(nt, nt.shape[1:]), data="plain")
case("rms_norm-weight", lambda nt, d, L: F.rms_norm(nt, (4,), d[0]), dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("rms_norm-zeros", lambda nt, d, L: F.rms_norm(nt, (4,), d[0], eps=1e-6), data="zeros",
     dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("mul-broadcast-row", lambda nt, d, L: nt * d[0], dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("add-broadcast-row", lambda nt, d, L: nt + d[0], dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("mul-broadcast-11", lambda nt, d, L: nt * d[0], dense=[_t([[[1.0, 2.0, -1.0, 0.5]]])])
case("mul-broadcast-batch", lambda nt, d, L: nt * d[0], dense=[_t([[[1.0]], [[2.0]], [[-1.0]], [[0.5]]])],
     per_batch=(0,))
case("add-broadcast-batch", lambda nt, d, L: nt + d[0], dense=[_t([[[1.0]], [[2.0]], [[-1.0]], [[0.5]]])],
     per_batch=(0,))
case("mul-scalar-tensor", lambda nt, d, L: nt * d[0], dense=[_t(1.5)])
case("div-broadcast-row", lambda nt, d, L: nt / d[0], dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("rsub-broadcast-row", lambda nt, d, L: d[0] - nt, dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("maximum-broadcast-batch", lambda nt, d, L: torch.maximum(nt, d[0]),
     dense=[_t([[[1.0]], [[2.0]], [[0.0]], [[5.0]]])],
     per_batch=(0,))

# ---- dtype promotion of gradients ---------------------------------------------------------------------------
F32 = torch.float32
case("promote-f32nt-mul-f64row", lambda nt, d, L: nt * d[0], dtype=F32, dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("promote-f32nt-add-f64row", lambda nt, d, L: nt + d[0], dtype=F32, dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("promote-f64nt-mul-f32row", lambda nt, d, L: nt * d[0], dense=[_t([1.0, 2.0, -1.0, 0.5], F32)])
case("promote-f32nt-mul-f64scalar", lambda nt, d, L: nt * d[0], dtype=F32, dense=[_t(1.5)])
case("promote-f32nt-maximum-f64row", lambda nt, d, L: torch.maximum(nt, d[0]), dtype=F32,
     dense=[_t([1.0, 1.0, 0.0, 2.0])])
case("promote-f32nt-where-f64row", lambda nt, d, L: torch.where(nt > 1, nt, d[0]), dtype=F32,
     dense=[_t([1.0, 1.0, 0.0, 2.0])])
case("promote-f32nt-mul-f64batch", lambda nt, d, L: nt * d[0], dtype=F32,
     dense=[_t([[[1.0]], [[2.0]], [[-1.0]], [[0.5]]])],
     per_batch=(0,))
case("promote-to-f64", lambda nt, d, L: nt.to(F64) * 2, dtype=F32)
case("promote-double", lambda nt, d, L: nt.double().sum(-1), dtype=F32)
case("promote-f16", lambda nt, d, L: nt.half().float() * 3)
case("promote-f32nt-softmax-f64", lambda nt, d, L: torch.softmax(nt, -1, dtype=F64), dtype=F32)

# ---- structure: holes, narrow, views -----------------------------------------------------------------------
DENSE435 = torch.arange(60, dtype=F64).reshape(4, 5, 3) % 7 - 3.0
STARTS, LENGTHS = torch.tensor([0, 1, 2, 0]), torch.tensor([2, 1, 3, 5])
case("narrow-exp", lambda nt, d, L: L.narrow(d[0], 1, STARTS, torch.tensor([2, 0, 3, 5]), layout=torch.jagged).exp(),
     dense=[DENSE435])
case("narrow-max-row", lambda nt, d, L: torch.max(L.narrow(d[0], 1, STARTS, LENGTHS, layout=torch.jagged), -1),
     dense=[DENSE435])
case("narrow-relu-linear",
     lambda nt, d, L: F.linear(torch.relu(L.narrow(d[0], 1, 1, 3, layout=torch.jagged)), d[1]),
     dense=[DENSE435, W34[:, :3].contiguous()])
case("narrow-softmax-last", lambda nt, d, L: torch.softmax(L.narrow(d[0], 1, STARTS, LENGTHS, layout=torch.jagged), -1),
     dense=[DENSE435])
case("holes-clamp", lambda nt, d, L: torch.clamp(L.from_jagged(nt.values(), torch.tensor([0, 2, 2, 5, 6]),
                                                                   torch.tensor([1, 0, 2, 1])), 0, 2))
case("holes-mul-dense", lambda nt, d, L: L.from_jagged(nt.values(), torch.tensor([0, 2, 2, 5, 6]),
                                                        torch.tensor([1, 0, 2, 1])) * d[0],
     dense=[_t([1.0, 2.0, -1.0, 0.5])])
case("holes-max-row", lambda nt, d, L: torch.max(L.from_jagged(nt.values(), torch.tensor([0, 2, 2, 5, 6]),
                                                                torch.tensor([1, 0, 2, 1])), -1))
case("transpose-back", lambda nt, d, L: nt.transpose(1, 2).transpose(1, 2) * 2)
case("unbind-grads", lambda nt, d, L: [c * (i + 1) for i, c in enumerate(nt.unbind())], oracle=False)
case("select-component", lambda nt, d, L: nt[2] * 2, oracle=False)
case("unsqueeze-squeeze", lambda nt, d, L: torch.relu(nt.unsqueeze(-1)).squeeze(-1))
case("chunk-last", lambda nt, d, L: nt.chunk(2, -1))
# torch.split(njt, [1, 3], -1) (and [2, 2]) then backward: a segmentation fault inside torch 2.13 (not run)
case("split-last-even", lambda nt, d, L: torch.split(nt, 2, -1))
case("narrow-last-dim", lambda nt, d, L: nt.narrow(-1, 1, 2) * 3)
# torch pads to values.shape[0] (6), not the longest component (3), when the values require grad, and
# ignores output_size past the ragged dim ((4, 4, 5) gives (4, 4, 4)): compare the region both fill
case("to_padded", lambda nt, d, L: (torch.nested.to_padded_tensor(nt, -1.0) if L is TORCH
                                    else ln.to_padded_tensor(nt, -1.0))[:, :3], oracle=False)
case("to_padded-output_size", lambda nt, d, L: (torch.nested.to_padded_tensor(nt, 0.0, (4, 4, 5)) if L is TORCH
                                                else ln.to_padded_tensor(nt, 0.0, (4, 4, 5)))[:, :, :4], oracle=False)
case("values-view", lambda nt, d, L: torch.exp(nt).values() * 2, oracle=False)
case("clone-detach-mix", lambda nt, d, L: nt.clone() + nt.detach())
case("contiguous", lambda nt, d, L: nt.contiguous() * 2)
case("bool-output", lambda nt, d, L: nt > 1)
case("int-cast", lambda nt, d, L: nt.long())


# ---- in-place ops followed by backward: torch's version-counter errors, and the gradients when none ---------
def _then(first, write):
    """``first(y)``, then ``write(z, y)`` in place (``z`` the first result, ``y`` the input): ``z``."""
    def run(y, nt, d):
        z = first(y)
        write(z, y)
        return z
    return run


def _write(write, result=lambda y, nt: y):
    """``write(y, nt, d)`` into ``y`` in place, then ``result(y, nt)``."""
    def run(y, nt, d):
        write(y, nt, d)
        return result(y, nt)
    return run


def _with_weight(op, write):
    """``op(y, w)`` for ``w`` a result of the dense operand, then ``write(w)`` in place."""
    def run(y, nt, d):
        w = d[0] * 1.0
        z = op(y, w)
        write(w)
        return z
    return run


_INPLACE = {  # kind -> run(y, nt, d), y = nt * 1.0: a result of the input, then written in place
    "exp-mul_": _then(torch.exp, lambda z, y: z.mul_(2)),
    "sigmoid-add_": _then(torch.sigmoid, lambda z, y: z.add_(1)),
    "tanh-relu_": _then(torch.tanh, lambda z, y: torch.relu_(z)),
    "relu-mul_": _then(torch.relu, lambda z, y: z.mul_(2)),
    "softmax-mul_": _then(lambda y: torch.softmax(y, -1), lambda z, y: z.mul_(2)),
    "sin-input-add_": _then(torch.sin, lambda z, y: y.add_(1)),
    "sin-values-add_": _then(torch.sin, lambda z, y: y.values().add_(1)),
    "amax-input-add_": _then(lambda y: torch.amax(y, -1), lambda z, y: y.add_(1)),
    "max-input-add_": _then(lambda y: torch.max(y, -1)[0], lambda z, y: y.add_(1)),
    "mul-other-mul_": _with_weight(lambda y, w: y * w, lambda w: w.mul_(2)),
    "linear-weight-add_": _with_weight(F.linear, lambda w: w.add_(1)),
    "mul-add_": _write(lambda y, nt, d: y.add_(1), lambda y, nt: y * y),
    "masked_fill_": _write(lambda y, nt, d: y.masked_fill_(nt > 1, 0.0)),
    "clamp_": _write(lambda y, nt, d: y.clamp_(0, 1)),
    "fill_": _write(lambda y, nt, d: y.fill_(2.0), lambda y, nt: y * nt),
    "zero_": _write(lambda y, nt, d: y.zero_(), lambda y, nt: y + nt),
    "copy_": _write(lambda y, nt, d: y.copy_(nt * 3)),
    "add_-dense": _write(lambda y, nt, d: y.add_(d[0])),
    "mul_-dense": _write(lambda y, nt, d: y.mul_(d[0])),
    "leaky_relu_": _write(lambda y, nt, d: F.leaky_relu_(y, 0.1)),
    "hardtanh_": _write(lambda y, nt, d: F.hardtanh_(y)),
    "exp_-twice": _write(lambda y, nt, d: y.exp_().exp_()),
}


def _inplace(kind):
    run = _INPLACE[kind]
    return lambda nt, d, L: run(nt * 1.0, nt, d)


ROW = _t([1.0, 2.0, -1.0, 0.5])
for _kind in ("exp-mul_", "sigmoid-add_", "tanh-relu_", "relu-mul_", "softmax-mul_", "sin-input-add_",
              "sin-values-add_", "amax-input-add_", "max-input-add_", "mul-add_", "masked_fill_", "clamp_", "fill_",
              "zero_", "copy_", "leaky_relu_", "hardtanh_", "exp_-twice"):
    case(f"inplace-{_kind}", _inplace(_kind), data="bounds")
for _kind in ("mul-other-mul_", "add_-dense", "mul_-dense"):
    case(f"inplace-{_kind}", _inplace(_kind), data="bounds", dense=[ROW])
case("inplace-linear-weight-add_", _inplace("linear-weight-add_"), data="bounds", dense=[W34])


# these build their nested tensor from dense data themselves (narrow, holes): no per-component reference
for _name in [n for n in CASES if n.startswith(("narrow-", "holes-"))] + ["narrow-last-dim"]:
    CASES[_name].oracle = _name == "narrow-last-dim"
# torch's dense hardtanh backward at NaN depends on its vectorisation (a (1, 4) tensor passes the gradient,
# a (6, 4) one gives 0): no per-component reference
CASES["unary-hardtanh-nonfinite"].oracle = False
# scale_grad_by_freq counts over the whole batch, not per component
CASES["embedding-scale_grad_by_freq"].oracle = False

class _Backward(Exception):
    def __init__(self, cause):
        super().__init__(repr(cause))
        self.cause = cause


def _attempt(lib, c):
    try:
        return _run_staged(lib, c), None
    except _Backward as e:
        return None, ("backward", e.cause)
    except Exception as e:  # noqa: BLE001 - we compare what each library raised
        return None, ("forward", e)


def _run_staged(lib, c):
    values, offsets = DATA[c.data]
    v = values.clone().to(c.dtype if values.is_floating_point() else values.dtype)
    v.requires_grad_(v.is_floating_point())
    dense = [d.clone().requires_grad_(d.is_floating_point()) for d in c.dense]
    nt = lib.from_jagged(v, torch.tensor(offsets))
    outs = [(t, desc) for t, desc in _flat_outputs(c.fn(nt, dense, lib))]
    diff = [t for t, _ in outs if t.requires_grad]
    inputs = [t for t in (v, *dense) if t.requires_grad]
    grads = [None] * len(inputs)
    if diff:
        try:
            grads = list(torch.autograd.grad(diff, inputs, [_grad_output(t, i) for i, t in enumerate(diff)],
                                             allow_unused=True))
        except Exception as e:  # noqa: BLE001
            raise _Backward(e) from e
    return {"out": [(t.detach(), desc, t.dtype, t.requires_grad) for t, desc in outs], "grads": grads}


VERSION_ERROR = "modified by an inplace operation"

# Divergences from torch's jagged answer that hold today: name -> reason (none in this table as of the hunt;
# the ones found are in LEAF_XFAIL, REFUSED_XFAIL, SECOND_ORDER_XFAIL and the transpose test below)
XFAIL = {}

# Cases where torch 2.13's jagged layout gives no answer (it raises in the forward, or its backward is not
# implemented or trips an internal check), by the phrase of torch's error. They are skipped here (the test
# checks torch still fails with that phrase); test_gradients_match_per_component_dense covers most of them.
# Not run at all: torch.split(njt, [1, 3], -1) (or [2, 2]) then backward, a segmentation fault inside torch.
_TORCH_FAILS_BY_PHRASE = {
    'SymIntArrayRef expected to contain only concrete integers': (
        '3d-prod-dim-1', '3d-prod-dim-2', '3d-prod-dim2', '3d-prod-dim3', '3d-transpose-max-ragged',
        'keepdim-ragged-mean', 'layer_norm-ragged', 'ragged-max-ties', 'ragged-max-ties_full', 'ragged-max-zeros',
        'ragged-max_keepdim-ties', 'ragged-max_keepdim-ties_full', 'ragged-max_keepdim-zeros', 'ragged-mean-ties',
        'ragged-mean-ties_full', 'ragged-mean-zeros', 'ragged-min-ties', 'ragged-min-ties_full', 'ragged-min-zeros',
        'row-prod-nonfinite', 'row-prod-ties', 'row-prod-ties_full', 'row-prod-zeros', 'row2-prod-ties',
    ),
    'NotImplementedError: aten._nested_sum_backward.default': (
        '3d-sum-dim-1', '3d-sum-dim-2', '3d-sum-dim2', '3d-sum-dim3', '3d-sum-dims23', 'keepdim-div-sum',
        'promote-double', 'ragged-sum-ties', 'ragged-sum-ties_full', 'ragged-sum-zeros', 'row-sum-mostly-empty',
        'row-sum-nonfinite', 'row-sum-ties', 'row-sum-ties_full', 'row-sum-zeros', 'row2-sum-ties',
    ),
    'RuntimeError: sum(): reducing along a ragged and non-batch dimension is not supported for ': (
        'add-broadcast-batch', 'mul-broadcast-batch', 'promote-f32nt-mul-f64batch', 'sum-dims-12',
    ),
    'NotImplementedError: aten.addcmul.default': (
        'addcmul',
    ),
    'RuntimeError: amax(): reducing along a ragged and non-batch dimension is not supported for': (
        'amax-dims-12',
    ),
    'RuntimeError: sum(): reducing across the ragged dimension is not supported for non-contigu': (
        'holes-mul-dense',
    ),
    'NotImplementedError: aten._nested_tensor_size.default': (
        'inplace-amax-input-add_', 'inplace-exp-mul_', 'inplace-exp_-twice', 'inplace-relu-mul_',
        'inplace-sigmoid-add_', 'inplace-sin-input-add_', 'inplace-sin-values-add_', 'inplace-softmax-mul_',
        'inplace-tanh-relu_',
    ),
    'NotImplementedError: aten.leaky_relu_backward.default': (
        'inplace-leaky_relu_', 'unary-leaky_relu-bounds', 'unary-leaky_relu-nonfinite',
    ),
    'NotImplementedError: aten.masked_fill_.Scalar': (
        'inplace-masked_fill_', 'maximum-broadcast-batch', 'maximum-dense-row', 'maximum-dense-scalar',
        'maximum-equal-copy', 'maximum-nonfinite', 'maximum-same', 'minimum-dense-row', 'minimum-dense-scalar',
        'minimum-equal-copy', 'minimum-nonfinite', 'minimum-same', 'promote-f32nt-maximum-f64row', 'zero-copysign',
    ),
    'NotImplementedError: aten.lerp.Tensor': (
        'lerp-dense-weight',
    ),
    'NotImplementedError: aten._log_softmax_backward_data.default': (
        'log_softmax-last-mostly_empty', 'log_softmax-last-neginf', 'log_softmax-last-nonfinite',
        'log_softmax-last-ties',
    ),
    'RuntimeError: log_softmax(): not supported when reducing along the ragged dimension for Ne': (
        'log_softmax-ragged-mostly_empty', 'log_softmax-ragged-neginf', 'log_softmax-ragged-nonfinite',
        'log_softmax-ragged-ties',
    ),
    'AssertionError: Cannot reduce on both ragged and non-batch dimensions without also reducin': (
        'mean-dims-12',
    ),
    'RuntimeError: derivative for aten::narrow is not implemented': (
        'narrow-last-dim',
    ),
    'ValueError: NestedTensor linear_default(input: jt, weight: t, bias: t?): expected input to': (
        'narrow-relu-linear',
    ),
    'ValueError: NestedTensor _softmax_backward(grad_output: jt, output: jt, dim: any, input_dt': (
        'narrow-softmax-last',
    ),
    'ValueError: NestedTensor where_self(condition: jt_all, self: any, other: any): expected co': (
        'pow-dense-exp',
    ),
    "AttributeError: 'NestedIntNode' object has no attribute 'sub'": (
        'ragged-prod-ties', 'ragged-prod-ties_full', 'ragged-prod-zeros',
    ),
    'NotImplementedError: aten.hardswish.default': (
        'unary-hardswish-bounds',
    ),
    'RuntimeError: NestedTensor does not support directly calling torch.ops.aten.size; please u': (
        'unary-sgn-bounds', 'zero-sgn',
    ),
}
# ops torch's jagged layout has no rule for: every case of each (the same six names)
_TORCH_FAILS_BY_PHRASE.update({
    f"NotImplementedError: aten.{aten}": tuple(f"{case}-{op}-{kind}" for case, kind in (
        ("ragged", "ties"), ("ragged", "zeros"), ("row", "nonfinite"), ("row", "ties"), ("row", "zeros"),
        ("row2", "ties")))
    for aten, op in (("cummax.default", "cummax"), ("cumprod.default", "cumprod"), ("cumsum.default", "cumsum"),
                     ("kthvalue.default", "kthvalue"), ("logsumexp.default", "logsumexp"), ("median.dim", "median"),
                     ("sort.default", "sort"), ("topk.default", "topk"), ("var.correction", "var"),
                     ("linalg_vector_norm.default", "vector_norm"))
})
TORCH_FAILS = {name: phrase for phrase, names in _TORCH_FAILS_BY_PHRASE.items() for name in names}

# Cases where torch's jagged layout answers but its gradient is wrong: it differs from the same softmax on each
# component as a dense tensor (ours matches that; see test_gradients_match_per_component_dense). Softmax over
# the ragged dim, and over a regular dim of 4-d components (dim 2 of (B, j, 2, 3)).
TORCH_WRONG = {"softmax-ragged-ties", "softmax-ragged-neginf", "softmax-ragged-nonfinite",
               "softmax-ragged-mostly_empty", "3d-softmax-dim2"}


def _params():
    params = []
    for name in sorted(CASES):
        marks = []
        if name in XFAIL:
            marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[name]))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _params())
def test_gradients_match_torch_jagged(name):
    c = CASES[name]
    ref, ref_err = _attempt(TORCH, c)
    if name in TORCH_FAILS:
        assert ref_err is not None, f"torch now answers {name}: move it out of TORCH_FAILS"
        assert TORCH_FAILS[name] in f"{type(ref_err[1]).__name__}: {ref_err[1]}"
        pytest.skip(f"torch 2.13 jagged fails in the {ref_err[0]}: {TORCH_FAILS[name]}")
    if name in TORCH_WRONG:
        with pytest.raises(AssertionError):  # torch's jagged gradient still differs from the dense reference
            _compare(ref, _per_component(c, ref))
        pytest.skip("torch 2.13's jagged gradient differs from its own per-component dense result")
    ours, err = _attempt(OURS, c)
    if ref_err is not None:
        stage, exc = ref_err
        assert stage == "backward" and VERSION_ERROR in str(exc), f"torch failed unexpectedly: {stage} {exc!r}"
        # torch refuses the backward because a saved tensor was overwritten in place: so must we
        assert err is not None and err[0] == "backward" and isinstance(err[1], RuntimeError), \
            f"torch raises {exc!r} in the backward; we gave {err or ours}"
        assert VERSION_ERROR in str(err[1])
        return
    assert err is None, f"torch answers; we raised in the {err[0]}: {err[1]!r}"
    _compare(ours, ref)


DENSE = SimpleNamespace(name="dense")


def _per_component(c, like):
    """The case run on each component alone as a dense (1, length, 4) tensor, results joined as ``like``
    (our result) lays them out; one backward with the same output gradients."""
    values, offsets = DATA[c.data]
    v = values.clone().to(c.dtype if values.is_floating_point() else values.dtype)
    v.requires_grad_(v.is_floating_point())
    dense = [d.clone().requires_grad_(d.is_floating_point()) for d in c.dense]
    pieces = []
    for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        args = [d[i:i + 1] if k in c.per_batch else d for k, d in enumerate(dense)]
        pieces.append([t for t, _ in _flat_outputs(c.fn(v[a:b].unsqueeze(0), args, DENSE))])
    outs = []
    for k, (_, desc, _, _) in enumerate(like["out"]):
        parts = [p[k] for p in pieces]
        outs.append(torch.cat([p.squeeze(0) for p in parts] if desc[0] == "nested" else parts))
    diff = [t for t in outs if t.requires_grad]
    inputs = [t for t in (v, *dense) if t.requires_grad]
    grads = [None] * len(inputs)
    if diff:
        grads = list(torch.autograd.grad(diff, inputs, [_grad_output(t, i) for i, t in enumerate(diff)],
                                         allow_unused=True))
    return {"out": [(t.detach(), d, t.dtype, t.requires_grad) for t, (_, d, _, _) in zip(outs, like["out"])],
            "grads": grads}


# Divergences from the per-component dense reference that hold today: name -> reason
ORACLE_XFAIL = {}


def _oracle_params():
    params = []
    for name in sorted(n for n, c in CASES.items() if c.oracle):
        marks = [pytest.mark.xfail(strict=True, reason=ORACLE_XFAIL[name])] if name in ORACLE_XFAIL else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _oracle_params())
def test_gradients_match_per_component_dense(name):
    """The same cases against torch's dense kernels run on each component alone: this covers what torch's
    jagged layout cannot answer (its backward is missing for sum, prod, maximum, leaky_relu, log_softmax...),
    which lodtensor answers by matching the per-component dense result."""
    c = CASES[name]
    ours, err = _attempt(OURS, c)
    if err is not None:
        if err[0] == "backward" and VERSION_ERROR in str(err[1]):
            pytest.skip("a version-counter error: the torch-jagged test checks those")
        pytest.skip(f"lodtensor refuses it ({type(err[1]).__name__}), as torch's jagged layout does")
    try:
        ref = _per_component(c, ours)
    except Exception as e:  # noqa: BLE001 - a dense op on an empty component (max over 0 rows) has no answer
        pytest.skip(f"no per-component dense answer: {type(e).__name__}: {e}")
    _compare(ours, ref)


# ---- double backward (create_graph) through the rules at the boundary -------------------------------------
SECOND_ORDER = {
    **{f"unary-{n}": (f, "bounds") for n, f in BOUNDARY.items()
       if n in ("clamp", "clamp_min", "hardtanh", "relu", "relu6", "elu", "celu", "selu", "gelu", "silu",
                "softplus_threshold", "abs", "square", "sigmoid", "tanh", "threshold", "softshrink", "mish")},
    **{f"zero-{n}": (f, "zeros") for n, f in AT_ZERO.items()
       if n in ("sqrt", "pow_half", "pow_2", "pow_3", "norm_like", "abs", "xlogy_self", "div_self", "exp_pow")},
    "softmax-last": (lambda x: torch.softmax(x, -1), "ties"),
    "softmax-last-neginf": (lambda x: torch.softmax(x, -1), "neginf"),
    "row-max": (lambda x: torch.max(x, -1)[0], "ties"),
    "row-amax": (lambda x: torch.amax(x, -1), "ties"),
    "row-mean": (lambda x: torch.mean(x, -1), "ties"),
    "layer_norm": (lambda x: F.layer_norm(x, (4,)), "ties"),
    "where": (lambda x: torch.where(x > 1, x * x, x), "ties"),
    "fmax-self": (lambda x: torch.fmax(x, x * x), "ties"),
    "mul-self": (lambda x: x * x * x, "bounds"),
}


def _second_order(lib, fn, data):
    values, offsets = DATA[data]
    v = values.clone().requires_grad_()
    out = fn(lib.from_jagged(v, torch.tensor(offsets)))
    out = out.values() if getattr(out, "is_nested", False) else out
    (g,) = torch.autograd.grad(out, v, _grad_output(out, 0), create_graph=True)
    if not g.requires_grad:  # a piecewise-constant first derivative: the second one is None in torch too
        return g.detach(), None
    (gg,) = torch.autograd.grad(g, v, _grad_output(g, 1), allow_unused=True)
    return g.detach(), gg


# torch 2.13's jagged layout answers a second derivative only for max/amax/mean over the row dim and clamp
# (elsewhere its double backward raises NotImplementedError: aten._nested_tensor_storage_offsets); every
# op here acts on each row alone, so the dense ops on the values tensor are the reference where it fails
ROWWISE = SimpleNamespace(name="rows", from_jagged=lambda v, offsets: v)


SECOND_ORDER_XFAIL = {}  # (F.threshold's, a finding until torch's own threshold ran on torch data: none left)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=SECOND_ORDER_XFAIL[n])]
                                               if n in SECOND_ORDER_XFAIL else [], id=n) for n in sorted(SECOND_ORDER)])
def test_second_order_matches_torch(name):
    fn, data = SECOND_ORDER[name]
    try:
        ref = _second_order(TORCH, fn, data)
    except NotImplementedError:
        ref = _second_order(ROWWISE, fn, data)
    ours = _second_order(OURS, fn, data)
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-6, atol=1e-12, equal_nan=True)
    assert (ours[1] is None) == (ref[1] is None), f"second derivative {ours[1]} vs torch's {ref[1]}"
    if ref[1] is not None:
        torch.testing.assert_close(ours[1], ref[1], rtol=1e-6, atol=1e-12, equal_nan=True)


# ---- leaf tensors: .grad layout, retain_grad, hooks, autograd.grad, refused requires_grad ------------------
def _components():
    return [_t([[1.0, 2.0], [3.0, 4.0]]), torch.zeros(0, 2, dtype=F64), _t([[5.0, -6.0]])]


def _leaf(lib):
    return lib.nested_tensor(_components(), layout=torch.jagged, requires_grad=True)


def _nested_summary(t):
    return None if t is None else (bool(t.is_nested), [tuple(c.shape) for c in t.unbind()], t.dtype,
                                   [round(float(a), 9) for a in t.values().flatten()])


def _leaf_grad(lib):
    x = _leaf(lib)
    torch.tanh(x * x).values().sum().backward()
    return _nested_summary(x.grad), x.is_leaf, x.grad.requires_grad, x.grad_fn is None


def _retain_grad(lib):
    x = _leaf(lib)
    y = x * 2
    y.retain_grad()
    torch.sin(y).values().sum().backward()
    return _nested_summary(y.grad), y.retains_grad, _nested_summary(x.grad)


def _non_leaf_grad_is_none(lib):
    x = _leaf(lib)
    y = x * 2
    (y * y).values().sum().backward()
    with pytest.warns(UserWarning, match="is not a leaf"):
        grad = y.grad
    return grad


def _flags(lib):
    x = _leaf(lib)
    y = x * 1
    d = x.detach()
    with torch.no_grad():
        z = y * 3
    return (d.requires_grad, d.is_leaf, y.is_leaf, y.requires_grad, type(y.grad_fn).__name__, z.requires_grad,
            x.values().requires_grad, x.values().is_leaf, x.retains_grad)


def _gradient_argument(lib):
    x = _leaf(lib)
    y = torch.exp(x)
    y.backward(torch.ones_like(y) * 2)
    return _nested_summary(x.grad)


def _grad_zero_(lib):
    x = _leaf(lib)
    (x * 2).values().sum().backward()
    x.grad.zero_()
    return _nested_summary(x.grad)


def _mixed_dtype_leaf(lib):
    x = lib.nested_tensor([c.float() for c in _components()], layout=torch.jagged, requires_grad=True)
    w = _t([1.0, 2.0]).requires_grad_()
    (x * w).values().sum().backward()
    return _nested_summary(x.grad), w.grad.dtype, w.grad.tolist()


def _as_nested_of_grad_tensors(lib):
    a, b = _t([[1.0, 2.0]]).requires_grad_(), _t([[3.0, 4.0], [5.0, 6.0]]).requires_grad_()
    nt = lib.as_nested_tensor([a, b], layout=torch.jagged)
    torch.relu(nt - 2).values().sum().backward()
    return a.grad.tolist(), b.grad.tolist(), nt.is_leaf, nt.requires_grad


def _autograd_grad_wrt_leaf(lib):
    x = _leaf(lib)
    (g,) = torch.autograd.grad(torch.exp(x).values().sum(), x)
    return _nested_summary(g)


def _double_grad_wrt_leaf(lib):
    x = _leaf(lib)
    (g,) = torch.autograd.grad((x * x * x).values().sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.values().sum(), x)
    return _nested_summary(gg)


def _backward_inputs(lib):
    x = _leaf(lib)
    w = _t([1.0, 2.0]).requires_grad_()
    (torch.relu(x) * w).values().sum().backward(inputs=[x])
    return _nested_summary(x.grad), w.grad


def _register_hook(lib):
    x = _leaf(lib)
    seen = []
    x.register_hook(lambda g: (seen.append(_nested_summary(g)), g * 10)[1])
    (x * 2).values().sum().backward()
    return seen, _nested_summary(x.grad)


def _set_grad_none(lib):
    x = _leaf(lib)
    (x * 2).values().sum().backward()
    x.grad = None  # what optimizer.zero_grad(set_to_none=True) does
    (x * 3).values().sum().backward()
    return _nested_summary(x.grad)


LEAF_CASES = {
    "leaf-grad": _leaf_grad,
    "retain_grad": _retain_grad,
    "non-leaf-grad-none": _non_leaf_grad_is_none,
    "flags": _flags,
    "gradient-argument": _gradient_argument,
    "grad-zero_": _grad_zero_,
    "mixed-dtype-leaf": _mixed_dtype_leaf,
    "as_nested_tensor-of-grad-tensors": _as_nested_of_grad_tensors,
    "autograd.grad-wrt-nested": _autograd_grad_wrt_leaf,
    "double-grad-wrt-nested": _double_grad_wrt_leaf,
    "backward-inputs-nested": _backward_inputs,
    "register_hook": _register_hook,
    "set-grad-none": _set_grad_none,
}
LEAF_XFAIL = {}  # (all fixed: torch.autograd.grad/backward of nested tensors, register_hook, grad = None)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=LEAF_XFAIL[n])]
                                               if n in LEAF_XFAIL else [], id=n) for n in sorted(LEAF_CASES)])
def test_leaf_autograd_matches_torch_jagged(name):
    ref = LEAF_CASES[name](torch.nested)
    assert LEAF_CASES[name](ln) == ref


# torch refuses these as RuntimeError; a caller's `except RuntimeError` must catch ours too (API.md)
REFUSED = {
    "int-requires_grad": lambda L: L.nested_tensor([torch.tensor([1, 2]), torch.tensor([3])], layout=torch.jagged,
                                                   requires_grad=True),
    "int-requires_grad_": lambda L: L.nested_tensor([torch.tensor([1, 2]), torch.tensor([3])],
                                                    layout=torch.jagged).requires_grad_(),
    "bool-requires_grad_": lambda L: L.nested_tensor([torch.tensor([True]), torch.tensor([False])],
                                                     layout=torch.jagged).requires_grad_(),
    "int-values-requires_grad_": lambda L: L.nested_tensor_from_jagged(torch.tensor([1, 2, 3]),
                                                                        torch.tensor([0, 2, 3])).requires_grad_(),
    "non-scalar-backward": lambda L: (_leaf(L) * 2).backward(),
    "leaf-in-place": lambda L: _leaf(L).add_(1),
    "non-leaf-requires_grad_-false": lambda L: (_leaf(L) * 2).requires_grad_(False),
    "backward-twice": lambda L: [y.backward() for y in [torch.exp(_leaf(L)).values().sum()] * 2],
}
REFUSED_XFAIL = {}  # (fixed: a DTypeError, a RuntimeError too, as torch's)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=REFUSED_XFAIL[n])]
                                               if n in REFUSED_XFAIL else [], id=n) for n in sorted(REFUSED)])
def test_refused_like_torch_jagged(name):
    with pytest.raises(RuntimeError):
        REFUSED[name](torch.nested)
    with pytest.raises(RuntimeError):
        REFUSED[name](ln)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("reduce", [
    lambda t, k: torch.amax(t, 2, keepdim=k),
    lambda t, k: torch.amin(t, 2, keepdim=k),
    lambda t, k: torch.argmax(t, 2, keepdim=k),
    lambda t, k: t.max(2, keepdim=k).values,
    lambda t, k: t.min(2, keepdim=k).indices,
], ids=["amax", "amin", "argmax", "max values", "min indices"])
def test_ragged_reduction_after_transpose_over_empty_component(reduce, keepdim):
    """torch reduces the ragged dim after a transpose (ragged dim 2) over an empty component to the dtype's
    lowest value (index 0), as it does without the transpose; so does ours (it raised 'of an empty dim')."""
    values, offsets = DATA["ties3d"]
    ref = reduce(torch.nested.nested_tensor_from_jagged(values, torch.tensor(offsets)).transpose(1, 2), keepdim)
    ours = reduce(ln.nested_tensor_from_jagged(values, torch.tensor(offsets)).transpose(1, 2), keepdim)
    torch.testing.assert_close(ours, ref)


@pytest.mark.parametrize("width", [3, 300])
def test_softmax_over_the_ragged_dim_of_a_minus_inf_column_warns_nothing(width):
    """A column of -inf over a component gives NaN there, as torch's, without a NumPy warning (wide rows took a
    path that warned 'invalid value encountered in subtract')."""
    x = torch.randn(5, width, dtype=torch.float64)
    x[:, 1] = -float("inf")
    nt = ln.nested_tensor_from_jagged(x, torch.tensor([0, 2, 5]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = torch.softmax(nt, 1)
    assert bool(torch.isnan(out.values()[:, 1]).all())
    for got, part in zip(out.unbind(), (x[:2], x[2:])):
        torch.testing.assert_close(got, torch.softmax(part, 0), equal_nan=True)


def test_autograd_grad_refuses_a_gradient_of_another_structure():
    """A nested gradient given for a nested output must have its structure: the error names the output and both
    size tables (torch's own would only say the flat sizes differ), and nothing accumulates."""
    x = ln.nested_tensor([torch.ones(2), torch.ones(1)], layout="jagged", requires_grad=True)
    y = x * 2
    other = ln.nested_tensor([torch.ones(1), torch.ones(2)], layout="jagged")
    with pytest.raises(RuntimeError, match=r"output 0 must have its nested structure: sizes \[\[2\], \[1\]\]"):
        torch.autograd.grad(y, x, other)
    with pytest.raises(RuntimeError, match="output 0 must have its nested structure"):
        torch.autograd.backward(y, other)
    assert x.grad is None
