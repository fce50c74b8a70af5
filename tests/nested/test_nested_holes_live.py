"""A nested tensor with holes as a view of its ``values``, against torch 2.13: with torch data, a write into the
values (from outside: the caller's cache; through ``values()``; through a component from ``unbind()`` or
``nt[i]``; through a view of the tensor) shows in the tensor and in every view of it taken before, and the
components from ``unbind()``/``nt[i]`` are views of the values; transposed, permuted and regrouped views
(``unflatten``, ``view``, ``unsqueeze``) keep the holes (``values()``, ``offsets()``, ``lengths()`` as torch's) and
write into the values. Pickles of such views round-trip (NumPy and torch). ``lodtensor/nested/_holes.py``."""

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor.nested as ln  # noqa: E402

START, LENGTH = [0, 1, 2], [2, 3, 1]


def _base(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, 4, 2, generator=g, dtype=torch.float64)


def _narrow(lib, base):
    s, n = torch.tensor(START), torch.tensor(LENGTH)
    if lib == "torch":
        return torch.nested.narrow(base, 1, s, n, layout=torch.jagged)
    return ln.narrow(base, 1, s, n, layout="jagged")


def _components_equal(ours, theirs, tol=0.0):
    got, want = ours.unbind(), theirs.unbind()
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def _holes_equal(ours, theirs, tol=0.0):
    assert ours.lengths() is not None, "the holes were dropped"
    assert ours.lengths().tolist() == theirs.lengths().tolist()
    assert ours.offsets().tolist() == theirs.offsets().tolist()
    torch.testing.assert_close(ours.values(), theirs.values(), rtol=tol, atol=tol)
    _components_equal(ours, theirs, tol)


def _component_rows(base):
    """The rows of ``base`` (3, 4, 2) that the components hold, as a (3, 4) bool mask."""
    mask = torch.zeros(3, 4, dtype=torch.bool)
    for i, (s, n) in enumerate(zip(START, LENGTH)):
        mask[i, s:s + n] = True
    return mask


# writes into the values, each applied to torch's pair (nt, base) and ours
WRITES = {
    "base item": lambda nt, base: base.__setitem__((1, 2), 7.0),
    "base mul_": lambda nt, base: base.mul_(-2),
    "base slice add_": lambda nt, base: base[:, 1:3].add_(1),
    "values() item": lambda nt, base: nt.values().__setitem__(3, 5.0),
    "values() zero_": lambda nt, base: nt.values()[4:].zero_(),
    "unbind() add_": lambda nt, base: nt.unbind()[1].add_(1),
    "unbind() item": lambda nt, base: nt.unbind()[0].__setitem__((1, 0), -3.0),
    "nt[i] fill_": lambda nt, base: nt[2].fill_(9),
    "nt[i] mul_": lambda nt, base: nt[1].mul_(3),
    "transposed component add_": lambda nt, base: nt.transpose(1, 2)[1].add_(4),
    "unflatten component zero_": lambda nt, base: nt.unflatten(-1, (2, 1))[0].zero_(),
    "unflatten add_": lambda nt, base: nt.unflatten(-1, (2, 1)).add_(1),
    "unsqueeze mul_": lambda nt, base: nt.unsqueeze(-1).mul_(2),
    "nt add_": lambda nt, base: nt.add_(1),
}

# reads of the tensor after the write
READS = {
    "unbind": lambda nt: nt,
    "mul": lambda nt: nt * 1,
    "sin": lambda nt: nt.sin(),
    "sum row dim": lambda nt: nt.sum(dim=-1),
    "padded": lambda nt: nt.contiguous().to_padded_tensor(0.0),
    "softmax": lambda nt: nt.softmax(-1),
    "clone": lambda nt: nt.clone(),
    "contiguous": lambda nt: nt.contiguous(),
    "transpose": lambda nt: nt.transpose(1, 2),
    "unflatten": lambda nt: nt.unflatten(-1, (1, 2)),
}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_into_the_values_shows_in_the_tensor_and_its_results(write, read):
    pairs = {}
    for lib in ("torch", "ours"):
        base = _base(1)
        nt = _narrow(lib, base)
        READS[read](nt).unbind()  # (read once before the write: what is gathered then must not be kept)
        WRITES[write](nt, base)
        pairs[lib] = (READS[read](nt), base)
    (ours, our_base), (theirs, their_base) = pairs["ours"], pairs["torch"]
    _components_equal(ours, theirs)
    # every row torch writes (an in-place op on the tensor or a view of it writes its holes too)
    torch.testing.assert_close(our_base, their_base, rtol=0, atol=0)


