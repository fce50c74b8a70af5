"""Streaming reads hold a bounded number of batches, whatever the file size (#25, memory under load).

A 130 MiB file of incompressible int64 ids in one row group, streamed by
``lt.read_parquet(batch_size=)`` and by ``ParquetCorpus`` in child processes
that report their RSS. Before pages were read through a small buffer, both
pre-buffered the whole row group: the read grew by 155 MiB (1.2x the file),
the corpus by 225 MiB (1.7x). Now the growth is the allocator's pools plus a
few record batches (about 33 and 55 MiB here), and stops growing after the
first batches.
"""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyarrow")
if not os.path.exists("/proc/self/statm"):
    pytest.skip("RSS is read from /proc (Linux)", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "interop", "_parquet_memory.py")
FILE_MIB = 128


def _child(*args):
    proc = subprocess.run([sys.executable, SCRIPT, *map(str, args)], check=False, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)  # fmt: skip
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    _child("write", path, FILE_MIB)
    yield path
    os.remove(path)


@pytest.mark.parametrize(("how", "share"), [("read", 0.4), ("corpus", 0.6)])
def test_streaming_memory_is_bounded_by_the_batch_not_the_file(big_file, how, share):
    got = json.loads(_child(how, big_file).splitlines()[-1])
    assert got["docs"] > 100_000 and got["batches"] > 100
    assert got["growth"] < share * got["file_mib"], got
