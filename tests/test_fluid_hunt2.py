"""lodtensor.fluid, from a second bug hunt: the data layers' dtype (a float feed to an int64 layer was
truncated, a torch feed was not cast at all), ``MSRA``'s ``nonlinearity``/``negative_slope`` and
``Uniform``'s ``diag_*`` arguments (accepted and ignored)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
import lodtensor.fluid as fluid  # noqa: E402

L = fluid.layers
I = fluid.initializer  # noqa: E741


# -- data layers: the declared dtype ----------------------------------------------------------------
@pytest.mark.parametrize("layer", [lambda: L.data(name="w", shape=[1], dtype="int64"),
                                   lambda: fluid.data(name="w", shape=[None, 1], dtype="int64")])
@pytest.mark.parametrize("bad", [1.7, float("nan"), float("inf"), 2.0 ** 70])
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_float_feed_to_an_integer_layer_must_hold_whole_numbers(layer, bad, library):
    """Before: NumPy 1.7 became the id 1 and NaN became -2**63 silently; a torch float feed came back
    float (1.7) from an int64 data layer. Paddle refuses a feed of another dtype outright."""
    values = np.array([[1.0], [bad]])
    feed = torch.tensor(values) if library == "torch" else values
    net = fluid.Program(layer)
    with pytest.raises(ValueError, match=r"declares int64, but feed 'w' holds .* which is not a whole number"):
        net(feed={"w": feed})
    assert np.asarray(feed)[0, 0] == 1.0  # the caller's feed is untouched


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_whole_float_feeds_and_torch_feeds_take_the_declared_dtype(library):
    ids = np.array([[1.0], [4.0], [2.0]])
    feed = lt.LoDTensor(torch.tensor(ids) if library == "torch" else ids, [[0, 1, 3]])
    out = fluid.Program(lambda: L.data(name="w", shape=[1], dtype="int64", lod_level=1))(feed={"w": feed})
    assert out.data.dtype == torch.int64 and out.data.ravel().tolist() == [1, 4, 2] and out.lod() == [[0, 1, 3]]
    x = torch.ones(2, 3, dtype=torch.float64) if library == "torch" else np.ones((2, 3))
    out = fluid.Program(lambda: L.data(name="x", shape=[3], dtype="float32"))(feed={"x": x})
    assert out.dtype == torch.float32  # torch float64 stayed float64 (and made float64 parameters downstream)
    with pytest.raises(ValueError, match=r"declares int32, but feed 'w' holds 30000000000.0"):
        fluid.Program(lambda: L.data(name="w", shape=[1], dtype="int32"))(feed={"w": np.array([[3e10]])})


def test_an_embedding_of_a_float_feed_looks_up_the_ids_it_was_given():
    net = fluid.Program(lambda: L.embedding(L.data(name="w", shape=[1], dtype="int64"), size=[5, 2],
                                            param_attr=I.NumpyArrayInitializer(np.arange(10.0).reshape(5, 2))))
    assert net(feed={"w": torch.tensor([[3.0], [0.0]])}).tolist() == [[6.0, 7.0], [0.0, 1.0]]


# -- initializers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("nonlinearity, slope, gain", [
    ("relu", 0, math.sqrt(2.0)), ("tanh", 0, 5 / 3), ("linear", 0, 1.0), ("sigmoid", 0, 1.0),
    ("leaky_relu", 0.5, math.sqrt(2 / 1.25)), ("selu", 0, 0.75), ("conv2d", 0, 1.0),
])
def test_msra_takes_its_gain_from_the_nonlinearity(nonlinearity, slope, gain):
    """Paddle's MSRA: uniform in +-gain * sqrt(3 / fan_in), normal with gain / sqrt(fan_in); the
    nonlinearity and negative_slope were ignored (always relu's gain)."""
    torch.manual_seed(0)
    t = torch.empty(400, 500)
    I.MSRA(negative_slope=slope, nonlinearity=nonlinearity)(t)
    limit = gain * math.sqrt(3 / 400)
    assert float(t.abs().max()) <= limit and float(t.abs().max()) > 0.99 * limit
    I.MSRA(uniform=False, negative_slope=slope, nonlinearity=nonlinearity)(t)
    assert float(t.std()) == pytest.approx(gain / 20, rel=0.02)


def test_msra_refuses_an_unknown_nonlinearity():
    with pytest.raises(ValueError, match=r"MSRA\(\): nonlinearity must be one of .* got 'gelu'"):
        I.MSRA(nonlinearity="gelu")


def test_uniform_writes_its_diagonal():
    """Paddle's Uniform(diag_num, diag_step, diag_val) sets the flat positions i * (diag_step + 1),
    i < diag_num, to diag_val; they were ignored."""
    t = I.Uniform(-0.1, 0.1, diag_num=3, diag_step=5, diag_val=7.0)(torch.empty(4, 5))
    assert (t == 7.0).nonzero().tolist() == [[0, 0], [1, 1], [2, 2]]
    assert float(t[t != 7.0].abs().max()) <= 0.1
    with pytest.raises(ValueError, match=r"reach the flat position 12, past the 6 values of shape \[2, 3\]"):
        I.Uniform(diag_num=3, diag_step=5)(torch.empty(2, 3))
    with pytest.raises(ValueError, match=r"diag_num must be an integer >= 0, got -1"):
        I.Uniform(diag_num=-1)
    net = fluid.Program(lambda x: L.fc(x, size=3, bias_attr=False,
                                       param_attr=I.Uniform(0.0, 0.0, diag_num=3, diag_step=3, diag_val=1.0)))
    assert net(torch.eye(3)).tolist() == np.eye(3).tolist()


@pytest.mark.parametrize("init", [I.TruncatedNormal, I.Normal])
def test_normal_initializers_of_scale_zero_or_negative(init):
    """TruncatedNormal(loc, 0) raised ZeroDivisionError inside torch; a negative scale raised torch's
    "normal expects std >= 0.0". Paddle fills loc for 0 and draws a negative scale as its absolute value."""
    assert init(3.0, 0.0)(torch.empty(2, 3)).tolist() == [[3.0] * 3] * 2
    torch.manual_seed(0)
    t = init(3.0, -1.0)(torch.empty(2000))
    assert float(t.std()) == pytest.approx(1.0 if init is I.Normal else 0.88, rel=0.1)
    if init is I.TruncatedNormal:
        assert float((t - 3.0).abs().max()) <= 2.0
