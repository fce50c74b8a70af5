"""Second reading of 2026-11-27's changes (nested views' autograd flags, row indices on the device).

The device paths (sequence_reverse/concat/slice/enumerate, nn.sequence_conv/row_conv on the emulated torch-CUDA
route and the emulated CuPy backend; 0 rows, empty sequences, 2 levels, int/float16, gradients) agreed with
NumPy/CPU. Two nested-view gaps against torch 2.13's jagged layout, both made visible by views of a leaf now
being non-leaves:

- ``copy.copy`` of a view or of a tensor with history kept the history (``is_leaf`` False, a ``grad_fn``; a
  backward through the copy filled the input's ``grad``); torch's is a new leaf that requires grad, over the
  same memory, whose backward fills its own ``grad``.
- ``retain_grad()``/``retains_grad`` did not exist (AttributeError); a view of a non-leaf shared its input's
  array, so a retained gradient would have summed every use of the input, not the view's alone.
"""

import copy

import pytest

import lodtensor.nested as ln

from .nested.test_view_autograd_flags import _build

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


VIEWS = {
    "itself": lambda nt: nt,
    "transpose": lambda nt: nt.transpose(2, 3),
    "unsqueeze": lambda nt: nt.unsqueeze(-1),
    "view": lambda nt: nt.view(3, -1, 3, 4),
    "unflatten": lambda nt: nt.unflatten(-1, (2, 2)),
    "chunk": lambda nt: nt.chunk(2, dim=-1)[1],
}


def _total(nt):
    return None if nt is None else round(float(nt.values().detach().sum()), 9)


def _copy_outcome(lib, name, nonleaf):
    nt = _build(lib, nonleaf=nonleaf)
    twin = copy.copy(VIEWS[name](nt))
    flags = (twin.is_leaf, twin.requires_grad, twin.grad_fn is None)
    with torch.no_grad():
        twin.add_(1.0)  # the same memory: the write reaches the input
    shared = _total(nt)
    (twin * 3).sum().backward()
    base = nt if not nonleaf else None
    return flags, shared, _total(twin.grad), None if base is None else _total(base.grad)


@pytest.mark.parametrize("nonleaf", [False, True], ids=["leaf", "nonleaf"])
@pytest.mark.parametrize("name", list(VIEWS))
def test_copy_copy_is_a_leaf_over_the_same_memory_as_torch(name, nonleaf):
    want = _copy_outcome(torch.nested, name, nonleaf)
    got = _copy_outcome(ln, name, nonleaf)
    assert got == want, f"copy.copy of {name}: (flags, input total, copy's grad, input's grad) {got}, torch {want}"


def test_copy_copy_without_grad_still_shares_memory():
    nt = _build(ln, requires_grad=False)
    twin = copy.copy(nt.transpose(2, 3))
    twin.fill_(5.0)
    assert not twin.requires_grad and twin.is_leaf
    assert bool((nt.values() == 5.0).all())


def _retained(lib, name):
    y = _build(lib, nonleaf=True)
    v = VIEWS[name](y)
    v.retain_grad()
    y.retain_grad()
    ((v * 2).sum() + (y * 5).sum()).backward()  # the input is used beside the view
    return v.retains_grad, y.retains_grad, _total(v.grad), _total(y.grad)


@pytest.mark.parametrize("name", list(VIEWS))
def test_retain_grad_of_a_view_keeps_the_gradient_through_the_view_alone(name):
    want = _retained(torch.nested, name)
    got = _retained(ln, name)
    assert got == want, f"{name}: (retains_grad view, input, grad totals) {got}, torch {want}"


def test_retain_grad_of_a_leaf_is_a_no_op_and_of_a_tensor_without_grad_raises_as_torch():
    for lib in (torch.nested, ln):
        leaf = _build(lib)
        leaf.retain_grad()
        assert not leaf.retains_grad
    for lib in (torch.nested, ln):
        with pytest.raises(RuntimeError, match="requires_grad=False"):
            _build(lib, requires_grad=False).retain_grad()
