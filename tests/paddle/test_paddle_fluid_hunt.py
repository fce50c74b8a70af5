"""lodtensor.fluid against real Paddle 2.6.2, from a bug hunt: bfloat16 checkpoint files, the files
of ``paddle.static.save``, and ``accuracy`` on NaN scores."""

import os
import warnings

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from paddle.base import core  # noqa: E402

import lodtensor.fluid as fluid  # noqa: E402
from lodtensor.fluid import io as fio  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def static_program(build):
    """Build and start a static program; returns (main, executor, build's result)."""
    paddle.enable_static()
    main, start = paddle.static.Program(), paddle.static.Program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with paddle.static.program_guard(main, start):
            made = build()
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(start)
    return main, exe, made


def test_bfloat16_files_as_paddle_reads_and_writes_them(tmp_path):
    """save_vars of a bfloat16 parameter (data type 22) was refused: 'unsupported Paddle data type code 22'."""
    try:
        def build():
            init = paddle.nn.initializer.Constant(1.5)
            return [paddle.static.create_parameter([2, 3], "bfloat16", name="wbf", default_initializer=init),
                    paddle.static.create_parameter([2, 3], "float32", name="wf")]

        main, exe, params = static_program(build)
        paddle.static.io.save_vars(exe, str(tmp_path / "d"), main, vars=params)
        theirs = paddle.static.load_program_state(str(tmp_path / "d"))
        ours = fio.load_program_state(str(tmp_path / "d"))
        assert sorted(ours) == sorted(theirs) == ["wbf", "wf"]
        for k in theirs:
            assert ours[k].dtype == theirs[k].dtype
            np.testing.assert_array_equal(ours[k], theirs[k])
        assert theirs["wbf"].dtype == np.uint16 and (theirs["wbf"] == 0x3FC0).all()  # bfloat16 1.5
        # the other way: our uint16 record is Paddle's bfloat16
        bits = np.arange(0x3F80, 0x3F86, dtype=np.uint16).reshape(2, 3)
        os.makedirs(tmp_path / "ours")
        fio.save_lod_tensor(bits, str(tmp_path / "ours" / "wbf"))
        torch = pytest.importorskip("torch")
        fio.save_lod_tensor(torch.tensor([1.5, -2.0], dtype=torch.bfloat16), str(tmp_path / "ours" / "tbf"))
        back = paddle.static.load_program_state(str(tmp_path / "ours"))
        assert back["wbf"].dtype == back["tbf"].dtype == np.uint16
        np.testing.assert_array_equal(back["wbf"], bits)
        np.testing.assert_array_equal(back["tbf"], [0x3FC0, 0xC000])
    finally:
        paddle.disable_static()


def test_static_save_files_read_the_parameters(tmp_path):
    """Paddle's load_program_state of prefix.pdopt / prefix.pdmodel reads prefix.pdparams; here the
    .pdopt file's optimizer state came back instead, and .pdmodel was read as a combined file."""
    try:
        def build():
            x = paddle.static.data("x", [None, 3], "float32")
            loss = paddle.mean(paddle.static.nn.fc(x, 2))
            paddle.optimizer.Adam(0.1).minimize(loss)
            return loss

        main, exe, _ = static_program(build)
        prefix = str(tmp_path / "model")
        paddle.static.save(main, prefix)
        theirs = paddle.static.load_program_state(prefix + ".pdopt")  # parameters and optimizer state
    finally:
        paddle.disable_static()
    params = fio.load_pdparams(prefix + ".pdparams")
    assert sorted(params) == ["fc_0.b_0", "fc_0.w_0"]
    for path in (prefix + ".pdopt", prefix + ".pdmodel", prefix):
        ours = fio.load_program_state(path)
        assert sorted(ours) == sorted(params), path
        for k in ours:
            np.testing.assert_array_equal(ours[k], theirs[k])


def paddle_accuracy(scores, label, k):
    try:
        def build():
            p = paddle.static.data("p", [-1, scores.shape[1]], "float32")
            y = paddle.static.data("y", [-1, 1], "int64")
            return paddle.static.accuracy(p, y, k=k)

        main, exe, acc = static_program(build)
        return float(exe.run(main, feed={"p": scores, "y": label}, fetch_list=[acc])[0])
    finally:
        paddle.disable_static()


def test_accuracy_of_nan_scores_as_paddle():
    """Paddle's top_k ranks NaN above every number; lodtensor's comparisons made a NaN row score a hit
    (an all-NaN model had accuracy 1.0). Rows without ties, so the order is Paddle's whatever its sort."""
    rng = np.random.RandomState(0)
    for _ in range(40):
        n, c = rng.randint(1, 6), rng.randint(1, 6)
        scores = np.stack([rng.permutation(c) for _ in range(n)]).astype("float32")
        for row in range(n):
            if rng.rand() < 0.6:
                scores[row, rng.randint(c)] = np.nan
        label = rng.randint(0, c + 1, (n, 1)).astype("int64")
        k = int(rng.randint(1, c + 1))
        assert float(fluid.layers.accuracy(scores, label, k=k)) == pytest.approx(paddle_accuracy(scores, label, k))


def test_accuracy_refuses_a_negative_label_as_paddle():
    scores, label = np.array([[0.2, 0.8]], "float32"), np.array([[-1]], "int64")
    with pytest.raises(Exception, match="label of AccuracyOp must >= 0"):
        paddle_accuracy(scores, label, 1)
    with pytest.raises(ValueError, match="labels must be >= 0"):
        fluid.layers.accuracy(scores, label)
