"""lodtensor.nested's jagged-layout ops beyond torch.nested's table, against torch.nested jagged.

Same data as ``bench/nested.py`` (float32, D=256; 256 sequences of 1-672 rows
and 2,266 of 1-64): pointwise ops from the tables (exp, tanh, sigmoid, erf,
maximum of two nested tensors, ``nt + bias``), ``log_softmax`` over D,
``max`` over the ragged dim (values and indices) and ``argmax`` over D, on
the NumPy backend and on the torch backend. "flat buffer" rows run the same
NumPy call on the flat ``(rows, D)`` array (the floor).

``scaled_dot_product_attention`` (2,266 sequences of 1-64, 4 heads of 64):
lodtensor.nested on NumPy (one blocked pass per length group) and on torch
(torch's SDPA per length group) against torch's jagged SDPA and a padded
``F.scaled_dot_product_attention`` with a boolean key mask.

Tensors with holes (``narrow`` of a padded cache): ``nt * 2``, ``sin`` and ``softmax`` over D, against torch's
jagged layout with the same holes and against the same ops after ``contiguous()`` (no goal: the figures say what
keeping torch's layout costs); ``sum`` over the ragged dim (NumPy values: a gather of the rows per read, as the
tensor is a view of them; torch's needs ``contiguous()`` first).

Goals: on the torch backend at most 1.05x of torch.nested jagged; on NumPy
faster than torch.nested jagged except the transcendental ops NumPy has no
kernel for (erf).
"""

import warnings

import _common
import numpy as np
from nested import CASES, FAST, WIDTH, _workload  # the same data as bench/nested.py

TITLE = "nested ops: the jagged surface beyond torch.nested's table"


def _values(x):
    """A result as flat NumPy values (nested: its buffer rows; dense: itself; tuples: the first item)."""
    if isinstance(x, tuple):
        x = x[0]
    if getattr(x, "is_nested", False):
        x = x.values()
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _check(ref, rtol=1e-4, atol=1e-5):
    want = _values(ref)

    def check(x):
        np.testing.assert_allclose(_values(x).reshape(want.shape), want, rtol=rtol, atol=atol)

    return check


def _goals(report, table, label, numpy_must_win=True):
    table.finish()
    theirs = table._best("torch.nested jagged")
    if theirs is None:
        return
    ours = table._best("lodtensor.nested")
    on_torch = table._best("lodtensor.nested, torch backend")
    if on_torch is not None:
        report.goal(f"{label}: torch backend within 1.05x of torch.nested jagged", on_torch <= 1.05 * theirs,
                    f"lodtensor / torch = {on_torch / theirs:.2f}")
    if ours is not None and numpy_must_win:
        report.goal(f"{label}: NumPy backend faster than torch.nested jagged", ours < theirs,
                    f"torch / lodtensor = {theirs / ours:.2f}")


