"""What a second reading of the empty-batch probe (``_hollow.py``) and the jagged dim found, against
torch 2.13: a probe's error is the op's error (no garbage from a rerun on the empty input), keyword
operands are probed, a shape naming another count than 0 is refused, dense operands of batch 0 line
up, a (1, length, ...) dense operand broadcasts as the padded batch of one component, and selecting
in the jagged dim leaves no phantom ragged dim."""

import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _empty(mod):
    return mod.nested_tensor_from_jagged(torch.zeros(0, 3), offsets=torch.tensor([0]))


def _shape(x):
    return tuple("j" if not isinstance(s, int) else s for s in x.shape)


BAD = {
    "linear of another width": lambda a: F.linear(a, torch.ones(5, 4)),
    "matmul of another width": lambda a: a @ torch.ones(4, 5),
    "layer_norm of another width": lambda a: F.layer_norm(a, (4,)),
    "reshape to 1 component": lambda a: a.reshape(1, -1, 3),
    "reshape to [1, -1, 3]": lambda a: a.reshape([1, -1, 3]),
    "view to 1 component": lambda a: a.view(1, -1, 3),
    "expand to 1 component": lambda a: a.expand(1, -1, 3),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_probe_error_is_the_ops_error(name):
    for mod in (torch.nested, ln):
        with pytest.raises(RuntimeError):
            BAD[name](_empty(mod))


GOOD = {
    "linear by keyword": lambda a: F.linear(input=a, weight=torch.ones(5, 3)),
    "matmul by keyword": lambda a: torch.matmul(input=a, other=torch.ones(3, 4)),
    "unsqueeze by keyword": lambda a: torch.unsqueeze(input=a, dim=2),
    "mul by a dense batch of 0": lambda a: a * torch.ones(0, 1, 3),
    "matmul by a dense batch of 0": lambda a: a @ torch.ones(0, 3, 4),
    "bmm by a dense batch of 0": lambda a: torch.bmm(a, torch.ones(0, 3, 4)),
    "reshape to 0 components": lambda a: a.reshape(0, -1, 3),
    "reshape to -1 components": lambda a: a.reshape(-1, -1, 3),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_probed_ops_match_torch(name):
    want, got = (_shape(GOOD[name](_empty(mod))) for mod in (torch.nested, ln))
    assert got == want


def test_a_dense_batch_of_0_keeps_its_graph():
    dense = torch.ones(0, 1, 3, requires_grad=True)
    out = _empty(ln) * dense
    ln.to_padded_tensor(out, 0.0).sum().backward()
    assert dense.grad is not None and dense.grad.shape == (0, 1, 3)


@pytest.mark.parametrize("dense_shape", [(1, 4, 3), (1, 4, 1), (1, 1, 3)])
def test_one_component_and_a_padded_dense_operand(dense_shape):
    values = torch.arange(12.0).reshape(4, 3)
    dense = torch.arange(float(torch.Size(dense_shape).numel())).reshape(dense_shape) * 10
    want, got = (
        (mod.nested_tensor_from_jagged(values, offsets=torch.tensor([0, 4])) + dense).unbind()[0]
        for mod in (torch.nested, ln)
    )
    torch.testing.assert_close(torch.as_tensor(got), want)


def test_selecting_in_the_jagged_dim_leaves_no_ragged_dim():
    x = ln.nested_tensor_from_jagged(torch.arange(24.0).reshape(4, 2, 3), offsets=torch.tensor([0, 1, 4]))
    assert _shape(x) == (2, "j", 2, 3)
    y = x.select(1, 0)
    assert _shape(y) == (2, 2, 3) and y.size(1) == 2 and y.layout == torch.strided
    torch.testing.assert_close(torch.stack(list(y.unbind())), torch.tensor([[[0.0, 1, 2], [3, 4, 5]],
                                                                            [[6.0, 7, 8], [9, 10, 11]]]))
    assert _shape(x[:, 0]) == (2, 2, 3)
    assert _shape(x.select(2, 1)) == (2, "j", 3)  # another dim: the ragged one stays
