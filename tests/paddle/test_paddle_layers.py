"""Differential tests of ``lodtensor.nn.functional`` against real Paddle 2.6.2's operators
(``lookup_table``, ``sequence_conv``, ``row_conv``, ``lstm``, ``gru``, ``linear_chain_crf``,
``crf_decoding``, ``warpctc``) on the same parameter values: the outputs, and the gradients of
``sum(out * w)`` (random ``w``) with respect to the input and every parameter, computed by
Paddle's own backward operators and by torch autograd through lodtensor. float64 on both
sides; lods with empty sequences, ``is_reverse``, peepholes, ``origin_mode``, ``h_0``/``c_0``.
"""

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
torch = pytest.importorskip("torch")

from _raw import run  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.nn import functional as F  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

LODS = [[[0, 3, 3, 7, 8]], [[0, 5]], [[0, 1, 2, 3]], [[0, 2, 3], [0, 2, 2, 6]]]
DT = "float64"
F32 = "float32"  # the only dtype of some Paddle CPU kernels (sequence_conv, row_conv)


def rand(rng, *shape, dtype=DT):
    return rng.uniform(-0.8, 0.8, size=shape).astype(dtype)


def check(paddle_build, feeds, params, ours, grads=True, rtol=1e-6, atol=1e-8, seed=0, dtype=DT, lod=None,
          paddle_wrong=()):
    """Compare Paddle's outputs (and gradients of sum(out0 * w)) with ``ours(torch_values)``.

    ``feeds``/``params`` map names to LoDTensors / arrays; float feeds and every param become
    float64 torch leaves for ``ours``, which returns a list of outputs (LoDTensor or tensor).
    With ``lod``, ``ours`` gets the feed ``x`` with that (2-level) lod while Paddle, which takes
    one level only, gets its last level: lodtensor's layers act on the last level.
    For the names in ``paddle_wrong`` (where Paddle's backward operator is wrong), our gradient
    is compared with central differences of Paddle's forward at a few elements instead.
    """
    names = [n for n, v in feeds.items() if np.asarray(v.numpy() if isinstance(v, lt.LoDTensor) else v).dtype == dtype]
    names += list(params)
    torch_values = {}
    for name, value in {**feeds, **params}.items():
        data = value.numpy() if isinstance(value, lt.LoDTensor) else np.asarray(value)
        t = torch.tensor(data)
        if name in names:
            t.requires_grad_()
        torch_values[name] = value.with_data(t) if isinstance(value, lt.LoDTensor) else t
    outs = ours(torch_values)
    first = outs[0].data if isinstance(outs[0], lt.LoDTensor) else outs[0]
    w = np.random.RandomState(seed + 7).uniform(0.5, 1.5, size=tuple(first.shape)).astype(dtype)
    got = run(paddle_build, feeds, params, grads_of=names if grads else None, weights=w)
    for (data, out_lod), out in zip(got, outs):
        mine = out.data if isinstance(out, lt.LoDTensor) else out
        mine = mine.detach().numpy()
        np.testing.assert_allclose(data.reshape(mine.shape), mine, rtol=rtol, atol=atol)
        if isinstance(out, lt.LoDTensor) and out_lod:
            assert out_lod == out.lod()[-len(out_lod) :]
    if grads:
        (first * torch.tensor(w)).sum().backward()
        for name, (g, _) in zip(names, got[len(outs):]):
            if name in paddle_wrong:
                g = _central_differences(paddle_build, feeds, params, w, name, g.copy())
            leaf = torch_values[name].data if isinstance(torch_values[name], lt.LoDTensor) else torch_values[name]
            mine = leaf.grad.numpy() if leaf.grad is not None else np.zeros_like(g)  # unused: Paddle gives 0
            if name in paddle_wrong:
                mine = np.where(np.isnan(g), np.nan, mine)
            np.testing.assert_allclose(g, mine, rtol=rtol * 10, atol=atol * 10, err_msg=name)


