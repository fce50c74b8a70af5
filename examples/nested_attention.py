"""Self-attention over a ragged batch with lodtensor.nested: no padding, no masks.

Each sequence attends only to itself: the scores of sequence i are an
(L_i, L_i) matrix, so the batch of scores is ragged in two dims. The same
code runs on NumPy arrays and, with gradients, on torch tensors.

Run: python examples/nested_attention.py
"""

import numpy as np

import lodtensor.nested as ln

rng = np.random.default_rng(0)
D = 16
lengths = [5, 1, 9, 3]
seqs = [rng.standard_normal((n, D)).astype(np.float32) for n in lengths]
wq, wk, wv = (rng.standard_normal((D, D)).astype(np.float32) / 4 for _ in range(3))


def attention(x, wq, wk, wv):
    """softmax(Q K^T / sqrt(D)) V for every component of the nested tensor x."""
    q, k, v = ln.linear(x, wq), ln.linear(x, wk), ln.linear(x, wv)
    scores = (q @ k.transpose(1, 2)) * (1.0 / np.sqrt(D))  # components (L_i, L_i)
    return ln.softmax(scores, dim=-1) @ v                   # components (L_i, D)


# -- NumPy: one nested tensor in, one out -------------------------------------------------------
x = ln.nested_tensor(seqs)
out = attention(x, wq, wk, wv)
print("input sizes ", x.nested_size().tolist())
print("score sizes ", (ln.linear(x, wq) @ ln.linear(x, wk).transpose(1, 2)).nested_size().tolist())
print("output sizes", out.nested_size().tolist())


def reference(s):
    q, k, v = s @ wq.T, s @ wk.T, s @ wv.T
    a = q @ k.T / np.sqrt(D)
    a = np.exp(a - a.max(axis=1, keepdims=True))
    return (a / a.sum(axis=1, keepdims=True)) @ v


for got, s in zip(out.unbind(), seqs):
    np.testing.assert_allclose(got, reference(s), rtol=1e-4, atol=1e-5)
print("matches a per-sequence NumPy reference")

# The sequences as a LoDTensor (one flat array + offsets) and back, sharing memory.
flat = out.to_lod_tensor()
print("as a LoDTensor:", flat.lod(), flat.data.shape)

# -- torch: the same function, with autograd ----------------------------------------------------
try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    tq, tk, tv = (torch.from_numpy(w).requires_grad_() for w in (wq, wk, wv))
    xt = ln.nested_tensor([torch.from_numpy(s) for s in seqs])
    loss = sum(c.pow(2).sum() for c in attention(xt, tq, tk, tv).unbind())
    loss.backward()

    # the same loss, one dense sequence at a time
    tq2, tk2, tv2 = (torch.from_numpy(w).requires_grad_() for w in (wq, wk, wv))
    dense = 0
    for s in seqs:
        s = torch.from_numpy(s)
        a = torch.softmax((s @ tq2.T) @ (s @ tk2.T).T / np.sqrt(D), dim=1)
        dense = dense + (a @ (s @ tv2.T)).pow(2).sum()
    dense.backward()
    for mine, theirs in ((tq, tq2), (tk, tk2), (tv, tv2)):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)
    print(f"torch: loss {loss.item():.4f}, gradients match the per-sequence computation")

    # -- the transformer tutorials' multi-head attention: views, fused attention per length group, compile ----
    import torch.nn.functional as F  # noqa: N812

    class MultiHeadAttention(torch.nn.Module):
        """torch's transformer-building-blocks MultiHeadAttention (packed projection), unchanged."""

        def __init__(self, e, heads):
            super().__init__()
            self.heads = heads
            self.packed_proj = torch.nn.Linear(e, 3 * e)
            self.out_proj = torch.nn.Linear(e, e)

        def forward(self, x):
            q, k, v = torch.chunk(self.packed_proj(x), 3, dim=-1)
            # (B, (L), E) -> (B, (L), heads, E/heads) -> (B, heads, (L), E/heads): views, no copy
            q, k, v = (t.unflatten(-1, [self.heads, -1]).transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v)  # per group of equal lengths, no padding
            return self.out_proj(out.transpose(1, 2).flatten(-2))

    torch.manual_seed(0)
    mha = MultiHeadAttention(D, 4)
    xt = ln.nested_tensor([torch.from_numpy(s) for s in seqs])
    B, S, E = xt.shape  # S is the ragged dim: printed j<k>, as torch's jagged layout prints it
    out = mha(xt)

    # the same weights in nn.MultiheadAttention on the padded batch with a key padding mask
    ref = torch.nn.MultiheadAttention(D, 4, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(mha.packed_proj.weight)
        ref.in_proj_bias.copy_(mha.packed_proj.bias)
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    padded = ln.to_padded_tensor(xt, 0.0)
    pad = torch.arange(max(lengths))[None] >= torch.tensor(lengths)[:, None]
    want, _ = ref(padded, padded, padded, key_padding_mask=pad, need_weights=False)
    torch.testing.assert_close(ln.to_padded_tensor(out, 0.0)[~pad], want[~pad], rtol=1e-4, atol=1e-5)
    print(f"multi-head attention on shape ({B}, {S}, {E}): matches padded nn.MultiheadAttention")

    compiled = torch.compile(mha, backend="aot_eager")  # two graphs, one on each side of the attention
    torch.testing.assert_close(compiled(xt).values(), out.values())
    print("torch.compile: the same numbers")
