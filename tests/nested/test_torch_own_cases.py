"""Cases learned from PyTorch's own nested-tensor tests (``test/test_nestedtensor.py``), run on torch 2.13.

Each test names the torch test whose behaviour it checks. The calls run on
``torch.nested`` (the layout the torch test uses) and on ``lodtensor.nested``
built from the same torch components; results, shapes, dtypes, gradients and
which calls raise are compared. No code is taken from the torch file: the
harness below is ours. Where torch 2.13 is wrong or inconsistent between its
layouts the test says so and checks the per-component dense answer instead.
"""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# -- the harness ----------------------------------------------------------------------------------
def _build(lib, comps, layout, **kw):
    """A nested tensor of clones of ``comps`` in ``lib`` ('torch' or 'ln') with ``layout``."""
    comps = [c.detach().clone() for c in comps]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lib == "torch":
            return torch.nested.nested_tensor(comps, layout=layout, **kw)
        return ln.nested_tensor(comps, layout=layout, **kw)


def _outcome(fn):
    try:
        return fn(), None
    except Exception as err:  # noqa: BLE001 - which calls raise is what is compared
        return None, err


def _parts(x):
    """Components (nested) or the tensor itself (dense), as float64 NumPy arrays (bools kept)."""
    if isinstance(x, (list, tuple)):
        return [_parts(p) for p in x]
    if isinstance(x, ln.NestedTensor) or x.is_nested:
        return [c.detach().numpy() for c in x.unbind()]
    return x.detach().numpy()


def _assert_close(ours, theirs):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_close(a, b)
        return
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def _differ(fn, comps, layout, **kw):
    """Run ``fn(nt)`` on torch and on ours; the same outcome: both raise, or equal results."""
    torch_nt, ours_nt = _build("torch", comps, layout, **kw), _build("ln", comps, layout, **kw)
    theirs, their_err = _outcome(lambda: fn(torch_nt))
    ours, our_err = _outcome(lambda: fn(ours_nt))
    if their_err is not None:
        assert our_err is not None, f"torch raised {their_err!r}, we returned a result"
        return None, our_err
    assert our_err is None, f"we raised {our_err!r}, torch returned {theirs!r}"
    assert (isinstance(ours, ln.NestedTensor)) == (isinstance(theirs, torch.Tensor) and theirs.is_nested)
    _assert_close(_parts(ours), _parts(theirs))
    return ours, theirs


def _rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64)


# -- narrow / squeeze on the strided layout ------------------------------------------------------
@pytest.mark.parametrize("start,stop", [(0, 5), (0, 3), (1, 2), (1, 5), (2, 4), (-3, 4)])
def test_narrow_of_the_batch_dim_on_the_strided_layout(start, stop):
    """From TestNestedTensorDeviceType.test_narrow: on torch's strided layout ``nt.narrow(0, start, length)``
    picks components (a view); dims 1 and up refuse. We refused dim 0 too."""
    comps = [_rand(2, 3, 4), _rand(3, 2, 1, seed=1), _rand(4, 2, 2, seed=2), _rand(1, 1, 3, seed=3), _rand(2, 2, 2)]
    n = stop - (start % 5)
    ours, _ = _differ(lambda nt: nt.narrow(0, start, n), comps, torch.strided)
    base = ln.nested_tensor(comps)
    base.narrow(0, start, n).unbind()[0].fill_(7.0)  # a view: the write shows in the narrowed tensor's base
    assert (base.unbind()[start % 5] == 7.0).all()
    for dim in (1, 2, 3):
        _differ(lambda nt, d=dim: nt.narrow(d, 0, 1), comps, torch.strided)
    _differ(lambda nt: nt.narrow(0, 3, 3), comps, torch.strided)  # past the end: both raise
    jagged = [_rand(k, 3) for k in (2, 3, 1)]
    _differ(lambda nt: nt.narrow(0, 1, 1), jagged, torch.jagged)  # torch's jagged layout refuses dim 0: so do we


