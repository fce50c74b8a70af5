"""torch.compile of the public API on torch data, beyond test_compile_lod / nested/test_compile: every call that
reads the LoD's (or the size table's) host offsets runs eagerly behind a graph break, so it neither fails while
dynamo traces its NumPy ('Expected np.nditer base', 'Cannot call numel() on tensor with symbolic sizes') nor
recompiles per batch; each case runs over batches with other LoDs and compares values (and gradients) with
eager, so a graph reused for a new LoD with an old batch's offsets would show."""

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import interop
from lodtensor.nn import functional as NF
from lodtensor.sequence import sequence_pool

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

# Each case compiles (seconds on 2 cores): the file runs in `make test-slow`, which CI runs too;
# `make test` keeps test_compile_lod.py and nested/test_compile.py for torch.compile.
pytestmark = pytest.mark.slow
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

LENGTHS = ([2, 3, 1], [4, 1, 2], [1, 1], [3, 1, 2, 1], [2, 3, 1])  # new LoDs, then the first one again


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


def _batch(lengths, width=3, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    data = torch.randn(sum(lengths), width, generator=g, dtype=torch.float64).requires_grad_(grad)
    return lt.LoDTensor.from_lengths(data, lengths)


def _plain(r):
    """A result as comparable Python values: LoDTensors as (lod, data), nested tensors as (sizes, padded)."""
    if isinstance(r, lt.LoDTensor):
        return ("lod", r.lod(), r.data)
    if isinstance(r, ln.NestedTensor):
        return ("nested", r.nested_size().tolist(), ln.to_padded_tensor(r, 0.0))
    if isinstance(r, torch.Tensor) and r.is_nested:
        return ("njt", r.values(), r.offsets())
    if isinstance(r, torch.Tensor) and r.layout != torch.strided:
        return ("sparse", r.to_dense())
    if isinstance(r, (tuple, list)):
        return [_plain(x) for x in r]
    return r


def _same(got, want):
    got, want = _plain(got), _plain(want)
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)
    elif isinstance(want, tuple):  # ("lod", lod, data), ("nested", sizes, padded), ("njt", ...), ("sparse", ...)
        assert type(got) is tuple and got[0] == want[0]
        for a, b in zip(got[1:], want[1:]):
            _same(a, b)
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9)
    else:
        assert got == want


def _grad_sources(r):
    plain = _plain(r)
    flat = plain if isinstance(plain, list) else [plain]
    out = []
    for item in flat:
        for x in item if isinstance(item, (tuple, list)) else (item,):
            if isinstance(x, torch.Tensor) and x.requires_grad:
                out.append(x)
    return out


def _against_eager(fn, make, backend="aot_eager", params=()):
    """``fn`` compiled and eager on every batch of LENGTHS (built twice by ``make``): equal results, equal
    gradients of the input (``.data`` of a LoDTensor, ``values()`` of a nested tensor) and of ``params``."""
    compiled = torch.compile(fn, backend=backend)
    for seed, lengths in enumerate(LENGTHS):
        grads = []
        results = []
        for f in (compiled, fn):
            x, leaf = make(lengths, seed)
            for p in params:
                p.grad = None
            out = f(x)
            results.append(out)
            sources = _grad_sources(out)
            if sources:
                sum((s.double() ** 2).sum() for s in sources).backward()
            grads.append([t.grad for t in (leaf, *params) if t is not None])
        _same(*results)
        for a, b in zip(*grads):
            assert (a is None) == (b is None)
            if a is not None:
                _same(a, b)


def _lod_input(lengths, seed):
    t = _batch(lengths, seed=seed)
    return t, t.data


# -- LoDTensor methods ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["t[0]", "t[1]", "t[-1]", "len(t)"])
def test_integer_indexing_and_len_run_behind_a_graph_break(name):
    """``t[i]`` traced the LoD's NumPy offsets (``lod._make_top``) and ``len(t)`` the offsets array's shape:
    'Expected np.nditer base'."""
    fn = {
        "t[0]": lambda t: t[0].data * 2,
        "t[1]": lambda t: torch.relu(t[1]).data.sum(0),
        "t[-1]": lambda t: t[-1].data + 1,
        "len(t)": lambda t: t.data * len(t),
    }[name]
    _against_eager(fn, _lod_input)


