"""The fused backward kernels run on the CPU (tests/backend/cuda_emu.py): segment softmax's
(``_launch.segment_softmax_grad``: ``lt_softmax_grad_block``, ``lt_segment_dot`` +
``lt_softmax_grad_apply``, ``lt_softmax_grad_short``) against NumPy's ``y * (g - segsum(g * y))``,
and segment max's and min's (``_launch.segment_extreme_grad``: ``lt_extreme_grad_block``,
``lt_segment_hits`` + ``lt_extreme_grad_apply``, ``lt_extreme_grad_short``) against the gradient
shared among the rows equal to the result, on every route; and on the torch-CUDA route against the
unfused backward and ``gradcheck``. Skipped without g++.
"""

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import get_backend

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CUDA stand-in")


def _want(g, y, offsets):
    dot = get_backend("numpy").segment_sum(g * y, offsets)
    lengths = np.diff(offsets)
    return y * (g - np.repeat(dot, lengths, axis=0))


def _grad(emulated, g, y, lens, via_lod=True, skew=False):
    """The emulated backward of ``y`` (in sequences of ``lens`` rows) for the gradient ``g``.
    ``skew``: ``g`` seen at an address that is not 16-byte aligned (its rows then read one value a load)."""
    from lodtensor.backend.cupy import _launch  # noqa: PLC0415

    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    yd = emulated.array(y)
    if skew and g.size:  # (an empty array's view may sit anywhere)
        flat = emulated.array(np.concatenate([np.zeros(1, g.dtype), g.ravel()]))
        gd = flat[1:].reshape(g.shape)
        assert _launch.pointer(gd) % 16
    else:
        gd = emulated.array(g)
    lod = lt.LoD([offsets.tolist()])
    off = lod.on(emulated.be, "offsets", like=yd) if via_lod else emulated.array(offsets)
    emulated.stub.launches.clear()
    got = _launch.segment_softmax_grad(emulated.stub, gd, yd, off, len(lens), emulated.stub.empty,
                                       off if via_lod else None)
    return emulated.numpy(got), offsets


def _kinds(emulated):
    return [name.split("<")[0] for name, *_ in emulated.stub.launches]


def _inputs(rng, lens, width, dtype):
    x = rng.standard_normal((int(np.sum(lens)), width)) * 3
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    y = get_backend("numpy").segment_softmax(x, offsets).astype(dtype)
    return rng.standard_normal(y.shape).astype(dtype), y


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=st.lists(st.integers(0, 600), min_size=1, max_size=10), width=st.sampled_from([1, 3, 8, 40, 132]),
       dtype=st.sampled_from(["float32", "float64"]), steps=st.sampled_from([0, 1, 4]),
       tiles_first=st.booleans(), via_lod=st.booleans(), skew=st.booleans())
def test_every_route_gives_numpys_values(emulated, monkeypatch, lens, width, dtype, steps, tiles_first, via_lod,
                                         skew):
    """Any LoD (sequences over several pieces: 256 rows a piece for 132 float32 columns), width and
    dtype; by blocks from 1 or 4 block steps or never; either tile order; the offsets a LoD's or the
    caller's; the gradient aligned for packs or not."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
    monkeypatch.setattr(_tuning, "TILES_FIRST", tiles_first)
    g, y = _inputs(np.random.default_rng(len(lens) * 7 + width), lens, width, dtype)
    got, offsets = _grad(emulated, g, y, lens, via_lod, skew)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(got, _want(g.astype(np.float64), y.astype(np.float64), offsets), **tol)
    if not steps:
        assert "lt_softmax_grad_block" not in _kinds(emulated)


def test_the_routes_each_launch_what_they_should(emulated, monkeypatch):
    """Long one-piece sequences: one block kernel; one over several pieces beside them: the dot and
    apply passes take only it, with a combine pass; a few narrow rows: the short kernel alone."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", 4)
    rng = np.random.default_rng(3)
    lens = rng.integers(40, 200, size=9)  # float32 D = 128: 8 rows a block step, 256 rows a piece
    g, y = _inputs(rng, lens, 128, "float32")
    got, offsets = _grad(emulated, g, y, lens)
    np.testing.assert_allclose(got, _want(g, y, offsets), rtol=1e-4, atol=1e-6)
    assert _kinds(emulated) == ["lt_piece_plan", "lt_softmax_grad_block"]

    lens[4] = 700  # three pieces
    g, y = _inputs(rng, lens, 128, "float32")
    got, offsets = _grad(emulated, g, y, lens)
    np.testing.assert_allclose(got, _want(g, y, offsets), rtol=1e-4, atol=1e-6)
    assert _kinds(emulated) == ["lt_piece_plan", "lt_softmax_grad_block", "lt_segment_dot", "lt_segment_combine",
                                "lt_softmax_grad_apply"]
    assert "lt_segment_dot<float, 4>" in {name for name, *_ in emulated.stub.launches}

    lens = rng.integers(0, 9, size=50)  # float32 D = 2: 8 bytes a row, sequences of at most 32 rows
    g, y = _inputs(rng, lens, 2, "float32")
    got, offsets = _grad(emulated, g, y, lens)
    np.testing.assert_allclose(got, _want(g, y, offsets), rtol=1e-4, atol=1e-6)
    assert "lt_softmax_grad_short" in _kinds(emulated)


