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
    windows = [t[i : i + batch] for i in range(0, len(t), batch)]
    if any(level.size < 2 for w in windows for level in w.lod.levels):
        # a batch of empty outer lists only: its inner level has no sequence, which no LoD may have
        with pytest.raises(ValueError, match="holds no lists"):
            list(lt.read_parquet(path, columns=["t"], batch_size=batch))
        return
    got = []
    for b in lt.read_parquet(path, columns=["t"], batch_size=batch):
        assert list(b) == ["t"] and len(b["t"]) <= batch
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
