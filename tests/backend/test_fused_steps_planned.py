"""The fused recurrences' planned launches (``cupy/_steps._Steps.plan``): every step's kernel arguments
computed before the loop, by NumPy, from the step-major buffers' base addresses plus ``start * row bytes``.

On the emulated route (``route``: CPU tensors down the torch-CUDA route, the kernels emulated on the CPU):
each launch's pointers, rows, width, grid, activations and flags are those of the per-step views (the
per-step code's arguments, taken here from the buffers the autograd node saves, by ``data_ptr`` of each
step's slice), in float32 and float64; and values and every gradient equal the unfused steps' and NumPy's
over the cases the planning's arithmetic meets: one step, one row per sequence, counts dropping sharply,
one sequence, empty sequences, only the hidden or only the cell used (no gradient of the other), inference
(no cell activations kept), inputs that are views with a storage offset; the CuPy forward likewise.
Skipped without g++ (as ``test_fused_steps_emulated.py``)."""

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
from lodtensor.backend.cupy import _tuning  # noqa: E402
from lodtensor.backend.cupy import cuda as _kernels  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

from . import cupy_stub  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")

LODS = {
    "one step": [[0, 1, 2, 3]],  # every sequence one row: a single step of 3 rows
    "one row": [[0, 1]],  # a single step of a single row
    "one sequence": [[0, 6]],  # 6 steps of one row
    "sharp drop": [[0, 9, 10, 11, 12, 13, 15]],  # counts 6, 2, 1, 1, ...: most rows at step 0
    "empties": [[0, 0, 3, 3, 4, 4]],  # empty sequences among them: counts 2, 1, 1
}
TOL = {torch.float64: {"rtol": 1e-12, "atol": 1e-12}, torch.float32: {"rtol": 2e-5, "atol": 2e-6}}
LSTM_ACTS, GRU_ACTS = ("sigmoid", "tanh", "tanh"), ("sigmoid", "tanh")


def _lengths(lod):
    offsets = lod[-1]
    return [b - a for a, b in zip(offsets[:-1], offsets[1:])]


def _counts(lod):
    lengths = _lengths(lod)
    return [sum(1 for n in lengths if n > t) for t in range(max(lengths))]


def _inputs(shapes, dtype, views, seed):
    """Leaves (what the gradients are taken of) and the arguments: each leaf itself or, with ``views``,
    a contiguous view one row into it (a storage offset). ``shapes``: None where the argument is absent."""
    g = torch.Generator().manual_seed(seed)
    leaves, args = [], []
    for shape in shapes:
        if shape is None:
            args.append(None)
            continue
        full = (shape[0] + 1, *shape[1:]) if views else shape
        leaf = (torch.rand(full, generator=g, dtype=torch.float64) * 1.6 - 0.8).to(dtype).requires_grad_()
        leaves.append(leaf)
        args.append(leaf[1:] if views else leaf)
    return leaves, args


def _lstm_inputs(lod, d, peep, states, dtype, views=False, seed=0):
    rows, seqs = lod[-1][-1], len(lod[-1]) - 1
    return _inputs(((rows, 4 * d), (d, 4 * d), (1, (7 if peep else 4) * d), (seqs, d) if "h" in states else None,
                    (seqs, d) if "c" in states else None), dtype, views, seed)


def _gru_inputs(lod, d, with_h0, dtype, views=False, seed=0):
    rows, seqs = lod[-1][-1], len(lod[-1]) - 1
    return _inputs(((rows, 3 * d), (d, 3 * d), (1, 3 * d), (seqs, d) if with_h0 else None), dtype, views, seed)


def _weights(out):
    return torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)


def _lstm(leaves, args, lod, peep, reverse, uses, fused, monkeypatch, route=None):
    """Hidden, cell and the gradients of every leaf of a loss over ``uses`` ("h", "c" or both); with
    ``route``, also the forward's and the backward's launches and the autograd node's saved tensors."""
    monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
    x, w, b, h0, c0 = args
    if route is not None:
        route.launches.clear()
    h, c = F.dynamic_lstm(lt.LoDTensor(x, lod), w, b, h0, c0, use_peepholes=peep, is_reverse=reverse)
    forward = [] if route is None else list(route.launches)
    saved = h.data.grad_fn.saved_tensors
    loss = 0
    if "h" in uses:
        loss = loss + (h.data * _weights(h.data)).sum()
    if "c" in uses:
        loss = loss + (c.data * _weights(c.data).flip(0)).sum() * 0.5
    if route is not None:
        route.launches.clear()
    grads = torch.autograd.grad(loss, leaves)
    backward = [] if route is None else list(route.launches)
    return [h.data.detach(), c.data.detach(), *grads], forward, backward, saved


