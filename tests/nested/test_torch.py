"""torch integration: __torch_function__, nn modules, autograd (gradcheck), PackedSequence, torch nested."""

import numpy as np
import pytest

import lodtensor.nested as ln
from lodtensor.errors import BackendMismatchError

from ._cases import assert_components

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def ragged(requires_grad=False, dtype=torch.float64, d=3):
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, d, generator=g, dtype=dtype) for n in (2, 0, 4, 1)]
    return ln.nested_tensor(parts, requires_grad=requires_grad), parts


def test_torch_functions_return_nested():
    nt, parts = ragged()
    calls = [
        (torch.relu(nt), [torch.relu(p) for p in parts]),
        (F.relu(nt), [F.relu(p) for p in parts]),
        (F.gelu(nt), [F.gelu(p) for p in parts]),
        (F.silu(nt), [F.silu(p) for p in parts]),
        (torch.abs(nt), [p.abs() for p in parts]),
        (torch.neg(nt), [-p for p in parts]),
        (torch.sgn(nt), [p.sgn() for p in parts]),
        (torch.add(nt, nt), [p * 2 for p in parts]),
        (torch.mul(nt, 3), [p * 3 for p in parts]),
        (torch.sub(nt, 1.0), [p - 1 for p in parts]),
        (F.softmax(nt, dim=1), [p.softmax(0) for p in parts]),
        (torch.softmax(nt, -1), [p.softmax(-1) for p in parts]),
        (torch.transpose(nt, 1, 2), [p.T for p in parts]),
        (torch.clone(nt), parts),
        (torch.reshape(nt, (4, -1, 3, 1)), [p.reshape(-1, 3, 1) for p in parts]),
        (torch.select(nt, 2, 1), [p[:, 1] for p in parts]),
        (torch.masked_fill(nt, nt > 0, 0.0), [p.masked_fill(p > 0, 0.0) for p in parts]),
        (torch.zeros_like(nt), [torch.zeros_like(p) for p in parts]),
        (F.dropout(nt, 0.5, training=False), parts),
        (F.layer_norm(nt, (3,)), [F.layer_norm(p, (3,)) for p in parts]),
    ]
    for out, want in calls:
        assert isinstance(out, ln.NestedTensor) and isinstance(out._buffer, torch.Tensor)
        assert_components(out.unbind(), want, "float64")
    assert torch.unbind(nt)[2].shape == (4, 3)
    padded = torch.nested.to_padded_tensor(nt, 0.0)
    assert isinstance(padded, torch.Tensor) and padded.shape == (4, 4, 3)


def test_tensor_operators_with_nested_on_the_right():
    nt, parts = ragged()
    assert_components((torch.tensor(2.0, dtype=torch.float64) * nt).unbind(), [2 * p for p in parts], "float64")
    assert_components((1.0 - nt).unbind(), [1 - p for p in parts], "float64")
    # a dense operand broadcasts over the components, as on torch's jagged layout
    assert_components((torch.ones(3, dtype=torch.float64) + nt).unbind(), [1 + p for p in parts], "float64")


def test_matmul_through_torch():
    nt, parts = ragged()
    other = ln.nested_tensor([torch.ones(3, n + 1, dtype=torch.float64) for n in range(4)])
    out = torch.matmul(nt, other)
    assert_components(out.unbind(), [p @ o for p, o in zip(parts, other.unbind())], "float64")
    assert_components(torch.bmm(nt, other).unbind(), [p @ o for p, o in zip(parts, other.unbind())], "float64")


def test_nn_modules_accept_nested():
    torch.manual_seed(0)
    nt, parts = ragged(dtype=torch.float32)
    linear = nn.Linear(3, 5)
    out = linear(nt)
    assert isinstance(out, ln.NestedTensor) and out.nested_size().tolist() == [[2, 5], [0, 5], [4, 5], [1, 5]]
    assert_components(out.unbind(), [linear(p) for p in parts])
    norm = nn.LayerNorm(3)
    assert_components(norm(nt).unbind(), [norm(p) for p in parts])
    drop = nn.Dropout(0.5).eval()
    kept = drop(nt)  # a copy, as torch's nested dropout in eval gives
    assert kept is not nt and all(torch.equal(a, b) for a, b in zip(kept.unbind(), nt.unbind()))
    assert isinstance(nn.Dropout(0.5).train()(nt), ln.NestedTensor)
    seq = nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    assert_components(seq(nt).unbind(), [seq(p) for p in parts])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module(mode):
    torch.manual_seed(0)
    bags = [[1, 2, 4], [0], [3, 3, 3, 1], [7]]
    ids = ln.nested_tensor(bags)  # NumPy ids: moved to the weight's library
    bag = nn.EmbeddingBag(10, 4, mode=mode)
    flat = torch.tensor([i for b in bags for i in b])
    offsets = torch.tensor([0, 3, 4, 8])
    want = bag(flat, offsets)
    got = bag(ids)
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    assert bag.weight.grad is not None


