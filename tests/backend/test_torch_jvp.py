"""Forward-mode derivatives through the sequence ops on torch tensors (the autograd Functions' ``jvp``,
``backend/torch/_jvp.py``): ``torch.func.jvp``, ``jacfwd`` and ``torch.autograd.forward_ad`` dual
tensors. Each is checked against the reverse mode (``jacfwd`` equals ``jacrev``) and against a
central difference, on CPU, on the emulated torch-CUDA route and (marked gpu) on CUDA. Before, every
one raised torch's "You must implement the jvp function"."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.func import jacfwd, jacrev, jvp  # noqa: E402

from ._sequence_ops import sequence_ops  # noqa: E402

LOD = [[0, 3, 3, 7, 8]]
OPS = sequence_ops(LOD, [0, 2, 4])


def _x(device):
    g = torch.Generator().manual_seed(5)
    return torch.randn(8, 3, dtype=torch.float64, generator=g).to(device)


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", sorted(OPS))
def test_jvp_matches_reverse_mode_and_a_difference(torch_device, op):
    f = OPS[op]
    x = _x(torch_device)
    t = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(6)).to(torch_device)
    value, tangent = jvp(f, (x,), (t,))
    _close(value, f(x))
    eps = 1e-6
    _close(tangent, (f(x + eps * t) - f(x - eps * t)) / (2 * eps), tol=1e-6)
    _close(jacfwd(f)(x), jacrev(f)(x))


@pytest.mark.parametrize("op", ["sum", "max", "softmax", "pad"])
def test_forward_ad_dual_tensors(torch_device, op):
    import torch.autograd.forward_ad as fwad

    f = OPS[op]
    x = _x(torch_device)
    t = torch.ones_like(x)
    with fwad.dual_level():
        value, tangent = fwad.unpack_dual(f(fwad.make_dual(x, t)))
    assert tangent is not None
    _close(value, f(x))
    _close(tangent, jvp(f, (x,), (t,))[1])
