"""Third differential pass over the sequence ops against real PaddlePaddle 2.6.2: the corners the
first two (test_paddle_sequence_ops.py, test_paddle_sequence_hunt.py, test_paddle_decode_ops.py) leave
out. Every lodtensor result is also computed on the torch backend and must equal the NumPy one.

- **Signatures**: every Paddle 2.6 sequence function's parameters, in order, begin ours
  (``sequence_softmax`` lacked ``name``).
- **Dtypes**: every dtype Paddle's op takes (float32/64, int32/64) gives the same values and dtype.
- **3-level y** in ``sequence_expand`` at every ``ref_level``, with ``x`` with and without a lod and
  with empty sequences; 2-level pooling with ``is_test`` and ``pad_value`` on rows (N,), (N,1), (N,2,3).
- **lod_reset / lod_append** with a 2-level ``y``, ``y`` data beside ``target_lod``.
- **sequence_mask of a 0-d length** (Paddle: one mask row; lodtensor raised).
- **Decoding**: ``edit_distance`` with all-empty hypotheses / references / both and ignored tokens
  that empty a sequence, ``sequence_erase`` on int32 and 2-level ids, ``ctc_greedy_decoder`` with ties
  and empty sequences, ``beam_search`` with a beam wider than the candidates and float64 scores
  (which Paddle's kernel cannot run; lodtensor keeps their precision).
- **sequence_conv** windows wholly outside the sequences (``padding_start`` 5 and -7).
- **Gradients** not yet compared: ``sequence_reshape`` widening, ``lod_reset`` with ``y``,
  ``sequence_expand_as`` of an ``x`` with a lod, ``sequence_expand`` by a 3-level ``y``, a 3-input
  ``sequence_concat``, ``sequence_slice`` to zero rows.
"""

import inspect

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
torch = pytest.importorskip("torch")

import test_paddle_sequence_hunt as _hunt2  # noqa: E402
from _raw import edit_distance_program  # noqa: E402
from _raw import run as run_raw  # noqa: E402
from _static import OPS, attempt, observe, run_paddle  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor import sequence as S  # noqa: E402
from lodtensor.fluid import layers as L  # noqa: E402
from lodtensor.nn import functional as NF  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def T(values, lod=None, dtype="float32"):
    return lt.LoDTensor(np.asarray(values).astype(dtype), lod)


def _on_torch(value):
    if isinstance(value, lt.LoDTensor):
        return lt.LoDTensor(torch.from_numpy(np.ascontiguousarray(value.numpy())), value.lod())
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    return value


def _torch_outs(result):
    outs = []
    for part in result if isinstance(result, tuple) else (result,):
        data = part.data if isinstance(part, lt.LoDTensor) else part
        outs.append((data.detach().numpy(), part.lod() if isinstance(part, lt.LoDTensor) else []))
    return outs


def agree(op, inputs, attrs=None, fixed=(), listed=False):
    """Paddle's ``op`` and lodtensor's (NumPy, then torch) on the same inputs: same data, lod, dtype."""
    attrs = dict(attrs or {})
    ok_p, theirs = run_paddle(op, inputs, attrs, fixed=fixed, listed=listed)
    assert ok_p, f"Paddle raises: {theirs}"
    args = [list(inputs.values())] if listed else list(inputs.values())
    mine = observe(getattr(L, op)(*args, **attrs))
    targs = [[_on_torch(a) for a in args[0]]] if listed else [_on_torch(a) for a in args]
    on_torch = _torch_outs(getattr(L, op)(*targs, **attrs))
    assert len(theirs) == len(mine) == len(on_torch)
    for p, o, (t, t_lod) in zip(theirs, mine, on_torch):
        assert p.lod == o.lod == t_lod, (p.lod, o.lod, t_lod)
        assert p.data.shape == o.data.shape == t.shape and p.data.dtype == o.data.dtype == t.dtype, (p, o)
        tol = 1e-6 if p.data.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(o.data, p.data, rtol=tol, atol=tol)
        np.testing.assert_array_equal(t, o.data)


