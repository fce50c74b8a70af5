"""Operators, in-place operators, casts and view ops of NestedTensor against real torch.nested (jagged)."""

import numpy as np
import pytest

import lodtensor.nested as ln

torch = pytest.importorskip("torch")


def _pair(parts):
    return ln.nested_tensor(parts, layout=torch.jagged), torch.nested.nested_tensor(parts, layout=torch.jagged)


def _same(ours, theirs):
    a, b = ours.unbind(), theirs.unbind()
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), (x, y)


def test_invert_is_bitwise_not_and_shifts_shift():
    ints, tj = _pair([torch.tensor([0, 1, -2]), torch.tensor([5])])
    _same(~ints, ~tj)  # bitwise on integers (logical_not gave bools)
    _same(torch.bitwise_not(ints), torch.bitwise_not(tj))
    _same(ints << 2, tj << 2)
    _same(ints >> 1, tj >> 1)
    bools, bj = _pair([torch.tensor([True, False]), torch.tensor([False])])
    _same(~bools, ~bj)
    floats, _ = _pair([torch.tensor([1.0, 2.0])])
    for op in (lambda: ~floats, lambda: floats & 1, lambda: floats << 1):
        with pytest.raises(TypeError, match="needs integer or bool data"):
            op()
    numpy_ints = ln.nested_tensor([np.array([1, 2], np.int32)])
    assert (~numpy_ints).to_tensor_list()[0].tolist() == [-2, -3] and (~numpy_ints).dtype == np.int32


def test_augmented_assignment_writes_in_place():
    nt, tj = _pair([torch.zeros(2), torch.zeros(3)])
    alias, part, their_part = nt, nt.unbind()[0], tj.unbind()[0]
    nt += 1
    nt *= 2
    tj += 1
    tj *= 2
    assert nt is alias
    _same(alias, tj)
    assert torch.equal(part, their_part)  # a view of the buffer sees the write, as torch's
    ints = ln.nested_tensor([torch.tensor([1, 2])])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        ints += 0.5
    assert ints.to_tensor_list()[0].tolist() == [1, 2]


def test_size_one_component_dims_broadcast_against_dense_operands():
    nt, tj = _pair([torch.randn(2, 1), torch.randn(3, 1)])
    bias, batch = torch.randn(4), torch.randn(2, 1, 4)
    _same(nt + bias, tj + bias)
    _same(nt * batch, tj * batch)
    deep, deep_j = _pair([torch.randn(2, 3, 1), torch.randn(4, 3, 1)])
    dense = torch.randn(3, 2)
    _same(deep * dense, deep_j * dense)
    assert (deep * dense).nested_size().tolist() == [[2, 3, 2], [4, 3, 2]]
    with pytest.raises(RuntimeError, match="do not match the sizes"):
        nt += bias  # in place the sizes cannot grow, as torch refuses


def test_numpy_backend_keeps_the_dtype_of_rounded_integer_division():
    for dtype in (np.int8, np.uint8, np.int32):
        nt = ln.nested_tensor([np.array([7, 5], dtype), np.array([9], dtype)])
        for mode in ("trunc", "floor"):
            out = ln.div(nt, 2, rounding_mode=mode)
            assert out.dtype == dtype and out.to_tensor_list()[0].tolist() == [3, 2]


def test_permute_matches_torch():
    nt, tj = _pair([torch.randn(2, 3, 4), torch.randn(5, 3, 4)])
    for dims in ((0, 3, 1, 2), (0, 2, 1, 3), (0, 1, 3, 2), (0, -1, -3, -2)):
        _same(nt.permute(*dims), tj.permute(*dims))
        _same(torch.permute(nt, dims), torch.permute(tj, dims))
    with pytest.raises(ValueError, match="dim 0 \\(the batch dim\\) must stay in place"):
        nt.permute(1, 0, 2, 3)
    with pytest.raises(ValueError, match="repeated dim"):
        nt.permute(0, 1, 1, 2)


def test_dtype_casts_match_torch():
    nt, tj = _pair([torch.tensor([1.5, -2.5]), torch.tensor([0.0])])
    for name in ("long", "int", "short", "char", "byte", "bool", "double", "half"):
        _same(getattr(nt, name)(), getattr(tj, name)())
    _same(nt.type(torch.float64), tj.type(torch.float64))
    assert nt.type() == "float32" and nt.long().long().dtype == torch.int64


def test_masked_fill_with_a_dense_mask_broadcasts_as_torch():
    nt, tj = _pair([torch.randn(2, 3), torch.randn(4, 3)])
    mask = torch.tensor([True, False, True])
    _same(nt.masked_fill(mask, -1.0), tj.masked_fill(mask, -1.0))
    with pytest.raises(TypeError, match="only supports boolean masks"):
        nt.masked_fill(torch.ones(3), 0.0)


def test_dropout_in_eval_takes_any_dtype():
    ints = ln.nested_tensor([torch.tensor([1, 2])])
    kept = torch.nn.functional.dropout(ints, 0.5, training=False)  # a copy, as torch's strided layout gives
    assert kept is not ints and kept.dtype == torch.int64 and kept.to_tensor_list()[0].tolist() == [1, 2]
    assert kept.values().data_ptr() != ints.values().data_ptr()
    with pytest.raises(TypeError, match="dropout"):
        torch.nn.functional.dropout(ints, 0.5, training=True)


