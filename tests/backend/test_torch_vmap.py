"""torch.func.vmap over sequence ops on torch tensors: a batch of samples sharing one LoD (vmap's
batch dimension on the data). The backend's autograd Functions carry a vmap rule (``_vmap.rows_rule``:
the batch becomes more columns of the same rows); per-sample gradients (``vmap(grad(f))``) go
through them. On CPU, on the emulated torch-CUDA route (its kernels emulated) and, marked gpu, on
CUDA. A LoD per sample is refused with a clear error."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S

torch = pytest.importorskip("torch")
from torch.func import grad, vmap  # noqa: E402

from ._sequence_ops import sequence_ops  # noqa: E402

LOD = [[0, 3, 3, 7, 8, 20]]
TWO_LEVELS = [[0, 2, 5], [0, 3, 3, 7, 8, 20]]
OPS = sequence_ops(LOD, TWO_LEVELS[0])


def _batch(device, shape=(4, 20, 3)):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(shape, dtype=torch.float64, generator=g)
    x[1, 4] = x[1, 5]  # a tie for max/min's shared gradient
    return x.to(device)


def _close(a, b):
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", sorted(OPS))
def test_vmap_equals_a_loop_over_samples(torch_device, op):
    f = OPS[op]
    x = _batch(torch_device)
    want = torch.stack([f(x[i]) for i in range(x.shape[0])])
    _close(vmap(f)(x), want)
    _close(vmap(f, in_dims=1, out_dims=1)(x.transpose(0, 1)), want.transpose(0, 1))


@pytest.mark.parametrize("op", ["sum", "average", "max", "softmax", "pad", "unpad"])
def test_per_sample_gradients(torch_device, op):
    f = OPS[op]

    def loss(v):
        return (f(v) ** 2 * torch.arange(1.0, 4.0, dtype=v.dtype, device=v.device)).sum()

    x = _batch(torch_device)
    want = torch.stack([grad(loss)(x[i]) for i in range(x.shape[0])])
    _close(vmap(grad(loss))(x), want)


def test_vmap_over_rows_of_several_dims_and_one_dim(torch_device):
    x = _batch(torch_device, (3, 20, 2, 2))
    f = OPS["softmax"]
    _close(vmap(f)(x), torch.stack([f(x[i]) for i in range(3)]))
    y = _batch(torch_device, (3, 20))
    g = OPS["max"]
    _close(vmap(g)(y), torch.stack([g(y[i]) for i in range(3)]))


@pytest.mark.parametrize("op", ["sum", "max", "softmax", "pad", "unpad"])
def test_the_torch_cuda_route_runs_its_kernels_under_vmap(route, op):
    route.launches.clear()
    x = _batch("cpu")
    f = OPS[op]
    got = vmap(f)(x)
    assert route.launches, "the torch-CUDA route ran no kernel under vmap"
    _close(got, torch.stack([f(x[i]) for i in range(x.shape[0])]))


def test_a_lod_per_sample_is_refused_clearly():
    x = _batch("cpu")
    offsets = torch.tensor([LOD[0]] * 4)
    with pytest.raises(TypeError, match="torch.func.*same LoD for every sample"):
        vmap(lambda v, o: S.sequence_pool(lt.LoDTensor(v, [o]), "max").data)(x, offsets)


def test_a_batched_argument_other_than_the_data_is_refused_clearly():
    from lodtensor.backend.torch._cpu import PadCPU  # noqa: PLC0415

    x = _batch("cpu")
    offsets = torch.tensor(LOD[0])
    with pytest.raises(ValueError, match=r"PadCPU: only the data may be batched.*argument\(s\) \[3\]"):
        vmap(lambda v, p: PadCPU.apply(v, offsets, 12, p, None), in_dims=(0, 0))(x, torch.zeros(4, dtype=x.dtype))
