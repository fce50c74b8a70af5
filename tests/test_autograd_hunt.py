"""Autograd hunt on the torch backend: gradcheck / gradgradcheck (float64, forward mode where the op has it)
of the sequence ops, LoDTensor methods, operators and NumPy/torch protocol calls, and the nn layers, on
empty sequences, single rows, a 0-sequence tensor, two-level lods and rows of shape (N,), (N, D), (N, D, E);
batched gradients (``autograd.grad(is_grads_batched=True)``, which ``jacobian``/``hessian`` with
``vectorize=True`` use); the tie convention of max/min pooling against torch's own ``amax``/``amin``; grad
modes, views, in-place edits, non-leaf inputs and double backward. The nested part is in
tests/nested/test_nested_autograd_hunt.py."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.nn import functional as F

torch = pytest.importorskip("torch")
from torch.autograd import gradcheck, gradgradcheck  # noqa: E402 - after the importorskip

from lodtensor.backend.torch import _backend as torch_backend  # noqa: E402

LODS = {
    "mixed": [[0, 2, 2, 5, 6]],
    "single": [[0, 1]],
    "all-empty": [[0, 0, 0]],
    "no-sequences": [[0]],
    "two-levels": [[0, 2, 3], [0, 1, 1, 4]],
}
ROWS = {"mixed": (), "single": (3,), "all-empty": (2, 2), "no-sequences": (3,), "two-levels": (2, 2)}


@pytest.fixture(params=[True, False], ids=["cpu-kernels", "generic"])
def shortcuts(request, monkeypatch):
    """The torch backend's CPU kernels (NumPy/compiled forward, own backward) and the device-generic
    torch code (what CUDA without CuPy runs)."""
    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", request.param)
    return request.param


def _ops(lod):
    def t(x):
        return lt.LoDTensor(x, lod)

    lengths = np.diff(lod[-1])
    ops = {f"pool-{p}": (lambda x, p=p: S.sequence_pool(t(x), p, pad_value=0.5).data)
           for p in ("sum", "average", "sqrt", "max", "min", "first", "last")}
    ops.update({
        "softmax": lambda x: S.sequence_softmax(t(x)).data,
        "reverse": lambda x: S.sequence_reverse(t(x)).data,
        "pad": lambda x: S.sequence_pad(t(x), 0.0, maxlen=int(lengths.max(initial=0)) + 1)[0].data,
        "unpad": lambda x: S.sequence_unpad(S.sequence_pad(t(x), -1.0)[0], lengths).data,
        "to_padded": lambda x: t(x).to_padded(pad_value=2.0)[0],
        "concat": lambda x: S.sequence_concat([t(x), t(x * 2)]).data,
        "expand_as": lambda x: S.sequence_expand_as(S.sequence_pool(t(x), "sum").data, t(x)).data,
        "slice": lambda x: S.sequence_slice(t(x), [0] * lengths.size, (lengths > 0).astype(int)).data,
        "lod_reset": lambda x: S.lod_reset(t(x), target_lod=[0, x.shape[0]]).data,
    })
    if len(lod) > 1:
        ops["pool-max-level0"] = lambda x: S.sequence_pool(t(x), "max", level=0).data
        ops["softmax-level0"] = lambda x: S.sequence_softmax(t(x), level=0).data
        ops["to_padded_all"] = lambda x: t(x).to_padded_all()[0]
    return ops


CASES = [(name, op) for name in LODS for op in _ops(LODS[name])]


@pytest.mark.parametrize(("lod", "op"), CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_sequence_ops_gradcheck_gradgradcheck_forward_mode(lod, op, shortcuts):
    levels = LODS[lod]
    fn = _ops(levels)[op]
    x = torch.randn((levels[-1][-1],) + ROWS[lod], dtype=torch.float64, requires_grad=True)
    out = fn(x)
    assert isinstance(out, torch.Tensor) and out.requires_grad and out.dtype == torch.float64
    assert gradcheck(fn, (x,), check_forward_ad=True, fast_mode=True)
    # max/min: piecewise linear, the second derivative is zero (still checked: the graph must exist)
    assert gradgradcheck(fn, (x,), fast_mode=True)


# -- batched gradients: the vectorized jacobian / hessian ----------------------------------------------------
BATCHED = {
    "max": lambda t: S.sequence_pool(t, "max").data,
    "min": lambda t: S.sequence_pool(t, "min").data,
    "sum": lambda t: S.sequence_pool(t, "sum").data,
    "softmax": lambda t: S.sequence_softmax(t).data,
    "pad": lambda t: S.sequence_pad(t, 0.0)[0].data,
    "unpad": lambda t: S.sequence_unpad(S.sequence_pad(t, 0.0)[0], [2, 0, 3, 1]).data,
    "to_padded": lambda t: t.to_padded()[0],
}


@pytest.mark.parametrize("width", [3, 40], ids=["narrow", "wide"])
@pytest.mark.parametrize("name", sorted(BATCHED))
def test_vectorized_jacobian_through_the_cpu_kernels(name, width):
    """``autograd.functional.jacobian(..., vectorize=True)`` runs the backward under torch's legacy vmap
    (``is_grads_batched``): the CPU Functions' compiled backward kernels read the gradient's memory and
    raised "Batching rule not implemented for aten::detach" (max, min, softmax) or "... index_select.out"
    (pad, unpad, the wide sum). They now take torch ops for batched gradients; the result equals the
    row-by-row jacobian."""
    x = torch.randn(6, width, dtype=torch.float64, requires_grad=True)

    def fn(v):
        return BATCHED[name](lt.LoDTensor(v, [[0, 2, 2, 5, 6]]))

    fast = torch.autograd.functional.jacobian(fn, x, vectorize=True)
    torch.testing.assert_close(fast, torch.autograd.functional.jacobian(fn, x), rtol=0, atol=0)
    assert gradcheck(fn, (x,), check_batched_grad=True, fast_mode=True)


def test_vectorized_hessian_and_batched_double_backward_of_softmax():
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)

    def fn(v):
        return S.sequence_softmax(lt.LoDTensor(v, [[0, 2, 2, 5, 6]])).data

    def loss(v):
        return fn(v).pow(3).sum()

    torch.testing.assert_close(torch.autograd.functional.hessian(loss, x, vectorize=True),
                               torch.autograd.functional.hessian(loss, x))
    assert gradgradcheck(fn, (x,), check_batched_grad=True, fast_mode=True)


# -- max / min ties: the convention of torch.amax / torch.amin ------------------------------------------------
TIES_LOD = [[0, 3, 3, 5, 6, 9]]
TIES = [[0.0, 1, 2], [0, 1, -1], [0, 5, 2], [1, 1, 1], [1, 1, 1], [7, 7, 7], [2, 3, 3], [2, 3, 3], [2, 3, 3]]


def _per_sequence(x, kind, offsets):
    """torch's own amax/amin per sequence (0 for an empty one), the reference for values and gradients."""
    reduce = torch.amax if kind == "max" else torch.amin
    return torch.stack([reduce(x[a:b], 0) if b > a else x.new_zeros(x.shape[1:]) + 0 * x.sum()
                        for a, b in zip(offsets[:-1], offsets[1:])])


