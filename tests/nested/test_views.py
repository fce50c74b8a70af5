"""Transposed views (#27): ``transpose`` shares the buffer, the view-aware ops (unflatten, flatten, squeeze,
unsqueeze, pointwise, in-place writes) keep it, everything else reads the same values as a copy would;
attention over ``(B, heads, (L), E)`` views of rows runs per length group (values and gradients against the
per-sequence dense computation, padded ``nn.MultiheadAttention`` and ``gradcheck``)."""

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

LENS = [3, 5, 1, 0, 5, 2]


def _parts(seed, lens=LENS, width=12, lib="numpy", dtype=np.float32):
    g = np.random.default_rng(seed)
    parts = [g.standard_normal((n, width)).astype(dtype) for n in lens]
    return [torch.from_numpy(p) for p in parts] if lib == "torch" else parts


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _heads(p, h=3):
    """What ``nt.unflatten(-1, [h, -1]).transpose(1, 2)`` makes of component ``p``."""
    return _np(p).reshape(p.shape[0], h, p.shape[1] // h).transpose(1, 0, 2)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_transpose_is_a_view(lib):
    parts = _parts(0, lib=lib)
    nt = ln.nested_tensor(parts)
    q = nt.unflatten(-1, [3, 4]).transpose(1, 2)
    assert q.nested_size().tolist() == [[3, n, 4] for n in LENS]
    assert q._buf is nt._buf  # no data moved
    for got, p in zip(q.unbind(), parts):
        np.testing.assert_array_equal(_np(got), _heads(p))
    back = q.transpose(1, 2).flatten(-2)
    assert back._perm is None and back._buf is nt._buf
    assert q.values() is not None and q.offsets().tolist() == [0, 3, 8, 9, 9, 14, 16]  # torch: the storage's


@pytest.mark.parametrize("op", ["softmax", "sum", "to_padded", "linear", "matmul", "select", "contig-ops"])
def test_ops_read_a_transposed_view_like_a_copy(op):
    parts = _parts(1)
    q = ln.nested_tensor(parts).unflatten(-1, [3, 4]).transpose(1, 2)
    copy = ln.nested_tensor([_heads(p) for p in parts])
    w = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    calls = {
        "softmax": lambda x: ln.softmax(x, 2),
        "sum": lambda x: ln.sum(x, -1),
        "to_padded": lambda x: ln.to_padded_tensor(x, -1.0),
        "linear": lambda x: ln.linear(x, w),
        "matmul": lambda x: x @ x.transpose(-1, -2),
        "select": lambda x: x[..., 1],
        "contig-ops": lambda x: (x.reshape(6, 3, -1, 2, 2) * 2).flatten(-2),
    }
    got, want = calls[op](q), calls[op](copy)
    if isinstance(want, ln.NestedTensor):
        assert got.nested_size().tolist() == want.nested_size().tolist()
        for a, b in zip(got.unbind(), want.unbind()):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6, atol=1e-6)