@pytest.mark.parametrize("comps,dim", [
    ([_rand(n, 1) for n in (2, 3, 4, 1)], 1),   # the ragged dim of 2-d components
    ([_rand(1, 1, n) for n in (1, 2)], 3),      # ragged last dim, some sizes 1
    ([_rand(1, 1, n) for n in (1, 2)], -1),
    ([_rand(n, 1, 6) for n in (2, 3, 1)], -3),
], ids=["ragged-dim1", "ragged-last", "ragged-last-neg", "ragged-neg"])
def test_squeeze_of_a_ragged_dim_is_a_no_op_on_the_strided_layout(comps, dim):
    """From TestNestedTensorDeviceType.test_squeeze_unsqueeze ("squeezing a dim which does not have size 1
    should be a no-op"): torch's strided layout leaves a ragged dim in place, as dense squeeze leaves a dim
    of a size other than 1. We raised; torch's jagged layout raises, and so do we there."""
    ours, _ = _differ(lambda nt: nt.squeeze(dim), comps, torch.strided)
    np.testing.assert_array_equal(ours.nested_size(), ln.nested_tensor(comps).nested_size())
    if all(c.dim() == comps[0].dim() and c.shape[1:] == comps[0].shape[1:] for c in comps):
        _differ(lambda nt: nt.squeeze(dim), comps, torch.jagged)


# -- reductions with keepdim on the strided layout -----------------------------------------------
_KEPT = ["sum", "mean", "prod", "amax", "amin", "any", "all", "argmax", "argmin", "max", "min"]


def _kept(op, x, dim):
    x = x > 0.5 if op in ("any", "all") else x
    out = getattr(torch, op)(x, dim, keepdim=True)
    return out.values if op in ("max", "min") else out


@pytest.mark.parametrize("comps", [
    [_rand(2), _rand(3, seed=1), _rand(1, seed=2)],             # 1-d components: the last dim is the ragged one
    [_rand(3, 2), _rand(3, 5, seed=1)],                         # ragged in the last dim
    [_rand(3), _rand(3, seed=1)],                               # no ragged dim
], ids=["1d", "ragged-last", "regular"])
@pytest.mark.parametrize("op", _KEPT)
def test_keepdim_over_the_last_dim_stays_nested_on_the_strided_layout(op, comps):
    """From TestNestedTensorDeviceType.test_sum_dtype / test_nested_tensor_sum_dim: on torch's strided layout
    ``nt.sum(-1, keepdim=True)`` (its only reduction over a dim) gives a nested tensor of components whose
    last dim is 1, also where that dim is the ragged one; ours gave a dense ``(B, ..., 1)``. The other
    reductions (torch's strided layout has none: NotImplementedError) follow sum; the jagged layout keeps
    its dense result, as torch's. (torch's strided ``all(dim)`` without keepdim gives components of the
    wrong shape, and over dim 1 of wider components a nested result where its jagged layout gives a
    dense one: not copied.)"""
    for dim in (-1, comps[0].dim()):
        if op == "sum":
            _differ(lambda nt, d=dim: nt.sum(d, keepdim=True), comps, torch.strided)
        ours = _kept(op, _build("ln", comps, torch.strided), dim)
        assert isinstance(ours, ln.NestedTensor) and ours.layout == torch.strided
        _assert_close(_parts(ours), [_parts(_kept(op, c, dim - 1 if dim > 0 else dim)) for c in comps])
    if comps[0].dim() == 2:
        return  # (torch's jagged layout cannot hold a ragged last dim)
    ours, theirs = _differ(lambda nt: _kept(op, nt, -1), comps, torch.jagged) if op not in ("any", "all") else (
        _kept(op, _build("ln", comps, torch.jagged), -1), None)
    assert not isinstance(ours, ln.NestedTensor) and tuple(ours.shape) == (len(comps), 1)


