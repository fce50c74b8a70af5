"""A second differential hunt against torch 2.13's torch.nested: gradients, views, dtype promotion with
0-d operands, transposed values(), nested_tensor_from_jagged over part of values, masked_select,
products on the strided layout. The reference is always torch's own result on the same data."""

import warnings

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LENGTHS = [(2, 0, 3), (3, 1, 5)]


def _components(lengths, width=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, width, generator=g, dtype=torch.float64).to(dtype) for n in lengths]


def _torch_nested(comps, layout=torch.jagged, requires_grad=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([c.clone() for c in comps], layout=layout, requires_grad=requires_grad)


def _np(x):
    if isinstance(x, torch.Tensor):  # (bfloat16 has no NumPy dtype: compared as float32, dtype checked apart)
        return x.detach().float().numpy() if x.dtype == torch.bfloat16 else x.detach().numpy()
    return np.asarray(x)


def _parts(x):
    if isinstance(x, ln.NestedTensor) or (isinstance(x, torch.Tensor) and x.is_nested):
        return list(x.unbind())
    return [x]


def _same(ours, theirs, tol=1e-6):
    a, b = _parts(ours), _parts(theirs)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert str(x.dtype).replace("torch.", "") == str(y.dtype).replace("torch.", "")
        x, y = _np(x), _np(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=tol, atol=tol)


def _loss(x):
    """A weighted sum that gives every element its own gradient."""
    total = 0
    for i, p in enumerate(_parts(x)):
        w = torch.linspace(-1, 1, p.numel(), dtype=torch.float64).reshape(p.shape)
        total = total + (p.double() * w).sum() * (i + 1)
    return total


# -- gradients: values and gradients against torch's jagged layout ---------------------------------
def _sdpa(x):
    q = x.unflatten(-1, (2, 2)).transpose(1, 2)
    return F.scaled_dot_product_attention(q, q, q).transpose(1, 2).flatten(-2)


def _w(x, *shape):
    return torch.linspace(-1, 1, int(np.prod(shape)), dtype=x.dtype).reshape(shape)


GRAD_OPS = {  # ops whose backward torch 2.13's jagged layout runs
    "softmax_last": lambda x: x.softmax(-1),
    "layer_norm": lambda x: F.layer_norm(x, (4,), _w(x, 4) + 1.5, _w(x, 4)),
    "linear": lambda x: F.linear(x, _w(x, 3, 4), _w(x, 3)),
    "matmul_dense": lambda x: x @ _w(x, 4, 3),
    "to_padded": lambda x: x.to_padded_tensor(0.5),
    "unbind": lambda x: x.unbind()[2] * 2,
    "transpose": lambda x: x.transpose(1, 2) * 2,
    "values": lambda x: x.values() * 3,
    "unsqueeze": lambda x: x.unsqueeze(-1) * 2,
    "amax_last": lambda x: x.amax(-1),
    "mean_last": lambda x: x.mean(-1),
    "reshape": lambda x: x.reshape(x.shape[0], -1, 2, 2),
    "div": lambda x: x / (x.abs() + 1),
    "where": lambda x: torch.where(x > 0, x, x * 2),
    "add_dense": lambda x: x + _w(x, 4),
    "mul_dense_b11": lambda x: x * _w(x, 3, 1, 1),
    "sdpa": _sdpa,
    "cat_last": lambda x: torch.cat([x, x * 2], dim=-1),
    "rpow": lambda x: 2**x,
}


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("op", sorted(GRAD_OPS))
def test_values_and_gradients_match_torch_jagged(op, dtype, lengths):
    fn = GRAD_OPS[op]
    comps = _components(lengths, dtype=dtype)
    ours = ln.nested_tensor([c.clone() for c in comps], layout="jagged", requires_grad=True)
    theirs = _torch_nested(comps, requires_grad=True)
    out, ref = fn(ours), fn(theirs)
    tol = 1e-9 if dtype == torch.float64 else 1e-5
    _same(out, ref, tol)
    _loss(out).backward()
    _loss(ref).backward()
    _same(ours.grad, theirs.grad, tol * 10)


DENSE_GRAD_OPS = {  # torch's jagged layout has no backward for these: the per-component dense one
    "sum_ragged": (lambda x: x.sum(1), lambda c: c.sum(0)),
    "sum_last": (lambda x: x.sum(-1), lambda c: c.sum(-1)),
    "mean_ragged": (lambda x: x.mean(1), lambda c: c.mean(0)),
    "log_softmax_last": (lambda x: F.log_softmax(x, -1), lambda c: F.log_softmax(c, -1)),
    "narrow_last": (lambda x: x.narrow(2, 1, 2), lambda c: c.narrow(1, 1, 2)),
    "chunk_last": (lambda x: x.chunk(2, dim=-1)[1], lambda c: c.chunk(2, -1)[1]),
    "split_last": (lambda x: x.split([1, 3], dim=-1)[1], lambda c: c.split([1, 3], -1)[1]),
    "select_last": (lambda x: x.select(2, 1), lambda c: c.select(1, 1)),
    "transpose_sum_ragged": (lambda x: x.transpose(1, 2).sum(2), lambda c: c.t().sum(1)),
    "transpose_matmul": (lambda x: x.transpose(1, 2) @ x, lambda c: c.t() @ c),
    "prod_last": (lambda x: x.prod(-1), lambda c: c.prod(-1)),
    "rms_norm": (lambda x: F.rms_norm(x, (4,), _w(x, 4) + 1.5), lambda c: F.rms_norm(c, (4,), _w(c, 4) + 1.5)),
}


def _dense_loss(parts):
    return sum(
        (p.double() * torch.linspace(-1, 1, p.numel(), dtype=torch.float64).reshape(p.shape)).sum() * (i + 1)
        for i, p in enumerate(parts)
    )


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("op", sorted(DENSE_GRAD_OPS))
def test_gradients_torch_jagged_cannot_run_match_dense_torch(op, dtype, lengths):
    """(bfloat16 ``rms_norm`` raised "data type <class 'numpy.str_'> not inexact": its default eps.)"""
    fn, dense = DENSE_GRAD_OPS[op]
    comps = _components(lengths, dtype=dtype)
    ours = ln.nested_tensor([c.clone() for c in comps], layout="jagged", requires_grad=True)
    leaves = [c.clone().requires_grad_() for c in comps]
    out, want = fn(ours), [dense(leaf) for leaf in leaves]
    got = _parts(out) if isinstance(out, ln.NestedTensor) else list(out.unbind(0))
    tol = 1e-9 if dtype == torch.float64 else 3e-2
    assert len(got) == len(want)  # (no zip(strict=): Python 3.9)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True)
    _dense_loss(got).backward()
    _dense_loss(want).backward()
    assert len(ours.grad.unbind()) == len(leaves)
    for g, leaf in zip(ours.grad.unbind(), leaves):
        torch.testing.assert_close(g, leaf.grad, rtol=tol * 10, atol=tol * 10)


# -- rms_norm's default eps: float32's for half precision, as torch ---------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_rms_norm_default_eps_matches_torch(dtype):
    """float16 took float16's epsilon (0.3049 where torch gives 0.9995), bfloat16 raised."""
    comps = [torch.full((2, 4), 0.01), torch.full((1, 4), 0.03)]
    theirs = F.rms_norm(_torch_nested(comps).to(dtype), (4,))
    ours = F.rms_norm(ln.nested_tensor(comps, layout="jagged").to(dtype), (4,))
    _same(ours, theirs, tol=0)
    if dtype != torch.bfloat16:  # the NumPy backend: the same eps (its float16 math may differ by an ulp)
        np_ours = ln.rms_norm(ln.nested_tensor([c.numpy() for c in comps], layout="jagged"), (4,))
        _same(np_ours, F.rms_norm(_torch_nested(comps), (4,)), tol=1e-6)
        half = ln.rms_norm(ln.nested_tensor([c.numpy().astype(np.float16) for c in comps]), (4,))
        _same(half, F.rms_norm(_torch_nested(comps).half(), (4,)), tol=1e-3)


# -- binary ops that take no Python number take a 0-d tensor, as torch ------------------------------
ZERO_D = [torch.tensor(1.5), torch.tensor(2, dtype=torch.int8), torch.tensor(2.5, dtype=torch.float64),
          torch.tensor(True)]


@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
@pytest.mark.parametrize("op", ["maximum", "minimum", "atan2", "hypot", "fmax", "nextafter"])
def test_binary_ops_take_a_zero_dim_tensor_like_torch(op, dtype, lib):
    """A 0-d tensor was refused as "argument 'other' must be Tensor, not Tensor"."""
    comps = [torch.tensor([[1, -2, 3], [4, 5, -6]]).to(dtype), torch.tensor([[7, 0, 1]]).to(dtype)]
    for other in ZERO_D:
        theirs = _torch_nested(comps)
        try:
            ref = getattr(torch, op)(theirs, other)
        except (RuntimeError, TypeError, NotImplementedError):
            continue  # (hypot of integers: torch refuses; so do we, tested elsewhere)
        if lib == "torch":
            ours = getattr(torch, op)(ln.nested_tensor(comps, layout="jagged"), other)
        else:
            ours = getattr(ln, op)(ln.nested_tensor([c.numpy() for c in comps], layout="jagged"), other.numpy())
        _same(ours, ref)
        nested = ln.nested_tensor(comps if lib == "torch" else [c.numpy() for c in comps], layout="jagged")
        swapped = getattr(ln, op)(other if lib == "torch" else other.numpy(), nested)
        _same(swapped, _torch_nested([getattr(torch, op)(other, c) for c in comps]))  # per component
    with pytest.raises(TypeError, match="argument 'other' must be Tensor, not float"):
        getattr(ln, op)(ln.nested_tensor(comps, layout="jagged"), 1.5)  # a Python number: refused, as torch
    with pytest.raises(TypeError, match="argument 'input' must be Tensor, not int"):
        getattr(ln, op)(2, ln.nested_tensor(comps, layout="jagged"))


# -- NumPy operands that dispatch through __array_ufunc__: torch's dtypes -----------------------------
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int32, np.float16, np.float32])
def test_numpy_reflected_operators_follow_torch_dtypes(dtype):
    """``np.array(3) / nt`` ran NumPy's own divide (float64 for integers; torch: float32), and
    ``nt // np.array(2)`` NumPy's floor_divide (float32 // int gave float64)."""
    comps = [np.array([[1, 2, 3], [4, 5, 6]]).astype(dtype), np.array([[7, 1, 1]]).astype(dtype)]
    nt = ln.nested_tensor(comps, layout="jagged")
    dense = torch.from_numpy(np.concatenate(comps))
    for other in (np.array(3), np.array(2.5), np.array(2, np.int8), np.array([1.5, 2.0, 4.0])):
        t_other = torch.from_numpy(other)
        got = (other / nt).values()
        want = t_other / dense
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), (other, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-3)
        got, want = (nt // other).values(), dense // t_other
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), (other, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-3)
    if dtype is np.bool_:
        with pytest.raises((TypeError, RuntimeError), match="Bool|bool"):
            torch.from_numpy(np.concatenate(comps)) // torch.tensor(True)  # torch refuses bool // bool
        with pytest.raises((TypeError, RuntimeError), match="Bool|bool"):
            nt // np.array(True)  # (it gave int8: NumPy's floor_divide)


