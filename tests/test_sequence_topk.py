"""``sequence_topk_avg_pooling`` against a loop-per-row oracle written from Paddle's kernel
(``sequence_topk_avg_pooling_op.h``: top ``k`` by repeated arg-max, ties to the earlier column,
missing values count 0) and the cases of Paddle's own OpTest
(``test/sequence/test_sequence_topk_avg_pooling.py``). Paddle 2.6.2's wheel no longer registers
the operator, so there is no differential test against it."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.sequence import sequence_topk_avg_pooling


def oracle(values, rows, cols, topks, channels):
    """One matrix row at a time, as Paddle's kernel."""
    kmax = max(topks)
    out = []
    start = 0
    for nr, nc in zip(rows, cols):
        block = np.asarray(values[start : start + channels * nr * nc], dtype=np.float64).reshape(channels, nr, nc)
        start += channels * nr * nc
        for r in range(nr):
            line = []
            for c in range(channels):
                v = list(block[c, r])
                picked = []
                for _ in range(min(kmax, nc)):
                    best = max(range(nc), key=lambda j: (v[j], -j))  # the first of equal maxima
                    picked.append(v[best])
                    v[best] = -np.inf
                sums = np.cumsum(picked + [0.0] * (kmax - len(picked)))
                line += [sums[k - 1] / k for k in topks]
            out.append(line)
    return np.asarray(out).reshape(-1, channels * len(topks))


def make(values, rows, cols, dtype="float32", column=False):
    values = np.asarray(values, dtype=dtype)
    sizes = np.asarray(rows) * np.asarray(cols)
    channels = values.size // max(int(sizes.sum()), 1) if sizes.sum() else 1
    x = lt.LoDTensor(values.reshape(-1, 1) if column else values, [np.concatenate([[0], np.cumsum(sizes * channels)])])
    r = lt.LoDTensor(np.zeros(sum(rows)), [np.concatenate([[0], np.cumsum(rows)])])
    c = lt.LoDTensor(np.zeros(sum(cols)), [np.concatenate([[0], np.cumsum(cols)])])
    return x, r, c


# Paddle's OpTest cases (x = arange, so every value differs), and smaller ones with ties,
# rows shorter than k, matrices of no rows or no columns
CASES = [
    ("optest", [30, 45], [25, 36], [1, 3, 5], 3, "arange"),
    ("optest-case1", [36], [48], [2, 3], 5, "arange"),
    ("short-rows", [2, 3], [4, 1], [1, 2, 3], 2, "random"),
    ("ties", [2, 1], [4, 3], [1, 2, 4], 1, "ties"),
    ("empty-matrices", [2, 0, 1], [3, 4, 0], [1, 2], 2, "random"),
    ("unsorted-topks", [3], [5], [3, 1, 2], 2, "random"),
]


@pytest.mark.parametrize("name, rows, cols, topks, channels, kind", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("column", [False, True])
def test_matches_the_kernel(name, rows, cols, topks, channels, kind, column):
    n = channels * sum(r * c for r, c in zip(rows, cols))
    rng = np.random.RandomState(len(name))
    values = {"arange": np.arange(n), "random": rng.uniform(-3, 3, n), "ties": rng.randint(0, 3, n)}[kind]
    x, r, c = make(values.astype("float32"), rows, cols, column=column)
    out = sequence_topk_avg_pooling(x, r, c, topks, channels)
    assert out.lod() == r.lod()
    assert out.data.shape == (sum(rows), channels * len(topks)) and out.data.dtype == np.float32
    np.testing.assert_allclose(out.data, oracle(values, rows, cols, topks, channels), rtol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_backends_and_dtypes(backend):
    rows, cols, topks, channels = [2, 3], [4, 2], [1, 3], 2
    values = np.random.RandomState(0).uniform(-1, 1, channels * 14)
    x, r, c = make(values, rows, cols, dtype="float64")
    if backend == "torch":
        torch = pytest.importorskip("torch")
        x = x.with_data(torch.from_numpy(x.numpy()))
    out = sequence_topk_avg_pooling(x, r, c, topks, channels)
    assert type(out.data) is type(x.data)
    np.testing.assert_allclose(np.asarray(out.numpy()), oracle(values, rows, cols, topks, channels), rtol=1e-12)


def test_gradient_goes_to_the_chosen_values():
    """Paddle's backward: d out[k] / d x[j] = 1/k for each of the top k positions j."""
    torch = pytest.importorskip("torch")
    rows, cols, topks, channels = [2, 1], [3, 2], [1, 2, 3], 2
    values = np.random.RandomState(1).permutation(channels * 8).astype("float64")
    x, r, c = make(values, rows, cols, dtype="float64")
    leaf = torch.tensor(values, requires_grad=True)
    out = sequence_topk_avg_pooling(x.with_data(leaf), r, c, topks, channels)
    weights = torch.rand(out.data.shape, dtype=torch.float64)
    (out.data * weights).sum().backward()
    expected = np.zeros_like(values)
    w = weights.numpy().reshape(-1, channels, len(topks))
    starts = [0, channels * 6]
    for g, (seq, rr) in enumerate([(0, 0), (0, 1), (1, 0)]):
        nr, nc = rows[seq], cols[seq]
        for ch in range(channels):
            begin = starts[seq] + ch * nr * nc + rr * nc
            order = np.argsort(-values[begin : begin + nc], kind="stable")
            for t, k in enumerate(topks):
                for j in order[:k]:
                    expected[begin + j] += w[g, ch, t] / k
    np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-12)
    torch.autograd.gradcheck(lambda v: sequence_topk_avg_pooling(x.with_data(v), r, c, topks, channels).data,
                             (torch.tensor(values, requires_grad=True),))


def test_errors():
    x, r, c = make(np.arange(12.0), [2], [3])
    with pytest.raises(ValueError, match=r"sequence 0 of input holds 12 values, expected channel_num \* rows \* "
                                         r"cols = 1 \* 2 \* 3"):
        sequence_topk_avg_pooling(x, r, c, [1], 1)
    with pytest.raises(ValueError, match="topks must be a non-empty list of positive integers, got \\[0, 1\\]"):
        sequence_topk_avg_pooling(x, r, c, [0, 1], 2)
    with pytest.raises(ValueError, match="channel_num must be a positive integer, got 0"):
        sequence_topk_avg_pooling(x, r, c, [1], 0)
    with pytest.raises(ValueError, match="same number of sequences, got 1, 2 and 1"):
        sequence_topk_avg_pooling(x, lt.LoDTensor(np.zeros(2), [[0, 1, 2]]), c, [1], 2)
    with pytest.raises(TypeError, match="row must be a LoDTensor"):
        sequence_topk_avg_pooling(x, np.zeros(2), c, [1], 2)
    with pytest.raises(ValueError, match=r"input must have shape \[N\] or \[N, 1\], got \[6, 2\]"):
        sequence_topk_avg_pooling(lt.LoDTensor(np.zeros((6, 2)), [[0, 6]]), r, c, [1], 1)