# -- contiguity ------------------------------------------------------------------------------------
@pytest.mark.parametrize("starts,lengths", [
    ([1, 0, 0, 0, 0], [9, 10, 10, 10, 8]),   # the rows tile one stretch of the buffer
    ([0, 0, 0, 0, 0], [10, 10, 10, 10, 10]),
    ([0, 1, 2, 3, 4], [3, 2, 2, 1, 5]),       # holes
    ([1, 0, 0, 0, 0], [8, 10, 10, 10, 8]),
])
def test_narrow_that_tiles_the_buffer_is_contiguous(starts, lengths):
    """From TestNestedTensorSubclass.test_is_contiguous: torch.nested.narrow(..., layout=torch.jagged)
    whose rows follow one another without a gap gives a contiguous tensor without lengths (a view of the
    buffer). Ours always kept lengths, so is_contiguous() was False and lengths() not None."""
    base = torch.arange(10).unsqueeze(0).expand(5, -1).clone()
    s, n = torch.tensor(starts), torch.tensor(lengths)
    theirs = torch.nested.narrow(base, 1, s, n, layout=torch.jagged)
    ours = ln.narrow(base, 1, s, n, layout=torch.jagged)
    assert ours.is_contiguous() == theirs.is_contiguous()
    assert ours.is_contiguous(memory_format=torch.contiguous_format) == theirs.is_contiguous(
        memory_format=torch.contiguous_format)
    assert (ours.lengths() is None) == (theirs.lengths() is None)
    assert ours.offsets().tolist() == theirs.offsets().tolist()
    assert tuple(ours.values().shape) == tuple(theirs.values().shape)
    for a, b in zip(ours.unbind(), theirs.unbind()):
        assert torch.equal(a, b)
    if theirs.lengths() is None:  # without holes the components are views of ``base``
        ours.unbind()[1][0] = -1
        assert int(base[1, starts[1]]) == -1


def test_clone_to_contiguous_format_and_refused_memory_formats():
    """From TestNestedTensorSubclass.test_noncontiguous_pointwise, TestNestedTensorDeviceType.test_clone and
    test_empty_like: ``transposed.clone(memory_format=torch.contiguous_format)`` is contiguous (ours stayed
    a transposed view), and channels_last is refused by clone and empty_like (we accepted it)."""
    comps = [_rand(n, 3, 4, seed=n) for n in (2, 3, 4)]
    for layout in (torch.strided, torch.jagged):
        flip = (lambda nt: nt.transpose(1, 2)) if layout == torch.jagged else (lambda nt: nt.transpose(-1, -2))
        ours, theirs = _differ(lambda nt, f=flip: f(nt).clone(memory_format=torch.contiguous_format), comps, layout)
        assert ours.is_contiguous() and theirs.is_contiguous()
        ours, theirs = _differ(lambda nt, f=flip: f(nt).clone(), comps, layout)
        assert not ours.is_contiguous() and not theirs.is_contiguous()
        for call in (lambda nt: nt.clone(memory_format=torch.channels_last),
                     lambda nt: torch.empty_like(nt, memory_format=torch.channels_last)):
            _, err = _differ(call, comps, layout)
            assert isinstance(err, RuntimeError)
        ours, _ = _differ(lambda nt: torch.zeros_like(nt, memory_format=torch.contiguous_format), comps, layout)
        assert ours.is_contiguous()


# -- pickle, copy, deepcopy; stride ---------------------------------------------------------------------
def _round_trips():
    import copy
    import io
    import pickle

    def saved(x):
        buf = io.BytesIO()
        torch.save(x, buf)
        buf.seek(0)
        with torch.serialization.safe_globals(__import__("lodtensor").interop.torch_safe_globals()):
            return torch.load(buf, weights_only=True)

    return {"pickle": lambda x: pickle.loads(pickle.dumps(x)), "torch.save": saved, "copy": copy.copy,
            "deepcopy": copy.deepcopy}


