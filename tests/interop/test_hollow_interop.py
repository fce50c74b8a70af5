"""Every converter takes a LoD level of no sequence (offsets ``[0]``: an empty batch, documents without
sentences) and gives it back exactly: lod, dtype and row shape (``tests/hollow.py``). Before the gate
accepted such a level, from_arrow / from_awkward / from_sparse refused it and save() / write_parquet()
refused to write it."""

import pickle

import numpy as np
import pytest

import lodtensor as lt
from tests.hollow import hollow_cases

LAYOUTS = [((3,), np.float32), ((), np.int64), ((2, 0), np.float64), ((), np.bool_)]


def _cases(shape, dtype):
    if dtype is np.bool_:  # hollow_cases builds from arange, which bool lacks: cast
        return {n: t.with_data(t.data.astype(bool)) for n, t in hollow_cases(row_shape=shape, dtype=np.uint8).items()}
    return hollow_cases(row_shape=shape, dtype=dtype)


CASES = [
    (f"{name}-{'x'.join(map(str, shape)) or 'scalar'}-{np.dtype(dtype).name}", t)
    for shape, dtype in LAYOUTS
    for name, t in _cases(shape, dtype).items()
]
HOLLOW = [(n, t) for n, t in CASES if any(level.size == 1 for level in t.lod.levels)]


def _same(back, t):
    assert back.lod() == t.lod()
    data = np.asarray(back.numpy())
    assert data.dtype == t.numpy().dtype and data.shape == t.numpy().shape


def test_the_cases_hold_levels_of_no_sequence():
    assert len(HOLLOW) == 4 * len(LAYOUTS)
    lods = {n.split("-")[0]: t.lod() for n, t in CASES}
    assert lods == {
        "batch0": [[0]],
        "batch0x2": [[0], [0]],
        "docs_without_sentences": [[0, 0, 0], [0]],
        "slice_of_empty_doc": [[0, 0], [0]],
        "empty_sequences": [[0, 0, 0]],
    }


# -- Arrow, files, Parquet ---------------------------------------------------------------------
@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
def test_arrow_round_trip(name, t):
    pytest.importorskip("pyarrow")
    arr = t.to_arrow()
    assert len(arr) == len(t.lod.levels[0]) - 1 and arr.to_pylist() == t.tolist()
    _same(lt.from_arrow(arr), t)  # was "list level k holds no lists"


@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_save_load_round_trip(tmp_path, name, t, mmap):
    pytest.importorskip("pyarrow")
    lt.save(tmp_path / "t.arrow", t)  # was refused: "lod level k holds no sequence"
    _same(lt.load(tmp_path / "t.arrow", mmap=mmap), t)


@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
def test_parquet_round_trip_whole_and_streamed(tmp_path, name, t):
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    lt.write_parquet(path, {"x": t, "y": t})  # was refused: "column 'x': lod level k holds no sequence"
    cols = lt.read_parquet(path)
    _same(cols["x"], t)
    _same(cols["y"], t)
    streamed = [b["x"] for b in lt.read_parquet(path, batch_size=1)]
    want = [t[i : i + 1] for i in range(len(t))]  # one document each: a document without sentences is [[0, 0], [0]]
    assert [b.lod() for b in streamed] == [w.lod() for w in want]
    assert all(b.shape() == w.shape() for b, w in zip(streamed, want))


def test_a_parquet_stream_with_a_window_of_only_empty_documents(tmp_path):
    pytest.importorskip("pyarrow")
    t = lt.LoDTensor(np.arange(3.0), [[0, 1, 1, 1, 2], [0, 3, 3]])  # documents 1 and 2 have no sentence
    lt.write_parquet(tmp_path / "t.parquet", {"x": t})
    got = [b["x"].lod() for b in lt.read_parquet(tmp_path / "t.parquet", batch_size=2)]
    assert got == [[[0, 1, 1], [0, 3]], [[0, 0, 1], [0, 0]]]
    got = [b["x"].lod() for b in lt.read_parquet(tmp_path / "t.parquet", batch_size=1)]
    assert got == [[[0, 1], [0, 3]], [[0, 0], [0]], [[0, 0], [0]], [[0, 1], [0, 0]]]


def test_foreign_arrow_arrays_of_no_list():
    pa = pytest.importorskip("pyarrow")
    nested = pa.list_(pa.list_(pa.float32()))
    for arr, lod in [
        (pa.array([], nested), [[0], [0]]),
        (pa.array([[], []], nested), [[0, 0, 0], [0]]),
        (pa.array([[[1.0]], [], []], nested).slice(1), [[0, 0, 0], [0]]),  # a slice: offsets rebased
        (pa.array([], pa.large_list(pa.int64())), [[0]]),
    ]:
        t = lt.from_arrow(arr)
        assert t.lod() == lod and t.data.shape == (0,)
        assert t.data.dtype == (np.int64 if len(lod) == 1 else np.float32)
    from lodtensor.interop.arrow import list_levels

    levels, leaf = list_levels(pa.array([[], []], nested), "list_levels()")
    assert [level.tolist() for level in levels] == [[0, 0, 0], [0]] and len(leaf) == 0


# -- awkward -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
def test_awkward_round_trip(name, t):
    ak = pytest.importorskip("awkward")
    a = t.to_awkward()
    assert len(a) == len(t.lod.levels[0]) - 1 and ak.to_list(a) == t.tolist()
    _same(lt.from_awkward(a), t)  # was "list level k holds no lists"


