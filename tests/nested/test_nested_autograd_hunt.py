"""Autograd hunt on lodtensor.nested with torch data, jagged and strided layouts: gradcheck (and forward
mode, double backward where torch's own kernels have them) of pointwise, broadcast, linear/matmul/bmm,
softmax/log_softmax, layer_norm/rms_norm, reductions, to_padded_tensor, unbind, transpose/reshape and SDPA
over components that include an empty one; batched gradients of the ragged softmax; max/min ties against
torch's own jagged layout. (The LoDTensor side is tests/test_autograd_hunt.py.)"""

import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812 - after the importorskip; torch's own spelling
from torch.autograd import gradcheck, gradgradcheck  # noqa: E402

OFFSETS = [0, 2, 2, 5, 6]


def _jagged(x):
    return ln.nested_tensor_from_jagged(x, torch.tensor(OFFSETS))


def _strided(x):
    return ln.as_nested_tensor([x[a:b] for a, b in zip(OFFSETS[:-1], OFFSETS[1:])], layout="strided")


LAYOUTS = {"jagged": _jagged, "strided": _strided}


def _dense(result):
    if isinstance(result, ln.NestedTensor):
        return result.to_padded_tensor(0.0)
    if isinstance(result, (tuple, list)):
        return torch.cat([_dense(r).reshape(-1) for r in result])
    return result


def _heads(nt):
    return nt.unflatten(-1, (2, 2)).transpose(1, 2)


# name -> (function of (nested maker, x, weight, vector), forward mode, double backward)
OPS = {
    "unary": (lambda nt, x, w, v: torch.tanh(F.gelu(nt(x))) + torch.sigmoid(nt(x)).square() + F.silu(nt(x)),
              True, True),
    "binary": (lambda nt, x, w, v: torch.atan2(nt(x), nt(x * x + 1)) * nt(x) / (nt(x) * nt(x) + 1) - 1.0,
               True, True),
    "broadcast dense": (lambda nt, x, w, v: nt(x) * v[None, None, :] + v, True, True),
    "where": (lambda nt, x, w, v: torch.where(nt(x) > 0, nt(x), nt(x * 3)), True, True),
    "linear": (lambda nt, x, w, v: F.linear(nt(x), w, v[:3]), True, True),
    "matmul": (lambda nt, x, w, v: nt(x) @ w.t(), True, True),
    "bmm": (lambda nt, x, w, v: ln.bmm(nt(x), nt(x).transpose(1, 2)), True, True),
    "softmax last": (lambda nt, x, w, v: torch.softmax(nt(x), -1), True, True),
    "softmax ragged": (lambda nt, x, w, v: torch.softmax(nt(x), 1), True, True),
    "log_softmax ragged": (lambda nt, x, w, v: F.log_softmax(nt(x), 1), True, True),
    "layer_norm": (lambda nt, x, w, v: F.layer_norm(nt(x), (4,), v, v * 0 + 0.5), True, True),
    "rms_norm": (lambda nt, x, w, v: ln.rms_norm(nt(x), (4,), v), True, True),
    "sum ragged": (lambda nt, x, w, v: nt(x).sum(1), True, True),
    "mean last": (lambda nt, x, w, v: nt(x).mean(-1), True, True),
    "amax ragged": (lambda nt, x, w, v: torch.amax(nt(x), 1), True, False),
    "min last": (lambda nt, x, w, v: torch.min(nt(x), -1)[0], True, False),
    "prod ragged": (lambda nt, x, w, v: torch.prod(nt(x), 1), True, True),
    "to_padded_tensor": (lambda nt, x, w, v: ln.to_padded_tensor(nt(x), 1.0, output_size=(4, 4, 5)), True, True),
    "unbind": (lambda nt, x, w, v: nt(x).unbind(), True, True),
    "transpose reshape": (lambda nt, x, w, v: nt(x).transpose(1, 2).transpose(1, 2).reshape(4, -1, 2, 2),
                          True, True),
    "narrow chunk": (lambda nt, x, w, v: nt(x).narrow(-1, 1, 2).chunk(2, -1), True, True),
    "select getitem": (lambda nt, x, w, v: (nt(x)[2], nt(x).select(2, 1)), True, True),
    "masked_fill": (lambda nt, x, w, v: nt(x).masked_fill(nt(x) > 0, 0.0), True, True),
    "to_lod_tensor": (lambda nt, x, w, v: nt(x).to_lod_tensor().data, True, True),
    # torch 2.13's CPU attention kernel has neither forward mode nor a double backward
    "sdpa": (lambda nt, x, w, v: F.scaled_dot_product_attention(_heads(nt(x)), _heads(nt(x * 2)),
                                                                _heads(nt(x * 3))), False, False),
    "sdpa causal": (lambda nt, x, w, v: F.scaled_dot_product_attention(_heads(nt(x)), _heads(nt(x * 2)),
                                                                       _heads(nt(x * 3)), is_causal=True),
                    False, False),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(OPS))