@pytest.mark.parametrize("how", ["pickle", "torch.save", "copy", "deepcopy"])
def test_pickle_and_copies_keep_holes_and_transposed_views(how):
    """From TestNestedTensorSubclass.test_serialization / test_copy_: torch's pickle, torch.save, copy.copy and
    copy.deepcopy of a tensor with holes keep ``lengths()``, ``offsets()`` and ``values()`` (not contiguous),
    and of a transposed view its layout (not contiguous). Our pickle and copy.copy dropped the holes, and
    pickle returned a transposed view contiguous."""
    trip = _round_trips()[how]
    base = torch.arange(20.0).reshape(4, 5)
    starts, lengths = torch.tensor([0, 1, 2, 0]), torch.tensor([3, 2, 1, 4])
    for lib in (torch.nested, ln):
        nt = lib.narrow(base, 1, starts, lengths, layout=torch.jagged)
        back = trip(nt)
        assert back.lengths().tolist() == [3, 2, 1, 4] and not back.is_contiguous()
        assert back.offsets().tolist() == nt.offsets().tolist() and torch.equal(back.values(), base.reshape(-1))
        assert all(torch.equal(a, b) for a, b in zip(back.unbind(), nt.unbind()))
        if how == "deepcopy":  # its own values(): ours shared the original's
            assert back.values().data_ptr() != nt.values().data_ptr()
    part = ln.nested_tensor_from_jagged(torch.arange(12.0).reshape(6, 2), [1, 3, 5])  # offsets over part of values
    back = trip(part)
    assert back.offsets().tolist() == [1, 3, 5] and tuple(back.values().shape) == (6, 2)
    assert all(torch.equal(a, b) for a, b in zip(back.unbind(), part.unbind()))
    comps = [_rand(n, 3, 4, seed=n) for n in (2, 3)]
    for layout, flip in ((torch.strided, lambda nt: nt.transpose(-1, -2)),
                         (torch.jagged, lambda nt: nt.transpose(1, 2))):
        if how == "deepcopy" and layout == torch.strided:  # (torch's strided deepcopy raises: no new_empty)
            continue
        ours, theirs = _differ(lambda nt, f=flip: trip(f(nt)), comps, layout)
        assert not ours.is_contiguous() and not theirs.is_contiguous()


def test_unpickling_checks_the_holes_and_the_permutation():
    """A pickle is outside data: a permutation or holes that do not fit the components raise."""
    import pickle

    from lodtensor.nested._persist import _rebuild_view

    nt = ln.narrow(torch.arange(8.0).reshape(2, 4), 1, torch.tensor([0, 1]), torch.tensor([1, 3]), layout="jagged")
    fn, args = nt.__reduce__()
    assert fn is _rebuild_view and pickle.loads(pickle.dumps(nt)).lengths().tolist() == [1, 3]
    args = [getattr(a, "array", a) for a in args[:-1]] + [tuple(getattr(h, "array", h) for h in args[-1])]
    values, offsets, lengths = args[-1]
    with pytest.raises(ValueError, match="do not describe the components"):
        _rebuild_view(*args[:-1], (values, offsets, np.array([2, 2])))
    with pytest.raises(ValueError, match="outside the 8 rows"):
        _rebuild_view(*args[:-1], (values, np.array([0, 7, 9]), lengths))
    with pytest.raises(ValueError, match="perm must be a permutation"):
        _rebuild_view(*args[:-2], (1, 1), None)


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_stride_of_a_component_dim(layout):
    """From TestNestedTensorSubclass.test_jagged_layout_construction_nested_tensor (``nt.stride()``): torch's
    jagged layout gives ``(3*j1, 3, 1)``, nested ints we cannot return; ``stride(d)`` for d >= 1 is an int
    there (a transposed view's permuted), and its strided layout raises RuntimeError for any stride. Ours
    had no ``stride``: ``stride(d >= 1)`` is now torch's jagged int on both layouts, and ``stride()`` /
    ``stride(0)`` raise RuntimeError naming ``nested_strides()``."""
    comps = [_rand(n, 3, 4, seed=n) for n in (2, 5)]
    jagged = _build("torch", comps, torch.jagged)
    ours = _build("ln", comps, layout)
    for view in (lambda nt: nt, lambda nt: nt.transpose(1, 2), lambda nt: nt.transpose(2, 3)):
        for d in (1, 2, 3, -1, -2):
            assert view(ours).stride(d) == view(jagged).stride(d)
    for call in (lambda nt: nt.stride(), lambda nt: nt.stride(0)):
        with pytest.raises(RuntimeError, match="nested_strides"):
            call(ours)
    with pytest.raises(RuntimeError):
        _build("torch", comps, torch.strided).stride(1)  # (torch's strided layout: no strides at all)
    ragged_last = ln.nested_tensor([_rand(2, 3), _rand(2, 5)], layout=layout)
    assert ragged_last.stride(2) == 1
    with pytest.raises(RuntimeError, match="different stride in each component"):
        ragged_last.stride(1)


