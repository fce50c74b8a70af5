"""``lodtensor.fluid.Program``: fluid 1.x layer calls creating Paddle-named parameters in a torch
module, reused by call order, loaded by name; errors that name the one thing to change. (The same
calls against a real Paddle program: tests/paddle/test_paddle_fluid_layers.py.)"""

import copy
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodtensor as lt  # noqa: E402
import lodtensor.fluid as fluid  # noqa: E402
from lodtensor.fluid import io as fio  # noqa: E402

L = fluid.layers


def words(lod=((0, 2, 5),), vocab=10, seed=0):
    rng = np.random.RandomState(seed)
    return lt.LoDTensor(rng.randint(0, vocab, (lod[-1][-1], 1)), [list(level) for level in lod])


def lstm_net(ids):
    emb = L.embedding(input=ids, size=[10, 4])
    proj = L.fc(input=emb, size=8, act="tanh")
    hidden, _ = L.dynamic_lstm(input=proj, size=8)
    return L.fc(input=[L.sequence_last_step(hidden), L.sequence_pool(proj, "max")], size=3, act="softmax")


def test_parameters_by_paddle_name_reused_by_call_order():
    net = fluid.Program(lstm_net)
    out = net(words())
    names = ["embedding_0.w_0", "fc_0.w_0", "fc_0.b_0", "lstm_0.w_0", "lstm_0.b_0", "fc_1.w_0", "fc_1.w_1", "fc_1.b_0"]
    assert net.paddle_names() == names
    assert sorted(net.state_dict()) == sorted(names)
    assert dict(net.named_parameters())["lstm_0.w_0"].shape == (2, 8)  # size=8 is 4 * hidden 2
    params = [id(p) for p in net.parameters()]
    again = net(words(((0, 1, 4, 6),), seed=1))  # a second run finds them by name
    assert [id(p) for p in net.parameters()] == params and net.paddle_names() == names
    assert out.data.shape == (2, 3) and again.data.shape == (3, 3)
    assert torch.allclose(out.data.sum(1), torch.ones(2))


def test_a_subclass_and_program_guard_work_alike():
    class Net(fluid.Program):
        def forward(self, ids):
            return lstm_net(ids)

    a, b = Net(), fluid.Program()
    torch.manual_seed(0)
    x = words()
    a(x)
    with fluid.program_guard(b, fluid.Program()):  # Paddle's (main, startup) signature
        lstm_net(x)
    assert a.paddle_names() == b.paddle_names()
    b.set_state_dict(a.state_dict())
    with fluid.program_guard(b):
        torch.testing.assert_close(lstm_net(x).data, a(x).data)


def test_trains_and_saves_a_paddle_checkpoint():
    torch.manual_seed(0)
    net = fluid.Program(lambda ids, label: L.mean(L.cross_entropy(lstm_net(ids), label)))
    x, label = words(((0, 3, 5, 9),), seed=2), np.array([[0], [1], [2]])
    first = net(x, label).item()
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(40):
        loss = net(x, label)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2 * first
    buf = io.BytesIO()
    fio.save_combine(net.program_state(), buf)  # Paddle's combined-file format, sorted names
    state = fio.load_combine(io.BytesIO(buf.getvalue()), sorted(net.paddle_names()))
    fresh = fluid.Program(lambda ids, label: L.mean(L.cross_entropy(lstm_net(ids), label)))
    assert fresh.load_program_state(state) == ([], [])  # before its first run: used as they are created
    assert fresh(x, label).item() == pytest.approx(net(x, label).item(), rel=1e-6)


def test_param_attr_names_sharing_and_trainable():
    def net(a, b):
        shared = fluid.ParamAttr(name="emb", trainable=False, initializer=fluid.initializer.Constant(0.5))
        ea = L.embedding(a, size=[10, 3], param_attr=shared)
        eb = L.embedding(b, size=[10, 3], param_attr="emb")
        return L.fc([ea, eb], size=2, param_attr=["wa", fluid.ParamAttr(name="wb")], bias_attr=False, name="head")

    prog = fluid.Program(net)
    out = prog(words(), words(seed=3))
    assert prog.paddle_names() == ["emb", "wa", "wb"] and out.data.shape == (5, 2)
    assert not prog.get_parameter("emb").requires_grad and float(prog.get_parameter("emb").sum()) == 15.0
    with pytest.raises(ValueError, match=r"parameter 'emb' exists with shape \[10, 3\], but this call needs \[7, 3\]"):
        with fluid.program_guard(prog):
            L.embedding(words(), size=[7, 3], param_attr="emb")