@pytest.mark.parametrize("write", list(WRITES))
def test_views_taken_before_a_write_see_it(write):
    views = {}
    for lib in ("torch", "ours"):
        base = _base(2)
        nt = _narrow(lib, base)
        taken = {"transpose": nt.transpose(1, 2), "heads": nt.unflatten(-1, (2, 1)).transpose(1, 2),
                 "unsqueeze": nt.unsqueeze(2), "view": nt.view(3, -1, 1, 2)}
        WRITES[write](nt, base)
        views[lib] = taken
    for name in views["torch"]:
        _components_equal(views["ours"][name], views["torch"][name])


@pytest.mark.parametrize("make_view", [
    lambda nt: nt.transpose(1, 2),
    lambda nt: nt.unflatten(-1, (2, 1)),
    lambda nt: nt.unflatten(-1, (2, 1)).transpose(1, 2),
    lambda nt: nt.unsqueeze(-1),
    lambda nt: nt.view(3, -1, 1, 2),
], ids=["transpose", "unflatten", "heads", "unsqueeze", "view"])
def test_views_keep_the_holes_as_torch(make_view):
    ours, theirs = (make_view(_narrow(lib, _base(3))) for lib in ("ours", "torch"))
    _holes_equal(ours, theirs)
    assert ours.is_contiguous() == theirs.is_contiguous()


def test_reshape_copies_as_torch():
    """torch's ``reshape`` of a tensor with holes is a copy without them; a write into it reaches neither the
    values nor the tensor."""
    got = {}
    for lib in ("torch", "ours"):
        base = _base(9)
        nt = _narrow(lib, base)
        out = nt.reshape(3, -1, 2, 1)
        out.mul_(0)
        got[lib] = (out, nt, base)
    (ours, nt, base), (theirs, their_nt, their_base) = got["ours"], got["torch"]
    assert ours.lengths() is None and theirs.lengths() is None
    assert ours.is_contiguous() and theirs.is_contiguous()
    _components_equal(ours, theirs)
    _components_equal(nt, their_nt)
    torch.testing.assert_close(base, _base(9), rtol=0, atol=0)
    torch.testing.assert_close(their_base, _base(9), rtol=0, atol=0)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_a_slice_of_dim_0_keeps_the_holes_of_its_components(lib):
    """A slice of dim 0 (which torch refuses on a tensor with holes) keeps its components' holes over the run of
    rows they span: an in-place op writes that run (its holes too, as torch's ops on a tensor with holes), never
    another component's rows; components out of order give a copy."""
    base = np.arange(24.0).reshape(3, 4, 2)
    base = torch.from_numpy(base) if lib == "torch" else base
    nt = ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")
    part = nt[1:]
    assert part.lengths().tolist() == LENGTH[1:] and part.offsets().tolist() == [0, 5, 6]
    assert tuple(part.values().shape) == (6, 2) and np.shares_memory(np.asarray(part.values()), np.asarray(base))
    part.add_(100)
    want = np.arange(24.0).reshape(12, 2)
    want[5:11] += 100  # rows 5..10 of the values: component 1 (5:8), a hole (8:10), component 2 (10)
    np.testing.assert_array_equal(np.asarray(base).reshape(12, 2), want)
    for got, expected in zip(nt.unbind()[1:], part.unbind()):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    values = base.reshape(12, 2)
    shuffled = ln.nested_tensor_from_jagged(values, offsets=np.array([6, 0, 3, 12]), lengths=np.array([2, 2, 1]))
    copy = shuffled[0:2]
    assert copy.lengths() is None and not np.shares_memory(np.asarray(copy.values()), np.asarray(base))


def test_components_are_views_of_the_values():
    base = _base(4)
    nt = ln.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout="jagged")
    for i, part in enumerate(nt.unbind()):
        assert part.data_ptr() == base[i, START[i]].data_ptr()
    assert nt[1].data_ptr() == base[1, 1].data_ptr()
    assert nt.transpose(1, 2)[2].data_ptr() == base[2, 2].data_ptr()


@pytest.mark.parametrize("op", [
    lambda t: t.mul_(2),
    lambda t: t.sin_(),
    lambda t: t.clamp_(min=0.0),
    lambda t: t.fill_(3.0),
    lambda t: t.copy_(t * 2),
    lambda t: t[1].add_(5),
], ids=["mul_", "sin_", "clamp_", "fill_", "copy_", "component add_"])
def test_a_write_through_a_transposed_view_as_torch(op):
    """In-place ops through a transposed view write into the base as torch's: every row of it (the holes too)
    for the ops over all of values, the component's rows for a component."""
    got = {}
    for lib in ("torch", "ours"):
        base = _base(5)
        nt = _narrow(lib, base)
        op(nt.transpose(1, 2))
        got[lib] = (base, nt)
    torch.testing.assert_close(got["ours"][0], got["torch"][0], rtol=0, atol=0)
    _components_equal(got["ours"][1], got["torch"][1])


