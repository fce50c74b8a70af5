"""The divergences from torch 2.13 that tests/nested/test_nested_hunt_nov28.py left open, each checked against
torch's jagged layout (and its dense ops where the jagged layout refuses):

1. ``std``/``var``/``std_mean``/``var_mean``/``nansum``/``nanmean``/``norm`` (and ``torch.linalg.norm`` /
   ``vector_norm``)/``count_nonzero`` raised the dispatcher's ``TypeError`` ("not supported ... supported ops:")
   and the method forms ``AttributeError``; torch's nested layouts raise ``NotImplementedError``.
2. ``F.dropout`` / ``nn.Dropout`` with ``p=0`` or in eval mode returned the jagged input itself; torch's jagged
   dropout (``native_dropout``) returns a copy, on the autograd graph when the input requires grad.
3. ``F.alpha_dropout`` / ``F.feature_alpha_dropout`` were not supported; torch returns the input itself for
   ``p=0`` and in eval mode (training: torch's dense formula, which torch's nested layouts refuse).
4. ``torch.add(bool_nt, bool_nt, alpha=2)`` (or a bool scalar ``other``) gave int64; torch keeps bool (alpha
   is cast to the operands' dtype) and refuses a bool alpha for non-bool results, a float one for integers.
5. ``F.softmax(nt)`` / ``softmin`` / ``log_softmax`` without ``dim`` raised; torch picks its legacy implicit
   dim (0 for 3 dims, else 1) with a deprecation warning.
"""

import math
import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

from .test_nested_hunt_nov28 import _same, _weighted_sum  # noqa: E402 - after the skip without torch

LENGTHS = (2, 0, 3)


def _comps(tail=(4,), dtype=torch.float64, seed=0, lengths=LENGTHS):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, *tail, generator=g, dtype=torch.float64).to(dtype) for n in lengths]