def test_integer_indexing_after_eager_indexing_does_not_recompile_per_lod():
    """Once eager indexing had cached the offsets as a list on the LoD, the traced fast path read that list:
    right values, but a graph guarded on every offset, so a recompile for every new LoD."""
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda t: t[0].data * 2, backend=counter)
    counts = []
    for seed, lengths in enumerate(LENGTHS):
        t = _batch(lengths, seed=seed, grad=False)
        t[0]  # noqa: B018 - eager indexing first: the LoD caches its offsets list
        torch.testing.assert_close(compiled(t), t[0].data * 2)
        counts.append(counter.frame_count)
    assert counts[-1] == counts[0]


def test_set_lod_and_set_recursive_sequence_lengths_under_compile():
    """Both built the new LoD in the graph (NumPy validation traced: 'Expected np.nditer base')."""

    def regroup(t):
        u = torch.relu(t) * 2
        u.set_lod([[0, 1, u.num_rows]])
        v = t * 1
        v.set_recursive_sequence_lengths([[u.num_rows - 1, 1]])
        return sequence_pool(u, "sum"), sequence_pool(v, "max")

    _against_eager(regroup, _lod_input)

    def relabel(t):  # the caller's tensor: its new lod is seen after the call
        t.set_lod([[0, t.num_rows]])
        return t * 2

    compiled = torch.compile(relabel, backend="aot_eager")
    for lengths in LENGTHS:
        t = _batch(lengths, grad=False)
        out = compiled(t)
        assert t.lod() == out.lod() == [[0, sum(lengths)]]


def _rows_of(t, lod, start, stop=None):
    """The rows of a LoD method's ``(lod, start, stop)`` or ``(lod, rows)`` as a LoDTensor."""
    rows = t.data[torch.as_tensor(start)] if stop is None else t.data[start:stop]
    return lt.LoDTensor(rows * 2, lod)


_LOD_READS = {
    "offsets": lambda t, u: torch.as_tensor(t.lod.offsets(-1)) * 2,
    "lengths": lambda t, u: torch.as_tensor(t.lod.lengths()) + 1,
    "levels": lambda t, u: torch.as_tensor(t.lod.levels[0]) * 2,
    "absolute_offsets": lambda t, u: torch.as_tensor(t.lod.absolute_offsets(0)) * 2,
    "segment_ids": lambda t, u: t.data * torch.as_tensor(t.lod.segment_ids())[:, None],
    "num_sequences": lambda t, u: t.data * t.lod.num_sequences(),
    "offsets_list": lambda t, u: t.data[: t.lod.offsets_list()[1]] * 2,
    "to_lengths_list": lambda t, u: t.data.sum() + t.lod.to_lengths_list()[0][-1],
    "empty_rows": lambda t, u: t.data * (1 + t.lod.empty_rows()),
    "==": lambda t, u: t.data * float(t.lod == u.lod) + float(t.lod == [[0, 2, 5, 6]]),
    "hash": lambda t, u: t.data * float(hash(t.lod) == hash(u.lod)),
    "split": lambda t, u: t.data * len(t.lod.split()[0]),
    "slice": lambda t, u: _rows_of(t, *t.lod.slice(0, 1)),
    "child": lambda t, u: _rows_of(t, *t.lod.child(0)),
    "select": lambda t, u: _rows_of(t, *t.lod.select([0])),
    "drop_level": lambda t, u: t.data * len(t.lod.drop_level().levels),
}


@pytest.mark.parametrize("name", sorted(_LOD_READS))
def test_lod_methods_run_behind_a_graph_break(name):
    """The LoD's readers (``t.lod.offsets()``, ``t.lod == other``, ...) traced its NumPy offsets: 'Expected
    np.nditer base'."""
    fn = _LOD_READS[name]
    compiled = torch.compile(fn, backend="aot_eager")
    for seed, lengths in enumerate(LENGTHS):
        t, u = _batch(lengths, seed=seed, grad=False), _batch([2, 3, 1], seed=seed, grad=False)
        _same(compiled(t, u), fn(t, u))


def test_lod_from_lengths_inside_compile():
    """LoD.from_lengths ran its gate (NumPy) in the graph: 'Expected np.nditer base'."""

    def fn(x, lengths):
        return sequence_pool(lt.LoDTensor(torch.relu(x), lt.LoD.from_lengths([lengths])), "sum").data * 2

    compiled = torch.compile(fn, backend="aot_eager")
    for lengths in LENGTHS:
        x = torch.randn(sum(lengths), 3)
        torch.testing.assert_close(compiled(x, lengths), fn(x, lengths))