def test_embedding_bag_per_sample_weights():
    torch.manual_seed(0)
    bags = [[1, 2], [3, 0, 4]]
    bag = nn.EmbeddingBag(5, 3, mode="sum")
    psw = [torch.tensor([0.5, 2.0]), torch.tensor([1.0, -1.0, 3.0])]
    got = bag(ln.nested_tensor(bags), per_sample_weights=ln.nested_tensor(psw))
    want = bag(torch.tensor([1, 2, 3, 0, 4]), torch.tensor([0, 2]), per_sample_weights=torch.cat(psw))
    torch.testing.assert_close(got, want)


def test_mixed_libraries_error_with_hint():
    nt = ln.nested_tensor([np.ones((2, 3), np.float32)])
    with pytest.raises(BackendMismatchError, match=r"to_torch\(\)"):
        nn.Linear(3, 2)(nt)
    assert isinstance(nn.Linear(3, 2)(nt.to_torch()), ln.NestedTensor)
    assert isinstance(torch.relu(nt)._buffer, np.ndarray)  # NumPy in, NumPy out


def test_unsupported_torch_function_names_the_op():
    nt, _ = ragged()
    with pytest.raises(TypeError, match="not supported for lodtensor NestedTensor"):
        torch.cumsum(nt, 1)


def test_autograd_through_ops():
    nt, parts = ragged(requires_grad=True)
    w = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    out = ln.layer_norm(F.gelu(ln.linear(nt, w)), (5,))
    loss = ln.softmax(out, 1).to_padded_tensor(0.0).pow(2).sum()
    loss.backward()
    assert w.grad is not None and nt.grad is not None
    assert nt.grad.nested_size().tolist() == nt.nested_size().tolist()

    leaves = [p.clone().requires_grad_(True) for p in parts]
    ref = sum(F.layer_norm(F.gelu(p @ w.detach().T), (5,)).softmax(0).pow(2).sum() for p in leaves)
    ref.backward()
    assert_components(nt.grad.unbind(), [p.grad for p in leaves], "float64")


GRAD_OPS = {
    "softmax_ragged": lambda x: ln.softmax(x, 1),
    "softmax_last": lambda x: ln.softmax(x, 2),
    "gelu": ln.gelu,
    "silu": ln.silu,
    "layer_norm": lambda x: ln.layer_norm(x, 3),
    "transpose": lambda x: x.transpose(1, 2),
    "select_ragged": lambda x: x.select(1, 0),
    "mul_add": lambda x: x * x + 2.0,
    "matmul": lambda x: x @ x.transpose(1, 2),
    "masked_fill": lambda x: x.masked_fill(x > 0, 0.0),
}


@pytest.mark.parametrize("name", list(GRAD_OPS))
def test_gradcheck(name):
    g = torch.Generator().manual_seed(1)
    parts = [torch.randn(n, 3, generator=g, dtype=torch.float64) for n in (2, 1, 3)]
    sizes = [p.shape for p in parts]
    op = GRAD_OPS[name]

    def fn(*leaves):
        nt = ln.as_nested_tensor(list(leaves))
        return op(nt).to_padded_tensor(0.0)

    inputs = [p.clone().requires_grad_(True) for p in parts]
    assert [tuple(s) for s in sizes] == [tuple(i.shape) for i in inputs]
    assert torch.autograd.gradcheck(fn, inputs)


