"""Views flowing into the rest of the package: window views of regular dims (``narrow``, ``chunk``, slices and
int indexing of a regular dim), transposed views, windows of transposed views (and the other way round), and
plain strided inputs (arrays sliced with a step, transposed ones) given to the constructors.

Each entry point of the table runs on every view kind over NumPy and torch data and must give what it gives on
the view's ``contiguous()`` copy, without writing into the input. The tests above the table pin the bugs found
(each compared with torch 2.13 where torch has the call): a component, a slice of dim 0 and a same-shape
``view()`` of a transposed view were copies (torch's ``nt.transpose(1, 2)[0]`` and ``view`` share memory),
``nested_tensor_from_jagged`` copied strided ``values`` (torch shares them), and ``from_awkward`` read a nested
tensor as a dense array, losing its raggedness without a word.
"""

import copy
import io
import pickle
import warnings

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import interop

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LIBS = ["numpy", "torch"]
LENGTHS = (2, 3, 1)


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _comps(seed=0):
    g = np.random.default_rng(seed)
    return [g.standard_normal((n, 4, 6)) for n in LENGTHS]


def _base(lib, seed=0):
    comps = _comps(seed)
    return ln.nested_tensor([torch.from_numpy(c) if lib == "torch" else c for c in comps], layout="jagged")


def _theirs(seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.from_numpy(c) for c in _comps(seed)], layout=torch.jagged)


def _parts(x):
    return [_np(c) for c in x.unbind()]


def _shares(a, b):
    return np.shares_memory(_np(a), _np(b))


# the view kinds: (B, (L), 4, 6) input -> a view of it
KINDS = {
    "window": lambda nt: nt[..., 1:5:2],
    "index": lambda nt: nt[..., 2],
    "narrow": lambda nt: nt.narrow(2, 1, 2),
    "chunk": lambda nt: nt.chunk(2, -1)[1],
    "transposed": lambda nt: nt.transpose(1, 2),
    "window_of_transposed": lambda nt: nt.transpose(1, 2)[..., 1:3],
    "transposed_window": lambda nt: nt[..., 1:5:2].transpose(1, 2),
    "components": lambda nt: nt[1:][..., :3],
}
ROWS_FIRST = {"window", "index", "narrow", "chunk", "components"}  # the ragged dim first: a LoDTensor


# -- the bugs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("pick", [0, 1, -1])
def test_a_component_of_a_transposed_view_is_a_view_as_torchs(lib, pick):
    theirs = _theirs().transpose(1, 2)
    nt = _base(lib)
    part = nt.transpose(1, 2)[pick]
    np.testing.assert_array_equal(_np(part), _np(theirs[pick]))
    assert _shares(part, nt.values())  # torch's component shares values(); ours was a materialised copy
    assert theirs[pick].untyped_storage().data_ptr() == theirs.values().untyped_storage().data_ptr()  # torch's
    with torch.no_grad():
        part[...] = 5.0 if lib == "numpy" else torch.tensor(5.0, dtype=torch.float64)
    assert (_np(nt.unbind()[pick]) == 5.0).all()  # the write reached the input, as torch's


@pytest.mark.parametrize("lib", LIBS)
def test_select_0_of_a_transposed_view_is_a_view(lib):
    nt = _base(lib)
    view = nt.transpose(1, 2)
    part = view.select(0, 2)
    assert _shares(part, nt.values())
    np.testing.assert_array_equal(_np(part), _np(view.contiguous().unbind()[2]))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("take", ["slice", "chunk0"])
def test_components_of_a_transposed_view_stay_a_view(lib, take):
    """``nt.transpose(1, 2)[1:]`` and ``chunk(dim=0)`` keep the transposed view (as they keep a window); they
    were materialised copies, so writes through them were lost (torch refuses slices of a transposed jagged
    tensor; its components, ``unbind()``, are views)."""
    nt = _base(lib)
    view = nt.transpose(1, 2)
    part = view[1:] if take == "slice" else view.chunk(2, 0)[1]
    first = 1 if take == "slice" else 2
    want = view.contiguous().unbind()[first:]
    assert [tuple(x.shape) for x in _parts(part)] == [tuple(x.shape) for x in want]
    for got, exp in zip(_parts(part), want):
        np.testing.assert_array_equal(got, _np(exp))
    part.fill_(7.0)
    for i, comp in enumerate(nt.unbind()):
        assert (_np(comp) == 7.0).all() == (i >= first)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", ["transposed", "window_of_transposed", "transposed_window"])
def test_view_to_its_own_shape_of_a_transposed_view_is_a_view(lib, kind):
    theirs = _theirs().transpose(1, 2)
    same = theirs.view(theirs.shape)
    assert same.values().data_ptr() == theirs.values().data_ptr()  # torch: a view
    nt = _base(lib)
    view = KINDS[kind](nt)
    got = view.view(view.shape)
    for a, b in zip(_parts(got), _parts(view)):
        np.testing.assert_array_equal(a, b)
    got.fill_(3.0)  # was a copy: the write did not reach the input
    assert all((_np(a) == 3.0).all() for a in _parts(view))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("values_of", ["columns", "row_step", "transposed"])
