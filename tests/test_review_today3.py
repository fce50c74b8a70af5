"""Regressions from the leftovers of earlier readings (no Paddle needed)."""

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import lodtensor as lt
from lodtensor.interop import torch_safe_globals
from lodtensor.lod import LoD
from lodtensor.nn import functional as F
from lodtensor.nn._common import LAYER_ACTIVATIONS
from lodtensor.text import BucketBatchSampler

from ._torch_range import safe_globals


# -- a LoD hashes as the tuple it equals ---------------------------------------------------------
@pytest.mark.parametrize("levels", [[[0, 2, 5]], [[0, 1, 3], [0, 2, 2, 7]], [[0]], []])
def test_lod_hash_equals_hash_of_equal_tuple(levels):
    lod, as_tuple = LoD(levels), tuple(tuple(level) for level in levels)
    assert lod == as_tuple and hash(lod) == hash(as_tuple)
    assert {as_tuple: "found"}[lod] == "found" and {lod: "found"}[as_tuple] == "found"
    assert lod in {as_tuple} and len({lod, as_tuple, LoD(levels)}) == 1


def test_lod_hash_differs_for_different_lods_and_is_kept():
    a, b = LoD([[0, 2, 5]]), LoD([[0, 3, 5]])
    assert a != b and hash(a) != hash(b)
    assert hash(a) == hash(a) == hash(LoD([np.array([0, 2, 5], dtype=np.int32)]))


# -- BucketBatchSampler refuses negative lengths ------------------------------------------------
def test_bucket_batch_sampler_refuses_negative_lengths():
    with pytest.raises(ValueError, match=r"lengths\[1\]=-3"):
        BucketBatchSampler([4, -3, 2], batch_size=2)
    assert list(BucketBatchSampler(np.array([0, 3, 1]), batch_size=2, shuffle=False)) == [[0, 2], [1]]


# -- a subclass's own attributes survive pickle, deepcopy and copy ------------------------------
class Tagged(lt.LoDTensor):
    pass


def test_subclass_attributes_survive_pickle_and_copies():
    t = Tagged(np.arange(5.0), [[0, 2, 5]])
    t.source, t.meta = "corpus.parquet", {"epoch": 3}
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        assert type(u) is Tagged and u.source == "corpus.parquet" and u.meta == {"epoch": 3}
        assert u.lod() == [[0, 2, 5]] and np.array_equal(u.data, t.data)
    assert copy.deepcopy(t).meta is not t.meta and copy.copy(t).meta is t.meta  # as any Python object


def test_plain_tensor_pickles_as_before_and_refuses_forged_attributes():
    t = lt.LoDTensor(np.arange(3.0), [[0, 3]])
    fn, args = t.__reduce__()
    assert len(args) == 4  # no attributes: the same pickle as earlier versions write
    _, _, lod, place = args
    with pytest.raises(TypeError, match="attributes must be a dict of names"):
        fn(lt.LoDTensor, t.data, lod, place).__setstate__({"x": 1})  # the base class has no __dict__
    with pytest.raises(TypeError, match="attributes must be a dict of names"):
        fn(Tagged, t.data, lod, place).__setstate__({1: 2})
    u = fn(Tagged, t.data, lod, place)
    u.__setstate__({"x": 1})
    assert u.x == 1


def test_subclass_attributes_load_with_torch_weights_only():
    t = Tagged(torch.arange(4.0), [[0, 1, 4]])
    t.note = "n"
    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    with safe_globals([*torch_safe_globals(), Tagged]):
        u = torch.load(buf, weights_only=True)
    assert type(u) is Tagged and u.note == "n" and u.lod() == [[0, 1, 4]]


