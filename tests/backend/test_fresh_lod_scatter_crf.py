"""sequence_scatter and linear_chain_crf's label path on a fresh LoD: no host pass over the rows on a device.

Both read their device ids back to check them, and built their gather indices over every row on the
host. ``sequence_scatter`` brought a torch CUDA (or CuPy) index to the host through ``tolist()`` (a
Python list of every row: about 1.7 s of host time for 2M rows), checked it there, made its flat
index from the LoD's host segment ids and copied it back to the device (16 bytes a row crossed the
bus). ``linear_chain_crf`` copied its labels to the host (8 bytes a row), checked them, and made the
emission index and the path index (``_path_index``: 4 int64 a row) with NumPy, then copied them to
the device (host time of its label path at 2M rows, 25K sequences, torch ``meta`` data: about 70 ms,
2.6 ms after).

On device data with ids on that device, both now make their indices there from per-sequence host
arrays, and check the ids with one read of four scalars (``ops._common.int_extremes``: the least and
greatest id and where they are), raising the host path's errors; ``crf_decoding`` compares its path
with a device label without any read. CPU data keep the host path.

Runs the torch-CUDA route's host code on CPU tensors (kernels emulated; ``cuda`` adds the GPU) and the
CuPy backend on its stub, and compares values and gradients with plain CPU data.
"""

import importlib
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import get_backend  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.lod import LoD  # noqa: E402
from lodtensor.nn import _common  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402
from lodtensor.ops import _rows as ops_rows  # noqa: E402
from lodtensor.ops import select as ops_select  # noqa: E402

from .conftest import count_reads  # noqa: E402

crf_module = importlib.import_module("lodtensor.nn._crf")

LENGTHS = [3, 0, 40, 1, 0, 7, 300, 2]
LAST = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
LODS = {  # lod name -> its levels (the last level: the sequences scatter and the CRF run over)
    "one_level": [LAST],
    "two_level": [np.array([0, 2, 2, 5, 6, 8]), LAST],  # an empty top-level sequence
    "all_empty": [np.zeros(4, dtype=np.int64)],
    "one_row": [np.array([0, 0, 1])],
}
K = 4  # the CRF's tags
WIDTH = 5  # sequence_scatter's input width


def _lod(name):
    return [level.copy() for level in LODS[name]]  # a fresh LoD every time


