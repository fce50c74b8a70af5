"""Per-call work removed from small-batch paths (the overhead hunt): each test counts the calls of the
work that was repeated, so the saving cannot come back unnoticed. No timings here (bench/overhead.py
times these paths)."""

import inspect

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import _dense, _validate
from lodtensor import sequence as S
from lodtensor.backend.numpy import _ufunc as np_ufunc
from lodtensor.backend.numpy import _util
from lodtensor.errors import LoDError
from lodtensor.lod import LoD

torch = pytest.importorskip("torch")

OFFSETS = [0, 3, 4, 8, 8, 10]  # an empty sequence among them


def _data(width=16, dtype=np.float32):
    return np.random.default_rng(0).standard_normal((OFFSETS[-1], width)).astype(dtype)


class _Counter:
    """Wrap ``owner.name`` (a function or method) to count its calls, calling through."""

    def __init__(self, monkeypatch, owner, name, method=False):
        self.calls = 0
        orig = getattr(owner, name)

        if method:
            def counting(this, *args, **kwargs):
                self.calls += 1
                return orig(this, *args, **kwargs)
        else:
            def counting(*args, **kwargs):
                self.calls += 1
                return orig(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)


# -- torch autograd Functions: no inspect.signature per call ------------------------------------------
def _torch_calls(tt, col, padded, lengths):
    from lodtensor.backend.torch._cpu import ReluCPU

    return {
        "sequence_pool sum": lambda: S.sequence_pool(tt, "sum"),
        "sequence_pool average": lambda: S.sequence_pool(tt, "average"),
        "sequence_pool max": lambda: S.sequence_pool(tt, "max"),
        "sequence_softmax": lambda: S.sequence_softmax(col),
        "to_padded": tt.to_padded,
        "from_padded": lambda: lt.from_padded(padded, lengths),
        "relu": lambda: ReluCPU.apply(tt.data),  # (the backend's relu takes it for large tensors only)
    }


@pytest.mark.parametrize("requires_grad", [False, True])
def test_torch_segment_functions_skip_the_per_call_signature_binding(monkeypatch, requires_grad):
    """torch's ``Function.apply`` binds the arguments to ``inspect.signature(forward)`` on every call of a
    Function that defines ``setup_context`` (8-20 us, most of a small op's cost); ours go straight to the
    C entry when every argument is given by position, with the same results and gradients."""
    from lodtensor.backend.torch import _vmap

    if _vmap._FUNCTION_APPLY is None:  # torch 2.14 and 2.15: apply is the C entry, which binds in its own code
        pytest.skip(f"torch {torch.__version__}'s Function.apply binds the signature itself: no shortcut to take")
    data = torch.from_numpy(_data()).requires_grad_(requires_grad)
    tt = lt.LoDTensor(data, [OFFSETS])
    col = lt.LoDTensor(data[:, :1], tt.lod)
    padded, lengths = tt.to_padded()
    calls = _torch_calls(tt, col, padded, lengths)
    expected = {name: fn() for name, fn in calls.items()}
    signature = _Counter(monkeypatch, inspect, "signature")
    got = {name: fn() for name, fn in calls.items()}
    assert signature.calls == 0
    for name in calls:
        a, b = expected[name], got[name]
        a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
        a, b = [v.data if isinstance(v, lt.LoDTensor) else v for v in (a, b)]
        assert torch.equal(a, b), name
        assert (b.grad_fn is not None) == requires_grad, name
    if requires_grad:  # the gradient through the direct entry is autograd's as before
        out = S.sequence_pool(tt, "max").data.sum() + S.sequence_softmax(col).data.pow(2).sum()
        (grad,) = torch.autograd.grad(out, data)
        ref = torch.zeros_like(data)
        for a, b in zip(OFFSETS, OFFSETS[1:]):
            if b > a:
                piece = data[a:b].detach().clone().requires_grad_(True)
                total = piece.max(dim=0).values.sum() + torch.softmax(piece[:, :1], dim=0).pow(2).sum()
                ref[a:b] = torch.autograd.grad(total, piece)[0]
        torch.testing.assert_close(grad, ref)


def test_torch_functions_keep_torchs_apply_under_a_transform_and_for_keywords():
    """Under ``torch.func`` (vmap, grad) or with keyword arguments, torch's own ``apply`` serves."""
    from lodtensor.backend.torch._cpu import SegmentExtreme

    data = torch.from_numpy(_data())
    offsets = torch.tensor(OFFSETS)
    plain = SegmentExtreme.apply(data, offsets, None, "max", 0.0)
    by_name = SegmentExtreme.apply(data, offsets, None, "max", empty=0.0)
    assert torch.equal(plain, by_name)
    batch = torch.stack([data, 2 * data])
    out = torch.func.vmap(lambda d: SegmentExtreme.apply(d, offsets, None, "max", 0.0))(batch)
    assert torch.equal(out[0], plain) and torch.equal(out[1], 2 * plain)


