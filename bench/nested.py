"""lodtensor.nested against torch.nested (strided and jagged) and NumPy by hand.

Workloads (float32, D=256, fixed seed):

- ``256 x 1-672``: 256 sequences of 1..672 rows (about 86K rows, 84 MiB);
- ``2266 x 1-64``: 2,266 sequences of 1..64 rows (about 74K rows, 72 MiB);
- ``images``: 48 images 3 x H x W, H and W in 16..96 (ragged in two dims).

Ops: ``to_padded_tensor``, ``softmax`` over the ragged dim (components
``(L, heads)`` with 1 and 8 heads), ``linear`` (256 -> 256 with bias),
``layer_norm`` (over D, no affine), ``gelu``, ``relu``, ``mean`` over the ragged
dim (pooling each sequence; torch's jagged layout only) and ``unbind``.
Jagged torch nested tensors are built with ``min_seqlen``/``max_seqlen``
(without them their reductions fall into a slow path). "flat buffer" rows run
the same NumPy call on the flat ``(rows, D)`` array: the floor the nested op
can reach.

"lodtensor.nested, torch backend" rows run the same lodtensor call on a nested
tensor over torch memory (the torch backend: torch's own kernels on the flat
buffer).

Goals: faster than torch.nested (strided and jagged) on every op; ``linear``
within 1.1x of the same GEMM on the flat buffer; elementwise ops within 1.1x
of the same call on the flat buffer; ``unbind`` at most 0.5 us per component.

Multi-head attention, forward + backward (#27): the MultiHeadAttention module
of torch's transformer-building-blocks tutorial (packed projection, chunk,
unflatten, transpose, SDPA, transpose, flatten, out projection) on a
lodtensor nested tensor of torch data, against ``nn.MultiheadAttention`` on
the padded batch with a key padding mask (what a PyTorch user writes without
nested tensors), on the tutorial's batch (512 Zipf-length sentences, about
11K tokens, E=512, 8 heads) and on 256 sequences of 1-149 tokens (E=256, 8
heads). torch 2.13's jagged layout has no CPU kernel for this SDPA ("No viable
backend"), so it is listed, not timed. ``BENCH_MHA_ROUNDS`` interleaved rounds
(default 5; each round times every contender once, after a warm-up call);
medians with their min..max spread. Goal: lodtensor at or under the padded
module.
"""

import os
import warnings

import _common
import numpy as np

TITLE = "nested: lodtensor.nested vs torch.nested"

CASES = [
    {"name": "256 x 1-672", "sequences": 256, "max_len": 672, "seed_offset": 31},
    {"name": "2266 x 1-64", "sequences": 2266, "max_len": 64, "seed_offset": 32},
]
WIDTH = 256
FAST = {"budget": 0.3}
MHA_ROUNDS = int(os.environ.get("BENCH_MHA_ROUNDS", "5"))
MHA_CASES = [
    {"name": "tutorial batch: 512 Zipf sentences, E=512, 8 heads", "sequences": 512, "width": 512, "heads": 8,
     "zipf": True},
    {"name": "256 x 1-149 tokens, E=256, 8 heads", "sequences": 256, "width": 256, "heads": 8, "max_len": 149},
]
SLOW = {"budget": 0.3, "min_repeat": 2}  # torch strided padding / softmax take ~1 s a call


def _workload(case):
    g = _common.rng(case["seed_offset"])
    lengths = g.integers(1, case["max_len"] + 1, size=case["sequences"]).astype(np.int64)
    data = g.standard_normal((int(lengths.sum()), WIDTH), dtype=np.float32)
    return data, lengths, _common.offsets_of(lengths)


