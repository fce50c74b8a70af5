"""``lodtensor.nn`` on LoDs with a level of no sequence (``tests/hollow.py``: an empty batch ``[[0]]``,
documents without sentences, sequences all empty): every functional layer gives the NumPy backend's
empty result on torch (CPU, its generic code, the torch-CUDA route) and CuPy (kernels emulated);
on torch a backward pass gives the input, every parameter and every initial state a zero gradient
of its own shape, as torch's layers do for an empty batch (nn.Linear on 0 rows); the modules too.
Wrong arguments are refused naming them, as on any other batch.

Paddle 2.6.2 (checked by hand, ``tests/paddle/_raw.py``): it cannot hold an empty batch at all
(``set_lod([[0]])`` fails its CheckLoD); with sequences of length 0 (``[[0, 0]]``) ``sequence_conv``,
``lookup_table``, ``mul``, ``crf_decoding`` and ``sequence_softmax`` give ``[0, ...]`` results,
``linear_chain_crf`` 0 per sequence, ``sequence_pool`` refuses ("first dimension of Input(X) must be
large than batch size") and ``lstm``, ``gru`` and ``warpctc`` kill the process (SIGFPE). Here each
gives its empty (or zero) result instead.
"""

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nn as N
from lodtensor import sequence as S
from lodtensor.nn import functional as F

from ..backend._hollow_variant import _emulator, emulated, route, variant  # noqa: F401 - fixtures
from ..backend._hollow_variant import torch_tensors as _tensors
from ..backend.test_ops_on_backends import _assert_same, _host
from ..hollow import hollow_cases

torch = pytest.importorskip("torch")

# the cupy stub's arrays are NumPy's: the SQRT pool's 0 / 0 of an empty sequence (filled with the pad
# value next) warns there, not on a GPU (the contract: divide_rows gives NaN quietly)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")

CASES = hollow_cases(dtype=np.float64)
D = 2
_RNG = np.random.default_rng(0)
W = {name: _RNG.uniform(-0.8, 0.8, shape) for name, shape in {
    "lstm_w": (D, 4 * D), "lstm_b": (1, 7 * D), "gru_w": (D, 3 * D), "gru_b": (1, 3 * D), "emb": (5, 3),
    "fc_w": (3, 4), "fc_b": (4,), "conv_w": (9, 4), "conv_b": (4,), "row_w": (2, 3), "trans": (5, 3),
    "pad": (2, 3)}.items()}
NO_GRAD = {"crf_decoding", "crf_decoding label", "ctc_greedy_decoder"}


def _layers(lod):
    """``{name: fn(T, A)}``: ``T(width)`` the hollow input of that width on the backend (tracked),
    ``ids()`` its id column, ``P(name)`` a tracked parameter, ``A`` an untracked array."""
    n_seq = len(lod[-1]) - 1
    state = np.full((n_seq, D), 0.5)

    def rows(T, width):
        return T(lt.LoDTensor(np.zeros((0, width)), lod))

    def ids(T):
        return T(lt.LoDTensor(np.zeros((0, 1), np.int64), lod), grad=False)

    return {
        "dynamic_lstm": lambda T, P: F.dynamic_lstm(rows(T, 4 * D), P(W["lstm_w"]), P(W["lstm_b"])),
        "dynamic_lstm h_0 c_0": lambda T, P: F.dynamic_lstm(rows(T, 4 * D), P(W["lstm_w"]), P(W["lstm_b"]),
                                                            h_0=P(state), c_0=P(state)),
        "dynamic_lstm reversed, no peepholes": lambda T, P: F.dynamic_lstm(
            rows(T, 4 * D), P(W["lstm_w"]), P(W["lstm_b"][:, :4 * D]), use_peepholes=False, is_reverse=True),
        "dynamic_gru": lambda T, P: F.dynamic_gru(rows(T, 3 * D), P(W["gru_w"]), P(W["gru_b"])),
        "dynamic_gru h_0 origin": lambda T, P: F.dynamic_gru(rows(T, 3 * D), P(W["gru_w"]), P(W["gru_b"]),
                                                             h_0=P(state), origin_mode=True),
        "embedding": lambda T, P: F.embedding(ids(T), P(W["emb"])),
        "embedding padding_idx": lambda T, P: F.embedding(ids(T), P(W["emb"]), padding_idx=-1),
        "fc": lambda T, P: F.fc(rows(T, 3), P(W["fc_w"]), P(W["fc_b"]), act="tanh"),
        "fc softmax": lambda T, P: F.fc(rows(T, 3), P(W["fc_w"]), P(W["fc_b"]), act="softmax"),
        "fc of two inputs": lambda T, P: F.fc([rows(T, 3), rows(T, 3)], [P(W["fc_w"]), P(W["fc_w"])], P(W["fc_b"])),
        "sequence_conv": lambda T, P: F.sequence_conv(rows(T, 3), P(W["conv_w"]), P(W["conv_b"]), act="relu"),
        "sequence_conv trainable padding": lambda T, P: F.sequence_conv(
            rows(T, 3), P(W["conv_w"]), P(W["conv_b"]), padding_trainable=True, padding_data=P(W["pad"])),
        "row_conv": lambda T, P: F.row_conv(rows(T, 3), P(W["row_w"])),
        "sequence_conv_pool": lambda T, P: F.sequence_conv_pool(rows(T, 3), P(W["conv_w"]), P(W["conv_b"]), 3),
        "sequence_pool layers": lambda T, P: [S.sequence_pool(F.fc(rows(T, 3), P(W["fc_w"])), k, pad_value=-1.0)
                                              for k in ("sum", "average", "sqrt", "max", "min", "first", "last")],
        "linear_chain_crf": lambda T, P: F.linear_chain_crf(rows(T, 3), ids(T), P(W["trans"])),
        "crf_decoding": lambda T, P: F.crf_decoding(rows(T, 3), P(W["trans"])),
        "crf_decoding label": lambda T, P: F.crf_decoding(rows(T, 3), P(W["trans"]), label=ids(T)),
        "warpctc": lambda T, P: F.warpctc(rows(T, 3), ids(T)),
        "warpctc norm_by_times": lambda T, P: F.warpctc(rows(T, 3), ids(T), blank=2, norm_by_times=True),
        "ctc_greedy_decoder": lambda T, P: S.ctc_greedy_decoder(rows(T, 3), blank=0),
    }


