"""Scaling hunt: public calls whose Python-level work grew with the number of sequences.

No timings here. Each test counts what a call does at the Python level (``sys.setprofile``: Python
function calls, calls of builtins and methods such as ``tolist`` or ``Tensor.reshape``, and how many
array elements ``tolist()`` turned into Python objects) at a small and a large batch, and asserts the
count does not grow with the number of sequences. Each also checks the result against real torch.

Fixed here (each count grew linearly before):
- nested ops on components of few distinct shapes (``to_padded_tensor`` of components ragged in a
  later dim, batched ``matmul``): the shape grouping turned the whole size table and offsets into
  Python lists on every call;
- ``NestedTensor.to_packed_sequence()`` went through ``pack_sequence`` of a Python list of components,
  ``as_nested_tensor(PackedSequence)`` through ``unpack_sequence`` (a Python loop over sequences);
- ``nested_tensor`` / ``as_nested_tensor`` of a list of tensors made one ``reshape`` and one ``detach``
  (and a cast) per component before the join;
- unpickling a NestedTensor checked its size table with one ``np.prod`` per component.
"""

import collections
import pickle
import sys

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
rnn = torch.nn.utils.rnn

SMALL, LARGE = 100, 5000


def _profile(fn, *args, **kwargs):
    """``(result, calls, converted)``: what ``fn(*args, **kwargs)`` returns; a Counter of the Python
    functions (``py:name``) and builtins/methods (``name``) it called; the number of array elements
    ``tolist()`` turned into Python objects."""
    calls = collections.Counter()
    converted = [0]

    def hook(frame, event, arg):
        if event == "call":
            calls["py:" + frame.f_code.co_name] += 1
        elif event == "c_call":
            name = getattr(arg, "__name__", "?")
            calls[name] += 1
            if name == "tolist":
                owner = getattr(arg, "__self__", None)
                if isinstance(owner, np.ndarray):
                    converted[0] += owner.size
                elif isinstance(owner, torch.Tensor):
                    converted[0] += owner.numel()

    sys.setprofile(hook)
    try:
        out = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return out, calls, converted[0]


def _parts(n, lengths=(1, 2, 3, 4), width=2, seed=0):
    """``n`` float32 torch components ``(L_i, width)``, ``L_i`` drawn from ``lengths`` (few distinct shapes)."""
    rng = np.random.default_rng(seed)
    data = torch.from_numpy(rng.standard_normal((n * max(lengths), width)).astype(np.float32))
    lens = rng.choice(lengths, n).tolist()
    starts = np.concatenate([[0], np.cumsum(lens)]).tolist()
    return [data[a:b].clone() for a, b in zip(starts, starts[1:])]


def _total(calls):
    return sum(calls.values())


# -- grouped work over few distinct component shapes --------------------------------------------------
def _transposed(n):
    return ln.nested_tensor(_parts(n)).transpose(1, 2)  # components (2, L_i): ragged in their last dim


def test_to_padded_tensor_of_few_shapes_converts_no_table_to_python():
    counts = []
    for n in (SMALL, LARGE):
        nt = _transposed(n)
        want = torch.nested.to_padded_tensor(
            torch.nested.nested_tensor([p.t().contiguous() for p in _parts(n)]), -1.0)
        got, calls, converted = _profile(nt.to_padded_tensor, -1.0)
        assert torch.equal(got, want)
        counts.append((converted, _total(calls)))
    # four distinct shapes: a few Python ints per group, whatever the number of components
    assert counts[1][0] <= 64, counts
    assert counts[0] == counts[1], counts


def test_batched_matmul_of_few_shapes_converts_no_table_to_python():
    counts = []
    for n in (SMALL, LARGE):
        parts = _parts(n)
        nt = ln.nested_tensor(parts)
        got, calls, converted = _profile(ln.matmul, nt, nt.transpose(1, 2))
        want = [p @ p.t() for p in parts]
        assert all(torch.allclose(a, b) for a, b in zip(got.unbind(), want))
        counts.append((converted, _total(calls)))
    assert counts[1][0] <= 64, counts
    assert counts[0] == counts[1], counts


# -- PackedSequence, both ways -------------------------------------------------------------------------
def test_to_packed_sequence_is_one_gather_and_equals_pack_sequence():
    counts = []
    for n in (SMALL, LARGE):
        parts = _parts(n)  # many equal lengths: torch's order of ties must come out too
        nt = ln.nested_tensor(parts)
        for enforce in (False, True):
            seqs = sorted(parts, key=lambda p: -p.shape[0]) if enforce else parts
            src = ln.nested_tensor(seqs) if enforce else nt
            got, calls, converted = _profile(src.to_packed_sequence, enforce_sorted=enforce)
            want = rnn.pack_sequence(seqs, enforce_sorted=enforce)
            assert torch.equal(got.data, want.data) and torch.equal(got.batch_sizes, want.batch_sizes)
            for a, b in ((got.sorted_indices, want.sorted_indices), (got.unsorted_indices, want.unsorted_indices)):
                assert (a is None and b is None) or torch.equal(a, b)
            counts.append((enforce, _total(calls), converted))
    assert counts[0] == counts[2] and counts[1] == counts[3], counts


