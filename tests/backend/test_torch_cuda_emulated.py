"""The torch-CUDA route (``backend/torch/_cuda.py``) without a GPU: CPU tensors sent down it, the
real CUDA kernels emulated on the CPU (``cuda_emu``), against NumPy and torch's own ops.

On a GPU the same host code views CUDA tensors' memory; here the cupy stub views CPU tensors',
so what runs is the route's real code: the autograd Functions, the launches, the backward passes.
"""

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.backend.torch import _cuda  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")


def _launched(stub):
    return {name for name, *_ in stub.launches}


LENGTHS = [3, 0, 40, 1, 0, 7, 300]


def _tensor(width, dtype=torch.float64, requires_grad=False):
    offsets = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
    g = torch.Generator().manual_seed(width)
    data = torch.randn((int(offsets[-1]), width), generator=g, dtype=torch.float64).to(dtype)
    return lt.LoDTensor(data.requires_grad_(requires_grad), [offsets.tolist()])


@pytest.mark.parametrize("width", [1, 4, 6, 32])
@pytest.mark.parametrize("kind", ["sum", "average", "max", "min"])
def test_pools_run_the_kernels_and_match_numpy(route, width, kind):
    t = _tensor(width)
    got = S.sequence_pool(t, kind, pad_value=-2.0).data
    want = S.sequence_pool(lt.LoDTensor(t.data.numpy(), t.lod()), kind, pad_value=-2.0).data
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert any(name.startswith("lt_segment_reduce") for name in _launched(route))


@pytest.mark.parametrize("width", [1, 8])
def test_softmax_pad_unpad_run_the_kernels(route, width):
    t = _tensor(width)
    host = lt.LoDTensor(t.data.numpy(), t.lod())
    np.testing.assert_allclose(S.sequence_softmax(t).data.numpy(), S.sequence_softmax(host).data, rtol=1e-12)
    padded, lengths = S.sequence_pad(t, -1.0)
    want, _ = S.sequence_pad(host, -1.0)
    np.testing.assert_array_equal(padded.data.numpy(), want.data)
    back = S.sequence_unpad(padded, lengths.data.numpy())
    np.testing.assert_array_equal(back.data.numpy(), t.data.numpy())
    names = _launched(route)
    assert {"lt_pad<unsigned long long>", "lt_unpad<unsigned long long>"} <= names
    assert any(name.startswith("lt_softmax_") for name in names)


def test_float16_sums_accumulate_in_float32(route):
    t = lt.LoDTensor(torch.ones((3000, 2), dtype=torch.float16), [[0, 3000]])
    assert S.sequence_pool(t, "average").data.tolist() == [[1.0, 1.0]]
    assert S.sequence_pool(t, "sum").data.tolist() == [[3000.0, 3000.0]]


@pytest.mark.parametrize("kind", ["sum", "average", "max", "min", "softmax", "pad"])
def test_gradients_match_torch_ops(route, kind, monkeypatch):
    """The Functions' backward passes against autograd through torch's own ops (the generic path)."""

    def run(x):
        t = lt.LoDTensor(x, [np.concatenate([[0], np.cumsum(LENGTHS)]).tolist()])
        if kind == "softmax":
            return S.sequence_softmax(t).data
        if kind == "pad":
            return S.sequence_pad(t, 0.0)[0].data
        return S.sequence_pool(t, kind).data

    base = _tensor(5).data
    weights = torch.randn(run(base).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x = base.clone().requires_grad_(True)
    (run(x) * weights).sum().backward()
    monkeypatch.setattr(_cuda, "_EMULATED", False)  # torch's ops
    y = base.clone().requires_grad_(True)
    (run(y) * weights).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradcheck_in_float64(route):
    offsets = [0, 2, 2, 5, 6]
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    for fn in (lambda d: S.sequence_pool(lt.LoDTensor(d, [offsets]), "average").data,
               lambda d: S.sequence_softmax(lt.LoDTensor(d, [offsets])).data,
               lambda d: S.sequence_pad(lt.LoDTensor(d, [offsets]), 0.0)[0].data):
        assert torch.autograd.gradcheck(fn, (x,))


def test_a_lods_plan_is_kept_on_the_torch_route(route):
    """torch tensors' LoDs keep their piece plan too (keyed by the LoD's frozen offsets tensor)."""
    t = _tensor(8)
    host = lt.LoDTensor(t.data.numpy(), t.lod())
    for kind in ("sum", "max", "sum"):
        np.testing.assert_allclose(S.sequence_pool(t, kind).data.numpy(), S.sequence_pool(host, kind).data,
                                   rtol=1e-12, atol=1e-12)
    assert sum(name in ("lt_piece_counts", "lt_piece_plan") for name, *_ in route.launches) == 1