PAIRS = [(case, name) for case, t in CASES.items() for name in _layers(t.lod())]


@pytest.mark.parametrize("case, layer", PAIRS, ids=[f"{c}-{n}" for c, n in PAIRS])
def test_layer_matches_numpy_with_zero_gradients(variant, case, layer):  # noqa: F811 - the imported fixture
    fn = _layers(CASES[case].lod())[layer]
    want = _host(lt.get_backend("numpy"), fn(lambda x, grad=True: x, np.asarray))
    res = fn(variant.T, lambda a: variant.A(a, grad=True))
    _assert_same(_host(variant.be, res), want, f"{case} {layer} on {variant.name}")
    variant.no_empty_launch()
    if not variant.autograd:
        return
    floating = [d for d in _tensors(res) if d.is_floating_point()]
    if layer in NO_GRAD:
        assert not floating
        return
    assert floating and all(d.requires_grad for d in floating)
    sum((d * 1.5).sum() for d in floating).backward()
    for leaf in variant.leaves:  # the input, every parameter and initial state
        assert leaf.grad is not None, f"{layer}: no gradient for a leaf of shape {tuple(leaf.shape)}"
        assert leaf.grad.shape == leaf.shape and not leaf.grad.any()


def test_numpy_results():
    """The reference itself: empty results with the input's lod; the CRF's loss is 0 per (empty)
    sequence, as Paddle's linear_chain_crf; an empty label aligns with no frame at probability 1."""
    for t in CASES.values():
        lod, n_seq = t.lod(), len(t.lod()[-1]) - 1
        layers = _layers(lod)
        h, c = layers["dynamic_lstm h_0 c_0"](lambda x, grad=True: x, np.asarray)
        assert h.lod() == lod and h.data.shape == (0, D) and c.data.shape == (0, D)
        assert layers["dynamic_gru"](lambda x, grad=True: x, np.asarray).data.shape == (0, D)
        assert layers["sequence_conv"](lambda x, grad=True: x, np.asarray).data.shape == (0, 4)
        np.testing.assert_array_equal(layers["linear_chain_crf"](lambda x, grad=True: x, np.asarray),
                                      np.zeros((n_seq, 1)))
        np.testing.assert_array_equal(layers["warpctc"](lambda x, grad=True: x, np.asarray), np.zeros((n_seq, 1)))
        path = layers["crf_decoding"](lambda x, grad=True: x, np.asarray)
        assert path.lod() == lod and path.data.shape == (0, 1) and path.data.dtype == np.int64


MODULES = {
    "Embedding": (lambda: N.Embedding(5, 3, padding_idx=0), lambda lod: (np.zeros((0, 1), np.int64),)),
    "FC": (lambda: N.FC(3, 4, act="relu"), lambda lod: (np.zeros((0, 3), np.float32),)),
    "SequenceConv": (lambda: N.SequenceConv(3, 4, 3, padding_trainable=True),
                     lambda lod: (np.zeros((0, 3), np.float32),)),
    "RowConv": (lambda: N.RowConv(3, 2), lambda lod: (np.zeros((0, 3), np.float32),)),
    "DynamicLSTM": (lambda: N.DynamicLSTM(2), lambda lod: (np.zeros((0, 8), np.float32),)),
    "DynamicGRU": (lambda: N.DynamicGRU(2, is_reverse=True), lambda lod: (np.zeros((0, 6), np.float32),)),
    "LinearChainCRF": (lambda: N.LinearChainCRF(3), lambda lod: (np.zeros((0, 3), np.float32),
                                                                 np.zeros((0, 1), np.int64))),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(MODULES))