# -- NumPy ufuncs on a small LoDTensor: no probe call, no row count -------------------------------------
def test_small_ufunc_is_not_probed_for_threading(monkeypatch):
    """``threaded_ufunc`` used to broadcast the shapes, count the row values with ``np.prod`` and call the
    ufunc on a probe row before finding an output too small to split; a bound from the shape says so first."""
    seen = []
    counting = np.frompyfunc(lambda a, b: seen.append(1) or a * b, 2, 1)
    assert np_ufunc.threaded_ufunc(counting, (np.ones((40, 16)), 2.0), {}) is None
    assert seen == []  # the probe called it 16 times
    broadcast = _Counter(monkeypatch, np, "broadcast_shapes")
    t = lt.LoDTensor(_data(), [OFFSETS])
    for out in (t * 2, t + t, np.maximum(t, 0.5)):
        assert out.lod == t.lod
    np.testing.assert_array_equal((t + t).data, 2 * t.data)
    assert broadcast.calls == 0  # one operand shape: no broadcast to compute


def test_large_ufunc_still_splits(monkeypatch):
    """Outputs past the threshold still take the split path (the bound only skips work for small ones)."""
    from lodtensor.backend.numpy import _tuning

    monkeypatch.setattr(_tuning, "UFUNC_PARALLEL_BYTES", 1024)
    x = np.arange(4096.0).reshape(512, 8)
    out = np_ufunc.threaded_ufunc(np.multiply, (x, 3.0), {})
    assert out is not None
    np.testing.assert_array_equal(out, x * 3.0)


# -- the fill check: a Python number in a float result needs no dtype name --------------------------------
def test_float_pool_and_pad_skip_the_fill_checks_work(monkeypatch):
    t = lt.LoDTensor(_data(), [OFFSETS])
    names = _Counter(monkeypatch, _dense, "dtype_name")
    values = _Counter(monkeypatch, _dense, "_host_values")
    for pool in ("sum", "average", "max", "last"):
        S.sequence_pool(t, pool)
    S.sequence_pad(t, 0.0)
    t.to_padded(pad_value=-1)
    assert (names.calls, values.calls) == (0, 0)
    # what the check guards stays guarded: a value an integer result cannot hold
    ints = lt.LoDTensor(np.arange(OFFSETS[-1]), [OFFSETS])
    with pytest.raises(ValueError, match=r"pad_value=0\.5 cannot be stored in the int64 result"):
        S.sequence_pad(ints, 0.5)
    with pytest.raises(ValueError, match="out of range for the int8 result"):
        lt.LoDTensor(np.arange(OFFSETS[-1], dtype=np.int8), [OFFSETS]).to_padded(pad_value=300)
    with pytest.raises(TypeError, match="pad_value must be a number"):
        t.to_padded(pad_value=None)
    with pytest.raises(TypeError, match=r"pad_value \(1\+2j\) is complex, but the float32 result holds real"):
        t.to_padded(pad_value=1 + 2j)


# -- plans of torch data: kept per offsets tensor, not rebuilt per call -----------------------------------
@pytest.mark.parametrize("call", ["pool max", "sequence_softmax wide", "nested softmax dim 1"])
def test_torch_reductions_reuse_their_plans(monkeypatch, call):
    """A torch tensor's ``.numpy()`` is a new array every call: facts and plans keyed by it missed on every
    call (one built and dropped each time); they are keyed by the LoD's offsets tensor instead."""
    data = torch.from_numpy(_data())
    tt = lt.LoDTensor(data, [OFFSETS])
    nt = tt.to_nested()
    fn = {
        "pool max": lambda: S.sequence_pool(tt, "max").data,
        "sequence_softmax wide": lambda: S.sequence_softmax(tt).data,
        "nested softmax dim 1": lambda: ln.softmax(nt, 1).to_padded(0.0),
    }[call]
    first = fn()
    puts = _Counter(monkeypatch, type(_util._PLANS), "put", method=True)  # (every plan cache: the LoD's too)
    for _ in range(3):
        torch.testing.assert_close(fn(), first, rtol=0, atol=0)
    assert puts.calls == 0


