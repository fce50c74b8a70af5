"""Regressions for bugs found hunting through lodtensor.interop (one test per bug)."""

import numpy as np
import pytest

import lodtensor as lt

pa = pytest.importorskip("pyarrow")
ak = pytest.importorskip("awkward")


# -- awkward -----------------------------------------------------------------------------------
def test_from_awkward_takes_option_types_without_missing_values():
    # ak.from_arrow marks every Arrow level nullable (UnmaskedArray): no value is missing
    t = lt.LoDTensor(np.arange(5.0), [[0, 2, 3], [0, 2, 2, 5]])
    a = ak.from_arrow(t.to_arrow())
    back = lt.from_awkward(a)
    assert back.lod() == t.lod() and back.tolist() == t.tolist()
    masked = ak.Array([[1, None], [3]])[:, :1]  # an IndexedOptionArray with every value present
    assert lt.from_awkward(masked).tolist() == [[1], [3]]
    with pytest.raises(ValueError, match=r"missing values.*1 None\(s\) at depth 1, first at index 1"):
        lt.from_awkward(ak.Array([[1, None]]))


def test_from_awkward_regular_level_above_a_var_level_is_a_lod_level():
    a = ak.to_regular(ak.Array([[[1], [2, 3]], [[4], []]]), axis=1)  # 2 * 2 * var * int64
    t = lt.from_awkward(a)
    assert t.lod() == [[0, 2, 4], [0, 1, 3, 4, 4]] and t.tolist() == a.tolist()


def test_from_awkward_regular_rows_of_width_zero_keep_their_rows():
    empty_rows = ak.contents.RegularArray(ak.contents.NumpyArray(np.zeros(0)), 0, zeros_length=3)
    assert lt.from_awkward(ak.Array(empty_rows)).shape() == [3, 0]
    nested = ak.contents.ListOffsetArray(ak.index.Index64(np.array([0, 1, 3])), empty_rows)
    t = lt.from_awkward(ak.Array(nested))
    assert t.lod() == [[0, 1, 3]] and t.shape() == [3, 0]


def test_from_awkward_empty_lists_and_indexed_arrays():
    assert lt.from_awkward(ak.Array([[], []])).lod() == [[0, 0, 0]]  # EmptyArray content: float64
    indexed = ak.contents.ListOffsetArray(
        ak.index.Index64(np.array([0, 2])),
        ak.contents.IndexedArray(ak.index.Index64(np.array([1, 0])), ak.contents.NumpyArray(np.array([1.0, 2.0]))),
    )
    assert lt.from_awkward(ak.Array(indexed)).tolist() == [[2.0, 1.0]]


def test_from_awkward_refuses_a_bare_string():
    with pytest.raises(TypeError, match="expected an ak.Array.*got str"):
        lt.from_awkward("abc")  # was read as uint8 bytes


def test_to_awkward_other_byte_order_and_torch_dtypes():
    t = lt.LoDTensor(np.arange(3, dtype=">i4"), [[0, 1, 3]])
    assert t.to_awkward().tolist() == [[0], [1, 2]]  # awkward refused non-native byte order
    torch = pytest.importorskip("torch")
    bf = lt.LoDTensor(torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16), [[0, 1, 3]])
    assert bf.to_awkward().tolist() == [[1.0], [2.0, 3.0]]
    conj = lt.LoDTensor(torch.tensor([1 + 1j, 2, 3], dtype=torch.complex64).conj(), [[0, 1, 3]])
    assert conj.to_awkward().tolist() == [[1 - 1j], [2 + 0j, 3 + 0j]]


# -- Arrow -------------------------------------------------------------------------------------
def test_to_arrow_names_dtypes_arrow_lacks():
    with pytest.raises(TypeError, match=r"to_arrow\(\): Arrow has no type for data of dtype float128"):
        lt.LoDTensor(np.zeros(2, np.longdouble), [[0, 2]]).to_arrow()  # was ArrowNotImplementedError
    torch = pytest.importorskip("torch")
    conj = lt.LoDTensor(torch.tensor([1 + 1j, 2], dtype=torch.complex64).conj(), [[0, 2]])
    with pytest.raises(TypeError, match="Arrow has no complex type"):
        conj.to_arrow()  # was torch's RuntimeError about the conjugate bit


