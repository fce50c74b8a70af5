"""Every row of the torch row table against the rule, with real torch: the lod is kept <=> result row i
depends only on input row i.

For each table entry, sample calls (dims positional, by keyword, defaulted, negative, tuples) run on plain
tensors first; an oracle decides whether each is row-local: every output has the input's row count and
changing one input row changes only that row of every output (other operands stay as given, so rows of a
plain operand aligned with the input's are part of "row i", as in ``t * weights``). The same call on a
LoDTensor must then keep the lod exactly when the oracle says so, and otherwise raise the "would mix its
sequences" TypeError or return plain torch data equal to torch's.
"""

import warnings

import numpy as np
import pytest

from lodtensor import LoDTensor
from lodtensor.nested import _row_rules
from lodtensor.nested._row_table import RULES

torch = pytest.importorskip("torch")
F = torch.nn.functional

N = 5
LOD = [[0, 2, 2, N]]
PERM = [3, 0, 4, 1, 2]  # a row order for the row-moving examples


def _f(*shape, dtype=torch.float64, seed=0, low=0.1, high=0.9):
    g = torch.Generator().manual_seed(seed)
    return low + (high - low) * torch.rand(*shape, generator=g, dtype=dtype)


X = _f(N, 3, 4)
Y = _f(N, 3, 4, seed=1)
XI = (torch.arange(N * 12).reshape(N, 3, 4) * 7 % 23 + 1).to(torch.int64)
YI = (torch.arange(N * 12).reshape(N, 3, 4) * 5 % 19 + 1).to(torch.int64)
W = _f(6, 4, seed=2)
BIG = _f(N, N, 3, 4, seed=3, low=-1.0, high=1.0)  # an operand that broadcasts new dims in front of the rows
BIG[..., 0] = 0.0
IDX = torch.tensor([2, 0])


def _outputs(r):
    if isinstance(r, (list, tuple)):
        return [o for item in r for o in _outputs(item)]
    return [r] if isinstance(r, (torch.Tensor, LoDTensor)) else []


def _perturbations(x):
    """Other values for one row: in the same range (ids stay valid ids, probabilities probabilities), and zeros."""
    if x.dtype == torch.bool:
        return [~x]
    if x.is_floating_point() or x.is_complex():
        return [1.0 - x, torch.zeros_like(x), -x, 2.0 + x]
    return [(x * 3 + 1) % (int(x.max()) + 1), torch.zeros_like(x)]


def _same(a, b):
    """Equal shapes and values, NaN equal to NaN (bit for bit otherwise: unchanged rows compute the same)."""
    if a.shape != b.shape:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.equal(a, b) or torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(
            torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)))
    return bool(torch.equal(a, b))


def _is_random(call, x):
    """Whether two calls on the same input differ (dropout, bernoulli, rand_like...)."""
    a, b = (_outputs(_run(call, x.clone(), None)) for _ in range(2))
    return not all(_same(p, q) for p, q in zip(a, b))


def _run(call, x, seed):
    if seed is not None:
        torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(x)


def row_local(call, x, random=False, values=True):
    """Whether every output of ``call(x)`` has x's rows and row i changes only when input row i does."""
    seed = 0 if random else None
    outs = _outputs(_run(call, x.clone(), seed))
    n = x.shape[0]
    if not outs or any(o.ndim == 0 or o.shape[0] != n for o in outs):
        return False
    for k in range(n if values else 0):
        for row in _perturbations(x[k]):
            x2 = x.clone()
            x2[k] = row
            try:
                outs2 = _outputs(_run(call, x2, seed))
            except (RuntimeError, ValueError):  # a value this function refuses (an integer division by zero)
                continue
            keep = [j for j in range(n) if j != k]
            for o, o2 in zip(outs, outs2):
                if o.shape != o2.shape or not _same(o[keep], o2[keep]):
                    return False
    return True


def check(call, x=X, random=False, values=True):
    """``call`` on a LoDTensor keeps the lod exactly when ``call`` is row-local on plain data."""
    n = x.shape[0]
    lod = [[0, min(2, n), min(2, n), n]]
    expected = row_local(call, x, random, values)
    ref = _outputs(_run(call, x.clone(), 0 if random else None))
    t = LoDTensor(x.clone(), lod)
    try:
        got = _run(call, t, 0 if random else None)
    except TypeError as err:
        if "would mix its sequences" not in str(err):
            raise
        assert not expected, f"row-local call raised: {err}"
        return "raised"
    outs = _outputs(got)
    assert len(outs) == len(ref)
    for o, r in zip(outs, ref):
        if expected:
            assert isinstance(o, LoDTensor), f"row-local output lost the lod: {type(o).__name__}"
            assert o.lod() == lod
            o = o.data
        else:
            assert not isinstance(o, LoDTensor), "an output whose rows are not the input's kept the lod"
        assert _same(o, r) or not values
    return "kept" if expected else "plain"


def _dims(f, *pre, values=(0, 1, -1, -3), kw="dim", default=True, **kwargs):
    """Calls of ``f(x, *pre, <dim>)``: the dim positional, by keyword, and left to its default."""
    calls = [lambda x, v=v: f(x, *pre, v, **kwargs) for v in values]
    calls += [lambda x, v=v: f(x, *pre, **{kw: v}, **kwargs) for v in values]
    if default:
        calls.append(lambda x: f(x, *pre, **kwargs))
    return calls


def _shape_with(d, n):
    shape = [N, 3, 4]
    shape[d] = n
    return shape


def _index(d, n=2):
    return torch.zeros(_shape_with(d, n), dtype=torch.int64)


