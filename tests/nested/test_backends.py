"""The new nested ops on every backend (NumPy is the oracle): NumPy, torch, torch without its CPU-only
kernels, and CuPy on a GPU (or emulated: LT_CUPY_EMULATED=1 pytest -k cupy)."""

import numpy as np
import pytest

import lodtensor.nested as ln

PARTS = [np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4), np.zeros((0, 4), np.float32),
         np.linspace(0.5, -2, 12, dtype=np.float32).reshape(3, 4)]  # fmt: skip

CALLS = {
    "exp": lambda nt, be: ln.exp(nt),
    "leaky_relu": lambda nt, be: ln.leaky_relu(nt, 0.2),
    "sigmoid": lambda nt, be: ln.sigmoid(nt),
    "erf": lambda nt, be: ln.erf(nt),
    "maximum": lambda nt, be: ln.maximum(nt, nt * 0.5),
    "where": lambda nt, be: ln.where(nt > 0, nt, 0.0),
    "clamp": lambda nt, be: ln.clamp(nt, -0.5, 0.5),
    "bias": lambda nt, be: nt + be.array(np.arange(4, dtype=np.float32)),
    "log_softmax-ragged": lambda nt, be: ln.log_softmax(nt, 1),
    "rms_norm": lambda nt, be: ln.rms_norm(nt, (4,)),
    "prod-ragged": lambda nt, be: ln.prod(nt, 1),
    "argmax": lambda nt, be: ln.argmax(nt, -1),
    "max-regular": lambda nt, be: ln.max(nt, 2).values,
    "split": lambda nt, be: nt.split(3, -1)[1],
    "cat": lambda nt, be: ln.cat([nt, nt], -1),
    "unsqueeze": lambda nt, be: nt.unsqueeze(1),
}


def _result(x, be):
    if isinstance(x, ln.NestedTensor):
        return [be.numpy(c) for c in x.unbind()]
    return [be.numpy(x)]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_new_ops_agree_across_backends(backend, name):
    nt = ln.as_nested_tensor([backend.array(p) for p in PARTS])
    oracle = _result(CALLS[name](ln.nested_tensor(PARTS), _NumpyCase()), _NumpyCase())
    got = _result(CALLS[name](nt, backend), backend)
    assert len(got) == len(oracle)
    for a, b in zip(got, oracle):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_sdpa_agrees_across_backends(backend):
    g = np.random.default_rng(0)
    q = [g.standard_normal((2, n, 4)).astype(np.float32) for n in (3, 1, 3)]
    want = ln.scaled_dot_product_attention(*(ln.nested_tensor(q),) * 3, is_causal=True)
    nq = ln.as_nested_tensor([backend.array(x) for x in q])
    got = ln.scaled_dot_product_attention(nq, nq, nq, is_causal=True)
    for a, b in zip(got.unbind(), want.unbind()):
        np.testing.assert_allclose(backend.numpy(a), b, rtol=2e-5, atol=2e-6)


class _NumpyCase:
    def array(self, values):
        return np.asarray(values)

    def numpy(self, x):
        return np.asarray(x)
