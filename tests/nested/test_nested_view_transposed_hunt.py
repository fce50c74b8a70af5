"""A second reading of ``view()`` of a transposed nested tensor (``_permute.view_plans``, ``_dims.regrouped_view``,
``_shape._reshaped``): a view of the storage exactly where NumPy's no-copy reshape of every component gives one
(torch 2.13's jagged layout where it answers), torch's "view size is not compatible" error elsewhere; holes kept,
window views reshaped, autograd and ``torch.compile`` as eager.

Found here and fixed: a run merged into a storage left without a permutation, then split, crashed
(AttributeError); regular size-1 dims between merged dims, and size-1 dims moved across the ragged dim, were
refused (the plan lost the ragged dim's index); size-1 dims added before the ragged dim's storage axis (``view``
and ``unsqueeze``) put it second, so a tensor with holes was copied (lengths dropped, writes lost); a view of a
tensor with holes whose permutation a step dropped lost them the same way; an empty transposed view with holes
lost them; a transposed window view was silently copied (also where torch refuses); a merge across an irregular
dim of size <= 1 in every component with elements (the strided layout, the ragged dim in the middle) was refused,
and ``flatten`` across one (or a regular dim of size 1) copied (torch's jagged ``flatten`` views it)."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import lodtensor.nested as ln
from lodtensor.errors import ShapeError

torch = pytest.importorskip("torch")

_INCOMPATIBLE = "view size is not compatible with input tensor's size and stride"


def _np(x):
    return np.asarray(x.detach() if hasattr(x, "detach") else x)


def _reshape(dense, shape):
    """NumPy's no-copy reshape of one component (``-1`` keeps that dim of ``dense``), or None where none is."""
    try:
        return np.reshape(dense, [dense.shape[j] if s == -1 else s for j, s in enumerate(shape)], copy=False)
    except ValueError:
        return None


def _check(nt, parts, perm, shape, base_parts=None):
    """``nt.permute(0, *perm).view(len(parts), *shape)`` against NumPy per component: a view with its values that
    writes through to ``base_parts`` (default ``parts``: views of the data), or torch's error where any
    component has no no-copy reshape. Returns "view" or "refused"."""
    dense = [np.transpose(_np(p), perm) for p in parts]
    want = [_reshape(d, shape) for d in dense]
    t = nt.permute(0, *[p + 1 for p in perm])
    if any(w is None for w in want):
        with pytest.raises(ShapeError, match=_INCOMPATIBLE):
            t.view(len(parts), *shape)
        return "refused"
    got = t.view(len(parts), *shape)
    assert len(got.unbind()) == len(want)
    for g, w in zip(got.unbind(), want):
        np.testing.assert_array_equal(_np(g), w)
    before = [_np(p).copy() for p in (base_parts or parts)]
    got.mul_(-1)
    for p, b in zip(base_parts or parts, before):
        np.testing.assert_array_equal(_np(p), -b)
    return "view"


