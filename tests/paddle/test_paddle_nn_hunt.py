"""Differential tests against real Paddle 2.6.2 for bugs found in ``lodtensor.nn``: embedding's
padding rows are zeros even where the weight's row is not finite, and Paddle 2's
``fc(num_flatten_dims=-1)``."""

import warnings

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from _raw import run  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.mark.parametrize("padding_idx", [1, -2])
def test_embedding_padding_row_of_nan_and_inf_is_zero(padding_idx):
    w = np.ones((3, 2))
    w[1] = [np.nan, np.inf]
    ids = lt.LoDTensor(np.array([[0], [1], [2], [1]], dtype="int64"), [[0, 1, 4]])
    (want, _), = run(lambda v, op: op("lookup_table", {"W": v["w"], "Ids": v["ids"]}, {"Out": "float64"},
                                      {"padding_idx": padding_idx % 3})["Out"], {"ids": ids}, {"w": w})
    got = F.embedding(ids, w, padding_idx=padding_idx)
    np.testing.assert_array_equal(want.reshape(got.data.shape), got.data)


def test_fc_num_flatten_dims_minus_one():
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with warnings.catch_warnings(), paddle.static.program_guard(main, startup):
            warnings.simplefilter("ignore")
            x = paddle.static.data("x", [-1, 3, 4], "float64")
            out = paddle.static.nn.fc(x, 5, num_flatten_dims=-1, activation="tanh")
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            exe = paddle.static.Executor(paddle.CPUPlace())
            exe.run(startup)
            xv = np.random.RandomState(0).uniform(-1, 1, (2, 3, 4))
            want, = exe.run(main, feed={"x": xv}, fetch_list=[out])
            params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
    finally:
        paddle.disable_static()
    w = next(v for k, v in params.items() if ".w_" in k)
    b = next(v for k, v in params.items() if ".b_" in k)
    got = F.fc(lt.LoDTensor(xv, [[0, 2]]), w, b, num_flatten_dims=-1, act="tanh")
    assert got.data.shape == want.shape == (2, 3, 5)
    np.testing.assert_allclose(got.data, want, rtol=1e-12, atol=1e-12)
