"""Regression tests for bugs found in lodtensor.nn: integer input refused with a clear error (a
floating weight was silently cast to the input's integer dtype), constructor arguments of the
modules checked, errors naming the argument at fault, warpctc of a batch without rows on torch,
embedding's padding rows zero whatever the weight holds."""

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.nn import functional as F

torch = pytest.importorskip("torch")

LOD = [[0, 2, 3]]


def _ints(width):
    return lt.LoDTensor(np.array([[1] * width, [0] * width, [1] * width]), LOD)


INT_CASES = {
    "fc": (lambda x: F.fc(x, np.full((2, 1), 0.5)), 2),
    "sequence_conv": (lambda x: F.sequence_conv(x, np.full((6, 1), 0.5)), 2),
    "row_conv": (lambda x: F.row_conv(x, np.full((2, 2), 0.5)), 2),
    "dynamic_lstm": (lambda x: F.dynamic_lstm(x, np.zeros((1, 4)), np.full((1, 7), 0.5)), 4),
    "dynamic_gru": (lambda x: F.dynamic_gru(x, np.zeros((1, 3))), 3),
    "linear_chain_crf": (lambda x: F.linear_chain_crf(x, lt.LoDTensor(np.zeros((3, 1), int), LOD),
                                                       np.full((4, 2), 0.7)), 2),
    "crf_decoding": (lambda x: F.crf_decoding(x, np.full((4, 2), 0.7)), 2),
    "warpctc": (lambda x: F.warpctc(x, lt.LoDTensor(np.ones((2, 1), int), [[0, 1, 2]])), 2),
}


@pytest.mark.parametrize("name", sorted(INT_CASES))
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_integer_input_is_refused_naming_the_dtype(name, library):
    """Before: fc/sequence_conv/row_conv/crf silently cast the float weight to int (0.5 -> 0) and
    gave wrong numbers; the recurrences crashed inside a ufunc."""
    fn, width = INT_CASES[name]
    x = _ints(width)
    if library == "torch":
        x = x.with_data(torch.tensor(x.data))
    before = x.data.copy() if library == "numpy" else x.data.clone()
    with pytest.raises(TypeError, match=rf"{name}\(\): input must have a floating dtype .*int64"):
        fn(x)
    assert (np.asarray(x.data) == np.asarray(before)).all() and x.lod() == LOD


def test_integer_input_in_a_list_for_fc_is_refused():
    x = lt.LoDTensor(np.ones((3, 2)), LOD)
    with pytest.raises(TypeError, match=r"fc\(\): input\[1\] must have a floating dtype"):
        F.fc([x, _ints(2)], [np.ones((2, 1)), np.ones((2, 1))])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floating_inputs_still_run(dtype):
    x = lt.LoDTensor(np.ones((3, 4), dtype), LOD)
    h, c = F.dynamic_lstm(x, np.zeros((1, 4)), np.ones((1, 7)))
    assert h.data.dtype == np.dtype(dtype) and c.data.shape == (3, 1)


@pytest.mark.parametrize("make, message", [
    (lambda nn: nn.DynamicLSTM(0), r"DynamicLSTM\(\): hidden_size must be >= 1, got 0"),
    (lambda nn: nn.DynamicLSTM(-3), r"DynamicLSTM\(\): hidden_size must be >= 1, got -3"),
    (lambda nn: nn.DynamicGRU(0), r"DynamicGRU\(\): hidden_size must be >= 1, got 0"),
    (lambda nn: nn.LinearChainCRF(0), r"LinearChainCRF\(\): num_tags must be >= 1, got 0"),
    (lambda nn: nn.CRFDecoding(0), r"LinearChainCRF\(\): num_tags must be >= 1, got 0"),
    (lambda nn: nn.RowConv(2, -1), r"RowConv\(\): future_context_size must be >= 0, got -1"),
])
def test_module_sizes_are_checked(make, message):
    """Before: ZeroDivisionError / 'math domain error' from the Xavier bound."""
    from lodtensor import nn

    with pytest.raises(ValueError, match=message):
        make(nn)


@pytest.mark.parametrize("make, message", [
    (lambda nn: nn.DynamicLSTM(2.5), r"DynamicLSTM\(\): hidden_size must be an integer, got float 2.5"),
    (lambda nn: nn.DynamicGRU("4"), r"DynamicGRU\(\): hidden_size must be an integer, got str '4'"),
    (lambda nn: nn.CRFDecoding("x"), r"CRFDecoding\(\): crf_or_num_tags must be a LinearChainCRF"),
])
def test_module_sizes_must_be_integers(make, message):
    """Before: DynamicLSTM(2.5) silently made hidden size 2; CRFDecoding('x') gave int()'s message."""
    from lodtensor import nn

    with pytest.raises(TypeError, match=message):
        make(nn)