# -- values() of a transposed view: torch's, the storage's values read through the permutation ----
TRANSPOSED = {
    "transpose": lambda x: x.transpose(1, 2),
    "unflatten_transpose_13": lambda x: x.unflatten(-1, (2, 2)).transpose(1, 3),
    "unflatten_transpose_23": lambda x: x.unflatten(-1, (2, 2)).transpose(2, 3),
    "permute": lambda x: x.unflatten(-1, (2, 2)).permute(0, 2, 3, 1),
    "transpose_twice": lambda x: x.transpose(1, 2).transpose(1, 2),
}


@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("view", sorted(TRANSPOSED))
def test_values_of_a_transposed_view_match_torch(view, lib):
    """``nt.transpose(1, 2).values()`` gave the storage's ``(rows, 4)``; torch's is ``(4, rows)``."""
    comps = _components((2, 3), dtype=torch.float32)
    theirs = TRANSPOSED[view](_torch_nested(comps)).values()
    base = ln.nested_tensor(comps if lib == "torch" else [c.numpy() for c in comps], layout="jagged")
    ours = TRANSPOSED[view](base).values()
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(_np(ours), _np(theirs))
    ours[...] = 0  # a view, as torch's: the write shows in the tensor
    assert not _np(base.values()).any()


def test_values_of_a_transposed_view_carries_the_gradient():
    comps = _components((2, 3))
    ours = ln.nested_tensor(comps, layout="jagged", requires_grad=True)
    theirs = _torch_nested(comps, requires_grad=True)
    _loss(ours.transpose(1, 2).values()).backward()
    _loss(theirs.transpose(1, 2).values()).backward()
    _same(ours.grad, theirs.grad, 1e-12)