# -- errors catchable as torch's ----------------------------------------------------------------------
def test_errors_are_runtime_errors_where_torch_raises_runtime_error():
    """From TestNestedTensor.test_fill_, TestNestedTensorDeviceType.test_nested_tensor_mul_in_place
    (``scalar.mul_(nt)``) and TestNestedTensorSubclass.test_nested_tensor_from_jagged (no offsets, no
    lengths): torch raises RuntimeError; ours raised TypeError or ValueError alone."""
    comps = [_rand(2, 4), _rand(3, 4, seed=1)]
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.nested.nested_tensor(comps).fill_(torch.tensor([11.0]))
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        ln.nested_tensor(comps).fill_(torch.tensor([11.0]))
    assert (ln.nested_tensor(comps).fill_(torch.tensor(11.0)).unbind()[1] == 11.0).all()
    for layout in (torch.strided, torch.jagged):
        _, err = _differ(lambda nt: torch.tensor(10.0, dtype=torch.float64).mul_(nt), comps, layout)
        assert isinstance(err, RuntimeError) and "broadcast shape" in str(err)
    values = torch.zeros(4, 3)
    for lib in (torch.nested, ln):
        with pytest.raises(RuntimeError, match="At least one of offsets or lengths is required"):
            lib.nested_tensor_from_jagged(values, offsets=None, lengths=None)


# -- attention and normalisation --------------------------------------------------------------------
def _leaf_grads(lib, comps, layout, fn, weights):
    """``fn`` on a nested tensor of leaf copies of ``comps`` (as_nested_tensor); the leaves' gradients of
    the sum of every output component times ``weights``' one."""
    leaves = [c.detach().clone().requires_grad_(True) for c in comps]
    nt = lib.as_nested_tensor(leaves, layout=layout)
    out = fn(nt)
    parts = out.unbind() if isinstance(out, ln.NestedTensor) or out.is_nested else out
    sum((p * w).sum() for p, w in zip(parts, weights)).backward()
    return out, [leaf.grad for leaf in leaves]


def test_sdpa_over_a_ragged_batch_like_dim():
    """From TestNestedTensorSubclass.test_sdpa_with_constant_sequence_length: query ``(B, (P), S, E)`` ragged in
    the prompts, not the sequence: attention runs per (component, prompt) over the regular ``S``; values and
    gradients as torch's jagged layout. We refused any ragged dim but -2."""
    comps = [_rand(n, 4, 6, seed=n) for n in (2, 3, 1, 4)]
    weights = [_rand(n, 4, 6, seed=10 + n) for n in (2, 3, 1, 4)]

    def sdpa(nt):
        return F.scaled_dot_product_attention(nt, nt * 0.5, nt + 1.0)

    theirs, their_grads = _leaf_grads(torch.nested, comps, torch.jagged, sdpa, weights)
    ours, our_grads = _leaf_grads(ln, comps, torch.jagged, sdpa, weights)
    _assert_close(_parts(ours), _parts(theirs))
    _assert_close([g.numpy() for g in our_grads], [g.numpy() for g in their_grads])
    causal = F.scaled_dot_product_attention(*(ln.nested_tensor(comps, layout="jagged"),) * 3, is_causal=True)
    for got, c in zip(causal.unbind(), comps):
        torch.testing.assert_close(got, F.scaled_dot_product_attention(c, c, c, is_causal=True))


