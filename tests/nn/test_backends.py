"""Every functional layer of ``lodtensor.nn`` (and beam search) on every backend: NumPy, NumPy
without its compiled kernels, torch, torch's device-generic code (what CUDA runs), CuPy (on a
GPU, or emulated on the CPU with ``LT_CUPY_EMULATED=1``) and torch CUDA give NumPy's numbers,
and their results stay on the input's backend and device."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor import sequence as S
from lodtensor.fluid import layers as L
from lodtensor.nn import functional as F

LOD = [[0, 3, 3, 5, 9]]  # an empty sequence; lengths 3, 0, 2, 4
ROWS = 9


def _rand(seed, *shape):
    return np.random.RandomState(seed).uniform(-0.8, 0.8, size=shape)


def _ids(seed, high, rows=ROWS):
    return np.random.RandomState(seed).randint(0, high, size=(rows, 1)).astype(np.int64)


def _lstm(peep, reverse, states):
    def run(t, a):
        d = 3
        h0 = a(_rand(13, 4, d)) if "h" in states else None
        c0 = a(_rand(14, 4, d)) if "c" in states else None
        bias = a(_rand(12, 1, (7 if peep else 4) * d))
        return F.dynamic_lstm(t(_rand(10, ROWS, 4 * d)), a(_rand(11, d, 4 * d)), bias, h0, c0, use_peepholes=peep,
                              is_reverse=reverse)
    return run


def _gru(origin, with_h0, acts=("sigmoid", "tanh")):
    def run(t, a):
        d = 3
        return F.dynamic_gru(t(_rand(20, ROWS, 3 * d)), a(_rand(21, d, 3 * d)), a(_rand(22, 1, 3 * d)),
                             a(_rand(23, 4, d)) if with_h0 else None, origin_mode=origin,
                             gate_activation=acts[0], candidate_activation=acts[1])
    return run


def _ctc(t, a):
    labels = lt.LoDTensor(a(np.array([[1], [3], [2], [1], [1]])), [[0, 2, 2, 3, 5]])
    return F.warpctc(t(_rand(30, ROWS, 4)), labels, blank=0)


# name -> layer(t, a): ``t(array)`` makes a LoDTensor of LOD on the backend, ``a(array)`` an array
CASES = {
    "embedding": lambda t, a: F.embedding(lt.LoDTensor(a(_ids(1, 6)), LOD), a(_rand(2, 6, 3)), padding_idx=-1),
    "fc": lambda t, a: F.fc(t(_rand(3, ROWS, 5)), a(_rand(4, 5, 2)), a(_rand(5, 2)), act="softmax"),
    "fc_list": lambda t, a: F.fc([t(_rand(3, ROWS, 5)), t(_rand(6, ROWS, 2))], [a(_rand(4, 5, 2)), a(_rand(7, 2, 2))],
                                 act="tanh"),
    "sequence_conv": lambda t, a: F.sequence_conv(t(_rand(8, ROWS, 2)), a(_rand(9, 6, 3)), a(_rand(10, 3)), act="relu"),
    "sequence_conv_padding": lambda t, a: F.sequence_conv(t(_rand(8, ROWS, 2)), a(_rand(9, 8, 3)), filter_size=4,
                                                          padding_start=-2, padding_trainable=True,
                                                          padding_data=a(_rand(11, 3, 2))),
    "sequence_conv_pool": lambda t, a: F.sequence_conv_pool(t(_rand(8, ROWS, 2)), a(_rand(9, 6, 3)), a(_rand(10, 3)),
                                                            3),
    "row_conv": lambda t, a: F.row_conv(t(_rand(12, ROWS, 3)), a(_rand(13, 3, 3)), act="sigmoid"),
    "lstm": _lstm(True, False, "hc"),
    "lstm_reverse_nopeep": _lstm(False, True, ""),
    "lstm_h0": _lstm(True, True, "h"),
    "gru": _gru(False, True),
    "gru_origin": _gru(True, False, ("relu", "softsign")),
    "crf": lambda t, a: F.linear_chain_crf(t(_rand(14, ROWS, 3)), lt.LoDTensor(a(_ids(15, 3)), LOD),
                                           a(_rand(16, 5, 3))),
    "crf_decoding": lambda t, a: F.crf_decoding(t(_rand(17, ROWS, 3) * 3), a(_rand(18, 5, 3) * 2)),
    "crf_decoding_label": lambda t, a: F.crf_decoding(t(_rand(17, ROWS, 3) * 3), a(_rand(18, 5, 3) * 2),
                                                      label=lt.LoDTensor(a(_ids(19, 3)), LOD)),
    "warpctc": _ctc,
    # the fluid 1.x calls around the layers
    "fluid_cross_entropy": lambda t, a: L.cross_entropy(t(np.abs(_rand(24, ROWS, 4)) + 0.1),
                                                        lt.LoDTensor(a(np.array([[0], [3], [-100], [1], [2], [0],
                                                                                 [-100], [3], [1]])), LOD)),
    "fluid_cross_entropy_soft": lambda t, a: L.cross_entropy(t(np.abs(_rand(24, ROWS, 4)) + 0.1),
                                                             a(np.abs(_rand(25, ROWS, 4))), soft_label=True),
    "fluid_accuracy": lambda t, a: L.accuracy(a(np.round(_rand(26, ROWS, 4), 1)), a(_ids(27, 4)), k=2),
    "fluid_sums_mean": lambda t, a: L.mean(L.sums([t(_rand(28, ROWS, 2)), t(_rand(29, ROWS, 2))])),
}


def _arrays(out):
    if isinstance(out, lt.LoDTensor):
        return [out.data], [out.lod()]
    if isinstance(out, (tuple, list)):
        found = [_arrays(o) for o in out]
        return [a for arrs, _ in found for a in arrs], [lod for _, lods in found for lod in lods]
    return [out], [None]


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_on_every_backend_equals_numpy(backend, name):
    layer = CASES[name]
    want, want_lods = _arrays(layer(lambda x: lt.LoDTensor(x, LOD), lambda x: x))
    got, got_lods = _arrays(layer(lambda x: lt.LoDTensor(backend.array(x), LOD), backend.array))
    assert got_lods == want_lods
    for g, w in zip(got, want):
        assert lt.backend_of(g) is backend.be, (name, type(g))
        assert backend.device_of(g).split(":")[0] == backend.device, name
        np.testing.assert_allclose(backend.numpy(g), w, rtol=1e-9, atol=1e-10, err_msg=name)


def test_beam_search_on_every_backend_equals_numpy(backend):
    lod = [[0, 2, 3], [0, 1, 2, 3]]  # two sources: the first with two prefixes
    pre_ids = np.array([[1], [2], [3]])
    pre_scores = np.array([[0.5], [0.4], [0.9]], dtype=np.float32)
    ids = np.array([[3, 4], [5, 6], [0, 7]])
    scores = np.array([[0.9, 0.2], [0.7, 0.8], [0.3, 0.95]], dtype=np.float32)

    def run(a):
        sel_ids, sel_scores, parent = S.beam_search(lt.LoDTensor(a(pre_ids), lod), lt.LoDTensor(a(pre_scores), lod),
                                                    lt.LoDTensor(a(ids), lod), lt.LoDTensor(a(scores), lod),
                                                    beam_size=2, end_id=0, return_parent_idx=True)
        out_ids, out_scores = S.beam_search_decode([sel_ids], [sel_scores], beam_size=2, end_id=0)
        return [sel_ids, sel_scores, out_ids, out_scores], parent

    want, want_parent = run(lambda x: x)
    got, got_parent = run(backend.array)
    for g, w in zip(got, want):
        assert g.lod() == w.lod()
        assert lt.backend_of(g.data) is backend.be
        np.testing.assert_allclose(backend.numpy(g.data), w.data)
    np.testing.assert_array_equal(backend.numpy(got_parent), want_parent)