def test_awkward_own_empty_arrays():
    ak = pytest.importorskip("awkward")
    for a, lod, dtype in [
        (ak.Array([[]])[:0], [[0]], np.float64),  # a list type of no list: unknown items are float64
        (ak.Array([[[]], []])[1:], [[0, 0], [0]], np.float64),
        (ak.Array([[[1.5]], [], []])[1:], [[0, 0, 0], [0]], np.float64),
        (ak.values_astype(ak.Array([[[1]], []]), np.int32)[1:], [[0, 0], [0]], np.int32),
    ]:
        t = lt.from_awkward(a)
        assert t.lod() == lod and t.data.shape == (0,) and t.data.dtype == dtype
    t = lt.from_awkward(ak.Array([]))  # no list type at all: no lod
    assert t.lod() == [] and t.data.shape == (0,)


def test_awkward_through_arrow():
    ak = pytest.importorskip("awkward")
    pytest.importorskip("pyarrow")
    t = hollow_cases()["docs_without_sentences"]
    _same(lt.from_arrow(ak.to_arrow(t.to_awkward(), extensionarray=False)), t)
    _same(lt.from_awkward(ak.from_arrow(t.to_arrow())), t)


# -- pickle, DLPack ----------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
def test_pickle_and_dlpack(name, t):
    _same(pickle.loads(pickle.dumps(t)), t)
    back = lt.from_dlpack(t)  # the ragged convention: the lod comes along
    _same(back, t)
    values, offsets = t.__dlpack_ragged__()
    assert len(offsets) == t.lod_level
    assert [np.from_dlpack(_Capsule(c)).tolist() for c in offsets] == t.lod()


class _Capsule:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


# -- sparse ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "t"),
    [c for c in CASES if c[1].data.ndim == 1 and c[1].dtype != np.bool_],
    ids=[n for n, t in CASES if t.data.ndim == 1 and t.dtype != np.bool_],
)
@pytest.mark.parametrize("fmt", ["torch", "scipy"])
def test_sparse_keeps_the_last_level(name, t, fmt):
    pytest.importorskip("torch")
    pytest.importorskip("scipy.sparse")
    last = t.lod.levels[-1]
    for m in (t.to_sparse_csr(format=fmt), t.to_sparse_coo(format=fmt)):
        assert tuple(m.shape) == (last.size - 1, 0)
        back = lt.from_sparse(m)  # was "the matrix has shape (0, 0), no rows"
        assert back.lod() == [last.tolist()] and np.asarray(back.numpy()).shape == (0,)


def test_sparse_hybrid_of_no_sequence():
    pytest.importorskip("torch")
    t = hollow_cases()["batch0"]
    m = t.to_sparse_csr()
    assert tuple(m.shape) == (0, 0, 3) and m.crow_indices().tolist() == [0]
    _same(lt.from_sparse(m), t)
    _same(lt.from_sparse(t.to_sparse_coo()), t)


# -- torch -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
def test_jagged_nested_tensor_of_every_level(name, t):
    pytest.importorskip("torch")
    for level in range(t.lod_level):
        nt = t.to_nested_jagged(level=level)  # was "zero-size array to reduction operation minimum"
        rows = t.lod.absolute_offsets(level)
        assert nt.offsets().tolist() == rows.tolist() and nt.size(0) == rows.size - 1
        back = lt.from_torch(nt)
        assert back.lod() == [rows.tolist()] and tuple(back.data.shape) == t.numpy().shape
        assert len(nt.unbind()) == rows.size - 1


def test_strided_nested_tensor_of_no_component():
    torch = pytest.importorskip("torch")
    back = lt.from_torch(torch.nested.nested_tensor([]))  # was torch.cat of no tensor
    assert back.lod() == [[0]] and tuple(back.data.shape) == (0,) and back.data.dtype == torch.float32


@pytest.mark.parametrize(("name", "t"), CASES, ids=[n for n, _ in CASES])
def test_cu_seqlens_and_embedding_bag(name, t):
    torch = pytest.importorskip("torch")
    for level in range(t.lod_level):
        cu, longest = t.cu_seqlens(level=level)  # was "zero-size array to reduction operation maximum"
        assert cu.tolist() == t.lod.absolute_offsets(level).tolist() and cu.dtype == np.int32 and longest == 0
    if t.data.ndim == 1 and t.dtype == np.int64:
        ids, offsets = t.embedding_bag_inputs()
        assert ids.tolist() == [] and offsets.tolist() == [0] * (t.lod.levels[-1].size - 1)
        bag = torch.nn.EmbeddingBag(4, 2)(ids, offsets)
        assert tuple(bag.shape) == (t.lod.levels[-1].size - 1, 2)


@pytest.mark.parametrize(("name", "t"), HOLLOW, ids=[n for n, _ in HOLLOW])
def test_packed_sequence_refuses_no_sequence(name, t):
    pytest.importorskip("torch")
    # torch cannot use a PackedSequence of no sequence (nn.LSTM: IndexError, pad_packed_sequence:
    # "batch_sizes can not be empty"): refused, naming the level, instead of made
    with pytest.raises(ValueError, match=rf"lod level {t.lod_level - 1} holds no sequence \(offsets \[0\]\)"):
        t.to_packed_sequence()
