"""Nested tensors with holes whose torch values share memory with NumPy values that ``to_torch()`` or ``numpy()``
made (``lodtensor/nested/_holes.py``, ``twinned``): torch's version counter misses NumPy's writes, so those torch
values count none (``Backend.version`` None, stamped -1) and the gathered buffer is gathered again on each read,
as over NumPy values. Against torch 2.13's own ``torch.nested.narrow`` over ``torch.from_numpy(base)`` (a view of
the same memory; ``.contiguous()`` before the ops it refuses on a tensor with holes)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402
from tests.nested.test_nested_holes_uncounted_hunt import _equal, _host  # noqa: E402

START, LENGTH = [0, 1, 2], [2, 3, 1]
W = np.arange(6.0).reshape(2, 3) / 3


def _numbers():
    return np.arange(24.0).reshape(3, 4, 2) / 4


def _theirs(torch_base):
    return torch.nested.narrow(torch_base, 1, torch.tensor(START), torch.tensor(LENGTH), layout=torch.jagged)


def _ours(base):
    return ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")


READS = {  # name -> (ours, torch's): the ops torch refuses on a tensor with holes read it made contiguous
    "sum(dim=1)": (lambda nt: nt.sum(dim=1), lambda t: t.contiguous().sum(dim=1)),
    "to_padded_tensor": (lambda nt: nt.to_padded_tensor(0.0), lambda t: t.contiguous().to_padded_tensor(0.0)),
    "unbind()": (lambda nt: nt.unbind(), lambda t: t.unbind()),
    "matmul": (lambda nt: nt @ torch.from_numpy(W), lambda t: t @ torch.from_numpy(W)),
    "elementwise": (lambda nt: nt * 2 + 1, lambda t: t * 2 + 1),
    "transposed view": (lambda nt: nt.transpose(1, 2), lambda t: t.transpose(1, 2)),
}


def _write_numpy(base):
    base[1, 2] = 100.0  # (a row of component 1)
    base[0, 0] = -3.0  # (a row of component 0)
    base[2, 3] = 77.0  # (a hole)


def _to_torch_of_numpy_holes():
    """Direction 1: ``to_torch()`` of a tensor with holes over NumPy values; the NumPy base written."""
    base = _numbers()
    return _ours(base).to_torch(), _theirs(torch.from_numpy(base)), lambda: _write_numpy(base)


def _numpy_twin_of_torch_holes():
    """Direction 2: the torch tensor itself after ``numpy()`` gave its NumPy twin; written through the twin."""
    base = torch.from_numpy(_numbers())
    ours = _ours(base)
    twin = ours.numpy()
    assert isinstance(twin.values(), np.ndarray) and np.shares_memory(twin.values(), base.numpy())

    def write():
        twin.add_(1)  # (into the components' rows of the NumPy values: the torch base's memory)
        twin.values()[9] = [-8.0, 9.0]  # (a hole: base[2, 1])
    return ours, _theirs(base), write


DIRECTIONS = {"to_torch() of NumPy holes": _to_torch_of_numpy_holes,
              "numpy() twin of torch holes": _numpy_twin_of_torch_holes}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("direction", list(DIRECTIONS))
def test_a_numpy_write_shows_in_every_read_as_torch(direction, read):
    ours, theirs, write = DIRECTIONS[direction]()
    assert isinstance(ours.values(), torch.Tensor)
    mine, torchs = READS[read]
    for reader in READS.values():  # (every read before the write: any buffer they gather is gathered then)
        reader[0](ours)
    _equal(_host(mine(ours)), _host(torchs(theirs)))
    write()
    _equal(_host(mine(ours)), _host(torchs(theirs)))
    write()  # (a second write after a read that gathered again)
    _equal(_host(mine(ours)), _host(torchs(theirs)))


@pytest.mark.parametrize("direction", list(DIRECTIONS))
def test_the_torch_values_count_no_writes_and_every_read_gathers(direction, monkeypatch):
    ours, theirs, write = DIRECTIONS[direction]()
    ours.sum(dim=1)
    assert ours._stamp == -1
    calls = []
    regather = ln.NestedTensor._regather
    monkeypatch.setattr(ln.NestedTensor, "_regather", lambda self: calls.append(1) or regather(self))
    ours.sum(dim=1)
    ours.to_padded_tensor(0.0)
    assert len(calls) == 2


def test_views_of_the_torch_tensor_taken_before_numpy_see_a_write_through_the_twin():
    """The mark is on the torch values' memory: views taken before ``numpy()`` (their own values, over the same
    storage) and another tensor over the same base gather again too."""
    base = torch.from_numpy(_numbers())
    ours, other = _ours(base), _ours(base)
    views = {"nt[1:]": ours[1:], "transpose": ours.transpose(1, 2), "unflatten": ours.unflatten(-1, (2, 1)),
             "other over the base": other}
    before = {name: _host(view.sum(dim=1)) for name, view in views.items()}
    twin = ours.numpy()
    twin.values()[3:8] = 50.0  # (base[0, 3] .. base[1, 3]: component 1's rows and a hole)
    numbers = base.numpy()
    rows = [numbers[i, s:s + n] for i, (s, n) in enumerate(zip(START, LENGTH))]
    sums = np.stack([r.sum(axis=0) for r in rows])
    _equal(_host(views["nt[1:]"].sum(dim=1)), sums[1:])
    _equal(_host(views["other over the base"].sum(dim=1)), sums)
    _equal(_host(views["transpose"].sum(dim=2)), sums)
    _equal(_host(views["unflatten"].sum(dim=1)), sums.reshape(3, 2, 1))
    assert not np.allclose(before["other over the base"][1], sums[1])  # (the write did reach a component)


def test_a_plain_torch_tensor_with_holes_keeps_counting_its_writes(monkeypatch):
    """Without a NumPy alias a torch tensor with holes is stamped with its values' version and gathers once per
    write, not on each read, even while another torch tensor is twinned."""
    twinned_base = torch.from_numpy(_numbers())
    _ours(twinned_base).numpy()  # (another tensor twinned: this one must not pay for it)
    base = torch.arange(24.0, dtype=torch.float64).reshape(3, 4, 2)
    nt = _ours(base)
    nt.sum(dim=1)
    assert nt._stamp == base._version >= 0
    calls = []
    regather = ln.NestedTensor._regather
    monkeypatch.setattr(ln.NestedTensor, "_regather", lambda self: calls.append(1) or regather(self))
    for _ in range(3):
        nt.sum(dim=1)
        nt.to_padded_tensor(0.0)
    assert calls == []
    base[1, 2] = 100.0
    _equal(_host(nt.sum(dim=1)), _host(_theirs(base).contiguous().sum(dim=1)))
    nt.sum(dim=1)
    assert len(calls) == 1 and nt._stamp == base._version


def test_to_torch_of_numpy_holes_over_a_copy_keeps_counting():
    """Where ``to_torch()`` could not share the memory (read-only NumPy values: torch copies them) no alias
    exists: the torch values count their writes, and a later NumPy write does not reach them, as a copy."""
    base = _numbers()
    base.flags.writeable = False
    ours = _ours(base).to_torch()
    ours.sum(dim=1)
    assert ours._stamp >= 0


def test_a_torch_tensor_with_holes_over_values_that_require_grad_after_numpy():
    """Values that require grad: reads after a write through the twin give torch's numbers (a new buffer per read,
    none written in place under autograd) and the gradient reaches the values, as torch's."""
    numbers = _numbers()
    base = torch.from_numpy(numbers.copy()).requires_grad_()
    theirs_base = torch.from_numpy(numbers.copy()).requires_grad_()
    ours, theirs = _ours(base), _theirs(theirs_base)
    twin = ours.numpy()
    for _ in range(2):
        ours.sum(dim=1)
    twin.values()[5] = [10.0, 20.0]
    with torch.no_grad():
        theirs_base.view(-1, 2)[5] = torch.tensor([10.0, 20.0], dtype=torch.float64)
    out, want = ours.sum(dim=1), theirs.contiguous().sum(dim=1)
    _equal(_host(out), _host(want))
    weight = torch.arange(1.0, 3.0, dtype=torch.float64)
    (out * weight).sum().backward()
    sum((p.sum(dim=0) * weight).sum() for p in theirs.unbind()).backward()  # (torch's sum(dim=1) has no
    _equal(_host(base.grad), _host(theirs_base.grad))  # backward on a nested tensor: over its components)
    assert base.grad[2, 3].abs().sum() == 0 and base.grad[1, 2].tolist() == [1.0, 2.0]


def test_requires_grad_after_numpy_makes_the_leaf_over_the_values_as_torch():
    """``requires_grad_()`` of a twinned torch tensor with holes is still a leaf over its values (values-shaped
    ``grad``, as torch's), and reads after a write through the twin see it."""
    base = torch.from_numpy(_numbers())
    ours = _ours(base)
    twin = ours.numpy()
    ours.sum(dim=1)
    ours.requires_grad_()
    theirs = _theirs(torch.from_numpy(_numbers())).requires_grad_()
    assert ours.is_leaf and ours.requires_grad
    twin.values()[6] = [1.5, -2.5]
    with torch.no_grad():
        theirs.values()[6] = torch.tensor([1.5, -2.5], dtype=torch.float64)
    out, want = ours.sum(dim=1), theirs.contiguous().sum(dim=1)
    _equal(_host(out), _host(want))
    out.sum().backward()
    sum(p.sum() for p in theirs.unbind()).backward()  # (torch's sum(dim=1) has none: over its components)
    assert tuple(ours.grad.values().shape) == tuple(theirs.grad.values().shape) == (12, 2)
    _equal(_host(ours.grad.values()), _host(theirs.grad.values()))
