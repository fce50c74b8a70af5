"""Second reading of the day's changes (791f421..e626940): the bugs found, each against the real thing.

- A LoDTensor subclass's attributes (pickled since dfd4bb0) travelled as an argument of the rebuild
  call, so an attribute referring back to the tensor (a cycle, as a parent/child link makes) raised
  RecursionError in pickle.dumps and copy.deepcopy; a plain Python object with the same cycle pickles.
- BucketBatchSampler (rewritten onto numpy.random.default_rng in a1ae93a) passed ``seed`` straight to
  NumPy: a negative, float or string seed raised NumPy's "expected non-negative integer" / "SeedSequence
  expects int ..." naming neither the argument nor the value.
- ``jacobian(..., vectorize=True)`` (torch's legacy vmap, ``is_grads_batched``) through sequence_pad /
  sequence_unpad on the torch-CUDA route (e626940 fixed the CPU kernels only): the Pad Function's
  backward ran the unpad kernel on the batched gradient ("Batching rule not implemented for
  aten::detach"); the emulated route runs the same host code as a GPU.
"""

import copy
import io
import pickle
import shutil

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.text import BucketBatchSampler

from ._torch_range import safe_globals

torch = pytest.importorskip("torch")


class Linked(lt.LoDTensor):
    pass


class _Plain:
    pass


# -- a subclass's attributes that refer back to the tensor ----------------------------------------------
def _linked():
    t = Linked(np.arange(5.0), [[0, 2, 5]])
    t.me = t
    t.parent = {"children": [t], "name": "p"}
    return t


def _check_linked(u):
    assert type(u) is Linked and u.lod() == [[0, 2, 5]] and u.data.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert u.me is u and u.parent["children"][0] is u and u.parent["name"] == "p"


def test_subclass_attribute_cycle_pickles_as_a_plain_object_does():
    p = _Plain()
    p.me = p
    q = pickle.loads(pickle.dumps(p))  # what Python does with the same cycle
    assert q.me is q
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        _check_linked(pickle.loads(pickle.dumps(_linked(), protocol=protocol)))


def test_subclass_attribute_cycle_deep_copies():
    t = _linked()
    u = copy.deepcopy(t)
    _check_linked(u)
    assert u is not t and u.parent is not t.parent and u.data is not t.data


def test_subclass_attribute_cycle_loads_with_torch_weights_only():
    from lodtensor.interop import torch_safe_globals

    t = Linked(torch.arange(3.0), [[0, 1, 3]])
    t.me, t.tags = t, ["a", "b"]
    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    with safe_globals([*torch_safe_globals(), Linked]):
        u = torch.load(buf, weights_only=True)
    assert type(u) is Linked and u.me is u and u.tags == ["a", "b"] and u.lod() == [[0, 1, 3]]


def test_subclass_state_is_names_only_and_never_reaches_a_plain_tensor():
    """The state a pickle may set is a dict of names on an instance that has a __dict__: the base class
    (slots only) and other state shapes are refused, as before."""
    t = lt.LoDTensor(np.arange(3.0), [[0, 3]])
    for state in ({"x": 1}, (None, {"_lod": 5}), [1]):
        with pytest.raises(TypeError, match="refusing to set its state directly"):
            t.__setstate__(state)
    u = Linked(np.arange(3.0), [[0, 3]])
    with pytest.raises(TypeError, match="attributes must be a dict of names"):
        u.__setstate__({1: 2})
    assert t.lod() == [[0, 3]] and not u.__dict__


# -- BucketBatchSampler's seed -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "seed, error, shown",
    [(-1, ValueError, "got -1"), (1.5, TypeError, "got float 1.5"), ("abc", TypeError, "got str 'abc'"),
     (True, TypeError, "got bool True")],
)
def test_bucket_batch_sampler_names_a_bad_seed(seed, error, shown):
    with pytest.raises(error, match=r"BucketBatchSampler\(\): seed must be None or an int >= 0, " + shown):
        BucketBatchSampler([3, 1, 2], batch_size=2, seed=seed)