def _pair(comps, requires_grad=False, layout="jagged"):
    """(ours on torch data, torch's nested tensor of the same layout) over copies of the same components."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nested.nested_tensor([c.clone() for c in comps], layout=getattr(torch, layout),
                                            requires_grad=requires_grad)
    ours = ln.nested_tensor([c.clone() for c in comps], layout=layout, requires_grad=requires_grad)
    return ours, theirs


# -- 1. reductions torch's nested layouts refuse -------------------------------------------------------
REFUSED = {
    "torch.std": ("std", torch.std),
    "torch.std dim": ("std", lambda x: torch.std(x, dim=-1)),
    "nt.std": ("std", lambda x: x.std()),
    "torch.var": ("var", lambda x: torch.var(x, dim=-1)),
    "nt.var": ("var", lambda x: x.var(-1, correction=0)),
    "torch.std_mean": ("std_mean", lambda x: torch.std_mean(x, dim=-1)),
    "torch.var_mean": ("var_mean", torch.var_mean),
    "torch.nansum": ("nansum", torch.nansum),
    "nt.nansum": ("nansum", lambda x: x.nansum(-1)),
    "torch.nanmean": ("nanmean", lambda x: torch.nanmean(x, dim=-1)),
    "nt.nanmean": ("nanmean", lambda x: x.nanmean()),
    "torch.norm": ("norm", torch.norm),
    "nt.norm": ("norm", lambda x: x.norm(dim=-1)),
    "torch.linalg.norm": ("linalg.norm", lambda x: torch.linalg.norm(x, dim=-1)),
    "torch.linalg.vector_norm": ("linalg.vector_norm", lambda x: torch.linalg.vector_norm(x, dim=-1)),
    "torch.count_nonzero": ("count_nonzero", torch.count_nonzero),
    "nt.count_nonzero": ("count_nonzero", lambda x: x.count_nonzero(-1)),
}


@pytest.mark.parametrize("layout", ["jagged", "strided"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_reductions_raise_not_implemented_as_torch(case, layout):
    name, call = REFUSED[case]
    ours, theirs = _pair(_comps(), layout=layout)
    with pytest.raises(NotImplementedError):
        call(theirs)
    before = [c.clone() for c in ours.unbind()]
    with pytest.raises(NotImplementedError, match=rf"^{name}\(\) is not supported for a nested tensor"):
        call(ours)
    assert all(torch.equal(a, b) for a, b in zip(ours.unbind(), before))


@pytest.mark.parametrize("name", ["std", "var", "nansum", "nanmean", "norm", "count_nonzero"])
def test_refused_methods_on_numpy_data(name):
    nt = ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))], layout="jagged")
    assert hasattr(torch.Tensor, name)  # (a method torch has, which NJTs refuse)
    with pytest.raises(NotImplementedError, match=name):
        getattr(nt, name)()


def test_refused_ops_are_not_listed_as_supported():
    assert not {"std", "var", "nansum", "nanmean", "norm", "count_nonzero"} & set(ln.OP_TABLE)


# -- 2. dropout keeping everything ---------------------------------------------------------------------
DROPOUT_KEEPS = {
    "F.dropout p=0": lambda x: F.dropout(x, 0.0),
    "F.dropout eval": lambda x: F.dropout(x, 0.5, training=False),
    "torch.dropout eval": lambda x: torch.dropout(x, 0.3, False),
    "nn.Dropout eval": torch.nn.Dropout(0.5).eval(),
    "nn.Dropout(0) train": torch.nn.Dropout(0.0).train(),
}


@pytest.mark.parametrize("layout", ["jagged", "strided"])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("case", list(DROPOUT_KEEPS))
def test_dropout_keeping_everything_copies_as_torch(case, requires_grad, layout):
    call = DROPOUT_KEEPS[case]
    ours, theirs = _pair(_comps(), requires_grad=requires_grad, layout=layout)
    got, want = call(ours), call(theirs)
    assert (got is ours) == (want is theirs) and want is not theirs
    assert (got.grad_fn is None) == (want.grad_fn is None)
    shares = got.values().data_ptr() == ours.values().data_ptr()
    assert shares == (want.values().data_ptr() == theirs.values().data_ptr())
    _same(got, want)
    if requires_grad:  # the gradient of a copy, as torch's
        _weighted_sum(got).backward()
        _weighted_sum(want).backward()
        assert all(torch.equal(a, b) for a, b in zip(ours.grad.unbind(), theirs.grad.unbind()))


def test_dropout_keeping_everything_jagged_numpy_data_and_in_place():
    nt = ln.nested_tensor([np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)], layout="jagged")
    out = ln.dropout(nt, 0.5, training=False)
    assert out is not nt and not np.shares_memory(out.values(), nt.values())
    np.testing.assert_array_equal(out.values(), nt.values())
    ours, theirs = _pair(_comps())
    assert F.dropout(ours, 0.0, inplace=True) is ours  # in place: the input itself, as torch's
    assert F.dropout(theirs, 0.0, inplace=True) is theirs


# -- 3. alpha_dropout ----------------------------------------------------------------------------------
SELU_ALPHA = 1.7580993408473766  # torch's constant (ATen Dropout.cpp), checked against torch below


def _affine(p):
    a = 1.0 / math.sqrt((SELU_ALPHA**2 * p + 1) * (1 - p))
    return a, SELU_ALPHA * a * p  # kept: a * x + b; dropped: a * -alpha + b


@pytest.mark.parametrize("layout", ["jagged", "strided"])
@pytest.mark.parametrize("call", [
    lambda x: F.alpha_dropout(x, 0.0, training=True), lambda x: F.alpha_dropout(x, 0.5, training=False),
    F.alpha_dropout, lambda x: torch.alpha_dropout(x, 0.5, False),
    torch.nn.AlphaDropout(0.5).eval(), torch.nn.AlphaDropout(0.0).train(),
    lambda x: F.feature_alpha_dropout(x, 0.0, training=True), lambda x: F.feature_alpha_dropout(x, 0.3),
    torch.nn.FeatureAlphaDropout(0.5).eval(),
], ids=["p0", "eval", "default", "torch.alpha_dropout", "module-eval", "module-p0", "feature-p0", "feature-eval",
        "feature-module-eval"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_alpha_dropout_identity_as_torch(call, layout, requires_grad):
    ours, theirs = _pair(_comps(), requires_grad=requires_grad, layout=layout)
    assert call(theirs) is theirs
    assert call(ours) is ours


def _torch_dense_alpha_values(x, p):
    """The two values torch's dense alpha_dropout gives each element of ``x``: checks the constants above."""
    out = F.alpha_dropout(x, p, training=True)
    a, b = _affine(p)
    kept, dropped = a * x + b, torch.full_like(x, -SELU_ALPHA * a + b)
    assert torch.all(torch.isclose(out, kept) | torch.isclose(out, dropped))
    return kept, dropped


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_alpha_dropout_training_draws_torch_values_and_keeps_the_moments(p, lib):
    torch.manual_seed(0)
    np.random.seed(0)
    comps = _comps(tail=(50,), lengths=(120, 0, 80), dtype=torch.float64)
    x = torch.cat(comps)
    kept, dropped = _torch_dense_alpha_values(x, p)
    nt = ln.nested_tensor([c.numpy() if lib == "numpy" else c for c in comps], layout="jagged")
    out = F.alpha_dropout(nt, p, training=True) if lib == "torch" else ln.alpha_dropout(nt, p, training=True)
    assert out.nested_size().tolist() == nt.nested_size().tolist() and out.dtype == nt.dtype
    vals = torch.as_tensor(np.asarray(out.values()) if lib == "numpy" else out.values())
    is_kept, is_dropped = torch.isclose(vals, kept), torch.isclose(vals, dropped)
    assert torch.all(is_kept | is_dropped)
    n = vals.numel()
    assert abs(float(is_dropped.double().mean()) - p) < 4 * math.sqrt(p * (1 - p) / n)
    dense = F.alpha_dropout(x, p, training=True)  # torch's moments on the same data, for comparison
    assert abs(float(vals.mean()) - float(dense.mean())) < 0.05
    assert abs(float(vals.std()) - float(dense.std())) < 0.05
    assert abs(float(vals.mean())) < 0.05 and abs(float(vals.std()) - 1) < 0.05  # (x ~ N(0, 1): kept as is)


