"""The PaddlePaddle book's LoD chapters, ported by changing one import.

Chapter 06 (understand_sentiment): ``convolution_net``, ``dynamic_rnn_lstm`` and
``stacked_lstm_net``; chapter 07 (label_semantic_roles): ``db_lstm`` with a CRF. The network
code below is the book's (sizes made small), with ``import paddle.fluid as fluid`` replaced by
``import lodtensor.fluid as fluid``. Each program is a ``fluid.Program``, a ``torch.nn.Module``
whose parameters carry Paddle's names (``embedding_0.w_0``, ``fc_0.w_1``, ``lstm_0.w_0``,
``crfw``, ...); the book's ``exe.run(feed=..., fetch_list=...)`` training loop becomes a torch
loop, and a checkpoint in Paddle's format (one file per parameter, as ``fluid.io.save_params``
writes) loads back by name. Synthetic data: a sentence's label is the sign of its sentiment
words; a word's semantic role is a function of the word and of its mark (next to the predicate or not).

Run: python examples/paddle_book.py
"""

import os
import tempfile

import numpy as np
import torch

import lodtensor.fluid as fluid  # was: import paddle.fluid as fluid

torch.manual_seed(0)
rng = np.random.default_rng(0)


# ------------------------------------------------------------------------------------------
# Chapter 06: sentiment (the book's three nets, as written there)
# ------------------------------------------------------------------------------------------
CLASS_DIM, EMB_DIM, HID_DIM, STACKED_NUM = 2, 16, 32, 3


def convolution_net(data, input_dim, class_dim, emb_dim, hid_dim):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3, act="tanh",
                                           pool_type="sqrt")
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4, act="tanh",
                                           pool_type="sqrt")
    prediction = fluid.layers.fc(input=[conv_3, conv_4], size=class_dim, act="softmax")
    return prediction


def dynamic_rnn_lstm(data, input_dim, class_dim, emb_dim, lstm_size):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    sentence = fluid.layers.fc(input=emb, size=lstm_size * 4, act="tanh")
    lstm, _ = fluid.layers.dynamic_lstm(input=sentence, size=lstm_size * 4)
    last = fluid.layers.sequence_last_step(lstm)
    prediction = fluid.layers.fc(input=last, size=class_dim, act="softmax")
    return prediction


def stacked_lstm_net(data, input_dim, class_dim, emb_dim, hid_dim, stacked_num):
    assert stacked_num % 2 == 1
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    fc1 = fluid.layers.fc(input=emb, size=hid_dim)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = fluid.layers.fc(input=inputs, size=hid_dim)
        lstm, cell = fluid.layers.dynamic_lstm(input=fc, size=hid_dim, is_reverse=(i % 2) == 0)
        inputs = [fc, lstm]
    fc_last = fluid.layers.sequence_pool(input=inputs[0], pool_type="max")
    lstm_last = fluid.layers.sequence_pool(input=inputs[1], pool_type="max")
    prediction = fluid.layers.fc(input=[fc_last, lstm_last], size=class_dim, act="softmax")
    return prediction


def train_program(prediction):
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=prediction, label=label)
    return [avg_cost, accuracy]


WORDS = 40
GOOD, BAD = list(range(2, 8)), list(range(8, 14))  # sentiment words; the rest are neutral


def sentiment_batch(n):
    """``n`` sentences of 3-12 word ids and their labels, as the book's feeder gives them."""
    sentences, labels = [], []
    for _ in range(n):
        words = list(rng.integers(14, WORDS, rng.integers(3, 13)))
        label = int(rng.integers(0, 2))
        for _ in range(int(rng.integers(1, 3))):
            words[int(rng.integers(len(words)))] = int(rng.choice(GOOD if label else BAD))
        sentences.append(words)
        labels.append([label])
    lod = [[len(s) for s in sentences]]
    return {"words": fluid.create_lod_tensor([[int(w) for w in s] for s in sentences], lod, fluid.CPUPlace()),
            "label": np.array(labels)}


