import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodtensor as lt
from lodtensor import LoDError, fluid

from .reference import flatten_levels, nest
from .strategies import lengths_levels


class TestFromNestedList:
    def test_three_levels_of_ids(self):
        t = lt.from_nested_list([[[1, 2], [3]], [[4, 5, 6]]])
        assert t.lod() == [[0, 2, 3], [0, 2, 3, 6]] and t.dtype == np.int64
        assert t.data.tolist() == [1, 2, 3, 4, 5, 6]

    def test_dtype_inference_follows_numpy(self):
        assert lt.from_nested_list([[1.5, 2], [3]]).dtype == np.float64
        assert lt.from_nested_list([[True], [False, True]]).dtype == np.bool_
        assert lt.from_nested_list([[1, 2], [3]], dtype="float32").dtype == np.float32
        assert lt.from_nested_list([[np.float32(1)], [np.float32(2)]]).dtype == np.float32

    def test_rows_below_the_lod(self):
        t = lt.from_nested_list([[[1, 2], [3, 4]], [[5, 6]]], lod_level=1)
        assert t.shape() == [3, 2] and t.lod() == [[0, 2, 3]]
        t = lt.from_nested_list([[np.ones(3), np.zeros(3)], [np.ones(3)]])
        assert t.shape() == [3, 3] and t.lod() == [[0, 2, 3]]

    def test_empty_sequences_and_tuples(self):
        t = lt.from_nested_list([[[], [1]], [], ((2, 3),)])
        assert t.lod() == [[0, 2, 2, 3], [0, 0, 1, 3]]
        t = lt.from_nested_list([[], []])
        assert t.lod() == [[0, 0, 0]] and t.shape() == [0]

    def test_no_lod_level(self):
        t = lt.from_nested_list([1, 2, 3])
        assert t.lod() == [] and t.data.tolist() == [1, 2, 3]

    @pytest.mark.parametrize(
        "nested, kwargs, exc, pattern",
        [
            ([[1, 2], 3], {}, ValueError, "inconsistent depth: at depth 1, item 1 is int 3"),
            ([[[1], 2]], {}, ValueError, "inconsistent depth: at depth 2, item 1 is int 2"),
            ([[1, 2], [3]], {"lod_level": 3}, ValueError, "deeper than the nesting"),
            ([[[1, 2], [3]]], {"lod_level": 1}, ValueError, "same shape"),
            ([["a", "b"]], {}, TypeError, "must hold numbers, got str 'a'"),
            ([[None]], {}, TypeError, "must hold numbers"),
            ([[1]], {"dtype": "str"}, TypeError, "numeric or bool"),
            ([[1]], {"dtype": "nonsense"}, TypeError, "dtype must be a NumPy dtype"),
            ("abc", {}, TypeError, "must be a \\(nested\\) list"),
            ([[1]], {"lod_level": -1}, ValueError, "lod_level must be >= 0"),
        ],
        ids=["depth1", "depth2", "too-deep", "ragged-rows", "strings", "none", "str-dtype", "bad-dtype",
             "not-list", "negative-level"],
    )
    def test_bad_input(self, nested, kwargs, exc, pattern):
        with pytest.raises(exc, match=pattern):
            lt.from_nested_list(nested, **kwargs)

    @pytest.mark.parametrize(
        "nested, lod_level, lod",
        [([], 1, [[0]]), ([], 2, [[0], [0]]), ([[], []], 2, [[0, 0, 0], [0]]), ([[], [[]]], 2, [[0, 0, 1], [0, 0]])],
    )
    def test_levels_of_no_sequence(self, nested, lod_level, lod):
        """Empty lists at the deepest lod level asked for give a level of no sequence, not an error."""
        t = lt.from_nested_list(nested, lod_level=lod_level)
        assert t.lod() == lod and t.tolist() == nested and t.shape()[0] == 0

    def test_input_lists_untouched(self):
        nested = [[[1, 2], [3]], [[4]]]
        lt.from_nested_list(nested)
        assert nested == [[[1, 2], [3]], [[4]]]

    @given(lengths_levels(min_levels=1, max_levels=3), st.data())
    def test_matches_the_reference_flattening(self, levels, data):
        rows = list(range(sum(levels[-1])))
        nested = nest(rows, levels)
        t = lt.from_nested_list(nested, lod_level=len(levels))
        ref_rows, ref_levels = flatten_levels(nested, len(levels))
        assert t.recursive_sequence_lengths() == ref_levels == levels
        assert t.data.tolist() == ref_rows
        assert t.tolist() == nested