def test_sdpa_with_two_ragged_dims_on_the_strided_layout():
    """From TestNestedTensorDeviceType.test_scaled_dot_product_attention (input_dim=4): query
    ``(N, (N'), (L), E)`` and key/value ``(N, (N'), (S), E)`` on torch's strided layout; values and
    gradients as torch's. We refused a query ragged in a dim before the sequence."""
    q = [_rand(2, 2, 8), _rand(3, 3, 8, seed=1), _rand(4, 4, 8, seed=2)]
    kv = [_rand(2, 3, 8, seed=3), _rand(3, 4, 8, seed=4), _rand(4, 5, 8, seed=5)]
    weights = [_rand(2, 2, 8, seed=6), _rand(3, 3, 8, seed=7), _rand(4, 4, 8, seed=8)]
    results = []
    for lib in (torch.nested, ln):
        key = lib.nested_tensor([t.clone() for t in kv])
        results.append(_leaf_grads(lib, q, torch.strided, lambda nt, k=key: F.scaled_dot_product_attention(nt, k, k),
                                   weights))
    (theirs, their_grads), (ours, our_grads) = results
    _assert_close(_parts(ours), _parts(theirs))
    _assert_close([g.numpy() for g in our_grads], [g.numpy() for g in their_grads])


@pytest.mark.parametrize("tail", [(4,), (3, 4), (1,)])
@pytest.mark.parametrize("layout", ["strided", "jagged"])
def test_layer_norm_over_the_ragged_dim(tail, layout):
    """From TestNestedTensorSubclass.test_layer_norm_reduce_ragged_idx_1: ``layer_norm(nt, nt.shape[1:])``
    normalises every component over all its elements (torch's jagged layout). We raised ("extends into
    irregular dimensions"). torch 2.13's backward of it fails on CPU ("SymIntArrayRef expected to contain
    only concrete integers"): the gradients are checked against per-component dense layer_norm instead."""
    comps = [_rand(n, *tail, seed=n) for n in (2, 3, 5, 1)]
    weights = [_rand(n, *tail, seed=20 + n) for n in (2, 3, 5, 1)]
    tnt = _build("torch", comps, torch.jagged)
    theirs = F.layer_norm(tnt, tnt.shape[1:])
    ours, our_grads = _leaf_grads(ln, comps, layout, lambda nt: F.layer_norm(nt, nt.shape[1:], eps=1e-5), weights)
    _assert_close(_parts(ours), _parts(theirs))
    leaves = [c.detach().clone().requires_grad_(True) for c in comps]
    sum((F.layer_norm(x, x.shape) * w).sum() for x, w in zip(leaves, weights)).backward()
    _assert_close([g.numpy() for g in our_grads], [x.grad.numpy() for x in leaves])
    nt = ln.nested_tensor([c.numpy() for c in comps], layout=layout)  # NumPy data: the same segment kernels
    _assert_close([np.asarray(c) for c in ln.layer_norm(nt, nt.shape[1:]).unbind()], _parts(theirs))


def test_layer_norm_over_the_ragged_dim_refuses_what_torch_ignores():
    """torch 2.13's jagged layer_norm over the ragged dim ignores a wrong trailing size in
    ``normalized_shape`` and a ``weight`` (it returns the unweighted result): both are mistakes in the
    caller's code, so we raise instead of copying that."""
    nt = ln.nested_tensor([_rand(2, 4), _rand(3, 4, seed=1)], layout="jagged")
    tnt = _build("torch", [_rand(2, 4), _rand(3, 4, seed=1)], torch.jagged)
    F.layer_norm(tnt, (tnt.shape[1], 7))  # (torch: no error)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(nt, (nt.shape[1], 7))
    with pytest.raises(RuntimeError, match="weight and bias"):
        F.layer_norm(nt, nt.shape[1:], weight=torch.ones(4, dtype=torch.float64))