def _padded_input(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    padded = torch.randn(len(lengths), max(lengths), 3, generator=g, dtype=torch.float64).requires_grad_()
    return (padded, torch.tensor(lengths)), padded


@pytest.mark.parametrize("name", ["from_padded", "from_padded lengths list", "to_padded round trip",
                                  "to_padded_all round trip"])
def test_from_padded_under_compile(name):
    """lt.from_padded / from_padded_all built the LoD from the lengths or masks in the graph: 'Expected np.nditer
    base' (the inverse of t.to_padded(), which already ran behind a graph break)."""

    def two_level(t):
        outer = [2] * (len(t.lengths()) // 2) + [1] * (len(t.lengths()) % 2)
        return lt.LoDTensor(t.data, recursive_sequence_lengths=[outer, t.lengths().tolist()])

    fn = {
        "from_padded": lambda args: lt.from_padded(torch.tanh(args[0]), args[1]) * 2,
        "from_padded lengths list": lambda args: lt.from_padded(args[0] * 2, args[1].tolist()),
        "to_padded round trip": lambda args: lt.from_padded(*lt.from_padded(*args).to_padded(pad_value=0.0)) * 2,
        "to_padded_all round trip": lambda args: lt.from_padded_all(*two_level(lt.from_padded(*args)).to_padded_all()),
    }[name]
    _against_eager(fn, _padded_input)


# -- nn layers --------------------------------------------------------------------------------------
def _layer_cases():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    pad = torch.randn(2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    ahead = torch.randn(2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    table = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)

    def ctc(t):
        count = len(t.lengths())
        label = lt.LoDTensor.from_lengths(torch.ones(count, 1, dtype=torch.int64), [1] * count)
        return NF.warpctc(t, label, norm_by_times=True) * 2

    def ids(t):
        return t.with_data((t.data[:, :1].detach().abs() * 3).long().clamp(0, 4))

    return {
        "sequence_conv": (lambda t: NF.sequence_conv(t, w, act="tanh") * 2, (w,)),
        "sequence_conv padding_trainable": (
            lambda t: NF.sequence_conv(t, w, padding_trainable=True, padding_data=pad), (w, pad)),
        "row_conv": (lambda t: NF.row_conv(torch.relu(t), ahead), (ahead,)),
        "sequence_conv_pool": (lambda t: NF.sequence_conv_pool(t, w, None, 3, pool_type="average"), (w,)),
        "warpctc": (ctc, ()),
        "embedding": (lambda t: NF.embedding(ids(t), table, padding_idx=0) * 2, (table,)),
    }


@pytest.mark.parametrize("name", sorted(_layer_cases()))
def test_layers_reading_the_offsets_run_behind_a_graph_break(name):
    """sequence_conv, row_conv (and sequence_conv_pool) traced their context-row plan: right on the first batch,
    then 'Cannot call numel() on tensor with symbolic sizes' on the next LoD (the plan's cache traced too);
    warpctc traced its NumPy (aot_eager: a backend exception per call); embedding traced its host id check
    (a recompile per batch)."""
    fn, params = _layer_cases()[name]
    _against_eager(fn, _lod_input, params=params)


def _numpy_in_graph(fn, *args):
    """The NumPy calls dynamo put in the graphs of ``fn(*args)`` (``torch._dynamo.utils.wrapped_*``, ...)."""
    found = set()

    def backend(gm, example_inputs):
        for node in gm.graph.nodes:
            module = getattr(node.target, "__module__", None) or ""
            name = getattr(node.target, "__name__", "")
            if node.op == "call_function" and (module.startswith("torch._numpy") or (
                    module == "torch._dynamo.utils" and name.startswith(("wrapped_", "numpy_")))):
                found.add(name)
        return gm.forward

    torch.compile(fn, backend=backend)(*args)
    return found


def test_layers_trace_no_numpy_into_the_graph():
    """warpctc and embedding gave right values, but dynamo traced their host NumPy (the offsets, the ids) into
    the graph: ``wrapped_diff``, ``wrapped_item``, ... (and aot_eager failed on them, then broke the graph)."""
    g = torch.Generator().manual_seed(0)
    t = lt.LoDTensor.from_lengths(torch.randn(6, 3, generator=g), [2, 3, 1])
    label = lt.LoDTensor.from_lengths(torch.ones(3, 1, dtype=torch.int64), [1, 1, 1])
    ids = lt.LoDTensor.from_lengths(torch.randint(0, 5, (6, 1), generator=g), [2, 3, 1])
    table, w = torch.randn(5, 3, generator=g), torch.randn(9, 2, generator=g)
    assert not _numpy_in_graph(lambda x, y: NF.warpctc(torch.relu(x), y) * 2, t, label)
    assert not _numpy_in_graph(lambda x: NF.embedding(x, table, padding_idx=0) * 2, ids)
    assert not _numpy_in_graph(lambda x: NF.sequence_conv(x * 2, w) + 1, t)
    assert not _numpy_in_graph(lambda x: NF.row_conv(x * 2, table[:2]) + 1, t)


@pytest.mark.slow
def test_a_model_of_the_layers_under_inductor():
    """Embedding, SequenceConv, FC, DynamicLSTM, DynamicGRU, RowConv, LinearChainCRF and a sequence pool in one
    compiled module (inductor): eager's loss and parameter gradients for every batch."""
    import lodtensor.nn as LN  # noqa: PLC0415 - imports the modules (torch)

    torch.manual_seed(0)

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.conv, self.fc = LN.Embedding(10, 6), LN.SequenceConv(6, 8, 3), LN.FC(8, 12)
            self.lstm, self.proj, self.gru = LN.DynamicLSTM(3), LN.FC(3, 9), LN.DynamicGRU(3)
            self.row, self.out, self.crf = LN.RowConv(3, 2), LN.FC(3, 3), LN.LinearChainCRF(3)

        def forward(self, ids, label):
            h, _ = self.lstm(self.fc(torch.relu(self.conv(self.emb(ids)))))
            h = self.row(self.gru(self.proj(h)))
            return self.crf(self.out(h), label).data.mean() + sequence_pool(h, "max").data.sum()

    model = Tagger()
    compiled = torch.compile(model, backend="inductor")
    for seed, lengths in enumerate(LENGTHS):
        g = torch.Generator().manual_seed(seed)
        ids = lt.LoDTensor.from_lengths(torch.randint(0, 10, (sum(lengths), 1), generator=g), lengths)
        label = lt.LoDTensor.from_lengths(torch.randint(0, 3, (sum(lengths), 1), generator=g), lengths)
        runs = []
        for f in (compiled, model):
            model.zero_grad()
            loss = f(ids, label)
            loss.backward()
            runs.append((loss.detach(), [p.grad for p in model.parameters()]))
        torch.testing.assert_close(runs[0][0], runs[1][0], rtol=1e-4, atol=1e-5)
        for a, b in zip(runs[0][1], runs[1][1]):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# -- interop with torch ---------------------------------------------------------------------------
def _seqs(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, 2, generator=g, dtype=torch.float64) for n in lengths]


_INTEROP = {
    "cu_seqlens": (lambda t: t.cu_seqlens(), "lod"),
    "to_nested_jagged": (lambda t: t.to_nested_jagged() * 2, "lod"),
    "to_nested_jagged round trip": (lambda t: interop.from_torch(t.to_nested_jagged() * 2), "lod"),
    "to_packed_sequence": (lambda t: tuple(t.to_packed_sequence())[:2], "lod"),
    "packed round trip": (lambda t: interop.from_packed_sequence(t.to_packed_sequence()) * 2, "lod"),
    "embedding_bag_inputs": (lambda t: t.with_data(t.data[:, 0].detach().long()).embedding_bag_inputs(), "lod"),
    "to_sparse_csr": (lambda t: t.with_data(t.data[:, 0]).to_sparse_csr(), "lod"),
    "to_sparse_coo": (lambda t: t.with_data(t.data[:, 0]).to_sparse_coo(), "lod"),
    "from_sparse": (lambda t: interop.from_sparse(t.with_data(t.data[:, 0]).to_sparse_csr()), "lod"),
    "from_torch": (lambda nt: interop.from_torch(nt) * 2, "njt"),
    "from_packed_sequence": (interop.from_packed_sequence, "packed"),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "round trip" in n else n
                                  for n in sorted(_INTEROP)])
def test_torch_interop_conversions_under_compile(name):
    """Each read or built the LoD's offsets as NumPy in the graph: 'Expected np.nditer base'."""
    fn, kind = _INTEROP[name]

    def make(lengths, seed):
        seqs = _seqs(lengths, seed)
        if kind == "njt":
            return torch.nested.nested_tensor(seqs, layout=torch.jagged), None
        if kind == "packed":
            return torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False), None
        data = torch.cat(seqs).requires_grad_()
        return lt.LoDTensor.from_lengths(data, lengths), data

    _against_eager(fn, make)