@pytest.mark.parametrize("create_graph", [False, True], ids=["kernel", "graph"])
@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_pool_max_min_ties_share_the_gradient_as_torch_amax(kind, wide, create_graph, shortcuts):
    """Documented (docs/porting.md): tied rows share the gradient evenly, as torch.amax / scatter_reduce
    amax (Paddle gives it all to the first). Every path agrees: the compiled backward kernel, its
    create_graph form, the device-generic scatter_reduce, and forward mode."""
    base = torch.tensor(TIES, dtype=torch.float64)
    if wide:
        base = base.repeat(1, 20)
    grad = torch.randn(5, base.shape[1], dtype=torch.float64)
    ref_x = base.clone().requires_grad_()
    ref = _per_sequence(ref_x, kind, TIES_LOD[0])
    (expected,) = torch.autograd.grad(ref, ref_x, grad)
    x = base.clone().requires_grad_()
    out = S.sequence_pool(lt.LoDTensor(x, TIES_LOD), kind).data
    torch.testing.assert_close(out, ref.detach())
    (got,) = torch.autograd.grad(out, x, grad, create_graph=create_graph)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got[0:3, 0], grad[0, 0].expand(3) / 3)  # three zeros tie in column 0
    tangent = torch.randn_like(base)
    _, jvp = torch.func.jvp(lambda v: S.sequence_pool(lt.LoDTensor(v, TIES_LOD), kind).data, (base,), (tangent,))
    _, ref_jvp = torch.func.jvp(lambda v: _per_sequence(v, kind, TIES_LOD[0]), (base,), (tangent,))
    torch.testing.assert_close(jvp, ref_jvp)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_pool_extreme_at_infinity_gives_the_whole_gradient_on_the_generic_path(kind, monkeypatch):
    """The device-generic max/min (scatter_reduce into a tensor pre-filled with -inf for max) counted the
    fill among the ties: a sequence whose max is -inf itself (two -inf rows) gave each row 1/3, and
    forward mode 2/3 of the tangent, where torch.amax (and the CPU kernel) give 1/2 and the tangent."""
    monkeypatch.setattr(torch_backend, "_CPU_SHORTCUTS", False)
    inf = float("inf") if kind == "min" else -float("inf")
    base = torch.tensor([[inf, 1.0], [inf, 2.0], [3.0, inf]], dtype=torch.float64)
    offsets = [0, 2, 3]
    x = base.clone().requires_grad_()
    out = S.sequence_pool(lt.LoDTensor(x, [offsets]), kind).data
    out.backward(torch.ones_like(out))
    ref_x = base.clone().requires_grad_()
    _per_sequence(ref_x, kind, offsets).backward(torch.ones(2, 2, dtype=torch.float64))
    assert x.grad.tolist() == ref_x.grad.tolist()
    assert x.grad[:2, 0].tolist() == [0.5, 0.5]
    tangent = torch.ones_like(base)
    _, jvp = torch.func.jvp(lambda v: S.sequence_pool(lt.LoDTensor(v, [offsets]), kind).data, (base,), (tangent,))
    assert jvp.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# -- grad modes, views, in-place edits, non-leaf inputs, double backward ------------------------------------
