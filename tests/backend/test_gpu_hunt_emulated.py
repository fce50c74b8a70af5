"""GPU paths without a GPU: regressions found by running the CuPy backend and the torch-CUDA route on
the emulated CUDA kernels (``cuda_emu``), checked against plain NumPy and torch's own ops.

Run by ``make test-cupy-emulated`` (``LT_CUPY_EMULATED=1 pytest -k cupy``); skipped elsewhere and
without g++ (the emulator's compiler).
"""

import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.backend.cupy import _tuning  # noqa: E402

pytestmark = [
    pytest.mark.skipif(os.environ.get("LT_CUPY_EMULATED") != "1", reason="emulated CUDA off (LT_CUPY_EMULATED=1)"),
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in"),
]


def _numpy_softmax(host, lengths):
    """Softmax over each sequence's rows, per column, in plain NumPy (a masked row is -inf)."""
    out, start = np.empty_like(host), 0
    with np.errstate(invalid="ignore"):
        for n in lengths:
            part = host[start : start + n]
            if n:
                e = np.exp(part - part.max(axis=0))
                out[start : start + n] = e / e.sum(axis=0)
            start += n
    return out


def _masked(lengths, width, seed):
    """Rows with -inf masks: every third row, each sequence's first row, one column all -inf in the
    second sequence (NumPy gives NaN there) and one whole sequence of -inf."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    host = rng.standard_normal((int(offsets[-1]), width)) * 3
    host[::3] = -np.inf
    host[offsets[:-1][lengths > 0]] = -np.inf
    if lengths[1]:
        host[offsets[1] : offsets[2], 0] = -np.inf
    last = len(lengths) - 1
    host[offsets[last] : offsets[last + 1]] = -np.inf
    return host, offsets


# (lengths, width, SOFTMAX_BLOCK_STEPS): sequences of a few narrow rows one thread each; pieces in three
# passes; by blocks; a sequence of several pieces (width 1: 8192 rows a piece) and its combine pass
ROUTES = {
    "short": ([3, 5, 0, 2, 7, 4], 1, 4),
    "pieces": ([40, 70, 0, 1, 33, 9], 3, 0),
    "blocks": ([300, 257, 0, 255, 1024, 260], 33, 1),
    "combine": ([5, 9000, 0, 3, 17, 2], 1, 0),
    "combine_blocks": ([5, 700, 0, 600, 300, 20], 3, 1),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("route_name", sorted(ROUTES))
def test_cupy_softmax_of_masked_rows_gives_numpys(emulated, monkeypatch, route_name, dtype):
    """A -inf row read first by a lane (m still -inf) made exp(-inf + inf) = NaN and spoilt its whole
    column: masked softmax gave NaN where NumPy gives 0 for the masked rows and the softmax of the rest."""
    lengths, width, steps = ROUTES[route_name]
    lengths = np.array(lengths)
    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
    host, offsets = _masked(lengths, width, seed=width)
    host = host.astype(dtype)
    got = emulated.numpy(emulated.be.segment_softmax(emulated.array(host), emulated.array(offsets)))
    want = _numpy_softmax(host, lengths)
    assert np.isnan(want).any() and (want == 0).any()  # the all -inf column and sequence; the masked rows
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-7)


def test_cupy_sequence_softmax_with_masks_on_the_torch_route(route):
    """The same kernels under torch CUDA tensors (the route's autograd Function): torch.softmax's
    values, and its gradient through the masked rows."""
    lengths = np.array([4, 300, 0, 9, 2])
    host, offsets = _masked(lengths, 5, seed=7)
    x = torch.tensor(host, requires_grad=True)
    got = S.sequence_softmax(lt.LoDTensor(x, [offsets.tolist()])).data
    weights = torch.linspace(-1, 1, got.numel(), dtype=torch.float64).reshape(got.shape)
    (got * weights).nan_to_num().sum().backward()
    ref = torch.tensor(host, requires_grad=True)
    want = torch.cat([torch.softmax(part, dim=0) for part in ref.split(lengths.tolist())])
    (want * weights).nan_to_num().sum().backward()
    torch.testing.assert_close(got.detach(), want.detach(), equal_nan=True)
    torch.testing.assert_close(x.grad, ref.grad, equal_nan=True)
    assert any(name.startswith("lt_softmax") for name, *_ in route.launches)


def _mean_rows(x, lengths):
    return torch.stack([part.float().mean(0) if len(part) else part.new_zeros(part.shape[1:]).float()
                        for part in x.split(lengths)]).to(x.dtype)


@pytest.mark.parametrize("row", [(3,), (2, 3), ()])
def test_cupy_torch_route_bfloat16_average_keeps_its_gradient(route, row):
    """bfloat16 (which the kernels lack) averages as float32 sums divided in place: the sum's result was
    a view made inside the route's Function, and the division raised "a view ... modified inplace"."""
    lengths = [3, 0, 300, 1]
    g = torch.Generator().manual_seed(0)
    base = torch.randn((sum(lengths), *row), generator=g).to(torch.bfloat16)
    x = base.clone().requires_grad_(True)
    got = S.sequence_pool(lt.LoDTensor(x, [np.concatenate([[0], np.cumsum(lengths)]).tolist()]), "average").data
    got.float().sum().backward()
    ref = base.clone().requires_grad_(True)
    want = _mean_rows(ref, lengths)
    want.float().sum().backward()
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(x.grad, ref.grad)


@pytest.mark.parametrize("op", ["sum", "average", "unpad"])
@pytest.mark.parametrize("row", [(3,), (2, 3), ()])
def test_cupy_torch_route_outputs_take_in_place_ops(route, op, row):
    """Outputs of the route's sum, mean and unpad are plain tensors, as on the CPU: writing them in place
    (out.mul_(2)) keeps autograd right, where it raised for a view returned by a custom Function."""
    lengths = [2, 5, 1, 300]  # no empty sequence: the pools' fill of empty ones would copy the result
    offsets = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    g = torch.Generator().manual_seed(1)
    base = torch.randn((sum(lengths), *row), generator=g, dtype=torch.float64)
    x = base.clone().requires_grad_(True)
    t = lt.LoDTensor(x, [offsets])
    if op == "unpad":
        padded, length = S.sequence_pad(t, 0.0)
        out = S.sequence_unpad(padded, length).data
        want = base * 2
    elif op == "sum":
        out = S.sequence_pool(t, "sum").data
        want = torch.stack([part.sum(0) for part in base.split(lengths)]) * 2
    else:
        out = S.sequence_pool(t, "average").data
        want = _mean_rows(base, lengths) * 2
    out.mul_(2)
    out.sum().backward()
    torch.testing.assert_close(out.detach(), want.reshape(out.shape))
    counts = torch.tensor(lengths, dtype=torch.float64).repeat_interleave(torch.tensor(lengths))
    scale = {"unpad": torch.ones_like(counts), "sum": torch.ones_like(counts), "average": 1 / counts}[op]
    torch.testing.assert_close(x.grad, (2 * scale).reshape((-1,) + (1,) * len(row)).expand_as(base))