# ------------------------------------------------------------------------------------------
# Signatures and dtypes
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [op for op in OPS if op not in ("lod_reset", "lod_append")])
def test_paddle_parameters_begin_ours(op):
    """Paddle 2.6's parameters, in order and with the same defaults, start our signature; ours may add
    keyword-only ones (``level``). ``sequence_softmax(x, name=...)`` raised TypeError."""
    theirs = list(inspect.signature(OPS[op]).parameters.values())
    ours = list(inspect.signature(getattr(S, op)).parameters.values())
    assert [(p.name, p.default) for p in ours[: len(theirs)]] == [(p.name, p.default) for p in theirs]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in ours[len(theirs):])


def _dtype_cases(dtype):
    x = T(np.arange(10).reshape(5, 2) % 7 - 3, [[0, 2, 2, 5]], dtype)
    col = T(np.arange(5).reshape(5, 1) % 3, [[0, 0, 2, 5]], dtype)
    cases = [
        ("sequence_reverse", {"x": x}, {}),
        ("sequence_expand", {"x": x, "y": T(np.zeros((3, 1)), [[0, 1, 3, 3]])}, {}),
        ("sequence_expand", {"x": T(np.ones((3, 2)), None, dtype), "y": x}, {}),
        ("sequence_expand_as", {"x": T(np.arange(6).reshape(3, 2), None, dtype), "y": x}, {}),
        ("sequence_pad", {"x": x, "pad_value": np.array([4], dtype)}, {"maxlen": 4}),
        ("sequence_unpad", {"x": T(np.arange(24).reshape(3, 4, 2), None, dtype), "length": T([2, 0, 3], None,
                                                                                              "int64")}, {}),
        ("sequence_slice", {"input": x, "offset": T([[1], [0], [0]], None, "int64"),
                            "length": T([[1], [0], [3]], None, "int64")}, {}),
        ("sequence_reshape", {"input": T(np.arange(12).reshape(6, 2), [[0, 0, 2, 6]], dtype)}, {"new_dim": 4}),
        ("sequence_scatter", {"input": T(np.ones((3, 3)), None, dtype), "index": T([[0], [1], [2], [0], [1]],
                                                                                    [[0, 0, 2, 5]], "int64"),
                              "updates": col}, {}),
        ("lod_reset", {"x": x}, {"target_lod": [0, 5, 5]}),
    ]
    if dtype in ("float32", "float64"):
        for pool_type in ["sum", "average", "sqrt", "max", "first", "last"]:
            cases.append(("sequence_pool", {"input": x}, {"pool_type": pool_type, "pad_value": 1.5}))
        cases.append(("sequence_softmax", {"input": col}, {}))
    if dtype in ("float32", "float64", "int64"):
        cases.append(("sequence_concat", {"a": x, "b": T(np.ones((3, 2)), [[0, 3, 3, 3]], dtype)}, {}))
    if dtype in ("int32", "int64"):
        cases.append(("sequence_enumerate", {"input": col}, {"win_size": 3, "pad_value": 9}))
        cases.append(("sequence_mask", {"x": np.array([[3, 0], [1, 5]], dtype)}, {"maxlen": 2, "dtype": "float32"}))
    return cases


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_every_dtype_paddle_takes(dtype):
    for op, inputs, attrs in _dtype_cases(dtype):
        agree(op, inputs, attrs, fixed=("pad_value",), listed=op == "sequence_concat")


# ------------------------------------------------------------------------------------------
# Multi-level lods
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("y_lod", [[[0, 1, 2], [0, 2, 3], [0, 1, 3, 6]], [[0, 0, 2], [0, 0, 3], [0, 0, 0, 6]]],
                         ids=["full", "empties"])