def chapter_06():
    train, test = [sentiment_batch(64) for _ in range(6)], sentiment_batch(200)
    nets = {
        "convolution_net": lambda data: convolution_net(data, WORDS, CLASS_DIM, EMB_DIM, HID_DIM),
        "dynamic_rnn_lstm": lambda data: dynamic_rnn_lstm(data, WORDS, CLASS_DIM, EMB_DIM, HID_DIM),
        "stacked_lstm_net": lambda data: stacked_lstm_net(data, WORDS, CLASS_DIM, EMB_DIM, HID_DIM, STACKED_NUM),
    }
    for name, inference in nets.items():
        def inference_program(inference=inference):
            data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
            return inference(data)

        net = fluid.Program(lambda inference_program=inference_program: train_program(inference_program()))
        net(feed=train[0])  # the first run creates the parameters
        optimizer = torch.optim.Adagrad(net.parameters(), lr=0.05)  # the book: fluid.optimizer.Adagrad
        for _ in range(8):
            for feed in train:
                avg_cost, _ = net(feed=feed)
                optimizer.zero_grad()
                avg_cost.backward()
                optimizer.step()
        with torch.no_grad():
            cost, accuracy = net(feed=test)
        print(f"chapter 06 {name:16s}: {len(net.paddle_names())} parameters ({', '.join(net.paddle_names()[:3])}, "
              f"...), test cost {float(cost):.3f}, accuracy {float(accuracy):.2f}")
        assert float(accuracy) > 0.9, name
        # save as Paddle does (one file per parameter) and load by name into the inference program
        with tempfile.TemporaryDirectory() as model_dir:
            for param_name, value in net.program_state().items():
                fluid.io.save_lod_tensor(value, os.path.join(model_dir, param_name))
            infer = fluid.Program(inference_program)
            infer.set_state_dict(fluid.io.load_program_state(model_dir))
            with torch.no_grad():
                probs = infer(feed={"words": test["words"]})
        agree = float((probs.data.argmax(1).numpy() == test["label"].ravel()).mean())
        assert abs(agree - float(accuracy)) < 1e-6


# ------------------------------------------------------------------------------------------
# Chapter 07: semantic role labelling (the book's db_lstm and its CRF)
# ------------------------------------------------------------------------------------------
WORD_DICT_LEN, PRED_DICT_LEN, LABEL_DICT_LEN, MARK_DICT_LEN = 50, 6, 5, 2
WORD_DIM, MARK_DIM, HIDDEN_DIM, DEPTH = 16, 5, 64, 4
MIX_HIDDEN_LR = 1e-3
EMBEDDING_NAME = "emb"


def db_lstm(word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, **ignored):
    # 8 features
    predicate_embedding = fluid.layers.embedding(input=predicate, size=[PRED_DICT_LEN, WORD_DIM], dtype="float32",
                                                 is_sparse=True, param_attr="vemb")
    mark_embedding = fluid.layers.embedding(input=mark, size=[MARK_DICT_LEN, MARK_DIM], dtype="float32",
                                            is_sparse=True)
    word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
    # the book's word vectors are pre-trained: trainable=False keeps them
    emb_layers = [
        fluid.layers.embedding(size=[WORD_DICT_LEN, WORD_DIM], input=x,
                               param_attr=fluid.ParamAttr(name=EMBEDDING_NAME, trainable=False))
        for x in word_input
    ]
    emb_layers.append(predicate_embedding)
    emb_layers.append(mark_embedding)
    hidden_0_layers = [fluid.layers.fc(input=emb, size=HIDDEN_DIM, act="tanh") for emb in emb_layers]
    hidden_0 = fluid.layers.sums(input=hidden_0_layers)
    lstm_0 = fluid.layers.dynamic_lstm(input=hidden_0, size=HIDDEN_DIM, candidate_activation="relu",
                                       gate_activation="sigmoid", cell_activation="sigmoid")
    # stack L-LSTM and R-LSTM with direct edges
    input_tmp = [hidden_0, lstm_0[0]]
    for i in range(1, DEPTH):
        mix_hidden = fluid.layers.sums(input=[
            fluid.layers.fc(input=input_tmp[0], size=HIDDEN_DIM, act="tanh"),
            fluid.layers.fc(input=input_tmp[1], size=HIDDEN_DIM, act="tanh"),
        ])
        lstm = fluid.layers.dynamic_lstm(input=mix_hidden, size=HIDDEN_DIM, candidate_activation="relu",
                                         gate_activation="sigmoid", cell_activation="sigmoid",
                                         is_reverse=((i % 2) == 1))
        input_tmp = [mix_hidden, lstm[0]]
    feature_out = fluid.layers.sums(input=[
        fluid.layers.fc(input=input_tmp[0], size=LABEL_DICT_LEN, act="tanh"),
        fluid.layers.fc(input=input_tmp[1], size=LABEL_DICT_LEN, act="tanh"),
    ])
    return feature_out