CALLS = {}  # name -> list of calls (or (call, input, options) tuples)
for _n in ("sum", "nansum", "mean", "nanmean", "prod", "all", "any", "amax", "amin", "argmax", "argmin",
           "count_nonzero", "std", "var", "std_mean", "var_mean", "median", "nanmedian", "mode", "logsumexp"):
    _fn = getattr(torch, _n)
    _vals = (0, 1, -1, -3, (1, 2), (0, 2)) if _n in ("sum", "nansum", "mean", "nanmean", "amax", "amin", "std",
                                                      "var", "std_mean", "var_mean", "logsumexp") else (0, 1, -1, -3)
    CALLS[_n] = _dims(_fn, values=_vals, default=_n not in ("logsumexp",))
CALLS["sum"].append(lambda x: torch.sum(x, ()))
CALLS["std"].append(lambda x: torch.std(x, True))
CALLS["special_logsumexp"] = _dims(torch.special.logsumexp, default=False)
CALLS["kthvalue"] = _dims(torch.kthvalue, 2)
CALLS["quantile"] = _dims(torch.quantile, 0.5)
CALLS["nanquantile"] = _dims(torch.nanquantile, 0.5)
CALLS["norm"] = _dims(torch.norm, 2, values=(0, 1, -1, (1, 2)))
CALLS["linalg_norm"] = _dims(torch.linalg.norm, None, values=(0, 1, -1, (1, 2), (0, 1)))
CALLS["linalg_vector_norm"] = _dims(torch.linalg.vector_norm, 2, values=(0, 1, (1, 2), (0, 2)))
CALLS["linalg_matrix_norm"] = _dims(torch.linalg.matrix_norm, "fro", values=((1, 2), (0, 1), (-1, -2)))
CALLS["frobenius_norm"] = [lambda x, d=d: torch.frobenius_norm(x, d) for d in ((1, 2), (0, 1), (-1,))]
CALLS["nuclear_norm"] = [lambda x, d=d: torch.nuclear_norm(x, d) for d in ((1, 2), (0, 1))] + [
    (torch.nuclear_norm, X[:, :, 0]), (lambda x: torch.nuclear_norm(x, True), X[:, :, 0])]
if hasattr(torch, "hash_tensor"):  # (torch 2.4 has none: test_every_table_row_is_sampled skips it there)
    CALLS["hash_tensor"] = _dims(torch.hash_tensor)
CALLS["norm_except_dim"] = [lambda x, d=d: torch.norm_except_dim(x, 2, d) for d in (0, 1, 2)] + [
    torch.norm_except_dim, lambda x: torch.norm_except_dim(x, dim=-1)]
CALLS["unfold_copy"] = [lambda x, d=d: torch.unfold_copy(x, d, 2, 1) for d in (0, 1, 2, -1)]
CALLS["aminmax"] = [lambda x, d=d: torch.aminmax(x, dim=d) for d in (0, 1, -1)] + [torch.aminmax]
CALLS["max"] = _dims(torch.max) + [lambda x: torch.max(x, Y), lambda x: torch.max(Y, x)]
CALLS["min"] = _dims(torch.min) + [lambda x: torch.min(x, Y), lambda x: torch.min(x, other=Y)]
for _n in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
    CALLS[_n] = _dims(getattr(torch, _n), default=False)
for _n in ("cumulative_trapezoid", "trapezoid", "trapz"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, dim=d) for d in (0, 1, -1)] + [getattr(torch, _n)]
CALLS["diff"] = _dims(torch.diff, 1)
CALLS["gradient"] = [lambda x, d=d: torch.gradient(x, dim=d) for d in (0, 1, (1, 2), (0, 2))] + [torch.gradient]
CALLS["softmax"] = _dims(torch.softmax, default=False) + _dims(F.softmax) + [(F.softmax, X[:, 0])]
CALLS["log_softmax"] = _dims(torch.log_softmax, default=False) + _dims(F.log_softmax)
CALLS["softmin"] = _dims(F.softmin) + [(F.softmin, X[:, 0])]
CALLS["special_softmax"] = _dims(torch.special.softmax, default=False)
CALLS["special_log_softmax"] = _dims(torch.special.log_softmax, default=False)
CALLS["gumbel_softmax"] = [(c, X, {"random": True}) for c in _dims(F.gumbel_softmax, 1.0, False, 1e-10)]
CALLS["glu"] = [(c, _f(6, 2, 4)) for c in _dims(F.glu, values=(0, 1, -1, -3))]
CALLS["normalize"] = _dims(F.normalize, 2.0)
CALLS["sort"] = _dims(torch.sort) + [lambda x: torch.sort(x, stable=True, dim=0)]
CALLS["argsort"] = _dims(torch.argsort)
CALLS["msort"] = [torch.msort]
CALLS["topk"] = _dims(torch.topk, 2)
CALLS["flip"] = [lambda x, d=d: torch.flip(x, d) for d in ((0,), (1,), (1, 2), (0, 2), (-1,), (-3,))] + [
    lambda x: torch.flip(x, dims=[2])]
CALLS["flipud"] = [torch.flipud]
CALLS["fliplr"] = [torch.fliplr]
CALLS["roll"] = [lambda x, d=d: torch.roll(x, 1, d) for d in (0, 1, -1, -3)] + [
    lambda x, d=d: torch.roll(x, (1, 2), d) for d in ((1, 2), (0, 1))] + [
    lambda x: torch.roll(x, 1), lambda x: torch.roll(x, shifts=(1, 2), dims=(2, 1)), lambda x: torch.roll(x, 2, dims=0)]
CALLS["rot90"] = [torch.rot90, lambda x: torch.rot90(x, 1, (1, 2)), lambda x: torch.rot90(x, 1, (2, 0)),
                  lambda x: torch.rot90(x, k=2, dims=[2, 1])]