def test_gradcheck_multi_ragged_and_linear():
    g = torch.Generator().manual_seed(2)
    images = [torch.randn(2, h, w, generator=g, dtype=torch.float64) for h, w in ((2, 3), (1, 2), (3, 1))]
    weight = torch.randn(4, 2, generator=g, dtype=torch.float64)

    def fn(*leaves):
        nt = ln.as_nested_tensor(list(leaves))
        return ln.softmax(nt.transpose(1, 3), 2).to_padded_tensor(0.0)

    assert torch.autograd.gradcheck(fn, [i.clone().requires_grad_(True) for i in images])

    def lin(w, *leaves):
        nt = ln.as_nested_tensor([leaf.transpose(0, 2).contiguous() for leaf in leaves])
        return ln.linear(nt, w).to_padded_tensor(0.0)

    assert torch.autograd.gradcheck(lin, [weight.clone().requires_grad_(True)] + [i.clone().requires_grad_(True)
                                                                                   for i in images])


def test_packed_sequence_round_trip():
    nt, parts = ragged(dtype=torch.float32)
    with pytest.raises(ValueError, match="at least one step"):
        nt.to_packed_sequence()
    nonempty = ln.nested_tensor([p for p in parts if len(p)])
    packed = nonempty.to_packed_sequence()
    assert isinstance(packed, nn.utils.rnn.PackedSequence)
    rnn = nn.GRU(3, 4, batch_first=True)
    out, _ = rnn(packed)
    back = ln.as_nested_tensor(out)
    assert back.nested_size().tolist() == [[2, 4], [4, 4], [1, 4]]
    numpy_packed = ln.nested_tensor([np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)]).to_packed_sequence()
    assert numpy_packed.batch_sizes.tolist() == [2, 1]


def test_torch_nested_tensors_convert():
    values = torch.arange(12.0).reshape(6, 2)
    jagged = torch.nested.nested_tensor_from_jagged(values, torch.tensor([0, 2, 6]))
    nt = ln.as_nested_tensor(jagged)
    assert nt.layout == "jagged" and nt.nested_size().tolist() == [[2, 2], [4, 2]]
    assert nt._buffer.data_ptr() == values.data_ptr()
    strided = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 4)])
    assert ln.as_nested_tensor(strided).nested_size().tolist() == [[2, 3], [1, 4]]


def test_to_torch_shares_memory():
    nt = ln.nested_tensor([np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)])
    tt = nt.to_torch()
    assert tt._buffer.data_ptr() == nt._buffer.ctypes.data and tt._struct is nt._struct
    assert tt.numpy()._buffer.ctypes.data == nt._buffer.ctypes.data


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_padding_idx_and_max_norm_match_torch(mode):
    torch.manual_seed(0)
    bags = [[1, 2, 3], [3], [0, 3, 4], []]
    flat, offsets = torch.tensor([1, 2, 3, 3, 0, 3, 4]), torch.tensor([0, 3, 4, 7])
    bag = nn.EmbeddingBag(5, 3, mode=mode, padding_idx=3)
    torch.testing.assert_close(bag(ln.nested_tensor(bags)), bag(flat, offsets))
    weight = torch.randn(5, 3) * 5
    ours = nn.EmbeddingBag.from_pretrained(weight.clone(), max_norm=1.0, mode=mode)
    theirs = nn.EmbeddingBag.from_pretrained(weight.clone(), max_norm=1.0, mode=mode)
    torch.testing.assert_close(ours(ln.nested_tensor(bags)), theirs(flat, offsets), atol=1e-5, rtol=1e-5)
    assert torch.equal(ours.weight, weight)  # rescaled rows are not written back (torch renormalises in place)


@pytest.mark.parametrize("level", [0, 1, -1, 2, -3])
def test_to_nested_jagged_level(level):
    import lodtensor as lt  # noqa: PLC0415

    # 2 documents, 3 sentences ([2, 0, 3] words), rows of width 2: level 0 the documents, 1 the sentences
    t = lt.LoDTensor(np.arange(10.0).reshape(5, 2), [[0, 2, 3], [0, 2, 2, 5]])
    if level in (2, -3):
        with pytest.raises(ValueError, match=r"level must be in \[-2, 1\] for lod_level 2, got"):
            t.to_nested_jagged(level=level)
        return
    njt = t.to_nested_jagged(level=level)
    offsets = t.lod.absolute_offsets(level)
    assert njt.layout == torch.jagged and njt.offsets().tolist() == offsets.tolist()
    assert np.shares_memory(njt.values().numpy(), t.data)
    for got, a, b in zip(njt.unbind(), offsets[:-1], offsets[1:]):
        np.testing.assert_array_equal(got.numpy(), t.data[a:b])
    assert lt.from_torch(njt).lod() == [offsets.tolist()]
    with pytest.raises(TypeError, match="level must be an int"):
        t.to_nested_jagged(level="0")
