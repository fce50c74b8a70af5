"""Claims of README.md and docs/*.md checked against what the code does (a second reading of the docs).

Each test states a sentence of a document behaviourally (a view shares memory, a call raises what
the doc says) and, where the document once said otherwise, that its text now says what the code does,
so a stale sentence fails here. tests/test_docs_walk.py holds the first reading.
"""

import copy
import pathlib
import pickle
import re

import numpy as np
import pytest

import lodtensor as lt

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _doc(name):
    return (ROOT / name).read_text()


def _flat(name):
    """The document with its line breaks folded, so a phrase is found across a wrapped line."""
    return re.sub(r"\s+", " ", _doc(name))


# -- README: the two commands, the Makefile targets ----------------------------------------------
def _make_targets():
    return set(re.findall(r"^([a-z][a-z-]*):", _doc("Makefile"), re.M))


def test_readme_opens_with_make_demo_and_make_test_which_set_up_their_venv():
    first = re.match(r"```sh\n(.*?)```", _doc("README.md"), re.S)
    assert first, "README.md no longer opens with its two commands"
    commands = [line.split("#")[0].strip() for line in first[1].splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = _doc("Makefile")
    # each target depends on the stamp that creates .venv and installs its extras, then runs
    assert re.search(r"^demo: \$\(VENV\)/\.demo\n\t\$\(BIN\)/python examples/tour\.py", makefile, re.M)
    assert re.search(r'^\$\(VENV\)/\.demo:.*\n\t\$\(PIP\) -e "\.\[torch,arrow,text\]"', makefile, re.M)
    assert re.search(r"^test: \$\(VENV\)/\.test gpu-check\n\t\$\(BIN\)/python -m pytest", makefile, re.M)
    assert re.search(r"^\$\(BIN\)/python:\n\t\$\(PYTHON\) -m venv \$\(VENV\)", makefile, re.M)
    # README says what a fresh machine needs for them (make is one of them)
    assert "pip and `make`" in _flat("README.md")


def test_every_make_target_the_docs_name_exists():
    targets = _make_targets()
    named = set()
    for name in ["README.md", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]:
        named.update(re.findall(r"`make ([a-z][a-z-]*)", _doc(name)))
        named.update(re.findall(r"^\| `make ([a-z][a-z-]*)` \|", _doc(name), re.M))
    assert named >= {"demo", "test", "test-slow", "fuzz", "test-paddle", "test-gpu", "gpu-check", "bench", "docs"}
    assert named <= targets, f"docs name make targets the Makefile lacks: {sorted(named - targets)}"


def test_readme_says_whether_compiled_kernels_run():
    from lodtensor.backend import compiled_kernels

    assert isinstance(compiled_kernels(), bool)  # whether, not which
    assert "`lodtensor.backend.compiled_kernels()` says whether they run" in _flat("README.md")


# -- docs/guide.md --------------------------------------------------------------------------------
def test_guide_views_and_copies_table():
    data = np.arange(6)
    t = lt.LoDTensor(data, [[0, 2, 5, 6]])
    shares = lambda a: np.shares_memory(np.asarray(a), data)  # noqa: E731
    # shares `data`
    assert shares(t.data) and shares(lt.LoDTensor.from_offsets(data, [0, 2, 6]).data)
    assert shares(lt.LoDTensor.from_lengths(data, [2, 4]).data)
    # views of t.data
    assert shares(t[1].data) and shares(t[0:2].data)
    assert all(shares(s.data) for s in t) and all(shares(s.data) for s in t.unbind())
    assert shares(t.numpy()) and shares(np.asarray(t))
    # copies
    for other in (t[[2, 0]].data, t[np.array([True, False, True])].data, t[::2].data, np.array(t),
                  copy.deepcopy(t).data, pickle.loads(pickle.dumps(t)).data, (t * 2).data, np.exp(t).data,
                  t.to_padded()[0], t.to_padded_all()[0], lt.create_lod_tensor(data, [[2, 4]], lt.CPUPlace()).data):
        assert not shares(other)
    padded, lengths = t.to_padded()
    assert not np.shares_memory(lt.from_padded(padded, lengths).data, padded)
    u = lt.LoDTensor()
    u.set(data, lt.CPUPlace())
    assert not shares(u.data)
    # shares
    assert shares(copy.copy(t).data)
    u.set(data, lt.CPUPlace(), zero_copy=True)
    assert shares(u.data)
    other = np.zeros(6)
    assert np.shares_memory(t.with_data(other).data, other)


def test_guide_lod_and_lengths_not_both_and_lod_is_no_tuple():
    with pytest.raises(TypeError, match="not both"):
        lt.LoDTensor(np.arange(5), [[0, 2, 5]], recursive_sequence_lengths=[[2, 3]])
    lod = lt.LoD([[0, 2, 3], [0, 2, 5, 6]])
    assert not isinstance(lod, tuple) and len(lod) == 2
    assert isinstance(lod.levels, tuple) and [a.tolist() for a in lod.levels] == lod()
    assert not any(a.flags.writeable for a in lod.levels)
    guide = _flat("docs/guide.md")
    assert "an immutable object whose `levels` is a tuple of read-only int64 offset arrays" in guide
    assert "Both are validated against each other" not in guide
    assert "(not both: that is a `TypeError`)" in guide


def test_guide_integer_pooling_dtypes():
    from lodtensor import sequence as S

    for dtype, want_sum in (("int32", "int64"), ("bool", "int64"), ("uint8", "int64"), ("uint64", "uint64")):
        t = lt.LoDTensor(np.ones(5, dtype=dtype), [[0, 2, 2, 5]])
        assert S.sequence_pool(t, "sum").dtype == want_sum
        assert S.sequence_pool(t, "average").dtype == np.float64
        for kind in ("max", "min", "first", "last"):
            assert S.sequence_pool(t, kind).dtype == dtype
    t = lt.LoDTensor(np.ones(5, dtype="int8"), [[0, 2, 2, 5]])
    for bad in (float("nan"), 0.5, 1000):
        with pytest.raises(ValueError, match="pad_value"):
            S.sequence_pool(t, "max", pad_value=bad)


# -- docs/porting.md ------------------------------------------------------------------------------
def test_porting_fluid_lodtensor_is_a_subclass_with_paddles_constructor():
    import lodtensor.fluid as fluid

    assert fluid.LoDTensor is not lt.LoDTensor and issubclass(fluid.LoDTensor, lt.LoDTensor)
    assert fluid.LoDTensor([[2, 3]]).recursive_sequence_lengths() == [[2, 3]]
    assert lt.LoDTensor([[2, 3]]).shape() == [1, 2]
    porting = _flat("docs/porting.md")
    assert "It is a subclass of the top-level `lodtensor.LoDTensor`" in porting
    assert "is the same class with a Pythonic constructor" not in porting


def test_porting_set_lod_takes_a_level_of_one_offset_and_refuses_none():
    import lodtensor.fluid as fluid

    t = fluid.LoDTensor()
    t.set(np.zeros((0, 1), "float32"), fluid.CPUPlace())
    t.set_lod([[0]])  # one offset: a level of no sequence (Paddle refuses it)
    assert t.lod() == [[0]]
    with pytest.raises(lt.LoDError, match="at least 1 offset"):
        t.set_lod([[]])
    assert t.lod() == [[0]]  # the previous lod stays
    porting = _flat("docs/porting.md")
    assert "a level with fewer than 2 offsets" not in porting
    assert "A level of one offset, `[0]`, is accepted here and refused by Paddle" in porting


def test_create_random_int_lodtensor_names_low_and_high():
    # a float bound raised Python's "'float' object cannot be interpreted as an integer", an int64
    # overflow NumPy's "high is out of bounds for int64": neither named the function and both values
    with pytest.raises(TypeError, match=r"create_random_int_lodtensor\(\): low and high must be integers, "
                                        r"got low=0\.5, high=9"):
        lt.create_random_int_lodtensor([[2, 3]], [1], lt.CPUPlace(), 0.5, 9)
    with pytest.raises(TypeError, match=r"low=0, high=9\.0"):
        lt.create_random_int_lodtensor([[2, 3]], [1], lt.CPUPlace(), 0, 9.0)
    with pytest.raises(ValueError, match=r"int64 values .*got low=0, high=9223372036854775808"):
        lt.create_random_int_lodtensor([[2, 3]], [1], lt.CPUPlace(), 0, 2**63)
    with pytest.raises(ValueError, match=r"low=-9223372036854775809"):
        lt.create_random_int_lodtensor([[2, 3]], [1], lt.CPUPlace(), -(2**63) - 1, 0)
    t = lt.create_random_int_lodtensor([[2, 3]], [1], lt.CPUPlace(), 2**63 - 2, 2**63 - 1)  # the edges are fine
    assert t.dtype == np.int64 and (t.data >= 2**63 - 2).all()


# -- docs/backends.md -----------------------------------------------------------------------------
def test_backends_names_every_contract_group_and_the_tuning_names():
    from lodtensor.backend import KERNELS
    from lodtensor.backend._contract import groups
    from lodtensor.backend.numpy import _tuning

    backends = _flat("docs/backends.md")
    found = re.search(r"(\d+) abstract methods in groups \(([^)]*)\)", backends)
    assert found and int(found[1]) == len(KERNELS) == sum(map(len, groups().values()))
    assert [g.strip() for g in found[2].split(";")] == list(groups())
    assert _tuning.CHUNK_PARALLEL_BYTES == 16 << 20 and not hasattr(_tuning, "_PARALLEL_BYTES")
    assert re.search(r"(?<![A-Z_])_PARALLEL_BYTES", backends) is None
    assert "`_tuning.CHUNK_PARALLEL_BYTES` stays 16 MiB" in backends


# -- docs/interop.md ------------------------------------------------------------------------------
def test_interop_to_nested_jagged_shares_values_and_copies_offsets():
    pytest.importorskip("torch")
    s = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    njt = s.to_nested_jagged()
    assert np.shares_memory(njt.values().numpy(), s.data)
    assert not np.shares_memory(njt.offsets().numpy(), s.offsets())
    line = next(x for x in _doc("docs/interop.md").splitlines() if ">>> njt = s.to_nested_jagged()" in x)
    assert "offsets: torch's copy" in line and "offsets are s's buffers" not in line


def test_interop_strings_are_a_type_error_nulls_a_value_error():
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(TypeError, match="numbers or booleans"):
        lt.from_arrow(pa.array([["a", "b"]]))
    with pytest.raises(ValueError, match="null"):
        lt.from_arrow(pa.array([[1, 2], None]))
    interop = _flat("docs/interop.md")
    assert "values that are not numbers or booleans (strings, structs) a `TypeError`" in interop


# -- docs/scale.md --------------------------------------------------------------------------------
def test_scale_default_read_size_and_collective_limits():
    from lodtensor.distributed import _wire
    from lodtensor.text import _corpus

    assert (_corpus._MIN_READ, _wire.MAX_LEVELS, _wire.MAX_ROW_DIMS) == (1024, 8, 8)
    assert "at least 1024 documents and at least 256K rows" in re.sub(r"\s+", " ", _corpus._ParquetCorpus.__doc__)
    scale = _flat("docs/scale.md")
    assert "at least 1024 documents and 256K rows" in scale
    assert "<= 8 lod levels and <= 8 row dims" in scale
    assert (_wire.HEAD * 8, _wire.ITEM * 8) == (480, 72)  # "480 bytes", "72 bytes per pair"


# -- docstrings (the API page) --------------------------------------------------------------------
def test_public_docstrings_hold_no_control_characters():
    # split_sentences's docstring (not a raw string) said ``\r``: a carriage return in the text, which
    # broke the reStructuredText of docs/api.md, so `make docs` (warnings are errors) failed
    pytest.importorskip("torch")
    from tests.test_docs_examples import exported

    control = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
    bad = [q for _, q, obj in exported() if control.search(getattr(obj, "__doc__", None) or "")]
    assert bad == []