def test_param_groups_follow_learning_rate_and_l2_decay():
    def net(x):
        h = L.fc(x, size=4, param_attr=fluid.ParamAttr(learning_rate=0.5,
                                                       regularizer=fluid.regularizer.L2Decay(1e-3)))
        return L.fc(h, size=1, param_attr=fluid.ParamAttr(trainable=False))

    prog = fluid.Program(net)
    prog(torch.ones(2, 3))
    groups = sorted(prog.param_groups(0.1), key=lambda g: g["lr"])
    assert [(g["lr"], g["weight_decay"], len(g["params"])) for g in groups] == [(0.05, 0.001, 1), (0.1, 0.0, 2)]
    torch.optim.SGD(prog.param_groups(0.1))  # accepted as they are


def test_set_state_dict_names_what_does_not_match():
    prog = fluid.Program(lambda x: L.fc(x, size=2))
    prog(torch.ones(1, 3))
    state = {k: v.numpy() * 0 for k, v in prog.state_dict().items()}
    assert prog.set_state_dict(state) == ([], [])
    assert float(prog(torch.ones(1, 3)).detach().abs().sum()) == 0.0
    with pytest.raises(ValueError, match=r"the state has names this program does not create: 'fc_9.w_0'"):
        prog.set_state_dict({**state, "fc_9.w_0": np.zeros(1)})
    with pytest.raises(ValueError, match=r"the state lacks parameters of this program: 'fc_0.b_0'"):
        prog.set_state_dict({"fc_0.w_0": state["fc_0.w_0"]})
    assert prog.set_state_dict({"fc_0.w_0": state["fc_0.w_0"]}, strict=False) == (["fc_0.b_0"], [])
    with pytest.raises(ValueError, match=r"'fc_0.w_0' has shape \[2, 2\] in the state but \[3, 2\] in the program"):
        prog.set_state_dict({"fc_0.w_0": np.zeros((2, 2)), "fc_0.b_0": state["fc_0.b_0"]})
    lazy = fluid.Program(lambda x: L.fc(x, size=2))
    lazy.set_state_dict({"fc_0.w_0": np.zeros((3, 2), "float32")})
    with pytest.raises(ValueError, match=r"checked after the first run\): the state lacks parameters of this "
                                         r"program: 'fc_0.b_0'"):
        lazy(torch.ones(1, 3))


def test_errors_name_the_one_thing_to_change():
    with pytest.raises(RuntimeError, match=r"fluid.layers.fc\(\) creates parameters, so it runs inside a "
                                           r"fluid.Program"):
        L.fc(torch.ones(2, 3), size=2)
    prog = fluid.Program()
    with fluid.program_guard(prog):
        with pytest.raises(ValueError, match=r"size is 4 \* hidden size \(Paddle's rule\), so it must be a multiple "
                                             r"of 4, got 6"):
            L.dynamic_lstm(lt.LoDTensor(torch.ones(3, 6), [[0, 3]]), size=6)
        with pytest.raises(ValueError, match=r"input has 8 columns but size=16; size is 4 \* hidden size"):
            L.dynamic_lstm(lt.LoDTensor(torch.ones(3, 8), [[0, 3]]), size=16)
        with pytest.raises(ValueError, match=r"input has 6 columns but size=6; Paddle's dynamic_gru takes the hidden "
                                             r"size as size and an input of 3 \* size = 18 columns"):
            L.dynamic_gru(lt.LoDTensor(torch.ones(3, 6), [[0, 3]]), size=6)
        with pytest.raises(ValueError, match=r"param_attr must name the transition of a linear_chain_crf call"):
            L.crf_decoding(lt.LoDTensor(torch.ones(3, 2), [[0, 3]]), param_attr="nope")
        with pytest.raises(ValueError, match=r"the program was not fed 'words'; call it with feed=\{'words': \.\.\.\}"):
            L.data(name="words", shape=[1], dtype="int64", lod_level=1)
        with pytest.raises(ValueError, match="length= is Paddle's padded form"):
            L.linear_chain_crf(torch.ones(2, 3, 4), torch.ones(2, 3), length=torch.tensor([3, 2]))
    with pytest.raises(TypeError, match="give a build function"):
        fluid.Program()(1)
    with pytest.raises(TypeError, match="main_program must be a fluid.Program"):
        fluid.program_guard(torch.nn.Linear(1, 1))


