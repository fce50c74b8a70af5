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


# -- issue #25: header fields bounded by the file, one error class, the mmap caveat ------------------
def _rewrite_header(src, dst, header):
    """``src`` (an lt.save file) rewritten to ``dst`` with the header replaced by ``header`` (bytes)."""
    reader = pa.ipc.open_file(str(src))
    schema = reader.schema.with_metadata({b"lodtensor": header})
    with pa.OSFile(str(dst), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.record_batch(reader.get_batch(0).columns, schema=schema))


def _header(path):
    import json

    return json.loads(pa.ipc.open_file(str(path)).schema.metadata[b"lodtensor"])


def _run_child(code, timeout=120):
    import textwrap

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=timeout)


def test_a_header_lod_level_deeper_than_the_file_is_refused(tmp_path):
    # issue #25 item 2: lod_level=100000 built a 100,000-deep Arrow type and overflowed the stack (SIGSEGV)
    lt.save(tmp_path / "t.arrow", lt.LoDTensor(np.arange(4.0), [[0, 1, 4]]))
    done = _run_child(f"""
        import json
        import lodtensor as lt
        from tests.interop.test_files import _header, _rewrite_header
        src = {str(tmp_path / "t.arrow")!r}
        for level, crcs in [(100_000, 1), (100_000, 100_000), (20_000, 20_000), (2, 2)]:
            header = dict(_header(src), lod_level=level, lod_crc32=[0] * crcs)
            _rewrite_header(src, src + ".deep", json.dumps(header, separators=(",", ":")).encode())
            try:
                lt.load(src + ".deep")
            except ValueError as err:
                print(str(err).replace(src, "SRC")[:200])
    """)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and all("SRC.deep is not a valid lodtensor" in line for line in lines), lines
    assert "lod_level=100000" in lines[0] and "larger or deeper" in lines[1] and "lod_level=20000" in lines[2]
    assert "header says lod_level=2, but the column has 1 list levels" in lines[3]


def test_a_deep_json_header_is_a_value_error(tmp_path):
    lt.save(tmp_path / "t.arrow", lt.LoDTensor(np.arange(4.0), [[0, 1, 4]]))
    # a RecursionError escaped json.loads before
    for header in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000):
        _rewrite_header(tmp_path / "t.arrow", tmp_path / "d.arrow", header)
        with pytest.raises(ValueError, match=r"d\.arrow is not a valid lodtensor .*deeper than a lodtensor header"):
            lt.load(tmp_path / "d.arrow")


BAD_HEADERS = {
    "num_rows past int64": ({"num_rows": 2**70}, "num_rows=.*expected an integer in"),
    "lod_level past MAX_LOD_LEVELS": ({"lod_level": 33, "lod_crc32": [0] * 33}, r"lod_level=33: .*\[0, 32\]"),
    "negative lod_level": ({"lod_level": -1}, "lod_level=-1"),
    "float num_rows": ({"num_rows": 4.0}, "num_rows=4.0"),
    "row dim past int32": ({"row_shape": [2**40]}, r"row_shape=\[1099511627776\]"),
    "too many row dims": ({"row_shape": [1] * 32}, "at most 31"),
    "row_shape not a list": ({"row_shape": "2"}, "row_shape=2"),
    "huge row": ({"row_shape": [2**30, 2**30, 2**30]}, "larger than any memory"),
    "object dtype": ({"dtype": "|O"}, "bad header dtype '|O'"),
    "datetime dtype": ({"dtype": "<m8[s]"}, "bad header dtype"),
    "structured dtype": ({"dtype": "i4,f8"}, "bad header dtype"),
    "dtype not a str": ({"dtype": ["<f8"]}, "bad header dtype"),
    "big-endian dtype": ({"dtype": ">f8"}, "bad header dtype '>f8'"),
    "crc not ints": ({"lod_crc32": ["x"]}, "32-bit unsigned"),
    "crc count": ({"lod_crc32": []}, "lod_level=1 checksums"),
    "wrong row shape": ({"row_shape": [1]}, "values have Arrow type double, but the header says fixed_size_list"),
    "version": ({"version": 2}, "format version 2"),
}


@pytest.mark.parametrize("name", list(BAD_HEADERS))
def test_bad_header_fields(tmp_path, name):
    import json

    change, match = BAD_HEADERS[name]
    lt.save(tmp_path / "t.arrow", lt.LoDTensor(np.arange(4.0), [[0, 1, 4]]))
    _rewrite_header(tmp_path / "t.arrow", tmp_path / "h.arrow", json.dumps({**_header(tmp_path / "t.arrow"),
                                                                            **change}).encode())
    for mmap in (True, False):
        with pytest.raises(ValueError, match=r"h\.arrow is not a valid lodtensor .*" + match):
            lt.load(tmp_path / "h.arrow", mmap=mmap)


def test_swapped_byte_order_saves_as_native(tmp_path):
    t = lt.LoDTensor(np.arange(6, dtype=">f4").reshape(3, 2), [[0, 1, 3]])
    lt.save(tmp_path / "be.arrow", t)
    back = lt.load(tmp_path / "be.arrow")
    assert back.dtype == np.dtype("float32") and back.data.tolist() == t.data.tolist()


_TRUNCATE = """
    import os, sys
    import numpy as np
    import lodtensor as lt
    path = {path!r}
    lt.save(path, lt.LoDTensor(np.arange(1 << 20, dtype=np.float64), [[0, 1 << 19, 1 << 20]]))
    t = lt.load(path, mmap={mmap})
    os.truncate(path, 0)  # another process truncates the file underneath
    print(float(t.data.sum()), t.lod()[0][-1], flush=True)
"""


def test_mmap_false_survives_the_file_being_truncated(tmp_path):
    done = _run_child(_TRUNCATE.format(path=str(tmp_path / "big.arrow"), mmap=False))
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == [str(float((1 << 20) * ((1 << 20) - 1) // 2)), str(1 << 20)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the signal a truncated mapping raises is Linux's")
def test_mmap_true_over_a_truncated_file_is_sigbus_as_documented(tmp_path):
    # the caveat in load()'s docstring and the guide: no library can catch this, so it is documented
    import signal

    done = _run_child(_TRUNCATE.format(path=str(tmp_path / "big.arrow"), mmap=True))
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "SIGBUS" in lt.load.__doc__