# -- act= of the layers takes Paddle's activation operators --------------------------------------
@pytest.mark.parametrize("name", sorted(LAYER_ACTIVATIONS))
def test_layer_activation_backends_agree_and_differentiate(name):
    x = np.linspace(-3, 3, 14).reshape(7, 2)
    w = np.array([[1.0, 0.5], [-0.25, 1.0]])
    ref = F.fc(lt.LoDTensor(x, [[0, 3, 7]]), w, act=name)
    xt = torch.tensor(x, requires_grad=True)
    got = F.fc(lt.LoDTensor(xt, [[0, 3, 7]]), torch.tensor(w), act=name.upper())
    np.testing.assert_allclose(got.data.detach().numpy(), ref.data, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert got.lod() == [[0, 3, 7]] and got.data.requires_grad
    got.data.nan_to_num().sum().backward()
    assert xt.grad is not None and xt.grad.shape == xt.shape


def test_unknown_activation_is_named_and_recurrences_keep_their_set():
    x = lt.LoDTensor(np.ones((3, 2)), [[0, 3]])
    with pytest.raises(ValueError, match=r"act must be one of .*'gelu'.* got 'geluu'"):
        F.fc(x, np.ones((2, 2)), act="geluu")
    with pytest.raises(ValueError, match=r"gate_activation must be one of .* got 'gelu'"):
        F.dynamic_gru(lt.LoDTensor(np.ones((3, 6)), [[0, 3]]), np.ones((2, 6)), gate_activation="gelu")


# -- GELU: the compiled kernel's shorter form keeps its accuracy and no longer overflows -----------
def _exact_gelu(x):
    import math

    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64).tolist()])


def test_compiled_gelu_every_simd_variant_accuracy_and_huge_values():
    from lodtensor.backend.numpy import _cpointwise, _special

    x = np.concatenate([np.linspace(-12, 12, 24001), [0.0, 1e-30, -1e-30, 3e38, -3e38, 1e-40]]).astype(np.float32)
    want = _exact_gelu(x)
    before = _cpointwise.simd()[0]
    try:
        for name in _cpointwise.simd()[1]:
            _cpointwise.select_simd(name)
            got = np.empty_like(x)
            _cpointwise.gelu_f32(x, got, False, 1)
            assert np.abs(got - want).max() < 3.5e-7, name
            assert got[-3] == np.float32(3e38) and got[-2] == 0.0, name  # x + |x| overflowed to inf
    finally:
        _cpointwise.select_simd(before)
    out, ax, t = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    with np.errstate(over="ignore"):
        _special._gelu32_block(x, out, ax, t)  # the NumPy formula, where no compiler was found
    assert np.abs(out - want).max() < 3.5e-7 and out[-3] == np.float32(3e38)


# -- torch.special's functions on CuPy data: cupyx.scipy.special, or a clear error -----------------
def test_special_functions_on_cupy_data_use_cupyx_or_say_why_not(monkeypatch):
    pytest.importorskip("scipy")
    import scipy.special as host

    from lodtensor.backend import get_backend

    from .backend import cupy_stub

    stub = cupy_stub.install(monkeypatch)
    be = get_backend("cupy")
    x = np.linspace(0.1, 3.0, 7).astype(np.float32)
    xc = stub.asarray(x)
    for name, want in (("bessel_j0", host.j0(x)), ("i0e", host.i0e(x)), ("ndtr", host.ndtr(x)),
                       ("erfcx", host.erfcx(x))):
        got = be.pointwise(name, "special." + name, xc)
        assert type(got) is type(xc) and got.dtype == np.float32, name
        np.testing.assert_allclose(np.asarray(stub.asnumpy(got)), want, rtol=1e-6, err_msg=name)
    with pytest.raises(TypeError, match=r"airy_ai\(\) on CuPy data: cupyx.scipy.special has no airy"):
        be.pointwise("airy_ai", "special.airy_ai", xc)


# -- fast_apply only where torch's apply is the Python classmethod it copies (torch 2.14: C) -----------
def test_fast_apply_keeps_torchs_apply_on_a_torch_without_the_python_classmethod(monkeypatch):
    from lodtensor.backend.torch import _vmap

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    monkeypatch.setattr(_vmap, "_FUNCTION_APPLY", None)  # as torch 2.14, whose Function.apply is C code
    assert _vmap.fast_apply(Twice) is Twice and "apply" not in Twice.__dict__
    x = torch.ones(3, requires_grad=True)
    Twice.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    monkeypatch.undo()
    if _vmap._FUNCTION_APPLY is not None:  # torch 2.13: the shortcut (torch 2.14 and 2.15 have none)
        assert "apply" in _vmap.fast_apply(Twice).__dict__