# -- the bugs found -------------------------------------------------------------------------------------------
def test_a_merge_that_leaves_no_permutation_then_a_split_is_a_view():
    """Storage (R, 2, 3, 1) read as (R, 1, 2, 3), viewed (R, 3, 2): the size-1 dim dropped and 2, 3 merged leave
    the storage in order (no permutation), then the split crashed (``_view`` took the missing size table)."""
    parts = [np.arange(n * 6, dtype=np.float64).reshape(n, 2, 3, 1) for n in (2, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    assert _check(nt, nt.unbind(), (0, 3, 1, 2), (-1, 3, 2)) == "view"


@pytest.mark.parametrize("case", [
    ((1, 2), (1, 2, 0), (2, 1, -1)),  # storage (R, 1, 2) read (1, 2, R), viewed (2, 1, R)
    ((2, 2, 2), (1, 2, 0, 3), (4, 1, -1, 2)),  # storage (R, 2, 2, 2) read (2, 2, R, 2), viewed (4, 1, R, 2)
    ((1, 3), (2, 1, 0), (1, 3, -1)),  # storage (R, 1, 3) read (3, 1, R), viewed (1, 3, R)
])
def test_size_one_dims_moved_before_the_ragged_dim_are_a_view(case):
    """The plan walked old and new dims together and took the first size-1 dim for the ragged one."""
    row, perm, shape = case
    parts = [np.arange(n * int(np.prod(row)), dtype=np.float64).reshape(n, *row) + 100 * i
             for i, n in enumerate((2, 3))]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    assert _check(nt, nt.unbind(), perm, shape) == "view"


@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_regular_size_one_dims_between_merged_dims_do_not_block_the_merge(layout):
    """Storage (R, 2, 1, 3) read (R, 2, 3, 1): 2 and 3 sit on storage axes 1 and 3 with a size-1 axis between,
    one run in memory (NumPy views it); it was refused."""
    parts = [np.arange(n * 6, dtype=np.float64).reshape(n, 2, 1, 3) for n in (2, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout=layout)
    assert _check(nt, nt.unbind(), (0, 1, 3, 2), (-1, 6)) == "view"


@pytest.mark.parametrize("shape", [(1, -1, 1), (1, -1, 1, 1, 1), (1, -1, 2, 1)])
def test_a_view_of_a_transposed_tensor_with_holes_whose_permutation_goes_keeps_them(shape):
    """Holes (R, 1) read (1, R): dropping the size-1 dim leaves no permutation; the next step put a new size-1
    dim first in the storage and the holes were copied away (lengths None, writes into the view lost)."""
    if 2 in shape:
        pytest.raises(ShapeError, ln.narrow(torch.zeros(2, 5, 1), 1, torch.tensor([0, 1]), torch.tensor([3, 2]),
                                            layout="jagged").transpose(1, 2).view, 2, *shape)
        return
    cache = torch.arange(2 * 5, dtype=torch.float64).reshape(2, 5, 1)
    nt = ln.narrow(cache, 1, torch.tensor([0, 1]), torch.tensor([3, 2]), layout="jagged")
    got = nt.transpose(1, 2).view(2, *shape)
    assert got.lengths().tolist() == [3, 2]
    got.mul_(-1)  # (an in-place op writes every row of the values, the holes too, as torch's)
    assert cache[0, :3].flatten().tolist() == [-0.0, -1.0, -2.0] and cache[1, 1:3].flatten().tolist() == [-6.0, -7.0]


def test_unsqueeze_just_before_a_moved_ragged_dim_keeps_the_holes_as_torch():
    """``unsqueeze`` of (2, R, 4) heads at dim 2: the new size-1 dim went before the rows in the storage, so the
    holes were copied away; torch keeps them (lengths, a view of the cache)."""
    cache, theirs_cache = (torch.arange(2 * 5 * 8, dtype=torch.float64).reshape(2, 5, 8) for _ in range(2))
    starts, lengths = torch.tensor([0, 1]), torch.tensor([3, 4])
    ours = ln.narrow(cache, 1, starts, lengths, layout="jagged").unflatten(-1, (2, 4)).transpose(1, 2).unsqueeze(2)
    theirs = torch.nested.narrow(theirs_cache, 1, starts, lengths, layout=torch.jagged).unflatten(
        -1, (2, 4)).transpose(1, 2).unsqueeze(2)
    assert ours.lengths().tolist() == theirs._lengths.tolist()
    cache[1, 2] = -7.0
    theirs_cache[1, 2] = -7.0
    for a, b in zip(ours.unbind(), theirs.unbind()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_view_before_a_moved_ragged_dim_with_holes_keeps_them():
    """(2, 2, R, 2) read from cache rows (R, 2, 2, 2), viewed (4, 1, R, 2): the new size-1 dim must not go
    before the rows."""
    cache = torch.arange(2 * 5 * 8, dtype=torch.float64).reshape(2, 5, 8)
    nt = ln.narrow(cache, 1, torch.tensor([0, 1]), torch.tensor([3, 4]), layout="jagged")
    got = nt.unflatten(-1, (2, 2, 2)).permute(0, 2, 3, 1, 4).view(2, 4, 1, -1, 2)
    assert got.lengths().tolist() == [3, 4]
    cache[1, 2] = -9.0
    assert (got.unbind()[1][:, 0, 1] == -9.0).all()
    got.add_(1)
    assert (cache[1, 2] == -8.0).all() and cache[1, 1, 0].item() == 49.0


@pytest.mark.parametrize("shape", [(2, -1, 6, 2), (2, -1, 3, 2, 2), (2, -1, 1, 6, 2)])
def test_an_empty_transposed_view_with_holes_keeps_them_where_torch_does(shape):
    cache, theirs_cache = torch.zeros(2, 3, 2, 6, dtype=torch.float64), torch.zeros(2, 3, 2, 6, dtype=torch.float64)
    starts, lengths = torch.tensor([0, 1]), torch.tensor([0, 0])
    ours = ln.narrow(cache, 1, starts, lengths, layout="jagged").transpose(2, 3).view(*shape)
    theirs = torch.nested.narrow(theirs_cache, 1, starts, lengths, layout=torch.jagged).transpose(2, 3).view(*shape)
    assert theirs._lengths is not None
    assert ours.lengths().tolist() == [0, 0]
    assert [tuple(c.shape) for c in ours.unbind()] == [tuple(c.shape) for c in theirs.unbind()]


def _windows():
    parts = [torch.arange(n * 24, dtype=torch.float64).reshape(n, 4, 6) + 100 * i for i, n in enumerate((2, 3))]
    return parts, ln.nested_tensor([p.clone() for p in parts], layout="jagged"), torch.nested.nested_tensor(
        [p.clone() for p in parts], layout=torch.jagged)


_WINDOWS = {"slice": (lambda x: x[..., 1:3], lambda d: d[..., 1:3]),
            "narrow": (lambda x: x.narrow(-1, 0, 2), lambda d: d[..., 0:2]),
            "narrow_dim2": (lambda x: x.narrow(2, 1, 2), lambda d: d[:, 1:3])}


@pytest.mark.parametrize("window", sorted(_WINDOWS))
@pytest.mark.parametrize("tail", [(2, 2, 2), (1, 2, -1), (-1, 1)])
def test_a_transposed_window_view_viewed_as_torch_views_it_writes_through(window, tail):
    """torch views these (the window's strides allow it); they were copies here."""
    cut, dense_cut = _WINDOWS[window]
    parts, ours, theirs = _windows()
    base = list(cut(ours).transpose(2, 3).shape[2:])
    shape = {(2, 2, 2): None, (1, 2, -1): [1, *base], (-1, 1): [*base, 1]}[tail]
    if shape is None:  # a regular dim split in two
        shape = [base[0], 2, base[1] // 2] if base[1] % 2 == 0 and base[1] > 2 else [2, base[0] // 2, base[1]]
    want = cut(theirs).transpose(2, 3).view(2, -1, *shape)
    got = cut(ours).transpose(2, 3).view(2, -1, *shape)
    for a, b, p in zip(got.unbind(), want.unbind(), parts):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        torch.testing.assert_close(a, dense_cut(p).transpose(1, 2).reshape(b.shape), rtol=0, atol=0)
    got.add_(1000)
    want.add_(1000)
    torch.testing.assert_close(ours.values(), theirs.values(), rtol=0, atol=0)


@pytest.mark.parametrize("window", sorted(_WINDOWS))
def test_a_transposed_window_view_merged_across_the_window_raises_as_torch(window):
    cut, _ = _WINDOWS[window]
    _, ours, theirs = _windows()
    merged = int(np.prod(cut(ours).transpose(2, 3).shape[2:]))
    with pytest.raises(RuntimeError, match=_INCOMPATIBLE):
        cut(theirs).transpose(2, 3).view(2, -1, merged)
    before = ours.values().clone()
    with pytest.raises(ShapeError, match=_INCOMPATIBLE):
        cut(ours).transpose(2, 3).view(2, -1, merged)
    torch.testing.assert_close(ours.values(), before, rtol=0, atol=0)
    assert cut(ours).transpose(2, 3).reshape(2, -1, merged).shape[2] == merged  # (reshape copies)


@pytest.mark.parametrize("window", sorted(_WINDOWS))
@pytest.mark.parametrize("tail", ["split", "one"])
def test_a_window_view_with_the_ragged_dim_moved_is_a_view_as_numpy(window, tail):
    """torch refuses (ragged_idx != 1); NumPy views each component: a view of the window here."""
    cut, dense_cut = _WINDOWS[window]
    parts, ours, _ = _windows()
    t = cut(ours).transpose(1, 2)
    head, last = t.shape[1], t.shape[3]
    if tail == "split" and last % 2:
        pytest.skip("odd")
    shape = (2, head, -1, 2, last // 2) if tail == "split" else (2, head, -1, last, 1)
    got = t.view(*shape)
    for g, p in zip(got.unbind(), parts):
        d = dense_cut(p).transpose(0, 1)
        w = _reshape(d.numpy(), shape[1:])
        assert w is not None
        np.testing.assert_array_equal(g.numpy(), w)
    got.mul_(0)
    for c, p in zip(ours.unbind(), parts):
        assert float(dense_cut(c).abs().sum()) == 0.0
        assert float(c.abs().sum()) == float(p.abs().sum() - dense_cut(p).abs().sum())


# -- differential against NumPy's no-copy reshape of every component ---------------------------------------------
def _factor(total, count, rng):
    if count == 0:
        return [] if total == 1 else None
    out, rest = [], total
    for _ in range(count - 1):
        d = rng.choice([d for d in range(1, rest + 1) if rest % d == 0])
        out.append(d)
        rest //= d
    out.append(rest)
    if rng.random() < 0.3:
        rng.shuffle(out)
    return out


def _target(logical, regular, rng):
    """A random shape with the elements of ``logical`` (one component's dims): irregular dims kept (-1) at their
    index, the regular ones between them regrouped (merged, split, size-1 dims added or dropped)."""
    kept = [a for a in range(len(logical)) if not regular[a]]
    out, prev = [], -1
    for k in kept + [None]:
        seg = logical[prev + 1: len(logical) if k is None else k]
        total = int(np.prod(seg)) if seg else 1
        if total == 0:
            return None
        count = len(seg) if k is not None else rng.randint(0 if total == 1 else 1, 4)
        f = _factor(total, count, rng)
        if f is None:
            return None
        out += f
        if k is not None:
            out.append(-1)
            prev = k
    return out


def _random_case(seed, layout):
    rng = random.Random(seed)
    rank = rng.randint(2, 4)
    row = [rng.choice([1, 2, 3, 4, 2, 6]) for _ in range(rank - 1)]
    lengths = [rng.choice([0, 1, 2, 3, 4]) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.15:
        lengths = [1] * len(lengths)
    shapes = [[n] + row for n in lengths]
    if layout == "strided" and rank >= 3 and rng.random() < 0.3:
        axis = rng.randint(1, rank - 1)
        for s in shapes:
            s[axis] = rng.choice([2, 3])
    perm = list(range(rank))
    rng.shuffle(perm)
    return rng, shapes, tuple(perm)


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["jagged", "strided"])
@pytest.mark.parametrize("block", range(4))
def test_random_views_match_numpys_no_copy_reshape_per_component(block, layout, library):
    """50 random cases a test: components of rank 2 to 4 (size-1 dims, components of 0 or 1 row), a permutation,
    a regrouping; each a view exactly where NumPy views every component, with its values, writing through."""
    outcomes = set()
    for seed in range(block * 50, block * 50 + 50):
        rng, shapes, perm = _random_case(seed, layout)
        if library == "torch":
            parts = [torch.arange(int(np.prod(s)), dtype=torch.float64).reshape(s) + 1000 * i
                     for i, s in enumerate(shapes)]
            nt = ln.nested_tensor([p.clone() for p in parts], layout=layout)
        else:
            parts = [np.arange(int(np.prod(s)), dtype=np.int64).reshape(s) + 1000 * i for i, s in enumerate(shapes)]
            nt = ln.nested_tensor([p.copy() for p in parts], layout=layout)
        t = nt.permute(0, *[p + 1 for p in perm])
        shape = _target([int(s) for s in t._struct.sizes[0]], t._struct.regular, rng)
        if shape is None:
            continue
        if any(s == 1 and j < len(t._struct.regular) and not t._struct.regular[j] for j, s in enumerate(shape)):
            continue
        outcomes.add(_check(nt, nt.unbind(), perm, shape))
    assert outcomes == {"view", "refused"}


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("block", range(3))
def test_random_views_of_tensors_with_holes_keep_them_and_reach_the_cache(block, library):
    """Holes (``ln.narrow`` of a cache), permuted, viewed: as NumPy per component; where a view, it keeps the
    holes (when it has elements), sees a write into the cache, and an in-place op on it reaches the cache."""
    outcomes = set()
    lib = torch if library == "torch" else np
    for seed in range(block * 40, block * 40 + 40):
        rng, shapes, perm = _random_case(seed, "jagged")
        row, lengths = shapes[0][1:], [s[0] for s in shapes]
        steps = max(lengths) + 2
        cache = lib.arange(len(lengths) * steps * int(np.prod(row)), dtype=lib.float64).reshape(
            len(lengths), steps, *row)
        starts = [rng.randint(0, steps - n) for n in lengths]
        index = (torch.tensor if library == "torch" else np.array)
        nt = ln.narrow(cache, 1, index(starts), index(lengths), layout="jagged")
        parts = [cache[i, s:s + n] for i, (s, n) in enumerate(zip(starts, lengths))]
        t = nt.permute(0, *[p + 1 for p in perm])
        shape = _target([int(s) for s in t._struct.sizes[0]], t._struct.regular, rng)
        if shape is None:
            continue
        dense = [np.transpose(_np(p), perm) for p in parts]
        want = [_reshape(d, shape) for d in dense]
        if any(w is None for w in want):
            with pytest.raises(ShapeError, match=_INCOMPATIBLE):
                t.view(len(parts), *shape)
            outcomes.add("refused")
            continue
        got = t.view(len(parts), *shape)
        if nt.lengths() is not None and sum(lengths):
            assert got.lengths().tolist() == lengths
        _writes_go_both_ways(got, parts, want)
        outcomes.add("view")
    assert outcomes == {"view", "refused"}


@pytest.mark.parametrize("block", range(3))
def test_random_transposed_window_views_match_numpy(block):
    outcomes = set()
    for seed in range(block * 50, block * 50 + 50):
        rng, shapes, perm = _random_case(seed, "jagged")
        row = shapes[0][1:]
        axes = [a for a, s in enumerate(row) if s >= 2]
        if not axes:
            continue
        axis = rng.choice(axes) + 1
        lo = rng.randint(0, shapes[0][axis] - 2)
        hi = rng.randint(lo + 1, shapes[0][axis] - (1 if lo == 0 else 0))
        parts = [np.arange(int(np.prod(s)), dtype=np.float64).reshape(s) + 1000 * i for i, s in enumerate(shapes)]
        nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged").narrow(axis + 1, lo, hi - lo)
        assert nt._src is not None
        cut = [c for c in nt.unbind()]  # (views of the window's source)
        t = nt.permute(0, *[p + 1 for p in perm])
        shape = _target([int(s) for s in t._struct.sizes[0]], t._struct.regular, rng)
        if shape is None:
            continue
        outcomes.add(_check(nt, cut, perm, shape))
    assert outcomes == {"view", "refused"}


def test_a_merge_across_an_irregular_dim_of_size_one_everywhere_is_a_view():
    parts = [np.arange(6, dtype=np.float64).reshape(2, 1, 3), np.zeros((2, 0, 3))]
    nt = ln.nested_tensor([p.copy() for p in parts])
    assert _check(nt, nt.unbind(), (1, 0, 2), (-1, 6)) == "view"


def _shares(nt, perm, shape):
    """``nt.permute(0, *perm).view(n, *shape)`` against NumPy's no-copy reshape of every component of ``nt``
    (``np.reshape(copy=False)``, ``np.shares_memory``): where each has one, a view with its values sharing
    each non-empty component's memory, a write into ``nt`` seen through it and one through it seen in ``nt``;
    elsewhere torch's error with our detail. Returns "view" or "refused"."""
    parts = nt.unbind()
    dense = [np.transpose(_np(p), perm) for p in parts]
    want = [_reshape(d, shape) for d in dense]
    t = nt.permute(0, *[p + 1 for p in perm])
    if any(w is None for w in want):
        with pytest.raises(ShapeError, match=_INCOMPATIBLE + ".*Use .reshape.*a transposed view"):
            t.view(len(parts), *shape)
        return "refused"
    assert all(np.shares_memory(w, _np(p)) == bool(w.size) for w, p in zip(want, parts))
    got = t.view(len(parts), *shape)
    mine = got.unbind()
    assert len(mine) == len(want)
    for g, w, p in zip(mine, want, parts):
        assert tuple(g.shape) == w.shape
        np.testing.assert_array_equal(_np(g), w)
        assert np.shares_memory(_np(g), _np(p)) == bool(w.size)
    _writes_go_both_ways(got, parts, want)
    return "view"


def _writes_go_both_ways(got, parts, want):
    """A write into the parts shows in the view ``got`` (``want`` its values before), one through ``got`` in them."""
    for p in parts:
        p += 0.5
    for g, w in zip(got.unbind(), want):
        np.testing.assert_array_equal(_np(g), w)
    before = [_np(p).copy() for p in parts]
    got.mul_(-1)
    for p, b in zip(parts, before):
        np.testing.assert_array_equal(_np(p), -b)


_LOOSE_CASES = {  # name: (component shapes, perm, view shape, outcome); the loose dims are irregular
    "one and empty": ([(2, 1, 3), (2, 0, 3)], (1, 0, 2), (-1, 6), "view"),
    "merged then split": ([(2, 1, 3), (2, 0, 3)], (1, 0, 2), (-1, 3, 2), "view"),
    "mixed zeros and ones": ([(2, 1, 3), (2, 0, 3), (2, 1, 3), (2, 0, 3)], (1, 0, 2), (-1, 6), "view"),
    "all empty": ([(2, 0, 3), (2, 0, 3)], (1, 0, 2), (-1, 6), "view"),
    "two loose dims between": ([(2, 1, 1, 3), (2, 0, 1, 3), (2, 1, 0, 3)], (1, 2, 0, 3), (-1, -1, 6), "view"),
    "size two in a component without elements": ([(2, 2, 1, 3), (0, 2, 2, 3)], (2, 0, 1, 3), (-1, -1, 6),
                                                 "view"),
    "size two in a component with elements": ([(2, 1, 3), (2, 2, 3)], (1, 0, 2), (-1, 6), "refused"),
    "a regular dim between too": ([(2, 1, 4, 3), (2, 0, 4, 3)], (1, 2, 0, 3), (-1, 4, 6), "refused"),
    "merged dims out of storage order": ([(2, 1, 3), (2, 0, 3)], (1, 2, 0), (-1, 6), "refused"),
    "in storage order, no merge across": ([(2, 1, 3), (2, 0, 3)], (1, 0, 2), (-1, 2, 3), "view"),
}


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("case", sorted(_LOOSE_CASES))
def test_merges_across_irregular_dims_of_size_zero_or_one_view_as_numpy(case, library):
    shapes, perm, shape, outcome = _LOOSE_CASES[case]
    lib = torch if library == "torch" else np
    parts = [lib.arange(int(np.prod(s)), dtype=lib.float64).reshape(s) + 100 * i for i, s in enumerate(shapes)]
    nt = ln.nested_tensor(parts, layout="strided")
    assert _shares(nt, perm, shape) == outcome


def test_flatten_across_a_loose_dim_views_as_torchs_jagged_flatten():
    """torch 2.13's jagged ``flatten`` of a transposed tensor across a regular dim of size 1 views its values;
    here too (and across an irregular dim of size <= 1, which torch's layouts cannot have)."""
    parts = [torch.arange(6.0).reshape(1, 2, 1, 3), torch.arange(12.0).reshape(2, 2, 1, 3)]
    theirs = torch.nested.nested_tensor([p.clone() for p in parts], layout=torch.jagged)
    flat = theirs.transpose(2, 3).flatten(3, 4)
    assert flat._values.data_ptr() == theirs._values.data_ptr()
    ours = ln.nested_tensor([p.clone() for p in parts], layout="jagged")
    mine = ours.transpose(2, 3).flatten(3, 4)
    assert tuple(mine.shape[2:]) == tuple(flat.shape[2:])
    for a, b in zip(mine.unbind(), flat.unbind()):
        np.testing.assert_array_equal(_np(a), _np(b))
    mine.mul_(-1)
    for a, p in zip(ours.unbind(), parts):
        np.testing.assert_array_equal(_np(a), -p.numpy())
    nt = ln.nested_tensor([np.arange(6.0).reshape(2, 1, 3), np.zeros((2, 0, 3))])
    loose = nt.permute(0, 2, 1, 3).flatten(2, 3)
    assert [tuple(c.shape) for c in loose.unbind()] == [(1, 6), (0, 6)]
    assert np.shares_memory(loose.unbind()[0], nt.unbind()[0])


@settings(max_examples=100, deadline=None)
@given(hs.data())
def test_random_views_across_irregular_dims_of_sizes_zero_and_one_match_numpy(data):
    """Strided components with irregular middle storage dims of sizes from {0, 1} (or {0, 1, 2}: then NumPy
    copies where a component with elements has a 2 between merged dims), permuted (often with those dims moved
    first, so that the others merge across them), regrouped at random: a view sharing every component's memory
    exactly where NumPy's no-copy reshape of each is one, torch's error elsewhere."""
    rank = data.draw(hs.integers(3, 4))
    row = data.draw(hs.lists(hs.sampled_from([1, 2, 2, 3, 4]), min_size=rank, max_size=rank))
    loose = data.draw(hs.sets(hs.integers(1, rank - 2), min_size=1))
    pool = data.draw(hs.sampled_from([(0, 1), (0, 1, 1), (0, 1, 2)]))
    count = data.draw(hs.integers(1, 4))
    shapes = [[data.draw(hs.sampled_from(pool)) if a in loose else row[a] for a in range(rank)]
              for _ in range(count)]
    perm = tuple(data.draw(hs.permutations(range(rank))))
    if data.draw(hs.booleans()):
        perm = (*sorted(loose), *[a for a in range(rank) if a not in loose])
    parts = [np.arange(int(np.prod(s)), dtype=np.float64).reshape(s) + 100 * i for i, s in enumerate(shapes)]
    nt = ln.nested_tensor(parts, layout="strided")
    t = nt.permute(0, *[p + 1 for p in perm])
    shape = _target([int(s) for s in t._struct.sizes[0]], t._struct.regular,
                    random.Random(data.draw(hs.integers(0, 2**16))))
    if shape is not None:
        _shares(nt, perm, shape)


# -- torch 2.13's jagged layout with the ragged dim in place -------------------------------------------------------
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("block", range(3))
def test_random_views_with_the_ragged_dim_in_place_view_or_refuse_as_torch(block, holes):
    """Regular dims permuted (transposed where holes: torch permutes none with them), regrouped: torch views or
    refuses by strides; the same answer here, the components of a dense reference (torch's view of a tensor with
    holes drops its lengths: its components are wrong), the same writes."""
    seen = set()
    for seed in range(block * 40, block * 40 + 40):
        rng = random.Random(seed)
        rank = rng.randint(3, 4)
        row = [rng.choice([1, 2, 3, 4, 6]) for _ in range(rank - 1)]
        lengths = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 3))]
        count = len(lengths)
        if holes:
            steps = max(lengths) + 2
            cache = torch.arange(count * steps * int(np.prod(row)), dtype=torch.float64).reshape(count, steps, *row)
            mirror = cache.clone()
            starts, lens = torch.tensor([rng.randint(0, steps - n) for n in lengths]), torch.tensor(lengths)
            ours = ln.narrow(cache, 1, starts, lens, layout="jagged")
            theirs = torch.nested.narrow(mirror, 1, starts, lens, layout=torch.jagged)
            a, b = rng.sample(range(2, rank + 1), 2)
            o, t = ours.transpose(a, b), theirs.transpose(a, b)
            dense = [cache[i, int(s):int(s) + n].clone().transpose(a - 1, b - 1) for i, (s, n) in
                     enumerate(zip(starts, lengths))]
        else:
            parts = [torch.arange(n * int(np.prod(row)), dtype=torch.float64).reshape(n, *row) + 1000 * i
                     for i, n in enumerate(lengths)]
            ours = ln.nested_tensor([p.clone() for p in parts], layout="jagged")
            theirs = torch.nested.nested_tensor([p.clone() for p in parts], layout=torch.jagged)
            order = list(range(2, rank + 1))
            rng.shuffle(order)
            o, t = ours.permute(0, 1, *order), theirs.permute(0, 1, *order)
            dense = [p.permute(0, *[k - 1 for k in order]) for p in parts]
        f = _factor(int(np.prod(o.shape[2:])), rng.randint(1, 4), rng)
        if rng.random() < 0.3:
            f.insert(rng.randint(0, len(f)), 1)
        shape = (count, -1, *f)
        try:
            want = t.view(*shape)
        except RuntimeError as e:
            assert _INCOMPATIBLE in str(e)
            with pytest.raises(ShapeError, match=_INCOMPATIBLE):
                o.view(*shape)
            seen.add("refused")
            continue
        got = o.view(*shape)
        for g, d in zip(got.unbind(), dense):
            torch.testing.assert_close(g, d.reshape(d.shape[0], *f), rtol=0, atol=0)
        if holes and ours.lengths() is not None:
            assert got.lengths().tolist() == lengths
        got.mul_(-1)
        want.mul_(-1)
        if holes:  # (the live rows: torch's view dropped the lengths, so its in-place op spans other rows)
            for i, (s, n) in enumerate(zip(starts.tolist(), lengths)):
                torch.testing.assert_close(cache[i, s:s + n], mirror[i, s:s + n], rtol=0, atol=0)
        else:
            torch.testing.assert_close(ours.values(), theirs.values(), rtol=0, atol=0)
        seen.add("view")
    assert seen == {"view", "refused"}


# -- spellings, dtypes, empty tensors, chains --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.int8])
def test_int_and_float_numpy_dtypes(dtype):
    parts = [np.arange(n * 24).astype(dtype).reshape(n, 4, 6) for n in (1, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    got = nt.transpose(2, 3).view(2, -1, 3, 2, 4)
    assert got.dtype == nt.dtype
    assert _check(nt, nt.unbind(), (0, 2, 1), (-1, 3, 2, 4)) == "view"


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bfloat16, torch.bool])
def test_torch_dtypes(dtype):
    parts = [(torch.arange(n * 24).reshape(n, 4, 6) % 2).to(dtype) for n in (2, 1)]
    nt = ln.nested_tensor([p.clone() for p in parts], layout="jagged")
    got = nt.transpose(1, 2).view(2, 4, -1, 3, 2)
    for g, p in zip(got.unbind(), parts):
        assert g.dtype == dtype
        torch.testing.assert_close(g, p.transpose(0, 1).reshape(4, p.shape[0], 3, 2), rtol=0, atol=0)
    got.zero_()
    assert not nt.values().any()


@pytest.mark.parametrize("first", [2, -1])
def test_minus_one_spells_the_batch_and_the_ragged_dim(first):
    parts = [np.arange(n * 24, dtype=np.float64).reshape(n, 4, 6) for n in (2, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    got = nt.transpose(2, 3).view(first, -1, 3, 2, 4)
    assert got.nested_size().tolist() == [[2, 3, 2, 4], [3, 3, 2, 4]]
    got.fill_(5.0)
    assert (nt.values() == 5.0).all()


def test_no_components():
    nt = ln.nested_tensor([np.zeros((2, 4, 6))], layout="jagged")[0:0]
    assert len(nt.unbind()) == 0
    got = nt.transpose(2, 3).view(0, -1, 3, 2, 4)
    assert len(got.unbind()) == 0 and got.dim() == 5


@pytest.mark.parametrize("lengths", [(0,), (0, 0), (0, 2), (1,), (1, 1)])
def test_components_of_no_or_one_row(lengths):
    parts = [np.arange(n * 24, dtype=np.float64).reshape(n, 4, 6) for n in lengths]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    got = nt.transpose(2, 3).view(len(parts), -1, 3, 2, 4)
    assert got.nested_size().tolist() == [[n, 3, 2, 4] for n in lengths]
    for g, p in zip(got.unbind(), parts):
        np.testing.assert_array_equal(g, p.swapaxes(1, 2).reshape(p.shape[0], 3, 2, 4))
    got.add_(1)
    for c, p in zip(nt.unbind(), parts):
        np.testing.assert_array_equal(c, p + 1)


def test_regular_dims_of_size_zero_view_as_numpy_any_empty_array():
    parts = [np.zeros((n, 0, 6)) for n in (2, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    for shape in [(2, -1, 6, 0), (2, -1, 3, 0, 2), (2, -1, 0, 1, 6)]:
        got = nt.transpose(2, 3).view(*shape)
        assert got.nested_size().tolist() == [[n, *shape[2:]] for n in (2, 3)]


def test_a_component_of_one_row_and_size_one_dims_everywhere():
    parts = [np.arange(4, dtype=np.float64).reshape(1, 1, 4, 1), np.arange(8, dtype=np.float64).reshape(2, 1, 4, 1)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    for perm, shape in [((0, 3, 2, 1), (-1, 2, 2)), ((2, 0, 1, 3), (4, -1, 1)), ((3, 1, 0, 2), (1, 1, -1, 2, 2))]:
        nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
        assert _check(nt, nt.unbind(), perm, shape) == "view"


@pytest.mark.parametrize("rank", [4, 5])
def test_five_and_six_d_nested_tensors_permuted_then_viewed(rank):
    row = [2, 3, 2, 2][: rank - 1]
    parts = [np.arange(n * int(np.prod(row)), dtype=np.float64).reshape(n, *row) for n in (2, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    perm = (0, *reversed(range(1, rank)))  # ragged first, the rest reversed: no two in storage order
    assert _check(nt, nt.unbind(), perm, (-1, *reversed(row))) == "view"
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    assert _check(nt, nt.unbind(), perm, (-1, int(np.prod(row)))) == "refused"
    rot = (0, *range(2, rank), 1)  # the first regular dim moved last: the others merge (in storage order)
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    assert _check(nt, nt.unbind(), rot, (-1, int(np.prod(row[1:])), row[0])) == "view"
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    assert _check(nt, nt.unbind(), rot, (-1, int(np.prod(row)))) == "refused"


def test_views_of_views_transpose_view_transpose_view():
    """Each step as NumPy's no-copy reshape of the previous step's components; all views of the first buffer."""
    parts = [np.arange(n * 24, dtype=np.float64).reshape(n, 4, 6) for n in (2, 3)]
    nt = ln.nested_tensor([p.copy() for p in parts], layout="jagged")
    a = nt.transpose(2, 3).view(2, -1, 3, 2, 4)  # (R, 3, 2, 4)
    with pytest.raises(ShapeError, match=_INCOMPATIBLE):  # (R, 4, 2, 3): 2, 3 reversed in storage, as NumPy
        a.transpose(2, 4).view(2, -1, 4, 6, 1)
    assert _reshape(np.swapaxes(parts[1].swapaxes(1, 2).reshape(3, 3, 2, 4), 1, 3), (-1, 4, 6, 1)) is None
    with pytest.raises(ShapeError, match=_INCOMPATIBLE):  # (3, R, 2, 4): 2, 4 apart in storage
        a.transpose(1, 2).view(2, 3, -1, 8)
    c = a.transpose(1, 2).view(2, 3, -1, 2, 2, 2)  # (3, R, 2, 4) -> (3, R, 2, 2, 2)
    d = c.transpose(1, 2).view(2, -1, 3, 2, 4)  # (R, 3, 2, 2, 2) -> (R, 3, 2, 4): a again
    for got, p in zip(d.unbind(), parts):
        n = p.shape[0]
        step = _reshape(np.swapaxes(_reshape(p.swapaxes(1, 2), (-1, 3, 2, 4)), 0, 1), (3, -1, 2, 2, 2))
        step = _reshape(np.swapaxes(step, 0, 1), (-1, 3, 2, 4))
        assert step is not None and np.shares_memory(step, p)
        np.testing.assert_array_equal(got, step)
        np.testing.assert_array_equal(got, p.swapaxes(1, 2).reshape(n, 3, 2, 4))
    d.mul_(0)
    assert float(np.abs(nt.values()).sum()) == 0.0


def test_nested_tensor_from_jagged_with_lengths_transposed_then_viewed():
    values = torch.arange(10 * 8, dtype=torch.float64).reshape(10, 8)
    offsets, lengths = torch.tensor([0, 4, 10]), torch.tensor([2, 3])
    nt = ln.nested_tensor_from_jagged(values, offsets, lengths=lengths)
    heads = nt.unflatten(-1, (2, 4)).transpose(1, 2)
    got = heads.view(2, 2, -1, 2, 2)
    assert got.lengths().tolist() == [2, 3]
    for g, (o, n) in zip(got.unbind(), [(0, 2), (4, 3)]):
        torch.testing.assert_close(g, values[o:o + n].reshape(n, 2, 4).transpose(0, 1).reshape(2, n, 2, 2))
    got.mul_(-1)
    assert (values[0:2] <= 0).all() and (values[4:7] <= 0).all()  # (and the holes: every row, as torch's)
    with pytest.raises(ShapeError, match=_INCOMPATIBLE):
        nt.unflatten(-1, (2, 4)).transpose(2, 3).view(2, -1, 8)


# -- autograd and torch.compile ----------------------------------------------------------------------------------
_GRAD_CASES = {
    "split": (lambda x: x.transpose(2, 3).view(2, -1, 3, 2, 4).sin() * 2,
              lambda d: d.transpose(1, 2).reshape(d.shape[0], 3, 2, 4).sin() * 2),
    "ragged_moved": (lambda x: x.transpose(1, 2).view(2, 4, -1, 3, 2).exp(),
                     lambda d: d.transpose(0, 1).reshape(4, d.shape[0], 3, 2).exp()),
    "permute_3": (lambda x: x.unflatten(-1, (2, 3)).permute(0, 3, 1, 2, 4).view(2, 2, -1, 2, 2, 3),
                  lambda d: d.unflatten(-1, (2, 3)).permute(2, 0, 1, 3).reshape(2, d.shape[0], 2, 2, 3)),
    "chain": (lambda x: x.transpose(1, 2).view(2, 4, -1, 3, 2).transpose(1, 3).view(2, 3, -1, 2, 2, 2) ** 2,
              lambda d: (d.transpose(0, 1).reshape(4, d.shape[0], 3, 2).transpose(0, 2)
                         .reshape(3, d.shape[0], 2, 2, 2) ** 2)),
}


@pytest.mark.parametrize("case", sorted(_GRAD_CASES))
def test_gradients_through_a_transposed_view_equal_the_dense_ones(case):
    fn, dense_fn = _GRAD_CASES[case]
    g = torch.Generator().manual_seed(3)
    parts = [torch.randn(n, 4, 6, generator=g, dtype=torch.float64) for n in (2, 3)]
    leaves = [p.clone().requires_grad_() for p in parts]
    nt = ln.nested_tensor([p.clone() for p in parts], layout="jagged", requires_grad=True)
    out = fn(nt)
    weights = [torch.randn(c.shape, generator=g, dtype=torch.float64) for c in out.unbind()]
    sum((c * w).sum() for c, w in zip(out.unbind(), weights)).backward()
    dense = [dense_fn(leaf) for leaf in leaves]
    sum((d * w).sum() for d, w in zip(dense, weights)).backward()
    for c, d in zip(out.unbind(), dense):
        torch.testing.assert_close(c.detach(), d.detach())
    for got, leaf in zip(nt.grad.unbind(), leaves):
        torch.testing.assert_close(got, leaf.grad)


def test_an_in_place_op_on_the_view_of_a_non_leaf_reaches_it_and_its_gradient():
    parts = [torch.arange(n * 24, dtype=torch.float64).reshape(n, 4, 6) for n in (2, 3)]
    nt = ln.nested_tensor([p.clone() for p in parts], layout="jagged", requires_grad=True)
    y = nt * 1
    y.transpose(2, 3).view(2, -1, 3, 2, 4).mul_(3)
    (y * y).sum().backward()
    for c, gr, p in zip(y.unbind(), nt.grad.unbind(), parts):
        torch.testing.assert_close(c.detach(), 3 * p)
        torch.testing.assert_close(gr, 18 * p)


def test_an_in_place_op_on_the_view_of_a_leaf_is_refused_and_leaves_it():
    parts = [torch.arange(n * 24, dtype=torch.float64).reshape(n, 4, 6) for n in (2, 3)]
    nt = ln.nested_tensor([p.clone() for p in parts], layout="jagged", requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        nt.transpose(2, 3).view(2, -1, 3, 2, 4).mul_(2)
    for c, p in zip(nt.unbind(), parts):
        torch.testing.assert_close(c.detach(), p)


def test_a_view_of_holes_with_autograd_writes_the_cache_gradient():
    cache = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    nt = ln.narrow(cache, 1, torch.tensor([0, 1]), torch.tensor([3, 4]), layout="jagged")
    heads = nt.unflatten(-1, (2, 4)).transpose(1, 2).view(2, 2, -1, 2, 2)
    sum((c * 2).sum() for c in heads.unbind()).backward()
    want = torch.zeros(2, 5, 8, dtype=torch.float64)
    want[0, 0:3] = 2
    want[1, 1:5] = 2
    torch.testing.assert_close(cache.grad, want)


def _compiled_case(x):
    return x.transpose(2, 3).view(2, -1, 3, 2, 4) * 2 + 1


def _compiled_ragged(x):
    return x.unflatten(-1, (2, 3)).transpose(1, 2).view(2, 4, -1, 6, 1).sin()


@pytest.mark.parametrize("fn", [_compiled_case, _compiled_ragged])
def test_torch_compile_eager_backend_matches_eager(fn):
    parts = [torch.arange(n * 24, dtype=torch.float32).reshape(n, 4, 6) for n in (2, 3)]
    eager = fn(ln.nested_tensor([p.clone() for p in parts], layout="jagged"))
    compiled = torch.compile(fn, backend="eager")(ln.nested_tensor([p.clone() for p in parts], layout="jagged"))
    for a, b in zip(eager.unbind(), compiled.unbind()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_torch_compile_refuses_as_eager_and_writes_through():
    parts = [torch.arange(n * 24, dtype=torch.float32).reshape(n, 4, 6) for n in (2, 3)]

    def bad(x):
        return x.transpose(2, 3).view(2, -1, 24)

    def write(x):
        v = x.transpose(2, 3).view(2, -1, 3, 2, 4)
        v.mul_(0)
        return v

    with pytest.raises(ShapeError, match=_INCOMPATIBLE):
        torch.compile(bad, backend="eager")(ln.nested_tensor([p.clone() for p in parts], layout="jagged"))
    nt = ln.nested_tensor([p.clone() for p in parts], layout="jagged")
    torch.compile(write, backend="eager")(nt)
    assert float(nt.values().abs().sum()) == 0.0


# -- a third reading: flatten across a size-1 dim out of storage order ----------------------------------------
@pytest.mark.parametrize("case", [
    ((1, 2), (0, 2, 1), 2, 3),  # storage (R, 1, 2) read (R, 2, 1): the size-1 dim last
    ((2, 1), (0, 2, 1), 2, 3),  # storage (R, 2, 1) read (R, 1, 2): the size-1 dim first
    ((1, 1, 3), (0, 3, 2, 1), 2, 4),  # storage (R, 1, 1, 3) read (R, 3, 1, 1)
    ((1, 2, 3), (0, 2, 3, 1), 3, 4),  # storage (R, 1, 2, 3) read (R, 2, 3, 1): 3 and 1 merged
])
def test_flatten_across_a_size_one_dim_out_of_storage_order_is_a_view_as_torch(case):
    """The merge wanted its storage axes in increasing order, the size-1 ones too: ``flatten`` copied (writes
    through it lost) where torch's jagged ``flatten`` and NumPy's no-copy reshape of every component view."""
    row, perm, a, b = case
    parts = [torch.arange(n * int(np.prod(row)), dtype=torch.float64).reshape(n, *row) + 100 * i
             for i, n in enumerate((2, 3))]
    ours = ln.nested_tensor([p.clone() for p in parts], layout="jagged")
    theirs = torch.nested.nested_tensor([p.clone() for p in parts], layout=torch.jagged)
    want = theirs.permute(0, *[p + 1 for p in perm]).flatten(a, b)
    got = ours.permute(0, *[p + 1 for p in perm]).flatten(a, b)
    for g, w, p in zip(got.unbind(), want.unbind(), parts):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
        assert _reshape(p.permute(*perm).numpy(), list(w.shape)) is not None
    want.add_(1000)
    got.add_(1000)
    assert theirs.values().min() >= 1000  # (torch's is a view)
    torch.testing.assert_close(ours.values(), theirs.values(), rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_flatten_of_transposed_views_writes_through_exactly_where_numpy_views(layout):
    """Every flatten of two or more regular dims of every permutation of rows (R, *row), row a shape of 1s, 2s
    and 3s with a 1 (components of 0 to 3 rows): a view (a write through it reaches the base) exactly where
    NumPy's no-copy reshape of every component gives one, with the values of the dense flatten."""
    import itertools

    views = copies = 0
    for row in [r for k in (2, 3) for r in itertools.product([1, 2, 3], repeat=k) if 1 in r]:
        rank = len(row) + 1
        parts = [torch.arange(n * int(np.prod(row)), dtype=torch.float64).reshape(n, *row) + 100 * i
                 for i, n in enumerate((1, 0, 3))]
        for perm in itertools.permutations(range(1, rank)):
            perm = (0, *perm)
            for a, b in itertools.combinations(range(1, rank), 2):
                nt = ln.nested_tensor([p.clone() for p in parts], layout=layout)
                got = nt.permute(0, *[p + 1 for p in perm]).flatten(a + 1, b + 1)
                dense = [p.permute(*perm) for p in parts]
                merged = [[*d.shape[:a], int(np.prod(d.shape[a:b + 1])), *d.shape[b + 1:]] for d in dense]
                for g, d, m in zip(got.unbind(), dense, merged):
                    torch.testing.assert_close(g, d.reshape(m), rtol=0, atol=0)
                view = all(_reshape(d.numpy(), m) is not None for d, m in zip(dense, merged))
                got.add_(1000)
                wrote = [bool((c >= 1000).all()) for c in nt.unbind() if c.numel()]
                assert wrote == [view] * len(wrote), (row, perm, a, b)
                views, copies = views + view, copies + (not view)
    assert views > 100 and copies > 50