CALLS["index_select"] = [lambda x, d=d: torch.index_select(x, d, IDX) for d in (0, 1, -1, -3)] + [
    lambda x: torch.index_select(x, dim=1, index=IDX), lambda x: torch.index_select(x, 0, torch.tensor(PERM))]
for _n in ("index_add", "index_copy", "index_reduce"):
    _extra = ("prod",) if _n == "index_reduce" else ()
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n], e=_extra: f(x, d, IDX, 2 * torch.ones(_shape_with(d, 2),
                 dtype=torch.float64), *e) for d in (0, 1, 2)]
CALLS["index_fill"] = [lambda x, d=d: torch.index_fill(x, d, IDX, -1.0) for d in (0, 1, -1)]
CALLS["gather"] = [lambda x, d=d: torch.gather(x, d, _index(d)) for d in (0, 1, 2)]
CALLS["scatter"] = [lambda x, d=d: torch.scatter(x, d, _index(d), 7.0) for d in (0, 1, 2)]
CALLS["scatter_add"] = [lambda x, d=d: torch.scatter_add(x, d, _index(d), torch.ones(_shape_with(d, 2),
                        dtype=torch.float64)) for d in (0, 1, 2)]
CALLS["scatter_reduce"] = [lambda x, d=d: torch.scatter_reduce(x, d, _index(d), torch.ones(_shape_with(d, 2),
                           dtype=torch.float64), "sum") for d in (0, 1, 2)]
CALLS["take_along_dim"] = [lambda x: torch.take_along_dim(x, _index(1, 1), 1),
                           lambda x: torch.take_along_dim(x, _index(0, 1), dim=0),
                           lambda x: torch.take_along_dim(x, torch.tensor([0, 7]))]
CALLS["repeat_interleave"] = [lambda x, d=d: torch.repeat_interleave(x, 2, d) for d in (0, 1, -1)] + [
    lambda x: torch.repeat_interleave(x, 2)]
for _n in ("narrow", "narrow_copy"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, d, 1, 2) for d in (0, 1, -1, -3)]
for _n in ("select", "select_copy"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, d, 1) for d in (0, 1, -1, -3)]
CALLS["select_scatter"] = [lambda x, d=d: torch.select_scatter(x, torch.zeros(_shape_with(d, 1)).squeeze(d).double(),
                           d, 1) for d in (0, 1, 2)]
CALLS["slice_scatter"] = [lambda x, d=d: torch.slice_scatter(x, torch.zeros(_shape_with(d, 2)).double(), d, 0, 2)
                          for d in (0, 1, 2)] + [lambda x: torch.slice_scatter(x, torch.zeros(2, 3, 4).double(), end=2)]
CALLS["slice_copy"] = [lambda x, d=d: torch.slice_copy(x, d, 0, 2) for d in (0, 1, 2)] + [
    lambda x: torch.slice_copy(x, end=2)]
_SIZES = {0: [2, 3], 1: [1, 2], 2: [1, 3]}
for _n in ("split", "unsafe_split", "split_copy"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, 2, d) for d in (0, 1, 2)] + [
        lambda x, f=torch.__dict__[_n]: f(x, 2)]
for _n in ("split_with_sizes", "unsafe_split_with_sizes", "split_with_sizes_copy"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, _SIZES[d], d) for d in (0, 1, 2)] + [
        lambda x, f=torch.__dict__[_n]: f(x, [2, 3])]
for _n in ("tensor_split", "chunk", "unsafe_chunk"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, 2, d) for d in (0, 1, 2)] + [
        lambda x, f=torch.__dict__[_n]: f(x, 2), lambda x, f=torch.__dict__[_n]: f(x, 2, dim=1)]
for _n in ("unbind", "unbind_copy"):
    CALLS[_n] = _dims(getattr(torch, _n))
for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    CALLS[f"fft_{_n}"] = _dims(getattr(torch.fft, _n), None, values=(0, 1, -1))
for _n in ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"):
    CALLS[f"fft_{_n}"] = _dims(getattr(torch.fft, _n), None, values=((1, 2), (0, 1), (-1, -2)))
for _n in ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"):
    CALLS[f"fft_{_n}"] = _dims(getattr(torch.fft, _n), None, values=((1, 2), (0, 2), (-1,))) + [
        lambda x, f=torch.fft.__dict__[_n]: f(x, s=(3, 4))]
for _n in ("fftshift", "ifftshift"):
    CALLS[f"fft_{_n}"] = _dims(getattr(torch.fft, _n), values=(0, 1, (1, 2)))
CALLS["where"] = [lambda x: torch.where(x > 0.5, x, 0.0), lambda x: torch.where(x > 0.5, Y, x),
                  lambda x: torch.where(x > 0.5), (lambda x: torch.where(x, Y, X), X > 0.5)]
CALLS["vsplit"] = [lambda x: torch.vsplit(x, [2])]
CALLS["dsplit"] = [lambda x: torch.dsplit(x, [2])]
CALLS["hsplit"] = [lambda x: torch.hsplit(x, [1]), (lambda x: torch.hsplit(x, [2]), X[:, 0, 0])]
CALLS["trace"] = [(torch.trace, X[:, :, 0])]
CALLS["diag"] = [(torch.diag, X[:, 0, 0]), (torch.diag, X[:, :, 0])]
CALLS["diagflat"] = [(torch.diagflat, X[:, 0, 0])]
for _n in ("t", "t_copy"):
    CALLS[_n] = [(getattr(torch, _n), X[:, :, 0]), (getattr(torch, _n), X[:, 0, 0])]
