"""save / load: Arrow IPC round trips, memory mapping, corrupted and foreign files."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodtensor as lt
from tests.strategies import lod_tensors

pa = pytest.importorskip("pyarrow")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(t=lod_tensors(), dtype=st.sampled_from(["float64", "float32", "int64", "uint8", "bool"]), mmap=st.booleans())
def test_round_trip(tmp_path, t, dtype, mmap):
    t = t.with_data(t.data.astype(dtype))
    path = tmp_path / "t.arrow"
    lt.save(path, t.to_torch() if mmap else t)  # torch data saves the same bytes
    back = lt.load(path, mmap=mmap)
    assert back.lod() == t.lod() and back.shape() == t.shape() and back.dtype == t.dtype
    np.testing.assert_array_equal(back.data, t.data)


def test_no_lod_and_trailing_dims(tmp_path):
    t = lt.LoDTensor(np.arange(12.0).reshape(4, 3))
    lt.save(tmp_path / "a.arrow", t)
    back = lt.load(tmp_path / "a.arrow")
    assert back.lod_level == 0 and back.data.tolist() == t.data.tolist()


def test_load_is_memory_mapped(tmp_path):
    data = np.arange(1000, dtype=np.int64)
    t = lt.LoDTensor(data, [[0, 400, 1000]])
    path = tmp_path / "m.arrow"
    lt.save(path, t)
    back = lt.load(path)
    assert not back.data.flags.writeable
    # the loaded data is the file's pages: writing the file shows through, no copy was made
    blob = path.read_bytes()
    pos = blob.find(data[500:502].tobytes())
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(np.int64(-7).tobytes())
    assert back.data[500] == -7
    # ...but the offsets were copied and checked: tampering the file cannot change the LoD
    pos = blob.find(np.array([0, 400, 1000], np.int64).tobytes())
    with open(path, "r+b") as f:
        f.seek(pos + 8)
        f.write(np.int64(5000).tobytes())
    assert back.lod() == [[0, 400, 1000]]
    with pytest.raises(ValueError, match=r"m\.arrow"):
        lt.load(path)


def test_foreign_files(tmp_path):
    other = tmp_path / "other.arrow"
    with pa.ipc.new_file(str(other), pa.schema([("x", pa.int64())])) as w:
        w.write_batch(pa.record_batch([pa.array([1, 2])], names=["x"]))
    with pytest.raises(ValueError, match=r"other\.arrow .*not one lt\.save\(\) wrote"):
        lt.load(other)
    text = tmp_path / "notes.txt"
    text.write_text("hello, world")
    with pytest.raises(ValueError, match=r"notes\.txt .*Arrow magic"):
        lt.load(text)
    empty = tmp_path / "empty.arrow"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.arrow"):
        lt.load(empty)
    with pytest.raises(FileNotFoundError):
        lt.load(tmp_path / "missing.arrow")


def test_header_must_match_the_column(tmp_path):
    t = lt.LoDTensor(np.arange(4.0), [[0, 1, 4]])
    path = tmp_path / "h.arrow"
    lt.save(path, t)
    blob = path.read_bytes()
    for old, new in [
        (b'"lod_level": 1', b'"lod_level": 2'),
        (b'"num_rows": 4', b'"num_rows": 5'),
        (b'"<f8"', b'"<i8"'),
    ]:
        assert old in blob
        path.write_bytes(blob.replace(old, new))
        with pytest.raises(ValueError, match=r"h\.arrow"):
            lt.load(path)


def test_save_bad_input(tmp_path):
    with pytest.raises(TypeError, match="must be a LoDTensor"):
        lt.save(tmp_path / "x.arrow", np.arange(3))
    with pytest.raises(ValueError, match="holds no data"):
        lt.save(tmp_path / "x.arrow", lt.LoDTensor())
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("kind", ["arrow", "parquet"])
def test_corrupted_files_never_crash(tmp_path, kind):
    env = dict(os.environ, PYTHONPATH=ROOT, CORRUPT_RANDOM="150")
    script = os.path.join(ROOT, "tests", "interop", "_corrupt_files.py")
    proc = subprocess.run(
        [sys.executable, script, str(tmp_path), kind], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, (
        f"crashed or failed (rc={proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    lines = proc.stdout.splitlines()
    wrong = [line for line in lines if "WRONG" in line]
    assert not wrong, "\n".join(wrong[:20])
    assert sum("truncate" in line and line.endswith("error") for line in lines) >= 16  # every truncation refused
    assert len(lines) > 300
