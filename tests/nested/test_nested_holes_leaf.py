"""``requires_grad_()`` of a tensor with holes over torch values that require no grad, against torch 2.13: the
tensor becomes a leaf over the values' memory (``values()`` a non-leaf view of it), its ops keep the holes, its
``grad`` has them (values-shaped, zeros in the holes), ``torch.autograd.grad``, hooks, ``grad = None``,
``backward(inputs=)``, in-place refusals, ``requires_grad_(False)``, ``detach_()`` and copies as torch's
(``lodtensor/nested/_holes.py``, ``_hole_leaf``)."""

import copy
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import lodtensor.nested as ln  # noqa: E402

START, LENGTH = [0, 1, 2], [2, 3, 1]
_W = torch.arange(6.0, dtype=torch.float64).reshape(3, 2) / 5


def _base():
    return torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)


def _leaf(lib, base):
    s, n = torch.tensor(START), torch.tensor(LENGTH)
    nt = (torch.nested.narrow(base, 1, s, n, layout=torch.jagged) if lib == "torch"
          else ln.narrow(base, 1, s, n, layout="jagged"))
    return nt.requires_grad_()


def _total(nt):
    return sum((c * (i + 1)).sum() for i, c in enumerate(nt.unbind()))


def _flags(nt):
    return (nt.requires_grad, nt.is_leaf, nt.grad_fn is None, nt.values().requires_grad, nt.values().is_leaf)


def _grad_of(nt):
    return (nt.grad.lengths().tolist(), nt.grad.offsets().tolist(), nt.grad.values())


def _same_grads(ours, theirs):
    assert ours[:2] == theirs[:2]
    torch.testing.assert_close(ours[2], theirs[2], rtol=1e-12, atol=1e-12)


OPS = {
    "sin * 2": lambda nt: nt.sin() * 2,
    "nt * nt": lambda nt: nt * nt,
    "times a dense row": lambda nt: nt * torch.tensor([2.0, -1.0], dtype=torch.float64),
    "relu": lambda nt: F.relu(nt - 0.2),
    "values()": lambda nt: nt.values() * 1,
    "unbind()": lambda nt: torch.stack([c.sum() for c in nt.unbind()]),
}

# ops whose backward torch 2.13 fails on a tensor with holes (_nested_sum_backward, "expected a contiguous jagged
# layout NestedTensor", view sizes): the same op on each component of a dense leaf over the same numbers
PER_COMPONENT = {
    "sum over a row dim": (lambda nt: nt.sum(dim=-1), lambda c: c.sum(dim=-1)),
    "softmax over a row dim": (lambda nt: nt.softmax(-1), lambda c: c.softmax(-1)),
    "linear (torch refuses it with holes; ours: without them)": (lambda nt: F.linear(nt, _W),
                                                                 lambda c: F.linear(c, _W)),
    "unflatten, transpose": (lambda nt: nt.unflatten(-1, (2, 1)).transpose(1, 2) * 3,
                             lambda c: c.unflatten(-1, (2, 1)).transpose(0, 1) * 3),
    "layer_norm": (lambda nt: F.layer_norm(nt, (2,)), lambda c: F.layer_norm(c, (2,))),
    "matmul by a matrix": (lambda nt: nt @ _W.T, lambda c: c @ _W.T),
}


@pytest.mark.parametrize("op", list(OPS))
def test_ops_keep_the_holes_and_the_gradient_has_them_as_torch(op):
    got = {}
    for lib in ("torch", "ours"):
        nt = _leaf(lib, _base())
        out = OPS[op](nt)
        nested = getattr(out, "is_nested", False)
        kept = out.lengths().tolist() if nested and out.lengths() is not None else None
        (_total(out) if nested else (out * torch.arange(out.numel()).reshape(out.shape)).sum()).backward()
        got[lib] = (_flags(nt), kept, _grad_of(nt))
    assert got["ours"][:2] == got["torch"][:2]
    _same_grads(got["ours"][2], got["torch"][2])


@pytest.mark.parametrize("op", list(PER_COMPONENT))
def test_ops_torch_cannot_differentiate_keep_the_holes_and_match_the_dense_gradient(op):
    ours, dense_op = PER_COMPONENT[op]
    nt = _leaf("ours", _base())
    out = ours(nt)
    assert (out.lengths() is None) if op.startswith("linear") else out.lengths().tolist() == LENGTH
    _total(out).backward()
    leaf = _base().requires_grad_()
    sum((dense_op(leaf[i, s:s + n]) * (i + 1)).sum() for i, (s, n) in enumerate(zip(START, LENGTH))).backward()
    assert nt.grad.lengths().tolist() == LENGTH
    torch.testing.assert_close(nt.grad.values(), leaf.grad.reshape(12, 2), rtol=1e-12, atol=1e-12)