CALLS["adjoint"] = [torch.adjoint, (torch.adjoint, X[:, :, 0])]
CALLS["tril"] = [torch.tril, (torch.tril, X[:, :, 0]), lambda x: torch.tril(x, 1)]
CALLS["triu"] = [torch.triu, (torch.triu, X[:, :, 0])]
CALLS["pairwise_distance"] = [lambda x: F.pairwise_distance(x, Y), lambda x: F.pairwise_distance(Y, x),
                              (lambda x: F.pairwise_distance(x, X[:, 0, 0]), X[:, 0, 0])]
for _n in ("cat", "concat"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f([x, Y], d) for d in (0, 1, -1, -3)] + [
        lambda x, f=torch.__dict__[_n]: f([x, x]), lambda x, f=torch.__dict__[_n]: f([Y, x], dim=2)]
CALLS["concatenate"] = [lambda x, d=d: torch.concatenate([x, Y], d) for d in (0, 1, -1)] + [
    lambda x: torch.concatenate([x, x], axis=2), lambda x: torch.concatenate([Y, x])]
CALLS["stack"] = [lambda x, d=d: torch.stack([x, Y], d) for d in (0, 1, 3, -1, -4)] + [
    lambda x: torch.stack((x, x)), lambda x: torch.stack([Y, x], dim=2)]
CALLS["hstack"] = [lambda x: torch.hstack([x, Y]), (lambda x: torch.hstack([x, x]), X[:, 0, 0])]
CALLS["vstack"] = [lambda x: torch.vstack([x, Y])]
CALLS["row_stack"] = [lambda x: torch.row_stack([x, Y])]
CALLS["dstack"] = [lambda x: torch.dstack([x, Y]), (lambda x: torch.dstack([x, x]), X[:, :, 0]),
                   (lambda x: torch.dstack([x, x]), X[:, 0, 0])]
CALLS["column_stack"] = [(lambda x: torch.column_stack([x, x]), X[:, 0, 0]),
                         (lambda x: torch.column_stack([x, x]), X[:, :, 0])]
CALLS["cosine_similarity"] = _dims(F.cosine_similarity, Y, values=(0, 1, -1)) + [
    lambda x: F.cosine_similarity(Y, x, 2)]
_X3 = _f(N, 3, 3)
CALLS["cross"] = [(lambda x, d=d: torch.cross(x, _X3.flip(1), dim=d), _X3) for d in (1, 2)] + [
    (lambda x: torch.cross(x, _f(3, 4, 3), dim=0), _f(3, 4, 3, seed=4))] + [
    (lambda x: torch.cross(x, _f(3, 4, 3)), _f(3, 4, 3)), (lambda x: torch.cross(x, _X3), _X3)]
CALLS["linalg_cross"] = [(lambda x, d=d: torch.linalg.cross(x, _X3.flip(1), dim=d), _X3) for d in (1, -2)] + [
    (lambda x: torch.linalg.cross(x, _f(3, 4), dim=0), _f(3, 4, seed=4))] + [
    (lambda x: torch.linalg.cross(x, _X3.flip(1)), _X3)]
CALLS["linalg_vecdot"] = [lambda x, d=d: torch.linalg.vecdot(x, Y, dim=d) for d in (0, 1)] + [
    lambda x: torch.linalg.vecdot(Y, x)]
CALLS["renorm"] = [lambda x, d=d: torch.renorm(x, 2, d, 0.5) for d in (0, 1, 2)]
for _n in ("diagonal", "diagonal_copy"):
    CALLS[_n] = [getattr(torch, _n), lambda x, f=torch.__dict__[_n]: f(x, 0, 1, 2),
                 lambda x, f=torch.__dict__[_n]: f(x, 1, 2, 0), lambda x, f=torch.__dict__[_n]: f(x, dim1=-1, dim2=1)]
CALLS["diagonal_scatter"] = [lambda x: torch.diagonal_scatter(x, torch.zeros(N, 3).double(), 0, 1, 2),
                             lambda x: torch.diagonal_scatter(x, torch.zeros(4, 3).double())]
CALLS["linalg_diagonal"] = [torch.linalg.diagonal, lambda x: torch.linalg.diagonal(x, dim1=0, dim2=2)]
CALLS["diag_embed"] = [torch.diag_embed, lambda x: torch.diag_embed(x, 0, 0, 1), lambda x: torch.diag_embed(x, 0, 1, 3)]
for _n, (_a, _b) in {"transpose": ("dim0", "dim1"), "transpose_copy": ("dim0", "dim1"),
                     "swapaxes": ("axis0", "axis1"), "swapdims": ("dim0", "dim1")}.items():
    CALLS[_n] = [lambda x, a=a, b=b, f=torch.__dict__[_n]: f(x, a, b) for a, b in ((1, 2), (0, 1), (2, 0), (0, 0))]
    if _n != "transpose_copy":
        CALLS[_n].append(lambda x, f=torch.__dict__[_n], k=(_a, _b): f(x, **{k[0]: -1, k[1]: 1}))
for _n in ("movedim", "moveaxis"):
    CALLS[_n] = [lambda x, s=s, d=d, f=torch.__dict__[_n]: f(x, s, d) for s, d in (
        (1, 2), (0, 1), (1, 0), ((0, 1), (0, 2)), ((1, 2), (2, 1)), (-1, 0))]
for _n in ("permute", "permute_copy"):
    CALLS[_n] = [lambda x, p=p, f=torch.__dict__[_n]: f(x, p) for p in ((0, 2, 1), (1, 0, 2), (-3, -1, -2))]
CALLS["reshape"] = [lambda x, s=s: torch.reshape(x, s) for s in ((N, 12), (-1,), (N, -1), (3, 20), (N, 2, 6))]
CALLS["view_copy"] = [lambda x, s=s: torch.view_copy(x, s) for s in ((N, 12), (60,))]
CALLS["flatten"] = [torch.flatten, lambda x: torch.flatten(x, 1), lambda x: torch.flatten(x, 0, 1),
                    (torch.flatten, X[:, :1, 0]), lambda x: torch.flatten(x, start_dim=1, end_dim=2)]