def test_alpha_dropout_training_gradient_p1_and_errors():
    torch.manual_seed(1)
    comps = _comps(tail=(30,), lengths=(40, 0, 20))
    ours, theirs = _pair(comps, requires_grad=True)
    out = F.alpha_dropout(ours, 0.4, training=True)
    out.values().sum().backward()
    grad = ours.grad.values()
    a, b = _affine(0.4)
    kept = torch.isclose(out.values().detach(), a * ours.values().detach() + b)
    assert torch.allclose(grad, torch.where(kept, torch.tensor(a, dtype=grad.dtype), torch.zeros_like(grad)))
    zero = F.alpha_dropout(ours, 1.0, training=True)  # p=1: zeros (input * 0), as torch's dense
    assert torch.equal(zero.values(), F.alpha_dropout(torch.cat(comps), 1.0, training=True))
    assert zero.values().abs().sum() == 0
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.alpha_dropout(torch.ones(3), 1.5, training=True)
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        F.alpha_dropout(ours, 1.5, training=True)
    ints = ln.nested_tensor([torch.tensor([1, 2])], layout="jagged")
    assert F.alpha_dropout(ints, 0.5, training=False) is ints
    with pytest.raises(RuntimeError, match="alpha_dropout"):
        F.alpha_dropout(ints, 0.5, training=True)
    with pytest.raises(RuntimeError):  # torch's nested layouts refuse feature_alpha_dropout in training
        F.feature_alpha_dropout(theirs, 0.5, training=True)
    with pytest.raises(RuntimeError, match="feature_alpha_dropout"):
        F.feature_alpha_dropout(ours, 0.5, training=True)