# -- nested_tensor_from_jagged with offsets over part of values --------------------------------------
PARTIAL = {
    "end_short": dict(offsets=[0, 2, 5, 9]),
    "start_late": dict(offsets=[1, 2, 5, 10]),
    "both": dict(offsets=[1, 3, 3, 8]),
    "lengths_short": dict(lengths=[2, 3, 4]),
    "no_components": dict(offsets=[0]),
    "empty_components": dict(offsets=[0, 0, 0]),
}


@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("case", sorted(PARTIAL))
def test_from_jagged_with_offsets_over_part_of_values_matches_torch(case, lib):
    """Offsets not starting at 0 or not ending at len(values) raised "lod level 0 must end at
    len(data)"; torch reads those rows (its values()/offsets() report the given ones)."""
    kw = {k: torch.tensor(v) for k, v in PARTIAL[case].items()}
    values = torch.arange(20.0).reshape(10, 2)
    theirs = torch.nested.nested_tensor_from_jagged(values, **kw)
    ours = ln.nested_tensor_from_jagged(values if lib == "torch" else values.numpy(),
                                        **{k: (v if lib == "torch" else v.numpy()) for k, v in kw.items()})
    np.testing.assert_array_equal(_np(ours.values()), _np(theirs.values()))
    np.testing.assert_array_equal(_np(ours.offsets()), _np(theirs.offsets()))
    assert ours.lengths() is None and theirs.lengths() is None
    assert ours.is_contiguous() == theirs.is_contiguous()
    np.testing.assert_array_equal(_np(ln.sum(ours, dim=1)), _np(theirs.sum(1)))
    offs = theirs.offsets().tolist()  # (torch 2.13's unbind() of such a tensor raises: the slices)
    want = [values[a:b] for a, b in zip(offs[:-1], offs[1:])]
    got = ours.unbind()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_np(g), w.numpy())
    if len(got) and len(got[0]):
        got[0][0, 0] = -1.0  # a view over values, as torch's
        assert float(ours.values()[offs[0], 0]) == -1.0