def test_packed_sequence_through_nn_lstm_under_compile():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(2, 3).double()

    def fn(t):
        out, _ = lstm(t.to_packed_sequence())
        return interop.from_packed_sequence(out)

    _against_eager(fn, _lod_input_width(2), params=(lstm.weight_ih_l0,))


def _lod_input_width(width):
    def make(lengths, seed):
        t = _batch(lengths, width=width, seed=seed)
        return t, t.data

    return make


# -- nested tensors ------------------------------------------------------------------------------
def _nested(kind):
    def make(lengths, seed):
        seqs = _seqs(lengths, seed)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        if kind == "list":
            nt = ln.nested_tensor(seqs, layout=torch.jagged, requires_grad=True)
            return nt, nt  # its gradient: a nested tensor
        values = torch.cat(seqs).requires_grad_()
        if kind == "torch offsets":
            return ln.nested_tensor_from_jagged(values, torch.tensor(offsets)), values
        nt = ln.nested_tensor_from_jagged(values, offsets)
        if kind == "read":
            nt.offsets(), nt.nested_size()  # the host tables already built, in eager code
        return nt, values

    return make


_NESTED = {
    "values()": lambda x: x.values() * 2,
    "offsets()": lambda x: x.offsets() * 2,
    "unbind()": lambda x: [c * 2 for c in x.unbind()],
    "iteration": lambda x: [c.sum(0) for c in x],
    "to_tensor_list()": lambda x: [c + 1 for c in x.to_tensor_list()],
    "transpose(1, 2).contiguous()": lambda x: torch.relu(x.transpose(1, 2).contiguous()) * 2,
    "nested_tensor() inside": lambda x: ln.nested_tensor([torch.ones(2, 2), torch.zeros(x.size(-1), 2)]) * 2,
    "as_nested_tensor() inside": lambda x: ln.as_nested_tensor(list(x.unbind()), layout=torch.jagged) * 2,
    "from_jagged(values(), offsets())": lambda x: ln.nested_tensor_from_jagged(torch.tanh(x.values()), x.offsets()),
    "nested_size()": lambda x: x.nested_size() * 2,
    "nested_strides()": lambda x: x.nested_strides() + 1,
    "len()": lambda x: x.values() * len(x),
    "repr()": lambda x: x.values() * len(repr(x)),
}