def _central_differences(paddle_build, feeds, params, w, name, grad, eps=1e-6, count=4):
    """``grad`` with ``count`` of its elements replaced by central differences of Paddle's forward
    (the others masked to our values' stand-in: NaN, which assert_allclose treats as equal only
    to NaN, so only the checked elements are compared)."""
    rng = np.random.RandomState(11)
    picks = [tuple(rng.randint(0, n) for n in grad.shape) for _ in range(count)]
    out = np.full_like(grad, np.nan)
    for idx in picks:
        values = []
        for sign in (1, -1):
            moved = {k: v.copy() for k, v in params.items()}
            moved[name][idx] += sign * eps
            values.append(float((run(paddle_build, feeds, moved)[0][0].reshape(w.shape) * w).sum()))
        out[idx] = (values[0] - values[1]) / (2 * eps)
    return out


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding(lod, padding_idx):
    rng = np.random.RandomState(1)
    rows = lod[-1][-1]
    ids = lt.LoDTensor(rng.randint(0, 5, size=(rows, 1)).astype("int64"), lod)
    pad = -1 if padding_idx is None else (padding_idx % 5)
    check(lambda v, op: op("lookup_table", {"W": v["w"], "Ids": v["ids"]}, {"Out": DT}, {"padding_idx": pad})["Out"],
          {"ids": ids}, {"w": rand(rng, 5, 3)},
          lambda t: [F.embedding(t["ids"], t["w"], padding_idx=padding_idx)])