def test_from_jagged_still_refuses_offsets_outside_values():
    values = torch.arange(20.0).reshape(10, 2)
    with pytest.raises(ValueError, match="non-decreasing"):
        ln.nested_tensor_from_jagged(values, torch.tensor([0, 5, 2, 10]))
    with pytest.raises(ValueError, match="len\\(data\\)=10"):
        ln.nested_tensor_from_jagged(values, torch.tensor([0, 5, 11]))
    with pytest.raises(ValueError, match="len\\(data\\)=10"):
        ln.nested_tensor_from_jagged(values, lengths=torch.tensor([5, 6]))


# -- masked_select: a mask broadcast over the tensor, a 1-d tensor ----------------------------------
@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_masked_select_broadcasts_the_mask_like_torch(lib):
    x = torch.arange(12.0).reshape(3, 4)
    cases = [
        (x, torch.tensor([True, False, True, True])),
        (x, torch.tensor([[True], [False], [True]])),
        (x, torch.tensor(True)),
        (torch.arange(4.0), torch.tensor([True, False, True, True])),
        (torch.arange(24.0).reshape(2, 3, 4), torch.tensor([False, True, True, False])),
    ]
    for tensor, mask in cases:
        theirs = torch.nested.masked_select(tensor, mask)
        ours = ln.masked_select(*((tensor, mask) if lib == "torch" else (tensor.numpy(), mask.numpy())))
        _same(ours, theirs)
    with pytest.raises(ValueError, match="does not broadcast"):
        ln.masked_select(x, torch.ones(2, 3, 4, dtype=torch.bool))  # torch: expand() refuses it too


