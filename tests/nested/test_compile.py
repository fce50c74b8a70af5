"""torch.compile (#23 item 7): nested tensors of torch data compile with aot_eager and inductor; pointwise ops and
nn.Linear in one graph (fullgraph=True), the tutorial's multi-head attention with a graph break at the attention;
the same numbers and gradients as eager; batches with new lengths (same row shape) reuse the graph."""

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

from .test_views import TutorialMHA  # noqa: E402

F = torch.nn.functional
BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


def _batch(seed, count, width=8, requires_grad=True):
    g = np.random.default_rng(seed)
    lengths = g.integers(1, 9, count)
    values = torch.from_numpy(g.standard_normal((int(lengths.sum()), width)).astype(np.float32))
    values.requires_grad_(requires_grad)
    return ln.nested_tensor_from_jagged(values, np.concatenate([[0], np.cumsum(lengths)])), values


def _check_against_eager(fn, compiled, batches, backend):
    tol = {} if backend == "aot_eager" else {"rtol": 1e-4, "atol": 1e-4}  # inductor fuses: float32 rounding
    for nt, values in batches:
        got, want = compiled(nt), fn(nt)
        assert isinstance(got, ln.NestedTensor) and got.nested_size().tolist() == want.nested_size().tolist()
        torch.testing.assert_close(got.values(), want.values(), **tol)
        (got.values() ** 2).sum().backward()
        grad, values.grad = values.grad.clone(), None
        (want.values() ** 2).sum().backward()
        torch.testing.assert_close(grad, values.grad, **tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointwise_and_linear_compile_into_one_graph_for_every_batch(backend):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 5)
    norm = torch.nn.LayerNorm(5)

    def fn(x):
        return F.gelu(norm(torch.relu(lin(x.sin() + 1)) * 2 - x.size(-1) * 0.0), approximate="tanh").softmax(-1)

    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(fn, fullgraph=True, backend=counter)
    batches = [_batch(seed, 3 + seed) for seed in range(8)]  # 8 batches: other lengths, other counts
    _check_against_eager(fn, compiled, batches, backend)
    assert counter.frame_count == 1  # compiled once: the ragged dim is dynamic


@pytest.mark.parametrize("backend", BACKENDS)
def test_residuals_and_gates_between_derived_tensors_compile_into_one_graph(backend):
    """``x + lin(norm(x))``, ``lin(x) * norm(x)``, a GLU over ``chunk``: nested operands made by different
    ops from one input share its component lengths (one structure lineage), so no graph break."""
    torch.manual_seed(0)
    lin, norm, up = torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 16)

    def fn(x):
        h = x + lin(norm(x))
        a, b = up(h).chunk(2, dim=-1)
        return (a * torch.sigmoid(b)) + lin(h) * norm(h)

    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(fn, fullgraph=True, backend=counter)
    _check_against_eager(fn, compiled, [_batch(seed, 3 + seed) for seed in range(4)], backend)
    assert counter.frame_count == 1


def test_size_table_is_not_traced_and_results_resolve_it_later():
    lin = torch.nn.Linear(8, 4)
    compiled = torch.compile(lambda x: lin(x).unflatten(-1, [2, 2]).transpose(1, 2), fullgraph=True,
                             backend="aot_eager")
    nt, _ = _batch(1, 5, requires_grad=False)
    out = compiled(nt)
    assert out._st._sizes is None  # made in the graph: a recipe over the input's size table, resolved on use
    assert out.nested_size().tolist() == [[2, n, 2] for n in nt.nested_size()[:, 0].tolist()]
    torch.testing.assert_close(ln.to_padded_tensor(out, 0.0), ln.to_padded_tensor(
        lin(nt).unflatten(-1, [2, 2]).transpose(1, 2), 0.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("is_causal", [False, True])
def test_tutorial_mha_compiles_with_a_break_at_attention(backend, is_causal):
    torch.manual_seed(1)
    mha = TutorialMHA(8, 2)
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(lambda x: mha(x, is_causal=is_causal), backend=counter)
    batches = [_batch(seed, 2 + seed) for seed in range(8)]
    _check_against_eager(lambda x: mha(x, is_causal=is_causal), compiled, batches, backend)
    assert counter.frame_count == 2  # the graphs before and after the attention, compiled once each


def test_the_torch_docs_compile_examples():
    a, b = torch.randn(2, 3), torch.randn(4, 3)
    nt = ln.nested_tensor([a, b], layout=torch.jagged)

    def f(x):
        return x.sin() + 1

    output = torch.compile(f, fullgraph=True, backend="aot_eager")(nt)
    assert str(output.shape).startswith("Size([2, j") and output.shape[2] == 3

    def g(values, offsets):
        return ln.nested_tensor_from_jagged(values, offsets) * 2.0

    output2 = torch.compile(g, fullgraph=True, backend="aot_eager")(nt.values(), torch.tensor([0, 2, 6]))
    assert output2.shape[0] == 2 and output2.shape[2] == 3
    torch.testing.assert_close(output2.values(), nt.values() * 2)
    assert output2.offsets().tolist() == [0, 2, 6]


def test_offsets_made_in_a_graph_pass_the_lod_gate_when_used():
    def g(values, offsets):
        return ln.nested_tensor_from_jagged(values, offsets) + 1

    out = torch.compile(g, fullgraph=True, backend="aot_eager")(torch.zeros(5, 2), torch.tensor([0, 3, 2, 5]))
    with pytest.raises(ValueError, match="non-decreasing"):
        out.nested_size()


def test_ops_without_a_traced_form_break_the_graph_and_match_eager():
    def fn(x):
        return ln.softmax(x, 1).sum(1)  # over the ragged dim: the host offsets are needed

    nt, _ = _batch(3, 6, requires_grad=False)
    counter = CompileCounterWithBackend("aot_eager")
    got = torch.compile(fn, backend=counter)(nt)
    torch.testing.assert_close(got, fn(nt))
    with pytest.raises(Exception, match="marked as skipped|graph break"):
        torch.compile(fn, fullgraph=True, backend="aot_eager")(nt)


@pytest.mark.gpu
def test_tutorial_mha_compiles_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    torch.manual_seed(2)
    mha = TutorialMHA(8, 2).cuda()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(mha, backend=counter)
    batches = []
    for seed in range(4):
        g = np.random.default_rng(seed)
        lengths = g.integers(1, 9, 3 + seed)
        values = torch.randn(int(lengths.sum()), 8, device="cuda", requires_grad=True)
        batches.append((ln.nested_tensor_from_jagged(values, np.concatenate([[0], np.cumsum(lengths)])), values))
    _check_against_eager(mha, compiled, batches, "aot_eager")
    assert counter.frame_count == 2
