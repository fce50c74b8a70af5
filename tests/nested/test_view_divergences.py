"""Views of a nested tensor where lodtensor and torch 2.13's jagged layout disagreed, against real torch.

1. ``expand`` was a copy; torch's jagged ``expand`` is a view of ``values()`` (stride 0 along the grown dims):
   a write into the input shows in it, its autograd flags are a view's, in-place ops that would write one
   element twice refuse (``fill_``/``zero_`` do not), and it refuses a grown dim up to the ragged one.
2. A view taken before ``requires_grad_()`` on its input reported ``requires_grad`` (the two shared one
   array, whose flag ``requires_grad_()`` set) but gave no gradient; torch's does not require grad (a
   nested tensor's flag is its own: its views taken before never see it).
3. A view of a leaf that requires grad taken under ``torch.no_grad()`` reported ``requires_grad`` (a dense
   view of the leaf's buffer) and refused an in-place write afterwards; torch's does not require grad and
   takes the write (a leaf's ``values`` do not require grad, the nested tensor does).

``_base`` is not compared: torch's jagged ``_base`` is its internal dense ``values`` buffer, set even on a
freshly built nested tensor (``_is_view()`` True), None on op results and ``detach()``; lodtensor's nested
tensors have no ``_base``.
"""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _build(lib, row=(1, 3), requires_grad=False, nonleaf=False, layout=None):
    g = torch.Generator().manual_seed(0)
    comps = [torch.rand(n, *row, generator=g, dtype=torch.float64) for n in (2, 1, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = lib.nested_tensor(comps, layout=layout or torch.jagged, requires_grad=requires_grad)
    return nt * 1 if nonleaf else nt


def _flags(x):
    return x.is_leaf, x.requires_grad, x.grad_fn is None


def _comps(nt):
    return [c.detach().clone() for c in nt.unbind()]


def _same_comps(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        assert torch.equal(a, b)


def _outcome(fn):
    """What ``fn()`` gives (its value), or ``(class, first words of the message)`` where it raises."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the class and message are what is compared
        return type(e).__name__, str(e)[:60]


# -- 1. expand ----------------------------------------------------------------------------------------------
EXPANDS = {
    "grow a dim": ((1, 3), lambda nt: nt.expand(-1, -1, 4, -1)),
    "grow two dims": ((1, 1), lambda nt: nt.expand(3, -1, 5, 2)),
    "grow to 0": ((1, 3), lambda nt: nt.expand(-1, -1, 0, 3)),
    "the ragged size itself": ((1, 3), lambda nt: nt.expand(3, nt.shape[1], 4, 3)),
    "after a transpose": ((3, 1), lambda nt: nt.transpose(1, 2).expand(-1, -1, -1, 4)),
    "of a narrowed view": ((1, 3), lambda nt: nt.narrow(3, 0, 2).expand(-1, -1, 5, -1)),
    "broadcast_to": ((1, 3), lambda nt: torch.broadcast_to(nt, (3, -1, 4, 3))),
    "expand_as": ((1, 3), lambda nt: nt.expand_as(nt.expand(-1, -1, 4, -1))),
}


@pytest.mark.parametrize("name", list(EXPANDS))
def test_expand_is_a_view_of_the_input_as_torch(name):
    row, fn = EXPANDS[name]
    got = {}
    for lib in (torch.nested, ln):
        nt = _build(lib, row)
        out = fn(nt)
        nt.values().mul_(-2.0)  # a write into the input: seen through the view
        got[lib] = out
    ours, theirs = got[ln], got[torch.nested]
    _same_comps(_comps(ours), _comps(theirs))
    assert ours.values().stride() == theirs.values().stride()  # stride 0 along the grown dims
    assert ours.is_contiguous() == theirs.is_contiguous()


def test_views_of_an_expanded_view_match_torch():
    for fn in (lambda e: e.narrow(2, 1, 2), lambda e: e.transpose(2, 3), lambda e: e.unsqueeze(2), lambda e: e[1]):
        views = {lib: fn(_build(lib).expand(-1, -1, 5, -1)) for lib in (torch.nested, ln)}
        ours, theirs = views[ln], views[torch.nested]
        if isinstance(theirs, torch.Tensor) and not theirs.is_nested:
            assert ours.stride() == theirs.stride() and torch.equal(ours, theirs)
        else:
            assert ours.values().stride() == theirs.values().stride()
            _same_comps(_comps(ours), _comps(theirs))


@pytest.mark.parametrize("mode", ["plain", "leaf", "nonleaf"])
def test_expand_flags_and_gradient_match_torch(mode):
    requires_grad, nonleaf = mode != "plain", mode == "nonleaf"
    flags, grads = {}, {}
    for lib in (torch.nested, ln):
        leaf = _build(lib, requires_grad=requires_grad)
        nt = leaf * 1 if nonleaf else leaf
        grown, same = nt.expand(-1, -1, 4, -1), nt.expand(-1, -1, -1, -1)
        flags[lib] = (_flags(grown), _flags(same), same is nt)
        if requires_grad:
            (grown * torch.arange(1.0, 4.0, dtype=torch.float64)).sum().backward()
            grads[lib] = leaf.grad.values()
    assert flags[ln] == flags[torch.nested]
    if requires_grad:
        assert torch.allclose(grads[ln], grads[torch.nested])


def test_expand_refuses_as_torch():
    """Every case raises a RuntimeError in both, torch's words in ours; a dim up to the ragged one cannot
    grow (it was copied before)."""
    cases = [
        ((1, 3), lambda nt: nt.expand(2, -1, 4, 3), "cannot expand shape"),  # dim 0
        ((1, 3), lambda nt: nt.expand(3, 4, 4, 3), "cannot expand shape"),  # the ragged dim
        ((1, 3), lambda nt: nt.expand(1, 3, -1, 4, 3), "cannot expand shape"),  # a new leading dim
        ((1, 3), lambda nt: nt.transpose(1, 2).expand(-1, 4, -1, -1), "cannot expand shape"),  # before the ragged
        ((3, 1), lambda nt: nt.transpose(1, 3).expand(-1, 4, -1, -1), "cannot expand shape"),
        ((1, 3), lambda nt: nt.expand(3, -1, 4, 6), "must match the existing size (3)"),  # not of size 1
        ((1, 3), lambda nt: nt.expand(-1, -1, 2, 3).expand(-1, -1, 5, 3), "must match the existing size (2)"),
    ]
    for row, fn, words in cases:
        for lib in (torch.nested, ln):
            with pytest.raises(RuntimeError, match=words.replace("(", r"\(").replace(")", r"\)")):
                fn(_build(lib, row))


INPLACE = {
    "mul_": lambda e: e.mul_(2),
    "add_": lambda e: e.add_(1),
    "copy_": lambda e: e.copy_(e.detach().clone()),
    "relu_": lambda e: e.relu_(),
    "fill_": lambda e: e.fill_(2.5),
    "zero_": lambda e: e.zero_(),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_write_into_an_expanded_view_matches_torch(name):
    """torch refuses the ops that would write one element twice ("more than one element of the written-to
    tensor refers to a single memory location"); fill_ and zero_ write through into the input."""
    got = {}
    for lib in (torch.nested, ln):
        nt = _build(lib)
        outcome = _outcome(lambda nt=nt: (INPLACE[name](nt.expand(-1, -1, 4, -1)), "accepted")[1])
        got[lib] = outcome, nt.values().sum().item()
    assert got[ln] == got[torch.nested]


def test_expand_on_the_strided_layout_is_the_jagged_view():
    """torch's strided layout has no expand (NotImplementedError); ours gives the jagged layout's view."""
    theirs = _build(torch.nested).expand(-1, -1, 4, -1)
    nt = _build(ln, layout=torch.strided)
    ours = nt.expand(-1, -1, 4, -1)
    nt.values().mul_(-2.0)
    theirs_input = _build(torch.nested)
    theirs_input.values().mul_(-2.0)
    _same_comps(_comps(ours), _comps(theirs_input.expand(-1, -1, 4, -1)))
    assert ours.values().stride() == theirs.values().stride()
    with pytest.raises(NotImplementedError):
        _build(torch.nested, layout=torch.strided).expand(-1, -1, 4, -1)


def test_expand_of_numpy_data_is_a_view():
    nt = ln.nested_tensor([np.ones((2, 1, 3)), np.ones((1, 1, 3))])
    wide = nt.expand(-1, -1, 4, -1)
    assert np.shares_memory(wide.values(), nt.values()) and wide.values().strides[1] == 0
    nt.mul_(3.0)
    assert [c.tolist() for c in wide.unbind()] == [np.full((n, 4, 3), 3.0).tolist() for n in (2, 1)]


# -- 2. a view taken before requires_grad_() -----------------------------------------------------------------
VIEWS = {
    "transpose": lambda nt: nt.transpose(2, 3),
    "permute": lambda nt: nt.permute(0, 1, 3, 2),
    "narrow": lambda nt: nt.narrow(3, 0, 1),
    "slice": lambda nt: nt[..., 1:3],
    "select": lambda nt: nt.select(3, 0),
    "chunk": lambda nt: nt.chunk(2, dim=-1)[0],
    "split": lambda nt: nt.split(3, dim=-1)[1],
    "unsqueeze": lambda nt: nt.unsqueeze(-1),
    "unflatten": lambda nt: nt.unflatten(-1, (2, 2)),
    "view": lambda nt: nt.view(3, -1, 3, 4),
    "transpose_narrow": lambda nt: nt.transpose(2, 3).narrow(2, 1, 2),
    "unbind": lambda nt: nt.unbind()[1],
    "component": lambda nt: nt[2],
    "values": lambda nt: nt.values(),
}


def _backward_outcome(view, leaf):
    def run():
        (view * 2).sum().backward()
        return None if leaf.grad is None else round(float(leaf.grad.values().sum()), 9)

    return _outcome(run)


def _write_outcome(view):
    return _outcome(lambda: (view.mul_(2), "accepted")[1])


@pytest.mark.parametrize("name", list(VIEWS))
def test_a_view_taken_before_requires_grad_matches_torch(name):
    """Flags, what a backward through the view gives, and an in-place write into it afterwards."""
    got = {}
    for lib in (torch.nested, ln):
        nt = _build(lib, row=(3, 4))
        view = VIEWS[name](nt)
        nt.requires_grad_()
        flags = _flags(view)
        got[lib] = flags, _backward_outcome(view, nt), _write_outcome(view), _flags(nt)
    assert got[ln] == got[torch.nested]


def test_requires_grad_on_a_view_leaves_its_input_alone_as_torch():
    got = {}
    for lib in (torch.nested, ln):
        nt = _build(lib, row=(3, 4))
        view = nt.transpose(2, 3).requires_grad_()
        (view * 3).sum().backward()
        got[lib] = _flags(nt), _flags(view), nt.grad is None, float(view.grad.values().sum())
    assert got[ln] == got[torch.nested]


def test_the_tensor_still_shares_memory_with_its_earlier_views_after_requires_grad():
    got = {}
    for lib in (torch.nested, ln):
        nt = _build(lib, row=(3, 4))
        view = nt.transpose(2, 3)
        nt.requires_grad_()
        with torch.no_grad():
            nt.mul_(0.0)
        view.add_(1.0)
        got[lib] = float(view.values().sum()), float(nt.values().detach().sum())
    assert got[ln] == got[torch.nested] == (72.0, 72.0)


# -- 3. a view taken under torch.no_grad() ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(VIEWS))
def test_a_view_taken_under_no_grad_matches_torch(name):
    """Of a leaf that requires grad (the case that differed) and of a non-leaf (which agreed already)."""
    got = {}
    for lib in (torch.nested, ln):
        outcomes = []
        for nonleaf in (False, True):
            leaf = _build(lib, row=(3, 4), requires_grad=True)
            nt = leaf * 1 if nonleaf else leaf
            with torch.no_grad():
                view = VIEWS[name](nt)
            outcomes.append((_flags(view), _backward_outcome(view, leaf), _write_outcome(view)))
        got[lib] = outcomes
    assert got[ln] == got[torch.nested]


def test_a_leaf_still_tracks_after_a_view_taken_under_no_grad():
    got = {}
    for lib in (torch.nested, ln):
        nt = _build(lib, row=(3, 4), requires_grad=True)
        with torch.no_grad():
            view = nt.transpose(2, 3)
        view.mul_(2.0)  # accepted: untracked, as torch's
        (nt * 3).sum().backward()
        after = nt.transpose(2, 3)
        got[lib] = _flags(nt), _flags(after), float(nt.grad.values().sum()), float(nt.values().detach().sum())
    assert got[ln][:3] == got[torch.nested][:3]
    assert got[ln][3] == pytest.approx(got[torch.nested][3])