def test_view_ops_on_a_transposed_view():
    parts = _parts(3)
    nt = ln.nested_tensor(parts)
    q = nt.unflatten(-1, [3, 4]).transpose(1, 2)  # (B, 3, (L), 4) over rows (L, 3, 4)
    cases = {
        "unsqueeze": (q.unsqueeze(-1), lambda p: _heads(p)[..., None]),
        "squeeze": (q.unsqueeze(-1).squeeze(-1), _heads),
        "unflatten": (q.unflatten(-1, [2, 2]), lambda p: _heads(p).reshape(3, p.shape[0], 2, 2)),
        "flatten kept": (q.unflatten(-1, [2, 2]).flatten(-2), _heads),
        "flatten moved": (nt.unflatten(-1, [3, 4]).transpose(2, 3).flatten(2), lambda p: _np(p).reshape(
            p.shape[0], 3, 4).transpose(0, 2, 1).reshape(-1, 12)),
        "pointwise": (q * 2 + q, lambda p: _heads(p) * 3),
    }
    for name, (got, want) in cases.items():
        for a, p in zip(got.unbind(), parts):
            np.testing.assert_allclose(_np(a), want(p), rtol=1e-6, err_msg=name)
    assert cases["unsqueeze"][0]._buf is nt._buf and cases["unflatten"][0]._buf is nt._buf
    assert (q * 2)._perm == q._perm  # an elementwise result keeps the layout: no copy


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("op", ["add_", "fill_", "copy_", "masked_fill_", "relu-inplace"])
def test_in_place_ops_write_through_a_transposed_view(op, lib):
    parts = _parts(4, lib=lib)
    nt = ln.nested_tensor(parts)
    q = nt.unflatten(-1, [3, 4]).transpose(1, 2)
    other = ln.nested_tensor([_heads(p) * 0 + 1 for p in _parts(4)])
    if lib == "torch":
        other = other.to_torch()
    before = [_heads(p) for p in parts]
    expect = {
        "add_": lambda: (q.add_(other), [b + 1 for b in before]),
        "fill_": lambda: (q.fill_(2.0), [b * 0 + 2 for b in before]),
        "copy_": lambda: (q.copy_(other), [b * 0 + 1 for b in before]),
        "masked_fill_": lambda: (q.masked_fill_(q > 0, 0.0), [np.where(b > 0, 0, b) for b in before]),
        "relu-inplace": lambda: (ln.relu(q, inplace=True), [np.maximum(b, 0) for b in before]),
    }
    result, want = expect[op]()
    assert result is q
    for a, b in zip(q.unbind(), want):
        np.testing.assert_allclose(_np(a), b, rtol=1e-6)
    for a, b in zip(nt.unbind(), want):  # the base sees the write
        np.testing.assert_allclose(_np(a), b.transpose(1, 0, 2).reshape(-1, 12), rtol=1e-6)


# -- attention over views of rows ----------------------------------------------------------------
def _heads_view(nt, h):
    return nt.unflatten(-1, [h, -1]).transpose(1, 2)


