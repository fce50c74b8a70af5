"""Construction, metadata, unbind views, repr and the bad-input table of lodtensor.nested."""

import warnings

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor.errors import BackendMismatchError


def test_components_of_any_equal_rank(backend):
    images = [backend.array(np.full((3, h, w), i, np.float32)) for i, (h, w) in enumerate([(4, 5), (2, 7), (0, 3)])]
    nt = ln.nested_tensor(images)
    assert nt.dim() == 4 and nt.size(0) == 3 and nt.size(1) == 3 and len(nt) == 3
    assert nt.nested_size().tolist() == [[3, 4, 5], [3, 2, 7], [3, 0, 3]]
    assert nt.nested_strides().tolist() == [[20, 5, 1], [14, 7, 1], [0, 3, 1]]
    for d in (2, 3, -1):
        with pytest.raises(ValueError, match=f"Given dimension {d % 4} is irregular"):
            nt.size(d)
    assert nt.numel() == 3 * 20 + 3 * 14
    for got, want in zip(nt.unbind(), images):
        assert backend.numpy(got).shape == tuple(want.shape)
        np.testing.assert_array_equal(backend.numpy(got), backend.numpy(want))


def test_single_and_zero_length_components():
    nt = ln.nested_tensor([np.zeros((0, 4))])
    assert nt.size(1) == 0 and nt.size(2) == 4 and nt.shape == (1, 0, 4)
    assert ln.to_padded_tensor(nt, 1.0).shape == (1, 0, 4)
    nt = ln.nested_tensor([np.arange(3.0)])
    assert nt.size(1) == 3 and nt.to_padded_tensor(0).tolist() == [[0.0, 1.0, 2.0]]
    empty = ln.nested_tensor([])
    assert empty.dim() == 1 and empty.size(0) == 0 and empty.dtype == np.float32 and empty.unbind() == ()
    assert ln.to_padded_tensor(empty, 0.0).shape == (0,)


def test_scalar_components():
    nt = ln.nested_tensor([1, 2, 3])
    assert nt.dim() == 1 and nt.dtype == np.int64 and nt.nested_size().shape == (3, 0)
    assert [int(c) for c in nt.unbind()] == [1, 2, 3]
    assert nt.to_padded_tensor(0, (5,)).tolist() == [1, 2, 3, 0, 0]


@pytest.mark.parametrize(
    "items, dtype",
    [
        ([[1, 2], [3]], np.int64),
        ([[1.0, 2], [3]], np.float32),
        ([[True], [False, True]], np.bool_),
        ([np.array([1.0, 2.0]), np.array([3.0])], np.float64),
        ([np.array([1, 2], np.int32), [3.7]], np.int32),  # the first component's dtype wins, as in torch
        ([[1 + 2j]], np.complex64),
    ],
)
def test_dtype_inference_follows_torch(items, dtype):
    assert ln.nested_tensor(items).dtype == dtype


def test_jagged_layout_refuses_mixed_dtypes_as_torch():
    """torch's jagged layout refuses components of different dtypes (with dtype= too); we built the first's."""
    torch = pytest.importorskip("torch")
    a, b = torch.arange(3, dtype=torch.int32), torch.ones(2, dtype=torch.float64)
    for build in (ln.nested_tensor, ln.as_nested_tensor):
        for kw in ({}, {"dtype": torch.float64}):
            with pytest.raises(RuntimeError, match="same dtype"):
                getattr(torch.nested, build.__name__)([a, b], layout=torch.jagged, **kw)
            with pytest.raises(TypeError, match=r"must have the same dtype, got torch.float64, torch.int32"):
                build([a, b], layout="jagged", **kw)
        assert build([a, b]).dtype == torch.int32  # the strided layout: the first component's dtype, as torch
    with pytest.raises(TypeError, match="same dtype"):
        ln.nested_tensor([[1.0, 2.0], [3]], layout="jagged")  # float32 and int64, as torch reads the lists
    assert ln.nested_tensor([a, a + 1], layout="jagged").dtype == torch.int32