def test_a_transposed_view_is_not_contiguous_until_copied():
    nt, tj = _pair([torch.randn(2, 3), torch.randn(4, 3)])
    view = nt.transpose(1, 2)
    assert view.is_contiguous() == tj.transpose(1, 2).is_contiguous() == False  # noqa: E712
    copy = view.contiguous()
    assert copy.is_contiguous() and nt.contiguous() is nt
    _same(copy, tj.transpose(1, 2).contiguous())


def test_deepcopy_of_a_leaf_is_a_new_leaf():
    import copy

    nt = ln.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)], layout=torch.jagged).requires_grad_()
    twin = copy.deepcopy(nt)
    assert twin.is_leaf and twin.requires_grad and twin.values().data_ptr() != nt.values().data_ptr()
    (twin * 2).values().sum().backward()
    assert nt.grad is None and torch.equal(twin.grad.values(), torch.full((3, 3), 2.0))  # not the original's
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(nt * 2)
    holey = ln.nested_tensor_from_jagged(torch.arange(6.0), torch.tensor([0, 2, 6]), lengths=torch.tensor([1, 3]))
    assert copy.deepcopy(holey).lengths().tolist() == [1, 3]


def test_nested_operands_broadcast_their_size_one_dims():
    nt, tj = _pair([torch.randn(3, 8), torch.randn(4, 8)])
    w, wj = nt.sum(-1, keepdim=True), tj.sum(-1, keepdim=True)  # (B, j, 1)
    _same(nt * w, tj * wj)
    _same(w + nt, wj + tj)
    pooled = (nt * ln.softmax(w, dim=1)).sum(1)  # attention pooling
    expected = (tj * torch.softmax(wj, dim=1)).sum(1)
    assert torch.allclose(pooled, expected)
    with pytest.raises(ValueError, match="does not support broadcasting"):
        nt * ln.nested_tensor([torch.randn(3, 2), torch.randn(4, 2)], layout=torch.jagged)


def test_the_njt_surface_user_code_reaches_for():
    nt, tj = _pair([torch.ones(2, 3), torch.ones(1, 3)])
    assert nt.layout == torch.jagged == tj.layout and torch.jagged == nt.layout and nt.layout == "jagged"
    assert nt.layout != torch.strided and ln.nested_tensor([torch.ones(2)]).layout == torch.strided
    assert nt.cpu() is nt and not nt.is_cuda and nt.is_floating_point() and nt.element_size() == 4
    _same(nt.bfloat16(), tj.bfloat16())
    other = torch.zeros(1, dtype=torch.float64)
    _same(nt.type_as(other), tj.type_as(other))
    _same(nt.to(other), tj.to(other))


def test_products_and_reductions_that_contract_the_ragged_dim_are_dense_as_torch():
    nt, tj = _pair([torch.randn(2, 3), torch.randn(4, 3)])
    gram, gram_j = nt.transpose(1, 2) @ nt, tj.transpose(1, 2) @ tj  # (B, D, j) @ (B, j, D)
    assert isinstance(gram, torch.Tensor) and torch.allclose(gram, gram_j)
    pooled = nt.transpose(1, 2).sum(2)
    assert isinstance(pooled, torch.Tensor) and torch.allclose(pooled, tj.transpose(1, 2).sum(2))


def test_matmul_with_a_dense_batch_linear_with_a_vector_and_reshape_of_minus_one():
    nt, tj = _pair([torch.randn(2, 3), torch.randn(4, 3)])
    per_component = torch.randn(2, 3, 5)
    _same(torch.matmul(nt, per_component), torch.matmul(tj, per_component))
    w = torch.randn(3)
    for ours, theirs in zip(torch.nn.functional.linear(nt, w).unbind(), torch.nn.functional.linear(tj, w).unbind()):
        assert ours.shape == theirs.shape and torch.allclose(ours, theirs)  # the last dim contracted away
    with pytest.raises(ValueError, match="a 1-d weight takes no bias"):  # dense torch refuses it too
        torch.nn.functional.linear(nt, w, torch.tensor(0.5))
    _same(nt.reshape(-1, -1, 3), tj.reshape(-1, -1, 3))


def test_broadcasting_keeps_zero_sizes_and_never_grows_the_ragged_dim():
    empty, empty_j = _pair([torch.zeros(0, 4), torch.zeros(0, 4)])
    bias = torch.randn(4)
    assert (empty + bias).nested_size().tolist() == [[0, 4], [0, 4]]  # 0 against 1 stays 0
    empty += bias
    assert empty.nested_size().tolist() == [[0, 4], [0, 4]]
    ones, ones_j = _pair([torch.randn(1, 4), torch.randn(1, 4)])
    with pytest.raises(ValueError, match="irregular"):
        ones + torch.randn(3, 4)  # the ragged dim: every length 1 here, yet it is ragged (j) and torch refuses
    with pytest.raises(RuntimeError):
        ones_j + torch.randn(3, 4)
    zero_cols, _ = _pair([torch.zeros(2, 0), torch.zeros(3, 0)])
    one_col, _ = _pair([torch.zeros(2, 1), torch.zeros(3, 1)])
    assert (one_col + zero_cols).nested_size().tolist() == [[2, 0], [3, 0]]


def test_contiguous_of_a_transposed_view_is_a_new_copy_of_what_it_reads():
    nt = ln.nested_tensor([torch.arange(6.0).reshape(2, 3)], layout=torch.jagged)
    view = nt.transpose(1, 2)
    first, second = view.contiguous(), view.contiguous()
    first.add_(100)
    assert torch.equal(second.unbind()[0], nt.unbind()[0].T) and torch.equal(view.unbind()[0], nt.unbind()[0].T)
    nt.mul_(0)
    assert not view.contiguous().values().any()
