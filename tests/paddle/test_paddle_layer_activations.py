"""``act=`` of fc, sequence_conv and row_conv against Paddle 2.6.2's activation operators.

Paddle's layers append the operator named by ``act`` with its default attributes
(``LayerHelper.append_activation``); every name lodtensor accepts runs here through
that same path in a static program, on values that cross each operator's thresholds.
"""

import numpy as np
import pytest
import torch

paddle = pytest.importorskip("paddle")

from paddle.base.layer_helper import LayerHelper  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.backend._contract import ACTIVATIONS  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402
from lodtensor.nn._common import LAYER_ACTIVATIONS  # noqa: E402

X = np.concatenate([np.linspace(-30, 30, 61), [-0.7, -0.5, -0.3, 0.2, 0.5, 0.51, 1.0, 1.5, 5.9, 6.1, 19.9, 20.1]])
NAMES = sorted(set(LAYER_ACTIVATIONS) | (set(ACTIVATIONS) - {"identity", "linear"}))  # (Paddle has no such ops)


def paddle_activation(name, x):
    paddle.enable_static()
    try:
        main, start = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, start):
            v = paddle.static.data("x", [-1, 1], str(x.dtype))
            out = LayerHelper("fc", act=name).append_activation(v)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(start)
        return exe.run(main, feed={"x": x}, fetch_list=[out])[0]
    finally:
        paddle.disable_static()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", NAMES)
def test_fc_act_matches_paddle(name, dtype):
    x = X.astype(dtype).reshape(-1, 1)
    want = paddle_activation(name, x)
    tol = {"float64": 1e-7, "float32": 2e-6}[dtype]  # (Paddle keeps slopes and thresholds as float32)
    for data in (x, torch.from_numpy(x)):
        weight = np.ones((1, 1), dtype) if isinstance(data, np.ndarray) else torch.ones(1, 1, dtype=data.dtype)
        out = F.fc(lt.LoDTensor(data, [[0, 30, len(X)]]), weight, act=name)
        got = np.asarray(out.data)
        assert got.dtype == np.dtype(dtype) and out.lod() == [[0, 30, len(X)]]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=f"{name} on {type(data)}")


@pytest.mark.parametrize("name", ["gelu", "hard_swish", "softplus", "thresholded_relu"])
def test_sequence_conv_and_row_conv_act_match_paddle(name):
    x = X[:12].reshape(4, 3) / 7
    t = lt.LoDTensor(x, [[0, 3, 4]])
    plain = F.sequence_conv(t, np.eye(9, 3), filter_size=3)
    got = F.sequence_conv(t, np.eye(9, 3), filter_size=3, act=name)
    np.testing.assert_allclose(got.data, paddle_activation(name, plain.data.reshape(-1, 1)).reshape(4, 3), rtol=1e-7)
    plain = F.row_conv(t, np.ones((2, 3)))
    got = F.row_conv(t, np.ones((2, 3)), act=name)
    np.testing.assert_allclose(got.data, paddle_activation(name, plain.data.reshape(-1, 1)).reshape(4, 3), rtol=1e-7)
