import copy
import importlib.util
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import LoDError, LoDTensor

from .strategies import lod_tensors


def make():
    return LoDTensor(np.arange(10, dtype=np.float32).reshape(5, 2), [[0, 2, 5]])


class TestPaddleMethods:
    def test_empty_tensor_is_like_paddle(self):
        t = LoDTensor()
        assert t.lod() == [] and t.recursive_sequence_lengths() == []
        assert t.shape() == [0] and t._dtype() == np.float32
        assert t.has_valid_recursive_sequence_lengths() and not t._is_initialized()
        assert np.array(t).shape == (0,) and len(t) == 0 and t.data is None
        assert "uninitialized" in repr(t)

    def test_set_copies_and_keeps_place(self):
        a = np.arange(6).reshape(3, 2)
        t = LoDTensor()
        t.set(a, lt.CPUPlace())
        a[0, 0] = 100
        assert t.numpy()[0, 0] == 0 and t._is_initialized()
        assert t.shape() == [3, 2] and t._dtype() == np.int64
        assert t.place() == lt.CPUPlace() and str(t._place()) == "Place(cpu)"
        view = np.array([1.0, 2.0])
        t.set(view, lt.CPUPlace(), zero_copy=True)
        assert np.shares_memory(t.data, view)

    def test_set_lod_and_lengths(self):
        t = make()
        t.set_lod([[0, 1, 2], [0, 2, 5]])
        assert t.lod() == [[0, 1, 2], [0, 2, 5]]
        assert t.recursive_sequence_lengths() == [[1, 1], [2, 3]]
        t.set_recursive_sequence_lengths([[3, 2]])
        assert t.lod() == [[0, 3, 5]] and t.has_valid_recursive_sequence_lengths()
        t.set_lod([])
        assert t.lod() == [] and t.lod_level == 0

    @pytest.mark.parametrize(
        "call, arg, pattern",
        [
            ("set_lod", [[1, 2, 5]], "must start at 0"),
            ("set_lod", [[0, 3, 2, 5]], "non-decreasing"),
            ("set_lod", [[0, 2, 4]], r"must end at len\(data\)=5, got offsets\[-1\]=4"),
            ("set_lod", [[0]], r"must end at len\(data\)=5, got offsets\[-1\]=0"),
            ("set_lod", [[0, 1], [0, 2, 5]], "number of sequences in level 1"),
            ("set_recursive_sequence_lengths", [[2, 2]], r"add up to len\(data\)=5, got sum=4"),
            ("set_recursive_sequence_lengths", [[-1, 6]], "non-negative"),
            ("set_recursive_sequence_lengths", [[2.5, 2.5]], "integer dtype"),
            ("set_recursive_sequence_lengths", [[True, 4]], "booleans"),
        ],
    )
    def test_invalid_lod_leaves_previous(self, call, arg, pattern):
        t = make()
        before = (t.lod(), t.data.copy())
        with pytest.raises((LoDError, TypeError), match=pattern):
            getattr(t, call)(arg)
        assert t.lod() == before[0] and np.array_equal(t.data, before[1])

    def test_set_with_other_rows_keeps_lod_but_invalid(self):
        t = make()
        t.set(np.arange(7), lt.CPUPlace())
        assert t.lod() == [[0, 2, 5]] and not t.has_valid_recursive_sequence_lengths()
        with pytest.raises(LoDError, match=r"does not fit the data.*len\(data\)=7"):
            t[0]
        with pytest.raises(LoDError):
            t.to_padded()
        t.set_lod([[0, 3, 7]])
        assert t[1].data.tolist() == [3, 4, 5, 6]

    def test_lod_before_data(self):
        t = LoDTensor(recursive_sequence_lengths=[[2, 3]])
        assert t.lod() == [[0, 2, 5]] and t.has_valid_recursive_sequence_lengths()
        t.set(np.arange(5), lt.CPUPlace())
        assert t.has_valid_recursive_sequence_lengths() and t[1].data.tolist() == [2, 3, 4]

    @pytest.mark.parametrize(
        "array, exc, pattern",
        [
            (np.float32(3.0), ValueError, "at least 1 dimension"),
            (np.array(["a", "b"]), TypeError, "numeric or bool dtype"),
            (np.array([1, None], dtype=object), TypeError, "numeric or bool dtype"),
            ([[1, 2], [3]], ValueError, "rectangular"),
            ("abc", TypeError, "got str"),
        ],
        ids=["0d", "str", "object", "ragged", "string"],
    )
    def test_set_rejects_bad_arrays(self, array, exc, pattern):
        t = make()
        with pytest.raises(exc, match=pattern):
            t.set(array, lt.CPUPlace())
        assert t.shape() == [5, 2] and t.lod() == [[0, 2, 5]]

    def test_unknown_place(self):
        t = make()
        with pytest.raises(ValueError, match="place must be a Place.*got 'tpu'"):
            t.set(np.arange(5), "tpu")
        with pytest.raises(TypeError, match="place must be a Place"):
            t.set(np.arange(5), 3.5)
        assert t.shape() == [5, 2]

    def test_pinned_place_without_cuda_is_an_error(self):
        t = make()
        with pytest.raises((RuntimeError, ImportError), match="CUDA|cuda"):
            t.set(np.arange(5), lt.CUDAPinnedPlace())
        assert t.shape() == [5, 2]

    def test_many_dtypes(self):
        for dtype in ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "complex64"]:
            t = LoDTensor()
            t.set(np.zeros((3, 1), dtype=dtype), lt.CPUPlace())
            assert t._dtype() == np.dtype(dtype) and np.array(t).dtype == np.dtype(dtype)