def _gru(leaves, args, lod, origin, reverse, fused, monkeypatch, route=None):
    monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
    x, w, b, h0 = args
    if route is not None:
        route.launches.clear()
    h = F.dynamic_gru(lt.LoDTensor(x, lod), w, b, h0, is_reverse=reverse, origin_mode=origin)
    forward = [] if route is None else list(route.launches)
    saved = h.data.grad_fn.saved_tensors
    if route is not None:
        route.launches.clear()
    grads = torch.autograd.grad((h.data * _weights(h.data)).sum(), leaves)
    backward = [] if route is None else list(route.launches)
    return [h.data.detach(), *grads], forward, backward, saved


def _numpy(args):
    return [None if a is None else a.detach().double().numpy() for a in args]


def _assert_close(got, want, dtype):
    assert len(got) == len(want)  # (no zip(strict=): the tests run on Python 3.9 too)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL[dtype])


# -- the launches' arguments: those of the per-step views ------------------------------------------------
def _args(launches, name):
    """The launches of kernel ``name``: (grid, block, every argument as an int)."""
    return [(tuple(grid), tuple(block), tuple(int(a) for a in args)) for kernel, grid, block, args in launches
            if kernel.split("<")[0] == name]


def _grid(n, d):
    return (max(1, min(-(-n * d // _kernels.BLOCK), 1 << 16)),), (_kernels.BLOCK,)


def _ptr(a):
    return 0 if a is None else a.data_ptr()


def _step_rows(a, lo, hi):
    return a[lo:hi].data_ptr()


def _fresh_rows(column, bounds, row_bytes, saved):
    """A buffer the backward makes (the step-major output gradients, the gates' gradients): its pointer at
    every step ``t`` is step 0's plus ``bounds[t]`` rows, and it lies in none of the ``saved`` buffers."""
    base = column[0]
    assert all(column[t] == base + bounds[t] * row_bytes for t in column), (column, row_bytes)
    for s in saved:
        if s is not None and s.numel():
            lo = s.untyped_storage().data_ptr()
            assert not lo <= base < lo + s.untyped_storage().nbytes()


def _by_step(launches, counts, reverse_order):
    """The launches one per step, keyed by the step (the backward runs its steps last to first)."""
    steps = list(range(len(counts)))
    if reverse_order:
        steps.reverse()
    assert len(launches) == len(steps), (len(launches), steps)
    return dict(zip(steps, launches))


LAUNCH_CASES = [  # lod, peep (LSTM) / origin (GRU), initial states, reverse, outputs used (LSTM)
    ("one step", True, "hc", False, "hc"), ("one step", False, "", True, "h"), ("one row", True, "c", False, "c"),
    ("one sequence", False, "h", True, "hc"), ("sharp drop", True, "", False, "h"),
    ("sharp drop", False, "hc", True, "c"), ("empties", True, "hc", True, "hc"), ("empties", False, "c", False, "h"),
]


@pytest.mark.parametrize("dtype, d", [(torch.float64, 3), (torch.float32, 3), (torch.float64, 50)])
@pytest.mark.parametrize("lod, peep, states, reverse, uses", LAUNCH_CASES)
def test_planned_lstm_launches_pass_the_per_step_operands(route, monkeypatch, dtype, d, lod, peep, states, reverse,
                                                          uses):
    """(D = 50: two blocks of 256 threads where a step has over 5 rows.)"""
    lod = LODS[lod]
    leaves, args = _lstm_inputs(lod, d, peep, states, dtype, views=True)
    _, forward, backward, saved = _lstm(leaves, args, lod, peep, reverse, uses, True, monkeypatch, route)
    w, b, h0, c0, gates, hs, cs, cell_acts = saved[:8]
    counts = _counts(lod)
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    size = gates.element_size()
    acts = _kernels.RNN_ACTS["sigmoid"] | _kernels.RNN_ACTS["tanh"] << 4 | _kernels.RNN_ACTS["tanh"] << 8
    peep_at = b[0, 4 * d :].data_ptr() if peep else 0
    assert not peep or peep_at == args[2].data_ptr() + 4 * d * size  # the bias view's offset counted
    assert (h0 is None) == ("h" not in states) and (c0 is None) == ("c" not in states)

    def prev(t):
        return _step_rows(cs, bounds[t - 1], bounds[t - 1] + counts[t]) if t else _ptr(c0)

    want = []
    for t, n in enumerate(counts):
        lo, hi = bounds[t], bounds[t + 1]
        want.append((*_grid(n, d), (_step_rows(gates, lo, hi), prev(t), peep_at, _step_rows(cs, lo, hi),
                                    _step_rows(hs, lo, hi), _step_rows(cell_acts, lo, hi), n, d, acts)))
    assert _args(forward, "lt_lstm_step") == want
    steps = _by_step(_args(backward, "lt_lstm_step_grad"), counts, True)
    for t, (grid, block, got) in steps.items():
        lo, hi = bounds[t], bounds[t + 1]
        assert (grid, block) == _grid(counts[t], d)
        assert got[:4] == (_step_rows(gates, lo, hi), _step_rows(cell_acts, lo, hi), prev(t), peep_at)
        assert got[9:] == (counts[t], d, acts)
        assert (got[4] == 0) == ("h" not in uses) and (got[5] == 0) == ("c" not in uses)
    dh, dc = {steps[t][2][6] for t in steps}, {steps[t][2][7] for t in steps}
    assert len(dh) == len(dc) == 1 and dh != dc and 0 not in dh | dc  # dh, dc: the same two buffers every step
    for position, width in ((4, d), (5, d), (8, 4 * d)):  # g_h, g_c, the gates' gradients
        if steps[0][2][position]:
            _fresh_rows({t: steps[t][2][position] for t in steps}, bounds, width * size, saved[:8])


@pytest.mark.parametrize("dtype, d", [(torch.float64, 3), (torch.float32, 3), (torch.float64, 50)])
@pytest.mark.parametrize("lod, origin, states, reverse", [case[:4] for case in LAUNCH_CASES])
def test_planned_gru_launches_pass_the_per_step_operands(route, monkeypatch, dtype, d, lod, origin, states, reverse):
    lod = LODS[lod]
    leaves, args = _gru_inputs(lod, d, "h" in states, dtype, views=True)
    _, forward, backward, saved = _gru(leaves, args, lod, origin, reverse, True, monkeypatch, route)
    _, _, _, h0, gates, hs, rh_all = saved[:7]
    counts = _counts(lod)
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    size = gates.element_size()
    acts = _kernels.RNN_ACTS["sigmoid"] | _kernels.RNN_ACTS["tanh"] << 8

    def prev(t):
        return _step_rows(hs, bounds[t - 1], bounds[t - 1] + counts[t]) if t else _ptr(h0)

    reset, out = [], []
    for t, n in enumerate(counts):
        lo, hi = bounds[t], bounds[t + 1]
        if prev(t):
            reset.append((*_grid(n, d), (_step_rows(gates, lo, hi), prev(t), _step_rows(rh_all, lo, hi), n, d, acts)))
        out.append((*_grid(n, d), (_step_rows(gates, lo, hi), prev(t), _step_rows(hs, lo, hi), n, d, acts,
                                   int(origin))))
    assert _args(forward, "lt_gru_step_gates") == reset and _args(forward, "lt_gru_step_out") == out
    grad_out = _by_step(_args(backward, "lt_gru_step_grad_out"), counts, True)
    with_prev = [t for t in range(len(counts)) if prev(t)]
    grad_reset = dict(zip(reversed(with_prev), _args(backward, "lt_gru_step_grad_reset")))
    assert sorted(grad_reset) == with_prev
    for t, (grid, block, got) in grad_out.items():
        lo, hi = bounds[t], bounds[t + 1]
        assert (grid, block) == _grid(counts[t], d)
        assert got[:2] == (_step_rows(gates, lo, hi), prev(t)) and got[5:] == (counts[t], d, acts, int(origin))
        if t in grad_reset:
            grid, block, reset_args = grad_reset[t]
            assert (grid, block) == _grid(counts[t], d) and reset_args[5:] == (counts[t], d, acts)
            # the gates, the previous state, dh and the gates' gradients as grad_out's; the GEMM's drh apart
            assert reset_args[:2] == got[:2] and reset_args[3:5] == got[3:5] and reset_args[2] not in got[:5]
    assert len({grad_out[t][2][3] for t in grad_out}) == 1 and len({grad_reset[t][2][2] for t in grad_reset}) <= 1
    for position, width in ((2, d), (4, 3 * d)):  # g_h, the gates' gradients
        _fresh_rows({t: grad_out[t][2][position] for t in grad_out}, bounds, width * size, saved[:7])


# -- values and every gradient: fused as unfused, and as NumPy --------------------------------------------
VALUE_CASES = [(lod, *rest) for lod in LODS for rest in
               ((True, "hc", False, "hc"), (False, "", True, "h"), (True, "h", True, "c"), (False, "c", False, "hc"))]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("lod, peep, states, reverse, uses", VALUE_CASES)
def test_fused_lstm_edge_cases_give_the_unfused_and_numpy_values(route, monkeypatch, dtype, lod, peep, states,
                                                                 reverse, uses):
    lod = LODS[lod]
    for views in (False, True):
        leaves, args = _lstm_inputs(lod, 4, peep, states, dtype, views=views, seed=2)
        fused, forward, backward, _ = _lstm(leaves, args, lod, peep, reverse, uses, True, monkeypatch, route)
        assert len(_args(forward, "lt_lstm_step")) == len(_counts(lod))
        assert len(_args(backward, "lt_lstm_step_grad")) == len(_counts(lod))
        plain, forward, backward, _ = _lstm(leaves, args, lod, peep, reverse, uses, False, monkeypatch, route)
        assert not forward and not backward
        _assert_close(fused, plain, dtype)
        x, w, b, h0, c0 = _numpy(args)
        h, c = F.dynamic_lstm(lt.LoDTensor(x, lod), w, b, h0, c0, use_peepholes=peep, is_reverse=reverse)
        np.testing.assert_allclose(fused[0].double().numpy(), h.data, **TOL[dtype])
        np.testing.assert_allclose(fused[1].double().numpy(), c.data, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("lod, origin, states, reverse", [case[:4] for case in VALUE_CASES])
def test_fused_gru_edge_cases_give_the_unfused_and_numpy_values(route, monkeypatch, dtype, lod, origin, states,
                                                                reverse):
    lod = LODS[lod]
    for views in (False, True):
        leaves, args = _gru_inputs(lod, 4, "h" in states, dtype, views=views, seed=3)
        fused, forward, backward, _ = _gru(leaves, args, lod, origin, reverse, True, monkeypatch, route)
        assert len(_args(forward, "lt_gru_step_out")) == len(_args(backward, "lt_gru_step_grad_out")) \
            == len(_counts(lod))
        plain, forward, backward, _ = _gru(leaves, args, lod, origin, reverse, False, monkeypatch, route)
        assert not forward and not backward
        _assert_close(fused, plain, dtype)
        x, w, b, h0 = _numpy(args)
        want = F.dynamic_gru(lt.LoDTensor(x, lod), w, b, h0, is_reverse=reverse, origin_mode=origin).data
        np.testing.assert_allclose(fused[0].double().numpy(), want, **TOL[dtype])


def _infer(kind, lod, args):
    """The outputs of the LSTM (peepholes) or the GRU (origin mode) over ``args`` (input first)."""
    t = lt.LoDTensor(args[0], lod)
    return F.dynamic_lstm(t, *args[1:]) if kind == "lstm" else (F.dynamic_gru(t, *args[1:], origin_mode=True),)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("lod", sorted(LODS))
def test_fused_inference_keeps_no_cell_activations_and_gives_the_unfused_values(route, monkeypatch, dtype, kind, lod):
    """Without autograd the LSTM forward keeps no cell activations (a null pointer for them): fused
    as unfused and as NumPy, with and without initial states."""
    lod = LODS[lod]
    for states in ("", "hc"):
        if kind == "lstm":
            _, args = _lstm_inputs(lod, 4, True, states, dtype, views=True, seed=4)
        else:
            _, args = _gru_inputs(lod, 4, bool(states), dtype, views=True, seed=4)
        results = []
        for fused in (True, False):
            monkeypatch.setattr(_tuning, "FUSED_STEPS", fused)
            route.launches.clear()
            with torch.no_grad():
                results.append([o.data for o in _infer(kind, lod, args)])
            launched = _args(route.launches, "lt_lstm_step" if kind == "lstm" else "lt_gru_step_out")
            assert len(launched) == (len(_counts(lod)) if fused else 0)
            if fused and kind == "lstm":
                assert all(args_[5] == 0 for *_, args_ in launched)  # no cell activations kept
        _assert_close(results[0], results[1], dtype)
        for got, ref in zip(results[0], _infer(kind, lod, _numpy(args))):
            np.testing.assert_allclose(got.double().numpy(), ref.data, **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind, flag, states, reverse", [
    ("lstm", True, "", False), ("lstm", False, "hc", True), ("lstm", True, "c", True), ("lstm", False, "h", False),
    ("gru", False, "", False), ("gru", True, "", True), ("gru", False, "h", True), ("gru", True, "h", False)])
@pytest.mark.parametrize("lod", sorted(LODS))
def test_cupy_fused_forward_edge_cases_give_numpy_values(emulated, monkeypatch, dtype, kind, flag, states, reverse,
                                                         lod):
    """The CuPy backend's planned forward (``numpy/_recurrent.py`` on the stub, kernels emulated): one launch
    of the step kernel per step (GRU: and one of the gates' kernel per step with a previous state), NumPy's
    values; ``flag``: the LSTM's peepholes or the GRU's origin mode."""
    stub, lod = emulated.stub, LODS[lod]
    counts = _counts(lod)
    shapes = _lstm_inputs(lod, 4, flag, states, torch.float64)[1] if kind == "lstm" else \
        _gru_inputs(lod, 4, bool(states), torch.float64)[1]
    host = [None if a is None else a.detach().numpy().astype(dtype) for a in shapes]

    def run(array):
        x, *rest = (None if a is None else array(a) for a in host)
        if kind == "lstm":
            return F.dynamic_lstm(lt.LoDTensor(x, lod), *rest, use_peepholes=flag, is_reverse=reverse)
        return (F.dynamic_gru(lt.LoDTensor(x, lod), *rest, is_reverse=reverse, origin_mode=flag),)

    want = run(np.asarray)
    monkeypatch.setattr(_tuning, "FUSED_STEPS", True)
    stub.launches.clear()
    got = run(stub.asarray)
    tol = {"rtol": 2e-5, "atol": 2e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a.data), b.data, **tol)
    if kind == "lstm":
        steps = _args(stub.launches, "lt_lstm_step")
        assert [a[6] for *_, a in steps] == counts and all(a[5] == 0 for *_, a in steps)
    else:
        assert [a[3] for *_, a in _args(stub.launches, "lt_gru_step_out")] == counts
        gates = _args(stub.launches, "lt_gru_step_gates")
        assert [a[3] for *_, a in gates] == (counts if "h" in states else counts[1:])
        assert len({a[2] for *_, a in gates}) <= 1  # r * h_prev: one scratch buffer every step


# -- the steps' GEMMs: one cuBLAS call each, on the per-step views' addresses ---------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("lod, origin, states, reverse", [case[:4] for case in LAUNCH_CASES])
def test_planned_gemms_pass_the_per_step_operands(route, monkeypatch, dtype, lod, origin, states, reverse):
    """Each GEMM of a fused GRU and LSTM step is one cuBLAS call, in column-major terms ``C^T = op(W)^T A^T``:
    ``m, n, k``, leading dimensions, ``beta`` (1: accumulate into the gates and dh; 0: overwrite t1 and the
    LSTM's dh) and the per-step addresses of the rows of the step-major buffers, as the per-step views of the
    unfused code, in the steps' order; and ``op(W)^T`` holds the weights (transposed in the backward)."""
    lod = LODS[lod]
    counts = _counts(lod)
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    d = 3
    name = "dgemm" if dtype == torch.float64 else "sgemm"
    calls = []  # (name, args, the right factor of the row-major product, read at the call: the weights'
    # contiguous copies live as long as the loop)

    def recording(fn_name, real, np_dtype):
        def record(*a):
            _, op, _, m, _, k, _, w_at, ldw = a[:9]
            stored = cupy_stub._column_major(w_at, np_dtype, *((m, k) if op == 0 else (k, m)), ldw)
            scalars = tuple(float(cupy_stub._column_major(a[i], np_dtype, 1, 1, 1)[0, 0]) for i in (6, 11))
            calls.append((fn_name, a, (stored if op == 0 else stored.T).T.copy(), scalars))  # op(W)^T: the factor
            return real(*a)

        return record

    for n, np_dtype in (("sgemm", np.float32), ("dgemm", np.float64)):
        monkeypatch.setattr(route.cuda.cublas, n, recording(n, getattr(route.cuda.cublas, n), np_dtype))
    for kind in ("gru", "lstm"):
        calls.clear()
        if kind == "gru":
            leaves, args = _gru_inputs(lod, d, "h" in states, dtype, views=True)
        else:
            leaves, args = _lstm_inputs(lod, d, origin, states, dtype, views=True)
        if kind == "gru":
            _, _, _, saved = _gru(leaves, args, lod, origin, reverse, True, monkeypatch)
            w_gate, w_cand, _, h0, gates, hs, rh_all = saved[:7]
            weights = {"gate": w_gate, "cand": w_cand}  # (Paddle's [D, 3D] weight split by its memory)
            widths = 3 * d
        else:
            _, _, _, saved = _lstm(leaves, args, lod, origin, reverse, "hc", True, monkeypatch)
            w, _, h0, _, gates, hs = saved[:6]
            weights = {"w": args[1].detach()}
            widths = 4 * d
        size = gates.element_size()

        def prev(t, hs=hs, h0=h0):
            return _step_rows(hs, bounds[t - 1], bounds[t - 1] + counts[t]) if t else _ptr(h0)

        steps = [t for t in range(len(counts)) if prev(t)]
        forward = calls[: (2 if kind == "gru" else 1) * len(steps)]
        backward = calls[len(forward):]
        assert len(backward) == len(forward) and all(c[0] == name for c in calls)
        assert all(c[3] == (1, 1) for c in forward)  # alpha 1, beta 1: accumulated into the gates
        want = []
        for t in steps:
            lo, n = bounds[t], counts[t]
            rows = _step_rows(gates, lo, lo + n)
            if kind == "gru":
                want += [((0, 0, 0, 2 * d, n, d), (2 * d, prev(t), d, rows, widths), "gate"),
                         ((0, 0, 0, d, n, d), (d, _step_rows(rh_all, lo, lo + n), d, rows + 2 * d * size, widths),
                          "cand")]
            else:
                want.append(((0, 0, 0, 4 * d, n, d), (4 * d, prev(t), d, rows, widths), "w"))
        for (_, got, w_values, _), (head, tail, which) in zip(forward, want):
            assert got[:6] == head and (*got[8:11], *got[12:]) == tail
            torch.testing.assert_close(torch.from_numpy(w_values), weights[which], rtol=0, atol=0)
        # the backward, steps last to first: GRU t1 = dg_cand W_cand^T (beta 0), dh += dg_gates W_gate^T;
        # LSTM dh = dgates W^T (beta 0); every C the same buffer each step, every A a fresh step-major buffer's rows
        per_step = 2 if kind == "gru" else 1
        assert len(backward) == per_step * len(steps)
        for i, t in enumerate(reversed(steps)):
            n = counts[t]
            group = backward[per_step * i : per_step * (i + 1)]
            if kind == "gru":
                (_, reset, w_reset, reset_scalars), (_, state, w_state, state_scalars) = group
                assert reset[1:6] == (1, 0, d, n, d) and reset[8] == d and reset[10] == widths and reset[13] == d
                assert state[1:6] == (1, 0, d, n, 2 * d) and state[8] == 2 * d and state[10] == widths
                assert reset_scalars == (1, 0) and state_scalars == (1, 1)  # t1 overwritten, dh accumulated
                assert state[9] + 2 * d * size == reset[9] and reset[12] != state[12]  # dg_gates, dg_cand; t1, dh
                torch.testing.assert_close(torch.from_numpy(w_reset), weights["cand"].t(), rtol=0, atol=0)
                torch.testing.assert_close(torch.from_numpy(w_state), weights["gate"].t(), rtol=0, atol=0)
            else:
                ((_, got, w_values, scalars),) = group
                assert got[1:6] == (1, 0, d, n, 4 * d) and got[8] == 4 * d and got[10] == widths
                assert scalars == (1, 0) and got[13] == d  # dh overwritten
                torch.testing.assert_close(torch.from_numpy(w_values), weights["w"].t(), rtol=0, atol=0)
        cs = [c[1][12] for c in backward[per_step - 1 :: per_step]]
        assert len(set(cs)) <= 1  # dh: one buffer for every step
        dg = [c[1][9] for c in backward[per_step - 1 :: per_step]]
        assert dg == [dg[0] - (bounds[steps[-1]] - bounds[t]) * widths * size for t in reversed(steps)]
