"""warpctc on a fresh LoD: device labels stay on the device, checked with one read of five scalars.

``warpctc`` read its labels back to the host whole (``_labels``: one device-to-host copy and one
synchronisation, 8 bytes a label), checked them there, and handed the host ids to
``Backend.ctc_loss``, which copied them to the device again; the torch backend made its time-major
padding index over every input row on the host (``np.repeat`` of the sequence numbers, a
``[T_max, n]`` int64 array) and copied it to the device from pageable memory, the NumPy/CuPy
recursion its extended labels with a host ``np.repeat`` over the labels. Host time per call at 2K
sequences (labels of 1..50 ids, 198K input rows, torch ``meta`` data, the loss kernel stubbed):
about 8 ms, 1.5 ms after.

The contract's ``ctc_loss`` now takes the labels on ``logits``' device as well as on the host; with
labels on the data's device ``warpctc`` checks them with their extremes (the host path's error text),
read together with the count of ids equal to the blank, the torch backend makes its padding index there
from the per-sequence starts and lengths, and the NumPy/CuPy recursion gathers its extended labels where
the labels are.

Runs the torch-CUDA route's host code on CPU tensors (kernels emulated; ``cuda`` adds the GPU) and the
CuPy backend on its stub; values and gradients are compared with plain CPU tensors, which are
compared with torch's own ``ctc_loss`` one sequence at a time and with the NumPy backend.
"""

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import get_backend  # noqa: E402
from lodtensor.backend.numpy import _recurrent as numpy_recurrent  # noqa: E402
from lodtensor.backend.torch import _ctc as torch_ctc  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

from .conftest import count_reads  # noqa: E402

crf_module = importlib.import_module("lodtensor.nn._crf")

C = 6  # classes, the blank included
CASES = {  # name -> (input lengths, label lengths), one entry a sequence
    "mixed": ([5, 0, 40, 1, 3, 12, 60, 2, 0, 2], [2, 0, 10, 1, 3, 4, 20, 0, 1, 3]),  # no rows, empty label, inf
    "no_labels": ([4, 7, 0], [0, 0, 0]),
    "no_input_rows": ([0, 0, 0], [0, 2, 0]),  # torch's ctc_loss takes no empty batch: the loss made apart
    "one_row": ([1], [1]),
}


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _inputs(case, seed=0):
    t_len, l_len = CASES[case]
    rng = np.random.RandomState(seed)
    scores = rng.uniform(-2, 2, (int(sum(t_len)), C))
    labels = rng.randint(1, C, (int(sum(l_len)), 1))  # ids past the blank 0, repeats included
    return scores, labels


class _Refusing:
    """``module`` with the functions ``names`` refused (a host pass over the rows)."""

    def __init__(self, module, *names):
        self._module, self._names = module, names

    def __getattr__(self, name):
        if name in self._names:
            raise AssertionError(f"np.{name}: a host pass over the rows on the device route")
        return getattr(self._module, name)


def _refuse_host_passes(monkeypatch):
    """From now on, fail where warpctc reads device labels whole or repeats per row on the host."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a copy of device labels to the host on the device route")

    monkeypatch.setattr(crf_module, "_labels", refuse)
    monkeypatch.setattr(torch_ctc, "np", _Refusing(np, "repeat"))
    monkeypatch.setattr(numpy_recurrent, "np", _Refusing(np, "repeat"))


def _ctc(host, device, case, label_shape=(-1, 1), label_dtype=torch.int64, norm=False, blank=0):
    """warpctc's loss on torch data on ``device`` and the gradient of the scores for fixed upstream weights."""
    scores, labels = host
    t_len, l_len = CASES[case]
    x = torch.tensor(scores, device=device, requires_grad=True)
    y = torch.tensor(labels.reshape(label_shape), dtype=label_dtype, device=device)
    loss = F.warpctc(lt.LoDTensor(x, [_offsets(t_len)]), lt.LoDTensor(y, [_offsets(l_len)]), blank=blank,
                     norm_by_times=norm)
    weights = torch.tensor(np.random.RandomState(8).uniform(0.5, 1.5, tuple(loss.shape)), device=device)
    (loss * weights).sum().backward()
    return [loss.detach().cpu().numpy(), x.grad.cpu().numpy()]


def _torch_reference(host, case, blank=0):
    """torch's ``ctc_loss`` of each sequence alone (unbatched); a sequence without rows: 0, or inf with labels."""
    scores, labels = host
    t_len, l_len = CASES[case]
    t_off, l_off = _offsets(t_len), _offsets(l_len)
    log_probs = torch.log_softmax(torch.tensor(scores), dim=1)
    out = []
    for s in range(len(t_len)):
        if t_len[s] == 0:
            out.append(0.0 if l_len[s] == 0 else np.inf)
            continue
        target = torch.tensor(labels[l_off[s]:l_off[s + 1], 0])
        out.append(float(torch.nn.functional.ctc_loss(log_probs[t_off[s]:t_off[s + 1]], target, [int(t_len[s])],
                                                      [int(l_len[s])], blank=blank, reduction="none")))
    return np.array(out)


def _same_numbers(got, want, device):
    """torch's ctc_loss on the same inputs: on the emulated route (CPU tensors) bit for bit; on a GPU torch's
    CUDA ctc_loss, whose float64 sums round differently from its CPU one (2e-12 relative on an H100)."""
    for g, w in zip(got, want):
        if device == "cpu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("norm", [False, True], ids=["plain", "norm_by_times"])