class TestPythonicSurface:
    def test_properties(self):
        t = make()
        assert t.dtype == np.float32 and t.device == "cpu" and t.lod_level == 1 and len(t) == 2
        assert t.offsets().tolist() == [0, 2, 5] and t.lengths(0).tolist() == [2, 3]
        assert t.backend.name == "numpy" and t.ndim == 2 and t.num_rows == 5
        assert isinstance(t.lod, lt.LoD) and t.lod.offsets(0).tolist() == [0, 2, 5]

    def test_no_lod(self):
        t = LoDTensor(np.arange(4))
        assert len(t) == 4 and t[1] == 1 and t.lod() == []
        with pytest.raises(IndexError, match="no lod"):
            t.offsets()

    def test_constructor_validates(self):
        with pytest.raises(LoDError, match=r"len\(data\)=5"):
            LoDTensor(np.arange(5), [[0, 2, 4]])
        with pytest.raises(TypeError, match="not both"):
            LoDTensor(np.arange(5), [[0, 5]], recursive_sequence_lengths=[[5]])
        assert LoDTensor([[1, 2], [3, 4]], [[0, 2]]).shape() == [2, 2]

    def test_getitem_is_a_view(self):
        t = make()
        first = t[0]
        assert first.lod() == [] and first.shape() == [2, 2]
        assert np.shares_memory(first.data, t.data)
        first.data[0, 0] = 42
        assert t.data[0, 0] == 42
        assert t[-1].data.tolist() == [[4, 5], [6, 7], [8, 9]]
        with pytest.raises(IndexError, match="index 2 is out of range for 2 top-level sequences"):
            t[2]
        with pytest.raises(IndexError, match="out of range"):
            t[-3]

    def test_multilevel_getitem_and_slices(self):
        t = lt.from_nested_list([[[1, 2], [3]], [[4], [], [5, 6]], [[7]]])
        assert t[1].lod() == [[0, 1, 1, 3]] and t[1].tolist() == [[4], [], [5, 6]]
        assert np.shares_memory(t[1].data, t.data)
        s = t[1:3]
        assert s.lod() == [[0, 3, 4], [0, 1, 1, 3, 4]] and s.tolist() == [[[4], [], [5, 6]], [[7]]]
        assert np.shares_memory(s.data, t.data)
        assert t[np.int64(2)].tolist() == [[7]]
        assert t[::2].tolist() == [[[1, 2], [3]], [[7]]]
        assert t[[2, 0]].tolist() == [[[7]], [[1, 2], [3]]]
        assert t[np.array([False, True, False])].tolist() == [[[4], [], [5, 6]]]
        assert t[2:1].lod() == [[0], [0]] and t[2:1].tolist() == [] and t[2:1].data.shape[0] == 0
        assert t[np.array([], dtype=int)].lod() == [[0], [0]] and t[np.zeros(3, bool)].tolist() == []
        with pytest.raises(IndexError, match=r"index\[1\]=5 is out of range"):
            t[[0, 5]]
        with pytest.raises(TypeError, match="t\\[i\\]\\[j\\]"):
            t[0, 1]

    def test_iteration_and_unbind(self):
        t = lt.from_nested_list([[[1, 2], [3]], [[4], [], [5, 6]]])
        parts = list(t)
        assert [p.tolist() for p in parts] == [[[1, 2], [3]], [[4], [], [5, 6]]]
        assert all(np.shares_memory(p.data, t.data) for p in parts)
        flat = make()
        assert [p.data.tolist() for p in flat.unbind()] == [[[0, 1], [2, 3]], [[4, 5], [6, 7], [8, 9]]]

    def test_tolist(self):
        assert make().tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7], [8, 9]]]

    def test_to_and_numpy(self):
        t = make()
        assert t.to("cpu") is t and t.cpu() is t
        assert t.numpy() is t.data or np.shares_memory(t.numpy(), t.data)
        with pytest.raises(ValueError, match="device must be"):
            t.to("tpu")

    def test_pickle_deepcopy_copy(self):
        t = lt.from_nested_list([[[1.5, 2], [3]], [[4]]])
        for clone in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
            assert clone.lod() == t.lod() and clone.tolist() == t.tolist()
            assert not np.shares_memory(clone.data, t.data)
        shallow = copy.copy(t)
        assert shallow.data is t.data and shallow.lod is t.lod
        empty = pickle.loads(pickle.dumps(LoDTensor()))
        assert not empty._is_initialized()

    def test_repr_shows_lod_and_truncated_data(self):
        t = LoDTensor(np.arange(100), [[0, 50, 100]])
        text = repr(t)
        assert "lod=[[0, 50, 100]]" in text and "..." in text and "shape=[100]" in text


