"""sequence_expand of a LoD'd ``x`` on a fresh LoD costs no host pass over the output rows on a device.

``sequence_expand`` (``ops/select.py`` ``expand``) made the new LoD and, with it, a NumPy index over
every output row (``LoD.select``'s last level: about 11 ms for 2M rows) that it then copied to the
device. On device data (``Backend.wants_host_plan`` false) the new LoD is still made on the host (one
entry per output sequence), but the row index is made on the data's device from the copied sequences'
row spans (``LoD.select(picks, rows=False)``, ``ops/_rows.ranges``); CPU data keep the host index.

Runs the torch-CUDA route's host code on CPU tensors (kernels emulated; ``cuda`` adds the GPU), and the
CuPy backend on its stub, and checks values, LoD and gradients against a by-hand NumPy reference and
the same op on NumPy data.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor import _lod_algebra  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.lod import LoD  # noqa: E402
from lodtensor.ops import _rows as ops_rows  # noqa: E402
from lodtensor.ops import select as ops_select  # noqa: E402

LENGTHS = [3, 0, 40, 1, 0, 7, 300, 2]  # x's last level: 8 sequences, two empty, 353 rows
X_LODS = {
    "one_level": [np.concatenate([[0], np.cumsum(LENGTHS)])],
    "two_level": [np.array([0, 2, 2, 5, 6, 8]), np.concatenate([[0], np.cumsum(LENGTHS)])],  # an empty top
}
ROWS = int(np.sum(LENGTHS))

#: (x's lod, y's lod, ref_level): y's level ref_level has one sequence per top-level x sequence (as Paddle's
#: sequence_expand takes them: ref_level -1 is y's last level)
CASES = {
    "1lvl_x_1lvl_y": ("one_level", [[0, 2, 3, 3, 6, 7, 7, 9, 10]], -1),
    "1lvl_x_1lvl_y_ref0": ("one_level", [[0, 1, 1, 3, 4, 6, 6, 7, 9]], 0),
    "1lvl_x_2lvl_y_ref0": ("one_level", [[0, 2, 3, 3, 6, 7, 7, 9, 10], list(range(11))], 0),
    "1lvl_x_2lvl_y_ref_last": ("one_level", [[0, 3, 8], [0, 2, 3, 3, 6, 7, 7, 9, 10]], -1),
    "1lvl_x_2lvl_y_ref1": ("one_level", [[0, 3, 8], [0, 1, 1, 3, 4, 6, 6, 7, 9]], 1),
    "2lvl_x_1lvl_y": ("two_level", [[0, 2, 3, 3, 5, 6]], -1),
    "2lvl_x_2lvl_y_ref0": ("two_level", [[0, 1, 3, 3, 4, 6], [0, 2, 2, 4, 5, 7, 9]], 0),
    "2lvl_x_2lvl_y_ref1": ("two_level", [[0, 2, 5], [0, 3, 4, 4, 6, 7]], 1),
    "no_repeats": ("one_level", [[0] * 9], -1),  # every count 0: an empty batch, lod [[0]] as Paddle
}


def _reference(x_levels, data, repeats):
    """sequence_expand by hand: every copy of top-level sequence ``i`` with all its levels (loops: a test)."""
    out_lengths = [[] for _ in x_levels]
    rows = []
    for i, count in enumerate(repeats):
        for _ in range(count):
            a, b = i, i + 1
            for k, offs in enumerate(x_levels):
                out_lengths[k].extend(int(offs[j + 1] - offs[j]) for j in range(a, b))
                a, b = int(offs[a]), int(offs[b])
            rows.extend(range(a, b))
    lod = [np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).tolist() for lengths in out_lengths]
    return data[np.asarray(rows, dtype=np.int64)], lod, np.asarray(rows, dtype=np.int64)


def _inputs(case, make, seed=0):
    """x (width 3) and y of ``case`` with fresh LoDs, x's data from ``make`` (host array -> backend array)."""
    x_name, y_lod, ref_level = CASES[case]
    host = np.random.RandomState(seed).uniform(-1, 1, size=(ROWS, 3))
    x = lt.LoDTensor(make(host), [o.copy() for o in X_LODS[x_name]])
    y_rows = int(y_lod[-1][-1])
    y = lt.LoDTensor(np.zeros((y_rows, 1)), [list(o) for o in y_lod])
    return x, y, ref_level, host


def _refuse_host_rows(monkeypatch, limit):
    """Fail where op code builds an index longer than ``limit`` (the new LoD's largest level) on the host:
    one over the output rows."""
    real = _lod_algebra.concat_ranges

    def guarded(starts, stops):
        index, counts = real(starts, stops)
        if index.size > limit:
            raise AssertionError(f"a host index over {index.size} rows on the device route")
        return index, counts

    def refuse(*_args, **_kwargs):
        raise AssertionError("a host pass over the LoD's rows on the device route")

    monkeypatch.setattr(_lod_algebra, "concat_ranges", guarded)
    monkeypatch.setattr(ops_rows, "concat_ranges", refuse)
    monkeypatch.setattr(ops_select, "offsets_to_segment_ids", refuse)