def test_to_packed_sequence_enforce_sorted_refuses_like_torch():
    nt = ln.nested_tensor([torch.ones(1, 2), torch.ones(2, 2)])
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn.pack_sequence(list(nt.unbind()), enforce_sorted=True)
    with pytest.raises((RuntimeError, ValueError), match="must be sorted in decreasing order"):
        nt.to_packed_sequence(enforce_sorted=True)


def test_as_nested_tensor_of_a_packed_sequence_is_one_gather():
    counts = []
    for n in (SMALL, LARGE):
        parts = _parts(n)
        ps = rnn.pack_sequence(parts, enforce_sorted=False)
        got, calls, converted = _profile(ln.as_nested_tensor, ps)
        want = rnn.unpack_sequence(ps)
        assert got.nested_size().tolist() == [list(p.shape) for p in want]
        assert all(torch.equal(a, b) for a, b in zip(got.unbind(), want))
        counts.append((_total(calls), converted))
    assert counts[0] == counts[1], counts


def test_as_nested_tensor_of_a_packed_sequence_keeps_autograd_and_checks_it():
    x = torch.randn(6, 2, requires_grad=True)
    ps = rnn.pack_sequence([x[:2], x[2:3], x[3:]], enforce_sorted=False)
    nt = ln.as_nested_tensor(ps)
    (nt.to_padded_tensor(0.0) * torch.arange(18.0).reshape(3, 3, 2)).sum().backward()
    ref = x.detach().clone().requires_grad_(True)
    parts = rnn.unpack_sequence(rnn.pack_sequence([ref[:2], ref[2:3], ref[3:]], enforce_sorted=False))
    (rnn.pad_sequence(parts, batch_first=True) * torch.arange(18.0).reshape(3, 3, 2)).sum().backward()
    assert torch.equal(x.grad, ref.grad)
    bad = rnn.PackedSequence(ps.data, torch.tensor([1, 2, 3]), ps.sorted_indices, ps.unsorted_indices)
    with pytest.raises(ValueError, match=r"as_nested_tensor\(\): batch_sizes must be positive, non-increasing"):
        ln.as_nested_tensor(bad)


# -- construction from a list of tensors ---------------------------------------------------------------
@pytest.mark.parametrize("build", [ln.nested_tensor, ln.as_nested_tensor], ids=["nested_tensor", "as_nested_tensor"])
def test_building_from_tensors_joins_them_in_one_call(build):
    per_component = ("reshape", "detach", "to", "view", "flatten")
    counts = []
    for n in (SMALL, LARGE):
        parts = _parts(n)
        got, calls, _ = _profile(build, parts)
        want = torch.nested.nested_tensor(parts)
        assert torch.equal(got.to_padded_tensor(0.0), torch.nested.to_padded_tensor(want, 0.0))
        assert got.requires_grad is False and got.dtype == torch.float32
        counts.append({k: calls[k] for k in per_component})
    assert counts[0] == counts[1] and sum(counts[1].values()) <= 4, counts


def test_building_from_tensors_keeps_history_and_casts_like_torch():
    leaf = torch.randn(5, 2, requires_grad=True)
    nt = ln.as_nested_tensor([leaf[:2], leaf[2:]])
    nt.to_padded_tensor(0.0).sum().backward()
    assert torch.equal(leaf.grad, torch.ones(5, 2))
    fresh = ln.nested_tensor([leaf[:2], leaf[2:]])
    assert not fresh.requires_grad and fresh._buffer.grad_fn is None
    mixed = [torch.arange(4).reshape(2, 2), torch.ones(1, 2, dtype=torch.float64)]  # cast to the first's dtype
    want = torch.nested.nested_tensor(mixed)
    got = ln.nested_tensor(mixed)
    assert got.dtype == want.dtype == torch.int64
    assert torch.equal(got.to_padded_tensor(0), torch.nested.to_padded_tensor(want, 0))


# -- unpickling --------------------------------------------------------------------------------------
def test_unpickling_checks_the_size_table_without_a_loop_over_components():
    counts = []
    for n in (SMALL, LARGE):
        nt = ln.nested_tensor(_parts(n)).transpose(1, 2)  # a size table of two columns
        blob = pickle.dumps(nt)
        got, calls, _ = _profile(pickle.loads, blob)
        assert torch.equal(got.to_padded_tensor(0.0), nt.to_padded_tensor(0.0))
        counts.append(calls["py:prod"] + calls["py:_wrapreduction"])
    assert counts[0] == counts[1], counts


def test_unpickling_still_refuses_tables_that_do_not_fit():
    from lodtensor.nested._structure import Structure

    with pytest.raises(ValueError, match="the sizes hold 6 elements, the buffer 5"):
        Structure.checked(np.array([[2, 2], [1, 2]]), 5, "unpickling a NestedTensor")
    big = np.array([[1, 1], [2**40, 2**20], [2**30, 2**30], [3, 0]])  # rows 1 and 2: 2**60 positions each
    with pytest.raises(ValueError, match=r"component 1 has shape \(1099511627776, 1048576\), larger than any"):
        Structure.checked(big, 0, "unpickling a NestedTensor")
    # a product past int64 must not wrap around into a small, plausible count
    wrap = np.array([[2**32, 2**32]])
    with pytest.raises(ValueError, match="larger than any array can be"):
        Structure.checked(wrap, 0, "unpickling a NestedTensor")
    st = Structure.checked(np.array([[0, 7], [3, 2], [0, 0]]), 6, "unpickling a NestedTensor")
    assert st.offsets.tolist() == [0, 0, 6, 6]