def _refuse_host_passes(monkeypatch):
    """From now on, fail where op code reads device ids whole or builds an index over the rows on the host."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a host pass over the LoD's rows (or a copy of device ids) on the device route")

    monkeypatch.setattr(LoD, "segment_ids", refuse)
    monkeypatch.setattr(ops_select, "host_ints", refuse)
    monkeypatch.setattr(ops_select, "offsets_to_segment_ids", refuse)
    monkeypatch.setattr(ops_rows, "concat_ranges", refuse)
    monkeypatch.setattr(crf_module, "_labels", refuse)
    monkeypatch.setattr(crf_module, "_path_index", refuse)
    monkeypatch.setattr(_common, "_host_rows", refuse, raising=False)


# -- sequence_scatter ------------------------------------------------------------------------------

def _scatter_inputs(lod_name, row_shape=(), index_dtype=np.int64, seed=0):
    levels = LODS[lod_name]
    rows, n = int(levels[-1][-1]), int(levels[-1].size - 1)
    rng = np.random.RandomState(seed)
    return (rng.uniform(-1, 1, (n, WIDTH) + row_shape), rng.randint(0, WIDTH, (rows, 1)).astype(index_dtype),
            rng.uniform(-1, 1, (rows,) + (row_shape or (1,))))


def _scatter(host, device, lod_name, grad=False):
    """sequence_scatter on torch data on ``device``: the output and, with ``grad``, the gradients of
    input and updates for a fixed upstream weighting."""
    x, index, updates = (torch.tensor(a, device=device) for a in host)
    for t in (x, updates):
        t.requires_grad_(grad)
    out = S.sequence_scatter(x, lt.LoDTensor(index, _lod(lod_name)), lt.LoDTensor(updates, _lod(lod_name)))
    if not grad:
        return out.detach().cpu().numpy(), None, None
    weights = torch.tensor(np.random.RandomState(9).uniform(-1, 1, tuple(out.shape)), device=device)
    (out * weights).sum().backward()
    return out.detach().cpu().numpy(), x.grad.cpu().numpy(), updates.grad.cpu().numpy()


@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint8], ids=["int64", "int32", "uint8"])
@pytest.mark.parametrize("row_shape", [(), (2,)], ids=["2d", "3d"])
@pytest.mark.parametrize("lod_name", sorted(LODS))
def test_scatter_makes_its_index_on_the_device(enter_route, monkeypatch, lod_name, row_shape, index_dtype):
    host = _scatter_inputs(lod_name, row_shape, index_dtype)
    want = _scatter(host, "cpu", lod_name, grad=True)  # plain CPU tensors: the host index, as before
    on_numpy = S.sequence_scatter(host[0], lt.LoDTensor(host[1], _lod(lod_name)),
                                  lt.LoDTensor(host[2], _lod(lod_name)))
    np.testing.assert_allclose(want[0], on_numpy, rtol=1e-12, atol=1e-12)
    device = enter_route()
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = _scatter(host, device, lod_name, grad=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    rows = int(LODS[lod_name][-1][-1])
    assert reads == ([4] if rows else []), reads  # the check: one read of four scalars (none without rows)


@pytest.mark.parametrize("bad", [-1, WIDTH, 10 ** 12], ids=["negative", "width", "huge"])
def test_scatter_refuses_a_device_column_out_of_range(device_route, monkeypatch, bad):
    x, index, updates = _scatter_inputs("one_level")
    index[41] = bad  # a row of the third sequence
    want = re.escape(f"sequence_scatter(): index[41]={bad} is out of range for input width {WIDTH}")
    with pytest.raises(IndexError, match=f"^{want}$"):
        S.sequence_scatter(x, lt.LoDTensor(index, _lod("one_level")), lt.LoDTensor(updates, _lod("one_level")))
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    x_dev = torch.tensor(x, device=device_route)
    before = x_dev.clone()
    with pytest.raises(IndexError, match=f"^{want}$"):
        S.sequence_scatter(x_dev, lt.LoDTensor(torch.tensor(index, device=device_route), _lod("one_level")),
                           lt.LoDTensor(torch.tensor(updates, device=device_route), _lod("one_level")))
    assert reads == [4]  # the extremes alone, not the index
    assert torch.equal(x_dev, before)  # the caller's input untouched


def test_scatter_refuses_a_device_index_of_floats_or_bools(device_route, monkeypatch):
    x, index, updates = (torch.tensor(a, device=device_route) for a in _scatter_inputs("one_level"))
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    for wrong in (index.double(), index > 2):
        with pytest.raises(TypeError, match=r"index must hold integers, got torch\.(float64|bool)"):
            S.sequence_scatter(x, lt.LoDTensor(wrong, _lod("one_level")), lt.LoDTensor(updates, _lod("one_level")))
    assert reads == []


def test_scatter_with_a_host_index_makes_the_flat_index_on_the_device(device_route, monkeypatch):
    """A host (NumPy) index on device data: checked on the host as it is, the flat index made on the device."""
    x, index, updates = _scatter_inputs("two_level")
    want = S.sequence_scatter(x, lt.LoDTensor(index, _lod("two_level")), lt.LoDTensor(updates, _lod("two_level")))
    monkeypatch.setattr(LoD, "segment_ids", lambda *a, **k: pytest.fail("host segment ids on the device route"))
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = S.sequence_scatter(torch.tensor(x, device=device_route), lt.LoDTensor(index, _lod("two_level")),
                             lt.LoDTensor(torch.tensor(updates, device=device_route), _lod("two_level")))
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert reads == []


def test_scatter_on_cupy_makes_its_index_on_the_device(emulated, monkeypatch):
    x, index, updates = _scatter_inputs("one_level", (2,))
    want = S.sequence_scatter(x, lt.LoDTensor(index, _lod("one_level")), lt.LoDTensor(updates, _lod("one_level")))
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, emulated.be)
    got = S.sequence_scatter(emulated.array(x), lt.LoDTensor(emulated.array(index), _lod("one_level")),
                             lt.LoDTensor(emulated.array(updates), _lod("one_level")))
    assert reads == [4]
    np.testing.assert_allclose(emulated.numpy(got), want, rtol=1e-12, atol=1e-12)


# -- linear_chain_crf and crf_decoding ----------------------------------------------------------------

def _crf_inputs(lod_name, seed=0):
    rows = int(LODS[lod_name][-1][-1])
    rng = np.random.RandomState(seed)
    return rng.uniform(-2, 2, (rows, K)), rng.randint(0, K, (rows, 1)), rng.uniform(-1, 1, (K + 2, K))


def _crf(host, device, lod_name, label_shape=(-1, 1), label_dtype=torch.int64):
    """linear_chain_crf's loss on torch data on ``device`` and the gradients of emission and transition."""
    emission, labels, transition = host
    x = torch.tensor(emission, device=device, requires_grad=True)
    w = torch.tensor(transition, device=device, requires_grad=True)
    y = torch.tensor(labels.reshape(label_shape), dtype=label_dtype, device=device)
    loss = F.linear_chain_crf(lt.LoDTensor(x, _lod(lod_name)), lt.LoDTensor(y, _lod(lod_name)), w)
    weights = torch.tensor(np.random.RandomState(8).uniform(0.5, 1.5, tuple(loss.shape)), device=device)
    (loss * weights).sum().backward()
    return [loss.detach().cpu().numpy(), x.grad.cpu().numpy(), w.grad.cpu().numpy()]