MODE_OPS = {
    "max": lambda t: S.sequence_pool(t, "max").data,
    "average": lambda t: S.sequence_pool(t, "average", pad_value=1.0).data,
    "softmax": lambda t: S.sequence_softmax(t).data,
    "pad": lambda t: S.sequence_pad(t, 0.0)[0].data,
    "reverse": lambda t: S.sequence_reverse(t).data,
}


@pytest.mark.parametrize("width", [3, 40])
@pytest.mark.parametrize("name", sorted(MODE_OPS))
def test_no_grad_and_inference_mode_are_respected_and_leave_no_inference_tensor_in_the_lod_cache(name, width,
                                                                                                shortcuts):
    fn = MODE_OPS[name]
    lod = lt.LoD([[0, 2, 2, 5, 6]])
    with torch.inference_mode():  # fills the LoD's cached device arrays inside inference mode first
        assert not fn(lt.LoDTensor(torch.randn(6, width, dtype=torch.float64), lod)).requires_grad
    x = torch.randn(6, width, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        assert not fn(lt.LoDTensor(x, lod)).requires_grad
    out = fn(lt.LoDTensor(x, lod))  # the same LoD object, with autograd
    assert out.requires_grad
    out.sum().backward()
    assert x.grad.shape == x.shape and x.grad.dtype == x.dtype and x.grad.is_contiguous()


def test_gradient_through_a_sequence_view_and_a_non_leaf_input():
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    y = x * 3  # non-leaf
    t = lt.LoDTensor(y, [[0, 2, 2, 5, 6]])
    seq = t[2]  # a view of rows 2..4
    assert seq.data._base is not None or seq.data.data_ptr() == y[2:5].data_ptr()
    (g,) = torch.autograd.grad(S.sequence_pool(lt.LoDTensor(seq.data, [[0, 3]]), "sum").data.sum(), x)
    expected = torch.zeros(6, 2, dtype=torch.float64)
    expected[2:5] = 3
    torch.testing.assert_close(g, expected)
    assert gradcheck(lambda v: lt.LoDTensor(v, [[0, 2, 2, 5, 6]])[-1].data * 2, (x,))


def test_in_place_edit_of_a_saved_input_raises_torchs_version_error():
    """max pooling saves its input (to find the rows at the extreme): editing it afterwards is caught by
    torch's version counter, as for torch.amax."""
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    y = x * 1
    out = S.sequence_pool(lt.LoDTensor(y, [[0, 2, 2, 5, 6]]), "max").data
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_retain_graph_and_create_graph():
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    out = S.sequence_softmax(lt.LoDTensor(x, [[0, 2, 2, 5, 6]])).data
    weight = torch.arange(12.0, dtype=torch.float64).reshape(6, 2)
    loss = (out * weight).sum()
    (g1,) = torch.autograd.grad(loss, x, retain_graph=True)
    (g2,) = torch.autograd.grad(loss, x, create_graph=True)
    torch.testing.assert_close(g1, g2)
    assert g2.requires_grad
    (h,) = torch.autograd.grad(g2.pow(2).sum(), x)
    ref_x = x.detach().clone().requires_grad_()
    ref = torch.cat([torch.softmax(ref_x[a:b], 0) for a, b in [(0, 2), (2, 5), (5, 6)]])
    (rg,) = torch.autograd.grad((ref * weight).sum(), ref_x, create_graph=True)
    (rh,) = torch.autograd.grad(rg.pow(2).sum(), ref_x)
    torch.testing.assert_close(h, rh)


# -- LoDTensor methods, operators, NumPy ufuncs and torch functions on torch data ----------------------------
def _t(x):
    return lt.LoDTensor(x, [[0, 2, 2, 5, 6]])


def _d(r):
    return r.data if isinstance(r, lt.LoDTensor) else r


PROTOCOL = {
    "operators": lambda x, w: _d(1.5 - _t(x) * 2 + _t(x) ** 2 / (abs(_t(x)) + 1) - (-_t(x))),
    "rpow": lambda x, w: _d(2.0 ** _t(x)),
    "matmul": lambda x, w: _d(_t(x) @ w),
    "ufuncs": lambda x, w: _d(np.tanh(np.exp(_t(x))) + np.maximum(_t(x), 0.1) + np.sqrt(_t(x) * _t(x) + 1)),
    "np.matmul": lambda x, w: _d(np.matmul(_t(x), w)),
    "torch functions": lambda x, w: _d(torch.nn.functional.layer_norm(torch.tanh(_t(x)), (3,))),
    "F.linear": lambda x, w: _d(torch.nn.functional.linear(_t(x), w)),
    "softmax over a row": lambda x, w: _d(torch.softmax(_t(x), 1)),
    "getitem": lambda x, w: _d(_t(x)[2]) * 1.0,
    "unbind": lambda x, w: torch.cat([_d(u) for u in _t(x).unbind()]),
    "from_padded": lambda x, w: _d(lt.from_padded(_t(x).to_padded()[0], [2, 0, 3, 1])),
    "nested jagged round trip": lambda x, w: _d(lt.from_torch(_t(x).to_nested_jagged())),
    "to_sparse_csr": lambda x, w: _t(x).to_sparse_csr().to_dense(),
}


@pytest.mark.parametrize("name", sorted(PROTOCOL))
def test_lodtensor_protocols_keep_autograd(name):
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    out = PROTOCOL[name](x, w)
    assert isinstance(out, torch.Tensor) and out.requires_grad
    assert gradcheck(PROTOCOL[name], (x, w), fast_mode=True)


# -- nn layers on edge lods ----------------------------------------------------------------------------------
NN_LODS = {"mixed": [[0, 3, 3, 5, 6]], "single": [[0, 1]], "two-levels": [[0, 2, 3], [0, 1, 1, 4]]}


def _rand(rng, *shape):
    return torch.tensor(rng.uniform(-0.7, 0.7, size=shape), requires_grad=True)


@pytest.mark.parametrize("lod", sorted(NN_LODS))
def test_nn_layers_gradcheck_on_edge_lods(lod):
    levels = NN_LODS[lod]
    n, count = levels[-1][-1], len(levels[-1]) - 1
    rng = np.random.RandomState(0)

    def t(x):
        return lt.LoDTensor(x, levels)

    labels = lt.LoDTensor(torch.tensor(rng.randint(0, 3, (n, 1))), levels)
    ids = lt.LoDTensor(torch.tensor(rng.randint(0, 5, (n, 1))), levels)
    cases = [
        (lambda w: F.embedding(ids, w, padding_idx=1).data, [_rand(rng, 5, 3)], True),
        (lambda x, w, b: F.fc([t(x), t(x * 2)], [w, w], b, act="softmax").data,
         [_rand(rng, n, 4), _rand(rng, 4, 3), _rand(rng, 3)], True),
        (lambda x, w: F.sequence_conv(t(x), w, None, filter_size=2, padding_start=-1, act="tanh").data,
         [_rand(rng, n, 3), _rand(rng, 6, 2)], True),
        (lambda x, r: F.row_conv(t(x), r).data, [_rand(rng, n, 3), _rand(rng, 3, 3)], True),
        (lambda x, w, b: F.sequence_conv_pool(t(x), w, b, 3, pool_type="max").data,
         [_rand(rng, n, 3), _rand(rng, 9, 2), _rand(rng, 2)], True),
        (lambda x, w, b, h, c: torch.cat([o.data for o in F.dynamic_lstm(t(x), w, b, h, c)], 1),
         [_rand(rng, n, 8), _rand(rng, 2, 8), _rand(rng, 1, 14), _rand(rng, count, 2), _rand(rng, count, 2)], False),
        (lambda x, w, b, h: F.dynamic_gru(t(x), w, b, h, is_reverse=True).data,
         [_rand(rng, n, 6), _rand(rng, 2, 6), _rand(rng, 1, 6), _rand(rng, count, 2)], False),
        (lambda x, tr: F.linear_chain_crf(t(x), labels, tr), [_rand(rng, n, 3), _rand(rng, 5, 3)], True),
    ]
    for fn, inputs, twice in cases:
        assert fn(*inputs).requires_grad
        assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, check_forward_ad=True, fast_mode=True)
        if twice:
            assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, fast_mode=True)


