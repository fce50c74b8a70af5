"""lodtensor.fluid, from a bug hunt: Paddle 1.x data-layer shapes, layer argument checks, bfloat16
checkpoints (Paddle's uint16 bits), paddle.static.save's file suffixes, accuracy on NaN scores."""

import io
import pickle
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
import lodtensor.fluid as fluid  # noqa: E402
from lodtensor.fluid import io as fio  # noqa: E402

L = fluid.layers


def words():
    return lt.LoDTensor(np.array([[1], [2], [3]]), [[0, 1, 3]])


# -- data layers ------------------------------------------------------------------------------------
def test_fluid_data_shape_holds_the_batch_dim():
    """fluid.data (Paddle 1.6+) declares the whole shape, None or -1 for the batch: it was read as
    fluid.layers.data's rows ([None, 1] raised a TypeError from int(None))."""
    net = fluid.Program(lambda: fluid.data(name="w", shape=[None, 1], dtype="int64", lod_level=1))
    assert net(feed={"w": words()}).lod() == [[0, 1, 3]]
    net = fluid.Program(lambda: fluid.data(name="w", shape=[-1, 1], dtype="int64"))
    assert tuple(net(feed={"w": words()}).data.shape) == (3, 1)
    net = fluid.Program(lambda: fluid.data(name="lr", shape=[1], dtype="float32"))  # a fixed shape: the whole
    assert tuple(net(feed={"lr": np.array([0.1])}).shape) == (1,)
    net = fluid.Program(lambda: fluid.data(name="w", shape=[None, 2], dtype="int64"))
    with pytest.raises(ValueError, match=r"the feed has shape \[3, 1\], but the data layer declares \[-1, 2\]"):
        net(feed={"w": words()})


def test_layers_data_with_none_or_minus_one_takes_the_whole_shape():
    """Paddle 1.x fluid.layers.data: a None or negative dim turns append_batch_size off."""
    for shape in ([-1, 1], [None, 1], (None, 1)):
        net = fluid.Program(lambda shape=shape: L.data(name="w", shape=shape, dtype="int64", lod_level=1))
        assert net(feed={"w": words()}).lod() == [[0, 1, 3]]
    net = fluid.Program(lambda: L.data(name="w", shape=[1], dtype="int64"))
    assert tuple(net(feed={"w": words()}).data.shape) == (3, 1)
    with pytest.raises(TypeError, match=r"shape must be a list or tuple"):
        fluid.Program(lambda: L.data(name="w", shape=1, dtype="int64"))(feed={"w": words()})
    with pytest.raises(ValueError, match=r"shape\[0\] must be a size >= 0, or None or -1"):
        fluid.Program(lambda: L.data(name="w", shape=[-2], dtype="int64"))(feed={"w": words()})


def test_a_feed_without_data_says_so():
    net = fluid.Program(lambda: L.data(name="w", shape=[1], dtype="int64"))
    with pytest.raises(ValueError, match="feed 'w' is a LoDTensor that holds no data yet"):
        net(feed={"w": fluid.LoDTensor()})


# -- layer arguments --------------------------------------------------------------------------------
X = lt.LoDTensor(np.ones((5, 4), "float32"), [[0, 2, 5]])


@pytest.mark.parametrize("call, exc, match", [
    (lambda x: L.fc(x, size=-1), ValueError, r"fc\(\): size must be >= 0, got -1"),
    (lambda x: L.fc(x, size=2.5), TypeError, r"fc\(\): size must be an integer, got float 2.5"),
    (lambda x: L.fc([], size=2), ValueError, r"fc\(\): input is an empty list"),
    (lambda x: L.fc(x.with_data(np.ones((5, 4), "int64")), size=2), TypeError,
     r"fc\(\): the parameter 'fc_0.w_0' takes the input's dtype, int64, which is not floating"),
    (lambda x: L.row_conv(x, future_context_size=-5), ValueError, r"future_context_size must be >= 0, got -5"),
    (lambda x: L.row_conv(x, future_context_size=2.7), TypeError, r"future_context_size must be an integer"),
    (lambda x: L.sequence_conv(x, num_filters=1.5), TypeError, r"num_filters must be an integer"),
    (lambda x: L.dynamic_lstm(x.with_data(np.ones((5, 0), "float32")), size=0), ValueError,
     r"dynamic_lstm\(\): size must be >= 4, got 0"),
    (lambda x: L.dynamic_gru(x.with_data(np.ones((5, 0), "float32")), size=0), ValueError,
     r"dynamic_gru\(\): size must be >= 1, got 0"),
])
def test_layer_arguments_are_checked(call, exc, match):
    """These raised torch's RuntimeError (negative dimension), ZeroDivisionError, IndexError or
    "check_uniform_bounds not implemented for 'Long'", or silently truncated a float size."""
    with pytest.raises(exc, match=match):
        fluid.Program(call)(X)


# -- bfloat16 checkpoints ---------------------------------------------------------------------------
def bf16_bits(values):
    return (np.asarray(values, "float32").view(np.uint32) >> 16).astype(np.uint16)


def test_bfloat16_records_are_uint16_bits_both_ways():
    """Paddle's BF16 (data type 22) was refused; Paddle's load_program_state gives uint16 for it."""
    bits = bf16_bits([[1.5, -2.0], [0.25, 3.0]])
    buf = io.BytesIO()
    fio.save_lod_tensor(bits, buf)
    raw = buf.getvalue()
    assert raw[struct.calcsize("<IQIi"):][:2] == b"\x08\x16"  # TensorDesc data_type = 22 (BF16)
    back = fio.load_lod_tensor(io.BytesIO(raw))
    assert back.numpy().dtype == np.uint16
    np.testing.assert_array_equal(back.numpy(), bits)