def test_nested_softmax_places_the_offsets_once(monkeypatch):
    """``ln.softmax`` / ``ln.log_softmax`` over the ragged dim used the structure's host offsets through a
    fresh ``from_host`` per call (a host-to-device copy on a GPU); the LoD's device copy is kept."""
    data = torch.from_numpy(_data(width=4)).requires_grad_(True)
    nt = lt.LoDTensor(data, [OFFSETS]).to_nested()
    be = nt.backend
    ln.softmax(nt, 1), ln.log_softmax(nt, 1)
    placed = _Counter(monkeypatch, type(be), "from_host", method=True)
    soft, log_soft = ln.softmax(nt, 1), ln.log_softmax(nt, 1)
    assert placed.calls == 0
    for a, b, s, ls in zip(OFFSETS, OFFSETS[1:], soft.unbind(), log_soft.unbind()):
        torch.testing.assert_close(s, torch.softmax(data[a:b], dim=0))
        torch.testing.assert_close(ls, torch.log_softmax(data[a:b], dim=0))
    (grad,) = torch.autograd.grad(soft.to_padded(0.0)[:, :, 0].sum() + log_soft.to_padded(0.0).sum(), data)
    assert grad.shape == data.shape and torch.isfinite(grad).all()


def test_torch_pad_reads_the_longest_sequence_from_the_lod(monkeypatch):
    """The torch backend's ``pad`` looked for sequences longer than ``maxlen`` with a pass over the offsets on
    every call; a LoD's offsets tensor carries its longest sequence (``frozen_fact``), so none is needed."""
    from lodtensor.backend.torch import _backend as torch_backend

    tt = lt.LoDTensor(torch.from_numpy(_data()), [OFFSETS])
    first, _ = tt.to_padded()
    passes = _Counter(monkeypatch, torch_backend, "truncation")
    padded, lengths = tt.to_padded()
    S.sequence_pad(tt, 0.0)
    assert passes.calls == 0
    assert torch.equal(padded, first) and lengths.tolist() == [3, 1, 4, 0, 2]
    # a maxlen shorter than the longest sequence (the backend's own truncation) still truncates
    be = tt.backend
    offsets = tt.lod.on(be, "absolute_offsets", 0, like=tt.data)
    cut = be.pad(tt.data, offsets, 2, 0.0)
    assert passes.calls == 1 and cut.shape == (5, 2, 16)
    torch.testing.assert_close(cut[2], tt.data[4:6])


# -- sequence_unpad: its lengths checked once; sequence_pad: the LoD's own outer levels ---------------------
def test_sequence_unpad_checks_the_lengths_once(monkeypatch):
    padded, lengths = lt.LoDTensor(_data(), [OFFSETS]).to_padded()
    checks = _Counter(monkeypatch, _validate, "_integer_array")
    out = S.sequence_unpad(padded, lengths.tolist())
    assert checks.calls == 1  # was 2: sequence_unpad's own check, then from_padded's of the same array
    assert out.lod() == [OFFSETS]
    np.testing.assert_array_equal(out.data, _data())
    # every check still guards sequence_unpad's arguments, with its own messages
    with pytest.raises(LoDError, match="length must be non-negative"):
        S.sequence_unpad(padded, [1, -1, 0, 0, 0])
    with pytest.raises(ValueError, match=r"length\[0\]=9 exceeds x's padded length 4"):
        S.sequence_unpad(padded, [9, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="one entry per padded sequence"):
        S.sequence_unpad(padded, [1, 1])
    with pytest.raises(TypeError, match="length must hold integers"):
        S.sequence_unpad(padded, [1.5, 0, 0, 0, 0])
    # and from_padded, called directly, checks as before
    with pytest.raises(ValueError, match=r"lengths\[0\]=9 exceeds the padded length 4"):
        lt.from_padded(padded, [9, 0, 0, 0, 0])


def test_sequence_pad_keeps_the_outer_levels_without_a_new_lod(monkeypatch):
    t = lt.LoDTensor(_data(), [[0, 2, 5], OFFSETS])
    made = _Counter(monkeypatch, LoD, "_from_valid")
    padded, length = S.sequence_pad(t, 0.0)
    assert made.calls == 0
    assert padded.lod is t.lod.head(1) and length.lod is t.lod.head(1)
    assert padded.lod() == [[0, 2, 5]] and length.data.tolist() == [3, 1, 4, 0, 2]


# -- backend lookups ---------------------------------------------------------------------------------------
def test_backend_of_one_array_is_that_arrays_backend():
    assert lt.backend_of(np.zeros(2)).name == "numpy"
    assert lt.backend_of(torch.zeros(2)).name == "torch"
    assert lt.backend_of(2.5).name == "numpy"
    assert lt.backend_of([1, 2]).name == "numpy"
    with pytest.raises(lt.BackendMismatchError):
        lt.backend_of(np.zeros(2), torch.zeros(2))