@pytest.mark.parametrize("op", [
    lambda t: t * 2,
    lambda t: t.sin(),
    lambda t: t + t,
    lambda t: torch.where(t > 0, t, 0.5 * t),
    lambda t: t.clamp(-0.5, 0.5),
    lambda t: t.softmax(1),
    lambda t: t.sum(1),
    lambda t: t.amax(1, keepdim=True),
    lambda t: t.max(1).values,
    lambda t: t.max(1).indices,
    lambda t: t.to(torch.float32),
    lambda t: t.clone(),
], ids=["mul", "sin", "add self", "where", "clamp", "softmax row dim", "sum row dim", "amax keepdim", "max values",
        "max indices", "to float32", "clone"])
def test_ops_on_a_transposed_view_keep_the_holes_as_torch(op):
    ours, theirs = (op(_narrow(lib, _base(12)).transpose(1, 2)) for lib in ("ours", "torch"))
    _holes_equal(ours, theirs, 1e-12)  # (softmax over a strided dim: torch's sums in another order)


def test_no_gather_while_nothing_is_written():
    """The buffer is gathered again only after a write into the values (their version moves on)."""
    base = _base(6)
    nt = ln.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout="jagged")
    buf = nt._buf
    nt.unbind(), nt * 2, nt.sum(dim=1), nt.transpose(1, 2).unbind()
    assert nt._buf is buf
    base[0, 0] = 1.0
    assert nt._buf is not buf


def test_gradients_reach_values_written_after_the_tensor_was_made():
    grads = {}
    for lib in ("torch", "ours"):
        leaf = _base(7).requires_grad_()
        values = leaf * 1
        nt = _narrow(lib, values)
        values[0, 1] = values[0, 1] * 3  # (recorded by autograd: the tensor reads the values as written)
        weighted = nt.sin() * torch.arange(1.0, 3.0, dtype=torch.float64)
        sum(part.sum() for part in weighted.unbind()).backward()
        grads[lib] = leaf.grad
    torch.testing.assert_close(grads["ours"], grads["torch"], rtol=1e-12, atol=1e-12)


