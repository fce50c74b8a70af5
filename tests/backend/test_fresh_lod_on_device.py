"""A fresh LoD on the torch-CUDA route costs no host pass over its rows (the H100 run of 2026-11-27).

A training step builds a new LoD per batch. On the device the segment kernels need no segment ids
and the pad kernel no host plan, yet op code asked the LoD for both: host segment ids for 8M rows
(a NumPy pass, a frozen copy and a host-to-device copy of 64 MB) and a host pad plan (200 ms),
which made max forward+backward 86 ms on an H100 where its kernels take about 8. The backend now
says, per data, whether it wants them (``wants_segment_ids``, ``wants_host_plan``): the CUDA route
takes neither, and its backward passes make the ids on the device when they need them.

Runs the route's host code on CPU tensors (kernels emulated; ``torch_device`` adds the GPU).
"""

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import _dense  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.lod import LoD  # noqa: E402


@pytest.fixture
def device(device_route):
    """Where the route runs (conftest's ``device_route``: emulated, or CUDA marked gpu)."""
    return device_route


LENGTHS = [3, 0, 40, 1, 0, 7, 300]


@pytest.fixture
def no_host_passes(monkeypatch):
    """Fail where op code asks a LoD for host segment ids or a host pad plan."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a host pass over the LoD's rows on the device route")

    monkeypatch.setattr(LoD, "segment_ids", refuse)
    monkeypatch.setattr(_dense, "pad_plan", refuse)


def _data(width, device):
    g = torch.Generator().manual_seed(width)
    return torch.randn((sum(LENGTHS), width), generator=g, dtype=torch.float64).to(device)


def _offsets():
    return np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)


def _reference(width, op, weights):
    """The same step on the NumPy-free torch CPU ops: each sequence alone."""
    x = _data(width, "cpu").requires_grad_()
    rows, o = [], _offsets()
    for a, b in zip(o[:-1], o[1:]):
        seq = x[a:b]
        if op == "softmax":
            rows.append(torch.softmax(seq, dim=0))
        elif b == a:
            rows.append(torch.zeros((1, width), dtype=x.dtype))
        else:
            rows.append({"sum": seq.sum, "max": seq.amax}[op](dim=0, keepdim=True))
    out = torch.cat(rows)
    (out * weights).sum().backward()
    return out.detach(), x.grad


@pytest.mark.parametrize("op", ["sum", "max", "softmax"])
@pytest.mark.parametrize("width", [1, 6, 32])
def test_a_fresh_lod_trains_without_host_ids(device, no_host_passes, op, width):
    x = _data(width, device).requires_grad_()
    t = lt.LoDTensor(x, [_offsets()])
    out = S.sequence_softmax(t) if op == "softmax" else S.sequence_pool(t, op)
    g = torch.Generator().manual_seed(7)
    weights = torch.randn(out.data.shape, generator=g, dtype=torch.float64)
    (out.data * weights.to(device)).sum().backward()
    want, want_grad = _reference(width, op, weights)
    np.testing.assert_allclose(out.data.detach().cpu().numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad.cpu().numpy(), want_grad.numpy(), rtol=1e-12, atol=1e-12)


def test_a_fresh_lod_pads_and_unpads_without_a_host_plan(device, no_host_passes):
    x = _data(4, device).requires_grad_()
    t = lt.LoDTensor(x, [_offsets()])
    padded, lengths = S.sequence_pad(t, -1.0)
    assert padded.data.shape == (len(LENGTHS), max(LENGTHS), 4)
    back = S.sequence_unpad(padded, lengths.data.cpu().numpy())
    back.data.sum().backward()
    np.testing.assert_array_equal(back.data.detach().cpu().numpy(), x.detach().cpu().numpy())
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.ones(x.shape))


@pytest.mark.parametrize("op", ["sum", "max", "softmax", "pad"])
def test_the_route_launches_the_kernels(route, op):
    t = lt.LoDTensor(_data(4, "cpu"), [_offsets()])
    if op == "pad":
        S.sequence_pad(t, -1.0)
    else:
        S.sequence_softmax(t) if op == "softmax" else S.sequence_pool(t, op)
    names = {name for name, *_ in route.launches}
    prefix = {"sum": "lt_segment_reduce", "max": "lt_segment_reduce", "softmax": "lt_softmax", "pad": "lt_pad"}[op]
    assert any(name.startswith(prefix) for name in names), names


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")
def test_which_data_want_host_ids_and_plans(route):
    be = lt.get_backend("torch")
    down_the_route = _data(2, "cpu")  # CPU tensors take the CUDA route here (emulated)
    assert not be.wants_segment_ids(down_the_route) and not be.wants_host_plan(down_the_route)
    complex_rows = torch.zeros(2, dtype=torch.complex64)  # no kernel for them: the CPU ops, the host ids
    assert be.wants_segment_ids(complex_rows) and be.wants_host_plan(complex_rows)
    numpy_be = lt.get_backend("numpy")
    assert numpy_be.wants_host_plan(np.zeros(2)) and not numpy_be.wants_segment_ids(np.zeros(2))


def test_cpu_tensors_keep_the_cached_host_ids():
    """Off the route (no emulator), CPU tensors keep the LoD's cached host ids and plan: NumPy makes
    the ids 5x faster than torch's repeat_interleave there, once per LoD."""
    be = lt.get_backend("torch")
    x = _data(2, "cpu")
    assert be.wants_segment_ids(x) and be.wants_host_plan(x)
    t = lt.LoDTensor(x, [_offsets()])
    S.sequence_pool(t, "sum")
    assert t.lod.segment_ids() is t.lod.segment_ids()  # made once, cached