FEATURES = ["word_data", "verb_data", "ctx_n2_data", "ctx_n1_data", "ctx_0_data", "ctx_p1_data", "ctx_p2_data",
            "mark_data"]


def srl_program():
    feeds = {name: fluid.layers.data(name=name, shape=[1], dtype="int64", lod_level=1) for name in FEATURES}
    feature_out = db_lstm(feeds["word_data"], feeds["verb_data"], feeds["ctx_n2_data"], feeds["ctx_n1_data"],
                          feeds["ctx_0_data"], feeds["ctx_p1_data"], feeds["ctx_p2_data"], feeds["mark_data"])
    target = fluid.layers.data(name="target", shape=[1], dtype="int64", lod_level=1)
    crf_cost = fluid.layers.linear_chain_crf(input=feature_out, label=target,
                                             param_attr=fluid.ParamAttr(name="crfw", learning_rate=MIX_HIDDEN_LR))
    avg_cost = fluid.layers.mean(crf_cost)
    crf_decode = fluid.layers.crf_decoding(input=feature_out, param_attr=fluid.ParamAttr(name="crfw"))
    return avg_cost, crf_decode


def srl_batch(n):
    """``n`` sentences with the book's eight features; the role of a word follows from the word and
    from whether it is marked (next to the predicate)."""
    lengths = rng.integers(4, 12, n)
    words = [rng.integers(0, WORD_DICT_LEN, k) for k in lengths]
    verbs = rng.integers(0, PRED_DICT_LEN, n)
    columns = {name: [] for name in [*FEATURES, "target"]}
    for w, v in zip(words, verbs):
        k = len(w)
        pos = int(rng.integers(k))
        padded = np.concatenate([[0, 0], w, [0, 0]])
        ctx = {f"ctx_{t}_data": np.full(k, padded[pos + 2 + off]) for t, off in
               (("n2", -2), ("n1", -1), ("0", 0), ("p1", 1), ("p2", 2))}
        columns["word_data"].append(w)
        columns["verb_data"].append(np.full(k, v))
        for name, values in ctx.items():
            columns[name].append(values)
        mark = (np.abs(np.arange(k) - pos) <= 1).astype(int)
        columns["mark_data"].append(mark)
        columns["target"].append(np.where(mark == 1, 3 + w % 2, w % 3))  # a role of the word and the mark
    lod = [[int(k) for k in lengths]]
    return {name: fluid.create_lod_tensor(np.concatenate(vals).reshape(-1, 1), lod, fluid.CPUPlace())
            for name, vals in columns.items()}


def chapter_07():
    train, test = [srl_batch(32) for _ in range(8)], srl_batch(64)
    net = fluid.Program(srl_program)
    net.set_state_dict({EMBEDDING_NAME: rng.normal(0, 1, (WORD_DICT_LEN, WORD_DIM)).astype("float32")},
                       strict=False)  # the book loads pre-trained word vectors into 'emb'
    net(feed=train[0])
    optimizer = torch.optim.Adam(net.param_groups(0.01))  # 'crfw' keeps its learning_rate multiplier
    first = None
    for _ in range(12):
        for feed in train:
            avg_cost, _ = net(feed=feed)
            first = avg_cost.item() if first is None else first
            optimizer.zero_grad()
            avg_cost.backward()
            optimizer.step()
    with torch.no_grad():
        avg_cost, path = net(feed=test)
    correct = float((path.data.ravel().numpy() == test["target"].numpy().ravel()).mean())
    frozen = not net.get_parameter(EMBEDDING_NAME).requires_grad
    print(f"chapter 07 db_lstm + CRF     : {len(net.paddle_names())} parameters (emb frozen: {frozen}, shared by 6 "
          f"embeddings), CRF cost {first:.2f} -> {float(avg_cost):.2f}, tags right {correct:.2f}")
    assert float(avg_cost) < 0.5 * first and correct > 0.5


if __name__ == "__main__":
    chapter_06()
    chapter_07()