def test_module_errors_name_h_0_c_0_and_label():
    """Before: a bad h_0 was reported as 'input must be a LoDTensor or ...'."""
    from lodtensor import nn

    x = lt.LoDTensor(np.zeros((3, 8), "float32"), LOD)
    with pytest.raises(TypeError, match=r"DynamicLSTM.forward\(\): h_0 must be"):
        nn.DynamicLSTM(2)(x, h_0=[[0.0, 0.0], [0.0, 0.0]])
    with pytest.raises(TypeError, match=r"DynamicLSTM.forward\(\): c_0 must be"):
        nn.DynamicLSTM(2)(x, c_0="zeros")
    with pytest.raises(TypeError, match=r"DynamicGRU.forward\(\): h_0 must be"):
        nn.DynamicGRU(2)(lt.LoDTensor(np.zeros((3, 6), "float32"), LOD), h_0=[0.0])
    with pytest.raises(TypeError, match=r"LinearChainCRF.forward\(\): label must be"):
        nn.LinearChainCRF(2)(lt.LoDTensor(np.zeros((3, 2), "float32"), LOD), [[0], [1], [0]])


@pytest.mark.parametrize("label_lod, expected", [([[0, 0, 0]], [0.0, 0.0]), ([[0, 0, 1]], [0.0, np.inf])])
def test_warpctc_without_any_row_on_torch(label_lod, expected):
    """Before: torch raised 'cannot reshape tensor of 0 elements' (then 'log_probs must not be empty');
    NumPy gave 0 (inf where a label must be emitted from no input)."""
    labels = lt.LoDTensor(np.ones((label_lod[0][-1], 1), int), label_lod)
    x = torch.zeros((0, 4), dtype=torch.float64, requires_grad=True)
    loss = F.warpctc(lt.LoDTensor(x, [[0, 0, 0]]), labels, norm_by_times=True)
    ref = F.warpctc(lt.LoDTensor(np.zeros((0, 4)), [[0, 0, 0]]), labels)
    assert loss.detach().numpy().ravel().tolist() == expected == ref.ravel().tolist()
    loss[torch.isfinite(loss)].sum().backward()
    assert x.grad.shape == (0, 4)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_embedding_padding_rows_are_zero_even_where_the_weight_is_not_finite(library):
    """Before: the padding rows were the weight's row times 0, so NaN/inf stayed NaN."""
    w = np.ones((3, 2))
    w[1] = [np.nan, np.inf]
    ids = lt.LoDTensor(np.array([[0], [1], [2], [1]]), [[0, 4]])
    if library == "torch":
        w = torch.tensor(w, requires_grad=True)
    out = F.embedding(ids, w, padding_idx=-2).data
    got = out.detach().numpy() if library == "torch" else out
    np.testing.assert_array_equal(got, [[1, 1], [0, 0], [1, 1], [0, 0]])
    if library == "torch":
        out.sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [0, 0], [1, 1]])
    ints = F.embedding(ids, np.arange(6).reshape(3, 2), padding_idx=1).data
    assert ints.dtype == np.int64 and ints.tolist() == [[0, 1], [0, 0], [4, 5], [0, 0]]


def test_embedding_padding_idx_must_be_an_integer():
    """Before: padding_idx=1.7 was silently read as 1."""
    with pytest.raises(TypeError, match=r"embedding\(\): padding_idx must be an integer, got float 1.7"):
        F.embedding(lt.LoDTensor(np.array([[0], [1]]), [[0, 2]]), np.ones((3, 2)), padding_idx=1.7)


