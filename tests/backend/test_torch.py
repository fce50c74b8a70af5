"""torch backend: zero-copy exchange, array type in = array type out, autograd."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import get_backend
from lodtensor.backend.torch import _tuning as torch_tuning
from lodtensor.lod import lengths_to_offsets

torch = pytest.importorskip("torch")

OFFSETS = lengths_to_offsets([2, 0, 3, 1])


def test_to_torch_shares_memory_and_lod():
    t = lt.from_nested_list([[1.0, 2.0], [], [3.0]])
    tt = t.to_torch()
    assert isinstance(tt.data, torch.Tensor) and tt.lod is t.lod
    assert tt.data.data_ptr() == t.data.ctypes.data
    assert tt.to_torch() is tt
    assert np.shares_memory(tt.numpy(), t.data)
    assert tt.tolist() == [[1.0, 2.0], [], [3.0]]


def test_torch_data_stays_torch():
    t = lt.from_torch(torch.arange(6.0).reshape(3, 2), recursive_sequence_lengths=[[1, 2]])
    assert t.backend.name == "torch" and t.device == "cpu" and t.dtype == torch.float32
    assert isinstance(t[1].data, torch.Tensor) and t[1].data.shape == (2, 2)
    assert t[1].data.data_ptr() == t.data[1:].data_ptr()
    for result in (t * 2, np.exp(t), t + t, -t, abs(t), t > 2):
        assert isinstance(result.data, torch.Tensor) and result.lod is t.lod
    padded, lengths = t.to_padded(pad_value=-1)
    assert isinstance(padded, torch.Tensor) and padded.tolist() == [[[0, 1], [-1, -1]], [[2, 3], [4, 5]]]
    assert isinstance(lengths, torch.Tensor) and lengths.tolist() == [1, 2]
    back = lt.from_padded(padded, lengths)
    assert torch.equal(back.data, t.data)
    dense, masks = t.to_padded_all()
    assert isinstance(masks[0], torch.Tensor) and torch.equal(lt.from_padded_all(dense, masks).data, t.data)
    assert t[[1, 0]].tolist() == [[[2, 3], [4, 5]], [[0, 1]]]


def test_from_torch_nested():
    parts = [torch.randn(2, 3), torch.randn(0, 3), torch.randn(4, 3)]
    jagged = torch.nested.nested_tensor(parts, layout=torch.jagged)
    t = lt.from_torch(jagged)
    assert t.lod() == [[0, 2, 2, 6]] and t.data.data_ptr() == jagged.values().data_ptr()
    strided = torch.nested.nested_tensor(parts)
    s = lt.from_torch(strided)
    assert s.lod() == [[0, 2, 2, 6]] and torch.equal(s.data, torch.cat(parts))
    with pytest.raises(ValueError, match="first dim only"):
        lt.from_torch(torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(2, 4)]))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        lt.from_torch(np.zeros(3))


def test_mixing_backends_is_an_error():
    a = lt.LoDTensor(np.arange(3.0), [[0, 3]])
    b = a.to_torch()
    with pytest.raises(lt.BackendMismatchError, match="cannot combine 'numpy' and 'torch'"):
        a + b


def _grad(fn, *shape):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fn, (x,))


@pytest.mark.parametrize("kernel", ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_softmax"])
def test_segment_kernels_gradcheck(kernel):
    be = get_backend("torch")
    fn = getattr(be, kernel)
    kwargs = {"empty": 0.0} if kernel in ("segment_max", "segment_min") else {}
    _grad(lambda x: fn(x, OFFSETS, **kwargs), 6, 3)


def test_pad_unpad_gradcheck():
    be = get_backend("torch")
    _grad(lambda x: be.pad(x, OFFSETS, 4, 0.0), 6, 2)
    _grad(lambda p: be.unpad(p, OFFSETS), 4, 3, 2)


def test_lodtensor_ops_keep_autograd():
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    t = lt.from_torch(x, [OFFSETS.tolist()])
    padded, _ = (t * 3).to_padded()
    padded.sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 3.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shortcuts", [True, False])
def test_relu_has_torchs_bits_and_gradient(monkeypatch, dtype, shortcuts):
    """The torch backend's relu (the compiled kernel on CPU where built) against torch.relu: the same
    bits (-0.0 kept, NaN kept with its sign), large (threads, streaming stores) and small; the
    gradient as torch's, double backward included; non-contiguous input takes torch's own relu."""
    from lodtensor.backend.torch import _backend as torch_backend

    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", shortcuts)
    monkeypatch.setattr(torch_tuning, "RELU_CPU_MIN_BYTES", 0)  # small tensors take the kernel too
    backend = get_backend("torch")
    for n in (37, 5_000_003):
        x = torch.randn(n, dtype=dtype)
        x[:6] = torch.tensor([-0.0, 0.0, float("nan"), -float("nan"), -float("inf"), float("inf")], dtype=dtype)
        got, want = backend.relu(x), torch.relu(x)
        assert got.dtype == dtype and got.numpy().tobytes() == want.numpy().tobytes()
        assert x[:6].numpy().tobytes() == np.array([-0.0, 0.0, np.nan, -np.nan, -np.inf, np.inf],
                                                   dtype=x.numpy().dtype).tobytes()  # input untouched
    wide = torch.randn(64, 6, dtype=dtype)[:, ::2]
    assert torch.equal(backend.relu(wide), torch.relu(wide))
    x = torch.randn(40, 3, dtype=torch.float64)
    x = (x + 0.1 * x.sign()).requires_grad_(True)  # away from the kink, for finite differences
    assert torch.autograd.gradcheck(backend.relu, (x,))
    assert torch.autograd.gradgradcheck(backend.relu, (x,))
    x = x.detach().clone()
    x[0, 0] = 0.0
    x.requires_grad_(True)
    y = backend.relu(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(g, (x > 0).to(g.dtype))  # 0 at x == 0, as torch


def test_nested_relu_on_the_torch_backend_matches_torch(monkeypatch):
    import lodtensor.nested as ln
    from lodtensor.backend.torch import _backend as torch_backend

    monkeypatch.setattr(torch_tuning, "RELU_CPU_MIN_BYTES", 0)
    assert not torch_backend._relu_fits(torch.ones(3)[::2])

    values = torch.randn(3000, 8)
    values[0, 0] = -0.0
    nt = ln.nested_tensor_from_jagged(values, torch.tensor([0, 1000, 3000]))
    got = ln.relu(nt)
    assert got.values().numpy().tobytes() == torch.relu(values).numpy().tobytes()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # inside forward_ad
def test_relu_derivatives_follow_torch_beyond_backward(monkeypatch):
    """NaN positions pass the gradient (torch's threshold_backward), forward-mode AD and torch.func
    transforms work, and a torch nested tensor goes to torch's own relu."""
    import torch.autograd.forward_ad as fwAD

    from lodtensor.backend.torch import _backend as torch_backend

    monkeypatch.setattr(torch_tuning, "RELU_CPU_MIN_BYTES", 0)  # these small tensors take the kernel
    assert torch_backend._relu_fits(torch.ones(3))
    backend = get_backend("torch")
    v = torch.tensor([[float("nan"), -1.0], [2.0, 3.0], [-4.0, 0.0]], requires_grad=True)
    (g,) = torch.autograd.grad(backend.relu(v).sum(), v)
    (want,) = torch.autograd.grad(torch.relu(v).sum(), v)
    assert torch.equal(g, want) and g[0, 0] == 1
    x = torch.randn(3, 4)
    with fwAD.dual_level():
        out = backend.relu(fwAD.make_dual(x, torch.full((3, 4), 2.0)))
        assert torch.equal(fwAD.unpack_dual(out).tangent, torch.where(x > 0, 2.0, 0.0))
    assert torch.equal(torch.func.grad(lambda a: backend.relu(a).sum())(x), (x > 0).float())
    assert torch.equal(torch.func.vmap(backend.relu)(x), torch.relu(x))
    y = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(backend.relu, (y,), check_forward_ad=True)
    nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(1, 3)])
    got = backend.relu(nested)
    assert all(torch.equal(a, torch.relu(b)) for a, b in zip(got.unbind(), nested.unbind()))
