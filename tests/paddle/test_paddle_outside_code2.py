"""Fluid 1.x model code that nobody on this project wrote, ported by changing the import alone
(``import lodtensor.fluid as fluid``), against a real Paddle 2.6.2 static program of the same calls.

Short, focused rewrites of the usage pattern of (sizes made small):

- ``bow_net``: the bag-of-words classifier of PaddlePaddle/models ``PaddleNLP/text_classification/nets.py``
  and PaddleHub ``senta_bow/net.py`` (``embedding`` -> ``sequence_pool('sum')`` -> ``fluid.layers.tanh`` ->
  two ``fc(act='tanh')`` -> ``fc(act='softmax')``). ``fluid.layers.tanh`` did not exist here.
- the padded ``bow_net`` of PaddlePaddle/models ``PaddleNLP/sentiment_classification/nets.py`` (later
  versions): ``fluid.embedding`` of padded ids, ``fluid.layers.sequence_unpad(emb, length=seq_len)``.
- ``lex_net``: the lexical analysis (LAC) network of PaddlePaddle/models
  ``PaddleNLP/lexical_analysis/nets.py``: named, uniformly initialised, L2-regularised parameters,
  ``bigru_num`` bidirectional GRU layers joined by ``fluid.layers.concat(axis=1)``, a
  ``linear_chain_crf`` sharing ``crfw`` with ``crf_decoding``; its inference program declares
  ``crfw`` with ``fluid.layers.create_parameter(shape=[emission.shape[1] + 2, ...])``. ``concat``,
  ``create_parameter`` and ``emission.shape[1]`` (a method here before) all failed.

The harness is ``test_paddle_fluid_layers``'s: the same parameter names in the same order and shapes,
and on Paddle's initial values the same outputs, lods and gradients.
"""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
torch = pytest.importorskip("torch")

from test_paddle_fluid_layers import Ours, PaddleFluid, _check, _run_paddle  # noqa: E402

import lodtensor as lt  # noqa: E402
import lodtensor.fluid as fluid  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class PaddleFluid2(PaddleFluid):
    """The fluid 1.x names these programs also call, on Paddle 2.6."""

    tanh = staticmethod(paddle.tanh)
    mean = staticmethod(paddle.mean)
    sequence_unpad = staticmethod(paddle.static.nn.sequence_unpad)
    initializer = type("initializer", (), {"Uniform": staticmethod(paddle.nn.initializer.Uniform)})

    class regularizer:  # noqa: N801 - fluid's module name
        @staticmethod
        def L2DecayRegularizer(regularization_coeff):  # noqa: N802 - fluid's name
            return paddle.regularizer.L2Decay(regularization_coeff)

    @staticmethod
    def concat(input, axis=0):  # noqa: A002
        return paddle.concat(input, axis=axis)

    @staticmethod
    def create_parameter(shape, dtype, name=None):
        return paddle.static.create_parameter(shape, dtype, name=name)


class Ours2(Ours):
    tanh = staticmethod(fluid.layers.tanh)
    mean = staticmethod(fluid.layers.mean)
    sequence_unpad = staticmethod(fluid.layers.sequence_unpad)
    concat = staticmethod(fluid.layers.concat)
    create_parameter = staticmethod(fluid.layers.create_parameter)
    initializer = fluid.initializer
    regularizer = fluid.regularizer


def _more(L):
    return PaddleFluid2 if L is PaddleFluid else Ours2


V, E, H, H2, CLASSES = 30, 6, 8, 5, 2


def bow_net(L, words):
    """PaddlePaddle/models text_classification ``bow_net`` (also PaddleHub senta_bow)."""
    L = _more(L)
    emb = L.embedding(input=words, size=[V, E])
    bow = L.sequence_pool(input=emb, pool_type="sum")
    bow_tanh = L.tanh(bow)
    fc_1 = L.fc(input=bow_tanh, size=H, act="tanh")
    fc_2 = L.fc(input=fc_1, size=H2, act="tanh")
    return L.fc(input=[fc_2], size=CLASSES, act="softmax")


def padded_bow_net(L, src_ids, seq_len):
    """PaddlePaddle/models sentiment_classification ``bow_net``: padded ids, unpadded after the embedding."""
    L = _more(L)
    emb = L.embedding_v2(input=src_ids, size=[V, E])
    emb = L.sequence_unpad(emb, length=seq_len)
    bow = L.sequence_pool(input=emb, pool_type="sum")
    bow_tanh = L.tanh(bow)
    fc_1 = L.fc(input=bow_tanh, size=H, act="tanh")
    return L.fc(input=[fc_1], size=CLASSES, act="softmax")


LABELS, BOUND = 7, 0.1


