"""Softmax over the ragged dim forward + backward on torch CPU tensors, for bench/nested.py: lodtensor's
(its backward by the compiled kernel) against torch.nested jagged's and torch.softmax on each sequence.
The gradients are checked against the per-sequence one: torch 2.13's jagged softmax backward reduces
over the last dim instead of the ragged one (docs/nested.md), so its row is timed but not checked.
"""

import numpy as np


def softmax_table(report, case, ln, torch, heads, scores, lengths, offsets, timing):
    """Softmax over the ragged dim forward + backward on torch CPU tensors (the backward by the compiled
    kernel, ``compiled_softmax_grad``) against torch.nested jagged's and torch's softmax on each
    sequence (split, softmax, cat), the gradient checked against the latter's."""
    weights = torch.randn(scores.shape, generator=torch.Generator().manual_seed(heads))
    toffsets = torch.from_numpy(offsets)
    split = lengths.tolist()

    def ours():
        x = torch.from_numpy(scores).requires_grad_()
        (ln.softmax(ln.nested_tensor_from_jagged(x, offsets), 1).values() * weights).sum().backward()
        return x.grad.numpy()

    def jagged():
        x = torch.from_numpy(scores).requires_grad_()
        nt = torch.nested.nested_tensor_from_jagged(x, toffsets, min_seqlen=int(lengths.min()),
                                                    max_seqlen=int(lengths.max()))
        (torch.softmax(nt, 1).values() * weights).sum().backward()
        return x.grad.numpy()

    def per_sequence():
        x = torch.from_numpy(scores).requires_grad_()
        (torch.cat([torch.softmax(p, 0) for p in x.split(split)]) * weights).sum().backward()
        return x.grad.numpy()

    want = per_sequence()

    def check(got):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)

    try:
        check(jagged())
        jagged_note = ""
    except AssertionError:  # torch 2.13: its backward reduces over the last dim, not the ragged one
        jagged_note = f"; gradient WRONG (off by up to {np.abs(jagged() - want).max():.2g}): not checked"
    table = report.table(f"softmax over the ragged dim, forward + backward, {heads} head(s), {case['name']}",
                         f"components (L, {heads}) float32 torch CPU tensors, {lengths.size} sequences; "
                         "gradients checked against torch.softmax on each sequence",
                         reference="lodtensor.nested, torch backend")
    note = f"{torch.get_num_threads()} threads"
    table.add("lodtensor.nested, torch backend", ours, check=check, note=note, **timing)
    table.add("torch.softmax on each sequence (split, cat)", per_sequence, check=check, note=note, **timing)
    table.add("torch.nested jagged", jagged, check=None if jagged_note else check,
              note=note + "; min/max_seqlen" + jagged_note, **timing)
    table.finish()
    mine, theirs = table._best("lodtensor.nested, torch backend"), table._best("torch.nested jagged")
    if mine is not None and theirs is not None:
        report.goal(f"softmax fwd+bwd ({heads} heads), {case['name']}: at or under torch.nested jagged",
                    mine <= theirs, f"{theirs / mine:.2f}x")
