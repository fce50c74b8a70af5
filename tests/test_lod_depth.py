"""The deepest LoD (#25 item 4): MAX_LOD_LEVELS, checked wherever a LoD is made.

A LoD of 10,000-20,000 levels made pyarrow overflow its stack in ``to_arrow()``
and ``write_parquet`` (SIGSEGV). Now no LoD deeper than ``MAX_LOD_LEVELS`` (32)
exists: every door that makes one raises LoDError. The deep cases run in a
child process, where a crash is a failed test rather than a dead pytest.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lodtensor as lt
from lodtensor.errors import LoDError
from lodtensor.lod import MAX_LOD_LEVELS, LoD

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_limit_is_32_and_documented():
    assert MAX_LOD_LEVELS == 32
    assert "MAX_LOD_LEVELS" in LoD.__doc__


DOORS = {
    "LoD": lambda n: LoD([[0, 1]] * n),
    "LoD.from_lengths": lambda n: LoD.from_lengths([[1]] * n),
    "LoDTensor": lambda n: lt.LoDTensor(np.zeros(1), [[0, 1]] * n),
    "recursive_sequence_lengths": lambda n: lt.LoDTensor(np.zeros(1), recursive_sequence_lengths=[[1]] * n),
    "set_lod": lambda n: lt.LoDTensor(np.zeros(1)).set_lod([[0, 1]] * n),
    "create_lod_tensor": lambda n: lt.create_lod_tensor(np.zeros((1, 1)), [[1]] * n, lt.CPUPlace()),
    "from_nested_list": lambda n: lt.from_nested_list(_nested(n)),
    "append_level": lambda n: LoD([[0, 1]] * (n - 1)).append_level([0, 1]),
    "lod_append": lambda n: lt.sequence.lod_append(lt.LoDTensor(np.zeros(1), [[0, 1]] * (n - 1)), [0, 1]),
}


def _nested(n):
    out = [1.0]
    for _ in range(n):
        out = [out]
    return out


@pytest.mark.parametrize("door", list(DOORS))
def test_every_door_stops_at_the_limit(door):
    made = DOORS[door](MAX_LOD_LEVELS)
    assert made is None or (made.lod_level if hasattr(made, "lod_level") else len(made)) == MAX_LOD_LEVELS
    with pytest.raises(LoDError, match=rf"has {MAX_LOD_LEVELS + 1} levels; a LoD has at most MAX_LOD_LEVELS=32"):
        DOORS[door](MAX_LOD_LEVELS + 1)


def _child(code):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, PYTHONFAULTHANDLER="1"),
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, (
        f"rc={proc.returncode} (negative: killed by a signal)\n{proc.stdout}\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


def test_the_deepest_lod_goes_through_every_format_and_one_more_never_exists(tmp_path):
    pytest.importorskip("pyarrow")
    out = _child(f"""
        import numpy as np, lodtensor as lt
        from lodtensor.lod import LoD
        t = lt.LoDTensor(np.arange(3.0), LoD([[0, 1]] * 31 + [[0, 3]]))
        d = {str(tmp_path)!r}
        assert lt.from_arrow(t.to_arrow()).lod() == t.lod()
        lt.save(d + "/t.arrow", t)
        assert lt.load(d + "/t.arrow").lod() == t.lod()
        lt.write_parquet(d + "/t.parquet", {{"t": t}})
        assert lt.read_parquet(d + "/t.parquet")["t"].lod() == t.lod()
        assert [b["t"].lod() for b in lt.read_parquet(d + "/t.parquet", batch_size=1)] == [t.lod()]
        for n in (33, 10_000, 20_000):  # the issue's depths: refused before any Arrow type is built
            try:
                lt.LoDTensor(np.zeros(1), [np.array([0, 1])] * n)
            except ValueError as err:
                assert "at most MAX_LOD_LEVELS=32" in str(err), err
            else:
                raise AssertionError(n)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_a_deep_foreign_arrow_array_is_refused(tmp_path):
    pytest.importorskip("pyarrow")
    out = _child("""
        import numpy as np, pyarrow as pa, lodtensor as lt
        arr = pa.array([1.0])
        offsets = pa.py_buffer(np.array([0, 1], np.int64))
        for _ in range(5_000):  # pyarrow itself builds this deep; 20,000 overflow its stack while building
            arr = pa.LargeListArray.from_buffers(pa.large_list(arr.type), 1, [None, offsets], children=[arr])
        try:
            lt.from_arrow(arr)
        except ValueError as err:
            assert "nests more than 32 list levels" in str(err), err
            print("ok")
    """)
    assert out.strip() == "ok"