@pytest.mark.parametrize("num_flatten_dims", [1, 2])
def test_fc(num_flatten_dims):
    rng = np.random.RandomState(2)
    x = lt.LoDTensor(rand(rng, 6, 2, 3), [[0, 2, 6]])
    inner = 6 if num_flatten_dims == 1 else 3

    def build(v, op):
        out = op("mul", {"X": v["x"], "Y": v["w"]}, {"Out": DT}, {"x_num_col_dims": num_flatten_dims,
                                                                  "y_num_col_dims": 1})["Out"]
        out = op("elementwise_add", {"X": out, "Y": v["b"]}, {"Out": DT}, {"axis": num_flatten_dims})["Out"]
        return op("tanh", {"X": out}, {"Out": DT})["Out"]

    check(build, {"x": x}, {"w": rand(rng, inner, 4), "b": rand(rng, 4)},
          lambda t: [F.fc(t["x"], t["w"], t["b"], num_flatten_dims=num_flatten_dims, act="tanh")])


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
@pytest.mark.parametrize("filter_size, padding_start", [(3, None), (1, None), (4, -2), (2, 0), (3, -2)])
def test_sequence_conv(lod, filter_size, padding_start):
    if len(lod) > 1:
        pytest.skip("Paddle's sequence_conv takes one lod level")
    rng = np.random.RandomState(filter_size)
    rows = lod[-1][-1]
    x = lt.LoDTensor(rand(rng, rows, 3, dtype=F32), lod)
    start = -(filter_size // 2) if padding_start is None else padding_start

    def build(v, op):
        out = op("sequence_conv", {"X": v["x"], "Filter": v["w"]}, {"Out": F32},
                 {"contextLength": filter_size, "contextStart": start, "contextStride": 1,
                  "paddingTrainable": False})["Out"]
        out = op("elementwise_add", {"X": out, "Y": v["b"]}, {"Out": F32}, {"axis": 1})["Out"]
        return op("sigmoid", {"X": out}, {"Out": F32})["Out"]

    check(build, {"x": x}, {"w": rand(rng, 3 * filter_size, 5, dtype=F32), "b": rand(rng, 5, dtype=F32)},
          lambda t: [F.sequence_conv(t["x"], t["w"], t["b"], filter_size=filter_size, padding_start=padding_start,
                                     act="sigmoid")],
          dtype=F32, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lod", [[[0, 4, 5, 8, 11]], [[0, 0, 4, 5, 5, 8, 11, 11]], [[0, 1, 2, 3]], [[0, 9]]],
                         ids=["optest", "optest-len0", "ones", "one"])
@pytest.mark.parametrize("filter_size, padding_start", [(3, -1), (3, 2), (5, -4), (4, -1), (2, 0), (6, -2)])
def test_sequence_conv_trainable_padding(lod, filter_size, padding_start):
    """Paddle's PaddingData (paddingTrainable): learnable rows for the positions outside a sequence,
    including sequences shorter than the padding (the OpTest's lods and padding_start 2, #26)."""
    rng = np.random.RandomState(filter_size + 7 * (padding_start + 4))
    rows = lod[-1][-1]
    x = lt.LoDTensor(rand(rng, rows, 3, dtype=F32), lod)
    total = max(0, -padding_start) + max(0, padding_start + filter_size - 1)

    def build(v, op):
        return op("sequence_conv", {"X": v["x"], "Filter": v["w"], "PaddingData": v["pad"]}, {"Out": F32},
                  {"contextLength": filter_size, "contextStart": padding_start, "contextStride": 1,
                   "paddingTrainable": True})["Out"]

    check(build, {"x": x}, {"w": rand(rng, 3 * filter_size, 4, dtype=F32), "pad": rand(rng, total, 3, dtype=F32)},
          lambda t: [F.sequence_conv(t["x"], t["w"], filter_size=filter_size, padding_start=padding_start,
                                     padding_trainable=True, padding_data=t["pad"])],
          dtype=F32, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lod", [[[0, 5]], [[0, 1, 2, 3]], [[0, 3, 7]]], ids=range(3))  # Paddle: no empty ones
@pytest.mark.parametrize("future", [0, 2])
def test_row_conv(lod, future):
    rng = np.random.RandomState(future)
    x = lt.LoDTensor(rand(rng, lod[-1][-1], 4, dtype=F32), lod)
    check(lambda v, op: op("row_conv", {"X": v["x"], "Filter": v["w"]}, {"Out": F32})["Out"],
          {"x": x}, {"w": rand(rng, future + 1, 4, dtype=F32)}, lambda t: [F.row_conv(t["x"], t["w"])],
          dtype=F32, rtol=1e-5, atol=1e-6)


LSTM_CASES = [
    dict(use_peepholes=True, is_reverse=False),
    dict(use_peepholes=False, is_reverse=False),
    dict(use_peepholes=True, is_reverse=True),
    dict(use_peepholes=True, is_reverse=False, state=True),
    dict(use_peepholes=False, is_reverse=True, state=True, gate_activation="tanh", cell_activation="relu",
         candidate_activation="identity"),
]


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
@pytest.mark.parametrize("case", LSTM_CASES, ids=range(len(LSTM_CASES)))
def test_dynamic_lstm(lod, case):
    case = dict(case)
    state = case.pop("state", False)
    acts = {k: case.pop(k, d) for k, d in [("gate_activation", "sigmoid"), ("cell_activation", "tanh"),
                                          ("candidate_activation", "tanh")]}
    rng = np.random.RandomState(len(lod[-1]))
    d, rows, n_seq = 3, lod[-1][-1], len(lod[-1]) - 1
    x = lt.LoDTensor(rand(rng, rows, 4 * d), lod)
    params = {"w": rand(rng, d, 4 * d), "b": rand(rng, 1, (7 if case["use_peepholes"] else 4) * d)}
    if state:
        params.update(h0=rand(rng, n_seq, d), c0=rand(rng, n_seq, d))

    def build(v, op):
        inputs = {"Input": v["x"], "Weight": v["w"], "Bias": v["b"]}
        if state:
            inputs.update(H0=v["h0"], C0=v["c0"])
        out = op("lstm", inputs, {"Hidden": DT, "Cell": DT, "BatchGate": DT, "BatchCellPreAct": DT},
                 {**case, **acts})
        return [out["Hidden"], out["Cell"]]

    def ours(t):
        h, c = F.dynamic_lstm(t["x"], t["w"], t["b"], h_0=t.get("h0"), c_0=t.get("c0"), **case, **acts)
        return [h, c]

    # Paddle's lstm_grad gets the weight gradient wrong when h_0 is given, and gives an empty
    # sequence's h_0/c_0 a non-zero gradient (checked against central differences of its own
    # forward; docs/porting.md)
    wrong = ("w", "h0", "c0") if state else ()
    check(build, {"x": lt.LoDTensor(x.data, [lod[-1]])}, params, ours, lod=lod, paddle_wrong=wrong)


GRU_CASES = [
    dict(is_reverse=False, origin_mode=False),
    dict(is_reverse=True, origin_mode=False),
    dict(is_reverse=False, origin_mode=True),
    dict(is_reverse=True, origin_mode=True, state=True),
    dict(is_reverse=False, origin_mode=False, state=True, activation="relu", gate_activation="tanh"),
]


@pytest.mark.parametrize("lod", LODS, ids=range(len(LODS)))
@pytest.mark.parametrize("case", GRU_CASES, ids=range(len(GRU_CASES)))
def test_dynamic_gru(lod, case):
    case = dict(case)
    state = case.pop("state", False)
    cand, gate = case.pop("activation", "tanh"), case.pop("gate_activation", "sigmoid")
    rng = np.random.RandomState(3 + len(lod[-1]))
    d, rows, n_seq = 4, lod[-1][-1], len(lod[-1]) - 1
    x = lt.LoDTensor(rand(rng, rows, 3 * d), lod)
    params = {"w": rand(rng, d, 3 * d), "b": rand(rng, 1, 3 * d)}
    if state:
        params["h0"] = rand(rng, n_seq, d)

    def build(v, op):
        inputs = {"Input": v["x"], "Weight": v["w"], "Bias": v["b"]}
        if state:
            inputs["H0"] = v["h0"]
        out = op("gru", inputs, {"BatchGate": DT, "BatchResetHiddenPrev": DT, "BatchHidden": DT, "Hidden": DT},
                 {**case, "activation": cand, "gate_activation": gate})
        return out["Hidden"]

    def ours(t):
        return [F.dynamic_gru(t["x"], t["w"], t["b"], h_0=t.get("h0"), gate_activation=gate,
                              candidate_activation=cand, **case)]

    check(build, {"x": lt.LoDTensor(x.data, [lod[-1]])}, params, ours, lod=lod)


CRF_LODS = [[[0, 3, 4, 8]], [[0, 6]], [[0, 1, 2, 3]]]


@pytest.mark.parametrize("lod", CRF_LODS, ids=range(len(CRF_LODS)))
def test_linear_chain_crf(lod):
    rng = np.random.RandomState(5)
    k, rows = 4, lod[-1][-1]
    x = lt.LoDTensor(rand(rng, rows, k) * 3, lod)
    y = lt.LoDTensor(rng.randint(0, k, size=(rows, 1)).astype("int64"), lod)

    def build(v, op):
        out = op("linear_chain_crf", {"Emission": v["x"], "Transition": v["w"], "Label": v["y"]},
                 {"Alpha": DT, "EmissionExps": DT, "TransitionExps": DT, "LogLikelihood": DT})
        return out["LogLikelihood"]

    check(build, {"x": x, "y": y}, {"w": rand(rng, k + 2, k)},
          lambda t: [F.linear_chain_crf(t["x"], t["y"], t["w"])])


@pytest.mark.parametrize("lod", CRF_LODS, ids=range(len(CRF_LODS)))
@pytest.mark.parametrize("with_label", [False, True])
def test_crf_decoding(lod, with_label):
    rng = np.random.RandomState(6)
    k, rows = 5, lod[-1][-1]
    x = lt.LoDTensor(rand(rng, rows, k) * 3, lod)
    y = lt.LoDTensor(rng.randint(0, k, size=(rows, 1)).astype("int64"), lod)
    w = rand(rng, k + 2, k) * 2

    def build(v, op):
        inputs = {"Emission": v["x"], "Transition": v["w"]}
        if with_label:
            inputs["Label"] = v["y"]
        return op("crf_decoding", inputs, {"ViterbiPath": "int64"})["ViterbiPath"]

    (path, path_lod), = run(build, {"x": x, "y": y}, {"w": w})
    ours = F.crf_decoding(x, w, label=y if with_label else None)
    np.testing.assert_array_equal(path.reshape(-1, 1), ours.numpy())
    # the same on torch input, and the path's score is the best of all paths for short sequences
    assert F.crf_decoding(x.with_data(torch.tensor(x.numpy())), w).numpy().tolist() == \
        F.crf_decoding(x, w).numpy().tolist()


CTC_CASES = [([[0, 4, 9, 15]], [[0, 2, 2, 5]]), ([[0, 6]], [[0, 3]]), ([[0, 3, 5]], [[0, 1, 1]])]


@pytest.mark.parametrize("lods", CTC_CASES, ids=range(len(CTC_CASES)))
@pytest.mark.parametrize("norm_by_times", [False, True])
@pytest.mark.parametrize("blank", [0, 3])
def test_warpctc(lods, norm_by_times, blank):
    x_lod, y_lod = lods
    rng = np.random.RandomState(7)
    c, rows = 5, x_lod[-1][-1]
    x = lt.LoDTensor(rand(rng, rows, c) * 2, x_lod)
    labels = rng.randint(0, c - 1, size=(y_lod[-1][-1], 1)).astype("int32")
    labels[labels >= blank] += 1  # never the blank
    y = lt.LoDTensor(labels, y_lod)

    def build(v, op):
        out = op("warpctc", {"Logits": v["x"], "Label": v["y"]}, {"WarpCTCGrad": DT, "Loss": DT},
                 {"blank": blank, "norm_by_times": norm_by_times})
        return out["Loss"]

    try:
        check(build, {"x": x, "y": y}, {}, lambda t: [F.warpctc(t["x"], t["y"], blank, norm_by_times)], rtol=1e-5)
    except RuntimeError as err:  # pragma: no cover - a Paddle build without libwarpctc
        if "warpctc" in str(err).lower() and "load" in str(err).lower():
            pytest.skip(f"Paddle's warpctc library is missing: {err}")
        raise
    np.testing.assert_allclose(F.warpctc(x, y.with_data(labels.astype("int64")), blank).ravel(),
                               F.warpctc(x.with_data(torch.tensor(x.numpy())), y, blank).detach().numpy().ravel(),
                               rtol=1e-9)