# -- a product that contracts the ragged dim on the strided layout: nested, as torch's -------------
@pytest.mark.parametrize("fn", ["matmul", "bmm"])
def test_strided_product_contracting_the_ragged_dim_stays_nested(fn):
    comps = _components((2, 3))
    strided = _torch_nested(comps, torch.strided)
    theirs = getattr(torch, fn)(strided.transpose(1, 2), strided)
    nt = ln.nested_tensor(comps)
    ours = getattr(torch, fn)(nt.transpose(1, 2), nt)
    assert theirs.is_nested and isinstance(ours, ln.NestedTensor) and ours.layout == "strided"
    _same(ours, theirs, 1e-12)
    jagged = ln.nested_tensor(comps, layout="jagged")  # the jagged layout: dense, as torch's
    dense = torch.matmul(jagged.transpose(1, 2), jagged)
    assert not isinstance(dense, ln.NestedTensor)
    tj = _torch_nested(comps)
    torch.testing.assert_close(dense, torch.matmul(tj.transpose(1, 2), tj))


# -- reductions over several dims at once, as torch's jagged layout ---------------------------------
SEVERAL = [(2, 3), (-1, -2), (2, 2), (0, 1), (1, 0), (0, 1, 2), (0, 1, 3), (0, 1, 2, 3), (1, 2), (0, 2), (1, 3)]


@pytest.mark.parametrize("lib", ["torch", "numpy"])
@pytest.mark.parametrize("kind", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("lengths", [(2, 0, 3), (3, 1, 5)])
def test_reductions_over_several_dims_match_torch(lengths, kind, lib):
    """``nt.sum((2, 3))`` raised "reducing along several dims at once is not supported"; torch reduces."""
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.int32):
        comps = [(torch.randn(n, 2, 3, generator=g) * 3).to(dtype) for n in lengths]
        theirs = _torch_nested(comps)
        ours = ln.nested_tensor(comps if lib == "torch" else [c.numpy() for c in comps], layout="jagged")
        for dims in SEVERAL:
            for keepdim in (False, True):
                try:
                    want = getattr(theirs, kind)(dims, keepdim=keepdim)
                except (RuntimeError, TypeError, ValueError, AssertionError):  # (torch's mean: an assert)
                    with pytest.raises((RuntimeError, TypeError, ValueError)):
                        getattr(ours, kind)(dims, keepdim=keepdim)
                    continue
                got = getattr(ours, kind)(dims, keepdim=keepdim)
                assert isinstance(got, ln.NestedTensor) == want.is_nested, (dims, keepdim)
                if want.is_nested:
                    _same(got, want, 1e-5)
                else:
                    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype).endswith(str(want.dtype)[6:])
                    np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-5, atol=1e-5)