def test_fc_num_flatten_dims_minus_one_is_the_last_dim():
    """Paddle 2's fc takes num_flatten_dims=-1 (all dims but the last kept); before: ValueError."""
    x = lt.LoDTensor(np.arange(24.0).reshape(2, 3, 4), [[0, 2]])
    w = np.arange(20.0).reshape(4, 5)
    out = F.fc(x, w, num_flatten_dims=-1)
    np.testing.assert_allclose(out.data, F.fc(x, w, num_flatten_dims=2).data)
    assert out.data.shape == (2, 3, 5) and out.lod() == [[0, 2]]
    with pytest.raises(ValueError, match=r"num_flatten_dims must be -1 or in \[1, 2\] .* got -2"):
        F.fc(x, w, num_flatten_dims=-2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_warpctc_in_half_precision_on_torch(dtype):
    """Before: NotImplementedError '"ctc_loss_cpu" not implemented for Half' (NumPy computed it)."""
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (6, 4))
    lod, labels = [[0, 3, 3, 5, 6]], lt.LoDTensor(np.array([[1], [2]]), [[0, 1, 1, 1, 2]])
    t = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    loss = F.warpctc(lt.LoDTensor(t, lod), labels)
    assert loss.dtype == t.dtype
    np.testing.assert_allclose(loss.detach().double().numpy(), F.warpctc(lt.LoDTensor(x, lod), labels),
                               rtol=2e-2, atol=1e-2)
    loss.sum().backward()
    assert t.grad.dtype == t.dtype and bool(torch.isfinite(t.grad).all())


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_initial_state_when_every_sequence_is_empty(library):
    """Before: IndexError 'index 0 is out of bounds for axis 0 with size 0' when h_0/c_0 were given."""
    arr = torch.tensor if library == "torch" else (lambda a: a)
    lod = [[0, 0, 0]]
    h, c = F.dynamic_lstm(lt.LoDTensor(arr(np.zeros((0, 8))), lod), arr(np.zeros((2, 8))), arr(np.zeros((1, 14))),
                          h_0=arr(np.ones((2, 2))), c_0=arr(np.ones((2, 2))))
    assert tuple(h.data.shape) == tuple(c.data.shape) == (0, 2) and h.lod() == lod
    g = F.dynamic_gru(lt.LoDTensor(arr(np.zeros((0, 6))), lod), arr(np.zeros((2, 6))), h_0=arr(np.ones((2, 2))))
    assert tuple(g.data.shape) == (0, 2)
    with pytest.raises(ValueError, match=r"dynamic_gru\(\): h_0 must have shape \[2, 2\], got \[3, 2\]"):
        F.dynamic_gru(lt.LoDTensor(arr(np.zeros((0, 6))), lod), arr(np.zeros((2, 6))), h_0=arr(np.ones((3, 2))))


def test_warpctc_blank_must_be_an_integer():
    """Before: blank=0.5 was silently read as blank 0."""
    x, y = lt.LoDTensor(np.zeros((2, 3)), [[0, 2]]), lt.LoDTensor(np.ones((1, 1), int), [[0, 1]])
    with pytest.raises(TypeError, match=r"warpctc\(\): blank must be an integer, got float 0.5"):
        F.warpctc(x, y, blank=0.5)
    np.testing.assert_allclose(F.warpctc(x, y, blank=np.int64(2)).ravel(), [np.log(3.0)])


def test_a_module_fed_a_lodtensor_without_data_says_so():
    """It said "input must be a LoDTensor ..., got LoDTensor"."""
    pytest.importorskip("torch")
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor.nn import DynamicGRU  # noqa: PLC0415

    with pytest.raises(ValueError, match=r"DynamicGRU.forward\(\): the LoDTensor holds no data yet"):
        DynamicGRU(2)(lt.LoDTensor())


@pytest.mark.parametrize("call, flag", [
    ("lstm", "is_reverse"), ("lstm", "use_peepholes"), ("gru", "is_reverse"), ("gru", "origin_mode"),
    ("ctc", "norm_by_times"),
])
def test_flags_are_true_or_false_not_a_truthy_string(call, flag):
    """``is_reverse="False"`` ran the sequences reversed (a non-empty string is true)."""
    import lodtensor as lt  # noqa: PLC0415
    from lodtensor.nn import functional as F  # noqa: PLC0415

    d = 2
    if call == "lstm":
        x = lt.LoDTensor(np.zeros((3, 4 * d)), [[0, 2, 3]])
        def run(**kw):
            peep = kw.get("use_peepholes", True) is True or kw.get("use_peepholes") == 1
            return F.dynamic_lstm(x, np.zeros((d, 4 * d)), np.zeros((1, (7 if peep else 4) * d)), **kw)
    elif call == "gru":
        x = lt.LoDTensor(np.zeros((3, 3 * d)), [[0, 2, 3]])
        run = lambda **kw: F.dynamic_gru(x, np.zeros((d, 3 * d)), np.zeros((1, 3 * d)), **kw)  # noqa: E731
    else:
        x = lt.LoDTensor(np.zeros((3, 4)), [[0, 2, 3]])
        label = lt.LoDTensor(np.array([[1], [2]]), [[0, 1, 2]])
        run = lambda **kw: F.warpctc(x, label, **kw)  # noqa: E731
    with pytest.raises(TypeError, match=f"{flag} must be True or False, got str 'False'"):
        run(**{flag: "False"})
    run(**{flag: np.bool_(False)})
    run(**{flag: 1})