def _dense(x, h):
    return x.reshape(x.shape[0], h, x.shape[1] // h).transpose(0, 1)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3}], ids=["plain", "causal", "scale"])
def test_sdpa_over_rows_matches_per_sequence(kw, lib):
    lq, lk = [3, 5, 1, 0, 5, 2], [2, 5, 4, 3, 5, 0]  # cross attention; an empty query and an empty key set
    q, k, v = _parts(5, lq, 12, lib), _parts(6, lk, 12, lib), _parts(7, lk, 6, lib)
    h = 3
    out = ln.scaled_dot_product_attention(*[_heads_view(ln.nested_tensor(x), h) for x in (q, k, v)], **kw)
    assert out._perm == (1, 0, 2)  # rows (L, heads, Ev): transpose(1, 2).flatten(-2) is free
    assert out.nested_size().tolist() == [[h, n, 2] for n in lq]
    for got, a, b, c in zip(out.unbind(), q, k, v):
        a, b, c = (_dense(torch.as_tensor(_np(x)), h) for x in (a, b, c))
        want = F.scaled_dot_product_attention(a, b, c, **kw) if b.shape[1] else torch.zeros(h, a.shape[1], 2)
        np.testing.assert_allclose(_np(got), want.numpy(), rtol=2e-5, atol=2e-5)


def test_sdpa_over_rows_gradients_match_per_sequence():
    lq = [3, 5, 1, 0, 5, 2]
    leaves = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in _parts(8, lq, 12, dtype=np.float64)]
    x = ln.as_nested_tensor(leaves)
    q, k, v = (_heads_view(t, 3) for t in ln.chunk(ln.linear(x, torch.eye(12, dtype=torch.float64).repeat(3, 1)),
                                                     3, -1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(-2)
    (out.values() ** 2).sum().backward()
    got = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    total = 0
    for leaf in leaves:
        if leaf.shape[0]:
            d = _dense(leaf, 3)
            total = total + (F.scaled_dot_product_attention(d, d, d, is_causal=True) ** 2).sum()
    total.backward()
    for a, leaf in zip(got, leaves):
        torch.testing.assert_close(a, leaf.grad if leaf.grad is not None else torch.zeros_like(leaf))


def test_sdpa_over_rows_gradcheck():
    offsets = np.array([0, 2, 2, 5, 6])

    def f(a, b, c):
        q, k, v = (_heads_view(ln.nested_tensor_from_jagged(t, offsets), 2) for t in (a, b, c))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(-2).values()

    args = [torch.randn(6, 4, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    assert torch.autograd.gradcheck(f, args)


class TutorialMHA(torch.nn.Module):
    """The MultiHeadAttention of torch's transformer-building-blocks tutorial (packed projection)."""

    def __init__(self, e, heads):
        super().__init__()
        self.heads = heads
        self.packed_proj = torch.nn.Linear(e, 3 * e)
        self.out_proj = torch.nn.Linear(e, e)

    def forward(self, x, is_causal=False):
        q, k, v = torch.chunk(self.packed_proj(x), 3, dim=-1)
        q, k, v = (t.unflatten(-1, [self.heads, -1]).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return self.out_proj(out.transpose(1, 2).flatten(-2))


def test_tutorial_mha_matches_padded_multihead_attention():
    torch.manual_seed(0)
    lens = np.array([7, 1, 12, 3, 12, 5])
    e, heads = 16, 4
    data = torch.randn(int(lens.sum()), e, dtype=torch.float64)
    ours = TutorialMHA(e, heads).double()
    ref = torch.nn.MultiheadAttention(e, heads, batch_first=True).double()
    with torch.no_grad():
        ours.packed_proj.weight.copy_(ref.in_proj_weight)
        ours.packed_proj.bias.copy_(ref.in_proj_bias)
        ours.out_proj.weight.copy_(ref.out_proj.weight)
        ours.out_proj.bias.copy_(ref.out_proj.bias)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    out = ours(ln.nested_tensor_from_jagged(data, offsets))
    padded = ln.to_padded_tensor(ln.nested_tensor_from_jagged(data, offsets), 0.0)
    mask = torch.arange(int(lens.max()))[None] >= torch.from_numpy(lens)[:, None]
    want, _ = ref(padded, padded, padded, key_padding_mask=mask, need_weights=False)
    got = ln.to_padded_tensor(out, 0.0)
    valid = ~mask
    torch.testing.assert_close(got[valid], want[valid])
    got[valid].pow(2).sum().backward()
    want[valid].pow(2).sum().backward()
    for a, b in [(ours.packed_proj.weight, ref.in_proj_weight), (ours.packed_proj.bias, ref.in_proj_bias),
                 (ours.out_proj.weight, ref.out_proj.weight), (ours.out_proj.bias, ref.out_proj.bias)]:
        torch.testing.assert_close(a.grad, b.grad)


def test_grouped_matmul_gradients_with_many_shapes():
    """The tutorial's older MHA (matmul, softmax, matmul on (B, heads, (L), (L)) scores): grouped work
    records no per-group writes, and its gradients match the per-sequence computation."""
    lens = [4, 1, 6, 2, 6, 3]
    leaves = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in _parts(9, lens, 6, dtype=np.float64)]
    q = _heads_view(ln.as_nested_tensor(leaves), 2)
    out = torch.matmul(torch.softmax(torch.matmul(q, q.transpose(-1, -2)), -1), q).transpose(1, 2).flatten(-2)
    (out.values() ** 2).sum().backward()
    got = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    total = 0
    for leaf in leaves:
        d = _dense(leaf, 2)
        total = total + ((torch.softmax(d @ d.transpose(-1, -2), -1) @ d) ** 2).sum()
    total.backward()
    for a, leaf in zip(got, leaves):
        torch.testing.assert_close(a, leaf.grad)


@pytest.mark.gpu
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_over_rows_on_cuda_matches_per_sequence(is_causal):
    """The row attention on CUDA data: host-derived indices reach the device through the backend (no mixing),
    values and gradients as the per-sequence dense computation."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    g = np.random.default_rng(10)
    leaves = [torch.tensor(g.standard_normal((n, 12)), device="cuda", requires_grad=True)
              for n in g.integers(0, 20, 17)]
    x = ln.as_nested_tensor(leaves)
    q, k, v = (_heads_view(t, 3) for t in ln.chunk(ln.linear(x, torch.eye(12, device="cuda",
                                                                             dtype=torch.float64).repeat(3, 1)), 3, -1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).transpose(1, 2).flatten(-2)
    assert out.values().device.type == "cuda"
    (out.values() ** 2).sum().backward()
    got = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    total = 0
    for leaf in leaves:
        if leaf.shape[0]:
            d = _dense(leaf, 3)
            total = total + (F.scaled_dot_product_attention(d, d, d, is_causal=is_causal) ** 2).sum()
    total.backward()
    for a, leaf in zip(got, leaves):
        torch.testing.assert_close(a, leaf.grad if leaf.grad is not None else torch.zeros_like(leaf))