@pytest.mark.parametrize("ref_level", [-1, 0, 1, 2])
def test_expand_by_a_three_level_y(y_lod, ref_level):
    y = T(np.zeros((6, 1)), y_lod)
    n = len(y_lod[ref_level]) - 1
    agree("sequence_expand", {"x": T(np.arange(2 * n).reshape(n, 2), None, "float64"), "y": y},
          {"ref_level": ref_level})
    agree("sequence_expand", {"x": T(np.arange(2 * n).reshape(2 * n, 1), [list(range(0, 2 * n + 1, 2))]), "y": y},
          {"ref_level": ref_level})
    agree("sequence_expand", {"x": T(np.arange(3).reshape(3, 1), [[0] * n + [3]], "int64"), "y": y},
          {"ref_level": ref_level})


@pytest.mark.parametrize("row", [(), (1,), (2, 3)], ids=str)
@pytest.mark.parametrize("lod", [[[0, 0, 2, 3], [0, 1, 3, 3]], [[0, 2, 3], [0, 1, 3, 3]]], ids=str)
def test_two_level_pooling_with_is_test_and_pad_value(lod, row):
    x = T(np.arange(3 * int(np.prod(row))).reshape((3, *row)) * 0.5 - 1, lod, "float64")
    for pool_type in ["sum", "average", "sqrt", "first", "last"] + (["max"] if row else []):
        agree("sequence_pool", {"input": x}, {"pool_type": pool_type, "pad_value": 7.0, "is_test": True})
    agree("sequence_first_step", {"input": x})
    agree("sequence_last_step", {"input": x})
    if len(row) < 2:
        agree("sequence_softmax", {"input": x})


@pytest.mark.parametrize("x_lod", [[[0, 2, 6]], [[0, 1, 2], [0, 2, 6]], None], ids=["1level", "2level", "nolod"])
def test_lod_reset_and_append_corners(x_lod):
    x = T(np.arange(12).reshape(6, 2), x_lod)
    agree("lod_reset", {"x": x, "y": T(np.zeros((6, 1)), [[0, 1, 3], [0, 0, 4, 6]])})
    agree("lod_reset", {"x": x, "y": T([0, 6], None, "int32")}, {"target_lod": [0, 1, 6]})  # y wins
    agree("lod_reset", {"x": x, "y": T([[0], [3], [6]], None, "int32")})
    agree("lod_reset", {"x": x}, {"target_lod": [0, 6, 6]})
    if x_lod is None:
        agree("lod_append", {"x": x, "level": T([0, 1, 1, 6], None, "int32")})
        agree("lod_append", {"x": x}, {"level": [0, 0, 6]})
    else:
        agree("lod_append", {"x": x}, {"level": list(range(7))})


# ------------------------------------------------------------------------------------------
# sequence_mask of a single length (fixed)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("kwargs", [{"maxlen": 4}, {}, {"maxlen": 2, "dtype": "bool"}, {"maxlen": 3,
                                                                                        "dtype": "float32"}],
                         ids=str)
@pytest.mark.parametrize("length", [3, 0])
def test_mask_of_a_zero_d_length(length, kwargs, dtype):
    """Paddle masks a 0-d length as one row of shape [maxlen]; lodtensor raised ValueError."""
    if length == 0 and not kwargs:
        kwargs = {"maxlen": 2}
    with paddle.base.dygraph.guard():
        theirs = paddle.nn.functional.sequence_mask(paddle.to_tensor(np.array(length, dtype)), **kwargs).numpy()
    for x in (np.array(length, dtype), torch.tensor(length, dtype=getattr(torch, dtype))):
        mine = np.asarray(L.sequence_mask(x, **kwargs))
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
        np.testing.assert_array_equal(mine, theirs)


# ------------------------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------------------------
def ids(values, lod, dtype="int64"):
    return lt.LoDTensor(np.asarray(values, dtype).reshape(-1, 1), lod)


def _paddle_edit(h, r, normalized, ignored):
    (dist, _), (num, _) = run_raw(edit_distance_program(normalized, ignored), {"h": h, "r": r})
    return dist, num