def _guard(monkeypatch, want_lod, want_rows):
    limit = max(len(level) for level in want_lod)
    if want_rows > limit:  # the guard tells an index over the rows from one over sequences
        _refuse_host_rows(monkeypatch, limit)


@pytest.fixture
def device(device_route):
    """Where the route runs (conftest's ``device_route``: emulated, or CUDA marked gpu)."""
    return device_route


@pytest.mark.parametrize("case", sorted(CASES))
def test_expand_makes_no_host_row_index_on_the_device(device, monkeypatch, case):
    x_np, y, ref_level, host = _inputs(case, lambda a: a)
    repeats = y.lod.lengths(ref_level)
    want_data, want_lod, rows = _reference(X_LODS[CASES[case][0]], host, repeats)
    on_numpy = S.sequence_expand(x_np, y, ref_level=ref_level)  # NumPy data: the host index, as before
    assert on_numpy.lod() == want_lod
    np.testing.assert_array_equal(np.asarray(on_numpy.data), want_data)
    x_dev, _, _, _ = _inputs(case, lambda a: torch.from_numpy(a).to(device))
    _guard(monkeypatch, want_lod, rows.size)
    got = S.sequence_expand(x_dev, y, ref_level=ref_level)
    assert isinstance(got.data, torch.Tensor) and got.data.device.type == torch.device(device).type
    assert got.lod() == want_lod
    np.testing.assert_array_equal(got.data.cpu().numpy(), want_data)


@pytest.mark.parametrize("case", ["1lvl_x_1lvl_y", "1lvl_x_2lvl_y_ref1", "2lvl_x_2lvl_y_ref0", "no_repeats"])
def test_expand_trains_on_the_device_index(device, monkeypatch, case):
    x, y, ref_level, host = _inputs(case, lambda a: torch.from_numpy(a).to(device))
    want_data, want_lod, rows = _reference(X_LODS[CASES[case][0]], host, y.lod.lengths(ref_level))
    data = x.data.requires_grad_()
    _guard(monkeypatch, want_lod, rows.size)
    out = S.sequence_expand(x, y, ref_level=ref_level)
    weights = torch.arange(rows.size * 3, dtype=torch.float64).reshape(rows.size, 3).to(device)
    (out.data * weights).sum().backward()
    want_grad = np.zeros_like(host)
    np.add.at(want_grad, rows, weights.cpu().numpy())  # every output row adds its weight to its source row
    np.testing.assert_array_equal(data.grad.cpu().numpy(), want_grad)
    assert out.lod() == want_lod


@pytest.mark.parametrize("case", ["1lvl_x_1lvl_y", "2lvl_x_2lvl_y_ref1", "no_repeats"])
def test_expand_on_cupy_makes_no_host_row_index(emulated, monkeypatch, case):
    x, y, ref_level, host = _inputs(case, emulated.array)
    want_data, want_lod, rows = _reference(X_LODS[CASES[case][0]], host, y.lod.lengths(ref_level))
    _guard(monkeypatch, want_lod, rows.size)
    got = S.sequence_expand(x, y, ref_level=ref_level)
    assert got.backend.name == "cupy"
    assert got.lod() == want_lod
    np.testing.assert_array_equal(emulated.numpy(got.data), want_data)


@pytest.mark.parametrize("levels", [
    [[0, 2, 3], [0, 1, 1, 4]],
    [[0, 0, 2, 2, 3], [0, 3, 3, 9], [0, 1, 1, 5, 5, 6, 8, 8, 8, 12]],
    [[0, 4, 4, 9]],
])
def test_select_spans_give_the_row_index(levels):
    """``LoD.select(picks, rows=False)`` gives the LoD of ``select(picks)`` and the row spans of its index."""
    lod = LoD(levels)
    n = len(levels[0]) - 1
    picks = np.random.RandomState(n).randint(0, n, size=7)
    want_lod, want_rows = lod.select(picks)
    got_lod, starts, stops = lod.select(picks, rows=False)
    assert got_lod == want_lod
    assert starts.size == stops.size == want_lod.num_sequences(-1)
    rows = [r for a, b in zip(starts.tolist(), stops.tolist()) for r in range(a, b)]
    assert rows == want_rows.tolist()


def test_cpu_tensors_keep_the_host_row_index(monkeypatch):
    """Off the route, CPU tensors and NumPy data keep the NumPy index of ``LoD.select`` (a guard of the CPU
    path: it passes without the device change too)."""
    calls = []
    real = ops_rows.concat_ranges  # (the host index of ops/_rows.ranges, from LoD.select's spans)
    monkeypatch.setattr(ops_rows, "concat_ranges", lambda *a: calls.append(real(*a)[0].size) or real(*a))
    for make in (lambda a: a, torch.from_numpy):
        calls.clear()
        x, y, ref_level, host = _inputs("2lvl_x_1lvl_y", make)
        want_data, want_lod, rows = _reference(X_LODS["two_level"], host, y.lod.lengths(ref_level))
        got = S.sequence_expand(x, y, ref_level=ref_level)
        assert rows.size in calls  # the host index over the output rows
        assert got.lod() == want_lod
        np.testing.assert_array_equal(np.asarray(got.data), want_data)