CALLS["unflatten"] = [lambda x: torch.unflatten(x, 2, (2, 2)), lambda x: torch.unflatten(x, 0, (N, 1)),
                      lambda x: torch.unflatten(x, 0, (1, N))]
CALLS["ravel"] = [torch.ravel, (torch.ravel, X[:, :1, 0])]
for _n in ("squeeze", "squeeze_copy"):
    CALLS[_n] = [getattr(torch, _n), (getattr(torch, _n), X[:, :1]),
                 (lambda x, f=torch.__dict__[_n]: f(x, 1), X[:, :1]),
                 (getattr(torch, _n), X[:1, :1]) if _n == "squeeze" else (getattr(torch, _n), X[:, :1, :1])]
for _n in ("unsqueeze", "unsqueeze_copy"):
    CALLS[_n] = [lambda x, d=d, f=torch.__dict__[_n]: f(x, d) for d in (0, 1, -1, -4)]
CALLS["atleast_1d"] = [torch.atleast_1d]
CALLS["atleast_2d"] = [torch.atleast_2d, (torch.atleast_2d, X[:, 0, 0])]
CALLS["atleast_3d"] = [torch.atleast_3d, (torch.atleast_3d, X[:, :, 0]), (torch.atleast_3d, X[:, 0, 0])]
CALLS["view_as_real"] = [(torch.view_as_real, torch.complex(X, Y))]
CALLS["view_as_complex"] = [(torch.view_as_complex, X[:, :, :2].contiguous())]
for _n in ("layer_norm", "rms_norm"):
    CALLS[_n] = [lambda x, s=s, f=F.__dict__[_n]: f(x, s) for s in ((4,), (3, 4), (N, 3, 4), [4])]
CALLS["pad"] = [lambda x, p=p: F.pad(x, p) for p in ((1, 1), (1, 0, 0, 2), (1, 1, 1, 1, 1, 1))] + [
    lambda x: F.pad(x, (1, 1), mode="reflect")]
CALLS["constant_pad_nd"] = [lambda x, p=p: torch.constant_pad_nd(x, p) for p in ([1, 1], [0, 0, 1, 1, 2, 0])]
CALLS["group_norm"] = [lambda x: F.group_norm(x, 3), lambda x: F.group_norm(x, 1)]
CALLS["instance_norm"] = [F.instance_norm]
_RM, _RV = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
CALLS["batch_norm"] = [lambda x: F.batch_norm(x, _RM.clone(), _RV.clone(), training=True),
                       lambda x: F.batch_norm(x, _RM.clone(), _RV.clone()),
                       lambda x: F.batch_norm(x, _RM.clone(), _RV.clone(), None, None, True),
                       lambda x: torch.batch_norm(x, None, None, _RM.clone(), _RV.clone(), False, 0.1, 1e-5, False),
                       lambda x: torch.batch_norm(x, None, None, _RM.clone(), _RV.clone(), True, 0.1, 1e-5, False)]
CALLS["linear"] = [lambda x: F.linear(x, W), lambda x: F.linear(x, W, torch.ones(6, dtype=torch.float64)),
                   (lambda x: F.linear(X[:, 0], W, x), _f(N, 6)), (lambda x: F.linear(X[:, 0, :3], x), _f(N, 3))]
CALLS["bilinear"] = [lambda x: F.bilinear(x, Y, _f(2, 4, 4)), lambda x: F.bilinear(Y, x, _f(2, 4, 4))]
_IDS = torch.tensor([1, 2, 3, 0, 4])
_TABLE = _f(6, 3)
CALLS["embedding"] = [(lambda x: F.embedding(x, _TABLE), _IDS), (lambda x: torch.embedding(_TABLE, x), _IDS),
                      (lambda x: F.embedding(_IDS, x), _f(N, 3)), (lambda x: torch.embedding(x, _IDS), _f(N, 3))]
CALLS["embedding_bag"] = [(lambda x: F.embedding_bag(x, _TABLE), XI[:, 0, :3] % 6),
                          (lambda x: F.embedding_bag(x, _TABLE, torch.tensor([0, 2])), _IDS),
                          (lambda x: F.embedding_bag(x, _TABLE, mode="max"), XI[:, 0, :3] % 6)]
CALLS["one_hot"] = [(lambda x: F.one_hot(x, 6), _IDS)]
CALLS["bucketize"] = [lambda x: torch.bucketize(x, torch.tensor([0.3, 0.6], dtype=torch.float64)),
                      (lambda x: torch.bucketize(X, x), torch.tensor([0.1, 0.2, 0.3, 0.6, 0.9], dtype=torch.float64))]
CALLS["isin"] = [(lambda x: torch.isin(x, torch.tensor([3, 5])), XI),
                 (lambda x: torch.isin(XI, x), torch.tensor([3, 5, 7, 9, 11]))]
CALLS["outer"] = [(lambda x: torch.outer(x, X[0, 0]), X[:, 0, 0]), (lambda x: torch.outer(X[0, 0], x), X[:, 0, 0])]
CALLS["cdist"] = [(lambda x: torch.cdist(x, Y[:, 0]), X[:, 0]), (lambda x: torch.cdist(Y[:, 0], x), X[:, 0])]
CALLS["mm"] = [(lambda x: torch.mm(x, W.T), X[:, 0]), (lambda x: torch.mm(_f(2, N), x), X[:, 0])]
CALLS["addmm"] = [(lambda x: torch.addmm(torch.ones(6, dtype=torch.float64), x, W.T), X[:, 0]),
                  (lambda x: torch.addmm(x, X[:, 0], W.T), _f(N, 6)), (lambda x: torch.addmm(Y[:2, 0, :2], _f(2, N), x),
                                                                      X[:, 0, :2])]
