"""The fluid 1.x layer calls of ``lodtensor.fluid`` against a real Paddle 2.6.2 static program of
the same calls (#26): the Paddle book's LoD chapters (06 sentiment: the convolution, LSTM and
stacked-LSTM nets; 07 semantic role labelling: shared embeddings, ``sums``, stacked
``dynamic_lstm``, ``linear_chain_crf`` and ``crf_decoding``), and GRU / ``row_conv`` / named
parameters. One network function is run twice, once with Paddle's layer namespace and once with
lodtensor's: the parameters must come out with the same names, in the same order, of the same
shapes; loaded with Paddle's initial values (by name, ``Program.set_state_dict``), the outputs
and the gradients of a weighted sum with respect to every parameter must agree.

Paddle 2.6 dropped most fluid 1.x layer functions (``dynamic_lstm``, ``dynamic_gru``,
``linear_chain_crf``, ``crf_decoding``, ``fluid.layers.embedding``, ``sums``,
``nets.sequence_conv_pool``); :class:`PaddleFluid` rebuilds them as Paddle 1.8 wrote them, with
Paddle's ``LayerHelper`` (so its own parameter naming) over the operators 2.6 still has.
"""


import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
torch = pytest.importorskip("torch")

from _static import fresh_program  # noqa: E402
from paddle.base import core  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402

import lodtensor as lt  # noqa: E402
import lodtensor.fluid as fluid  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SN = paddle.static.nn