def test_reduction_over_several_dims_backpropagates_like_torch():
    comps = [torch.randn(n, 2, 3, dtype=torch.float64) for n in (2, 0, 3)]
    for dims in [(2, 3), (0, 1)]:
        ours = ln.nested_tensor(comps, layout="jagged", requires_grad=True)
        leaves = [c.clone().requires_grad_() for c in comps]
        out = ours.sum(dims)
        (_loss(out) if isinstance(out, ln.NestedTensor) else (out * torch.arange(out.numel()).reshape(out.shape)).sum()
         ).backward()
        if dims == (2, 3):
            want = [leaf.sum((1, 2)) for leaf in leaves]
            _dense_loss(want).backward()
        else:
            total = torch.cat(leaves).sum(0)
            (total * torch.arange(total.numel()).reshape(total.shape)).sum().backward()
        for g, leaf in zip(ours.grad.unbind(), leaves):
            torch.testing.assert_close(g, leaf.grad)


def test_expand_as_matches_torch():
    """``nt.expand_as(other)`` raised AttributeError; torch's jagged layout runs it."""
    comps = [torch.randn(n, 1, 3) for n in (2, 1)]
    theirs = _torch_nested(comps)
    ours = ln.nested_tensor(comps, layout="jagged")
    _same(ours.expand_as(ours), theirs.expand_as(theirs))
    wide = ln.zeros_like(ours).expand(-1, -1, 4, -1)
    _same(ours.expand_as(wide), _torch_nested([c.expand(-1, 4, -1) for c in comps]))
    with pytest.raises(ValueError, match="must be a NestedTensor"):
        ours.expand_as(torch.ones(2, 2, 1, 3))


# -- to(): torch's copy= and non_blocking= (keywords or positional) ----------------------------------
TO_CALLS = {
    "copy_same_dtype": lambda x: x.to(torch.float32, copy=True),
    "copy_positional": lambda x: x.to(torch.float32, False, True),
    "non_blocking": lambda x: x.to("cpu", non_blocking=True),
    "copy_new_dtype": lambda x: x.to(torch.float64, copy=True),
    "tensor_then_flags": lambda x: x.to(x, True, True),
    "preserve_format": lambda x: x.to(torch.float32, memory_format=torch.preserve_format),
}


@pytest.mark.parametrize("call", sorted(TO_CALLS))
def test_to_takes_copy_and_non_blocking_like_torch(call):
    """``nt.to(dtype, copy=True)`` raised "unexpected keyword argument 'copy'" (non_blocking too)."""
    comps = [torch.randn(2, 3), torch.randn(1, 3)]
    theirs = _torch_nested(comps, requires_grad=True)
    ours = ln.nested_tensor(comps, layout="jagged", requires_grad=True)
    got, want = TO_CALLS[call](ours), TO_CALLS[call](theirs)
    _same(got, want)
    assert (got is ours) == (want is theirs)
    shared = got.values().data_ptr() == ours.values().data_ptr()
    assert shared == (want.values().data_ptr() == theirs.values().data_ptr())
    _loss(got).backward()
    _loss(want).backward()
    _same(ours.grad, theirs.grad)


def test_nelement_ndimension_and_is_contiguous_memory_format_like_torch():
    """``nt.nelement()``, ``nt.ndimension()`` raised AttributeError, ``is_contiguous(memory_format=)`` TypeError."""
    comps = [torch.randn(2, 3), torch.randn(4, 3)]
    theirs, ours = _torch_nested(comps), ln.nested_tensor(comps, layout="jagged")
    assert ours.nelement() == theirs.nelement() == 18 and ours.ndimension() == theirs.ndimension() == 3
    for fmt in (torch.contiguous_format, torch.channels_last):
        for a, b in ((ours, theirs), (ours.transpose(1, 2), theirs.transpose(1, 2))):
            assert a.is_contiguous(memory_format=fmt) == b.is_contiguous(memory_format=fmt)