def test_dtype_argument_spellings():
    torch = pytest.importorskip("torch")
    for spelling in ("float64", np.float64, np.dtype("float64"), torch.float64):
        assert ln.nested_tensor([[1, 2], [3]], dtype=spelling).dtype == np.float64
    nt = ln.nested_tensor([torch.ones(2), torch.ones(3)], dtype="float16")
    assert nt.dtype == torch.float16


def test_layouts():
    torch = pytest.importorskip("torch")
    for layout in ("strided", torch.strided, None):
        assert ln.nested_tensor([[1.0]], layout=layout).layout == "strided"
    for layout in ("jagged", torch.jagged):
        assert ln.nested_tensor([[1.0], [2.0, 3.0]], layout=layout).layout == "jagged"
    assert "layout='jagged'" in repr(ln.nested_tensor([[1.0]], layout="jagged"))


def test_unbind_views_write_through(backend):
    nt = ln.nested_tensor([backend.array(np.zeros((2, 3))), backend.array(np.zeros((1, 3)))])
    first, second = nt.unbind()
    second[0, 1] = 5
    assert backend.numpy(nt.to_padded_tensor(0.0))[1, 0, 1] == 5
    images = ln.nested_tensor([backend.array(np.zeros((2, 3))), backend.array(np.zeros((3, 1)))])
    images.unbind()[1][2, 0] = 7
    assert backend.numpy(images.to_padded_tensor(0.0))[1, 2, 0] == 7


def test_nested_tensor_copies_its_inputs():
    a = np.zeros(3)
    nt = ln.nested_tensor([a])
    nt.unbind()[0][0] = 1
    assert a[0] == 0


def test_repr_in_torch_style():
    nt = ln.nested_tensor([np.arange(3), np.arange(2)])
    assert repr(nt) == "nested_tensor([\n  array([0, 1, 2]),\n  array([0, 1])\n])"
    assert repr(ln.nested_tensor([])) == "nested_tensor([\n\n])"
    long = repr(ln.nested_tensor([[i] for i in range(20)]))
    assert "... (14 more components)" in long and long.count("array") == 6