class PaddleFluid:
    """Paddle 1.8's fluid.layers / fluid.nets signatures, on Paddle 2.6 (static mode)."""

    ParamAttr = paddle.ParamAttr

    @staticmethod
    def data(name, shape, dtype="float32", lod_level=0):
        return paddle.static.data(name, shape=[-1, *shape], dtype=dtype, lod_level=lod_level)

    @staticmethod
    def embedding(input, size, is_sparse=False, padding_idx=None, param_attr=None, dtype="float32"):  # noqa: A002
        helper = LayerHelper("embedding", input=input, size=size, param_attr=param_attr, dtype=dtype)
        w = helper.create_parameter(attr=helper.param_attr, shape=size, dtype=dtype, is_bias=False)
        out = helper.create_variable_for_type_inference(dtype)
        pad = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else size[0] + padding_idx
        # is_sparse only changes how Paddle stores the gradient (SelectedRows, which cannot be fetched)
        helper.append_op(type="lookup_table", inputs={"Ids": input, "W": w}, outputs={"Out": out},
                         attrs={"is_sparse": False, "is_distributed": False, "remote_prefetch": False,
                                "padding_idx": pad})
        return out

    @staticmethod
    def embedding_v2(input, size, padding_idx=None, param_attr=None, dtype="float32"):  # noqa: A002
        return SN.embedding(input, size, padding_idx=padding_idx, param_attr=param_attr, dtype=dtype)

    @staticmethod
    def fc(input, size, num_flatten_dims=1, param_attr=None, bias_attr=None, act=None, name=None):  # noqa: A002
        return SN.fc(input, size, num_flatten_dims=num_flatten_dims, weight_attr=param_attr, bias_attr=bias_attr,
                     activation=act, name=name)

    @staticmethod
    def sequence_conv(input, num_filters, filter_size=3, param_attr=None, bias_attr=None, act=None):  # noqa: A002
        return SN.sequence_conv(input, num_filters, filter_size=filter_size, param_attr=param_attr,
                                bias_attr=bias_attr, act=act)

    @staticmethod
    def sequence_conv_pool(input, num_filters, filter_size, param_attr=None, act="sigmoid", pool_type="max",  # noqa: A002
                           bias_attr=None):
        conv = SN.sequence_conv(input=input, num_filters=num_filters, filter_size=filter_size,
                                param_attr=param_attr, bias_attr=bias_attr, act=act)
        return SN.sequence_pool(conv, pool_type)

    sequence_pool = staticmethod(SN.sequence_pool)
    sequence_last_step = staticmethod(SN.sequence_last_step)
    row_conv = staticmethod(SN.row_conv)

    @staticmethod
    def sums(input):  # noqa: A002
        return paddle.add_n(input)

    @staticmethod
    def dynamic_lstm(input, size, param_attr=None, bias_attr=None, use_peepholes=True, is_reverse=False,  # noqa: A002
                     gate_activation="sigmoid", cell_activation="tanh", candidate_activation="tanh",
                     dtype="float32", name=None):
        helper = LayerHelper("lstm", input=input, param_attr=param_attr, bias_attr=bias_attr, name=name)
        d = size // 4
        w = helper.create_parameter(attr=helper.param_attr, shape=[d, 4 * d], dtype=dtype)
        b = helper.create_parameter(attr=helper.bias_attr, shape=[1, (7 if use_peepholes else 4) * d], dtype=dtype,
                                    is_bias=True)
        outs = {k: helper.create_variable_for_type_inference(dtype)
                for k in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
        helper.append_op(type="lstm", inputs={"Input": input, "Weight": w, "Bias": b}, outputs=outs,
                         attrs={"use_peepholes": use_peepholes, "is_reverse": is_reverse,
                                "gate_activation": gate_activation, "cell_activation": cell_activation,
                                "candidate_activation": candidate_activation})
        return outs["Hidden"], outs["Cell"]

    @staticmethod
    def dynamic_gru(input, size, param_attr=None, bias_attr=None, is_reverse=False, gate_activation="sigmoid",  # noqa: A002
                    candidate_activation="tanh", h_0=None, origin_mode=False):
        """Paddle 1.8's whole ``dynamic_gru`` signature (activations, ``h_0``) on the ``gru`` operator."""
        helper = LayerHelper("gru", input=input, param_attr=param_attr, bias_attr=bias_attr)
        dtype = helper.input_dtype()
        w = helper.create_parameter(attr=helper.param_attr, shape=[size, 3 * size], dtype=dtype)
        b = helper.create_parameter(attr=helper.bias_attr, shape=[1, 3 * size], dtype=dtype, is_bias=True)
        outs = {k: helper.create_variable_for_type_inference(dtype)
                for k in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
        inputs = {"Input": input, "Weight": w}
        if b is not None:
            inputs["Bias"] = b
        if h_0 is not None:  # (needing its gradient: without, Paddle's is wrong; test_difference_gru_h0_...)
            h_0.stop_gradient = False
            inputs["H0"] = h_0
        helper.append_op(type="gru", inputs=inputs, outputs=outs,
                         attrs={"is_reverse": is_reverse, "gate_activation": gate_activation,
                                "activation": candidate_activation, "origin_mode": origin_mode})
        return outs["Hidden"]

    @staticmethod
    def linear_chain_crf(input, label, param_attr=None):  # noqa: A002
        helper = LayerHelper("linear_chain_crf", input=input, param_attr=param_attr)
        size = input.shape[1]
        transition = helper.create_parameter(attr=helper.param_attr, shape=[size + 2, size],
                                             dtype=helper.input_dtype())
        outs = {k: helper.create_variable_for_type_inference(helper.input_dtype())
                for k in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
        helper.append_op(type="linear_chain_crf",
                         inputs={"Emission": [input], "Transition": transition, "Label": [label]}, outputs=outs)
        return outs["LogLikelihood"]

    @staticmethod
    def crf_decoding(input, param_attr, label=None):  # noqa: A002
        helper = LayerHelper("crf_decoding", input=input, param_attr=param_attr)
        transition = helper.get_parameter(helper.param_attr.name)
        path = helper.create_variable_for_type_inference(dtype=core.VarDesc.VarType.INT64)
        inputs = {"Emission": [input], "Transition": transition}
        if label is not None:
            inputs["Label"] = label
        helper.append_op(type="crf_decoding", inputs=inputs, outputs={"ViterbiPath": [path]})
        return path


class Ours:
    """lodtensor.fluid with the same call names as :class:`PaddleFluid`."""

    ParamAttr = fluid.ParamAttr
    data = staticmethod(fluid.layers.data)
    embedding = staticmethod(fluid.layers.embedding)
    embedding_v2 = staticmethod(fluid.embedding)
    fc = staticmethod(fluid.layers.fc)
    sequence_conv = staticmethod(fluid.layers.sequence_conv)
    sequence_conv_pool = staticmethod(fluid.nets.sequence_conv_pool)
    sequence_pool = staticmethod(fluid.layers.sequence_pool)
    sequence_last_step = staticmethod(fluid.layers.sequence_last_step)
    row_conv = staticmethod(fluid.layers.row_conv)
    sums = staticmethod(fluid.layers.sums)
    dynamic_lstm = staticmethod(fluid.layers.dynamic_lstm)
    dynamic_gru = staticmethod(fluid.layers.dynamic_gru)
    linear_chain_crf = staticmethod(fluid.layers.linear_chain_crf)
    crf_decoding = staticmethod(fluid.layers.crf_decoding)


# ------------------------------------------------------------------------------------------
# The networks: the Paddle book's code with small sizes
# ------------------------------------------------------------------------------------------
V, E, H, CLASSES = 30, 6, 12, 2  # H: not 8 (see test_difference_paddle_float32_lstm_backward)


def convolution_net(L, words):
    """Book chapter 06, ``convolution_net``."""
    emb = L.embedding(input=words, size=[V, E], is_sparse=True)
    conv_3 = L.sequence_conv_pool(input=emb, num_filters=H, filter_size=3, act="tanh", pool_type="sqrt")
    conv_4 = L.sequence_conv_pool(input=emb, num_filters=H, filter_size=4, act="tanh", pool_type="sqrt")
    return L.fc(input=[conv_3, conv_4], size=CLASSES, act="softmax")


def dynamic_rnn_lstm(L, words):
    """Book chapter 06, ``dynamic_rnn_lstm``."""
    emb = L.embedding(input=words, size=[V, E], is_sparse=True)
    sentence = L.fc(input=emb, size=H * 4, act="tanh")
    lstm, _ = L.dynamic_lstm(input=sentence, size=H * 4)
    last = L.sequence_last_step(lstm)
    return L.fc(input=last, size=CLASSES, act="softmax")


def stacked_lstm_net(L, words, stacked_num=3):
    """Book chapter 06, ``stacked_lstm_net``: ``dynamic_lstm(size=hid_dim)`` is a hidden size of hid_dim / 4."""
    emb = L.embedding(input=words, size=[V, E], is_sparse=True)
    fc1 = L.fc(input=emb, size=H)
    lstm1, _ = L.dynamic_lstm(input=fc1, size=H)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = L.fc(input=inputs, size=H)
        lstm, _ = L.dynamic_lstm(input=fc, size=H, is_reverse=(i % 2) == 0)
        inputs = [fc, lstm]
    fc_last = L.sequence_pool(input=inputs[0], pool_type="max")
    lstm_last = L.sequence_pool(input=inputs[1], pool_type="max")
    return L.fc(input=[fc_last, lstm_last], size=CLASSES, act="softmax")


LABELS, WORDS, PREDS, MARKS, MARK_DIM = 5, 20, 7, 2, 3


def db_lstm(L, word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, depth=3):
    """Book chapter 07, ``db_lstm``: shared embeddings ('emb', not trainable), 'vemb', sums, stacked LSTMs."""
    predicate_embedding = L.embedding(input=predicate, size=[PREDS, E], dtype="float32", is_sparse=True,
                                      param_attr="vemb")
    mark_embedding = L.embedding(input=mark, size=[MARKS, MARK_DIM], dtype="float32", is_sparse=True)
    word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
    emb_layers = [L.embedding(size=[WORDS, E], input=x, param_attr=L.ParamAttr(name="emb", trainable=False))
                  for x in word_input]
    emb_layers.append(predicate_embedding)
    emb_layers.append(mark_embedding)
    hidden_0 = L.sums(input=[L.fc(input=emb, size=H, act="tanh") for emb in emb_layers])
    lstm_0 = L.dynamic_lstm(input=hidden_0, size=H, candidate_activation="relu", gate_activation="sigmoid",
                            cell_activation="sigmoid")[0]
    input_tmp = [hidden_0, lstm_0]
    for i in range(1, depth):
        mix_hidden = L.sums(input=[L.fc(input=input_tmp[0], size=H, act="tanh"),
                                   L.fc(input=input_tmp[1], size=H, act="tanh")])
        lstm = L.dynamic_lstm(input=mix_hidden, size=H, candidate_activation="relu", gate_activation="sigmoid",
                              cell_activation="sigmoid", is_reverse=((i % 2) == 1))[0]
        input_tmp = [mix_hidden, lstm]
    return L.sums(input=[L.fc(input=input_tmp[0], size=LABELS, act="tanh"),
                         L.fc(input=input_tmp[1], size=LABELS, act="tanh")])


def srl(L, word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, target):
    """Book chapter 07's train program: the CRF cost and the decoded path (sharing 'crfw')."""
    feature_out = db_lstm(L, word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark)
    crf_cost = L.linear_chain_crf(input=feature_out, label=target, param_attr=L.ParamAttr(name="crfw"))
    crf_decode = L.crf_decoding(input=feature_out, param_attr=L.ParamAttr(name="crfw"))
    return crf_cost, crf_decode


def gru_tagger(L, words):
    """GRU both ways, named layers, a named weight, no bias, fluid.embedding (v2) and row_conv."""
    emb = L.embedding_v2(input=words, size=[V, E], padding_idx=0)
    proj = L.fc(input=emb, size=3 * H, name="proj")  # [N, 1, E] flattened to [N, E]
    fwd = L.dynamic_gru(input=proj, size=H)
    bwd = L.dynamic_gru(input=proj, size=H, is_reverse=True, param_attr=L.ParamAttr(name="bwd.w"),
                        bias_attr=False, origin_mode=True)
    ahead = L.row_conv(L.fc(input=[fwd, bwd], size=H, act="relu"), future_context_size=2)
    return L.fc(input=ahead, size=CLASSES, bias_attr=L.ParamAttr(name="out.bias"))


# ------------------------------------------------------------------------------------------
# Running both
# ------------------------------------------------------------------------------------------
def _words(rng, lod, vocab):
    return lt.LoDTensor(rng.randint(0, vocab, (lod[-1][-1], 1)).astype("int64"), lod)


def _run_paddle(net, feeds, grad_weights=None, values=None):
    """Build ``net`` over ``feeds`` in a fresh static program; returns the parameter list
    ``[(name, value)]`` after the startup program (or ``values``, set instead), the outputs and
    (with ``grad_weights``) the gradients of ``sum(out0 * grad_weights)`` by parameter name."""
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
            variables = {
                name: paddle.static.data(name, shape=[-1, *value.numpy().shape[1:]], dtype=value.numpy().dtype.name,
                                         lod_level=value.lod_level)
                for name, value in feeds.items()
            }
            outs = net(PaddleFluid, **variables)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            params = main.global_block().all_parameters()
            grads = []
            if grad_weights is not None:
                w = paddle.static.data("__w", shape=list(grad_weights.shape), dtype=grad_weights.dtype.name)
                target = paddle.sum(outs[0] * w)
                trainable = [p for p in params if p.trainable]
                grads = list(zip([p.name for p in trainable], paddle.static.gradients([target], trainable)))
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(startup, scope=scope)
        for name, value in values or ():
            scope.var(name).get_tensor().set(value, core.CPUPlace())
        values = [(p.name, np.array(scope.var(p.name).get_tensor())) for p in params]
        feed = {}
        for name, value in feeds.items():
            t = core.LoDTensor()
            t.set(np.ascontiguousarray(value.numpy()), core.CPUPlace())
            t.set_lod(value.lod())
            feed[name] = t
        if grad_weights is not None:
            feed["__w"] = grad_weights
        got = exe.run(main, feed=feed, fetch_list=outs + [g for _, g in grads], scope=scope, return_numpy=False)
    results = [(np.array(r), r.lod()) for r in got[: len(outs)]]
    return values, results, {name: np.array(g) for (name, _), g in zip(grads, got[len(outs):])}


def _check(net, feeds, *, load_before_first_run, rtol=2e-5, atol=2e-6, grads=True):
    paddle_params, paddle_outs, _ = _run_paddle(net, feeds)
    program = fluid.Program(lambda **kw: net(Ours, **kw))
    state = dict(paddle_params)
    if load_before_first_run:  # the values are taken as the parameters are created
        program.set_state_dict(state)
        outs = program(**feeds)
    else:  # created with their own initial values, then loaded by name
        program(**feeds)
        program.set_state_dict(state)
        outs = program(**feeds)
    # the same parameters: names, order, shapes
    assert program.paddle_names() == [n for n, _ in paddle_params]
    assert [tuple(program.get_parameter(n).shape) for n in program.paddle_names()] == \
        [tuple(v.shape) for _, v in paddle_params]
    assert sorted(program.state_dict()) == sorted(n for n, _ in paddle_params)  # torch orders by sub-module
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    assert len(outs) == len(paddle_outs)
    for (p_data, p_lod), out in zip(paddle_outs, outs):
        data = (out.data if isinstance(out, lt.LoDTensor) else out).detach().numpy()
        np.testing.assert_allclose(data.reshape(p_data.shape), p_data, rtol=rtol, atol=atol)
        if isinstance(out, lt.LoDTensor) and p_lod:
            assert out.lod() == p_lod
    if not grads:
        return program
    first = outs[0].data if isinstance(outs[0], lt.LoDTensor) else outs[0]
    w = np.random.RandomState(5).uniform(0.5, 1.5, size=tuple(first.shape)).astype("float32")
    _, again, paddle_grads = _run_paddle(net, feeds, grad_weights=w, values=paddle_params)
    np.testing.assert_array_equal(again[0][0], paddle_outs[0][0])
    program.zero_grad()
    (first * torch.from_numpy(w)).sum().backward()
    assert sorted(paddle_grads) == sorted(n for n in program.paddle_names() if program.get_parameter(n).requires_grad)
    for name, g in paddle_grads.items():
        np.testing.assert_allclose(program.get_parameter(name).grad.numpy(), g, rtol=rtol * 10, atol=atol * 10,
                                   err_msg=name)
    return program


LODS = [[[0, 3, 4, 9, 11]], [[0, 7]], [[0, 1, 5, 6]]]  # Paddle's sequence_conv/lstm take no empty sequence


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
@pytest.mark.parametrize("net", [convolution_net, dynamic_rnn_lstm, stacked_lstm_net], ids=lambda f: f.__name__)
@pytest.mark.parametrize("load_before_first_run", [True, False], ids=["load-first", "run-first"])
def test_book_chapter_06(net, lod, load_before_first_run):
    words = _words(np.random.RandomState(len(lod[0])), lod, V)
    _check(net, {"words": words}, load_before_first_run=load_before_first_run)


@pytest.mark.parametrize("lod", LODS[:2], ids=range(2))
def test_book_chapter_07(lod):
    rng = np.random.RandomState(7)
    names = ["word", "predicate", "ctx_n2", "ctx_n1", "ctx_0", "ctx_p1", "ctx_p2", "mark", "target"]
    vocab = {"predicate": PREDS, "mark": MARKS, "target": LABELS}
    feeds = {n: _words(rng, lod, vocab.get(n, WORDS)) for n in names}
    program = _check(srl, feeds, load_before_first_run=True)
    assert not program.get_parameter("emb").requires_grad  # ParamAttr(trainable=False)
    assert program.paddle_names()[:3] == ["vemb", "embedding_1.w_0", "emb"]


def test_gru_row_conv_and_names():
    words = _words(np.random.RandomState(3), [[0, 4, 5, 9]], V)
    program = _check(gru_tagger, {"words": words}, load_before_first_run=False)
    assert "proj.w_0" in program.paddle_names() and "bwd.w" in program.paddle_names()
    assert "out.bias" in program.paddle_names() and "gru_1.b_0" not in program.paddle_names()


def test_mean_cross_entropy_accuracy():
    """The training half of chapter 06 (cross_entropy, mean, accuracy) on the same probabilities."""
    rng = np.random.RandomState(2)
    probs = rng.dirichlet(np.ones(4), size=6).astype("float32")
    label = rng.randint(0, 4, (6, 1)).astype("int64")
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            p = paddle.static.data("p", [-1, 4], "float32")
            y = paddle.static.data("y", [-1, 1], "int64")
            helper = LayerHelper("cross_entropy")
            ce = helper.create_variable_for_type_inference("float32")
            helper.append_op(type="cross_entropy", inputs={"X": p, "Label": y}, outputs={"Y": ce},
                             attrs={"soft_label": False, "ignore_index": -100})
            outs = [ce, paddle.mean(ce), paddle.static.accuracy(p, y, k=1), paddle.static.accuracy(p, y, k=2)]
        exe = paddle.static.Executor(core.CPUPlace())
        got = exe.run(main, feed={"p": probs, "y": label}, fetch_list=outs)
    finally:
        paddle.disable_static()
    L = fluid.layers
    for data in (probs, torch.from_numpy(probs)):
        ce = L.cross_entropy(data, label)
        ours = [ce, L.mean(ce), L.accuracy(data, label), L.accuracy(data, label, k=2)]
        for g, o in zip(got, ours):
            np.testing.assert_allclose(np.asarray(o).reshape(np.shape(g)), g, rtol=1e-6)


def test_difference_paddle_float32_lstm_backward():
    """Paddle 2.6.2's float32 lstm backward drops the gradient through the cell state (the candidate,
    input and forget gates and their peepholes get 0) where the hidden size is a multiple of 8 (its
    vectorised CPU kernel); its float64 kernel agrees with lodtensor, in both dtypes. (The book
    chapters above use hidden sizes off that path.)"""
    from _raw import run  # noqa: PLC0415

    from lodtensor.nn import functional as F  # noqa: PLC0415

    rng = np.random.RandomState(2)
    d = 8
    x64 = lt.LoDTensor(rng.rand(11, 4 * d), [[0, 3, 4, 9, 11]])
    p64 = {"w": rng.rand(d, 4 * d) * 0.1, "b": rng.rand(1, 7 * d) * 0.1}
    grads = {}
    for dt in ("float64", "float32"):
        x = x64.with_data(x64.numpy().astype(dt))
        p = {k: v.astype(dt) for k, v in p64.items()}

        def build(v, op, dt=dt):
            outs = {"Hidden": dt, "Cell": dt, "BatchGate": dt, "BatchCellPreAct": dt}
            inputs = {"Input": v["x"], "Weight": v["w"], "Bias": v["b"]}
            return op("lstm", inputs, outs, {"use_peepholes": True})["Hidden"]

        got = run(build, {"x": x}, p, grads_of=["x", "b"], weights=np.ones((11, d), dt))
        grads[dt] = (got[1][0], got[2][0])
        xt, b = torch.tensor(x.numpy(), requires_grad=True), torch.tensor(p["b"], requires_grad=True)
        h, _ = F.dynamic_lstm(x.with_data(xt), torch.tensor(p["w"]), b)
        h.data.sum().backward()
        np.testing.assert_allclose(xt.grad.numpy(), grads["float64"][0], rtol=1e-5)
        np.testing.assert_allclose(b.grad.numpy(), grads["float64"][1], rtol=1e-5)
    x32, b32 = grads["float32"]
    # nothing through the cell state: the candidate, input and forget gates and their peepholes get 0
    assert not x32[:, : 3 * d].any() and not b32[:, : 3 * d].any() and not b32[:, 4 * d : 6 * d].any()
    assert x32[:, 3 * d :].all() and grads["float64"][1].all()


def test_difference_paddle_sequence_conv_filter_gradient_past_the_end():
    """Paddle 2.6.2's ``sequence_conv_grad`` without trainable padding gives the filter a gradient
    from a window that lies wholly past its sequence (``contextStart`` 1, one 1-row sequence), though
    its own forward reads zeros there and gives 0; lodtensor's gradient is 0, as its forward says
    (checked here against central differences of the forward)."""
    from _raw import run  # noqa: PLC0415

    from lodtensor.nn import functional as F  # noqa: PLC0415

    x = lt.LoDTensor(np.array([[0.5, -1.0, 2.0]]), [[0, 1]])
    w = np.ones((6, 1))
    attrs = {"contextLength": 2, "contextStart": 1, "contextStride": 1, "paddingTrainable": False}

    def build(v, op):
        return op("sequence_conv", {"X": v["x"], "Filter": v["w"]}, {"Out": "float64"}, attrs)["Out"]

    got = run(build, {"x": x}, {"w": w}, grads_of=["w"], weights=np.ones((1, 1)))
    wt = torch.tensor(w, requires_grad=True)
    out = F.sequence_conv(x.with_data(torch.tensor(x.numpy())), wt, filter_size=2, padding_start=1)
    np.testing.assert_array_equal(got[0][0].ravel(), out.data.detach().numpy().ravel())  # the same forward: 0
    out.data.sum().backward()
    assert not wt.grad.any()
    assert torch.autograd.gradcheck(
        lambda k: F.sequence_conv(x.with_data(torch.tensor(x.numpy())), k, filter_size=2, padding_start=1).data,
        (torch.tensor(w, requires_grad=True),))
    assert np.all(got[1][0] == 1.0)  # Paddle's: every filter entry 1