class TestPaddleFactories:
    def test_create_from_list_appends_a_unit_dim(self):
        t = lt.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], lt.CPUPlace())
        assert t.shape() == [5, 1] and t.dtype == np.int64 and t.lod() == [[0, 2, 5]]
        t = lt.create_lod_tensor([[1.5, 2], [3]], [[2, 1]], lt.CPUPlace())
        assert t.dtype == np.float64

    def test_create_from_two_level_list(self):
        t = lt.create_lod_tensor([[[1, 2], [3]], [[4, 5, 6]]], [[2, 1], [2, 1, 3]], lt.CPUPlace())
        assert t.lod() == [[0, 2, 3], [0, 2, 3, 6]] and t.shape() == [6, 1]

    def test_create_from_numpy_and_lodtensor(self):
        a = np.arange(10.0).reshape(5, 2)
        t = lt.create_lod_tensor(a, [[2, 3]], lt.CPUPlace())
        assert t.lod() == [[0, 2, 5]] and not np.shares_memory(t.data, a)
        u = lt.create_lod_tensor(t, [[1, 4]], lt.CPUPlace())
        assert u.lod() == [[0, 1, 5]] and t.lod() == [[0, 2, 5]]
        assert not np.shares_memory(u.data, t.data)

    def test_create_errors(self):
        with pytest.raises(LoDError, match="do not match: the list has lengths \\[2, 3\\] at level 0"):
            lt.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 2]], lt.CPUPlace())
        with pytest.raises(LoDError, match=r"add up to len\(data\)=5"):
            lt.create_lod_tensor(np.ones((5, 1)), [[2, 2]], lt.CPUPlace())
        with pytest.raises(TypeError, match="must be a LoDTensor, a NumPy array or a nested list, got str"):
            lt.create_lod_tensor("abc", [[2, 2]], lt.CPUPlace())

    def test_random_int(self):
        np.random.seed(0)
        t = lt.create_random_int_lodtensor([[2, 3]], [4], lt.CPUPlace(), 1, 2)
        assert t.shape() == [5, 4] and t.dtype == np.int64 and t.lod() == [[0, 2, 5]]
        assert set(np.unique(t.data).tolist()) == {1, 2}
        with pytest.raises(ValueError, match="low=3 must not exceed high=1"):
            lt.create_random_int_lodtensor([[2, 3]], [4], lt.CPUPlace(), 3, 1)
        with pytest.raises(TypeError, match="base_shape must be a list"):
            lt.create_random_int_lodtensor([[2, 3]], 4, lt.CPUPlace(), 0, 1)


class TestFluid:
    def test_paddle_constructor(self):
        t = fluid.LoDTensor()
        t.set(np.arange(10, dtype="float32").reshape(5, 2), fluid.CPUPlace())
        t.set_recursive_sequence_lengths([[2, 3]])
        assert isinstance(t, lt.LoDTensor) and t.lod() == [[0, 2, 5]]
        u = fluid.LoDTensor([[2, 3]])
        assert u.recursive_sequence_lengths() == [[2, 3]] and not u._is_initialized()

    def test_fluid_names(self):
        assert fluid.create_lod_tensor is lt.create_lod_tensor
        assert fluid.CUDAPlace(1) == lt.CUDAPlace(1) and str(fluid.CUDAPlace(1)) == "Place(gpu:1)"
        assert str(fluid.CUDAPinnedPlace()) == "Place(gpu_pinned)"


class TestPlaces:
    def test_places(self):
        assert lt.CPUPlace() == lt.CPUPlace() and hash(lt.CPUPlace()) == hash(lt.CPUPlace())
        assert lt.CUDAPlace(0) != lt.CUDAPlace(1) and lt.CUDAPlace(2).get_device_id() == 2
        assert lt.CPUPlace().is_cpu_place() and lt.CUDAPlace(0).is_gpu_place()
        with pytest.raises(ValueError, match="non-negative"):
            lt.CUDAPlace(-1)
        with pytest.raises(TypeError, match="must be an integer"):
            lt.CUDAPlace("0")