EDIT_CORNERS = [
    ("hyp-all-empty", ids([], [[0, 0, 0]]), ids([1, 2], [[0, 1, 2]])),
    ("ref-all-empty", ids([1, 2], [[0, 1, 2]]), ids([], [[0, 0, 0]])),
    ("both-empty", ids([], [[0, 0]]), ids([], [[0, 0]])),
    ("mixed", ids([1, 2, 2, 1, 3], [[0, 0, 2, 5]]), ids([2, 1, 3, 3], [[0, 1, 1, 4]])),
]


@pytest.mark.parametrize("ignored", [None, [7], [1, 2]], ids=str)
@pytest.mark.parametrize("case, h, r", EDIT_CORNERS, ids=[c[0] for c in EDIT_CORNERS])
def test_edit_distance_empty_corners(case, h, r, ignored):
    theirs = _paddle_edit(h, r, False, ignored)
    mine = L.edit_distance(h, r, normalized=False, ignored_tokens=ignored)
    on_torch = L.edit_distance(_on_torch(h), _on_torch(r), normalized=False, ignored_tokens=ignored)
    for p, o, t in zip(theirs, mine, on_torch):
        assert p.dtype == o.dtype and p.shape == o.shape
        np.testing.assert_array_equal(o, p)
        np.testing.assert_array_equal(t.numpy(), o)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("values, lod, tokens", [
    ([1, 2, 3, 4, 5], [[0, 0, 2, 5]], [2]),
    ([1, 2, 3, 4, 5], [[0, 2, 5, 5]], []),
    ([1, 1, 1], [[0, 1, 3]], [1]),
    ([1, 2, 3, 4, 5, 6], [[0, 0, 3], [0, 0, 3, 6]], [3, 4]),
    ([1, 2, 3], [[0, 3]], [9, 2, 2]),
])
def test_sequence_erase_int32_and_empties(values, lod, tokens, dtype):
    x = ids(values, lod, dtype)
    (data, out_lod), = run_raw(lambda v, op: op("sequence_erase", {"X": v["x"]}, {"Out": dtype},
                                                {"tokens": tokens})["Out"], {"x": x})
    for mine in (L.sequence_erase(x, tokens), L.sequence_erase(_on_torch(x), tokens)):
        got = mine.data.numpy() if isinstance(mine.data, torch.Tensor) else mine.data
        assert got.dtype == data.dtype and mine.lod() == out_lod
        np.testing.assert_array_equal(got, data)