def test_module_on_hollow_batch(case, name):
    """A module on a hollow batch: the empty result, and every Parameter a zero gradient of its shape
    (an optimizer step then sees what it sees for nn.Linear on 0 rows, not a missing gradient)."""
    make, inputs = MODULES[name]
    module = make()
    lod = CASES[case].lod()
    args = []
    for a in inputs(lod):
        data = torch.from_numpy(a)
        if data.is_floating_point():
            data.requires_grad_(True)
        args.append(lt.LoDTensor(data, lod))
    out = module(*args)
    outs = _tensors(out)
    if name == "LinearChainCRF":
        assert out.shape == (len(lod[-1]) - 1, 1) and not out.any()
    else:
        for o in outs:
            assert o.shape[0] == 0
        assert all(o.lod() == lod for o in (out if isinstance(out, tuple) else (out,)))
    sum(o.sum() for o in outs).backward()
    for pname, p in module.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape and not p.grad.any(), pname
    for a in args:
        if a.data.requires_grad:
            assert a.data.grad.shape == a.data.shape


def test_crf_decoding_module_on_hollow_batch():
    for t in CASES.values():
        path = N.CRFDecoding(3)(lt.LoDTensor(torch.zeros(0, 3), t.lod()))
        assert path.lod() == t.lod() and path.data.shape == (0, 1) and path.data.dtype == torch.int64


def _empty(width, lod=((0,),), dtype=np.float64):
    return lt.LoDTensor(np.zeros((0, width), dtype), [list(level) for level in lod])


@pytest.mark.parametrize("call, message", [
    (lambda: F.dynamic_lstm(_empty(5), np.zeros((2, 8)), np.zeros((1, 14))), "input width must be 4 \\* hidden"),
    (lambda: F.dynamic_lstm(_empty(8), np.zeros((2, 8)), np.zeros((1, 9))), "bias must have shape \\[1, 14\\]"),
    (lambda: F.dynamic_lstm(_empty(8), np.zeros((2, 8)), np.zeros((1, 14)), h_0=np.zeros((1, 2))),
     "h_0 must have shape \\[0, 2\\]"),
    (lambda: F.dynamic_lstm(_empty(8, ((0, 0, 0),)), np.zeros((2, 8)), np.zeros((1, 14)), c_0=np.zeros((1, 2))),
     "c_0 must have shape \\[2, 2\\]"),
    (lambda: F.dynamic_gru(_empty(6), np.zeros((3, 6))), "weight must have shape \\[2, 6\\], got \\[3, 6\\]"),
    (lambda: F.dynamic_gru(lt.LoDTensor(np.zeros((0, 2, 3)), [[0]]), np.zeros((1, 3))), "input must have rank 2"),
    (lambda: F.fc(_empty(3), np.zeros((4, 2))), "weight must have shape \\[3, \\*\\]"),
    (lambda: F.sequence_conv(_empty(3), np.zeros((8, 2))), "weight must have shape \\[9, \\*\\]"),
    (lambda: F.linear_chain_crf(_empty(3), _empty(1, dtype=np.int64), np.zeros((4, 3))),
     "transition must have shape \\[5, 3\\]"),
    (lambda: F.linear_chain_crf(_empty(3), lt.LoDTensor(np.zeros((1, 1), np.int64), [[0, 1]]), np.zeros((5, 3))),
     "label has 1 rows but input has 0"),
    (lambda: F.warpctc(_empty(3), _empty(1, ((0, 0),), np.int64)), "input has 0 sequences but label has 1"),
    (lambda: F.warpctc(_empty(3), _empty(1, dtype=np.int64), blank=3), "blank must be in \\[0, 3\\)"),
    (lambda: F.embedding(_empty(2, dtype=np.int64), np.zeros((5, 3))), "ids of shape \\[N, 1\\] or \\[N\\]"),
    (lambda: F.embedding(_empty(1, dtype=np.int64), np.zeros((5, 3)), padding_idx=5), "padding_idx 5 is out of range"),
    (lambda: N.DynamicLSTM(2)(lt.LoDTensor(torch.zeros(0, 6), [[0]])), "must have 4 \\* hidden_size = 8 columns"),
])
def test_wrong_arguments_on_an_empty_batch_are_named(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()
