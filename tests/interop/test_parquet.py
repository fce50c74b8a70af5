"""Parquet: round trips, streaming, foreign files, bad input."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from tests.strategies import lod_tensors

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(t=lod_tensors(), dtype=st.sampled_from(["float32", "int64", "bool"]), batch=st.integers(1, 4))
def test_round_trip_whole_and_streamed(tmp_path, t, dtype, batch):
    t = t.with_data(t.data.astype(dtype))
    label = lt.LoDTensor(np.arange(len(t)))
    path = tmp_path / "x.parquet"
    lt.write_parquet(path, {"t": t, "label": label})
    cols = lt.read_parquet(path)
    assert cols["t"].lod() == t.lod() and cols["t"].shape() == t.shape() and cols["t"].dtype == t.dtype
    np.testing.assert_array_equal(cols["t"].data, t.data)
    assert cols["label"].lod_level == 0 and cols["label"].tolist() == label.tolist()
    got = []
    for b in lt.read_parquet(path, columns=["t"], batch_size=batch):
        assert list(b) == ["t"] and len(b["t"]) <= batch
        # a batch of only empty outer lists has inner levels of no sequence ([0]): read as its slice
        start = len(got)
        assert b["t"].lod() == t[start : start + len(b["t"])].lod()
        got += b["t"].tolist()
    assert got == t.tolist()


def test_several_row_groups_and_foreign_int32_lists(tmp_path):
    table = pa.table({"ids": pa.array([[[1, 2], [3]], [[4]], [[], [5, 6]]], type=pa.list_(pa.list_(pa.int32())))})
    path = tmp_path / "foreign.parquet"
    pq.write_table(table, path, row_group_size=1)
    t = lt.read_parquet(path)["ids"]
    assert t.lod() == [[0, 2, 3, 5], [0, 2, 3, 4, 4, 6]] and t.data.dtype == np.int32
    assert [b["ids"].tolist() for b in lt.read_parquet(path, batch_size=2)] == [
        [[[1, 2], [3]], [[4]]],
        [[[], [5, 6]]],
    ]


def test_single_row_group_is_not_copied_after_decoding(tmp_path):
    t = lt.LoDTensor(np.arange(10.0), [[0, 4, 10]])
    path = tmp_path / "one.parquet"
    lt.write_parquet(path, {"x": t})
    table = pq.read_table(path)
    back = lt.from_arrow(table["x"])
    assert np.shares_memory(back.data, np.frombuffer(table["x"].chunk(0).values.buffers()[1], np.float64))


def test_streaming_reads_batch_by_batch(tmp_path):
    t = lt.LoDTensor(np.arange(100), [list(range(0, 101, 10))])
    path = tmp_path / "s.parquet"
    lt.write_parquet(path, {"x": t}, row_group_size=3)
    it = lt.read_parquet(path, batch_size=3)
    first = next(it)
    assert first["x"].tolist() == t.tolist()[:3]
    assert sum(len(b["x"]) for b in it) == 7


def test_bad_calls(tmp_path):
    t = lt.LoDTensor(np.arange(3), [[0, 1, 3]])
    with pytest.raises(ValueError, match=r"same number of top-level sequences.*'a': 2, 'b': 3"):
        lt.write_parquet(tmp_path / "x.parquet", {"a": t, "b": lt.LoDTensor(np.arange(3))})
    with pytest.raises(TypeError, match="non-empty dict"):
        lt.write_parquet(tmp_path / "x.parquet", t)
    lt.write_parquet(tmp_path / "x.parquet", {"a": t})
    with pytest.raises(KeyError, match=r"no column\(s\) \['b'\]"):
        lt.read_parquet(tmp_path / "x.parquet", columns=["b"])
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        lt.read_parquet(tmp_path / "x.parquet", batch_size=0)
    with pytest.raises(FileNotFoundError):
        lt.read_parquet(tmp_path / "missing.parquet")


def test_nulls_and_foreign_files_name_the_file(tmp_path):
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"ids": pa.array([[1, None], [2]])}), path)
    with pytest.raises(ValueError, match=r"nulls\.parquet, column 'ids': .*null"):
        lt.read_parquet(path)
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet at all")
    with pytest.raises(ValueError, match=r"junk\.parquet is not a valid Parquet file"):
        lt.read_parquet(junk)


# -- issue #25: checksums, the lodtensor metadata entry, rows of width 0, nesting limits ---------
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from lodtensor.interop import _parquet_meta, parquet  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sweep(tmp_path, layout, stride):
    script = os.path.join(ROOT, "tests", "interop", "_parquet_flips.py")
    proc = subprocess.run(
        [sys.executable, script, str(tmp_path), layout, str(stride)],
        check=False, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"failed (rc={proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.splitlines()[-1])


def test_bit_flips_are_refused_or_harmless(tmp_path):
    # every 7th bit of a small file: before page checksums and the metadata entry, 182 of 10,888
    # flips (every bit) loaded another LoD or shape, 2,300 other values, and streams could end short
    result = _sweep(tmp_path, "nested", 7)
    assert result["wrong"] == []
    for mode in ("whole", "streamed"):
        assert set(result["counts"][mode]) <= {"error", "same"}, result["counts"]  # no flipped value loads
        assert result["counts"][mode]["error"] > result["counts"][mode]["same"]


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nested", "width0"])
def test_every_single_bit_flip(tmp_path, layout):
    result = _sweep(tmp_path, layout, 1)
    assert result["wrong"] == [], result["wrong"][:5]
    for mode in ("whole", "streamed"):
        assert set(result["counts"][mode]) <= {"error", "same"}, result["counts"]


def test_a_flipped_page_is_caught_by_its_checksum(tmp_path):
    t = lt.LoDTensor(np.arange(64, dtype=np.int64), [[0, 10, 64]])
    path = tmp_path / "c.parquet"
    lt.write_parquet(path, {"x": t}, compression="none", use_dictionary=False)
    blob = bytearray(path.read_bytes())
    at = blob.find(np.arange(8, 16, dtype=np.int64).tobytes())  # inside the values page
    blob[at] ^= 0x04  # 8 -> 12: a valid file with another value
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match=r"c\.parquet is not a valid Parquet file: .*(CRC|checksum)"):
        lt.read_parquet(path)
    with pytest.raises(ValueError, match=r"c\.parquet is not a valid Parquet file: .*(CRC|checksum)"):
        list(lt.read_parquet(path, batch_size=1))
    unchecked = lt.read_parquet(path, verify_checksums=False)["x"]  # what the checksum stood between
    assert unchecked.lod() == t.lod() and unchecked.data[8] == 12


def test_pyarrow_without_page_checksums_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setitem(parquet._FEATURES, "checksums", False)
    t = lt.LoDTensor(np.arange(3), [[0, 3]])
    match = r"write_parquet\(\): Parquet page checksums need pyarrow >= 15.*write_page_checksum=False"
    with pytest.raises(ImportError, match=match):
        lt.write_parquet(tmp_path / "a.parquet", {"x": t})
    assert not (tmp_path / "a.parquet").exists()
    lt.write_parquet(tmp_path / "a.parquet", {"x": t}, write_page_checksum=False)
    with pytest.raises(ImportError, match=r"read_parquet\(\): .*pyarrow >= 15.*verify_checksums=False"):
        lt.read_parquet(tmp_path / "a.parquet")
    assert lt.read_parquet(tmp_path / "a.parquet", verify_checksums=False)["x"].tolist() == [[0, 1, 2]]


ROW_SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 2)]


@pytest.mark.parametrize("row_shape", ROW_SHAPES, ids=str)
@pytest.mark.parametrize("lod", [None, [[0, 2, 5]], [[0, 1, 2], [0, 2, 5]]], ids=["no-lod", "1-level", "2-level"])
@pytest.mark.parametrize("dtype", ["float32", "bool", "int8"])
def test_rows_of_width_zero_round_trip(tmp_path, row_shape, lod, dtype):
    t = lt.LoDTensor(np.zeros((5, *row_shape), dtype=dtype), lod)
    lt.write_parquet(tmp_path / "z.parquet", {"z": t, "n": lt.LoDTensor(np.arange(len(t)))})
    back = lt.read_parquet(tmp_path / "z.parquet")["z"]
    assert back.lod() == t.lod() and back.shape() == t.shape() and back.dtype == t.dtype
    streamed = [b["z"] for b in lt.read_parquet(tmp_path / "z.parquet", columns=["z"], batch_size=1)]
    assert len(streamed) == len(t) and all(s.shape()[1:] == t.shape()[1:] and s.dtype == t.dtype for s in streamed)
    assert [s.lod() for s in streamed] == [t[i : i + 1].lod() if t.lod_level else [] for i in range(len(t))]


def test_the_metadata_entry_is_checked(tmp_path):
    t = lt.LoDTensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    path = tmp_path / "m.parquet"
    lt.write_parquet(path, {"x": t})
    table = pq.read_table(path)
    entry = json.loads(table.schema.metadata[b"lodtensor"])
    assert entry["columns"]["x"] == {"lod_level": 1, "dtype": "<f8", "row_shape": [2], "rows": 3,
                                     "lod_crc32": _parquet_meta.lengths_crc(t)}  # fmt: skip
    assert pq.ParquetFile(path).schema_arrow.field("x").metadata[b"PARQUET:field_id"] == str(0x4C540000).encode()

    def rewrite(name, schema_metadata, field_metadata=None):
        field = table.schema.field("x").with_metadata(field_metadata or table.schema.field("x").metadata)
        out = tmp_path / name
        pq.write_table(pa.Table.from_arrays([table["x"]], schema=pa.schema([field], metadata=schema_metadata)), out)
        return out

    def entry_with(**changes):
        e = json.loads(json.dumps(entry))
        e["columns"]["x"].update(changes)
        return {b"lodtensor": json.dumps(e).encode()}

    cases = {
        "lost": (rewrite("lost.parquet", None), r"marked as written by lt.write_parquet, but .* no 'lodtensor'"),
        "depth": (rewrite("depth.parquet", entry_with(lod_level=2, lod_crc32=[0, 0])), r"metadata says 2 lod level"),
        "shape": (rewrite("shape.parquet", entry_with(row_shape=[3])), r"rows of shape \(3,\)"),
        "dtype": (rewrite("dtype.parquet", entry_with(dtype="<f4")), r"of float32 rows"),
        "bad dtype": (rewrite("bad.parquet", entry_with(dtype="<f4,")), r"describes column 'x' as"),
        "crc": (rewrite("crc.parquet", entry_with(lod_crc32=[1])), r"do not match the checksums"),
        "rows": (rewrite("rows.parquet", entry_with(rows=4)), r"do not match the checksums"),
        "json": (rewrite("json.parquet", {b"lodtensor": b"[" * 100_000}), r"not JSON"),
        "field id": (rewrite("fid.parquet", table.schema.metadata, {b"PARQUET:field_id": b"7"}), r"field ids"),
    }
    for name, (bad, match) in cases.items():
        with pytest.raises(ValueError, match=match) as err:
            lt.read_parquet(bad)
        assert os.path.basename(bad) in str(err.value), name
        if name in ("crc", "rows"):  # a stream finds out at its end: it raises instead of ending
            it = lt.read_parquet(bad, batch_size=1)
            with pytest.raises(ValueError, match=match):
                list(it)
    foreign = tmp_path / "foreign.parquet"  # no entry, no field ids: read as it is
    pq.write_table(pa.table({"x": table["x"]}).replace_schema_metadata(None), foreign)
    assert lt.read_parquet(foreign)["x"].lod() == t.lod()


def test_nesting_and_schema_limits(tmp_path):
    deep = lt.LoDTensor(np.zeros((1,) * 20, np.float32), [[0, 1]] * 30)  # 30 levels + 19 row dims = 49
    lt.write_parquet(tmp_path / "ok.parquet", {"d": deep})
    assert lt.read_parquet(tmp_path / "ok.parquet")["d"].shape() == deep.shape()
    deeper = lt.LoDTensor(np.zeros((1,) * 21, np.float32), [[0, 1]] * 30)
    with pytest.raises(ValueError, match=r"column 'd': the tensor nests 50 list levels .*readers take at most 49"):
        lt.write_parquet(tmp_path / "no.parquet", {"d": deeper})
    with pytest.raises(ValueError, match="store_schema must be True"):
        lt.write_parquet(tmp_path / "no.parquet", {"d": deep}, store_schema=False)
    assert not (tmp_path / "no.parquet").exists()


def test_big_endian_data_round_trips(tmp_path):
    t = lt.LoDTensor(np.arange(6, dtype=">f4").reshape(3, 2), [[0, 1, 3]])
    lt.write_parquet(tmp_path / "be.parquet", {"x": t})
    back = lt.read_parquet(tmp_path / "be.parquet")["x"]
    assert back.tolist() == t.tolist() and back.dtype == np.float32


@pytest.mark.parametrize("lod", [None, [[0, 0]], [[0, 1], [0, 0]]], ids=["no-lod", "1-level", "2-level"])
def test_rows_of_width_zero_and_no_rows(tmp_path, lod):
    # found by the deep_lods fuzz target: the placeholder level then holds no lists at all
    t = lt.LoDTensor(np.zeros((0, 2, 0), np.float32), lod)
    lt.write_parquet(tmp_path / "e.parquet", {"e": t})
    back = lt.read_parquet(tmp_path / "e.parquet")["e"]
    assert back.lod() == t.lod() and back.shape() == [0, 2, 0]
    streamed = [b["e"].shape() for b in lt.read_parquet(tmp_path / "e.parquet", batch_size=1)]
    assert streamed == ([] if lod is None else [[0, 2, 0]])