def test_a_leaf_made_with_requires_grad_keeps_its_grad_across_a_write():
    base = _base(8)
    nt = ln.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout="jagged").requires_grad_()
    base.add_(1)  # the values change after requires_grad_(): the leaf reads them, still a leaf
    assert nt.is_leaf and nt.requires_grad
    torch.testing.assert_close(nt.unbind()[1], base[1, 1:4], rtol=0, atol=0)
    (nt * 2).sum(dim=1).sum().backward()
    assert nt.grad is not None
    for part in nt.grad.unbind():
        torch.testing.assert_close(part, torch.full_like(part, 2.0), rtol=0, atol=0)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("make_view", [
    lambda nt: nt.transpose(1, 2),
    lambda nt: nt.permute(0, 2, 3, 1),
    lambda nt: nt.permute(0, 3, 1, 2),
    lambda nt: nt.unflatten(-1, (2, 1)),
], ids=["transpose", "permute-3-1", "permute-1-2", "unflatten"])
def test_pickles_of_views_with_holes_round_trip(lib, make_view):
    base = np.arange(3 * 4 * 3 * 2, dtype=np.float32).reshape(3, 4, 3, 2)
    base = torch.from_numpy(base) if lib == "torch" else base
    nt = make_view(ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged"))
    back = pickle.loads(pickle.dumps(nt))
    assert back.lengths().tolist() == LENGTH and back.offsets().tolist() == nt.offsets().tolist()
    assert tuple(back.values().shape) == tuple(nt.values().shape)
    for a, b in zip(back.unbind(), nt.unbind()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_numpy_views_keep_the_holes_and_write_into_the_values():
    """NumPy arrays count no writes: the tensor keeps its gathered copy (a write into the base from outside is
    not seen), but views keep the holes and in-place ops through them write into the base."""
    base = np.arange(24.0).reshape(3, 4, 2)
    nt = ln.narrow(base, 1, np.array(START), np.array(LENGTH), layout="jagged")
    t = nt.transpose(1, 2)
    assert t.values().shape == (2, 12) and t.lengths().tolist() == LENGTH
    t.mul_(-1)  # (an elementwise op: every row of the values, the holes too, as torch's)
    np.testing.assert_array_equal(base, -np.arange(24.0).reshape(3, 4, 2))
    t.masked_fill_(t > -5, 0.0)  # (not elementwise over values: the components' rows)
    mask = _component_rows(torch.from_numpy(base)).numpy()
    want = -np.arange(24.0).reshape(3, 4, 2)
    np.testing.assert_array_equal(base[~mask], want[~mask])
    np.testing.assert_array_equal(base[mask], np.where(want[mask] > -5, 0.0, want[mask]))
    heads = nt.unflatten(-1, (2, 1))
    assert heads.values().shape == (12, 2, 1) and np.shares_memory(heads.values(), base)


def test_values_made_under_inference_mode_count_no_writes():
    """Inference tensors keep no version counter: such a tensor with holes works (ops keep the holes) and holds
    its gathered copy, as with NumPy data."""
    with torch.inference_mode():
        base = _base(13)
        nt = ln.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout="jagged")
        doubled = nt * 2
        assert doubled.lengths().tolist() == LENGTH
        torch.testing.assert_close(doubled.values(), base.reshape(12, 2) * 2, rtol=0, atol=0)
        assert nt.transpose(1, 2).sum(1).lengths().tolist() == LENGTH
        nt.add_(1)  # (in-place ops still write into the values)
        torch.testing.assert_close(base, _base(13) + 1, rtol=0, atol=0)
    outside = _base(14)
    with torch.inference_mode():  # (a normal tensor counts its writes, inside inference mode too)
        nt = ln.narrow(outside, 1, torch.tensor(START), torch.tensor(LENGTH), layout="jagged")
        outside[0, 0] = 42.0
        assert float(nt.unbind()[0][0, 0]) == 42.0


def test_copy_of_a_tensor_without_holes_into_a_transposed_view_reaches_the_values():
    """(torch refuses this copy; ours writes the components' rows of the values, as any write through the view.)"""
    base = torch.arange(24.0, dtype=torch.float64).reshape(3, 4, 2)
    nt = ln.narrow(base, 1, torch.tensor(START), torch.tensor(LENGTH), layout="jagged")
    src = ln.nested_tensor([torch.full((2, n), -1.0, dtype=torch.float64) for n in LENGTH], layout="jagged")
    nt.transpose(1, 2).copy_(src)
    mask = _component_rows(base)
    assert bool((base[mask] == -1).all())
    torch.testing.assert_close(base[~mask], torch.arange(24.0, dtype=torch.float64).reshape(3, 4, 2)[~mask])
    for part in nt.unbind():
        assert bool((part == -1).all())


@pytest.mark.parametrize("convert", ["numpy", "to_torch"])
def test_numpy_and_to_torch_keep_the_holes_over_the_same_memory(convert):
    """``numpy()`` of torch data with holes and ``to_torch()`` of NumPy data: the same holes over the values seen
    by the other library (shared memory, as for a tensor without holes), so an in-place op through the result
    reaches the caller's base."""
    base = np.arange(24.0).reshape(3, 4, 2)
    start = torch.from_numpy(base) if convert == "numpy" else base
    nt = ln.narrow(start, 1, np.array(START), np.array(LENGTH), layout="jagged")
    out = getattr(nt, convert)()
    assert out.lengths().tolist() == LENGTH and out.offsets().tolist() == nt.offsets().tolist()
    assert np.shares_memory(np.asarray(out.values()), base)
    for a, b in zip(out.unbind(), nt.unbind()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    out.mul_(2)
    np.testing.assert_array_equal(base, np.arange(24.0).reshape(3, 4, 2) * 2)
    t = getattr(nt.transpose(1, 2), convert)()
    assert tuple(t.values().shape) == (2, 12) and t.lengths().tolist() == LENGTH


def test_as_nested_tensor_of_torch_s_tensor_with_holes_is_a_view_with_them():
    """``as_nested_tensor`` of torch's jagged tensor with holes: the same holes over the same values (as
    torch's ``as_nested_tensor`` returns its input), so a later write into the base shows in it."""
    base = _base(15)
    theirs = _narrow("torch", base)
    ours = ln.as_nested_tensor(theirs)
    _holes_equal(ours, theirs)
    assert ours.values().data_ptr() == base.data_ptr()
    base[1, 2] = -9.0
    _components_equal(ours, theirs)
    bad = torch.nested.nested_tensor_from_jagged(torch.zeros(4, 2), torch.tensor([0, 3, 4]),
                                                 lengths=torch.tensor([2, 2]))
    with pytest.raises(Exception, match="outside the 4 rows"):  # (torch does not check; the gate does)
        ln.as_nested_tensor(bad)
