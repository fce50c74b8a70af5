"""Autograd flags of views of a nested tensor whose data requires grad, against torch 2.13's jagged layout.

Each case builds the same nested tensor with ``torch.nested.nested_tensor(..., layout=torch.jagged)`` and with
``lodtensor.nested`` over torch data, applies the same view op, and compares what torch says:
``is_leaf``, ``requires_grad`` and ``grad_fn is None`` of the view; what ``pickle`` and ``copy.deepcopy`` of the
view give (flags, or the error class); and whether an in-place write into a ``chunk`` / ``split`` piece is
refused (torch: a RuntimeError, "... is a view and is being modified inplace ... multiple views ...") or accepted.
"""

import copy
import pickle
import warnings

import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _build(lib, requires_grad=True, nonleaf=False):
    g = torch.Generator().manual_seed(0)
    comps = [torch.rand(n, 3, 4, generator=g, dtype=torch.float64) for n in (2, 1, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = lib.nested_tensor(comps, layout=torch.jagged, requires_grad=requires_grad)
    return nt * 1 if nonleaf else nt


VIEWS = {
    "transpose": lambda nt: nt.transpose(2, 3),
    "transpose_back": lambda nt: nt.transpose(2, 3).transpose(2, 3),
    "permute": lambda nt: nt.permute(0, 1, 3, 2),
    "narrow": lambda nt: nt.narrow(3, 0, 1),
    "slice": lambda nt: nt[..., 1:3],
    "select": lambda nt: nt.select(3, 0),
    "chunk_0": lambda nt: nt.chunk(2, dim=-1)[0],
    "chunk_1": lambda nt: nt.chunk(2, dim=-1)[1],
    "split": lambda nt: nt.split(3, dim=-1)[1],
    "split_with_sizes": lambda nt: nt.split_with_sizes([1, 3], dim=-1)[0],
    "unbind": lambda nt: nt.unbind()[1],
    "detach": lambda nt: nt.detach(),
    "unsqueeze": lambda nt: nt.unsqueeze(-1),
    "unflatten": lambda nt: nt.unflatten(-1, (2, 2)),
    "view": lambda nt: nt.view(3, -1, 3, 4),
}


def _flags(x):
    return x.is_leaf, x.requires_grad, x.grad_fn is None


def _outcome(fn):
    """The flags of ``fn()``'s result, or the class of the error it raises."""
    try:
        return _flags(fn())
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)


@pytest.mark.parametrize("nonleaf", [False, True], ids=["leaf", "nonleaf"])
@pytest.mark.parametrize("name", list(VIEWS))
def test_view_flags_match_torch(name, nonleaf):
    view = VIEWS[name]
    want = _flags(view(_build(torch.nested, nonleaf=nonleaf)))
    got = _flags(view(_build(ln, nonleaf=nonleaf)))
    assert got == want, f"{name}: (is_leaf, requires_grad, grad_fn is None) {got}, torch {want}"


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_flags_without_requires_grad_match_torch(name):
    view = VIEWS[name]
    want = _flags(view(_build(torch.nested, requires_grad=False)))
    assert _flags(view(_build(ln, requires_grad=False))) == want


def test_transposed_view_of_a_leaf_backpropagates_into_the_leaf():
    ours, theirs = _build(ln), _build(torch.nested)
    for nt in (ours, theirs):
        (nt.transpose(2, 3) * 3).sum().backward()
    assert torch.equal(ours.grad.values(), theirs.grad.values())


def _pickled(x):
    return pickle.loads(pickle.dumps(x))


@pytest.mark.parametrize("copier", [_pickled, copy.deepcopy], ids=["pickle", "deepcopy"])
@pytest.mark.parametrize("nonleaf", [False, True], ids=["leaf", "nonleaf"])
@pytest.mark.parametrize("name", ["transpose", "narrow", "slice", "select", "chunk_0", "split", "unsqueeze"])
def test_pickle_and_deepcopy_of_a_view_match_torch(name, nonleaf, copier):
    view = VIEWS[name]
    want = _outcome(lambda: copier(view(_build(torch.nested, nonleaf=nonleaf))))
    got = _outcome(lambda: copier(view(_build(ln, nonleaf=nonleaf))))
    assert got == want, f"{copier.__name__} of {name}: {got}, torch {want}"


def test_pickle_of_a_non_leaf_keeps_values_and_requires_grad():
    nt = _build(ln, nonleaf=True)
    back = _pickled(nt.chunk(2, dim=-1)[1])
    theirs = _pickled(_build(torch.nested, nonleaf=True).chunk(2, dim=-1)[1])
    assert back.requires_grad and back.is_leaf
    assert torch.equal(back.values().detach(), theirs.values().detach())


WRITES = {
    "chunk_mul_": lambda nt: nt.chunk(2, dim=-1)[0].mul_(2),
    "chunk_add_": lambda nt: nt.chunk(2, dim=-1)[1].add_(1),
    "split_mul_": lambda nt: nt.split(2, dim=-1)[0].mul_(2),
    "split_with_sizes_mul_": lambda nt: nt.split_with_sizes([1, 3], dim=-1)[1].mul_(2),
    "chunk_fill_": lambda nt: nt.chunk(2, dim=-1)[0].fill_(0),
    "chunk_copy_": lambda nt: nt.chunk(2, dim=-1)[0].copy_(nt.chunk(2, dim=-1)[1].detach()),
    "chunk_detach_mul_": lambda nt: nt.chunk(2, dim=-1)[0].detach().mul_(2),
    "narrow_mul_": lambda nt: nt.narrow(3, 0, 2).mul_(2),
    "transpose_mul_": lambda nt: nt.transpose(2, 3).mul_(2),
}


def _write_outcome(write, nt):
    try:
        write(nt)
        return "accepted"
    except RuntimeError as e:
        return RuntimeError, ("modified inplace" in str(e) or "in-place" in str(e))


@pytest.mark.parametrize("mode", ["plain", "leaf", "nonleaf"])
@pytest.mark.parametrize("name", list(WRITES))
def test_inplace_write_into_a_piece_matches_torch(name, mode):
    requires_grad, nonleaf = mode != "plain", mode == "nonleaf"
    write = WRITES[name]
    want = _write_outcome(write, _build(torch.nested, requires_grad, nonleaf))
    got = _write_outcome(write, _build(ln, requires_grad, nonleaf))
    assert got == want, f"{name} ({mode}): {got}, torch {want}"


def test_inplace_write_into_a_piece_of_a_non_leaf_is_refused_naming_the_multi_output_view():
    nt = _build(ln, nonleaf=True)
    with pytest.raises(RuntimeError, match="multiple"):
        nt.chunk(2, dim=-1)[0].mul_(2)


def test_pieces_without_grad_still_share_memory_with_the_input():
    nt = _build(ln, requires_grad=False)
    a, b = nt.chunk(2, dim=-1)
    b.fill_(7.0)
    assert torch.equal(nt.values()[..., 2:], torch.full_like(nt.values()[..., 2:], 7.0))
    assert torch.equal(a.values(), nt.values()[..., :2])

def test_inplace_write_into_a_piece_with_grad_mode_off_is_accepted_as_torch():
    outcomes = []
    for lib in (torch.nested, ln):
        nt = _build(lib, nonleaf=True)
        with torch.no_grad():
            outcomes.append(_write_outcome(WRITES["chunk_mul_"], nt))
    assert outcomes[1] == outcomes[0]