def _close(ref, rtol=1e-4, atol=1e-4):
    """A check that compares a result with ``ref`` (a NestedTensor) on a few components.

    Results may be nested tensors (ours or torch's), padded arrays or flat
    ``(rows, ...)`` arrays; comparing four components keeps the check cheap
    next to the op it checks.
    """
    parts = ref.unbind()
    n = len(parts)
    picks = sorted({0, 1 % n, n // 2, n - 1})
    bounds = np.cumsum([0] + [len(p) for p in parts]) if ref.dim() > 1 else None

    def check(x):
        if isinstance(x, tuple):
            x = x[0]
        if getattr(x, "is_nested", False):
            got = x.unbind()
            got = [got[i] for i in picks]
        elif bounds is not None and x.shape[0] == bounds[-1] and x.ndim == parts[0].ndim:
            got = [x[bounds[i]:bounds[i + 1]] for i in picks]  # flat rows
        else:
            got = [x[i][tuple(slice(0, s) for s in parts[i].shape)] for i in picks]  # padded
        for i, g in zip(picks, got):
            g = g.detach().numpy() if hasattr(g, "detach") else np.asarray(g)
            np.testing.assert_allclose(g, parts[i], rtol=rtol, atol=atol)

    return check


def _torch_pair(torch, values, lengths, offsets):
    """(strided, jagged) torch nested tensors over ``values``."""
    tv = torch.from_numpy(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        strided = torch.nested.nested_tensor(list(tv.split(lengths.tolist())))
    jagged = torch.nested.nested_tensor_from_jagged(
        tv, torch.from_numpy(offsets), min_seqlen=int(lengths.min()), max_seqlen=int(lengths.max())
    )
    return strided, jagged


def _segment_softmax_by_hand(x, offsets, lengths):
    peak = np.maximum.reduceat(x, offsets[:-1], axis=0)
    e = np.exp(x - np.repeat(peak, lengths, axis=0))
    return e / np.repeat(np.add.reduceat(e, offsets[:-1], axis=0), lengths, axis=0)


def _layer_norm_by_hand(x, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    centred = x - mean
    return centred / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + eps)


def _add_copy_limit(table, like):
    src, dst = np.ones_like(like), np.empty_like(like)
    table.add("memory-copy limit (np.copyto)", lambda: np.copyto(dst, src), note="output bytes, preallocated", **FAST)


def _softmax_table(report, case, ln, torch, heads, rows, lengths, offsets, goals):
    n = lengths.size
    scores = _common.rng(case["seed_offset"] + heads).standard_normal((rows, heads), dtype=np.float32)
    snt = ln.nested_tensor_from_jagged(scores, offsets)
    check = _close(ln.softmax(snt, 1), 1e-5, 1e-6)
    table = report.table(f"softmax over the ragged dim, {heads} head(s), {case['name']}",
                         f"components (L, {heads}) float32, {n} sequences, {rows} rows", reference="lodtensor.nested")
    table.add("lodtensor.nested", lambda: ln.softmax(snt, 1), check=check, **FAST)
    table.add("NumPy by hand (reduceat + repeat)", lambda: _segment_softmax_by_hand(scores, offsets, lengths),
              check=check, **FAST)
    if torch is None:
        table.missing("torch.nested strided")
        table.missing("torch.nested jagged")
    else:
        s_strided, s_jagged = _torch_pair(torch, scores, lengths, offsets)
        note = f"{torch.get_num_threads()} threads"
        s_ours = ln.nested_tensor_from_jagged(torch.from_numpy(scores), offsets)
        table.add("lodtensor.nested, torch backend", lambda: ln.softmax(s_ours, 1), check=check, note=note, **FAST)
        table.add("torch.nested strided", lambda: torch.softmax(s_strided, 1), check=check, note=note, **SLOW)
        table.add("torch.nested jagged", lambda: torch.softmax(s_jagged, 1), check=check,
                  note=note + "; min/max_seqlen", **FAST)
    goals(table, f"softmax ({heads} heads)")
    if torch is not None:
        import _nested_training  # noqa: PLC0415

        _nested_training.softmax_table(report, case, ln, torch, heads, scores, lengths, offsets, FAST)


def run_case(report, case, ln, torch):
    F = torch.nn.functional if torch is not None else None  # noqa: N806
    data, lengths, offsets = _workload(case)
    n, rows = lengths.size, data.shape[0]
    nt = ln.nested_tensor_from_jagged(data, offsets)
    workload = (f"{case['name']}: {rows} rows x {WIDTH} float32 in {n} sequences (lengths 1..{case['max_len']}), "
                f"{_common.describe_sizes(data.nbytes)}")
    report.facts[case["name"]] = {"rows": rows, "sequences": n, "width": WIDTH}
    strided = jagged = nt_torch = None
    if torch is not None:
        strided, jagged = _torch_pair(torch, data, lengths, offsets)
        torch_note = f"{torch.get_num_threads()} threads"
        nt_torch = ln.nested_tensor_from_jagged(torch.from_numpy(data), offsets)  # the torch backend, same memory

    def contenders(table, ours, flat, by_hand, torch_fn, check, slow=False, ours_torch=None):
        table.add("lodtensor.nested", ours, check=check, **FAST)
        if ours_torch is not None and nt_torch is not None:
            table.add("lodtensor.nested, torch backend", lambda: ours_torch(nt_torch), check=check,
                      note=torch_note, **FAST)
        if flat is not None:
            table.add("same call on the flat buffer", flat, check=check, **FAST)
        if by_hand is not None:
            table.add("NumPy by hand", by_hand, check=check, **FAST)
        if torch is None:
            table.missing("torch.nested strided")
            table.missing("torch.nested jagged")
            return
        table.add("torch.nested strided", lambda: torch_fn(strided), check=check, note=torch_note,
                  **(SLOW if slow else FAST))
        table.add("torch.nested jagged", lambda: torch_fn(jagged), check=check, note=torch_note + "; min/max_seqlen",
                  **(SLOW if slow else FAST))

    def goals(table, op, flat_ratio=None):
        table.finish()
        ours = table._best("lodtensor.nested")
        for layout in ("strided", "jagged"):
            theirs = table._best(f"torch.nested {layout}")
            if theirs is None:
                report.goal(f"{case['name']}: {op} faster than torch.nested {layout}", None, "not measured")
            else:
                report.goal(f"{case['name']}: {op} faster than torch.nested {layout}", ours < theirs,
                            f"torch / lodtensor = {theirs / ours:.2f}")
        on_torch = table._best("lodtensor.nested, torch backend")
        theirs = table._best("torch.nested jagged")
        if on_torch is not None and theirs is not None:
            report.goal(f"{case['name']}: {op}, torch backend, faster than torch.nested jagged", on_torch < theirs,
                        f"torch / lodtensor = {theirs / on_torch:.2f}")
        if flat_ratio is not None:
            flat = table._best("same call on the flat buffer")
            report.goal(f"{case['name']}: {op} within {flat_ratio}x of the flat-buffer call", ours <= flat_ratio * flat,
                        f"lodtensor / flat = {ours / flat:.2f}")

    # -- to_padded_tensor ----------------------------------------------------------------------
    ref = ln.to_padded_tensor(nt, 0.0)
    table = report.table(f"to_padded_tensor, {case['name']}", workload, reference="lodtensor.nested",
                         limit="memory-copy limit (np.copyto)")
    shape = ref.shape
    _add_copy_limit(table, ref)
    del ref

    def pad_by_hand():
        out = np.zeros(shape, np.float32)
        out[np.arange(shape[1]) < lengths[:, None]] = data
        return out

    contenders(table, lambda: ln.to_padded_tensor(nt, 0.0), None, pad_by_hand,
               lambda x: torch.nested.to_padded_tensor(x, 0.0), _close(nt, 0, 0), slow=True,
               ours_torch=lambda x: ln.to_padded_tensor(x, 0.0))
    goals(table, "to_padded_tensor")

    # -- softmax over the ragged dim -------------------------------------------------------------
    for heads in (1, 8):
        _softmax_table(report, case, ln, torch, heads, rows, lengths, offsets, goals)

    # -- linear ---------------------------------------------------------------------------------
    g = _common.rng(case["seed_offset"] + 100)
    weight = (g.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 16).astype(np.float32)
    bias = g.standard_normal(WIDTH, dtype=np.float32)
    ref = ln.linear(nt, weight, bias)

    def flat_linear():
        out = np.matmul(data, weight.T)
        out += bias
        return out

    check_flat = _close(ref, 1e-4, 1e-4)
    table = report.table(f"linear 256 -> 256 with bias, {case['name']}", workload, reference="lodtensor.nested")
    tw, tb = (torch.from_numpy(weight), torch.from_numpy(bias)) if torch is not None else (None, None)
    contenders(table, lambda: ln.linear(nt, weight, bias), flat_linear, None, lambda x: F.linear(x, tw, tb),
               check_flat, ours_torch=lambda x: ln.linear(x, tw, tb))
    goals(table, "linear", flat_ratio=1.1)
    del ref

    # -- layer_norm -----------------------------------------------------------------------------
    ref = ln.layer_norm(nt, WIDTH)
    table = report.table(f"layer_norm over D, {case['name']}", workload, reference="lodtensor.nested")
    ones, zeros = (torch.ones(WIDTH), torch.zeros(WIDTH)) if torch is not None else (None, None)
    contenders(table, lambda: ln.layer_norm(nt, WIDTH), None, lambda: _layer_norm_by_hand(data),
               lambda x: F.layer_norm(x, (WIDTH,), ones, zeros), _close(ref, 1e-4, 1e-4),
               ours_torch=lambda x: ln.layer_norm(x, WIDTH))
    goals(table, "layer_norm")
    del ref

    # -- elementwise ----------------------------------------------------------------------------
    from lodtensor.backend.numpy import _special  # noqa: PLC0415 - the same NumPy gelu on the flat buffer

    scipy_special = _common.optional("scipy.special")
    erf_by_hand = None
    if scipy_special is not None:
        def erf_by_hand():
            return 0.5 * data * (1 + scipy_special.erf(data * np.float32(0.7071067811865476)))

    for op, ours, flat, by_hand, theirs in [
        ("gelu", ln.gelu, lambda: _special.gelu(data), erf_by_hand, F.gelu if F is not None else None),
        ("relu", ln.relu, lambda: np.maximum(data, 0), None, torch.relu if torch is not None else None),
    ]:
        ref = ours(nt)
        table = report.table(f"{op}, {case['name']}", workload, reference="lodtensor.nested")
        contenders(table, lambda ours=ours: ours(nt), flat, None, theirs, _close(ref, 1e-5, 1e-5), ours_torch=ours)
        if by_hand is not None:
            table.add("NumPy by hand (scipy.special.erf)", by_hand, check=_close(ref, 1e-5, 1e-5), note="1 thread",
                      **SLOW)
        goals(table, op, flat_ratio=1.1)
        del ref

    # -- mean over the ragged dim (pooling each sequence) -----------------------------------------
    ref = ln.mean(nt, dim=1)

    def pool_by_hand():
        return np.add.reduceat(data, offsets[:-1], axis=0) / lengths[:, None].astype(np.float32)

    table = report.table(f"mean over the ragged dim (pooling), {case['name']}", workload, reference="lodtensor.nested")
    close_dense = lambda out, ref=ref: np.testing.assert_allclose(  # noqa: E731
        out.numpy() if hasattr(out, "numpy") else np.asarray(out), ref, rtol=1e-4, atol=1e-5)
    table.add("lodtensor.nested", lambda: ln.mean(nt, dim=1), check=close_dense, **FAST)
    if nt_torch is not None:
        table.add("lodtensor.nested, torch backend", lambda: ln.mean(nt_torch, dim=1), check=close_dense,
                  note=torch_note, **FAST)
    table.add("NumPy by hand (reduceat)", pool_by_hand, check=close_dense, **FAST)
    table.missing("torch.nested strided", "mean(dim) is not implemented for the strided layout (torch 2.13)")
    if torch is None:
        table.missing("torch.nested jagged")
    else:
        table.add("torch.nested jagged", lambda: jagged.mean(dim=1), check=close_dense,
                  note=torch_note + "; min/max_seqlen", **FAST)
    goals(table, "mean over the ragged dim")
    del ref

    # -- unbind ---------------------------------------------------------------------------------
    table = report.table(f"unbind, {case['name']}", f"{n} components", reference="lodtensor.nested",
                         per=n, unit="us", goal="<= 0.5 us per component")
    table.add("lodtensor.nested", nt.unbind, check=lambda parts: len(parts) == n or None, **FAST)
    bounds = offsets.tolist()
    table.add("NumPy by hand: [data[a:b] for ...]", lambda: [data[a:b] for a, b in zip(bounds, bounds[1:])], **FAST)
    table.add("NumPy np.split", lambda: np.split(data, offsets[1:-1]), **FAST)
    if torch is not None:
        table.add("torch.nested strided", strided.unbind, note=torch_note, **FAST)
        table.add("torch.nested jagged", jagged.unbind, note=torch_note, **FAST)
    goals(table, "unbind")
    per = table._best("lodtensor.nested") / n * 1e6
    report.goal(f"{case['name']}: unbind <= 0.5 us per component", per <= 0.5, f"{per:.2f} us")


def run_images(report, ln, torch):
    g = _common.rng(40)
    shapes = [(3, int(h), int(w)) for h, w in g.integers(16, 97, size=(48, 2))]
    images = [g.standard_normal(s, dtype=np.float32) for s in shapes]
    nt = ln.nested_tensor(images)
    workload = f"48 images 3 x H x W float32, H, W in 16..96 ({_common.describe_sizes(nt.numel() * 4)})"
    strided = None
    if torch is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            strided = torch.nested.nested_tensor([torch.from_numpy(i) for i in images])
    ops = [
        ("to_padded_tensor", lambda x: ln.to_padded_tensor(x, 0.0), lambda x: torch.nested.to_padded_tensor(x, 0.0)),
        ("softmax over W (irregular last dim)", lambda x: ln.softmax(x, -1), lambda x: torch.softmax(x, -1)),
        ("softmax over H (irregular, then irregular W)", lambda x: ln.softmax(x, 2), lambda x: torch.softmax(x, 2)),
        ("transpose(2, 3)", lambda x: x.transpose(2, 3), lambda x: x.transpose(2, 3).contiguous()),
        ("gelu", ln.gelu, torch.nn.functional.gelu if torch is not None else None),
    ]
    for name, ours, theirs in ops:
        ref = ours(nt) if name != "to_padded_tensor" else nt
        table = report.table(f"images: {name}", workload, reference="lodtensor.nested",
                             goal="grouped work per component shape")
        table.add("lodtensor.nested", lambda ours=ours: ours(nt), check=_close(ref, 1e-5, 1e-5), **FAST)
        if strided is None:
            table.missing("torch.nested strided")
        else:
            table.add("torch.nested strided", lambda theirs=theirs: theirs(strided), check=_close(ref, 1e-5, 1e-5),
                      note=f"{torch.get_num_threads()} threads", **FAST)
        table.finish()
        theirs_best = table._best("torch.nested strided")
        if theirs_best is not None:
            ours_best = table._best("lodtensor.nested")
            report.goal(f"images: {name} faster than torch.nested strided", ours_best < theirs_best,
                        f"torch / lodtensor = {theirs_best / ours_best:.2f}")


def _zipf_lengths(g, n, alpha=1.2):
    """The tutorial's sentence lengths: words drawn from Zipf(alpha) until one of ranks 3, 386, 858 (".!?")."""
    out = np.ones(n, dtype=np.int64)
    for i in range(n):
        while g.zipf(alpha) not in (3, 386, 858):
            out[i] += 1
    return out


def _mha_module(torch, width, heads):
    F = torch.nn.functional  # noqa: N806

    class MultiHeadAttention(torch.nn.Module):  # the tutorial's module, self-attention with a packed projection
        def __init__(self):
            super().__init__()
            self.packed_proj = torch.nn.Linear(width, 3 * width)
            self.out_proj = torch.nn.Linear(width, width)

        def forward(self, x):
            q, k, v = torch.chunk(self.packed_proj(x), 3, dim=-1)
            q, k, v = (t.unflatten(-1, [heads, -1]).transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v)
            return self.out_proj(out.transpose(1, 2).flatten(-2))

    return MultiHeadAttention()


def run_mha(report, ln, torch):
    if torch is None:
        return
    for case in MHA_CASES:
        _mha_case(report, ln, torch, case)


def _mha_case(report, ln, torch, case):
    g = _common.rng(70 + case["sequences"])
    lengths = _zipf_lengths(g, case["sequences"]) if case.get("zipf") else g.integers(
        1, case["max_len"] + 1, size=case["sequences"]).astype(np.int64)
    width, heads = case["width"], case["heads"]
    offsets = _common.offsets_of(lengths)
    torch.manual_seed(0)
    data = torch.from_numpy(g.standard_normal((int(lengths.sum()), width), dtype=np.float32))
    nested = ln.nested_tensor_from_jagged(data, offsets)
    ours = _mha_module(torch, width, heads)
    padded_module = torch.nn.MultiheadAttention(width, heads, batch_first=True)
    with torch.no_grad():  # the same weights, as the tutorial does
        ours.packed_proj.weight.copy_(padded_module.in_proj_weight)
        ours.packed_proj.bias.copy_(padded_module.in_proj_bias)
        ours.out_proj.weight.copy_(padded_module.out_proj.weight)
        ours.out_proj.bias.copy_(padded_module.out_proj.bias)
    padded = ln.to_padded_tensor(nested, 0.0)
    pad_mask = torch.arange(int(lengths.max()))[None] >= torch.from_numpy(lengths)[:, None]
    valid = ~pad_mask

    def step_nested():
        out = ours(nested)
        out.values().sum().backward()
        return out

    def step_padded():
        out, _ = padded_module(padded, padded, padded, key_padding_mask=pad_mask, need_weights=False)
        out[valid].sum().backward()
        return out

    # inductor; a graph break at the attention (see lodtensor/nested/_compile.py); BENCH_MHA_COMPILE=0 skips it
    compiled = torch.compile(ours) if os.environ.get("BENCH_MHA_COMPILE", "1") != "0" else None

    def step_compiled():
        out = compiled(nested)
        out.values().sum().backward()
        return out

    contenders = [("lodtensor.nested (tutorial MHA)", step_nested), (
        "padded nn.MultiheadAttention + key_padding_mask", step_padded)]
    if compiled is not None:
        contenders.append(("lodtensor.nested, torch.compile (inductor)", step_compiled))
    # the same numbers (forward), then one warm-up each
    got = step_nested().values().detach()
    want = step_padded()[valid].detach()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-3, atol=2e-4)
    if compiled is not None:
        np.testing.assert_allclose(step_compiled().values().detach().numpy(), got.numpy(), rtol=2e-3, atol=2e-4)
    times = {name: [] for name, _ in contenders}
    for _ in range(MHA_ROUNDS):
        for name, fn in contenders:
            ours.zero_grad(set_to_none=True)
            padded_module.zero_grad(set_to_none=True)
            t = _common.time.perf_counter()
            fn()
            times[name].append(_common.time.perf_counter() - t)
    workload = (f"{case['name']}: {int(lengths.sum())} tokens, longest {int(lengths.max())} (padded to "
                f"{len(lengths)} x {int(lengths.max())}), float32, {torch.get_num_threads()} torch threads")
    table = report.table(f"multi-head attention forward + backward, {case['name']}",
                         f"{workload}; {MHA_ROUNDS} interleaved rounds", reference=contenders[0][0], unit="ms")
    for name, secs in times.items():
        secs = sorted(secs)
        table.add_result(name, secs[0], secs[len(secs) // 2], len(secs),
                         note=f"spread {secs[0] * 1e3:.0f}..{secs[-1] * 1e3:.0f} ms")
    table.missing("torch.nested jagged (same module)", "torch 2.13 has no CPU kernel for jagged SDPA: "
                  "'No viable backend for scaled_dot_product_attention'")
    table.finish()
    ratios = sorted(a / b for a, b in zip(times[contenders[0][0]], times[contenders[1][0]]))
    report.goal(f"MHA fwd+bwd, {case['name']}: lodtensor at or under padded nn.MultiheadAttention",
                ratios[len(ratios) // 2] <= 1.0,
                f"lodtensor / padded per round: median {ratios[len(ratios) // 2]:.2f} "
                f"[{ratios[0]:.2f}-{ratios[-1]:.2f}]")
    if compiled is None:
        return
    eager_vs_compiled = sorted(b / a for a, b in zip(times[contenders[0][0]], times[contenders[2][0]]))
    mid = eager_vs_compiled[len(eager_vs_compiled) // 2]
    report.goal(f"MHA fwd+bwd, {case['name']}: compiled no slower than eager", mid <= 1.05,
                f"compiled / eager per round: median {mid:.2f} "
                f"[{eager_vs_compiled[0]:.2f}-{eager_vs_compiled[-1]:.2f}]")


def run(report):
    import lodtensor.nested as ln  # noqa: PLC0415

    torch = _common.optional("torch")
    before = _common.parallel_speedup()
    if os.environ.get("BENCH_NESTED_ONLY") != "mha":
        for case in CASES:
            run_case(report, case, ln, torch)
        run_images(report, ln, torch)
    run_mha(report, ln, torch)
    after = _common.parallel_speedup()
    report.facts["two_thread_speedup"] = {"before": before, "after": after}
    report.facts["lodtensor_threads"] = ln.get_num_threads()
    if hasattr(report, "notes"):
        report.notes.append(
            f"2-thread speedup of a GIL-free probe: {before:.2f}x before, {after:.2f}x after (2.0 = a second core "
            f"was free). lodtensor.nested uses {ln.get_num_threads()} thread(s) for large NumPy activations and "
            f"layer_norm; torch uses its own pool"
        )