def test_bucket_batch_sampler_seeds_that_numpy_takes_still_work():
    lengths = np.arange(40) % 7
    a = list(BucketBatchSampler(lengths, batch_size=4, seed=np.int64(3)))
    assert a == list(BucketBatchSampler(lengths, batch_size=4, seed=3))
    assert sorted(i for b in a for i in b) == list(range(40))
    assert len(list(BucketBatchSampler(lengths, batch_size=4, seed=2**70))) == 10


# -- vectorized jacobian through pad/unpad on the torch-CUDA route (emulated) ---------------------------
@pytest.fixture(params=["cpu", "cuda-route"])
def route(request, monkeypatch):
    """The CPU kernels, or CPU tensors down the torch-CUDA route with its kernels emulated (the host code a GPU
    runs: tests/backend/cuda_emu.py)."""
    if request.param == "cuda-route":
        if shutil.which("g++") is None:
            pytest.skip("needs g++ to build the CUDA stand-in")
        from lodtensor.backend.torch import _backend, _cuda
        from tests.backend import cuda_emu

        cuda_emu.library()
        stub = cuda_emu.install(monkeypatch)
        monkeypatch.setattr(_cuda, "_EMULATED", True)
        monkeypatch.setattr(_backend, "_CPU_SHORTCUTS", False)
        return stub
    return None


def _launched(stub, prefix):
    return stub is None or any(name.startswith(prefix) for name, *_ in stub.launches)


def test_vectorized_jacobian_through_sequence_pad(route):
    x = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def fn(d):
        return S.sequence_pad(lt.LoDTensor(d, [[0, 2, 2, 6]]), 0.0)[0].data

    fast = torch.autograd.functional.jacobian(fn, x, vectorize=True)
    slow = torch.autograd.functional.jacobian(fn, x)
    torch.testing.assert_close(fast, slow, rtol=0, atol=0)
    assert _launched(route, "lt_pad")


def test_vectorized_jacobian_and_hessian_through_sequence_unpad(route):
    x = torch.randn(3, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([2, 0, 4])

    def fn(d):
        return S.sequence_unpad(d, lengths).data

    fast = torch.autograd.functional.jacobian(fn, x, vectorize=True)
    torch.testing.assert_close(fast, torch.autograd.functional.jacobian(fn, x), rtol=0, atol=0)

    def loss(d):
        return S.sequence_pad(S.sequence_unpad(d, lengths), 0.0)[0].data.pow(3).sum()

    torch.testing.assert_close(torch.autograd.functional.hessian(loss, x, vectorize=True),
                               torch.autograd.functional.hessian(loss, x))
    assert _launched(route, "lt_unpad")


# -- fluid.layers.softmax of a 0-d input ----------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0])
def test_fluid_softmax_of_one_value_is_one(axis):
    """Before: ZeroDivisionError (``axis % data.ndim``). Paddle 2.6.2 gives 1.0 for a 0-d tensor with axis
    -1 or 0, as torch does; autograd flows on torch."""
    import lodtensor.fluid as fluid

    want = torch.softmax(torch.tensor(2.0), axis)  # tensor(1.)
    got = fluid.layers.softmax(np.array(2.0, np.float32), axis=axis)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32 and got == want.item()
    x = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    out = fluid.layers.softmax(x, axis=axis)
    assert out.shape == () and out.dtype == torch.float64 and out.item() == want.item()
    out.backward()
    assert x.grad.item() == 0.0


def test_fluid_softmax_of_one_value_names_the_axes_it_takes():
    import lodtensor.fluid as fluid

    # Paddle 2.6.2: "Attr(axis) value should be in range [-1, 0] when input is 0D Tensor"
    with pytest.raises(ValueError, match=r"axis must be in \[-1, 1\) for an input of rank 0, got 1"):
        fluid.layers.softmax(np.array(2.0, np.float32), axis=1)