@pytest.mark.parametrize("label", ["int64_n1", "int32_n"])
@pytest.mark.parametrize("lod_name", sorted(LODS))
def test_crf_makes_its_label_path_on_the_device(enter_route, monkeypatch, lod_name, label):
    host = _crf_inputs(lod_name)
    shape, dtype = ((-1, 1), torch.int64) if label == "int64_n1" else ((-1,), torch.int32)
    want = _crf(host, "cpu", lod_name, shape, dtype)  # plain CPU tensors: the host label path, as before
    on_numpy = F.linear_chain_crf(lt.LoDTensor(host[0], _lod(lod_name)), lt.LoDTensor(host[1], _lod(lod_name)),
                                  host[2])
    np.testing.assert_allclose(want[0], on_numpy, rtol=1e-12, atol=1e-12)
    device = enter_route()
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = _crf(host, device, lod_name, shape, dtype)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    rows = int(LODS[lod_name][-1][-1])
    assert reads == ([4] if rows else []), reads  # the label check: one read of four scalars


@pytest.mark.parametrize("bad", [-1, K, 1000], ids=["negative", "num_tags", "huge"])
def test_crf_refuses_a_device_label_out_of_range(device_route, monkeypatch, bad):
    emission, labels, transition = _crf_inputs("one_level")
    labels[[5, 200]] = bad
    low, high = min(labels.min(), bad), max(labels.max(), bad)
    want = f"linear_chain_crf(): labels must be in [0, {K}), got {low}..{high}"
    with pytest.raises(ValueError) as on_cpu:
        F.linear_chain_crf(lt.LoDTensor(emission, _lod("one_level")), lt.LoDTensor(labels, _lod("one_level")),
                           transition)
    assert str(on_cpu.value) == want
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    with pytest.raises(ValueError) as on_device:
        F.linear_chain_crf(lt.LoDTensor(torch.tensor(emission, device=device_route), _lod("one_level")),
                           lt.LoDTensor(torch.tensor(labels, device=device_route), _lod("one_level")), transition)
    assert str(on_device.value) == want
    assert reads == [4]