class TestNumpyProtocol:
    def test_array_is_the_flat_data(self):
        t = make()
        assert np.asarray(t) is t.data
        assert np.array(t).tolist() == t.data.tolist()
        assert np.array(t, dtype=np.float64).dtype == np.float64

    def test_ufuncs_keep_the_lod(self):
        t = make()
        for result in (np.exp(t), t * 2, 1 + t, -t, (t + 1) / (t + 1), abs(t), t ** 2, np.add(t, t)):
            assert isinstance(result, LoDTensor) and result.lod is t.lod
        assert (t * 2).data.tolist() == (t.data * 2).tolist()
        assert (t + np.array([1, 2])).data[0].tolist() == [1, 3]
        assert isinstance(t > 3, LoDTensor) and (t > 3).dtype == bool

    def test_reductions_return_plain_results(self):
        t = make()
        assert np.add.reduce(t, axis=0).tolist() == [20, 25]

    def test_out_argument(self):
        t = make()
        out = LoDTensor(np.empty((5, 2), np.float32), [[0, 2, 5]])
        res = np.multiply(t, 2, out=(out,))
        assert res is out and out.data[4].tolist() == [16, 18]

    def test_mismatched_lods(self):
        a = LoDTensor(np.arange(5), [[0, 2, 5]])
        b = LoDTensor(np.arange(5), [[0, 3, 5]])
        with pytest.raises(LoDError, match="different lods"):
            a + b
        assert (a + LoDTensor(np.arange(5), [[0, 2, 5]])).data.tolist() == [0, 2, 4, 6, 8]


@given(lod_tensors())
def test_tolist_round_trips_through_from_nested_list(t):
    again = lt.from_nested_list(t.tolist(), lod_level=t.lod_level, dtype=t.dtype)
    assert again.lod == t.lod
    assert np.array_equal(again.data.reshape(t.data.shape), t.data)


@given(lod_tensors())
def test_unbind_views_concatenate_to_the_data(t):
    parts = t.unbind()
    assert len(parts) == len(t)
    rows = [p.data for p in parts]
    assert np.array_equal(np.concatenate(rows) if rows else t.data[:0], t.data)
    for i, p in enumerate(parts):
        assert p.lod_level == t.lod_level - 1
        assert p.tolist() == t.tolist()[i]
        if p.data.size:
            assert np.shares_memory(p.data, t.data)


@given(lod_tensors(min_levels=1))
def test_getitem_matches_tolist(t):
    expected = t.tolist()
    for i in range(len(t)):
        assert t[i].tolist() == expected[i]
        assert t[i : i + 1].tolist() == expected[i : i + 1]


def test_repeated_multilevel_indexing_uses_the_cached_split():
    t = lt.from_nested_list([[[1, 2], [3]], [[4]], [[5, 6], [], [7]]])
    expected = t.tolist()
    for _ in range(3):  # past the threshold, t[i] reads the LoD's cached split
        for i in range(-3, 3):
            assert t[i].tolist() == expected[i] and t[i].lod == lt.from_nested_list([expected[i]])[0].lod
    assert "split" in t.lod._cache
    with pytest.raises(IndexError, match="index 3 is out of range for 3 top-level sequences"):
        t[3]
    with pytest.raises(IndexError, match="index -4 is out of range"):
        t[-4]
    assert np.shares_memory(t[2].data, t.data)


