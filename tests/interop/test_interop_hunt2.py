"""Second hunt through lodtensor.interop: property tests of every to_X / from_X pair against the real
libraries (pyarrow, awkward, torch, scipy), and one regression per bug found (the docstring says what
it did before).

The properties: values, lod, row shape and dtype come back exactly (dtype changed only where
docs/interop.md says: bfloat16 widened to float32, the other byte order swapped to native), buffers
shared where documented, and the input never modified.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from tests.strategies import lengths_levels

pa = pytest.importorskip("pyarrow")
ak = pytest.importorskip("awkward")
torch = pytest.importorskip("torch")

_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
           "float64", "complex64", "complex128"]
_ROW_SHAPES = [(), (3,), (2, 0), (0, 4)]


def _values(rng, dtype, size):
    """``size`` values of ``dtype`` that reach its extremes (uint64 near 2**64, NaN and inf for floats)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, info.max - 1, 0, 1, info.min + 1], dtype=dtype)
        out = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        pick = rng.integers(0, 2, size).astype(bool)
        out[pick] = pool[rng.integers(0, pool.size, int(pick.sum()))]
        return out
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    pool = np.array([np.nan, np.inf, -np.inf, -0.0, np.finfo(real).max, np.finfo(real).tiny], dtype=real)
    out = rng.standard_normal(size).astype(real)
    pick = rng.integers(0, 4, size) == 0
    out[pick] = pool[rng.integers(0, pool.size, int(pick.sum()))]
    if dtype.kind == "c":
        return (out + 1j * rng.standard_normal(size).astype(real)).astype(dtype)
    return out


@st.composite
def tensors(draw, dtypes=_DTYPES, min_levels=0, max_levels=3, row_shapes=_ROW_SHAPES):
    """A LoDTensor with any lod (none, empty sequences, levels of no sequence), dtype and row shape; its
    data maybe in the other byte order, a strided view, or read-only."""
    n_levels = draw(st.integers(min_levels, max_levels))
    levels = draw(lengths_levels(n_levels, n_levels)) if n_levels else None
    rows = sum(levels[-1]) if levels else draw(st.integers(0, 5))
    row_shape = draw(st.sampled_from(row_shapes))
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    size = rows * int(np.prod(row_shape))
    layout = draw(st.sampled_from(["plain", "swapped", "strided", "readonly"]))
    if layout == "swapped" and dtype.itemsize > 1:
        dtype = dtype.newbyteorder()
    data = _values(rng, _native(dtype), size).astype(dtype).reshape((rows, *row_shape))
    if layout == "strided":
        wide = np.zeros((rows, 2, *row_shape), dtype=dtype)
        wide[:, 1] = data
        data = wide[:, 1]  # not contiguous
    if layout == "readonly":
        data.setflags(write=False)
    return lt.LoDTensor(data, recursive_sequence_lengths=levels) if levels else lt.LoDTensor(data)


def _native(dtype):
    return np.dtype(dtype).newbyteorder("=")


def _same(back, t, dtype=None):
    """``back`` holds exactly ``t``'s lod, row shape and values (bitwise: NaN and -0.0 included)."""
    assert back.lod() == t.lod()
    a = np.ascontiguousarray(back.numpy())
    b = np.asarray(t.numpy())
    assert a.shape == b.shape
    assert a.dtype == (dtype if dtype is not None else _native(b.dtype))
    assert np.array_equal(a.view(np.uint8), np.ascontiguousarray(b, dtype=_native(b.dtype)).view(np.uint8))


class _Untouched:
    """Remembers a tensor's data (bytes), flags and lod; ``check()`` asserts nothing wrote them."""

    def __init__(self, t):
        self.t, self.bytes, self.lod = t, np.ascontiguousarray(t.data).tobytes(), t.lod()
        self.writeable = t.data.flags.writeable

    def check(self):
        assert self.t.lod() == self.lod and self.t.data.flags.writeable == self.writeable
        assert np.ascontiguousarray(self.t.data).tobytes() == self.bytes