CALLS["bmm"] = [lambda x: torch.bmm(x, Y.transpose(1, 2)), lambda x: torch.bmm(Y, torch.transpose(x, 1, 2))]
CALLS["baddbmm"] = [lambda x: torch.baddbmm(torch.zeros(N, 3, 3, dtype=torch.float64), x, Y.transpose(1, 2)),
                    lambda x: torch.baddbmm(torch.narrow(x, 2, 0, 3), Y, Y.transpose(1, 2))]
CALLS["matmul"] = [lambda x: torch.matmul(x, W.T), (lambda x: torch.matmul(x, W.T), X[:, 0]),
                   (lambda x: torch.matmul(_f(2, N), x), X[:, 0]), lambda x: torch.matmul(_f(2, 3), x),
                   (lambda x: torch.matmul(x, _f(4)), X[:, 0]), (lambda x: torch.matmul(x, _f(N, 2)), X[:, 0, 0]),
                   lambda x: torch.matmul(x, _f(1, 4, 2)), lambda x: torch.matmul(x, _f(N, 4, 2)),
                   lambda x: torch.matmul(x, _f(2, N, 4, 2))]
CALLS["linalg_matmul"] = [(lambda x: torch.linalg.matmul(x, W.T), X[:, 0]),
                          (lambda x: torch.linalg.matmul(W, x), X[:, 0, :4].T.contiguous())]
CALLS["__rmatmul__"] = [(lambda x: W.T.contiguous().__rmatmul__(x), X[:, 0]),
                        (X[:, 0, :4].__rmatmul__, _f(2, N))]
for _k in (1, 2, 3):
    _xb = _f(N, 2, *([4] * _k))
    _w = _f(3, 2, *([2] * _k))
    _w_unbatched, _w_transposed = _f(3, N, *([2] * _k)), _f(2, 3, *([2] * _k))
    CALLS[f"conv{_k}d"] = [(lambda x, c=F.__dict__[f"conv{_k}d"], w=_w: c(x, w), _xb),
                           (lambda x, c=F.__dict__[f"conv{_k}d"], w=_w_unbatched: c(x, w), _f(N, *([4] * _k)))]
    CALLS[f"conv_transpose{_k}d"] = [(lambda x, c=F.__dict__[f"conv_transpose{_k}d"], w=_w_transposed: c(x, w),
                                      _xb)]
    for _pool, _args in (("max_pool", (2,)), ("avg_pool", (2,)), ("lp_pool", (2.0, 2)), ("adaptive_max_pool", (2,)),
                         ("adaptive_avg_pool", (2,))):
        CALLS[f"{_pool}{_k}d"] = [(lambda x, p=F.__dict__[f"{_pool}{_k}d"], a=_args: p(x, *a), _xb),
                                  (lambda x, p=F.__dict__[f"{_pool}{_k}d"], a=_args: p(x, *a), _xb[0])]
    CALLS[f"max_pool{_k}d_with_indices"] = [
        (lambda x, p=F.__dict__[f"max_pool{_k}d"]: p(x, 2, return_indices=True), _xb)]
    CALLS[f"adaptive_max_pool{_k}d_with_indices"] = [
        (lambda x, p=F.__dict__[f"adaptive_max_pool{_k}d"]: p(x, 2, return_indices=True), _xb)]