# -- max and min --------------------------------------------------------------------------------------

def _extreme_inputs(rng, lens, width, dtype, op, nan=False):
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = rng.integers(-2, 3, size=(int(offsets[-1]), width)).astype(dtype)  # a few levels: ties
    if nan and x.size:
        x.flat[rng.integers(0, x.size)] = np.nan
    ref = get_backend("numpy")
    m = (ref.segment_max if op == "max" else ref.segment_min)(x, offsets, empty=0).astype(dtype)
    return x, m, rng.standard_normal(m.shape).astype(dtype), offsets


def _extreme_want(x, m, g, offsets):
    lengths = np.diff(offsets)
    ids = np.repeat(np.arange(lengths.size), lengths)
    hit = x == m[ids]
    count = np.zeros(m.shape)
    np.add.at(count, ids, hit)
    return hit * (g[ids] / np.maximum(count, 1)[ids])  # a product, as torch's ops: inf * 0 is NaN


def _extreme(emulated, x, m, g, offsets, via_lod=True):
    from lodtensor.backend.cupy import _launch  # noqa: PLC0415

    xd = emulated.array(x)
    off = lt.LoD([offsets.tolist()]).on(emulated.be, "offsets", like=xd) if via_lod else emulated.array(offsets)
    emulated.stub.launches.clear()
    got = _launch.segment_extreme_grad(emulated.stub, xd, emulated.array(m), emulated.array(g), off,
                                       offsets.size - 1, emulated.stub.empty, off if via_lod else None)
    return emulated.numpy(got)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=st.lists(st.integers(0, 600), min_size=1, max_size=10), width=st.sampled_from([1, 3, 8, 40, 132]),
       dtype=st.sampled_from(["float32", "float64"]), op=st.sampled_from(["max", "min"]),
       steps=st.sampled_from([0, 1, 4]), tiles_first=st.booleans(), via_lod=st.booleans(), nan=st.booleans())
def test_extreme_routes_share_the_gradient_among_ties(emulated, monkeypatch, lens, width, dtype, op, steps,
                                                      tiles_first, via_lod, nan):
    """Max and min over values of a few levels (ties in most columns), a NaN somewhere or not, any LoD
    (sequences over several pieces), by blocks from 1 or 4 block steps or never, either tile order."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
    monkeypatch.setattr(_tuning, "TILES_FIRST", tiles_first)
    x, m, g, offsets = _extreme_inputs(np.random.default_rng(len(lens) * 5 + width), lens, width, dtype, op, nan)
    got = _extreme(emulated, x, m, g, offsets, via_lod)
    np.testing.assert_allclose(got, _extreme_want(x, m, g, offsets), rtol=1e-6, atol=0)
    if not steps:
        assert "lt_extreme_grad_block" not in _kinds(emulated)


@pytest.mark.parametrize("steps", [0, 4])
def test_extreme_routes_keep_an_inf_or_nan_gradient_as_the_ops(emulated, monkeypatch, steps):
    """An inf or NaN gradient: (x == m) * share makes NaN on the other rows, as the unfused ops'."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
    rng = np.random.default_rng(4)
    x, m, g, offsets = _extreme_inputs(rng, [50, 0, 70, 3], 8, "float32", "max")
    g[0, :2] = [np.inf, np.nan]
    got = _extreme(emulated, x, m, g, offsets)
    np.testing.assert_allclose(got, _extreme_want(x, m, g, offsets), rtol=1e-6)
    assert np.isnan(got[:50, :2]).sum() >= 50


def test_extreme_routes_each_launch_what_they_should(emulated, monkeypatch):
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", 4)
    rng = np.random.default_rng(9)
    lens = rng.integers(40, 200, size=9)
    for long, kinds in ((None, ["lt_piece_plan", "lt_extreme_grad_block"]),
                        (700, ["lt_piece_plan", "lt_extreme_grad_block", "lt_segment_hits", "lt_segment_combine",
                               "lt_extreme_grad_apply"])):
        if long:
            lens[4] = long
        x, m, g, offsets = _extreme_inputs(rng, lens, 128, "float32", "max")
        np.testing.assert_allclose(_extreme(emulated, x, m, g, offsets), _extreme_want(x, m, g, offsets), rtol=1e-6)
        assert _kinds(emulated) == kinds
    x, m, g, offsets = _extreme_inputs(rng, rng.integers(0, 9, size=50), 2, "float64", "min")
    np.testing.assert_allclose(_extreme(emulated, x, m, g, offsets), _extreme_want(x, m, g, offsets), rtol=1e-12)
    assert "lt_extreme_grad_short" in _kinds(emulated)


# -- the torch-CUDA route --------------------------------------------------------------------------

torch = pytest.importorskip("torch")

LENGTHS = [3, 0, 40, 1, 0, 7, 300, 900]


def _offsets():
    return np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64).tolist()


