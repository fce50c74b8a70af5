"""torch.compile of training steps over LoDTensors (second hunt, beyond test_compile_hunt / test_compile_lod):
a compiled function must not recompile for every new LoD (batches with other lengths and other numbers of
sequences), must give eager's values and gradients, and must take fullgraph=True where the docs say it traces."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import backend as lt_backend
from lodtensor.nn import functional as NF

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


def _batch(seed, width):
    """A LoDTensor with a new LoD: 2 to 6 sequences of 1 to 5 rows."""
    g = np.random.default_rng(seed)
    lengths = g.integers(1, 6, int(g.integers(2, 7))).tolist()
    data = torch.from_numpy(g.standard_normal((sum(lengths), width))).requires_grad_()
    return lt.LoDTensor.from_lengths(data, lengths)


def _frames_per_batch(compiled, counter, batches, check):
    """Frames compiled after each batch (``check(batch)`` compares with eager)."""
    out = []
    for x in batches:
        check(x)
        out.append(counter.frame_count)
    return out


def test_fc_compiles_once_for_every_lod():
    """fc read the row count with int() and np.prod (``_fc_data``): a graph break that fixed the row count,
    so a recompile for every new LoD (13 frames over 6 batches) until the cache limit sent it to eager."""
    torch.manual_seed(0)
    w, b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True), torch.zeros(4, dtype=torch.float64)

    def fn(x):
        return NF.fc(x, w, b, act="relu") * 2

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(fn, backend=counter)

    def check(x):
        got, want = compiled(x), fn(x)
        assert got.lod() == want.lod()
        torch.testing.assert_close(got.data, want.data)
        (gw,) = torch.autograd.grad(got.data.sum(), w)
        (ew,) = torch.autograd.grad(want.data.sum(), w)
        torch.testing.assert_close(gw, ew)

    frames = _frames_per_batch(compiled, counter, [_batch(s, 3) for s in range(8)], check)
    assert frames[-1] == frames[3] <= 3  # dims dynamic after the first new LoD: no recompile per batch


def test_fc_module_with_fullgraph_on_a_parameter_type_not_seen_before():
    """``backend_name_of`` classified a new array type by ``type.__module__.split``, which dynamo cannot trace
    for torch.nn.Parameter: ``FC(...)(x)`` under fullgraph=True raised 'Unsupported method call' the first
    time a Parameter met it (the docs: fc traces)."""
    import lodtensor.nn as LN  # noqa: PLC0415 - the modules import torch

    torch.manual_seed(0)
    fc = LN.FC(3, 4, act="tanh").double()
    x = _batch(0, 3)
    saved = lt_backend._TYPE_CACHE.pop(torch.nn.Parameter, False)
    try:
        got = torch.compile(lambda t: fc(t) + 1, fullgraph=True, backend="aot_eager")(x)
    finally:
        if saved is not False:
            lt_backend._TYPE_CACHE[torch.nn.Parameter] = saved
    want = fc(x) + 1
    assert got.lod() == want.lod()
    torch.testing.assert_close(got.data, want.data)


def test_dynamic_gru_training_step_does_not_recompile_its_backward_per_lod():
    """A compiled training step (forward, ``loss.backward()``, ``opt.step()``): the autograd engine ran the
    GRU's backward with dynamo's frame hook on, and dynamo traced its host step plan (``_bounds``,
    ``_previous_rows`` guarded on the step counts): 41 frames over 6 batches, a recompile of each for every
    LoD until the cache limit. Eager's loss and parameters after every step."""
    import lodtensor.nn as LN  # noqa: PLC0415
    from lodtensor.sequence import sequence_pool  # noqa: PLC0415

    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj, self.gru, self.out = torch.nn.Linear(3, 6), LN.DynamicGRU(2), torch.nn.Linear(2, 1)

        def forward(self, x):
            h = self.gru(self.proj(x))
            return self.out(sequence_pool(h, "max").data).square().mean()

    models = [Model().double(), Model().double()]
    models[1].load_state_dict(models[0].state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]

    def step(model, opt, x):
        loss = model(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(step, backend=counter)

    def check(x):
        got = compiled(models[0], opts[0], x)
        want = step(models[1], opts[1], lt.LoDTensor.from_lengths(x.data.detach().clone(), x.lengths()))
        torch.testing.assert_close(got, want)
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            torch.testing.assert_close(p, q)

    frames = _frames_per_batch(compiled, counter, [_batch(s, 3) for s in range(8)], check)
    assert frames[-1] == frames[3] <= 16