# -- elementwise entries: argument patterns tried until torch accepts one ----------------------------------------
_SPECIAL_ARGS = {
    "polygamma": [lambda x: torch.polygamma(1, x)], "special_polygamma": [lambda x: torch.special.polygamma(1, x)],
    "mvlgamma": [lambda x: torch.mvlgamma(x + 2, 2)],
    "special_multigammaln": [lambda x: torch.special.multigammaln(x + 2, 2)],
    "native_dropout": [(lambda x: torch.native_dropout(x, 0.5, True), X, {"random": True})],
    "broadcast_tensors": [lambda x: torch.broadcast_tensors(x, Y[0]),
                          lambda x: torch.broadcast_tensors(x, _f(2, N, 3, 4))],
    "broadcast_to": [lambda x: torch.broadcast_to(x, (N, 3, 4)), lambda x: torch.broadcast_to(x, (2, N, 3, 4)),
                     (lambda x: torch.broadcast_to(x, (N, 3, 4)), X[:, :1])],
    "expand_copy": [lambda x: torch.expand_copy(x, (N, 3, 4)), lambda x: torch.expand_copy(x, (N, N, 3, 4))],
    "expand_as": [X[:1].expand_as, X[0].expand_as],
    "tile": [lambda x: torch.tile(x, (1, 2)), lambda x: torch.tile(x, (2, 1, 1)), lambda x: torch.tile(x, (1, 1, 1, 1)),
             lambda x: torch.tile(x, (N, 1, 1, 1))],
    "full_like": [lambda x: torch.full_like(x, 2.0)],
    "randint_like": [(lambda x: torch.randint_like(x, 10), X, {"random": True})],
    "to": [lambda x: X.to(x) if isinstance(x, LoDTensor) else x.to(X)],
    "type_as": [lambda x: X.type_as(x) if isinstance(x, LoDTensor) else x.type_as(X)],
    "complex": [lambda x: torch.complex(x, Y)], "polar": [lambda x: torch.polar(x, Y)],
    "masked_fill": [lambda x: torch.masked_fill(x, Y > 0.5, 0.0), (lambda x: torch.masked_fill(Y, x, 0.0), X > 0.5)],
    "masked_fill_": [(lambda x: Y.clone().masked_fill_(x, 0.0), X > 0.5)],
    "empty_like": [(torch.empty_like, X, {"values": False})],
    "threshold": [lambda x: torch.threshold(x, 0.5, 0.0)], "_threshold": [lambda x: F.threshold(x, 0.5, 0.0)],
    "threshold_": [lambda x: torch.threshold_(x, 0.5, 0.0) if isinstance(x, LoDTensor) else torch.threshold_(
        x.clone(), 0.5, 0.0)],
    "prelu": [lambda x: F.prelu(x, torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64))],
    "lerp": [lambda x: torch.lerp(x, Y, 0.3)], "lerp_": [lambda x: Y.clone().lerp_(x, 0.3)],
    "addcmul_": [lambda x: Y.clone().addcmul_(x, Y), lambda x: Y.clone().addcmul_(Y, torch.narrow(x, 1, 0, 1))],
    "addcdiv_": [lambda x: Y.clone().addcdiv_(x, Y), lambda x: Y.clone().addcdiv_(Y, x)],
    "ldexp": [lambda x: torch.ldexp(x, YI)], "ldexp_": [lambda x: torch.ldexp_(x if isinstance(x, LoDTensor) else
                                                                              x.clone(), YI)],
    "clamp_": [lambda x: torch.clamp_(x if isinstance(x, LoDTensor) else x.clone(), 0.3, 0.6)],
    "clip_": [lambda x: torch.clip_(x if isinstance(x, LoDTensor) else x.clone(), 0.3, 0.6)],
    "bernoulli_": [(lambda x: torch.zeros(N, 3, 4, dtype=torch.float64).bernoulli_(x), X, {"random": True})],
    "feature_dropout": [(lambda x: torch.feature_dropout(x, 0.5, True), X, {"random": True})],
    "feature_alpha_dropout": [(lambda x: torch.feature_alpha_dropout(x, 0.5, True), X, {"random": True}),
                              (lambda x: F.feature_alpha_dropout(x, 0.5, True), X, {"random": True})],
    "dropout": [(lambda x: F.dropout(x, 0.5), X, {"random": True}), (lambda x: torch.dropout(x, 0.5, True), X,
                                                                      {"random": True})],
    "alpha_dropout": [(lambda x: F.alpha_dropout(x, 0.5, True), X, {"random": True})],
    "imag": [(torch.imag, torch.complex(X, Y))], "real": [(torch.real, torch.complex(X, Y))],
    # their draws depend on the values (how many random numbers an element takes), so a changed row moves
    # the stream under later rows: only the rows' count and rank can be compared
    "rrelu": [(lambda x: F.rrelu(x - 0.5, training=True), X, {"random": True, "values": False}),
              lambda x: torch.rrelu(x - 0.5)],
    "poisson": [(torch.poisson, X, {"random": True, "values": False})],
}
for _n in ("dropout_", "alpha_dropout_", "feature_dropout_", "feature_alpha_dropout_"):
    _SPECIAL_ARGS[_n] = [(lambda x, f=torch.__dict__[_n]: f(x if isinstance(x, LoDTensor) else x.clone(), 0.5, True), X,
                          {"random": True})]
_INT_NAMES = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
              "gcd", "lcm", "__and__", "__or__", "__xor__", "__rand__", "__ror__", "__rxor__", "__iand__", "__ior__",
              "__ixor__", "__lshift__", "__rshift__", "__rlshift__", "__rrshift__", "__ilshift__", "__irshift__"}


def _namespaces(name):
    spaces = ((torch, ""), (F, ""), (torch.special, "special_"), (torch.linalg, "linalg_"), (torch.fft, "fft_"))
    for ns, prefix in spaces:
        attr = name[len(prefix):] if name.startswith(prefix) else None
        f = getattr(ns, attr, None) if attr else None
        if callable(f) and getattr(f, "__name__", None) == name:
            yield f
    if name == "_threshold":
        yield F.threshold
    if name == "log_sigmoid":
        yield F.logsigmoid


def _ew_calls(name):
    """Sample calls for an elementwise entry: the LoDTensor in each operand slot, and a broadcast one."""
    base = name.rstrip("_") if not name.startswith("__") else name
    ints = base in _INT_NAMES or base.rstrip("_") in _INT_NAMES
    x, y = (XI, YI) if ints else (X, Y)
    if name in _SPECIAL_ARGS:
        return [c if isinstance(c, tuple) else (c, x) for c in _SPECIAL_ARGS[name]]
    calls = []
    fns = list(_namespaces(name))
    if not fns and hasattr(torch.Tensor, name):  # a Tensor method: the LoDTensor is the other operand
        meth = getattr(torch.Tensor, name)
        return [(lambda t, m=meth: m(y.clone(), t), x), (lambda t, m=meth: m(y.clone(), t), x[:, :1]),
                (lambda t, m=meth: m(BIG.clone() if not ints else YI.expand(N, N, 3, 4).clone(), t), x)]
    inplace = name.endswith("_")
    for f in fns[:1]:  # the first of torch, F, special...: F.tanh and F.sigmoid do not dispatch at all
        for pattern in ((), (y,), (0.5,), (y, y), (y, 0.5)):
            def call(t, f=f, p=pattern):
                if inplace and not isinstance(t, LoDTensor):
                    t = t.clone()
                return f(t, *p)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    call(x.clone())
            except (TypeError, RuntimeError, ValueError):
                continue
            calls.append((call, x))
            if pattern and isinstance(pattern[0], torch.Tensor) and not inplace:
                calls.append((lambda t, f=f, p=pattern: f(p[0], t, *p[1:]), y))  # the LoDTensor second
                big = BIG if not ints else YI.expand(N, N, 3, 4).clone()
                calls.append((lambda t, f=f, p=pattern, b=big: f(t, b, *p[1:]), x))  # broadcast in front
            break
    return calls