def test_nested_tensor_from_jagged_shares_strided_values_as_torch(lib, values_of):
    dense = np.arange(10 * 4, dtype=np.float64).reshape(10, 4)
    pick = {"columns": lambda d: d[:, 1:3], "row_step": lambda d: d[::2], "transposed": lambda d: d.T[:, :5]}[values_of]
    ours_dense = torch.from_numpy(dense.copy()) if lib == "torch" else dense.copy()
    values = pick(ours_dense)
    offsets = np.array([0, 2, int(values.shape[0])])
    t_values = pick(torch.from_numpy(dense.copy()))
    theirs = torch.nested.nested_tensor_from_jagged(t_values, torch.from_numpy(offsets))
    assert theirs.values().data_ptr() == t_values.data_ptr() and not theirs.is_contiguous()
    nt = ln.nested_tensor_from_jagged(values, offsets)
    assert not nt.is_contiguous()
    assert nt.values() is values  # the given values, as torch's values()
    assert [tuple(x.shape) for x in _parts(nt)] == [tuple(x.shape) for x in theirs.unbind()]
    for a, b in zip(_parts(nt), _parts(theirs)):
        np.testing.assert_array_equal(a, b)
    assert nt.stride(1) == theirs.stride(1)
    with torch.no_grad():
        theirs.unbind()[1][0] = -7.0
    nt.unbind()[1][0] = -7.0  # a write into the nested tensor reaches values, as torch's
    np.testing.assert_array_equal(_np(values), _np(t_values))
    values[0] = 11.0  # and a write into values reaches the nested tensor
    assert (_np(nt.unbind()[0][0]) == 11.0).all()
    np.testing.assert_array_equal(_np(ln.to_padded_tensor(nt, 0.0)), _np(ln.to_padded_tensor(nt.contiguous(), 0.0)))


def test_nested_tensor_from_jagged_copies_negative_strides():
    values = np.arange(12.0).reshape(6, 2)[::-1]
    nt = ln.nested_tensor_from_jagged(values, np.array([0, 2, 6]))
    assert nt.is_contiguous() and not np.shares_memory(nt.values(), values)
    np.testing.assert_array_equal(nt.unbind()[1], values[2:])


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", ["plain", "window", "transposed"])
def test_from_awkward_refuses_a_nested_tensor(lib, kind):
    pytest.importorskip("awkward")
    nt = _base(lib)
    nt = {"plain": nt, "window": nt[..., 1:3], "transposed": nt.transpose(1, 2)}[kind]
    snapshot = _parts(nt)
    with pytest.raises(TypeError, match=r"from_awkward\(\): .*nested tensor.*to_lod_tensor\(\)"):
        interop.from_awkward(nt)  # read as the dense values(): the lod was lost, the transposed values garbled
    assert all(np.array_equal(a, b) for a, b in zip(_parts(nt), snapshot))


CONVERSIONS = ["to_arrow", "to_awkward", "to_sparse_csr", "to_sparse_coo", "to_ragged_tensor", "to_nested_jagged",
               "to_packed_sequence", "embedding_bag_inputs", "cu_seqlens"]


@pytest.mark.parametrize("kind", ["plain", "window", "transposed"])
@pytest.mark.parametrize("name", CONVERSIONS)
def test_lod_tensor_conversions_given_a_nested_tensor_raise_a_clear_error(name, kind):
    """The LoDTensor conversions of lodtensor.interop, called as functions on a nested tensor, raised
    AttributeError ("'WindowView' object has no attribute '_check_fits'"); now a TypeError saying what to call."""
    nt = _base("numpy")
    nt = {"plain": nt, "window": nt[..., 1:3], "transposed": nt.transpose(1, 2)}[kind]
    with pytest.raises(TypeError, match=rf"{name}\(\): expected a LoDTensor, got \w+; .*nt\.to_lod_tensor\(\)"):
        getattr(interop, name)(nt)
    with pytest.raises(TypeError, match=rf"{name}\(\): expected a LoDTensor, got list$"):
        getattr(interop, name)([[1.0], [2.0]])


# -- the table: every entry point over every view kind, against the contiguous copy ------------------------
def _save_load(x):
    f = io.BytesIO()
    torch.save(x, f)
    f.seek(0)
    return torch.load(f, weights_only=False)


def _bigger(v):
    """An ``output_size`` for ``to_padded_tensor`` one longer than the longest component in every dim."""
    return (v.size(0), *(int(s) + 1 for s in _np(v.nested_size()).max(0)))


