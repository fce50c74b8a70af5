"""The backward passes of segment softmax, max and min by the compiled kernels (``_csegment.softmax_grad``
and ``extreme_grad``, served through ``_compiled.compiled_softmax_grad`` / ``compiled_extreme_grad`` to
the torch backend's CPU autograd): against NumPy (``y * (g - segsum(g * y))``; the gradient shared
among the rows equal to the result, as scatter_reduce) on each instruction set, split over threads or
not; their argument checks; and on torch CPU tensors against the differentiable ops they replace, which
still serve double backward.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lodtensor.backend.numpy import _compiled
from lodtensor.backend.numpy import _tuning as np_tuning

needs_kernel = pytest.mark.skipif(_compiled._softmax_grad is None, reason="the compiled kernels were not built")


def _sets():
    if _compiled._softmax_grad is None:
        return ["none"]
    import importlib  # noqa: PLC0415

    return list(importlib.import_module(_compiled._softmax_grad.__module__).simd()[1])


@pytest.fixture(autouse=True, params=_sets())
def instruction_set(request, monkeypatch):
    """Each instruction set's build of the kernel (the 16-byte baseline too), the kernels switched on."""
    monkeypatch.setattr(_compiled, "_enabled", _compiled._softmax_grad is not None)
    if _compiled._softmax_grad is None:
        yield request.param
        return
    import importlib  # noqa: PLC0415

    module = importlib.import_module(_compiled._softmax_grad.__module__)
    saved = module.simd()[0]
    module.select_simd(request.param)
    yield request.param
    module.select_simd(saved)


def _want(g, y, offsets):
    lengths = np.diff(offsets)
    dot = np.zeros((lengths.size,) + y.shape[1:])
    np.add.at(dot, np.repeat(np.arange(lengths.size), lengths), g.astype(np.float64) * y)
    return y * (g - np.repeat(dot, lengths, axis=0))


@needs_kernel
@settings(max_examples=40, deadline=None)
@given(lens=st.lists(st.integers(0, 70), min_size=1, max_size=12),
       width=st.sampled_from([1, 2, 3, 8, 9, 17, 40, 130]), dtype=st.sampled_from(["float32", "float64"]),
       threads=st.booleans(), seed=st.integers(0, 2**16))
def test_the_kernel_gives_numpys_values(lens, width, dtype, threads, seed):
    """Any LoD (empty sequences too), widths across the vector lanes and tails, both dtypes, one run or
    runs of sequences on threads."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    y = rng.random((int(offsets[-1]), width)).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    saved = _threads(threads)
    try:
        got = _compiled.compiled_softmax_grad(g, y, offsets)
    finally:
        np_tuning.COMPILED_PARALLEL_BYTES = saved
    if not lens or sum(lens) == 0:
        assert got is None
        return
    assert got.dtype == y.dtype and got.shape == y.shape
    np.testing.assert_allclose(got, _want(g, y, offsets), rtol=1e-4 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)  # float32 sums: their rounding


def _threads(on):
    saved = np_tuning.COMPILED_PARALLEL_BYTES
    np_tuning.COMPILED_PARALLEL_BYTES = 0 if on else 1 << 62
    return saved


@needs_kernel
@settings(max_examples=40, deadline=None)
@given(lens=st.lists(st.integers(0, 70), min_size=1, max_size=12),
       width=st.sampled_from([1, 2, 3, 8, 9, 17, 40, 130]), dtype=st.sampled_from(["float32", "float64"]),
       op=st.sampled_from(["max", "min"]), threads=st.booleans(), nan=st.booleans(), seed=st.integers(0, 2**16))
def test_the_extreme_kernel_shares_the_gradient_among_ties(lens, width, dtype, op, threads, nan, seed):
    """Max and min of values from a few levels (ties in most columns), a NaN in some: each sequence's
    gradient split evenly among its rows equal to the result, per column; none where the result is NaN."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = rng.integers(-2, 3, size=(int(offsets[-1]), width)).astype(dtype)
    if nan and x.size:
        x.flat[rng.integers(0, x.size)] = np.nan
    reduce = np.maximum if op == "max" else np.minimum
    m = np.zeros((len(lens), width), dtype)
    for j, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        if b > a:
            m[j] = reduce.reduce(x[a:b], axis=0)
    g = rng.standard_normal(m.shape).astype(dtype)
    saved = _threads(threads)
    try:
        got = _compiled.compiled_extreme_grad(x, m, g, offsets)
    finally:
        np_tuning.COMPILED_PARALLEL_BYTES = saved
    if sum(lens) == 0:
        assert got is None
        return
    ids = np.repeat(np.arange(len(lens)), lens)
    hit = x == m[ids]
    count = np.zeros(m.shape)
    np.add.at(count, ids, hit)
    want = hit * (g[ids] / np.maximum(count, 1)[ids])  # a product, as torch's ops: inf * 0 is NaN
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_it_declines_what_it_does_not_compute():
    offsets = np.array([0, 2, 3])
    y = np.ones((3, 2), np.float32)
    assert _compiled.compiled_softmax_grad(y.astype(np.float64), y, offsets) is None  # dtypes differ
    assert _compiled.compiled_softmax_grad(y.astype(np.float16), y.astype(np.float16), offsets) is None
    assert _compiled.compiled_softmax_grad(y[:2], y, offsets) is None  # shapes differ
    big = y.astype(">f4")
    assert _compiled.compiled_softmax_grad(big, big, offsets) is None  # not native byte order
    m = np.ones((2, 2), np.float32)
    assert _compiled.compiled_extreme_grad(y, m, m.astype(np.float64), offsets) is None
    assert _compiled.compiled_extreme_grad(y, m[:1], m[:1], offsets) is None  # a result per sequence
    assert _compiled.compiled_extreme_grad(y.astype(np.int32), m, m, offsets) is None


