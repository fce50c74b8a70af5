"""Row-index ops on a fresh LoD cost no host pass over its rows on a device (audit after 2026-11-27).

The H100 run found segment ids and the pad plan built on the host for every new LoD though the CUDA
kernels used neither. The same held for the ops that gather rows by an index made from the LoD:
sequence_reverse, sequence_concat, sequence_slice, sequence_enumerate, and lodtensor.nn's
sequence_conv and row_conv made that index with NumPy over every row (for 2M rows: 7, 11, 46, 68
and 78 ms of host time, plus a host-to-device copy of 8 bytes per row and window position). On
device data they now make it on the device (``lodtensor/ops/_rows.py``: ``repeat_interleave`` and
``arange`` over per-sequence host arrays); CPU data keep the NumPy index.

Runs the torch-CUDA route's host code on CPU tensors (kernels emulated; ``cuda`` adds the GPU), and
compares every result with the same op on NumPy data.
"""


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.nn import _layers  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402
from lodtensor.ops import _rows as ops_rows  # noqa: E402
from lodtensor.ops import reshape as ops_reshape  # noqa: E402
from lodtensor.ops import select as ops_select  # noqa: E402

LENGTHS = [3, 0, 40, 1, 0, 7, 300, 2]
OFFSETS = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
ROWS = int(OFFSETS[-1])



@pytest.fixture
def device(device_route):
    """Where the route runs (conftest's ``device_route``: emulated, or CUDA marked gpu)."""
    return device_route


#: the host builders of a row index (module, name) that device data must not reach
HOST_BUILDERS = [
    (ops_rows, "concat_ranges"),  # (the host range index of ops/_rows.ranges: CPU data only)
    (ops_select, "offsets_to_segment_ids"),
    (ops_reshape, "offsets_to_segment_ids"),
    (_layers, "_context_rows"),
    (_layers, "_padding_rows"),
]


def _refuse_host_rows(monkeypatch):
    """From now on, fail where op code builds a row index over the LoD's rows on the host."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a host pass over the LoD's rows on the device route")

    for module, name in HOST_BUILDERS:
        monkeypatch.setattr(module, name, refuse)


def _host(width, seed=0, dtype=np.float64):
    return np.random.RandomState(seed).uniform(-1, 1, size=(ROWS, width)).astype(dtype)


def _pair(width, device, seed=0, dtype=np.float64):
    """The same LoDTensor on NumPy and as torch data on ``device``, each with a fresh LoD."""
    host = _host(width, seed, dtype)
    return lt.LoDTensor(host, [OFFSETS]), lt.LoDTensor(torch.from_numpy(host).to(device), [OFFSETS])


def _same(got, want):
    got_data = got.data.detach().cpu().numpy()
    np.testing.assert_allclose(got_data, np.asarray(want.data), rtol=1e-12, atol=1e-12)
    assert got.lod() == want.lod()


PARAMS = {  # host parameters of the layers
    "w3": np.random.RandomState(1).uniform(-1, 1, (3 * 2, 4)),
    "w5": np.random.RandomState(2).uniform(-1, 1, (5 * 2, 4)),
    "pad": np.random.RandomState(3).uniform(-1, 1, (4, 2)),
    "row": np.random.RandomState(4).uniform(-1, 1, (3, 2)),
}

OPS = {
    "reverse": lambda x, y: S.sequence_reverse(x),
    "concat": lambda x, y: S.sequence_concat([x, y]),
    "slice": lambda x, y: S.sequence_slice(x, np.minimum(1, LENGTHS), np.maximum(np.array(LENGTHS) - 2, 0)),
    "sequence_conv": lambda x, y: F.sequence_conv(x, PARAMS["w3"]),
    "sequence_conv_padding": lambda x, y: F.sequence_conv(x, PARAMS["w5"], filter_size=5, padding_start=-1,
                                                          padding_trainable=True, padding_data=PARAMS["pad"]),
    "row_conv": lambda x, y: F.row_conv(x, PARAMS["row"]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_row_index_ops_make_no_host_index_on_the_device(device, monkeypatch, name):
    x_np, x_dev = _pair(2, device)
    y_np, y_dev = _pair(2, device, seed=1)
    want = OPS[name](x_np, y_np)  # NumPy data: the host index, as before
    _refuse_host_rows(monkeypatch)
    got = OPS[name](x_dev, y_dev)
    assert isinstance(got.data, torch.Tensor) and got.data.device.type == torch.device(device).type
    _same(got, want)


def test_reverse_trains_on_the_device_index(device, monkeypatch):
    _refuse_host_rows(monkeypatch)
    _, x = _pair(3, device)
    data = x.data.requires_grad_()
    out = S.sequence_reverse(x)
    weights = torch.arange(ROWS * 3, dtype=torch.float64).reshape(ROWS, 3).to(device)
    (out.data * weights).sum().backward()
    want = np.concatenate([w[::-1] for w in np.split(weights.cpu().numpy(), OFFSETS[1:-1])])
    np.testing.assert_array_equal(data.grad.cpu().numpy(), want)


def test_cpu_tensors_keep_the_host_index(monkeypatch):
    """Off the route, CPU tensors keep the NumPy index (the host build there costs less than torch's ops)."""
    calls = []
    real = ops_rows.concat_ranges
    monkeypatch.setattr(ops_rows, "concat_ranges", lambda *a: calls.append(1) or real(*a))
    x_np, x_cpu = _pair(2, "cpu")
    _same(S.sequence_concat([x_cpu, x_cpu]), S.sequence_concat([x_np, x_np]))
    assert calls


@pytest.mark.parametrize("pad_value", [0, -1])
@pytest.mark.parametrize("win_size", [1, 3, 7])
def test_enumerate_makes_no_host_index_on_the_device(device, monkeypatch, win_size, pad_value):
    _refuse_host_rows(monkeypatch)
    ids = np.random.RandomState(win_size).randint(0, 50, size=(ROWS, 1)).astype(np.int64)
    got = S.sequence_enumerate(lt.LoDTensor(torch.from_numpy(ids).to(device), [OFFSETS]), win_size, pad_value)
    # the reference: every window by hand, inside its own sequence
    want = np.full((ROWS, win_size), pad_value, dtype=np.int64)
    for a, b in zip(OFFSETS[:-1], OFFSETS[1:]):
        for r in range(a, b):
            take = min(win_size, b - r)
            want[r, :take] = ids[r : r + take, 0]
    np.testing.assert_array_equal(got.data.cpu().numpy(), want)