def test_data_layers_read_the_feed_in_their_dtype():
    def program():
        ids = fluid.data(name="words", shape=[1], dtype="int64", lod_level=1)
        vec = L.data(name="vec", shape=[3], dtype="float32")
        return L.fc(input=[L.sequence_pool(L.embedding(ids, size=[10, 3]), "sum"), vec], size=2)

    net = fluid.Program(program)
    out = net(feed={"words": words(), "vec": np.ones((2, 3))})  # float64 NumPy, declared float32
    assert out.data.dtype == torch.float32 and out.data.shape == (2, 2)
    with pytest.raises(ValueError, match=r"the feed has rows of shape \[4\], but the data layer declares \[3\]"):
        net(feed={"words": words(), "vec": np.ones((2, 4))})
    with pytest.raises(ValueError, match="declares lod_level 1, the feed has 0"):
        net(feed={"words": np.ones((5, 1), "int64"), "vec": np.ones((2, 3))})


def test_numpy_inputs_run_on_torch_and_nested_programs_keep_their_own_parameters():
    inner = fluid.Program(lambda x: L.fc(x, size=3, act="relu"))

    def outer_fn(x):
        return L.fc(inner(x), size=1)

    outer = fluid.Program(outer_fn)
    outer.inner = inner  # a sub-module: its parameters are the outer's too
    y = outer(np.ones((2, 4), "float32"))
    assert isinstance(y, torch.Tensor) and y.shape == (2, 1)
    assert inner.paddle_names() == ["fc_0.w_0", "fc_0.b_0"] and outer.paddle_names() == ["fc_0.w_0", "fc_0.b_0"]
    assert sorted(outer.state_dict()) == ["fc_0.b_0", "fc_0.w_0", "inner.fc_0.b_0", "inner.fc_0.w_0"]
    twin = copy.deepcopy(outer)
    torch.testing.assert_close(twin(np.ones((2, 4), "float32")), y)


def test_crf_tagger_decodes_with_the_shared_transition():
    torch.manual_seed(0)

    def tagger(ids, tags):
        emb = L.embedding(ids, size=[10, 6])
        fwd = L.dynamic_gru(L.fc(emb, size=3 * 4), size=4)
        bwd = L.dynamic_gru(L.fc(emb, size=3 * 4), size=4, is_reverse=True)
        emission = L.fc([fwd, bwd], size=3)
        cost = L.linear_chain_crf(emission, tags, param_attr=fluid.ParamAttr(name="crfw"))
        return L.mean(cost), L.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))

    net = fluid.Program(tagger)
    ids = words(((0, 4, 7, 12),), seed=5)
    tags = ids.with_data(ids.data % 3)
    net(ids, tags)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(60):
        loss, _ = net(ids, tags)
        opt.zero_grad()
        loss.backward()
        opt.step()
    _, path = net(ids, tags)
    assert path.lod() == ids.lod() and (path.data.ravel() == torch.as_tensor(tags.data).ravel()).float().mean() > 0.9
    assert "crfw" in net.paddle_names() and "gru_1.w_0" in net.paddle_names()


def test_row_conv_sequence_conv_padding_and_initializers():
    def net(x):
        a = L.sequence_conv(x, num_filters=2, filter_size=3, padding_trainable=True)
        b = L.row_conv(x, future_context_size=1, param_attr=fluid.initializer.Constant(1.0))
        return a, b

    prog = fluid.Program(net)
    x = lt.LoDTensor(torch.ones(4, 3), [[0, 1, 4]])
    a, b = prog(x)
    assert prog.paddle_names() == ["sequence_conv_0.w_0", "sequence_conv_0.b_0", "sequence_conv_0.w_1",
                                   "row_conv_0.w_0"]
    assert tuple(prog.get_parameter("sequence_conv_0.w_1").shape) == (2, 3)
    assert b.data.tolist() == [[1.0] * 3, [2.0] * 3, [2.0] * 3, [1.0] * 3]
    u = fluid.initializer.Uniform(-0.5, 0.5, seed=3)
    t1, t2 = u(torch.empty(5)), u(torch.empty(5))
    assert torch.equal(t1, t2) and bool((t1.abs() <= 0.5).all())  # a seed gives the same values each time
    with pytest.raises(ValueError, match=r"the array has shape \[2\] but the parameter \[3\]"):
        fluid.initializer.NumpyArrayInitializer(np.zeros(2))(torch.empty(3))
    with pytest.raises(TypeError, match="regularizer must be fluid.regularizer.L2Decay or None"):
        fluid.ParamAttr(regularizer="l1")
