"""Jagged ``(B, j, *mid, k)`` @ dense ``(B or 1, x, *mid', k, m)`` of the same rank (4 or more), against torch
2.13's jagged layout: torch multiplies the padded batch (``x`` 1 or the longest length, ``mid'`` broadcast
against ``mid``) and takes each component's rows back; lodtensor refused every such product before.
The strided layout refuses it, as torch's does."""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _comps(lengths, tail, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn((n, *tail), generator=g, dtype=torch.float64, requires_grad=grad) for n in lengths]


def _both(comps, other):
    """torch's components of ``jagged @ other`` (or its error) and ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = torch.matmul(torch.nested.nested_tensor(comps, layout=torch.jagged), other).unbind()
        except RuntimeError as err:
            want = err
        try:
            got = torch.matmul(ln.nested_tensor(comps, layout=torch.jagged), other).unbind()
        except RuntimeError as err:
            got = err
    return want, got


CASES = [  # (component lengths, component tail (*mid, k), other's shape)
    ((2, 3, 1), (3, 4), (3, 1, 4, 5)),  # one matrix per component, broadcast over the ragged dim
    ((2, 3, 1), (3, 4), (1, 1, 4, 5)),  # one matrix for all
    ((2, 3, 1), (3, 4), (3, 3, 4, 5)),  # x the longest length: a matrix per padded row
    ((2, 3, 1), (3, 4), (1, 3, 4, 5)),
    ((2, 0, 3), (3, 4), (3, 1, 4, 2)),  # an empty component
    ((1, 1), (3, 4), (2, 3, 4, 5)),  # the longest is 1: broadcast to x rows, the first taken back
    ((2, 3, 1), (1, 3, 4), (3, 1, 2, 4, 5)),  # mid 1 broadcast to 2
    ((2, 3, 1), (2, 3, 4), (3, 1, 2, 4, 5)),
    ((2, 3, 1), (2, 3, 4), (1, 3, 1, 4, 5)),
]


@pytest.mark.parametrize("lengths, tail, shape", CASES)
def test_jagged_times_a_dense_batch_of_the_same_rank_as_torch(lengths, tail, shape):
    comps = _comps(lengths, tail)
    other = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    want, got = _both(comps, other)
    assert not isinstance(want, Exception), want
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = torch.as_tensor(np.asarray(g))
        assert g.shape == w.shape
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("shape, message", [
    ((4, 1, 4, 5), "size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0"),
    ((3, 2, 4, 5), "size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1"),
    ((3, 1, 5, 2), "does not match"),
])
def test_shapes_torch_refuses_are_refused(shape, message):
    comps = _comps((2, 3, 1), (3, 4))
    want, got = _both(comps, torch.randn(shape, dtype=torch.float64))
    assert isinstance(want, RuntimeError) and isinstance(got, RuntimeError)
    assert message in str(got)


def test_gradients_as_torch():
    grads = []
    for make in (torch.nested.as_nested_tensor, ln.as_nested_tensor):
        comps = _comps((2, 3, 1), (3, 4), grad=True)
        other = torch.randn((3, 1, 4, 5), dtype=torch.float64, generator=torch.Generator().manual_seed(2),
                            requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = torch.matmul(make(comps, layout=torch.jagged), other)
        (out.values() ** 2).sum().backward()
        grads.append([c.grad for c in comps] + [other.grad])
    for g, w in zip(*grads):
        torch.testing.assert_close(g, w)


def test_numpy_components_take_the_same_rule():
    rng = np.random.default_rng(3)
    comps = [rng.standard_normal((n, 3, 4)) for n in (2, 0, 3)]
    other = rng.standard_normal((3, 1, 4, 5))
    out = ln.matmul(ln.nested_tensor(comps, layout=torch.jagged), other)
    assert out.backend.name == "numpy"
    for i, c in enumerate(out.unbind()):
        np.testing.assert_allclose(np.asarray(c), comps[i] @ other[i])


def test_the_strided_layout_refuses_as_torch():
    comps = _comps((2, 3), (3, 4))
    other = torch.randn((2, 1, 4, 5), dtype=torch.float64)
    with pytest.raises(RuntimeError, match="Expected both"):
        torch.matmul(torch.nested.nested_tensor(comps), other)
    with pytest.raises(RuntimeError, match="Expected both"):
        torch.matmul(ln.nested_tensor(comps), other)


MOVED = [  # (component lengths, component shape with None for the ragged dim, the transpose making it, other)
    ((2, 1, 3), (None, 3, 4), (1, 2), (3, 3, 4, 5)),  # ragged in the matrix rows: (B, 3, j, 4) @ (B, 3, 4, 5)
    ((2, 1, 3), (None, 3, 4), (1, 2), (1, 3, 4, 5)),
    ((2, 1, 3), (None, 3, 4), (1, 2), (3, 1, 4, 5)),
    ((2, 1, 3), (None, 2, 3, 4), (1, 2), (3, 2, 1, 4, 5)),  # ragged in a batch dim: (B, 2, j, 3, 4)
    ((2, 1, 3), (None, 2, 3, 4), (1, 2), (3, 1, 3, 4, 5)),  # x the longest length there
]


def _padded_reference(comps, swap, other):
    """torch's rule in dense torch ops, with autograd (torch's own backward refuses several of these): each
    component moved as the transpose moves it, zero-padded along the ragged dim to the longest length, times
    its matrix of ``other``, and its rows taken back."""
    longest = max(c.shape[0] for c in comps)
    d = swap[1] - 1  # the ragged dim's place in a moved component
    outs = []
    for i, c in enumerate(comps):
        moved = c.transpose(0, d)
        pad = [0, 0] * (moved.dim() - 1 - d) + [0, longest - c.shape[0]]
        prod = torch.nn.functional.pad(moved, pad) @ other[i if other.shape[0] > 1 else 0]
        outs.append(prod.narrow(d, 0, c.shape[0]))
    return outs


@pytest.mark.parametrize("lengths, shape, swap, other_shape", MOVED)
def test_a_ragged_dim_moved_from_1_as_torch(lengths, shape, swap, other_shape):
    """The jagged tensor transposed so that its ragged dim is not dim 1 (a review found these refused): the
    values of torch's jagged product, and the gradients of the same rule in dense torch ops."""
    comps = _comps(lengths, shape[1:], grad=True)
    other = torch.randn(other_shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4),
                        requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.matmul(torch.nested.nested_tensor([c.detach() for c in comps], layout=torch.jagged)
                              .transpose(*swap), other.detach()).unbind()
        ours = torch.matmul(ln.as_nested_tensor(comps, layout=torch.jagged).transpose(*swap), other).unbind()
    reference = _padded_reference(comps, swap, other)
    assert [tuple(c.shape) for c in ours] == [tuple(c.shape) for c in theirs] == [tuple(c.shape) for c in reference]
    for g, w, r in zip(ours, theirs, reference):
        torch.testing.assert_close(torch.as_tensor(g).detach(), w)
        torch.testing.assert_close(r.detach(), w)
    weights = [torch.randn(c.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) for c in theirs]
    grads = []
    for outs in (ours, reference):
        for c in (*comps, other):
            c.grad = None
        sum((o * w).sum() for o, w in zip(outs, weights)).backward()
        grads.append([c.grad.clone() for c in (*comps, other)])
    for g, w in zip(*grads):
        torch.testing.assert_close(g, w)


def test_the_refusal_names_the_dense_others_taken():
    nt = ln.nested_tensor(_comps((2, 1), (3, 4)), layout=torch.jagged)
    with pytest.raises(RuntimeError, match="a dense other must be a 2-d matrix, a \\(batch, k, m\\) one"):
        torch.matmul(nt, torch.ones(1, 2, 3, 4, 5, dtype=torch.float64))