@needs_kernel
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": 2}, "kind must be 0 or 1"),
        ({"width": 0}, "width must be"),
        ({"offsets": np.array([0, 4, 2], np.int64)}, "must not decrease"),
        ({"offsets": np.array([0, 2, 9], np.int64)}, "data has 5 rows"),
        ({"offsets": np.array([0, 2, 5], np.int32)}, "offsets must be native int64"),
        ({"offsets": np.array([0.0, 1e-323, 2.5e-323])}, "offsets must be native int64, .* format 'd'"),
        ({"hi": 3}, "out of range"),
        ({"y": np.ones((4, 8), np.float32)}, "must be alike"),
        ({"y": np.ones((5, 8), np.int32)}, "y must be native float32, got 4-byte items of format"),
        ({"out": np.zeros((5, 8), np.float64)}, "out must be native float32, got 8-byte items"),
    ],
)
def test_the_kernel_checks_its_arguments(change, message):
    """Wrong arguments raise a ValueError naming what is wrong; `out` is left as it was."""
    call = {"kind": 0, "g": np.ones((5, 8), np.float32), "y": np.ones((5, 8), np.float32),
            "offsets": np.array([0, 2, 5], np.int64), "out": np.zeros((5, 8), np.float32), "width": 8, "lo": 0,
            "hi": 2}
    call.update(change)
    before = call["out"].copy()
    with pytest.raises(ValueError, match=message):
        _compiled._softmax_grad(*call.values())
    np.testing.assert_array_equal(call["out"], before)


@needs_kernel
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": -1}, "kind must be 0 or 1"),
        ({"width": 0}, "width must be"),
        ({"offsets": np.array([0, 4, 2], np.int64)}, "must not decrease"),
        ({"offsets": np.array([0, 2, 9], np.int64)}, "data has 5 rows"),
        ({"m": np.ones((1, 8), np.float32), "g": np.ones((1, 8), np.float32)}, "m holds 1 rows"),
        ({"g": np.ones((1, 8), np.float32)}, "must be alike"),
        ({"out": np.zeros((5, 8), np.float64)}, "out must be native float32, got 8-byte items"),
        ({"x": np.ones((5, 8), np.int32)}, "x must be native float32, got 4-byte items of format"),
        ({"m": np.ones((2, 8), ">f4")}, "m must be native float32, .* format '>f'"),
    ],
)
def test_the_extreme_kernel_checks_its_arguments(change, message):
    call = {"kind": 0, "x": np.ones((5, 8), np.float32), "m": np.ones((2, 8), np.float32),
            "g": np.ones((2, 8), np.float32), "offsets": np.array([0, 2, 5], np.int64),
            "out": np.zeros((5, 8), np.float32), "width": 8, "lo": 0, "hi": 2}
    call.update(change)
    before = call["out"].copy()
    with pytest.raises(ValueError, match=message):
        _compiled._extreme_grad(*call.values())
    np.testing.assert_array_equal(call["out"], before)


# -- the torch backend's CPU autograd ----------------------------------------------------------------

torch = pytest.importorskip("torch")


def _softmax(x, offsets):
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415

    return S.sequence_softmax(lt.LoDTensor(x, [offsets])).data


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 5, 64])
def test_torch_cpu_backward_by_the_kernel_matches_the_ops(monkeypatch, dtype, width):
    """The kernel's gradient equals the differentiable ops' (which serve when a graph of the backward is
    wanted), an expanded incoming gradient included."""
    from lodtensor.backend.torch import _cpu  # noqa: PLC0415

    calls = []
    real = _cpu.compiled_softmax_grad
    monkeypatch.setattr(_cpu, "compiled_softmax_grad", lambda *a: calls.append(1) or real(*a))
    offsets = [0, 3, 3, 40, 41, 300]
    gen = torch.Generator().manual_seed(width)
    base = torch.randn(300, width, generator=gen, dtype=dtype)
    weights = torch.randn(300, width, generator=gen, dtype=dtype)
    x = base.clone().requires_grad_()
    (_softmax(x, offsets) * weights).sum().backward()
    assert calls
    calls.clear()
    ref = base.clone().requires_grad_()
    (grad,) = torch.autograd.grad((_softmax(ref, offsets) * weights).sum(), ref, create_graph=True)
    assert not calls  # create_graph: the ops, so the gradient has a graph
    assert grad.requires_grad
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(x.grad, grad.detach(), rtol=tol, atol=tol)
    x.grad = None
    _softmax(x, offsets).sum().backward()  # an expanded gradient: each sequence's softmax sums to 1
    torch.testing.assert_close(x.grad, torch.zeros_like(x), rtol=0, atol=tol)