def _values_lod(v):
    return lt.LoDTensor(v.values(), [_np(v.offsets()).tolist()])


ENTRIES = {
    "to_padded_tensor": lambda v: ln.to_padded_tensor(v, -1.0),
    "to_padded_output_size": lambda v: ln.to_padded_tensor(v, 0.5, output_size=_bigger(v)),
    "to_padded": lambda v: v.to_padded(),
    "to_masked": lambda v: v.to_masked(),
    "to_packed": lambda v: v.to_packed(),
    "to_tensor_list": lambda v: v.to_tensor_list(),
    "unbind": lambda v: list(v.unbind()),
    "component": lambda v: [v[i] for i in range(len(LENGTHS) - 1)],
    "slice0": lambda v: v[1:],
    "chunk0": lambda v: v.chunk(2, 0)[1],
    "view_same": lambda v: v.view(v.shape),
    "nested_size": lambda v: v.nested_size(),
    "clone": lambda v: v.clone(),
    "contiguous": lambda v: v.contiguous(),
    "pickle": lambda v: pickle.loads(pickle.dumps(v)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "torch.save": _save_load,
    "to_torch": lambda v: v.to_torch(),
    "numpy": lambda v: v.numpy(),
    "to_dtype": lambda v: v.to(torch.float32 if v.backend.name == "torch" else np.float32),
    "mul": lambda v: v * 2,
    "repr": repr,
    "dlpack_is_values": lambda v: (np.from_dlpack(v), v.values()),
    "torch_dlpack_is_values": lambda v: (torch.from_dlpack(v), v.values()),
}
LOD_ENTRIES = {  # the ragged dim first: a LoDTensor and the interop built on it
    "to_lod_tensor": lambda v: v.to_lod_tensor(),
    "from_jagged_roundtrip": lambda v: ln.nested_tensor_from_jagged(v.values(), v.offsets()),
    "lod_to_nested": lambda v: v.to_lod_tensor().to_nested(),
    "values_lod_tensor": _values_lod,
    "to_arrow": lambda v: v.to_lod_tensor().to_arrow().to_pylist(),
    "values_to_arrow": lambda v: _values_lod(v).to_arrow().to_pylist(),
    "to_awkward": lambda v: v.to_lod_tensor().to_awkward().to_list(),
    "values_to_awkward": lambda v: _values_lod(v).to_awkward().to_list(),
    "to_nested_jagged": lambda v: list(v.to_lod_tensor().to_nested_jagged().unbind()),
    "values_to_nested_jagged": lambda v: list(_values_lod(v).to_nested_jagged().unbind()),
    "lod_dlpack": lambda v: torch.from_dlpack(_values_lod(v)),
    "lod_from_dlpack": lambda v: interop.from_dlpack(_values_lod(v)),
    "to_packed_sequence": lambda v: v.to_lod_tensor().to_packed_sequence().data,
    "values_pickle": lambda v: pickle.loads(pickle.dumps(_values_lod(v))),
    "values_to_sparse_csr": lambda v: _values_lod(v[..., 0] if v.dim() == 4 else v).to_sparse_csr().to_dense(),
}


def _canon(r):
    """Plain nested Python values of a result (arrays as lists, nested tensors as their components)."""
    if isinstance(r, ln.NestedTensor):
        return ("nested", [(_np(c).shape, _np(c).tolist()) for c in r.unbind()])
    if isinstance(r, lt.LoDTensor):
        return ("lod", r.lod(), _canon(r.data))
    if isinstance(r, (list, tuple)):
        return [_canon(x) for x in r]
    if isinstance(r, torch.Tensor) and r.is_nested:
        return [_canon(c) for c in r.unbind()]
    if isinstance(r, (torch.Tensor, np.ndarray)):
        a = _np(r)
        return (a.shape, str(a.dtype).replace("torch.", ""), a.tolist())
    return r


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("entry", list(ENTRIES) + list(LOD_ENTRIES))
def test_entry_point_on_a_view_matches_its_contiguous_copy(entry, kind, lib):
    if entry in LOD_ENTRIES and kind not in ROWS_FIRST:
        pytest.skip("ragged in its second dim: no LoDTensor (to_lod_tensor refuses, as for the copy)")
    fn = ENTRIES.get(entry) or LOD_ENTRIES[entry]
    nt = _base(lib)
    snapshot = _parts(nt)
    view = KINDS[kind](nt)
    if entry.endswith("dlpack_is_values"):  # exports share values() (strided as it is), never a compact copy
        got, values = fn(view)
        np.testing.assert_array_equal(_np(got), _np(values))
        assert _shares(got, nt.values())
        return
    want = fn(view.contiguous().clone())
    got = fn(view)
    if entry == "repr":
        assert got == want
    else:
        assert _canon(got) == _canon(want)
    assert all(np.array_equal(a, b) for a, b in zip(_parts(nt), snapshot)), "the entry point wrote into the input"
