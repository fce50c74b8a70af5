"""Claims of README.md and docs/*.md that the doctests do not run, checked against the code.

Found by walking the docs as a new user: each test reads the sentence from the document and
compares it with what the code does, so a stale number or name fails here.
"""

import pathlib
import re

import numpy as np
import pytest

import lodtensor as lt

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _doc(name):
    return (ROOT / name).read_text()


def test_nested_md_counts_the_pointwise_tables():
    # docs/nested.md said UNARY: 72 ops, BINARY: 32 (the tables have grown since)
    from lodtensor.nested import _tables

    found = re.search(r"`UNARY`: (\d+) ops, `BINARY`: (\d+)", _doc("docs/nested.md"))
    assert found, "docs/nested.md no longer states the table sizes"
    assert (int(found[1]), int(found[2])) == (len(_tables.UNARY), len(_tables.BINARY))


def test_readme_make_test_names_the_examples_it_leaves_to_test_slow():
    # README's `make test` row said "every script in examples/"; the multi-process ones are `slow`
    from tests.test_examples import EXAMPLES, SLOW

    row = next(line for line in _doc("README.md").splitlines() if line.startswith("| `make test` |"))
    assert SLOW and SLOW <= {p.name for p in EXAMPLES}
    for name in SLOW:
        assert name in row, f"README's make test row does not say that {name} runs only in make test-slow"


def test_text_md_names_the_parquet_column_type(tmp_path):
    # docs/text.md said write_parquet stores a `list<list<int64>>` column; it is large_list (int64 offsets)
    pq = pytest.importorskip("pyarrow.parquet")
    t = lt.from_nested_list([[[2, 3], [4]], [[5]]])
    path = tmp_path / "tokens.parquet"
    lt.write_parquet(str(path), {"tokens": t})
    written = str(pq.read_schema(str(path)).field("tokens").type).replace("element: ", "").replace("item: ", "")
    assert written == "large_list<large_list<int64>>"
    assert f"`{written}` column" in _doc("docs/text.md")


def test_interop_md_sparse_indices_shared_with_scipy_copied_for_torch():
    # docs/interop.md said the column indices are copied once per LoD for torch (12 us); torch gets
    # its own copy of the crow and column indices at every call, scipy shares them read-only
    torch = pytest.importorskip("torch")
    pytest.importorskip("scipy.sparse")
    t = lt.LoDTensor(np.arange(6.0), [[0, 2, 2, 6]])
    a, b = t.to_sparse_csr(format="scipy"), t.to_sparse_csr(format="scipy")
    assert np.shares_memory(a.indices, b.indices) and not a.indices.flags.writeable
    assert np.shares_memory(a.indptr, t.offsets())
    c, d = t.to_sparse_csr(), t.to_sparse_csr()
    assert not np.shares_memory(c.col_indices().numpy(), d.col_indices().numpy())
    c.col_indices()[0] = 5  # torch's own copy: the LoD's cached positions are untouched
    c.crow_indices()[1] = 1
    assert d.col_indices().tolist() == t.to_sparse_csr().col_indices().tolist() == [0, 1, 0, 1, 2, 3]
    assert t.lod() == [[0, 2, 2, 6]]
    row = next(line for line in _doc("docs/interop.md").splitlines() if line.startswith("| sparse |"))
    assert "at every call" in row and "once per LoD); torch's crow" not in row
    assert torch.equal(t.to_sparse_csr().to_dense(), torch.tensor([[0.0, 1.0, 0, 0], [0, 0, 0, 0],
                                                                   [2.0, 3.0, 4.0, 5.0]], dtype=torch.float64))


def test_interop_md_to_nested_jagged_of_a_deeper_tensor_takes_level():
    # docs/interop.md said to_nested_jagged needs lod_level == 1 ("pick a level first"); level=k does it
    pytest.importorskip("torch")
    t = lt.LoDTensor(np.arange(6.0), [[0, 2, 3], [0, 2, 2, 6]])
    with pytest.raises(ValueError, match="pass level=k"):
        t.to_nested_jagged()
    assert [c.tolist() for c in t.to_nested_jagged(level=0).unbind()] == [[0.0, 1.0], [2.0, 3.0, 4.0, 5.0]]
    assert "`level=k`" in _doc("docs/interop.md")


def test_porting_md_checkpoint_arrays_are_numpy_and_modules_want_tensors(tmp_path):
    # docs/porting.md's sentiment side by side used load_program_state's arrays in torch.cat and in
    # module.load_state_dict: both need torch tensors (the doc now converts with torch.from_numpy)
    torch = pytest.importorskip("torch")
    from lodtensor import nn
    from lodtensor.fluid import io as fio

    fio.save_lod_tensor(np.ones((3, 12), "float32"), str(tmp_path / "lstm_0.w_0"))
    fio.save_lod_tensor(np.zeros((1, 21), "float32"), str(tmp_path / "lstm_0.b_0"))
    p = fio.load_program_state(str(tmp_path))
    assert all(isinstance(v, np.ndarray) for v in p.values())
    lstm = nn.DynamicLSTM(3)
    with pytest.raises(RuntimeError, match="expected torch.Tensor"):
        lstm.load_state_dict({"weight": p["lstm_0.w_0"], "bias": p["lstm_0.b_0"]})
    lstm.load_state_dict({"weight": torch.from_numpy(p["lstm_0.w_0"]), "bias": torch.from_numpy(p["lstm_0.b_0"])})
    assert float(lstm.weight.detach().sum()) == 36.0
    assert 'p["fc_1.w_0"], p["fc_1.w_1"]' in _doc("docs/porting.md")