def test_repr_matches_torch_for_torch_data():
    torch = pytest.importorskip("torch")
    parts = [torch.arange(6.0).reshape(2, 3), torch.arange(3.0).reshape(1, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype warning (issued once per process)
        theirs = torch.nested.nested_tensor(parts)
    assert repr(ln.nested_tensor(parts)) == repr(theirs)
    leaf = ln.nested_tensor(parts, requires_grad=True)
    assert repr(leaf).endswith("], requires_grad=True)")
    assert repr(leaf * 2).endswith("], grad_fn=<MulBackward0>)")


def test_as_nested_tensor_variants(backend):
    dense = backend.array(np.arange(24.0).reshape(2, 3, 4))
    nt = ln.as_nested_tensor(dense)
    assert nt.nested_size().tolist() == [[3, 4], [3, 4]]
    assert backend.numpy(nt.unbind()[1])[0, 0] == 12.0
    nt.unbind()[0][0, 0] = -1  # shares memory with the contiguous input
    assert backend.numpy(dense)[0, 0, 0] == -1
    assert ln.as_nested_tensor(nt) is nt
    nt64 = ln.as_nested_tensor(nt, dtype="float32")
    assert nt64 is not nt and "float32" in str(nt64.dtype)
    listed = ln.as_nested_tensor([backend.array([1.0, 2.0]), backend.array([3.0])])
    assert listed.nested_size().tolist() == [[2], [1]]
    assert ln.as_nested_tensor(nt, layout="jagged").layout == "jagged"


def test_lod_tensor_round_trip_shares_memory():
    t = lt.LoDTensor(np.arange(12.0).reshape(6, 2), [[0, 2, 2, 6]])
    nt = t.to_nested()
    assert nt.nested_size().tolist() == [[2, 2], [0, 2], [4, 2]]
    assert np.shares_memory(nt.unbind()[2], t.data)
    back = nt.to_lod_tensor()
    assert back.lod() == [[0, 2, 2, 6]] and np.shares_memory(back.data, t.data)
    assert np.shares_memory(ln.nested_tensor([np.ones((2, 3)), np.ones((1, 3))]).to_lod_tensor().data,
                            ln.nested_tensor([np.ones((2, 3))])._buffer) is False
    two = lt.from_nested_list([[[1, 2], [3]], [[4, 5, 6]]])
    assert two.to_nested().nested_size().tolist() == [[2], [1], [3]]  # the finest level's sequences
    assert two.to_nested(level=0).nested_size().tolist() == [[3], [3]]
    with pytest.raises(ValueError, match="ragged in the\n?.*first component dim only|first component dim only"):
        ln.nested_tensor([np.ones((2, 3)), np.ones((2, 4))]).to_lod_tensor()


def test_nested_tensor_from_jagged():
    values = np.arange(10.0).reshape(5, 2)
    nt = ln.nested_tensor_from_jagged(values, np.array([0, 2, 5]))
    assert nt.layout == "jagged" and np.shares_memory(nt.unbind()[1], values)
    assert ln.nested_tensor_from_jagged(values, lengths=np.array([1, 4])).nested_size().tolist() == [[1, 2], [4, 2]]
    short = ln.nested_tensor_from_jagged(values, np.array([0, 2, 4]))  # torch 2.13 reads rows 0:4 too
    assert short.nested_size().tolist() == [[2, 2], [2, 2]] and short.values() is values
    with pytest.raises(ValueError, match=r"must end at len\(data\)=5"):
        ln.nested_tensor_from_jagged(values, np.array([0, 2, 6]))


@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
def test_nested_tensor_from_jagged_over_torch_values_takes_host_or_torch_offsets(kind):
    torch = pytest.importorskip("torch")
    values = torch.arange(10.0).reshape(5, 2)
    offsets = {"list": [0, 2, 5], "numpy": np.array([0, 2, 5]), "torch": torch.tensor([0, 2, 5])}[kind]
    nt = ln.nested_tensor_from_jagged(values, offsets)
    assert nt.nested_size().tolist() == [[2, 2], [3, 2]]
    assert nt.unbind()[1].data_ptr() == values[2].data_ptr()  # a view of the values
    lengths = {"list": [2, 3], "numpy": np.array([2, 3]), "torch": torch.tensor([2, 3])}[kind]
    assert ln.nested_tensor_from_jagged(values, lengths=lengths).nested_size().tolist() == [[2, 2], [3, 2]]


def test_requires_grad_and_leaves():
    torch = pytest.importorskip("torch")
    a = torch.arange(3.0, requires_grad=True)
    leaf = ln.nested_tensor([a, torch.ones(2)], requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf
    kept = ln.as_nested_tensor([a, torch.ones(2)])
    assert kept.requires_grad and not kept.is_leaf
    kept.backward(ln.nested_tensor([torch.ones(3), torch.zeros(2)]))
    assert a.grad.tolist() == [1.0, 1.0, 1.0]
    assert ln.nested_tensor([a]).requires_grad is False


def test_pin_memory_needs_cuda():
    with pytest.raises(RuntimeError, match="CUDA"):
        ln.nested_tensor([[1.0]], pin_memory=True)


BAD_INPUTS = [
    ("different rank", lambda: ln.nested_tensor([np.ones(2), np.ones((2, 2))]), ValueError,
     r"same dimension\. Found dimension 2 for Tensor at index 1 and dimension 1 for Tensor at index 0"),
    ("ragged list item", lambda: ln.nested_tensor([[[1, 2], [3]]]), ValueError, r"tensor_list\[0\] is a ragged"),
    ("string item", lambda: ln.nested_tensor(["ab"]), TypeError, r"tensor_list\[0\] must be an array.*str 'ab'"),
    ("None item", lambda: ln.nested_tensor([[1.0], None]), TypeError, r"tensor_list\[1\].*NoneType"),
    ("object array", lambda: ln.nested_tensor([np.array(["x"])]), TypeError, "numeric or bool dtype"),
    ("not a list", lambda: ln.nested_tensor(np.ones(3)), TypeError, "list or tuple"),
    ("as_nested 1-d", lambda: ln.as_nested_tensor(np.ones(3)), ValueError, r"dim\(\) > 1, got shape \(3,\)"),
    ("as_nested scalar", lambda: ln.as_nested_tensor(3), TypeError, "Expected first argument to be a tensor"),
    ("jagged empty", lambda: ln.nested_tensor([], layout="jagged"), ValueError, "empty tensor list"),
    ("jagged 2 ragged", lambda: ln.nested_tensor([np.ones((1, 2)), np.ones((2, 3))], layout="jagged"), ValueError,
     r"single ragged dimension; irregular dims: \[1, 2\]"),
    ("bad layout", lambda: ln.nested_tensor([[1.0]], layout="coo"), ValueError, "layout is unsupported.*'coo'"),
    ("requires_grad int", lambda: ln.nested_tensor([[1, 2]], requires_grad=True), TypeError,
     "floating point and complex dtype"),
    ("requires_grad numpy", lambda: ln.nested_tensor([np.ones(1)], requires_grad=True), TypeError,
     "needs torch data"),  # (Python lists alone build torch data then: test_torch_own_cases)
    ("bad dtype", lambda: ln.nested_tensor([[1.0]], dtype="U3"), TypeError, "numeric or bool dtype"),
    ("size out of range", lambda: ln.nested_tensor([[1.0]]).size(2), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ("size irregular", lambda: ln.nested_tensor([[1.0], [1.0, 2.0]]).size(1), RuntimeError,
     r"Given dimension 1 is irregular and does not have a size"),
    ("int of a ragged size", lambda: int(ln.nested_tensor([[1.0], [1.0, 2.0]]).shape[1]), RuntimeError,
     r"int\(\): the ragged dim j\d+ has no single size \(its sizes are \[1, 2\]\)"),
    ("NestedTensor()", ln.NestedTensor, TypeError, "cannot be called directly"),
    ("index array", lambda: ln.nested_tensor([[1.0]])[..., [0]], IndexError, "must be ints, slices, None or"),
    ("index slice ragged", lambda: ln.nested_tensor([[1.0], [1.0, 2.0]])[:, :1], RuntimeError,
     "slice.*on ragged dim"),
    ("index too many", lambda: ln.nested_tensor([[1.0]])[..., 0, 0, 0], IndexError, "too many indices"),
    ("bool", lambda: bool(ln.nested_tensor([[1.0]])), ValueError, "ambiguous"),
    ("np.array", lambda: np.asarray(ln.nested_tensor([[1.0]])), TypeError, "no single dense array"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs(case):
    _, call, kind, message = case
    with pytest.raises(kind, match=message):
        call()


def test_mixed_backends_are_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(BackendMismatchError, match="mixes 'numpy' and 'torch'"):
        ln.nested_tensor([np.ones(2), torch.ones(2)])
    nt = ln.nested_tensor([torch.ones(2), [1.0, 2.0, 3.0]])  # python lists join any backend
    assert nt.dtype == torch.float32 and nt.nested_size().tolist() == [[2], [3]]


def test_failed_construction_mutates_nothing():
    items = [np.ones(2), [[1.0]]]
    before = [np.array(items[0]), [[1.0]]]
    with pytest.raises(ValueError):
        ln.nested_tensor(items)
    np.testing.assert_array_equal(items[0], before[0])
    assert items[1] == before[1] and len(items) == 2


def test_numpy_use_never_imports_torch():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, lodtensor.nested as ln; nt = ln.nested_tensor([[1.0, 2.0], [3.0]]); "
        "ln.gelu(nt); ln.softmax(nt, 1); nt.to_padded(0); repr(nt); "
        "ln.linear(nt.reshape(2, -1, 1), np.ones((1, 1), np.float32)); "
        "print([m for m in ('torch', 'cupy') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