def test_copies_and_moves_keep_an_unfitting_lod_flagged():
    t = make()
    t.set(np.arange(7.0), lt.CPUPlace())  # the lod [[0, 2, 5]] no longer fits 7 rows
    pytest.importorskip("torch")
    for other in (copy.copy(t), t.to_torch(), copy.deepcopy(t)):
        assert not other.has_valid_recursive_sequence_lengths()
        with pytest.raises(LoDError, match=r"len\(data\)=7"):
            other[0]


@given(lod_tensors(min_levels=1), st.data())
def test_integer_index_fast_path_equals_the_general_path(t, data):
    # t[i] takes a fast path for int i (NumPy data: len(); other arrays: .shape[0]); it must
    # give what the general indexing path gives, for NumPy and torch data, either sign of i
    from lodtensor import _indexing

    tensors = [t]
    if importlib.util.find_spec("torch") is not None:
        tensors.append(t.to_torch())
    for x in tensors:
        for _ in range(10 if len(x) else 0):  # past the threshold for the cached multi-level split
            i = data.draw(st.integers(-len(x), len(x) - 1))
            fast, slow = x[i], _indexing.getitem(x, i)
            assert type(fast.data) is type(slow.data) and fast.lod() == slow.lod()
            assert fast.tolist() == slow.tolist()


# -- a 0-d index is read as NumPy reads it (#25) ------------------------------------------------------------------
def _zero_d_indices():
    yield "numpy 0-d int", np.array(1)
    yield "numpy int32", np.int32(1)
    yield "numpy 0-d uint8", np.array(1, np.uint8)
    if importlib.util.find_spec("torch") is not None:
        import torch

        yield "torch 0-d int", torch.tensor(1)
        yield "torch 0-d int32", torch.tensor(1, dtype=torch.int32)


@pytest.mark.parametrize("index", [i for _, i in _zero_d_indices()], ids=[n for n, _ in _zero_d_indices()])
def test_a_zero_d_integer_index_is_an_int(index):
    t = LoDTensor(np.arange(5.0), [[0, 2, 5]])
    two = LoDTensor(np.arange(5.0), [[0, 1, 2], [0, 2, 5]])
    assert t[index].tolist() == t[1].tolist() == [2.0, 3.0, 4.0]
    assert two[index].lod() == two[1].lod() and two[index].tolist() == two[1].tolist()
    if index.dtype != np.uint8:  # -uint8(1) is 255, for NumPy too
        assert t[-index].tolist() == t[-1].tolist()
    assert two.to_padded(level=index)[0].shape == two.to_padded(level=1)[0].shape


def test_zero_d_float_and_bool_indices_raise_as_numpy_would():
    t = LoDTensor(np.arange(5.0), [[0, 2, 5]])
    bad = [(np.array(1.0), IndexError, "0-d float64 index 1.0"), (1.0, IndexError, "float 1.0"),
           (np.array(True), TypeError, "0-d boolean index True"), (np.True_, TypeError, "boolean")]
    if importlib.util.find_spec("torch") is not None:
        import torch

        bad += [(torch.tensor(1.0), IndexError, "0-d float32 index 1.0"),
                (torch.tensor(True), TypeError, "0-d boolean index True")]
    for index, exc, pattern in bad:
        with pytest.raises(exc, match=pattern):
            t[index]
        with pytest.raises(IndexError):
            np.arange(3)[np.array(1.0)]  # NumPy refuses a float index too
    with pytest.raises(IndexError, match="index 2 is out of range for 2"):
        t[np.array(2)]


@pytest.mark.gpu
def test_a_zero_d_cuda_index():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    t = LoDTensor(torch.arange(5.0, device="cuda"), [[0, 2, 5]])
    assert t[torch.tensor(1, device="cuda")].tolist() == [2.0, 3.0, 4.0]
    assert t[torch.tensor([1, 0], device="cuda")].lod() == [[0, 3, 5]]
    with pytest.raises(TypeError, match="boolean"):
        t[torch.tensor(True, device="cuda")]
    with pytest.raises(IndexError, match="0-d float32"):
        t[torch.tensor(1.0, device="cuda")]