@pytest.mark.parametrize("label", ["int64_n1", "int32_n"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ctc_takes_device_labels_on_the_device(enter_route, monkeypatch, case, label, norm):
    host = _inputs(case)
    shape, dtype = ((-1, 1), torch.int64) if label == "int64_n1" else ((-1,), torch.int32)
    want = _ctc(host, "cpu", case, shape, dtype, norm)  # plain CPU tensors: host labels, as before
    np.testing.assert_allclose(want[0].ravel(), _torch_reference(host, case), rtol=1e-12, atol=1e-12)
    t_len, l_len = CASES[case]
    on_numpy = F.warpctc(lt.LoDTensor(host[0], [_offsets(t_len)]), lt.LoDTensor(host[1], [_offsets(l_len)]))
    np.testing.assert_allclose(want[0], on_numpy, rtol=1e-9, atol=1e-9)
    device = enter_route()
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = _ctc(host, device, case, shape, dtype, norm)
    _same_numbers(got, want, device)
    assert reads == ([5] if sum(l_len) else []), reads  # the label check: one read of five scalars


def test_ctc_takes_device_labels_with_another_blank(device_route, monkeypatch):
    host = _inputs("mixed", seed=3)
    host[1][host[1] == 2] = 0  # the blank is 2 here: 0 is an id like the others
    want = _ctc(host, "cpu", "mixed", blank=2)
    np.testing.assert_allclose(want[0].ravel(), _torch_reference(host, "mixed", blank=2), rtol=1e-12, atol=1e-12)
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = _ctc(host, device_route, "mixed", blank=2)
    _same_numbers(got, want, device_route)
    assert reads == [5], reads


@pytest.mark.parametrize("bad", [-1, C, 1000], ids=["negative", "num_classes", "huge"])
def test_ctc_refuses_device_labels_out_of_range(device_route, monkeypatch, bad):
    scores, labels = _inputs("mixed")
    labels[[3, 30]] = bad
    t_off, l_off = (_offsets(a) for a in CASES["mixed"])
    low, high = min(labels.min(), bad), max(labels.max(), bad)
    want = f"warpctc(): label ids must be in [0, {C}), got {low}..{high}"
    with pytest.raises(ValueError) as on_cpu:
        F.warpctc(lt.LoDTensor(scores, [t_off]), lt.LoDTensor(labels, [l_off]))
    assert str(on_cpu.value) == want
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    x = torch.tensor(scores, device=device_route)
    y = torch.tensor(labels, device=device_route)
    before = (x.clone(), y.clone())
    with pytest.raises(ValueError) as on_device:
        F.warpctc(lt.LoDTensor(x, [t_off]), lt.LoDTensor(y, [l_off]))
    assert str(on_device.value) == want
    assert reads == [5]  # the extremes and the count of blank ids alone, not the labels
    assert torch.equal(x, before[0]) and torch.equal(y, before[1])  # the caller's tensors untouched


def test_ctc_refuses_device_labels_of_floats_without_reading_them(device_route, monkeypatch):
    scores, labels = _inputs("mixed")
    t_off, l_off = (_offsets(a) for a in CASES["mixed"])
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, get_backend("torch"))
    with pytest.raises(ValueError, match=r"label must hold integer ids of shape \[N, 1\], got torch.float64"):
        F.warpctc(lt.LoDTensor(torch.tensor(scores, device=device_route), [t_off]),
                  lt.LoDTensor(torch.tensor(labels * 1.0, device=device_route), [l_off]))
    assert reads == []


def test_ctc_with_host_labels_pads_on_the_device(device_route, monkeypatch):
    """Host (NumPy) labels on device data: checked on the host as they are, the padding index made on the device."""
    host = _inputs("mixed")
    t_off, l_off = (_offsets(a) for a in CASES["mixed"])
    want = F.warpctc(lt.LoDTensor(host[0], [t_off]), lt.LoDTensor(host[1], [l_off]))
    monkeypatch.setattr(torch_ctc, "np", _Refusing(np, "repeat"))
    reads = count_reads(monkeypatch, get_backend("torch"))
    got = F.warpctc(lt.LoDTensor(torch.tensor(host[0], device=device_route), [t_off]),
                    lt.LoDTensor(host[1], [l_off]))
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-9, atol=1e-9)
    assert reads == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_ctc_on_cupy_takes_device_labels(emulated, monkeypatch, case):
    host = _inputs(case)
    t_off, l_off = (_offsets(a) for a in CASES[case])
    want = F.warpctc(lt.LoDTensor(host[0], [t_off]), lt.LoDTensor(host[1], [l_off]))
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, emulated.be)
    got = F.warpctc(lt.LoDTensor(emulated.array(host[0]), [t_off]), lt.LoDTensor(emulated.array(host[1]), [l_off]))
    assert reads == ([5] if l_off[-1] else []), reads
    np.testing.assert_array_equal(emulated.numpy(got), want)  # the same recursion, on the same ids


def test_ctc_on_cupy_refuses_device_labels_out_of_range(emulated, monkeypatch):
    scores, labels = _inputs("mixed")
    labels[7] = C
    t_off, l_off = (_offsets(a) for a in CASES["mixed"])
    _refuse_host_passes(monkeypatch)
    reads = count_reads(monkeypatch, emulated.be)
    with pytest.raises(ValueError, match=rf"^warpctc\(\): label ids must be in \[0, {C}\), got 1\.\.{C}$"):
        F.warpctc(lt.LoDTensor(emulated.array(scores), [t_off]), lt.LoDTensor(emulated.array(labels), [l_off]))
    assert reads == [5]