@needs_kernel
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_cpu_pool_backward_by_the_kernel_matches_the_ops(monkeypatch, op, dtype):
    """sequence_pool max/min's gradient by the kernel equals the differentiable ops' (ties shared: values
    from a few levels), which serve create_graph."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415
    from lodtensor.backend.torch import _cpu  # noqa: PLC0415

    calls = []
    real = _cpu.compiled_extreme_grad
    monkeypatch.setattr(_cpu, "compiled_extreme_grad", lambda *a: calls.append(1) or real(*a))
    offsets = [0, 3, 3, 40, 41, 300]
    gen = torch.Generator().manual_seed(5)
    base = torch.randint(-3, 4, (300, 16), generator=gen).to(dtype)
    weights = torch.randn(5, 16, generator=gen, dtype=dtype)

    def grad(**kw):
        x = base.clone().requires_grad_()
        out = S.sequence_pool(lt.LoDTensor(x, [offsets]), op).data
        return torch.autograd.grad((out * weights).sum(), x, **kw)[0]

    fused = grad()
    assert calls
    calls.clear()
    ops = grad(create_graph=True)
    assert not calls  # the differentiable ops (the gradient of a max has no graph of its own here)
    torch.testing.assert_close(fused, ops.detach(), rtol=1e-6, atol=1e-6)


def test_torch_cpu_gradcheck_and_double_backward():
    offsets = [0, 2, 2, 5, 6]
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda d: _softmax(d, offsets), (x,))
    assert torch.autograd.gradgradcheck(lambda d: _softmax(d, offsets), (x,))
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415

    pool = lambda d: S.sequence_pool(lt.LoDTensor(d, [offsets]), "max").data  # noqa: E731 - distinct values
    assert torch.autograd.gradcheck(pool, (x,))
    assert torch.autograd.gradgradcheck(pool, (x,))


@pytest.mark.parametrize("kind", ["sum", "average", "pad"])
def test_torch_cpu_row_gathers_go_to_the_buffer_pool(monkeypatch, kind):
    """Sum, mean and pad's backward copy each segment's gradient to its rows into a buffer-pool output
    (no page faults on a fresh one) unless a graph of the backward is wanted; the same values."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415
    from lodtensor.backend.torch import _cpu  # noqa: PLC0415

    shapes = []
    real = _cpu._pool.empty
    monkeypatch.setattr(_cpu._pool, "empty", lambda shape, dtype: shapes.append(shape) or real(shape, dtype))
    offsets = [0, 3, 3, 40, 41, 300]
    base = torch.randn(300, 16, dtype=torch.float64)

    def grad(**kw):
        x = base.clone().requires_grad_()
        t = lt.LoDTensor(x, [offsets])
        out = S.sequence_pad(t, 0.0)[0].data if kind == "pad" else S.sequence_pool(t, kind).data
        weights = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
        return torch.autograd.grad((out * weights).sum(), x, **kw)[0]

    pooled = grad()
    assert (300, 16) in shapes
    shapes.clear()
    recorded = grad(create_graph=True)
    assert (300, 16) not in shapes
    torch.testing.assert_close(pooled, recorded.detach(), rtol=0, atol=0)


def test_torch_cpu_pool_backward_keeps_an_inf_or_nan_gradient_as_the_ops():
    """An inf or NaN incoming gradient: the rows off the maximum get 0 * inf = NaN, as the ops' (and
    scatter_reduce's) product gives, not a 0."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor import sequence as S  # noqa: PLC0415

    x = torch.tensor([[1.0, 2.0], [3.0, 0.0]], requires_grad=True)
    g = torch.tensor([[float("inf"), float("nan")]])
    fused = torch.autograd.grad(S.sequence_pool(lt.LoDTensor(x, [[0, 2]]), "max").data, x, g)[0]
    ops = torch.autograd.grad(S.sequence_pool(lt.LoDTensor(x, [[0, 2]]), "max").data, x, g, create_graph=True)[0]
    torch.testing.assert_close(fused, ops.detach(), equal_nan=True)
    assert fused.isnan().tolist() == [[True, True], [False, True]]