# -- property tests: NumPy data through every door -------------------------------------------------------
@_SETTINGS
@given(tensors(dtypes=[d for d in _DTYPES if not d.startswith("complex")]))
def test_arrow_round_trip(t):
    keep = _Untouched(t)
    arr = t.to_arrow()
    back = lt.from_arrow(arr)
    _same(back, t)
    assert not back.data.flags.writeable  # Arrow's memory, read-only
    if t.data.dtype.isnative and t.data.flags.c_contiguous and t.data.dtype != bool and t.data.size:
        assert np.shares_memory(back.data, t.data)  # zero-copy both ways
    keep.check()


@_SETTINGS
@given(tensors())
def test_awkward_round_trip(t):
    keep = _Untouched(t)
    back = lt.from_awkward(t.to_awkward())
    _same(back, t)
    if t.data.dtype.isnative and t.data.size:
        assert np.shares_memory(back.data, t.data)
    keep.check()


@_SETTINGS
@given(tensors(min_levels=1))
def test_dlpack_round_trip(t):
    keep = _Untouched(t)
    if not t.data.dtype.isnative:
        with pytest.raises(BufferError, match="byte order"):  # as np.from_dlpack of that array
            lt.from_dlpack(t)
        return
    back = lt.from_dlpack(t)
    _same(back, t)
    if t.data.size:
        assert np.shares_memory(back.data, t.data)
        assert not np.shares_memory(back.lod.levels[0], t.lod.levels[0])  # offsets: copies (docs)
    keep.check()


@_SETTINGS
@given(tensors(min_levels=1), st.sampled_from(["csr", "coo"]))
def test_torch_sparse_round_trip(t, layout):
    keep = _Untouched(t)
    sp = t.to_sparse_csr() if layout == "csr" else t.to_sparse_coo()
    back = lt.from_sparse(sp)
    last = lt.LoDTensor(np.ascontiguousarray(t.data), [t.lod.absolute_offsets(-1).tolist()])
    _same(back, last)
    keep.check()


@_SETTINGS
@given(tensors(dtypes=[d for d in _DTYPES if d != "float16"], min_levels=1, row_shapes=[()]),
       st.sampled_from(["csr", "coo"]))
def test_scipy_sparse_round_trip(t, layout):
    keep = _Untouched(t)
    sp = t.to_sparse_csr(format="scipy") if layout == "csr" else t.to_sparse_coo(format="scipy")
    back = lt.from_sparse(sp)
    _same(back, lt.LoDTensor(t.data, [t.lod.absolute_offsets(-1).tolist()]))
    keep.check()


@_SETTINGS
@given(tensors(min_levels=1), st.data())
def test_jagged_round_trip(t, data):
    keep = _Untouched(t)
    level = data.draw(st.integers(0, t.lod_level - 1))
    back = lt.from_torch(t.to_nested_jagged(level=level))
    _same(back, lt.LoDTensor(t.data, [t.lod.absolute_offsets(level).tolist()]))
    keep.check()


@_SETTINGS
@given(tensors(dtypes=["bool", "uint8", "int64", "uint64", "float16", "float64", "complex64"], min_levels=1))
def test_packed_sequence_round_trip(t):
    keep = _Untouched(t)
    lengths = np.diff(t.lod.absolute_offsets(-1))
    if not lengths.size or not lengths.all():
        with pytest.raises(ValueError, match="to_packed_sequence"):
            t.to_packed_sequence()
        return
    back = lt.from_packed_sequence(t.to_packed_sequence())
    _same(back, lt.LoDTensor(t.data, [t.lod.absolute_offsets(-1).tolist()]))
    keep.check()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(tensors(dtypes=[d for d in _DTYPES if not d.startswith("complex")]))