@pytest.mark.parametrize("kind", ["torch offsets", "read", "list"])
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "as_nested" in n else n
                                  for n in sorted(_NESTED)])
def test_nested_accessors_and_constructors_under_compile(name, kind):
    """values(), offsets(), unbind(), to_tensor_list(), contiguous() of a transposed view, nested_strides(),
    repr() and the list constructors traced the size table's NumPy ('ndarray' object has no attribute
    'setflags'); nested_size() and len() traced it too (right values, NumPy in the graph)."""
    _against_eager(_NESTED[name], _nested(kind))


@pytest.mark.parametrize("kind", ["numpy offsets", "read"])
def test_nested_values_stays_in_one_graph(kind):
    """values() of a tensor with a known row shape is the buffer's rows, whatever the size table holds: one
    graph for every batch (fullgraph), where it read the table's NumPy (or a recompile per batch once read)."""
    counter = CompileCounterWithBackend("aot_eager")
    lin = torch.nn.Linear(2, 2).double()
    compiled = torch.compile(lambda x: lin(x.values()).sum(-1), fullgraph=True, backend=counter)
    for seed, lengths in enumerate(LENGTHS):
        nt, _ = _nested(kind)(lengths, seed)
        torch.testing.assert_close(compiled(nt), lin(nt.values()).sum(-1))
    assert counter.frame_count == 1


def test_nested_size_and_len_trace_no_numpy_into_the_graph():
    nt, _ = _nested("numpy offsets")([2, 3, 1], 0)
    assert not _numpy_in_graph(lambda x: x.nested_size() * 2, nt)
    assert not _numpy_in_graph(lambda x: x.values() * len(x), nt)