def _lex(L, word, target=None, for_infer=False, bigru_num=2):
    """PaddlePaddle/models lexical_analysis ``lex_net`` (``_bigru_layer`` and ``_net_conf``)."""
    L = _more(L)

    def attr(**kw):
        return L.ParamAttr(initializer=L.initializer.Uniform(low=-BOUND, high=BOUND),
                           regularizer=L.regularizer.L2DecayRegularizer(regularization_coeff=1e-4), **kw)

    def bigru_layer(feature):
        pre_gru = L.fc(input=feature, size=H * 3, param_attr=attr())
        gru = L.dynamic_gru(input=pre_gru, size=H, param_attr=attr())
        pre_gru_r = L.fc(input=feature, size=H * 3, param_attr=attr())
        gru_r = L.dynamic_gru(input=pre_gru_r, size=H, is_reverse=True, param_attr=attr())
        return L.concat(input=[gru, gru_r], axis=1)

    feature = L.embedding(input=word, size=[V, E], dtype="float32", is_sparse=True,
                          param_attr=L.ParamAttr(learning_rate=1.0, name="word_emb",
                                                 initializer=L.initializer.Uniform(low=-BOUND, high=BOUND)))
    for _ in range(bigru_num):
        feature = bigru_layer(feature)
    emission = L.fc(size=LABELS, input=feature, param_attr=attr())
    if not for_infer:
        crf_cost = L.linear_chain_crf(input=emission, label=target,
                                      param_attr=L.ParamAttr(name="crfw", learning_rate=1.0))
        avg_cost = L.mean(crf_cost)
        crf_decode = L.crf_decoding(input=emission, param_attr=L.ParamAttr(name="crfw"))
        return crf_cost, avg_cost, crf_decode
    size = emission.shape[1]
    L.create_parameter(shape=[size + 2, size], dtype="float32", name="crfw")
    return L.crf_decoding(input=emission, param_attr=L.ParamAttr(name="crfw"))


def lex_net_train(L, words, targets):
    return _lex(L, words, targets)


def lex_net_infer(L, words):
    return _lex(L, words, for_infer=True)


def _ids(rng, lod, vocab):
    return lt.LoDTensor(rng.randint(0, vocab, (lod[-1][-1], 1)).astype("int64"), lod)


LODS = [[[0, 3, 4, 9, 11]], [[0, 7]], [[0, 1, 5, 6]]]


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
def test_text_classification_bow_net(lod):
    words = _ids(np.random.RandomState(len(lod[0])), lod, V)
    _check(bow_net, {"words": words}, load_before_first_run=True)


def test_sentiment_classification_padded_bow_net():
    rng = np.random.RandomState(3)
    lens = np.array([3, 1, 5, 2], dtype="int64")
    ids = rng.randint(1, V, (4, 5)).astype("int64") * (np.arange(5) < lens[:, None])
    _check(padded_bow_net, {"src_ids": lt.LoDTensor(ids), "seq_len": lt.LoDTensor(lens)},
           load_before_first_run=False)


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
def test_lexical_analysis_lex_net(lod):
    rng = np.random.RandomState(len(lod[0]) + 7)
    feeds = {"words": _ids(rng, lod, V), "targets": _ids(rng, lod, LABELS)}
    program = _check(lex_net_train, feeds, load_before_first_run=True)
    # the parameters keep LAC's attributes: learning rate and L2 decay per parameter group
    decays = sorted({float(g.get("weight_decay", 0.0)) for g in program.param_groups(0.1)})
    assert decays == [0.0, 1e-4]


def test_lexical_analysis_inference_program_declares_crfw():
    """The inference program declares ``crfw`` with ``create_parameter`` from ``emission.shape[1]``;
    loaded with the trained program's Paddle values by name, it decodes as Paddle's does."""
    lod = LODS[0]
    rng = np.random.RandomState(11)
    words, targets = _ids(rng, lod, V), _ids(rng, lod, LABELS)
    trained, _, _ = _run_paddle(lex_net_train, {"words": words, "targets": targets})
    _, paddle_infer, _ = _run_paddle(lex_net_infer, {"words": words}, values=trained)
    infer = fluid.Program(lambda **kw: lex_net_infer(Ours, **kw))
    infer.set_state_dict(dict(trained), strict=False)
    path = infer(words=words)
    assert infer.paddle_names() == [n for n, _ in trained]  # crfw last, as Paddle's program has it
    np.testing.assert_array_equal(path.data.numpy(), paddle_infer[0][0])
    assert path.lod() == paddle_infer[0][1] == lod