# -- bmm, construction --------------------------------------------------------------------------------
def test_dense_bmm_nested_on_the_strided_layout():
    """From TestNestedTensorDeviceType.test_bmm_cpu ("normal tensor bmm nested tensor"): a dense ``(B, n, k)``
    times a nested ``(B, k, (m))`` gives a nested ``(B, n, (m))`` on torch's strided layout (its jagged layout
    refuses; we take it there too). We raised TypeError. torch's backward of it fails (BmmBackward0 gets a
    gradient of the wrong shape): the gradients are checked against per-component dense products."""
    dense = _rand(2, 5, 7)
    comps = [_rand(7, 6, seed=1), _rand(7, 5, seed=2)]
    _differ(dense.bmm, comps, torch.strided)
    _differ(lambda nt: torch.bmm(dense, nt), comps, torch.strided)
    weights = [_rand(5, 6, seed=3), _rand(5, 5, seed=4)]
    d = dense.clone().requires_grad_(True)
    out, grads = _leaf_grads(ln, comps, torch.jagged, lambda nt: torch.bmm(d, nt), weights)
    d_ref = dense.clone().requires_grad_(True)
    leaves = [c.clone().requires_grad_(True) for c in comps]
    sum(((d_ref[i] @ leaves[i]) * weights[i]).sum() for i in range(2)).backward()
    _assert_close([g.numpy() for g in [*grads, d.grad]], [x.grad.numpy() for x in [*leaves, d_ref]])
    assert out.layout == torch.jagged


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_nested_tensor_from_python_lists_with_requires_grad(layout):
    """From TestNestedTensorSubclass.test_jagged_layout_construction_nested_tensor (the list-of-lists case with
    requires_grad=True): torch builds a leaf that requires grad. We refused ("needs torch data") although
    Python numbers belong to no array library. (torch's strided layout returns a non-leaf here, with a
    grad_fn, unlike its own nested_tensor of tensors; ours is a leaf on both layouts, as torch's jagged.)"""
    lists = [_rand(2, 5).tolist(), _rand(3, 5, seed=1).tolist()]
    for lib in (torch.nested, ln):
        nt = lib.nested_tensor(lists, layout=layout, requires_grad=True)
        assert nt.requires_grad and nt.dtype == torch.float32
        if lib is torch.nested and layout == torch.strided:
            continue
        assert nt.is_leaf
        (nt * 2).backward(torch.ones_like(nt))
        assert [c.tolist() for c in nt.grad.unbind()] == [[[2.0] * 5] * 2, [[2.0] * 5] * 3]
    with pytest.raises(TypeError, match="floating point"):
        ln.nested_tensor([[1, 2], [3]], layout=layout, requires_grad=True)


# -- torch quirks we do not copy ----------------------------------------------------------------------
def test_torch_quirks_not_copied():
    """Differences kept on purpose (each a torch 2.13 bug or layout inconsistency met while porting):

    - TestNestedTensorDeviceType.test_softmax: on torch's strided layout ``softmax(nested_tensor([]), 1)``
      returns its input although dim 1 is out of range for a 1-d tensor; we raise IndexError as for any
      out-of-range dim.
    - TestNestedTensorSubclass.test_views_inherit_ragged_dim: torch's jagged ``expand(-1, -1, -1, 5)`` of a
      ``(B, j, 1)`` tensor returns it unchanged (the extra dim and the 5 are ignored); dense torch refuses a
      -1 in a new leading dim, and so do we.
    """
    with pytest.raises(IndexError):
        F.softmax(ln.nested_tensor([]), 1)
    assert F.softmax(torch.nested.nested_tensor([]), 1).dim() == 1  # (torch's answer)
    comps = [_rand(n, 1) for n in (2, 3, 4)]
    assert tuple(_build("torch", comps, torch.jagged).expand(-1, -1, -1, 5).unbind()[0].shape) == (2, 1)
    with pytest.raises(RuntimeError, match="expand"):
        _build("ln", comps, torch.jagged).expand(-1, -1, -1, 5)
    with pytest.raises(RuntimeError):
        torch.zeros(3, 2, 1).expand(-1, -1, -1, 5)