def _backward(x, weights):
    from lodtensor import sequence as S  # noqa: PLC0415

    x = x.detach().clone().requires_grad_(True)
    (S.sequence_softmax(lt.LoDTensor(x, [_offsets()])).data * weights).sum().backward()
    return x.grad


@pytest.mark.parametrize("width, dtype", [(5, torch.float64), (128, torch.float32), (2, torch.float32),
                                          (16, torch.float16)])
def test_torch_route_fused_matches_the_unfused_backward(route, monkeypatch, width, dtype):
    """Values of the fused backward against the unfused ops, on both block-step settings (a sequence of
    900 rows spans several pieces at width 128); float16 computes in float32 and is cast back."""
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    g = torch.Generator().manual_seed(width)
    x = torch.randn((sum(LENGTHS), width), generator=g, dtype=torch.float64).to(dtype)
    weights = torch.randn((sum(LENGTHS), width), generator=g, dtype=torch.float64).to(dtype)
    for steps in (4, 1):
        monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
        route.launches.clear()
        fused = _backward(x, weights)
        names = {name.split("<")[0] for name, *_ in route.launches}
        assert names & {"lt_softmax_grad_block", "lt_softmax_grad_apply", "lt_softmax_grad_short"}, names
        monkeypatch.setattr(_tuning, "FUSED_SOFTMAX_GRAD", False)
        route.launches.clear()
        unfused = _backward(x, weights)
        assert not any(name.startswith("lt_softmax_grad") for name, *_ in route.launches)
        monkeypatch.setattr(_tuning, "FUSED_SOFTMAX_GRAD", True)
        assert fused.dtype == unfused.dtype == dtype
        tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3}[dtype]
        np.testing.assert_allclose(fused.double().numpy(), unfused.double().numpy(), rtol=tol, atol=tol)


def test_torch_route_fused_backward_takes_a_broadcast_gradient(route):
    """``sum().backward()`` hands the backward an expanded gradient (stride 0): made contiguous, its
    gradient is 0 (each sequence's softmax sums to 1 per column)."""
    x = torch.randn((sum(LENGTHS), 8), dtype=torch.float64)
    grad = _backward(x, 1.0)
    assert any(name.startswith("lt_softmax_grad") for name, *_ in route.launches)
    np.testing.assert_allclose(grad.numpy(), 0.0, atol=1e-12)


def test_torch_route_gradcheck_through_the_fused_backward(route):
    from lodtensor import sequence as S  # noqa: PLC0415

    offsets = [0, 2, 2, 5, 6, 40]
    x = torch.randn(40, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda d: S.sequence_softmax(lt.LoDTensor(d, [offsets])).data, (x,))
    assert any(name.startswith("lt_softmax_grad") for name, *_ in route.launches)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("width, dtype", [(5, torch.float64), (128, torch.float32), (2, torch.float32),
                                          (16, torch.float16)])
def test_torch_route_fused_pool_backward_matches_the_unfused(route, monkeypatch, op, width, dtype):
    """sequence_pool max/min's fused backward against the unfused ops, ties included (values of a few
    levels), on both block-step settings; create_graph keeps the unfused ops."""
    from lodtensor import sequence as S  # noqa: PLC0415
    from lodtensor.backend.cupy import _tuning  # noqa: PLC0415

    gen = torch.Generator().manual_seed(width)
    x = torch.randint(-2, 3, (sum(LENGTHS), width), generator=gen).to(dtype)
    weights = torch.randn((len(LENGTHS), width), generator=gen, dtype=torch.float64).to(dtype)

    def grad(**kw):
        v = x.clone().requires_grad_(True)
        out = S.sequence_pool(lt.LoDTensor(v, [_offsets()]), op).data
        return torch.autograd.grad((out * weights).sum(), v, **kw)[0]

    for steps in (4, 1):
        monkeypatch.setattr(_tuning, "SOFTMAX_BLOCK_STEPS", steps)
        route.launches.clear()
        fused = grad()
        names = {name.split("<")[0] for name, *_ in route.launches}
        assert names & {"lt_extreme_grad_block", "lt_extreme_grad_apply", "lt_extreme_grad_short"}, names
        route.launches.clear()
        unfused = grad(create_graph=True)
        assert not any(name.startswith("lt_extreme_grad") for name, *_ in route.launches)
        assert fused.dtype == unfused.dtype == dtype
        tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3}[dtype]
        np.testing.assert_allclose(fused.double().numpy(), unfused.detach().double().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["softmax", "sum", "average", "max", "pad"])
def test_torch_route_second_derivatives(route, op):
    """create_graph through the route's Functions (a gradient penalty, a Hessian-vector product): the
    second derivative is right (softmax's backward was once-differentiable and ran kernels, so a
    penalty on its gradient got no gradient at all)."""
    from lodtensor import sequence as S  # noqa: PLC0415

    offsets = [0, 2, 2, 5, 6, 40]
    calls = {"softmax": lambda t: S.sequence_softmax(t).data, "pad": lambda t: S.sequence_pad(t, 0.0)[0].data}
    f = calls.get(op, lambda t: S.sequence_pool(t, op).data)
    x = torch.randn(40, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda d: f(lt.LoDTensor(d, [offsets])), (x,))
    assert route.launches
