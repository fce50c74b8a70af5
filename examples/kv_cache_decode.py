"""Decoding a ragged batch against a preallocated KV cache, with nested views of the cache (torch data).

A decoder keeps keys and values in dense caches ``(batch, max_len, heads * head_dim)`` and writes one new
row per sequence at each step. ``lodtensor.nested.narrow(cache, 1, 0, lengths, layout="jagged")`` is a
nested tensor over the first ``lengths[b]`` rows of each sequence: a view of the cache with holes, as
torch's. Views of it (``unflatten`` into heads, ``transpose``) stay views of the cache: a write into the cache
after they were made shows in them, so the prompt's keys can be written after the views were set up, and
attention reads what the cache holds. Each step compares with attention computed sequence by sequence on
dense tensors.

Run: python examples/kv_cache_decode.py
"""

import torch
import torch.nn.functional as F

import lodtensor.nested as ln

torch.manual_seed(0)
B, H, DH, MAX_LEN = 3, 2, 4, 12
E = H * DH
prompt = torch.tensor([5, 2, 7])
wq, wk, wv = (torch.randn(E, E) / E**0.5 for _ in range(3))

cache_k = torch.zeros(B, MAX_LEN, E)
cache_v = torch.zeros(B, MAX_LEN, E)


def heads(cache, lengths):
    """The first ``lengths[b]`` rows of each sequence of the cache, as ``(B, heads, (L), head_dim)``: views."""
    rows = ln.narrow(cache, 1, 0, lengths, layout="jagged")
    return rows.unflatten(-1, (H, DH)).transpose(1, 2)


def attend(x, lengths):
    """One query row per sequence (``x``: ``(B, E)``) against the cached keys and values."""
    q = ln.nested_tensor_from_jagged(x @ wq.T, offsets=torch.arange(B + 1))
    q = q.unflatten(-1, (H, DH)).transpose(1, 2)
    out = ln.scaled_dot_product_attention(q, heads(cache_k, lengths), heads(cache_v, lengths))
    return out.transpose(1, 2).flatten(-2)


def dense_reference(x, lengths):
    rows = []
    for b in range(B):
        n = int(lengths[b])
        q = (x[b] @ wq.T).view(1, H, DH).transpose(0, 1)
        k = cache_k[b, :n].view(n, H, DH).transpose(0, 1)
        v = cache_v[b, :n].view(n, H, DH).transpose(0, 1)
        rows.append(F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(1, E))
    return rows


# prefill: the views of the prompt's rows are made first, the cache is written after
keys_view = heads(cache_k, prompt)
tokens = torch.randn(B, MAX_LEN, E)
cache_k[:, : int(prompt.max())] = tokens[:, : int(prompt.max())] @ wk.T
cache_v[:, : int(prompt.max())] = tokens[:, : int(prompt.max())] @ wv.T
seen = torch.cat([part.transpose(0, 1).reshape(-1, E) for part in keys_view.unbind()])
want = torch.cat([cache_k[b, : int(prompt[b])] for b in range(B)])
assert torch.equal(seen, want), "the view made before the write does not see it"
print("prefill: the views made before the cache was written read", tuple(seen.shape), "rows of keys")

# decode: one new row per sequence, written into the cache; attention over the grown sequences
lengths = prompt.clone()
x = torch.randn(B, E)
for step in range(4):
    batch = torch.arange(B)
    cache_k[batch, lengths] = x @ wk.T
    cache_v[batch, lengths] = x @ wv.T
    lengths = lengths + 1
    out = attend(x, lengths)
    for got, expected in zip(out.unbind(), dense_reference(x, lengths)):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    print(f"step {step}: lengths {lengths.tolist()}, output sizes {out.nested_size().tolist()}")
    x = torch.tanh(torch.cat(out.unbind()))
print("every step matches attention over dense tensors, sequence by sequence")