def run_case(report, case, ln, torch):
    data, lengths, offsets = _workload(case)
    n, rows = lengths.size, data.shape[0]
    nt = ln.nested_tensor_from_jagged(data, offsets)
    other = ln.nested_tensor_from_jagged(data[::-1].copy(), offsets)
    bias = np.linspace(-1, 1, WIDTH, dtype=np.float32)
    workload = f"{case['name']}: {rows} rows x {WIDTH} float32 in {n} sequences"
    jagged = jagged_other = ours_t = ours_t_other = tbias = None
    if torch is not None:
        tv = torch.from_numpy(data)
        jagged = torch.nested.nested_tensor_from_jagged(tv, torch.from_numpy(offsets),
                                                        min_seqlen=int(lengths.min()), max_seqlen=int(lengths.max()))
        jagged_other = torch.nested.nested_tensor_from_jagged(torch.from_numpy(other.values()), jagged.offsets())
        ours_t = ln.nested_tensor_from_jagged(tv, offsets)
        ours_t_other = ln.nested_tensor_from_jagged(torch.from_numpy(other.values()), offsets)
        tbias = torch.from_numpy(bias)
    scipy_special = _common.optional("scipy.special")
    ops = [
        # label, ours(nt, other, bias), flat numpy, torch(x, y, b), numpy must win
        ("exp", lambda x, y, b: ln.exp(x), lambda: np.exp(data), lambda x, y, b: torch.exp(x), True),
        ("tanh", lambda x, y, b: ln.tanh(x), lambda: np.tanh(data), lambda x, y, b: torch.tanh(x), True),
        ("sigmoid", lambda x, y, b: ln.sigmoid(x), None, lambda x, y, b: torch.sigmoid(x), True),
        ("erf", lambda x, y, b: ln.erf(x), (lambda: scipy_special.erf(data)) if scipy_special else None,
         lambda x, y, b: torch.erf(x), False),
        ("maximum(nt, nt)", lambda x, y, b: ln.maximum(x, y), lambda: np.maximum(data, other.values()),
         lambda x, y, b: torch.maximum(x, y), True),
        ("nt + bias", lambda x, y, b: x + b, lambda: data + bias, lambda x, y, b: x + b, True),
        ("log_softmax over D", lambda x, y, b: ln.log_softmax(x, -1), None,
         lambda x, y, b: torch.log_softmax(x, -1), True),
        ("max over the ragged dim", lambda x, y, b: ln.max(x, 1), None, lambda x, y, b: torch.max(x, 1), True),
        ("argmax over D", lambda x, y, b: ln.argmax(x, -1), lambda: data.argmax(-1),
         lambda x, y, b: torch.argmax(x, -1), True),
    ]
    for label, ours, flat, theirs, must_win in ops:
        ref = ours(nt, other, bias)
        check = _check(ref)
        table = report.table(f"{label}, {case['name']}", workload, reference="lodtensor.nested")
        table.add("lodtensor.nested", lambda ours=ours: ours(nt, other, bias), check=check, **FAST)
        if flat is not None:
            table.add("same call on the flat buffer (NumPy)", flat, check=check, **FAST)
        if torch is None:
            table.missing("torch.nested jagged")
        else:
            note = f"{torch.get_num_threads()} threads"
            table.add("lodtensor.nested, torch backend", lambda ours=ours: ours(ours_t, ours_t_other, tbias),
                      check=check, note=note, **FAST)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table.add("torch.nested jagged", lambda theirs=theirs: theirs(jagged, jagged_other, tbias),
                          check=check, note=note + "; min/max_seqlen", **FAST)
        _goals(report, table, f"{case['name']}: {label}", must_win)
        del ref


def run_sdpa(report, ln, torch):
    case = CASES[1]
    g = _common.rng(50)
    heads, head_dim = 4, 64
    lengths = g.integers(1, case["max_len"] + 1, size=case["sequences"]).astype(np.int64)
    offsets = _common.offsets_of(lengths)
    rows = int(lengths.sum())
    values = g.standard_normal((rows, heads, head_dim), dtype=np.float32)  # torch's (B, (L), H, E) layout
    # ours: components (H, L, E), built once by the layout change torch's SDPA does itself
    q = ln.nested_tensor_from_jagged(values, offsets).transpose(1, 2)
    ref = ln.scaled_dot_product_attention(q, q, q)
    workload = f"{case['sequences']} sequences of 1-{case['max_len']}, {heads} heads x {head_dim}, float32"
    table = report.table("scaled_dot_product_attention", workload, reference="lodtensor.nested")
    keep = None

    def as_rows(x):  # every contender's result as (rows, H, E) NumPy
        if isinstance(x, ln.NestedTensor):
            return _values(x.transpose(1, 2))
        if getattr(x, "is_nested", False):
            return _values(x.transpose(1, 2).values())
        return x.transpose(1, 2)[keep].numpy()

    want = as_rows(ref)

    def check(x):
        np.testing.assert_allclose(as_rows(x), want, rtol=1e-4, atol=1e-4)

    table.add("lodtensor.nested", lambda: ln.scaled_dot_product_attention(q, q, q), check=check, **FAST)
    if torch is None:
        table.missing("torch.nested jagged")
        table.finish()
        return
    note = f"{torch.get_num_threads()} threads"
    qt = q.to_torch()
    table.add("lodtensor.nested, torch backend", lambda: ln.scaled_dot_product_attention(qt, qt, qt), check=check,
              note=note, **FAST)
    jag = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values), torch.from_numpy(offsets),
                                                 min_seqlen=1, max_seqlen=int(lengths.max())).transpose(1, 2)
    F = torch.nn.functional  # noqa: N806

    def jagged_sdpa():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return F.scaled_dot_product_attention(jag, jag, jag)

    table.add("torch.nested jagged", jagged_sdpa, check=check, note=note, **FAST)
    longest = int(lengths.max())
    padded = torch.zeros(lengths.size, longest, heads, head_dim)
    keep = torch.arange(longest)[None, :] < torch.from_numpy(lengths)[:, None]
    padded[keep] = torch.from_numpy(values)
    padded = padded.transpose(1, 2).contiguous()
    mask = keep[:, None, None, :]

    def padded_sdpa():
        return F.scaled_dot_product_attention(padded, padded, padded, attn_mask=mask)

    table.add("torch padded SDPA + key mask", padded_sdpa, check=check, note=note + "; padding not timed", **FAST)
    _goals(report, table, "scaled_dot_product_attention", numpy_must_win=False)
    ours_np, padded_best = table._best("lodtensor.nested"), table._best("torch padded SDPA + key mask")
    if ours_np is not None and padded_best is not None:
        report.goal("SDPA (NumPy) against padded torch SDPA with a mask", ours_np < padded_best,
                    f"torch / lodtensor = {padded_best / ours_np:.2f}")