def test_recurrence_double_backward_is_refused_with_its_message():
    """Documented (dynamic_lstm's docstring): the fused recurrence is differentiable once; a gradient of
    its gradient raises (as torch's once_differentiable does) rather than giving zeros."""
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    out = F.dynamic_gru(lt.LoDTensor(x, [[0, 1, 4]]), w, None).data
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        gx.pow(2).sum().backward()


def test_fluid_math_layers_on_torch_data_gradcheck():
    import lodtensor.fluid as fluid

    x = (torch.rand(6, 3, dtype=torch.float64) + 0.1).requires_grad_()
    hard = torch.tensor([[0], [2], [1], [1], [0], [2]])
    soft = torch.rand(6, 3, dtype=torch.float64)
    cases = [
        lambda v: fluid.layers.cross_entropy(_t(v), hard, ignore_index=1).data,
        lambda v: fluid.layers.cross_entropy(_t(v), soft, soft_label=True).data,
        lambda v: fluid.layers.sums([_t(v), _t(v * 2)]).data,
        lambda v: fluid.layers.mean(_t(v)),
        lambda v: fluid.layers.sequence_pool(_t(v), "sqrt").data,
    ]
    for fn in cases:
        assert fn(x).requires_grad
        assert gradcheck(fn, (x,), check_forward_ad=True, fast_mode=True)
        assert gradgradcheck(fn, (x,), fast_mode=True)