def test_a_bfloat16_program_saves_and_loads_its_bits():
    """program_state() of a bfloat16 program raised (NumPy has no bfloat16), and set_state_dict of
    Paddle's uint16 bits loaded the integers (16320.0 for 1.5)."""
    net = fluid.Program(lambda x: L.fc(x, size=2, bias_attr=False))
    net(torch.ones(1, 3, dtype=torch.bfloat16))
    state = net.program_state()
    assert state["fc_0.w_0"].dtype == np.uint16
    w = net.get_parameter("fc_0.w_0").detach().float().numpy()
    np.testing.assert_array_equal(state["fc_0.w_0"], bf16_bits(w))
    again = fluid.Program(lambda x: L.fc(x, size=2, bias_attr=False))
    again.set_state_dict({"fc_0.w_0": bf16_bits(np.full((3, 2), 1.5))})
    assert again(torch.ones(1, 3)).tolist() == [[4.5, 4.5]]
    again.set_state_dict({"fc_0.w_0": lt.LoDTensor(bf16_bits(np.full((3, 2), 0.5)))})
    assert again(torch.ones(1, 3)).tolist() == [[1.5, 1.5]]


# -- paddle.static.save's files ---------------------------------------------------------------------
def test_load_program_state_takes_any_file_of_a_static_save(tmp_path):
    """paddle.static.save(prog, prefix) writes prefix.pdparams/.pdopt/.pdmodel; Paddle's
    load_program_state of any of them reads prefix.pdparams. Here .pdopt's optimizer state came
    back as the parameters, and .pdmodel was read as a combined file."""
    prefix = str(tmp_path / "model")
    params = {"fc_0.w_0": np.ones((2, 2), "float32")}
    with open(prefix + ".pdparams", "wb") as f:
        pickle.dump(params, f, protocol=2)
    with open(prefix + ".pdopt", "wb") as f:
        pickle.dump({"fc_0.w_0_moment1_0": np.zeros((2, 2), "float32")}, f, protocol=2)
    with open(prefix + ".pdmodel", "wb") as f:
        f.write(b"\x0a\x05blocks")  # a ProgramDesc protobuf
    for path in (prefix, prefix + ".pdparams", prefix + ".pdopt", prefix + ".pdmodel"):
        assert sorted(fio.load_program_state(path)) == ["fc_0.w_0"], path


# -- accuracy ---------------------------------------------------------------------------------------
def test_accuracy_ranks_nan_first_and_checks_labels_and_k():
    """NaN scores compared false with everything, so an all-NaN (diverged) model scored 1.0."""
    nan = float("nan")
    scores = np.array([[nan, 0.8], [0.1, nan], [nan, nan]], "float32")
    assert float(L.accuracy(scores, np.array([[1], [1], [0]]))) == pytest.approx(2 / 3)
    assert float(L.accuracy(torch.full((4, 3), nan), np.array([[1], [2], [1], [2]]))) == 0.0
    with pytest.raises(ValueError, match=r"accuracy\(\): labels must be >= 0"):
        L.accuracy(np.array([[0.2, 0.8]]), np.array([[-1]]))
    with pytest.raises(ValueError, match=r"accuracy\(\): k=3 is more than the 2 classes"):
        L.accuracy(np.array([[0.2, 0.8]]), np.array([[1]]), k=3)
    with pytest.raises(ValueError, match=r"k must be >= 1"):
        L.accuracy(np.array([[0.2, 0.8]]), np.array([[1]]), k=0)


def test_torch_bfloat16_saves_as_paddle_bf16():
    """A torch bfloat16 LoDTensor was saved widened to float32; a bare bfloat16 tensor raised
    'Got unsupported ScalarType BFloat16'."""
    data = torch.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=torch.bfloat16)
    for value in (lt.LoDTensor(data, [[0, 2]]), data):
        buf = io.BytesIO()
        fio.save_lod_tensor(value, buf)
        back = fio.load_lod_tensor(io.BytesIO(buf.getvalue()))
        np.testing.assert_array_equal(back.numpy(), bf16_bits(data.float().numpy()))


def test_variable_names_must_be_a_list():
    """A name given as a bare string was read as its characters ('fc_0.w_0' -> 'f', 'c', '_', ...)."""
    buf = io.BytesIO()
    fio.save_combine({"ab": np.ones(2, "float32")}, buf)
    with pytest.raises(TypeError, match=r"the variable names must be a list of names, got the str 'ab'"):
        fio.load_combine(io.BytesIO(buf.getvalue()), "ab")


def test_a_pending_value_of_the_wrong_shape_is_reported_again():
    """set_state_dict before the first run, a value of the wrong shape: the rerun said the state
    lacked the parameter (the bad value had been dropped by the failed run)."""
    net = fluid.Program(lambda x: L.fc(x, size=2))
    net.set_state_dict({"fc_0.w_0": np.ones((4, 2), "float32"), "fc_0.b_0": np.zeros(2, "float32")})
    for _ in range(2):
        with pytest.raises(ValueError, match=r"'fc_0.w_0' has shape \[4, 2\] in the state but \[3, 2\]"):
            net(torch.ones(1, 3))


@pytest.mark.parametrize("layer", [L.embedding, fluid.embedding])
def test_embedding_size_is_checked(layer):
    with pytest.raises(TypeError, match=r"size must be \[vocab_size, emb_dim\], a list or tuple of 2 ints, got 10"):
        fluid.Program(lambda x: layer(x, size=10))(np.array([[1], [2]]))
