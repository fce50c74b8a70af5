"""Ranks that call different collectives (#25 item 3): the same ValueError on every rank, never an abort.

gloo aborts the whole process (SIGABRT from a background thread) when the
sizes of one exchange disagree; before the fixed-size head, rank 0 calling
``all_gather`` while rank 1 called ``all_to_all`` did exactly that. Every
case here runs on spawned gloo ranks, so a crash fails the test instead of
killing pytest.
"""

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

from ._harness import run_ranks, values  # noqa: E402
from ._workers import OPS  # noqa: E402

W = "tests.distributed._workers"
ROOTED = {"gather", "broadcast", "scatter"}


def _variants(roots):
    return [(op, root) for op in OPS for root in (roots if op in ROOTED else [-1])]


def _cases(world, variants, rows=4, dtype="float32"):
    """Every ordered pair of call variants: rank 0 calls the first, every other rank the second."""
    return [
        [(a[0], max(a[1], 0), rows, dtype)] + [(b[0], max(b[1], 0), rows + r, dtype) for r in range(1, world)]
        for a, b in itertools.product(variants, repeat=2)
    ]


def _call(op, root):
    return (
        f"{op}({ {'gather': 'dst', 'broadcast': 'src', 'scatter': 'src'}[op] }={root})" if op in ROOTED else f"{op}()"
    )


def _check(cases, outcomes, world):
    for case, per_rank in zip(cases, zip(*outcomes)):
        calls = [(op, root if op in ROOTED else -1) for op, root, _, _ in case]
        if len(set(calls)) == 1:  # the same call everywhere: it works
            assert all(kind == "ok" for kind, _ in per_rank), (case, per_rank)
            continue
        kinds = {kind for kind, _ in per_rank}
        messages = {msg for _, msg in per_rank}
        assert kinds == {"ValueError"} and len(messages) == 1, (case, per_rank)  # the same error everywhere
        msg = messages.pop()
        assert "same collective with the same root" in msg, msg
        for r, (op, root) in enumerate(calls):
            assert f"rank {r}: {_call(op, root)}" in msg, (msg, calls)


def test_every_pair_of_collectives_on_two_ranks(tmp_path):
    """The 5 x 5 matrix (root 0), one 2-rank run: the same ValueError on both ranks off the diagonal.

    Includes the issue's case: rank 0 ``all_gather(t)``, rank 1 ``all_to_all([t, t])`` (was SIGABRT).
    """
    cases = _cases(2, _variants([0]))
    outcomes = values(run_ranks(f"{W}:op_matrix", 2, tmp_path, cases))
    _check(cases, [o for o, _ in outcomes], 2)
    assert all(after == [[[0, 1]], [[0, 2]]] for _, after in outcomes)  # the group still works
    issue = cases.index([("all_gather", 0, 4, "float32"), ("all_to_all", 0, 5, "float32")])
    assert (
        outcomes[0][0][issue]
        == outcomes[1][0][issue]
        == (
            "ValueError",
            "every rank must call the same collective with the same root, "
            "got rank 0: all_gather(), rank 1: all_to_all()",
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_every_pair_of_collectives_and_roots(world, tmp_path):
    """Every ordered pair of (collective, root) on 2 and 3 ranks, with dtypes that differ too."""
    variants = _variants(list(range(world)))
    cases = _cases(world, variants) + [
        [(a[0], max(a[1], 0), 2, "float32")] + [(b[0], max(b[1], 0), 0, "int64")] * (world - 1)
        for a, b in itertools.product(variants, repeat=2)
        if a != b
    ]
    outcomes = values(run_ranks(f"{W}:op_matrix", world, tmp_path, cases, wall=600))
    _check(cases, [o for o, _ in outcomes], world)
    assert all(after == [[[0, r + 1]] for r in range(world)] for _, after in outcomes)


def test_head_size_does_not_depend_on_the_collective():
    from lodtensor.distributed import _wire

    t = __import__("lodtensor").LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    one = [_wire.describe(t, "t")]
    sizes = {
        _wire.encode_head(op, 0, one * (3 if multi else 1), follow=_wire.ITEM if multi else 0, sends=0).size
        for op, multi in [
            ("all_gather", False),
            ("gather", False),
            ("broadcast", False),
            ("scatter", True),
            ("all_to_all", True),
        ]
    }
    assert sizes == {_wire.HEAD}
    err = _wire.LocalError(1, "x" * 1000)
    assert _wire.encode_head("all_to_all", -1, [], follow=_wire.ITEM, sends=0, error=err).size == _wire.HEAD