def _samples():
    for name in sorted(RULES):
        if RULES[name] == ("ew",) and name not in CALLS:
            items = _ew_calls(name)
        else:
            items = CALLS.get(name, [])
        for item in items:
            call, x, opts = (item + ({},))[:3] if isinstance(item, tuple) else (item, X, {})
            yield name, call, x, opts


SAMPLES = list(_samples())


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_table_row_is_sampled(name):
    if name == "hash_tensor" and not hasattr(torch, name):
        pytest.skip(f"torch {torch.__version__} has no {name}: nothing to sample")
    assert any(n == name for n, *_ in SAMPLES), f"no sample call for table entry {name!r}"


@pytest.mark.parametrize("case", range(len(SAMPLES)), ids=[f"{n}-{i}" for i, (n, *_) in enumerate(SAMPLES)])
def test_lod_kept_exactly_when_rows_stay_rows(case, monkeypatch):
    name, call, x, opts = SAMPLES[case]
    seen = []
    decide = _row_rules.decide

    def spy(func, args, kwargs):
        seen.append(_row_rules.rule_of(func)[0])
        return decide(func, args, kwargs)

    monkeypatch.setattr("lodtensor.nested._lod_torch.decide", spy)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(x.clone())
    except Exception as err:  # noqa: BLE001 - a sample torch refuses is a broken sample
        pytest.fail(f"sample {name} fails on plain data: {type(err).__name__}: {err}")
    check(call, x, random=opts.get("random", False) or _is_random(call, x), values=opts.get("values", True))
    assert name in seen, f"the call dispatched {seen}, not {name!r}"


def test_the_issue_examples():
    t = LoDTensor(torch.arange(10.0).reshape(5, 2), [[0, 2, 5]])
    perm = torch.tensor([4, 3, 2, 1, 0])
    out = torch.index_select(t, 0, perm)
    assert not isinstance(out, LoDTensor) and out.tolist() == t.data[perm].tolist()
    for call in (torch.msort, torch.flipud, lambda x: F.softmin(x, dim=0), lambda x: torch.topk(x, 5, 0),
                 lambda x: torch.roll(x, 1, 0)):
        with pytest.raises(TypeError, match="would mix its sequences"):
            call(t)
    assert torch.roll(t, 1, 1).lod() == [[0, 2, 5]] and torch.topk(t, 1, 1).values.lod() == [[0, 2, 5]]


def test_unknown_functions_give_plain_data():
    t = LoDTensor(X.clone(), LOD)
    out = torch.nn.functional.scaled_dot_product_attention(t, t, t)
    assert not isinstance(out, LoDTensor)
    assert torch.equal(out, F.scaled_dot_product_attention(X, X, X))
    assert not isinstance(torch.einsum("nij->nij", t), LoDTensor)


def test_out_lod_tensor_is_refused_before_writing_when_rows_move():
    t = LoDTensor(X.clone(), LOD)
    buf = LoDTensor(torch.zeros(N, 3, 4, dtype=torch.float64), LOD)
    before = buf.data.clone()
    with pytest.raises(TypeError, match="out= is a LoDTensor"):
        torch.index_select(t, 0, torch.tensor(PERM), out=buf)
    with pytest.raises(TypeError, match="out= is a LoDTensor"):
        torch.add(LoDTensor(X[:1].clone(), [[0, 1]]), torch.ones(N, 3, 4, dtype=torch.float64), out=buf)
    assert torch.equal(buf.data, before)
    assert torch.add(t, 1, out=buf).lod() == LOD and torch.equal(buf.data, X + 1)
    with pytest.raises(TypeError, match="different lods"):
        torch.add(t, 1, out=LoDTensor(torch.zeros(N, 3, 4, dtype=torch.float64), [[0, 1, N]]))


def test_autograd_through_kept_and_plain_results():
    x = X.clone().requires_grad_(True)
    t = LoDTensor(x, LOD)
    kept = torch.topk(t, 2, 1).values
    plain = torch.index_select(t, 0, torch.tensor(PERM))
    (kept.data.sum() + plain.sum()).backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_tensors_without_data_or_with_an_unfitting_lod_raise_before_any_rule():
    for call in (lambda t: torch.sum(t, 0), torch.tanh, lambda t: torch.roll(t, 1, 1), torch.msort):
        with pytest.raises(ValueError, match="holds no data"):
            call(LoDTensor())
    stale = LoDTensor(X.clone(), LOD)
    stale.set(torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"len\(data\)=3"):
        torch.topk(stale, 1, 1)


def test_numpy_data_rows():
    t = LoDTensor(np.arange(10.0).reshape(5, 2), [[0, 2, 5]])
    assert torch.cumsum(t, 1).lod() == [[0, 2, 5]]
    with pytest.raises(TypeError, match="sequence"):
        torch.cumsum(t, 0)


@pytest.mark.gpu
def test_cuda_data_follows_the_table():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    t = LoDTensor(X.cuda(), LOD)
    kept = torch.topk(t, 2, 1)
    assert kept.values.lod() == LOD and kept.values.data.is_cuda
    assert F.linear(t, W[:, :4].cuda().contiguous()).lod() == LOD
    plain = torch.index_select(t, 0, torch.tensor(PERM, device="cuda"))
    assert not isinstance(plain, LoDTensor) and plain.is_cuda
    assert not isinstance(t + BIG.cuda(), LoDTensor)
    with pytest.raises(TypeError, match="would mix its sequences"):
        torch.roll(t, 1, 0)