def test_save_load_and_parquet_round_trip(tmp_path, t):
    keep = _Untouched(t)
    lt.save(tmp_path / "t.arrow", t)
    for mmap in (True, False):
        _same(lt.load(tmp_path / "t.arrow", mmap=mmap), t)
    if t.lod_level:  # write_parquet: one row per top-level sequence
        lt.write_parquet(tmp_path / "t.parquet", {"x": t})
        _same(lt.read_parquet(tmp_path / "t.parquet")["x"], t)
    keep.check()


# -- property tests: torch data -----------------------------------------------------------------------------
_TORCH_DTYPES = ["bool", "uint8", "int8", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16",
                 "float32", "float64", "complex64"]


@st.composite
def torch_tensors(draw, dtypes=_TORCH_DTYPES, min_levels=1):
    t = draw(tensors(dtypes=["float64"], min_levels=min_levels))
    dtype = getattr(torch, draw(st.sampled_from(dtypes)))
    finite = np.nan_to_num(np.ascontiguousarray(t.data, dtype=np.float64), posinf=3.0, neginf=-3.0)
    data = torch.from_numpy(np.clip(finite, -100, 100)).to(dtype)
    if draw(st.booleans()):
        data = torch.stack([torch.zeros_like(data), data], 1)[:, 1]  # not contiguous
    if data.is_floating_point() and draw(st.booleans()):
        data = data.requires_grad_()
    return lt.LoDTensor(data, t.lod)


def _widened(x):
    x = x.detach()
    return x.float() if x.dtype == torch.bfloat16 else x


@_SETTINGS
@given(torch_tensors())
def test_torch_data_round_trips(t):
    x = t.data
    before = x.detach().clone()
    host = _widened(x).resolve_conj().numpy()
    if not x.is_complex():
        back = lt.from_arrow(t.to_arrow())
        assert back.lod() == t.lod() and np.array_equal(back.data, host) and back.data.dtype == host.dtype
    back = lt.from_awkward(t.to_awkward())
    assert back.lod() == t.lod() and np.array_equal(back.data, host) and back.data.dtype == host.dtype
    njt = t.to_nested_jagged(level=t.lod_level - 1)
    back = lt.from_torch(njt)
    assert back.data.dtype == x.dtype and back.data.requires_grad == x.requires_grad
    assert torch.equal(back.data.detach(), x.detach())
    for sp in (t.to_sparse_csr(), t.to_sparse_coo()):
        back = lt.from_sparse(sp)
        assert back.data.dtype == x.dtype and torch.equal(back.data.detach(), x.detach())
    assert torch.equal(x.detach(), before) and t.lod() == lt.LoDTensor(x, t.lod).lod()


# -- regressions: one per bug found ------------------------------------------------------------------------
def test_embedding_bag_inputs_refuses_uint64_ids_past_int64():
    """Before: ``.long()`` wrapped 2**64 - 1 to -1, so the ids handed to nn.EmbeddingBag were not the
    tensor's (torch itself refuses uint64 ids: "Promotion for uint16, uint32, uint64 types is not
    supported"); EmbeddingBag then blamed "value -1"."""
    t = lt.LoDTensor(np.array([5, 2**64 - 1, 1], np.uint64), [[0, 1, 3]])
    with pytest.raises(ValueError, match=r"embedding_bag_inputs\(\): id 18446744073709551615 at row 1 does not fit"):
        t.embedding_bag_inputs()
    ids, starts = lt.LoDTensor(np.array([5, 2**63 - 1, 1], np.uint64), [[0, 1, 3]]).embedding_bag_inputs()
    assert ids.tolist() == [5, 2**63 - 1, 1] and ids.dtype == torch.int64 and starts.tolist() == [0, 1]


