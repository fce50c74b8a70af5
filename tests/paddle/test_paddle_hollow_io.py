"""What real Paddle 2.6.2 does with a LoDTensor file whose lod has a level of no sequence (offsets [0]).

Paddle's deserialiser (the ``load`` / ``load_combine`` operators, ``paddle.static.io.load_vars``) does
not run CheckLoD: it reads such a file as written, and Paddle's ``save`` operator writes one itself
(``sequence_expand`` with every repeat 0 gives lod [[0]]). So lodtensor.fluid.io writes and reads them
as Paddle does. Paddle refuses the level only where Python sets a lod (``set_lod``,
``set_recursive_sequence_lengths``, ``create_lod_tensor``, ``DataFeeder``), and its ``sequence_pool``
(sum, max, last) kernels crash the process (SIGFPE) on such a tensor, where lodtensor's pool gives 0 rows.
"""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from paddle.base import core  # noqa: E402

import lodtensor as lt  # noqa: E402
from lodtensor.fluid import io as fio  # noqa: E402

pytestmark = [pytest.mark.paddle, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOLLOW = {
    "batch0": [[0]],
    "batch0x2": [[0], [0]],
    "docs_without_sentences": [[0, 0, 0], [0]],
    "slice_of_empty_doc": [[0, 0], [0]],
}


def _tensor(lod):
    return lt.LoDTensor(np.zeros((0, 3), "float32"), lod)


def _static(build, feed=None):
    """Run one static program built by ``build(block)`` (which returns the Variables to fetch)."""
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with warnings.catch_warnings(), paddle.static.scope_guard(paddle.static.Scope()):
            warnings.simplefilter("ignore")
            with paddle.static.program_guard(main, startup):
                fetch = build(main.global_block())
                exe = paddle.static.Executor(paddle.CPUPlace())
                out = exe.run(main, feed=feed or {}, fetch_list=fetch, return_numpy=False)
                return [(np.array(t), t.lod()) for t in out]
    finally:
        paddle.disable_static()


def _load_op(path, lod_level):
    def build(block):
        x = block.create_var(name="x", dtype="float32", shape=[-1, 3], lod_level=lod_level)
        block.append_op(type="load", inputs={}, outputs={"Out": [x]}, attrs={"file_path": path})
        return [x]

    return build


@pytest.mark.parametrize("name", list(HOLLOW))
def test_paddle_load_operator_reads_our_file_of_a_level_of_no_sequence(tmp_path, name):
    lod = HOLLOW[name]
    path = str(tmp_path / name)
    fio.save_lod_tensor(_tensor(lod), path)
    [(data, got)] = _static(_load_op(path, len(lod)))
    assert got == lod and data.shape == (0, 3) and data.dtype == np.float32


def test_paddle_load_combine_reads_our_combined_file(tmp_path):
    path = str(tmp_path / "params")
    fio.save_combine({name: _tensor(lod) for name, lod in HOLLOW.items()}, path)
    names = sorted(HOLLOW)  # save_combine's default order

    def build(block):
        outs = [block.create_var(name=n, dtype="float32", shape=[-1, 3], lod_level=len(HOLLOW[n])) for n in names]
        block.append_op(type="load_combine", inputs={}, outputs={"Out": outs}, attrs={"file_path": path})
        return outs

    got = _static(build)
    assert [lod for _, lod in got] == [HOLLOW[n] for n in names]
    assert all(data.shape == (0, 3) for data, _ in got)


def test_paddle_writes_a_level_of_no_sequence_and_we_read_it(tmp_path):
    path = str(tmp_path / "expanded")

    def build(block):
        x = paddle.static.data("x", [-1, 3], "float32", lod_level=1)
        y = paddle.static.data("y", [-1, 1], "float32", lod_level=1)
        out = block.create_var(name="out", dtype="float32", lod_level=1)
        block.append_op(type="sequence_expand", inputs={"X": [x], "Y": [y]}, outputs={"Out": [out]},
                        attrs={"ref_level": 0})  # fmt: skip
        block.append_op(type="save", inputs={"X": [out]}, outputs={}, attrs={"file_path": path})
        return [out]

    x, y = core.LoDTensor(), core.LoDTensor()
    x.set(np.ones((2, 3), "float32"), core.CPUPlace())
    x.set_lod([[0, 1, 2]])
    y.set(np.zeros((0, 1), "float32"), core.CPUPlace())
    y.set_lod([[0, 0, 0]])  # every repeat 0
    [(data, lod)] = _static(build, feed={"x": x, "y": y})
    assert lod == [[0]] and data.shape == (0, 3)
    back = fio.load_lod_tensor(path)
    assert back.lod() == [[0]] and back.data.shape == (0, 3) and back.data.dtype == np.float32


def test_paddle_refuses_the_level_where_python_sets_a_lod():
    t = core.LoDTensor()
    t.set(np.zeros((0, 3), "float32"), core.CPUPlace())
    with pytest.raises(ValueError, match="The provided LoD is invalid"):
        t.set_lod([[0, 0, 0], [0]])
    with pytest.raises(ValueError, match="recursive_sequence_lengths info is invalid"):
        paddle.base.create_lod_tensor(np.zeros((0, 3), "float32"), [[0, 0], []], paddle.CPUPlace())
    # lodtensor accepts it (a valid LoD since the gate change)
    assert lt.LoDTensor(np.zeros((0, 3), "float32"), [[0, 0, 0], [0]]).has_valid_recursive_sequence_lengths()


_POOL = """
import sys, warnings
warnings.simplefilter("ignore")
import numpy as np, paddle
paddle.enable_static()
main = paddle.static.Program()
with paddle.static.program_guard(main, paddle.static.Program()):
    b = main.global_block()
    x = b.create_var(name="x", dtype="float32", shape=[-1, 3], lod_level=2)
    b.append_op(type="load", inputs={}, outputs={"Out": [x]}, attrs={"file_path": sys.argv[1]})
    out = b.create_var(name="o", dtype="float32", lod_level=1)
    index = b.create_var(name="m", dtype="int32")
    b.append_op(type="sequence_pool", inputs={"X": [x]}, outputs={"Out": [out], "MaxIndex": [index]},
                attrs={"pooltype": "SUM", "pad_value": 0.0, "is_test": True})
    paddle.static.Executor(paddle.CPUPlace()).run(main, fetch_list=[out], return_numpy=False)
print("pooled")
"""


@pytest.mark.slow
def test_paddle_sequence_pool_crashes_on_a_loaded_level_of_no_sequence(tmp_path):
    """Why the level is a documented difference: Paddle's pool kernel dies (SIGFPE) where lodtensor's
    gives one empty row set per parent sequence."""
    path = str(tmp_path / "docs")
    fio.save_lod_tensor(_tensor([[0, 0, 0], [0]]), path)
    proc = subprocess.run([sys.executable, "-c", _POOL, path], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, check=False)  # fmt: skip
    assert proc.returncode != 0 and "pooled" not in proc.stdout, proc.stdout[-500:]
    mine = lt.sequence.sequence_pool(fio.load_lod_tensor(path), "sum")
    assert mine.lod() == [[0, 0, 0]] and mine.data.shape == (0, 3)