# -- sparse ------------------------------------------------------------------------------------
def test_to_sparse_scipy_refuses_float16_and_widens_bfloat16():
    t = lt.LoDTensor(np.arange(3, dtype=np.float16), [[0, 2, 3]])
    with pytest.raises(ValueError, match=r"to_sparse_csr\(\): scipy.sparse has no float16"):
        t.to_sparse_csr(format="scipy")  # was a matrix whose toarray() failed later
    torch = pytest.importorskip("torch")
    bf = lt.LoDTensor(torch.arange(3.0, dtype=torch.bfloat16), [[0, 2, 3]])
    assert bf.to_sparse_csr(format="scipy").toarray().tolist() == [[0.0, 1.0], [2.0, 0.0]]


def test_from_sparse_refuses_malformed_torch_tensors():
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oob = torch.sparse_coo_tensor(torch.tensor([[5], [0]]), torch.tensor([1.0]), (2, 2), check_invariants=False)
        wide = torch.sparse_csr_tensor(
            torch.tensor([0, 3]), torch.tensor([0, 1, 2]), torch.tensor([1.0, 2, 3]), (1, 1), check_invariants=False
        )
        short = torch.sparse_csr_tensor(
            torch.tensor([0, 5]), torch.tensor([0, 1, 2]), torch.tensor([1.0, 2, 3]), (1, 3), check_invariants=False
        )
    with pytest.raises(ValueError, match="row index 5 is outside the 2 rows"):
        lt.from_sparse(oob)  # was a LoD of 6 sequences for a 2-row matrix
    with pytest.raises(ValueError, match="row 0 stores 3 entries, more than the 1 columns"):
        lt.from_sparse(wide)
    with pytest.raises(ValueError, match="3 column indices for 5 stored entries"):
        lt.from_sparse(short)  # was a NumPy broadcast error
    with pytest.raises(ValueError, match="batched sparse tensor"):
        lt.from_sparse(torch.ones(2, 2, 2).to_sparse_csr())


def test_from_sparse_zero_rows_is_a_batch_of_no_sequence():
    sps = pytest.importorskip("scipy.sparse")
    t = lt.from_sparse(sps.csr_array((0, 3)))  # was refused: "no rows; a LoD needs one sequence"
    assert t.lod() == [[0]] and t.data.shape == (0,) and t.data.dtype == np.float64


# -- files / Parquet ---------------------------------------------------------------------------
def test_writers_round_trip_a_level_of_no_sequence(tmp_path):
    t = lt.LoDTensor(np.arange(3.0), [[0, 0, 2], [0, 1, 3]])
    head = t[0:1]  # lod [[0, 0], [0]]: level 1 holds no sequence (was refused by save and write_parquet)
    lt.save(tmp_path / "t.arrow", head)
    lt.write_parquet(tmp_path / "t.parquet", {"x": head})
    for back in (lt.load(tmp_path / "t.arrow"), lt.read_parquet(tmp_path / "t.parquet")["x"]):
        assert back.lod() == [[0, 0], [0]] and back.data.shape == (0,) and back.data.dtype == np.float64


# -- DLPack ------------------------------------------------------------------------------------
def test_from_dlpack_imports_dtypes_numpy_lacks_as_torch():
    torch = pytest.importorskip("torch")
    x = torch.arange(3.0, dtype=torch.bfloat16)
    back = lt.from_dlpack(lt.LoDTensor(x, [[0, 1, 3]]))  # was NumPy's "Unsupported dtype in DLTensor"
    assert back.lod() == [[0, 1, 3]] and back.data.dtype == torch.bfloat16
    assert back.data.data_ptr() == x.data_ptr()  # still shared

    class Producer:  # a foreign producer: not an array type lodtensor knows
        def __dlpack__(self, **kwargs):
            return x.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    assert lt.from_dlpack(Producer(), [[0, 3]]).data.dtype == torch.bfloat16


def test_a_write_through_torch_to_a_loaded_file_neither_crashes_nor_reaches_the_file(tmp_path):
    """torch ignores read-only memory (DLPack's flag, from_numpy): a write through torch to lt.load's
    mapped data killed the process (SIGSEGV on a read-only mapping). The mapping is copy-on-write
    now: the write lands in the process's own page and the file keeps its bytes."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    pytest.importorskip("torch")
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.arrow"
    code = (
        "import sys, numpy as np, torch, lodtensor as lt\n"
        "p = sys.argv[1]\n"
        "lt.save(p, lt.LoDTensor(np.arange(5.0), [[0, 2, 5]]))\n"
        "u = lt.load(p)\n"
        "assert not u.data.flags.writeable\n"
        "x = torch.from_dlpack(u.data)\n"
        "x[0] = 42.0\n"
        "torch.from_numpy(u.data)[1] = 43.0\n"
        "print(float(x[0]), lt.load(p, mmap=False).data.tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == "42.0 [0.0, 1.0, 2.0, 3.0, 4.0]"