def test_nested_ops_gradcheck(name, layout):
    op, forward, twice = OPS[name]
    nt = LAYOUTS[layout]
    g = torch.Generator().manual_seed(0)
    inputs = (torch.randn(6, 4, dtype=torch.float64, generator=g).requires_grad_(),
              torch.randn(3, 4, dtype=torch.float64, generator=g).requires_grad_(),
              torch.randn(4, dtype=torch.float64, generator=g).requires_grad_())

    def fn(x, w, v):
        return _dense(op(nt, x, w, v))

    out = fn(*inputs)
    assert out.requires_grad and out.dtype == torch.float64
    assert gradcheck(fn, inputs, check_forward_ad=forward, fast_mode=True)
    if twice:
        assert gradgradcheck(fn, inputs, fast_mode=True)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_ragged_softmax_vectorized_jacobian(layout):
    """The softmax over the ragged dim runs the torch backend's CPU segment softmax; its backward under
    torch's legacy vmap (``jacobian(..., vectorize=True)``) read the batched gradient's memory and raised."""
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)

    def fn(v):
        return torch.softmax(LAYOUTS[layout](v), 1).to_padded_tensor(0.0)

    torch.testing.assert_close(torch.autograd.functional.jacobian(fn, x, vectorize=True),
                               torch.autograd.functional.jacobian(fn, x))


@pytest.mark.parametrize("op", ["amax", "amin", "max", "min"])
def test_ragged_extreme_ties_match_torch_jagged(op):
    """Ties over the ragged dim: amax/amin share the gradient evenly, as torch's own jagged layout does;
    max/min (values and indices) give it to the returned index, as torch.max(dense, dim) does."""
    offsets = torch.tensor([0, 2, 5, 6])
    base = torch.tensor([[1.0, 1], [1, 0], [2, 2], [2, 3], [0, 3], [5, 5]], dtype=torch.float64)

    def run(make):
        x = base.clone().requires_grad_()
        out = getattr(torch, op)(make(x, offsets), 1)
        out = out[0] if isinstance(out, tuple) else out
        out = out.values() if getattr(out, "is_nested", False) else out
        out.backward(torch.ones_like(out))
        return out.detach(), x.grad

    ours = run(ln.nested_tensor_from_jagged)
    ref = run(torch.nested.nested_tensor_from_jagged) if op in ("amax", "amin") else None
    if ref is None:  # torch.max(njt, dim)'s backward fails in torch 2.13: the per-component dense result,
        x = base.clone().requires_grad_()  # whose gradient goes to the returned index only (not shared)
        out = torch.stack([getattr(torch, op)(x[a:b], 0)[0] for a, b in [(0, 2), (2, 5), (5, 6)]])
        out.backward(torch.ones_like(out))
        ref = (out.detach(), x.grad)
    torch.testing.assert_close(ours[0], ref[0])
    torch.testing.assert_close(ours[1], ref[1])


def test_nested_grad_modes_and_leaf_grad():
    x = ln.nested_tensor([torch.randn(2, 3), torch.randn(0, 3), torch.randn(3, 3)], requires_grad=True)
    with torch.no_grad():
        assert not torch.softmax(x, 1).requires_grad
    with torch.inference_mode():
        assert not (x * 2).requires_grad
    y = torch.softmax(x * 2, 1)
    assert y.requires_grad and not y.is_leaf
    (y * ln.nested_tensor([torch.ones(2, 3), torch.ones(0, 3), torch.arange(9.0).reshape(3, 3)])).sum().backward()
    grad = x.grad
    assert grad is not None and grad.nested_size().tolist() == [[2, 3], [0, 3], [3, 3]]
    assert grad.dtype == x.dtype
