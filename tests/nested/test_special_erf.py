"""erf and gelu of lodtensor.nested: SciPy when installed, the standard library otherwise."""

import math

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.backend.numpy import _special


@pytest.mark.parametrize("with_scipy", [True, False], ids=["scipy", "math.erf"])
def test_float64_erf_is_exact(monkeypatch, with_scipy):
    if with_scipy:
        pytest.importorskip("scipy")
    else:
        monkeypatch.setitem(_special._SCIPY_SPECIAL, "erf", None)
    x = np.array([-7.0, -1.3, -0.2, 0.0, 1e-8, 0.9, 2.5, 6.5, np.inf, -np.inf])
    expected = [math.erf(v) for v in x]
    assert np.allclose(_special.erf(x), expected, rtol=1e-15, atol=1e-16)


def test_one_thread_setting_for_every_kernel():
    try:
        lt.set_num_threads(3)
        from lodtensor.nested import get_num_threads

        assert get_num_threads() == lt.get_num_threads() == 3
        x = np.linspace(-4, 4, 1 << 19, dtype=np.float32)
        assert np.allclose(_special.gelu(x), x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), atol=1e-6)
    finally:
        lt.set_num_threads(None)


def test_float32_gelu_keeps_the_negative_tail():
    # relu(x) is formed exactly ((x + |x|) / 2) before |x| Phi(-|x|) is taken away: no cancellation
    # for x < 0, so the tail keeps its relative precision (within the polynomial's own error)
    x = np.linspace(-7.0, 7.0, 300_001, dtype=np.float32)
    want = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    got = _special.gelu(x).astype(np.float64)
    assert np.abs(got - want).max() < 5e-7
    tail = (x < -3) & (x > -7)
    assert (np.abs(got - want)[tail] / np.abs(want[tail])).max() < 0.05
    assert (got[x < 0] <= 0).all() and _special.gelu(np.float32([0.0]))[0] == 0
