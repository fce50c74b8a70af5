"""Sequence ops. Expected values for 1-level inputs were read off real Paddle 2.6.2
(the live differential suite is tests/paddle); all cases include an empty sequence."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
import lodtensor.fluid as fluid
from lodtensor import LoDError
from lodtensor import sequence as S

from .strategies import lod_tensors


def col(values, lod, dtype="float32"):
    return lt.LoDTensor(np.asarray(values, dtype=dtype).reshape(-1, 1), lod)


X1 = ([1, 2, 3, 4, 5], [[0, 2, 2, 5]])
X2 = ([1, 2, 3, 4, 5, 6], [[0, 2, 3], [0, 1, 3, 6]])


@pytest.mark.parametrize(
    "pool_type, expected",
    [
        ("sum", [3, -9, 12]),
        ("average", [1.5, -9, 4]),
        ("sqrt", [2.1213203, -9, 6.9282031]),
        ("max", [2, -9, 5]),
        ("min", [1, -9, 3]),
        ("first", [1, -9, 3]),
        ("last", [2, -9, 5]),
        ("SUM", [3, -9, 12]),
    ],
)
def test_pool_types_with_empty_sequence(backend, pool_type, expected):
    x = lt.LoDTensor(backend.array(np.arange(1, 6, dtype=np.float32).reshape(5, 1)), [[0, 2, 2, 5]])
    out = S.sequence_pool(x, pool_type, pad_value=-9.0)
    assert out.lod() == [] and np.allclose(backend.numpy(out.data).ravel(), expected)


def test_pool_two_levels_keeps_outer_level():
    x = col(*X2)
    out = S.sequence_pool(x, "sum")
    assert out.lod() == [[0, 2, 3]] and out.data.ravel().tolist() == [1, 5, 15]
    assert S.sequence_first_step(x).data.ravel().tolist() == [1, 2, 4]
    assert S.sequence_last_step(x).data.ravel().tolist() == [1, 3, 6]
    top = S.sequence_pool(x, "max", level=0)
    assert top.lod() == [] and top.data.ravel().tolist() == [3, 6]


def test_pool_all_empty_and_int_data():
    x = lt.LoDTensor(np.zeros((0, 2), np.int64), [[0, 0, 0]])
    for kind in ("sum", "first", "max", "average"):
        assert S.sequence_pool(x, kind, pad_value=7).data.tolist() == [[7, 7], [7, 7]]
    ints = lt.LoDTensor(np.arange(5), [[0, 2, 5]])
    assert S.sequence_pool(ints, "sum").data.tolist() == [1, 9]
    assert S.sequence_pool(ints, "average").data.tolist() == [0.5, 3.0]


def test_softmax_matches_paddle():
    out = S.sequence_softmax(col(*X1))
    assert out.lod() == [[0, 2, 2, 5]]
    assert np.allclose(out.data.ravel(), [0.26894142, 0.7310586, 0.09003057, 0.24472848, 0.66524094])
    wide = S.sequence_softmax(lt.LoDTensor(np.arange(10.0).reshape(5, 2), [[0, 2, 5]]))
    assert np.allclose(wide.data[:2].sum(0), 1) and np.allclose(wide.data[2:].sum(0), 1)


def test_expand_cases_from_paddle():
    x = col([1, 2, 3, 4], [[0, 2, 4]])
    y = col(np.zeros(8), [[0, 2, 4], [0, 3, 6, 7, 8]])
    out = S.sequence_expand(x, y, ref_level=0)
    assert out.lod() == [[0, 2, 4, 6, 8]] and out.data.ravel().tolist() == [1, 2, 1, 2, 3, 4, 3, 4]
    nolod = S.sequence_expand(lt.LoDTensor(np.array([[1.0], [2.0], [3.0]])), col(np.zeros(5), [[0, 2, 2, 5]]))
    assert nolod.lod() == [] and nolod.data.ravel().tolist() == [1, 1, 3, 3, 3]
    empty_seq = S.sequence_expand(col(*X1), col(np.zeros(3), [[0, 1, 3, 3]]))
    assert empty_seq.lod() == [[0, 2, 2, 2]] and empty_seq.data.ravel().tolist() == [1, 2]


def test_expand_two_level_x_repeats_whole_sequences():
    x = lt.from_nested_list([[[1], [2, 3]], [[4]]])
    y = lt.LoDTensor(np.zeros(3), [[0, 1, 3]])
    assert S.sequence_expand(x, y).tolist() == [[[1], [2, 3]], [[4]], [[4]]]


def test_expand_as():
    y = col(np.zeros(5), [[0, 2, 2, 5]])
    out = S.sequence_expand_as(lt.LoDTensor(np.array([[1.0], [2.0], [3.0]])), y)
    assert out.lod() == [[0, 2, 2, 5]] and out.data.ravel().tolist() == [1, 1, 3, 3, 3]
    two = S.sequence_expand_as(np.array([1, 2, 3]), lt.LoDTensor(np.zeros(5), [[0, 1, 3], [0, 2, 2, 5]]))
    assert two.lod() == [[0, 1, 3], [0, 2, 2, 5]]


def test_pad_and_unpad(backend):
    x = lt.LoDTensor(backend.array(np.arange(10.0).reshape(5, 2)), [[0, 2, 2, 5]])
    out, length = S.sequence_pad(x, np.array([-1.0, -2.0]), maxlen=4)
    padded = backend.numpy(out.data)
    assert padded.shape == (3, 4, 2) and padded[1].tolist() == [[-1, -2]] * 4
    assert padded[0, :2].tolist() == [[0, 1], [2, 3]] and backend.numpy(length.data).tolist() == [2, 0, 3]
    back = S.sequence_unpad(out, length)
    assert back.lod() == [[0, 2, 2, 5]] and np.array_equal(backend.numpy(back.data), backend.numpy(x.data))
    with pytest.raises(ValueError, match="maxlen=2 is shorter than the longest sequence \\(3\\)"):
        S.sequence_pad(x, 0.0, maxlen=2)


def test_pad_two_levels_keeps_outer():
    out, length = S.sequence_pad(col(*X2), 0.0)
    assert out.lod() == [[0, 2, 3]] and out.data.shape == (3, 3, 1) and length.lod() == [[0, 2, 3]]
    back = S.sequence_unpad(out, length)
    assert back.lod() == [[0, 2, 3], [0, 1, 3, 6]] and back.data.ravel().tolist() == [1, 2, 3, 4, 5, 6]


def test_concat():
    a = col([1, 2, 3], [[0, 2, 3]])
    b = col([4, 5], [[0, 0, 2]])
    out = S.sequence_concat([a, b])
    assert out.lod() == [[0, 2, 5]] and out.data.ravel().tolist() == [1, 2, 3, 4, 5]
    two = S.sequence_concat([col(*X2), col(*X2)])
    assert two.lod() == [[0, 2, 3], [0, 2, 6, 12]]
    assert two.data.ravel().tolist() == [1, 1, 2, 3, 2, 3, 4, 5, 6, 4, 5, 6]


def test_reverse_slice_enumerate_reshape():
    x = lt.LoDTensor(np.arange(10.0).reshape(5, 2), [[0, 2, 2, 5]])
    assert S.sequence_reverse(x).data.tolist() == [[2, 3], [0, 1], [8, 9], [6, 7], [4, 5]]
    sliced = S.sequence_slice(x, np.array([[1], [0], [1]]), np.array([[1], [0], [2]]))
    assert sliced.lod() == [[0, 1, 1, 3]] and sliced.data.tolist() == [[2, 3], [6, 7], [8, 9]]
    ids = lt.LoDTensor(np.array([[1], [2], [3], [4], [5]]), [[0, 2, 2, 5]])
    assert S.sequence_enumerate(ids, 3, pad_value=-1).data.tolist() == [
        [1, 2, -1], [2, -1, -1], [3, 4, 5], [4, 5, -1], [5, -1, -1]]
    r = S.sequence_reshape(lt.LoDTensor(np.arange(12.0).reshape(6, 2), [[0, 2, 2, 6]]), 4)
    assert r.lod() == [[0, 1, 1, 3]] and r.data.shape == (3, 4)
    r1 = S.sequence_reshape(lt.LoDTensor(np.arange(12.0).reshape(6, 2), [[0, 2, 2, 6]]), 1)
    assert r1.lod() == [[0, 4, 4, 12]]
    assert S.sequence_reverse(col(*X2)).data.ravel().tolist() == [1, 3, 2, 6, 5, 4]


def test_scatter_and_mask():
    index = lt.LoDTensor(np.array([[0], [1], [2], [5], [4], [3], [2], [1], [3], [2], [5], [4]]), [[0, 3, 8, 12]])
    updates = lt.LoDTensor(np.arange(12.0).reshape(12, 1) + 0.5, [[0, 3, 8, 12]])
    base = np.zeros((3, 6))
    out = S.sequence_scatter(base, index, updates)
    assert out.tolist() == [[0.5, 1.5, 2.5, 0, 0, 0], [0, 7.5, 6.5, 5.5, 4.5, 3.5], [0, 0, 9.5, 8.5, 11.5, 10.5]]
    assert base.sum() == 0
    assert S.sequence_mask(np.array([2, 0, 3])).tolist() == [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
    m = S.sequence_mask(np.array([[2, 0], [3, 1]]), maxlen=4, dtype="float32")
    assert m.shape == (2, 2, 4) and m.dtype == np.float32 and m[1, 1].tolist() == [1, 0, 0, 0]


def test_lod_reset_and_append():
    x = lt.LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 2, 5, 6]])
    assert S.lod_reset(x, target_lod=[0, 4, 6]).lod() == [[0, 4, 6]]
    y = lt.LoDTensor(np.zeros(6), [[0, 1, 3], [0, 2, 3, 6]])
    reset = S.lod_reset(x, y)
    assert reset.lod() == [[0, 1, 3], [0, 2, 3, 6]] and np.shares_memory(reset.data, x.data)
    assert S.lod_reset(x, np.array([0, 1, 6], dtype=np.int32)).lod() == [[0, 1, 6]]
    assert S.lod_append(lt.LoDTensor(np.arange(6)), [0, 2, 6]).lod() == [[0, 2, 6]]
    assert x.lod() == [[0, 2, 5, 6]]


def test_fluid_layers_has_every_op():
    for name in S.__all__:
        assert getattr(fluid.layers, name) is getattr(S, name)
    import lodtensor.fluid.layers as layers

    assert layers.sequence_pool is S.sequence_pool


INDEX2 = lt.LoDTensor(np.array([0, 1]), [[0, 1, 2]])
BAD = [
    ("pool-type", lambda: S.sequence_pool(col(*X1), "median"), ValueError, "pool_type must be one of sum, average"),
    ("pool-no-lod", lambda: S.sequence_pool(lt.LoDTensor(np.zeros(3)), "sum"), ValueError,
     "lod_level >= 1, got lod_level 0"),
    ("pool-level", lambda: S.sequence_pool(col(*X1), "sum", level=3), IndexError, "level 3 is out of range"),
    ("pool-not-tensor", lambda: S.sequence_pool(np.zeros(3), "sum"), TypeError, "must be a LoDTensor, got ndarray"),
    ("concat-count", lambda: S.sequence_concat([col(*X1), col([1.0, 2.0], [[0, 2]])]), LoDError,
     "input\\[1\\] has 1 sequences but input\\[0\\] has 3"),
    ("concat-empty", lambda: S.sequence_concat([]), TypeError, "non-empty list"),
    ("expand-count", lambda: S.sequence_expand(col(*X1), col([1.0, 2.0], [[0, 1, 2]])), LoDError,
     "has 2 sequences but x has 3 sequences"),
    ("expand-as-count", lambda: S.sequence_expand_as(np.zeros(2), col(*X1)), LoDError, "x has 2 rows but y's last"),
    ("slice-range", lambda: S.sequence_slice(col(*X1), [1, 0, 2], [2, 0, 2]), IndexError,
     "sequence 0 has 2 rows, so offset\\[0\\]=1 and length\\[0\\]=2"),
    ("slice-count", lambda: S.sequence_slice(col(*X1), [0], [1]), ValueError,
     "offset must have one entry per sequence"),
    ("slice-float", lambda: S.sequence_slice(col(*X1), [0.5, 0, 0], [1, 0, 1]), TypeError, "offset must hold integers"),
    ("reshape-divide", lambda: S.sequence_reshape(lt.LoDTensor(np.zeros((6, 2)), [[0, 1, 2, 6]]), 4), ValueError,
     "new_dim=4 must divide the values of every sequence, but sequence 0 holds 1 rows x 2 = 2"),
    ("reshape-zero", lambda: S.sequence_reshape(lt.LoDTensor(np.zeros((6, 2)), [[0, 6]]), 0), ValueError,
     "new_dim must be >= 1, got 0"),
    ("enumerate-win", lambda: S.sequence_enumerate(col(*X1, dtype="int64"), 0), ValueError, "win_size must be >= 1"),
    ("enumerate-shape", lambda: S.sequence_enumerate(lt.LoDTensor(np.zeros((5, 2)), [[0, 5]]), 2), ValueError,
     "shape \\(rows,\\) or \\(rows, 1\\)"),
    ("scatter-range", lambda: S.sequence_scatter(np.zeros((1, 2)), lt.LoDTensor(np.array([3]), [[0, 1]]),
                                                 lt.LoDTensor(np.array([1.0]), [[0, 1]])), IndexError,
     "index\\[0\\]=3 is out of range for input width 2"),
    ("mask-negative", lambda: S.sequence_mask(np.array([1, -1])), LoDError, "non-negative"),
    ("reset-none", lambda: S.lod_reset(col(*X1)), ValueError, "give y or target_lod"),
    ("reset-fit", lambda: S.lod_reset(col(*X1), target_lod=[0, 4]), LoDError,
     "lod_reset\\(\\): lod level 0 must end at len\\(data\\)=5, got offsets\\[-1\\]=4"),
    ("append-fit", lambda: S.lod_append(col(*X1), [0, 2, 5]), LoDError, "lod_append\\(\\): lod level 0 must end"),
    ("pad-maxlen-type", lambda: S.sequence_pad(col(*X1), 0.0, maxlen=2.5), TypeError, "maxlen must be an integer"),
    ("scatter-updates-width", lambda: S.sequence_scatter(np.zeros((2, 4)), INDEX2, INDEX2.with_data(np.ones((2, 2)))),
     ValueError,
     "updates must hold one value per index row, shape \\(2, 1\\), got \\(2, 2\\)"),
    ("scatter-updates-rows", lambda: S.sequence_scatter(np.zeros((2, 4, 2)), INDEX2, INDEX2.with_data(np.ones((2, 1)))),
     ValueError,
     "one row of input's row shape \\(2,\\) per index row, shape \\(2, 2\\), got \\(2, 1\\)"),
]

# pad_value that the result's dtype cannot hold exactly: Paddle raises (sequence_pad refuses a pad_value
# of another dtype, sequence_enumerate and sequence_pool a non-integer one); a cast would pad silently wrong
BAD_FILLS = [
    ("pad-fraction", lambda v: S.sequence_pad(col([1, 2, 3], [[0, 2, 3]], dtype="int64"), v), 0.5, ValueError,
     "sequence_pad\\(\\): pad_value=0.5 cannot be stored in the int64 result"),
    ("pad-fraction-array", lambda v: S.sequence_pad(col([1, 2, 3], [[0, 2, 3]], dtype="int64"), v),
     np.array([0.5], "float32"), ValueError, "pad_value=0.5 \\(an element\\) cannot be stored in the int64"),
    ("pad-range", lambda v: S.sequence_pad(col([1, 2, 3], [[0, 2, 3]], dtype="int32"), v), 2**40, ValueError,
     "pad_value=1099511627776 is out of range for the int32 result"),
    ("pad-range-array", lambda v: S.sequence_pad(col([1, 2, 3], [[0, 2, 3]], dtype="int32"), v),
     np.array([2**40]), ValueError, "out of range for the int32 result"),
    ("pad-negative-uint8", lambda v: S.sequence_pad(col([1, 2, 3], [[0, 2, 3]], dtype="uint8"), v), -1, ValueError,
     "pad_value=-1 is out of range for the uint8 result \\(0..255\\)"),
    ("pad-none", lambda v: S.sequence_pad(col(*X1), v), None, TypeError,
     "pad_value must be a number or an array of numbers, got NoneType None"),
    ("pad-string", lambda v: S.sequence_pad(col(*X1), v), "a", TypeError, "pad_value must be a number .* got str 'a'"),
    ("enumerate-fraction", lambda v: S.sequence_enumerate(col(*X1, dtype="int64"), 2, pad_value=v), 0.5, ValueError,
     "sequence_enumerate\\(\\): pad_value=0.5 cannot be stored in the int64 result"),
    ("enumerate-range", lambda v: S.sequence_enumerate(col(*X1, dtype="int32"), 2, pad_value=v), 2**32 + 7,
     ValueError, "pad_value=4294967303 is out of range for the int32 result"),
    ("pool-string", lambda v: S.sequence_pool(col(*X1), "sum", pad_value=v), "1.5", TypeError,
     "sequence_pool\\(\\): pad_value must be a number .* got str '1.5'"),
    ("to-padded-fraction", lambda v: col([1, 2, 3], [[0, 2, 3]], dtype="int64").to_padded(pad_value=v), 0.5,
     ValueError, "to_padded\\(\\): pad_value=0.5 cannot be stored in the int64 result"),
    ("to-padded-all-range", lambda v: col([1, 2, 3], [[0, 2, 3]], dtype="int8").to_padded_all(pad_value=v), 300,
     ValueError, "to_padded_all\\(\\): pad_value=300 is out of range for the int8 result"),
]


@pytest.mark.parametrize("call, exc, pattern", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.parametrize("call, value, exc, pattern", [case[1:] for case in BAD_FILLS],
                         ids=[case[0] for case in BAD_FILLS])
def test_fill_values_the_dtype_cannot_hold_raise(call, value, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(value)


def test_fill_values_the_dtype_holds_are_taken():
    ints = col([1, 2, 3], [[0, 2, 3]], dtype="int32")
    for value in (-1, -1.0, np.array([-1.0]), np.int64(-1), np.array([-1], "int64")):  # exact in int32: no error
        assert S.sequence_pad(ints, value)[0].data.tolist() == [[[1], [2]], [[3], [-1]]]
    assert S.sequence_enumerate(ints, 2, pad_value=2.0).data.tolist() == [[1, 2], [2, 2], [3, 2]]
    empty = col([1.0, 2.0], [[0, 0, 2]])
    assert S.sequence_pool(empty, "sum", pad_value=None).data.ravel().tolist() == [0.0, 3.0]  # Paddle's default
    torch = pytest.importorskip("torch")
    nested = lt.nested.nested_tensor([torch.tensor([1, 2]), torch.tensor([3])])
    # torch.nested.to_padded_tensor casts the padding to the dtype, and so does lodtensor.nested
    assert lt.nested.to_padded_tensor(nested, 0.5).tolist() == [[1, 2], [3, 0]]
    on_torch = lt.LoDTensor(torch.tensor([1, 2, 3]), [[0, 2, 3]])
    assert S.sequence_pad(on_torch, torch.tensor([7.0]))[0].data.ravel().tolist() == [1, 2, 3, 7]
    with pytest.raises(ValueError, match="pad_value=7.5 \\(an element\\) cannot be stored in the int64 result"):
        S.sequence_pad(on_torch, torch.tensor([7.5]))


def test_fill_values_on_a_device_are_judged_by_dtype_without_reading_them():
    torch = pytest.importorskip("torch")
    from lodtensor._dense import check_fill

    check_fill(torch.zeros(1, dtype=torch.int64, device="meta"), np.int32, "f()")  # values unread: no sync
    check_fill(torch.zeros(1, dtype=torch.float16, device="meta"), np.float64, "f()")
    with pytest.raises(TypeError, match="f\\(\\): pad_value of dtype torch.float32 cannot be stored in the int64"):
        check_fill(torch.zeros(1, device="meta"), np.int64, "f()")
    with pytest.raises(TypeError, match="pad_value of dtype torch.int64 cannot be stored in the bool result"):
        check_fill(torch.zeros(1, dtype=torch.int64, device="meta"), np.bool_, "f()")


def test_inputs_untouched():
    x = col(*X2)
    before = (x.lod(), x.data.copy())
    ops = (lambda: S.sequence_reverse(x), lambda: S.sequence_pool(x, "max"), lambda: S.sequence_softmax(x),
           lambda: S.sequence_pad(x, 0.0), lambda: S.sequence_concat([x, x]),
           lambda: S.lod_reset(x, target_lod=[0, 6]))
    for op in ops:
        op()
        assert x.lod() == before[0] and np.array_equal(x.data, before[1])


def _sequences(t):
    offsets = t.lod.offsets(-1)
    return [t.data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


@given(lod_tensors(min_levels=1, max_levels=3, row_shape=(2,)),
       st.sampled_from(["sum", "average", "max", "min", "first", "last", "sqrt"]))
def test_pool_agrees_with_reference(t, kind):
    ref = {
        "sum": lambda s: s.sum(0), "average": lambda s: s.mean(0), "max": lambda s: s.max(0),
        "min": lambda s: s.min(0), "first": lambda s: s[0], "last": lambda s: s[-1],
        "sqrt": lambda s: s.sum(0) / np.sqrt(len(s)),
    }[kind]
    out = S.sequence_pool(t, kind, pad_value=-3.0)
    expected = np.reshape([ref(s) if len(s) else np.full(2, -3.0) for s in _sequences(t)], (-1, 2))
    assert out.data.shape == expected.shape and np.allclose(out.data, expected)
    assert out.lod.levels == t.lod.levels[:-1] or out.lod == lt.LoD._from_valid(t.lod.levels[:-1])


@given(lod_tensors(min_levels=1, max_levels=3, row_shape=(2,)))
def test_reverse_twice_and_pad_unpad_identity(t):
    assert np.array_equal(S.sequence_reverse(S.sequence_reverse(t)).data, t.data)
    out, length = S.sequence_pad(t, -1.0)
    back = S.sequence_unpad(out, length)
    assert back.lod == t.lod and np.array_equal(back.data, t.data)
    for i, s in enumerate(_sequences(S.sequence_reverse(t))):
        assert np.array_equal(s, _sequences(t)[i][::-1])


def test_clear_errors_instead_of_silent_coercion():
    a = col([1, 2, 3], [[0, 2, 3]])
    with pytest.raises(TypeError, match="input\\[1\\] has dtype float64 but input\\[0\\] has float32"):
        S.sequence_concat([a, col([1, 2], [[0, 1, 2]], dtype="float64")])
    with pytest.raises(ValueError, match="input\\[1\\] has rows of shape \\(2,\\) but input\\[0\\] has \\(1,\\)"):
        S.sequence_concat([a, lt.LoDTensor(np.zeros((2, 2), np.float32), [[0, 1, 2]])])
    with pytest.raises(TypeError, match="sequence_softmax\\(\\): input must have a floating dtype, got int64"):
        S.sequence_softmax(lt.LoDTensor(np.arange(3), [[0, 3]]))
    index = lt.LoDTensor(np.array([0]), [[0, 1]])
    with pytest.raises(TypeError, match="updates has dtype float64 but input has float32"):
        S.sequence_scatter(np.zeros((1, 2), np.float32), index, lt.LoDTensor(np.array([1.0]), [[0, 1]]))
    with pytest.raises(ValueError, match="maxlen must be >= 0"):
        S.sequence_pad(a, 0.0, maxlen=-1)
    assert S.sequence_pool(a, "average").dtype == np.float32 and S.sequence_pool(a, "sqrt").dtype == np.float32


def test_expand_lodless_x_with_no_repeats_is_empty():
    out = S.sequence_expand(lt.LoDTensor(np.ones((3, 2))), lt.LoDTensor(np.zeros(0), [[0, 0, 0, 0]]))
    assert out.data.shape == (0, 2) and out.lod() == []


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_sequence_softmax_of_float16_is_within_one_ulp_of_exact(backend):
    """float16 scores are exponentiated and summed in float32, then rounded once (as torch does);
    float16 sums were several ulp off for sequences of hundreds of scores."""
    if backend == "torch":
        pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    lengths = [300, 3, 1500]
    x = rng.normal(size=(sum(lengths), 1)).astype(np.float16)
    t = lt.LoDTensor(x, recursive_sequence_lengths=[lengths])
    if backend == "torch":
        t = t.to_torch()
    got = S.sequence_softmax(t).data
    got = np.asarray(got.numpy() if backend == "torch" else got, dtype=np.float64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    want = np.concatenate([np.exp(x[a:b].astype(np.float64)) / np.exp(x[a:b].astype(np.float64)).sum()
                           for a, b in zip(offsets, offsets[1:])])
    assert np.all(np.abs(got - want) <= np.spacing(want.astype(np.float16)).astype(np.float64))


def test_issue_26_semantics():
    """sequence_unpad of 2-D input gives (rows, 1); sequence_expand takes a plain array x;
    sequence_mask takes maxlen as a one-element tensor and refuses non-numeric dtypes (#25)."""
    out = S.sequence_unpad(np.arange(120.0).reshape(3, 40), [2, 3, 4])
    assert out.data.shape == (9, 1) and out.lod() == [[0, 2, 5, 9]]
    assert S.sequence_unpad(np.zeros((2, 3, 4)), [1, 2]).data.shape == (3, 4)
    y = col([0.0] * 3, [[0, 1, 3]])
    got = S.sequence_expand(np.array([[1.0], [2.0]]), y)
    assert got.lod() == [] and got.data.ravel().tolist() == [1.0, 2.0, 2.0]
    assert S.sequence_mask(np.array([1, 3]), maxlen=np.array([2])).tolist() == [[1, 0], [1, 1]]
    assert S.sequence_mask(np.array([1]), maxlen=lt.LoDTensor(np.array([2], "int32"))).tolist() == [[1, 0]]
    assert S.sequence_mask(np.array([1]), dtype="complex64").dtype == np.complex64
    for bad in ("U3", object, "datetime64[s]", None):
        with pytest.raises(TypeError, match="dtype must be a bool or numeric dtype"):
            S.sequence_mask(np.array([1]), dtype=bad)
    with pytest.raises(ValueError, match=r"maxlen given as a tensor must hold one integer, got shape \[2\]"):
        S.sequence_mask(np.array([1]), maxlen=np.array([1, 2]))
    with pytest.raises(TypeError, match=r"maxlen must be an integer, got a tensor of float64"):
        S.sequence_mask(np.array([1]), maxlen=np.array([2.0]))


def test_issue_26_semantics_torch():
    torch = pytest.importorskip("torch")
    mask = S.sequence_mask(torch.tensor([1, 3]), maxlen=torch.tensor([4]), dtype=torch.float32)
    assert mask.dtype == torch.float32 and mask.tolist() == [[1, 0, 0, 0], [1, 1, 1, 0]]
    out = S.sequence_expand(torch.tensor([[1.0], [2.0]], requires_grad=True), col([0.0] * 3, [[0, 1, 3]]))
    assert out.data.requires_grad and out.data.ravel().tolist() == [1.0, 2.0, 2.0]
    assert S.sequence_unpad(torch.zeros(3, 4), [1, 2, 3]).data.shape == (6, 1)


def test_outer_level_pooling_counts_rows_not_subsequences():
    """sqrt and empty-sequence fills at an outer level count data rows: a document whose sentences are
    all empty is empty; sqrt divides by the rows' square root."""
    t = lt.LoDTensor(np.arange(1.0, 6.0).reshape(5, 1), [[0, 2, 3, 5], [0, 0, 0, 2, 5, 5]])
    # documents: [s0, s1] (0 rows), [s2] (2 rows), [s3, s4] (3 rows; s4 empty)
    assert S.sequence_pool(t, "sqrt", level=0, pad_value=-1.0).data.ravel().tolist() == pytest.approx(
        [-1.0, 3 / np.sqrt(2), 12 / np.sqrt(3)])
    assert S.sequence_pool(t, "sum", level=0, pad_value=-1.0).data.ravel().tolist() == [-1.0, 3.0, 12.0]
    assert t.lod.empty_rows(0) == 1 and t.lod.empty_rows(1) == 3


def test_expand_to_a_level_of_no_sequence():
    """Found by the 30-minute make fuzz: expanding only x's sequences that hold no sub-sequence makes
    the LoD [[0, 0], [0]] (its level 1 holds no sequence): a valid LoD, which the gate accepts again."""
    x = lt.LoDTensor(np.zeros(0), [[0, 0, 1], [0, 0]])
    y = lt.LoDTensor(np.zeros(1), [[0, 1], [0, 2], [0, 1, 1]])
    out = S.sequence_expand(x, y, -1)
    assert out.lod() == [[0, 0], [0]] and out.data.shape == (0,) and out.tolist() == [[]]
    assert lt.LoDTensor(out.data, out.lod()).lod == out.lod
    assert x[np.array([0])].lod() == [[0, 0], [0]]


@pytest.mark.parametrize("make", [np.zeros, pytest.param("torch", id="torch")], ids=["numpy", "torch"])
def test_mask_of_no_lengths_allocates_nothing(make):
    """No lengths and a huge maxlen: an empty (0, maxlen) mask, without an arange of maxlen values (2**40
    asked for 8 TiB)."""
    if make == "torch":
        torch = pytest.importorskip("torch")
        lengths = torch.zeros(0, dtype=torch.int64)
    else:
        lengths = make(0, dtype=np.int64)
    out = S.sequence_mask(lengths, maxlen=2**40, dtype="float32")
    assert tuple(out.shape) == (0, 2**40) and str(out.dtype).endswith("float32")