def test_crf_refuses_device_labels_of_floats_without_reading_them(device_route, monkeypatch):
    emission, labels, transition = _crf_inputs("one_level")
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    with pytest.raises(ValueError, match=r"label must hold integer ids of shape \[N, 1\], got torch.float64"):
        F.linear_chain_crf(lt.LoDTensor(torch.tensor(emission, device=device_route), _lod("one_level")),
                           lt.LoDTensor(torch.tensor(labels * 1.0, device=device_route), _lod("one_level")),
                           transition)
    assert reads == []


def test_crf_with_host_labels_makes_its_path_index_on_the_device(device_route, monkeypatch):
    """Host (NumPy) labels on device data: checked on the host as they are, the indices made on the device."""
    emission, labels, transition = _crf_inputs("two_level")
    want = F.linear_chain_crf(lt.LoDTensor(emission, _lod("two_level")), lt.LoDTensor(labels, _lod("two_level")),
                              transition)
    monkeypatch.setattr(crf_module, "_path_index", lambda *a: pytest.fail("a host path index on the device route"))
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = F.linear_chain_crf(lt.LoDTensor(torch.tensor(emission, device=device_route), _lod("two_level")),
                             lt.LoDTensor(labels, _lod("two_level")), transition)
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert reads == []


def test_crf_decoding_compares_a_device_label_on_the_device(device_route, monkeypatch):
    emission, labels, transition = _crf_inputs("one_level")
    want = F.crf_decoding(lt.LoDTensor(emission, _lod("one_level")), transition,
                          label=lt.LoDTensor(labels, _lod("one_level"))).data
    assert 0 < int(np.asarray(want).sum()) < want.shape[0]  # some tags match the label, some do not
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = F.crf_decoding(lt.LoDTensor(torch.tensor(emission, device=device_route), _lod("one_level")), transition,
                         label=lt.LoDTensor(torch.tensor(labels, device=device_route), _lod("one_level"))).data
    np.testing.assert_array_equal(got.cpu().numpy(), np.asarray(want))
    assert reads == []  # no check there: nothing read back


def test_crf_on_cupy_makes_its_label_path_on_the_device(emulated, monkeypatch):
    emission, labels, transition = _crf_inputs("two_level")
    want = F.linear_chain_crf(lt.LoDTensor(emission, _lod("two_level")), lt.LoDTensor(labels, _lod("two_level")),
                              transition)
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, emulated.be)
    got = F.linear_chain_crf(lt.LoDTensor(emulated.array(emission), _lod("two_level")),
                             lt.LoDTensor(emulated.array(labels), _lod("two_level")), transition)
    assert reads == [4], reads
    np.testing.assert_allclose(emulated.numpy(got), want, rtol=1e-12, atol=1e-12)


# -- CPU data keep the host path ---------------------------------------------------------------------

@pytest.mark.parametrize("data", ["numpy", "torch_cpu"])
def test_cpu_data_keep_the_host_indices(monkeypatch, data):
    """Off the route, CPU data take the host segment ids and path index (NumPy builds them for less)."""
    calls = []
    for module, name in ((LoD, "segment_ids"), (crf_module, "_path_index")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    make = (lambda a: a) if data == "numpy" else torch.tensor
    x, index, updates = _scatter_inputs("one_level")
    S.sequence_scatter(make(x), lt.LoDTensor(make(index), _lod("one_level")),
                       lt.LoDTensor(make(updates), _lod("one_level")))
    emission, labels, transition = _crf_inputs("one_level")
    F.linear_chain_crf(lt.LoDTensor(make(emission), _lod("one_level")), lt.LoDTensor(make(labels), _lod("one_level")),
                       transition)
    assert calls[0] == "segment_ids" and "_path_index" in calls  # (torch CPU sums take the host ids too)