def test_flags_and_a_write_into_the_values_after_it_as_torch():
    got = {}
    for lib in ("torch", "ours"):
        base = _base()
        nt = _leaf(lib, base)
        base.add_(1)  # (the caller's values, written after requires_grad_(): seen)
        _total(nt.cos()).backward()
        got[lib] = (_flags(nt), [c.detach().clone() for c in nt.unbind()], _grad_of(nt))
    assert got["ours"][0] == got["torch"][0] == (True, True, True, True, False)
    for a, b in zip(got["ours"][1], got["torch"][1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    _same_grads(got["ours"][2], got["torch"][2])


def test_autograd_grad_hooks_grad_none_and_backward_inputs_as_torch():
    got = {}
    for lib in ("torch", "ours"):
        nt = _leaf(lib, _base())
        (g,) = torch.autograd.grad(_total(nt.sin()), nt)
        handle = nt.register_hook(lambda grad: grad * 10)
        _total(nt * 2).backward()
        first = _grad_of(nt)
        handle.remove()
        nt.grad = None
        torch.autograd.backward(_total(nt * 3), inputs=[nt])
        got[lib] = ((g.lengths().tolist(), g.offsets().tolist(), g.values()), first, _grad_of(nt))
    for ours, theirs in zip(got["ours"], got["torch"]):
        _same_grads(ours, theirs)


def test_in_place_ops_are_refused_with_grad_and_write_the_values_without_as_torch():
    got = {}
    for lib in ("torch", "ours"):
        base = _base()
        nt = _leaf(lib, base)
        before = base.clone()
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            nt.add_(1)
        torch.testing.assert_close(base, before, rtol=0, atol=0)  # (nothing written)
        with torch.no_grad():
            nt.mul_(2)
        got[lib] = base.clone()
    torch.testing.assert_close(got["ours"], got["torch"], rtol=0, atol=0)


def test_made_plain_again_as_torch():
    got = {}
    for lib in ("torch", "ours"):
        base = _base()
        nt = _leaf(lib, base)
        nt.requires_grad_(False)
        out = nt * 2
        base.mul_(-1)
        got[lib] = (nt.requires_grad, nt.is_leaf, out.requires_grad, nt.values().requires_grad,
                    [c.clone() for c in nt.unbind()])
    assert got["ours"][:4] == got["torch"][:4] == (False, True, False, False)
    for a, b in zip(got["ours"][4], got["torch"][4]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_detach_in_place_makes_it_plain_over_the_same_values():
    """(torch refuses ``detach_()`` of its tensor from ``narrow``, a view of the base; ours is no view of it.)"""
    base = _base()
    nt = _leaf("ours", base)
    assert nt.detach_() is nt
    assert (nt.requires_grad, nt.is_leaf, (nt * 2).requires_grad, nt.values().requires_grad) == (
        False, True, False, False)
    base[1, 2] = 9.0
    assert (nt.unbind()[1][1] == 9.0).all()


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_copies_are_leaves_with_the_holes(how):
    """A copy of the leaf is a leaf over values of its own (deepcopy, pickle) or the same (copy), with its holes;
    its gradient has them, and the original's stays None."""
    nt = _leaf("ours", _base())
    twin = {"pickle": lambda x: pickle.loads(pickle.dumps(x)), "deepcopy": copy.deepcopy, "copy": copy.copy}[how](nt)
    assert _flags(twin) == (True, True, True, True, False)
    _total(twin.sin()).backward()
    expected = _leaf("torch", _base())
    _total(expected.sin()).backward()
    _same_grads(_grad_of(twin), _grad_of(expected))
    assert nt.grad is None


def test_the_gradient_is_zero_in_the_holes():
    nt = _leaf("ours", _base())
    _total(nt).backward()
    mask = np.zeros((3, 4), dtype=bool)
    for i, (s, n) in enumerate(zip(START, LENGTH)):
        mask[i, s:s + n] = True
    grad = nt.grad.values().reshape(3, 4, 2).numpy()
    assert (grad[~mask] == 0).all() and (grad[mask] != 0).all()