def test_alpha_dropout_in_place_writes_the_input():
    torch.manual_seed(2)
    ours, _ = _pair(_comps(tail=(20,)))
    before = ours.values().clone()
    out = F.alpha_dropout(ours, 0.5, training=True, inplace=True)
    assert out is ours
    a, b = _affine(0.5)
    v = ours.values()
    assert torch.all(torch.isclose(v, a * before + b) | torch.isclose(v, torch.tensor(-SELU_ALPHA * a + b,
                                                                                      dtype=v.dtype)))


# -- 4. add with alpha on bool operands --------------------------------------------------------------------
A = [torch.tensor([True, False]), torch.tensor([], dtype=torch.bool), torch.tensor([False, True, True])]
B = [torch.tensor([True, True]), torch.tensor([], dtype=torch.bool), torch.tensor([False, False, True])]


def _bool_pair():
    theirs_a = torch.nested.nested_tensor([c.clone() for c in A], layout=torch.jagged)
    theirs_b = torch.nested.nested_tensor_from_jagged(torch.cat(B), theirs_a.offsets())
    return (ln.nested_tensor(A, layout="jagged"), ln.nested_tensor(B, layout="jagged")), (theirs_a, theirs_b)


@pytest.mark.parametrize("alpha", [2, True, False, 0, 1, -1, 2.5, "tensor2"])
@pytest.mark.parametrize("other", ["nested", True, 1, 2.0])
@pytest.mark.parametrize("form", ["torch.add", "method"])
def test_add_of_bools_with_alpha_as_torch(alpha, other, form):
    alpha = torch.tensor(2) if alpha == "tensor2" else alpha
    (oa, ob), (ta, tb) = _bool_pair()

    def run(x, y):
        y = y if other == "nested" else other
        return torch.add(x, y, alpha=alpha) if form == "torch.add" else x.add(y, alpha=alpha)

    try:
        want = run(ta, tb)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e).split(".")[0]):
            run(oa, ob)
        return
    got = run(oa, ob)
    assert got.dtype == want.dtype
    assert torch.equal(got.values(), want.values())


def test_add_of_bools_with_alpha_numpy_data_and_in_place():
    a = ln.nested_tensor([c.numpy() for c in A], layout="jagged")
    b = ln.nested_tensor([c.numpy() for c in B], layout="jagged")
    (_, _), (ta, tb) = _bool_pair()
    out = ln.add(a, b, alpha=2)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out.values(), torch.add(ta, tb, alpha=2).values().numpy())
    ours, theirs = ln.nested_tensor(A, layout="jagged"), ta.clone()
    assert ours.add_(ln.nested_tensor(B, layout="jagged"), alpha=2) is ours
    theirs.add_(tb, alpha=2)
    assert ours.dtype == torch.bool and torch.equal(ours.values(), theirs.values())


# -- 5. softmax without dim --------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["softmax", "softmin", "log_softmax"])
@pytest.mark.parametrize("tail", [(), (3,), (3, 2)], ids=["2d", "3d", "4d"])
def test_softmax_without_dim_takes_torchs_implicit_dim(fn, tail):
    ours, theirs = _pair(_comps(tail=tail, dtype=torch.float32))
    call = getattr(F, fn)
    implicit = 0 if ours.dim() == 3 else 1  # torch's legacy rule (F._get_softmax_dim)
    message = f"Implicit dimension choice for {fn} has been deprecated"
    with pytest.warns(UserWarning, match=message):
        try:
            want, error = call(theirs), None
        except RuntimeError as e:
            want, error = None, e
    if error is not None and implicit == 0:  # the batch dim: refused by both
        with pytest.warns(UserWarning, match=message), pytest.raises(RuntimeError, match="dim|dimension"):
            call(ours)
        return
    with pytest.warns(UserWarning, match=message):
        got = call(ours)
    _same(got, call(ours, dim=implicit))  # the same as with torch's dim given
    if want is not None:
        _same(got, want)
    else:  # log_softmax over the ragged dim: torch's jagged layout refuses it, ours computes it per component
        assert fn == "log_softmax" and implicit == 1
        for g, c in zip(got.unbind(), _comps(tail=tail, dtype=torch.float32)):
            assert torch.allclose(g, F.log_softmax(c, dim=0))