def test_tensor_layers_values_and_lods_as_paddle():
    """``concat`` (axis 1: the first input's lod; axis 0: the lods appended), the activation layers and
    ``softmax`` keep the lods Paddle's operators give, with Paddle's values; ``create_parameter``
    names as Paddle's (a named one takes no number)."""
    from _static import fresh_program  # noqa: PLC0415
    from paddle.base import core  # noqa: PLC0415

    a = lt.LoDTensor(np.random.RandomState(0).randn(5, 2).astype("float32"), [[0, 2, 5]])
    b = lt.LoDTensor(np.random.RandomState(1).randn(5, 3).astype("float32"), [[0, 1, 5]])
    c = lt.LoDTensor(np.random.RandomState(2).uniform(0.2, 3.0, (4, 2)).astype("float32"), [[0, 0, 4]])
    calls = {
        "concat1": (lambda L, a, b, c: L.concat([a, b], axis=1)),
        "concat0": (lambda L, a, b, c: L.concat([a, c, a], axis=0)),
        "concat_neg": (lambda L, a, b, c: L.concat([a, b], axis=-1)),
        **{act: (lambda L, a, b, c, act=act: getattr(L, act)(a)) for act in ("tanh", "sigmoid", "relu", "softsign",
                                                                              "exp", "square", "sin", "cos", "ceil",
                                                                              "floor", "softplus", "erf")},
        **{act: (lambda L, a, b, c, act=act: getattr(L, act)(c)) for act in ("sqrt", "rsqrt", "log", "reciprocal")},
        "logsigmoid": (lambda L, a, b, c: L.logsigmoid(a)),
        "tanh_shrink": (lambda L, a, b, c: L.tanh_shrink(a)),
        "softmax": (lambda L, a, b, c: L.softmax(a)),
        "softmax0": (lambda L, a, b, c: L.softmax(a, axis=0)),
    }
    paddle_ops = {"tanh": paddle.tanh, "sigmoid": paddle.nn.functional.sigmoid, "relu": paddle.nn.functional.relu,
                  "softsign": paddle.nn.functional.softsign, "exp": paddle.exp, "square": paddle.square,
                  "softmax": paddle.nn.functional.softmax, "concat": paddle.concat,
                  "logsigmoid": paddle.nn.functional.log_sigmoid, "tanh_shrink": paddle.nn.functional.tanhshrink,
                  **{n: getattr(paddle, n) for n in ("sin", "cos", "ceil", "floor", "erf", "sqrt", "rsqrt", "log",
                                                     "reciprocal")},
                  "softplus": paddle.nn.functional.softplus}
    P = type("P", (), {k: staticmethod(v) for k, v in paddle_ops.items()})
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            vs = [paddle.static.data(n, [-1, t.shape[1]], "float32", lod_level=1) for n, t in zip("abc", (a, b, c))]
            outs = [fn(P, *vs) for fn in calls.values()]
            p1 = paddle.static.create_parameter([3, 2], "float32")
            p2 = paddle.static.create_parameter([3], "float32", is_bias=True)
            p3 = paddle.static.create_parameter([3, 2], "float32", name="crfw")
            p4 = paddle.static.create_parameter([2], "float32")
        exe = paddle.static.Executor(core.CPUPlace())
        exe.run(startup, scope=scope)
        feed = {}
        for n, t in zip("abc", (a, b, c)):
            feed[n] = core.LoDTensor()
            feed[n].set(t.numpy(), core.CPUPlace())
            feed[n].set_lod(t.lod())
        got = exe.run(main, feed=feed, fetch_list=outs, scope=scope, return_numpy=False)
    for name, fn, g in zip(calls, calls.values(), got):
        ours = fn(fluid.layers, a, b, c)
        np.testing.assert_allclose(ours.numpy(), np.array(g), rtol=2e-6, atol=1e-7, err_msg=name)
        assert ours.lod() == g.lod(), name
    names = [p.name for p in (p1, p2, p3, p4)]

    def build():
        fluid.layers.create_parameter([3, 2], "float32")
        fluid.layers.create_parameter([3], "float32", is_bias=True)
        fluid.layers.create_parameter([3, 2], "float32", name="crfw")
        fluid.layers.create_parameter([2], "float32")

    net = fluid.Program(build)
    net()
    assert net.paddle_names() == names == ["create_parameter_0.w_0", "create_parameter_1.b_0", "crfw",
                                           "create_parameter_2.w_0"]
    assert not net.get_parameter("create_parameter_1.b_0").detach().any()  # a bias starts at 0, as Paddle's


def test_difference_abs_keeps_the_lod():
    """Paddle 2.6.2's ``abs`` (a phi kernel now) drops the lod that every other activation layer keeps;
    ``fluid.layers.abs`` keeps it, as Paddle 1.x's activation operator did (docs/porting.md)."""
    from _static import fresh_program  # noqa: PLC0415
    from paddle.base import core  # noqa: PLC0415

    x = lt.LoDTensor(np.array([[-1.0], [2.0], [-3.0]], "float32"), [[0, 1, 3]])
    with fresh_program() as (main, startup, scope):
        with paddle.static.program_guard(main, startup):
            outs = [paddle.abs(paddle.static.data("x", [-1, 1], "float32", lod_level=1))]
        feed = core.LoDTensor()
        feed.set(x.numpy(), core.CPUPlace())
        feed.set_lod(x.lod())
        (got,) = paddle.static.Executor(core.CPUPlace()).run(main, feed={"x": feed}, fetch_list=outs, scope=scope,
                                                            return_numpy=False)
    ours = fluid.layers.abs(x)
    np.testing.assert_array_equal(ours.numpy(), np.array(got))
    assert got.lod() == [] and ours.lod() == [[0, 1, 3]]