def run_holes(report, ln, torch):
    """Elementwise ops on a tensor with holes (``narrow`` of a ``[64, 512, 256]`` cache, lengths 1..512): as
    torch's they compute over all of values and keep the holes (the result's buffer gathered only on a read that
    needs it); the "contiguous() first" rows are the same ops on a copy without the holes."""
    g = _common.rng(60)
    base = g.standard_normal((64, 512, WIDTH), dtype=np.float32)
    starts, lengths = np.zeros(64, dtype=np.int64), g.integers(1, 513, 64)
    workload = f"narrow of [64, 512, {WIDTH}] float32, lengths 1..512 ({int(lengths.sum())} of {64 * 512} rows)"
    holes = {"lodtensor.nested": ln.narrow(base, 1, starts, lengths, layout="jagged")}
    if torch is not None:
        tb, ts, tl = torch.from_numpy(base), torch.from_numpy(starts), torch.from_numpy(lengths)
        holes["lodtensor.nested, torch backend"] = ln.narrow(tb, 1, ts, tl, layout="jagged")
        holes["torch.nested jagged"] = torch.nested.narrow(tb, 1, ts, tl, layout=torch.jagged)
    compact = {f"{name}, contiguous() first": nt.contiguous() for name, nt in holes.items() if "lodtensor" in name}
    ops = (("nt * 2", lambda x: x * 2), ("sin", lambda x: x.sin()), ("softmax over D", lambda x: x.softmax(-1)))
    for label, op in ops:
        table = report.table(f"{label}, a tensor with holes", workload, reference="lodtensor.nested")
        check = _check(op(holes["lodtensor.nested"]))
        for name, nt in holes.items():
            table.add(name, lambda nt=nt, op=op: op(nt), check=check, **FAST)
        for name, nt in compact.items():
            table.add(name, lambda nt=nt, op=op: op(nt), **FAST)
        table.finish()
    # over the ragged dim: NumPy values count no writes, so each read gathers the components' rows again (the
    # tensor is a view of the cache); torch's refuses the op with holes: its contiguous() first, the same gather
    table = report.table("sum over the ragged dim, a tensor with holes", workload, reference="lodtensor.nested")
    check = _check(holes["lodtensor.nested"].sum(dim=1))
    for name, nt in holes.items():
        first = (lambda x: x.contiguous()) if name == "torch.nested jagged" else (lambda x: x)
        table.add(name + (", contiguous() first" if name == "torch.nested jagged" else ""),
                  lambda nt=nt, first=first: first(nt).sum(dim=1), check=check, **FAST)
    table.finish()


def run(report):
    import lodtensor.nested as ln  # noqa: PLC0415

    torch = _common.optional("torch")
    for case in CASES:
        run_case(report, case, ln, torch)
    run_sdpa(report, ln, torch)
    run_holes(report, ln, torch)