@pytest.mark.parametrize("lod, blank", [([[0, 4]], 0), ([[0, 0, 4]], 0), ([[0, 2, 2, 4]], 0), ([[0, 4, 4]], 2),
                                        ([[0, 1, 4]], 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ctc_greedy_decoder_ties_and_empty_sequences(lod, blank, dtype):
    """Rows with tied maxima (the first class wins in both) and empty sequences anywhere."""
    p = T([[0.5, 0.5, 0.0], [0.2, 0.4, 0.4], [1.0, 1.0, 1.0], [0.0, 0.3, 0.3]], lod, dtype)

    def build(v, op):
        top = op("top_k", {"X": v["p"]}, {"Out": dtype, "Indices": "int64"}, {"k": 1})
        return op("ctc_align", {"Input": top["Indices"]}, {"Output": "int64"},
                  {"blank": blank, "merge_repeated": True})["Output"]

    (data, out_lod), = run_raw(build, {"p": p})
    for mine in (L.ctc_greedy_decoder(p, blank), L.ctc_greedy_decoder(_on_torch(p), blank)):
        got = mine.data.numpy() if isinstance(mine.data, torch.Tensor) else mine.data
        np.testing.assert_array_equal(got, data)
        assert mine.lod() == out_lod


def _beam_feeds(dtype, beam_lod, ended, seed=0, width=4):
    rng = np.random.RandomState(seed)
    rows = beam_lod[-1][-1]
    pre_ids = rng.randint(1, 9, size=(rows, 1)).astype("int64")
    pre_ids[list(ended)] = 0
    return {"pi": lt.LoDTensor(pre_ids, beam_lod), "ps": lt.LoDTensor(rng.rand(rows, 1).astype(dtype), beam_lod),
            "ids": lt.LoDTensor(rng.randint(0, 9, size=(rows, width)).astype("int64"), beam_lod),
            "sc": lt.LoDTensor(rng.rand(rows, width).astype(dtype), beam_lod)}


def _paddle_beam(f, dtype, beam_size, accumulated, level=0):
    def build(v, op):
        out = op("beam_search", {"pre_ids": v["pi"], "pre_scores": v["ps"], "scores": v["sc"], "ids": v["ids"]},
                 {"selected_ids": "int64", "selected_scores": dtype, "parent_idx": "int32"},
                 {"level": level, "beam_size": beam_size, "end_id": 0, "is_accumulated": accumulated})
        return [out["selected_ids"], out["selected_scores"], out["parent_idx"]]

    return run_raw(build, f)


@pytest.mark.parametrize("accumulated", [True, False])
@pytest.mark.parametrize("beam_size", [4, 9])
@pytest.mark.parametrize("beam_lod, ended", [([[0, 2, 3], [0, 1, 2, 3]], (1,)), ([[0, 0, 3], [0, 1, 2, 3]], (1,)),
                                             ([[0, 2, 3], [0, 2, 2, 3]], ())], ids=str)
def test_beam_search_beam_wider_than_the_candidates(beam_lod, ended, beam_size, accumulated):
    f = _beam_feeds("float32", beam_lod, ended)
    (ids_p, lod_p), (scores_p, _), (parent_p, _) = _paddle_beam(f, "float32", beam_size, accumulated)
    for conv in (lambda v: v, _on_torch):
        sel_ids, sel_scores, parent = L.beam_search(conv(f["pi"]), conv(f["ps"]), conv(f["ids"]), conv(f["sc"]),
                                                    beam_size, 0, is_accumulated=accumulated, return_parent_idx=True)
        assert sel_ids.lod() == lod_p and sel_scores.numpy().dtype == scores_p.dtype
        np.testing.assert_array_equal(sel_ids.numpy(), ids_p)
        np.testing.assert_allclose(sel_scores.numpy(), scores_p, rtol=1e-6)  # log(): an ulp apart at most
        np.testing.assert_array_equal(np.asarray(parent), parent_p)


def test_beam_search_level_one_of_three():
    f = _beam_feeds("float32", [[0, 1, 2], [0, 2, 3], [0, 1, 2, 3]], ())
    (ids_p, lod_p), (scores_p, _), _ = _paddle_beam(f, "float32", 2, True, level=1)
    sel_ids, sel_scores = L.beam_search(f["pi"], f["ps"], f["ids"], f["sc"], 2, 0, level=1)
    assert sel_ids.lod() == lod_p
    np.testing.assert_array_equal(sel_ids.numpy(), ids_p)
    np.testing.assert_array_equal(sel_scores.numpy(), scores_p)


def test_difference_beam_search_float64_scores():
    """Paddle 2.6.2's beam_search cannot run float64 scores (its kernel reads them as float32 and
    raises); lodtensor selects with them as given, float64 in and out. It used to round them to
    float32 first (selected 0.30000001192092896 for 0.3)."""
    f = _beam_feeds("float64", [[0, 2, 3], [0, 1, 2, 3]], (1,))
    with pytest.raises(Exception, match="float32"):  # noqa: PT011 - whatever Paddle raises
        _paddle_beam(f, "float64", 2, True)
    sel_ids, sel_scores = L.beam_search(f["pi"], f["ps"], f["ids"], f["sc"], 2, 0)
    assert sel_scores.numpy().dtype == np.float64
    given = set(f["sc"].numpy().ravel().tolist()) | set(f["ps"].numpy().ravel().tolist())
    assert set(sel_scores.numpy().ravel().tolist()) <= given
    f32 = {k: v.with_data(v.numpy().astype("float32")) if v.numpy().dtype == np.float64 else v for k, v in f.items()}
    ids32, _ = L.beam_search(f32["pi"], f32["ps"], f32["ids"], f32["sc"], 2, 0)
    np.testing.assert_array_equal(sel_ids.numpy(), ids32.numpy())  # no near ties here: the same choice


# ------------------------------------------------------------------------------------------
# sequence_conv windows outside the sequences
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lod", [[[0, 2, 5]], [[0, 0, 5]], [[0, 1, 1, 5]]], ids=str)
@pytest.mark.parametrize("size, start", [(3, 5), (3, -7), (2, -3), (1, 3), (6, 0), (2, 4)])
def test_sequence_conv_windows_outside(lod, size, start):
    rng = np.random.RandomState(size * 10 + start + 7)
    x = T(rng.rand(5, 2), lod)
    w = rng.rand(2 * size, 3).astype("float32")

    def build(v, op):
        return op("sequence_conv", {"X": v["x"], "Filter": v["w"]}, {"Out": "float32"},
                  {"contextLength": size, "contextStart": start, "contextStride": 1, "paddingTrainable": False})["Out"]

    (theirs, _), = run_raw(build, {"x": x}, {"w": w})
    mine = NF.sequence_conv(x, w, filter_size=size, padding_start=start)
    np.testing.assert_allclose(mine.data, theirs, rtol=1e-6, atol=1e-6)
    on_torch = NF.sequence_conv(_on_torch(x), torch.from_numpy(w), filter_size=size, padding_start=start)
    np.testing.assert_allclose(on_torch.data.numpy(), mine.data, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------
# Gradients not compared before (Paddle's backward operators against torch autograd)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_more_gradients(dtype):
    X = _hunt2.X
    check = _hunt2.check_grads
    for lod in ([[0, 0, 2, 6]], [[0, 2, 6, 6]]):
        for new_dim in (1, 4):
            check("sequence_reshape", lambda input, d=new_dim: S.sequence_reshape(input, d),
                  {"input": X(lod, (2,), dtype)}, {"new_dim": new_dim}, ["input"])
    check("lod_reset", S.lod_reset, {"x": X([[0, 2, 6]], (2,), dtype), "y": X([[0, 1, 3], [0, 3, 3, 6]], (1,), dtype)},
          {}, ["x"])
    check("sequence_expand_as", S.sequence_expand_as,
          {"x": X([[0, 1, 3]], (2,), dtype), "y": X([[0, 0, 2, 6]], (1,), dtype)}, {}, ["x"])
    y3 = X([[0, 1, 2], [0, 2, 3], [0, 1, 3, 6]], (1,), dtype)
    check("sequence_expand", lambda x, y: S.sequence_expand(x, y, ref_level=2),
          {"x": _hunt2.T(np.ones((3, 2)), None, dtype), "y": y3}, {"ref_level": 2}, ["x"])
    check("sequence_expand", lambda x, y: S.sequence_expand(x, y, ref_level=1),
          {"x": X([[0, 1, 3]], (2,), dtype), "y": y3}, {"ref_level": 1}, ["x"])
    check("sequence_concat", lambda a, b, c: S.sequence_concat([a, b, c]),
          {"a": X([[0, 0, 2, 3]], (2,), dtype), "b": X([[0, 1, 1, 1]], (2,), dtype, 1),
           "c": X([[0, 0, 0, 2]], (2,), dtype, 2)}, {}, ["a", "b", "c"], listed=True)
    check("sequence_slice", S.sequence_slice,
          {"input": X([[0, 2, 5]], (2,), dtype), "offset": _hunt2.T([[2], [1]], None, "int64"),
           "length": _hunt2.T([[0], [2]], None, "int64")}, {}, ["input"])


def test_sequence_conv_bias_of_the_wrong_size_is_named():
    """lodtensor's own argument check (Paddle's layer makes the bias itself): a bias that is not
    num_filters long failed in a reshape without naming it."""
    x = T(np.arange(10.0).reshape(5, 2), [[0, 2, 5]])
    ok, err = attempt(NF.sequence_conv, x, np.ones((6, 3), "float32"), np.ones(4, "float32"))
    assert not ok and isinstance(err, ValueError) and "bias must have num_filters=3 elements" in str(err)
