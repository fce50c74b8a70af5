"""torch.func.grad through the torch backend's autograd Functions (forward / setup_context / backward),
on CPU tensors, on the emulated torch-CUDA route and (marked gpu) on CUDA tensors (the
``torch_device`` fixture), whose Functions run the project's CUDA kernels."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S

torch = pytest.importorskip("torch")
from torch.func import grad  # noqa: E402

OFFSETS = [[0, 3, 3, 7, 10]]


def _host(x):
    return x.detach().cpu().numpy()


def _dense_loss(op):
    """The same loss computed per sequence with dense torch ops (the reference)."""

    def loss(x):
        total = x.new_zeros(())
        bounds = OFFSETS[0]
        for a, b in zip(bounds[:-1], bounds[1:]):
            part = x[a:b]
            if op == "sum":
                total = total + (part.sum(0) ** 2).sum()
            elif op == "max" and b > a:
                total = total + (part.amax(0) ** 2).sum()
            elif op == "softmax" and b > a:
                total = total + (torch.softmax(part, 0) * part).sum()
        return total

    return loss


@pytest.mark.parametrize("op", ["sum", "max", "softmax"])
def test_torch_func_grad_matches_the_dense_reference(op, torch_device):
    x = torch.randn(10, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).to(torch_device)

    def ours(values):
        t = lt.LoDTensor(values, OFFSETS)
        if op == "softmax":
            return (S.sequence_softmax(t).data * values).sum()
        return (S.sequence_pool(t, op).data ** 2).sum()

    np.testing.assert_allclose(_host(grad(ours)(x)), _host(grad(_dense_loss(op))(x)), rtol=1e-10, atol=1e-12)


def test_torch_func_grad_through_padding(torch_device):
    x = torch.randn(10, 4, dtype=torch.float64).to(torch_device)

    def ours(values):
        padded, _ = lt.LoDTensor(values, OFFSETS).to_padded()
        return (padded ** 2).sum()

    np.testing.assert_allclose(_host(grad(ours)(x)), _host(2 * x))


@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_torch_func_grad_through_the_recurrences(layer, torch_device):
    from lodtensor.nn import functional as F

    g = torch.Generator().manual_seed(5)
    d = 3
    x = torch.randn(7, (4 if layer == "lstm" else 3) * d, dtype=torch.float64, generator=g)
    lod = [[0, 2, 2, 7]]
    x = x.to(torch_device)
    if layer == "lstm":
        w = torch.randn(d, 4 * d, dtype=torch.float64, generator=g)
        b = torch.randn(1, 7 * d, dtype=torch.float64, generator=g)
        w, b = w.to(torch_device), b.to(torch_device)

        def loss(x):
            return F.dynamic_lstm(lt.LoDTensor(x, lod), w, b)[0].data.square().sum()
    else:
        w = torch.randn(d, 3 * d, dtype=torch.float64, generator=g)
        b = torch.randn(1, 3 * d, dtype=torch.float64, generator=g)
        w, b = w.to(torch_device), b.to(torch_device)

        def loss(x):
            return F.dynamic_gru(lt.LoDTensor(x, lod), w, b).data.square().sum()

    xr = x.clone().requires_grad_()
    loss(xr).backward()
    np.testing.assert_allclose(_host(grad(loss)(x)), _host(xr.grad), rtol=1e-12)  # torch.func = autograd