def test_from_arrow_takes_lists_of_no_type():
    """``pa.array([[], []])`` infers ``list<null>`` (no value to type it). Before: TypeError "the values
    must be numbers"; ``ak.from_arrow`` of it and ``from_awkward`` give float64, as ``np.array([[]])`` does."""
    t = lt.from_arrow(pa.array([[], []]))
    assert t.lod() == [[0, 0, 0]] and t.data.dtype == np.float64 and t.data.shape == (0,)
    assert lt.from_awkward(ak.from_arrow(pa.array([[], []]))).data.dtype == t.data.dtype
    assert lt.from_arrow(pa.array([[[]], []])).lod() == [[0, 1, 1], [0, 0]]
    with pytest.raises(ValueError, match="values holds 1 null"):  # a null value is still refused
        lt.from_arrow(pa.array([[None]]))


def test_scipy_matrices_of_the_other_byte_order_are_native():
    """Before: ``to_sparse_*(format="scipy")`` of ``'>i4'`` data made a CSR matrix scipy's own constructor
    refuses ("scipy.sparse does not support dtype >i4"): its ``tocoo()`` raised that later, and
    ``to_sparse_coo`` raised it at once, in scipy's words."""
    t = lt.LoDTensor(np.array([1, 2, 3], ">i4"), [[0, 1, 3]])
    for m in (t.to_sparse_csr(format="scipy"), t.to_sparse_coo(format="scipy")):
        assert m.dtype == np.int32 and m.tocoo().toarray().tolist() == [[1, 0], [2, 3]]
        assert lt.from_sparse(m).tolist() == [[1], [2, 3]]
    assert t.data.dtype == np.dtype(">i4") and t.data.tolist() == [1, 2, 3]  # the input kept


def test_writers_name_themselves_and_the_column(tmp_path):
    """Before: ``save`` and ``write_parquet`` of complex data said "to_arrow(): ..." (not which call, nor
    which column); rows of width 0 of complex data or on the meta device gave pyarrow's
    "Unsupported numpy type 14" and torch's "Cannot copy out of meta tensor"."""
    ok = lt.LoDTensor(np.arange(3.0), [[0, 1, 3]])
    z = lt.LoDTensor(np.array([1j, 2, 3]), [[0, 1, 3]])
    with pytest.raises(TypeError, match=r"^write_parquet\(\): column 'z': Arrow has no complex type"):
        lt.write_parquet(tmp_path / "p.parquet", {"a": ok, "z": z})
    with pytest.raises(TypeError, match=r"^save\(\): Arrow has no complex type"):
        lt.save(tmp_path / "s.arrow", z)
    hollow = lt.LoDTensor(np.zeros((3, 2, 0), np.complex64), [[0, 1, 3]])
    with pytest.raises(TypeError, match=r"^write_parquet\(\): column 'z': Arrow has no complex type"):
        lt.write_parquet(tmp_path / "p.parquet", {"a": ok, "z": hollow})
    meta = lt.LoDTensor(torch.empty(3, 0, device="meta"), [[0, 1, 3]])
    with pytest.raises(ValueError, match=r"^write_parquet\(\): column 'z': the data is on meta"):
        lt.write_parquet(tmp_path / "p.parquet", {"a": ok, "z": meta})
    width0 = lt.LoDTensor(np.zeros((3, 0), np.float32), [[0, 1, 3]])  # still written and read back
    lt.write_parquet(tmp_path / "w.parquet", {"a": ok, "z": width0})
    back = lt.read_parquet(tmp_path / "w.parquet")["z"]
    assert back.shape() == [3, 0] and back.data.dtype == np.float32 and back.lod() == [[0, 1, 3]]


def test_from_awkward_names_itself_for_dates():
    """Before: datetime64 / timedelta64 leaves reached the LoDTensor constructor, whose message did not
    say which call refused them."""
    with pytest.raises(TypeError, match=r"from_awkward\(\): expected lists of numbers, got NumpyArray of type "
                                        r"datetime64\[D\]"):
        lt.from_awkward(ak.Array([[np.datetime64("2020-01-01")]]))
