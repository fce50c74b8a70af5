"""The edges of the declared version range (setup.cfg: numpy>=1.23, torch>=2.4), in the tests' own venv.

The suite runs on torch 2.13 and NumPy 2; each case here puts back, by monkeypatching, the one thing an
older release does differently (the release named in the test), so the branch that serves it runs here
too and fails without its fix. Run on the real releases: see docs/compatibility.md.
"""

import importlib
import io
import time
import warnings

import numpy as np
import pytest

import lodtensor as lt
import lodtensor.nested as ln
from lodtensor import _data
from lodtensor.nn import functional as nnf

from . import _torch_range
from ._torch_range import safe_globals

torch = pytest.importorskip("torch")
private = pytest.importorskip("torch.nested._internal.nested_tensor")


def _same_njt(got, lengths, values):
    assert got.layout == torch.jagged and got.offsets().tolist() == np.cumsum([0, *lengths]).tolist()
    assert got.values().data_ptr() == values.data_ptr()
    assert all(torch.equal(a, b) for a, b in zip(got.unbind(), torch.split(values, lengths)))


def test_to_nested_jagged_caches_int_lengths_where_torch_keeps_ints(monkeypatch):
    """torch 2.4's jagged class keeps min/max_seqlen as ints (no ``_max_seqlen_tensor``): it was given
    (n, 0) tensors, which its ``_max_seqlen`` then returned (scaled_dot_product_attention failed on them)."""
    from lodtensor.interop import torch as interop  # noqa: PLC0415

    caches = []

    class Torch24(private.NestedTensor):  # what torch 2.4 has: no tensor-valued lengths
        _max_seqlen_tensor = None
        _min_seqlen_tensor = None

        @staticmethod
        def __new__(cls, values, offsets, **kwargs):
            caches.append(kwargs.get("_metadata_cache"))
            raise TypeError("recorded")  # (then the public constructor makes the tensor)

    monkeypatch.setattr(interop, "_jagged_class", lambda: Torch24)
    t = lt.LoDTensor(np.arange(10.0).reshape(5, 2), [[0, 1, 5]])
    njt = t.to_nested_jagged()
    monkeypatch.undo()
    assert len(caches) == 1 and all(type(v) is int for v in caches[0].values()), caches
    assert caches == [{"min_seqlen": 1, "max_seqlen": 4}]
    _same_njt(njt, [1, 4], njt.values())
    assert torch.equal(njt.values(), torch.from_numpy(t.data))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_to_nested_jagged_where_torchs_constructor_takes_no_lengths(monkeypatch, backend):
    """torch 2.4's ``nested_tensor_from_jagged`` has no ``min_seqlen``/``max_seqlen``: to_nested_jagged,
    which ends in it where torch's private names are not the ones it knows, raised TypeError there."""
    from lodtensor.interop import torch as interop  # noqa: PLC0415

    real = torch.nested.nested_tensor_from_jagged

    def torch24(values, offsets=None, lengths=None, jagged_dim=None):
        return real(values, offsets, lengths, jagged_dim)

    data = np.arange(12.0).reshape(6, 2)
    t = lt.LoDTensor(torch.from_numpy(data) if backend == "torch" else data, [[0, 2, 2, 6]])
    monkeypatch.setattr(interop, "_jagged_class", lambda: None)  # torch 2.4's view op differs: the public one
    monkeypatch.setattr(torch.nested, "nested_tensor_from_jagged", torch24)
    njt = t.to_nested_jagged()
    monkeypatch.undo()
    _same_njt(njt, [2, 0, 4], torch.as_tensor(t.data))
    assert lt.from_torch(njt).lod() == [[0, 2, 2, 6]]


def test_torch_safe_globals_admit_the_bytes_torch_save_writes(monkeypatch):
    """torch.save writes bytes as ``_codecs.encode(...)`` calls, which torch 2.4's weights_only loader does
    not admit by default: a LoDTensor saved there did not load with torch_safe_globals() admitted."""
    wo = pytest.importorskip("torch._weights_only_unpickler")
    real = wo._get_allowed_globals
    monkeypatch.setattr(wo, "_get_allowed_globals", lambda: {k: v for k, v in real().items() if k != "_codecs.encode"})
    buf = io.BytesIO()
    torch.save({"t": lt.LoDTensor(torch.arange(6.0), [[0, 2, 6]]), "n": lt.LoDTensor(np.arange(3), [[0, 3]])}, buf)
    buf.seek(0)
    with pytest.raises(Exception, match="_codecs.encode"):  # the simulation holds: torch refuses the bytes
        with safe_globals([g for g in lt.interop.torch_safe_globals() if g.__name__ != "encode"]):
            torch.load(buf, weights_only=True)
    buf.seek(0)
    with safe_globals(lt.interop.torch_safe_globals()):
        back = torch.load(buf, weights_only=True)
    assert back["t"].lod() == [[0, 2, 6]] and back["t"].data.tolist() == [0, 1, 2, 3, 4, 5]
    assert back["n"].lod() == [[0, 3]] and back["n"].data.tolist() == [0, 1, 2]


RAGGED = [[1, 2], [3]]


@pytest.fixture
def numpy_123_ragged(monkeypatch):
    """NumPy < 1.24: a ragged nested list warns (VisibleDeprecationWarning) and becomes an object array."""
    warning = getattr(np, "exceptions", np).VisibleDeprecationWarning
    real = np.asarray

    def asarray(a, *args, **kwargs):
        if a is RAGGED:
            warnings.warn("Creating an ndarray from ragged nested sequences ... is deprecated.", warning, stacklevel=2)
            return real(a, dtype=object)
        return real(a, *args, **kwargs)

    monkeypatch.setattr(np, "asarray", asarray)
    monkeypatch.setattr(_data, "_RAGGED_WARNING", warning, raising=False)


def test_ragged_data_is_a_value_error_on_numpy_that_warns(numpy_123_ragged):
    """On NumPy 1.23 ``t.set(ragged_list)`` leaked NumPy's warning and raised TypeError (an object array)
    where NumPy >= 1.24 gives the ValueError naming from_nested_list()."""
    t = lt.LoDTensor(np.zeros((5, 2)), [[0, 2, 5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="rectangular.*from_nested_list"):
            t.set(RAGGED, lt.CPUPlace())
        with pytest.raises(lt.errors.ShapeError, match=r"tensor_list\[0\] is a ragged nested list"):
            ln.nested_tensor([RAGGED])
    assert t.shape() == [5, 2] and t.lod() == [[0, 2, 5]]
    assert lt.LoDTensor([[1, 2], [3, 4]], [[0, 2]]).shape() == [2, 2]  # rectangular lists as before


def test_the_ragged_probe_matches_this_numpy():
    """The probe names NumPy's warning only where NumPy warns (< 1.24) rather than raising."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            np.asarray(RAGGED)
        except ValueError:
            assert _data._RAGGED_WARNING is None
        except Warning as w:
            assert _data._RAGGED_WARNING is type(w)


def test_step_loops_keep_torchs_thread_count_where_changing_it_is_slow(monkeypatch):
    """torch 2.4.1 took 14 ms a ``set_num_threads`` change (2.13: microseconds): a small LSTM, which
    changed the count twice a step, ran for minutes. Where a change is slow the loops keep the count."""
    from lodtensor.backend.torch import _steps  # noqa: PLC0415

    real = torch.set_num_threads
    changes = []

    def slow(n):  # torch 2.4.1's cost (5 ms here; the measured change is 14 ms)
        changes.append(n)
        time.sleep(5e-3)
        real(n)

    previous = torch.get_num_threads()
    real(2)
    monkeypatch.setattr(_steps, "_SWITCH", [])
    monkeypatch.setattr(torch, "set_num_threads", slow)
    try:
        x = lt.LoDTensor(torch.rand(9, 12, dtype=torch.float64, requires_grad=True), [[0, 4, 5, 9]])
        w = torch.rand(3, 12, dtype=torch.float64, requires_grad=True)
        b = torch.rand(1, 21, dtype=torch.float64, requires_grad=True)
        h = nnf.dynamic_lstm(x, w, b)[0]
        measured = len(changes)
        assert 0 < measured <= 6 and _steps._SWITCH == [False]  # measured once, found slow
        h.data.sum().backward()
        nnf.dynamic_lstm(x, w, b)[0].data.sum().backward()
        assert len(changes) == measured  # no change in the steps' loops, forward or backward
        assert torch.get_num_threads() == 2 and x.data.grad is not None
    finally:
        monkeypatch.undo()
        real(previous)


def test_lodtensor_from_dlpack_where_the_data_makes_no_versioned_capsule(monkeypatch):
    """``__dlpack__`` of torch 2.4 (and of NumPy < 2.1) takes no ``max_version``: lodtensor's from_dlpack asked
    only for DLPack 1.0 capsules and raised that TypeError for every LoDTensor of such data."""
    real = torch.Tensor.__dlpack__

    def torch24(self, stream=None):
        return real(self, stream=stream)

    monkeypatch.setattr(torch.Tensor, "__dlpack__", torch24)
    t = lt.LoDTensor(torch.arange(5.0), [[0, 2, 5]])
    back = lt.from_dlpack(t)
    data = back.data
    shared = data.data_ptr() if isinstance(data, torch.Tensor) else data.__array_interface__["data"][0]
    assert back.lod() == [[0, 2, 5]] and back.tolist() == t.tolist() and shared == t.data.data_ptr()
    nested = lt.from_dlpack(lt.LoDTensor(torch.arange(6).reshape(3, 2), [[0, 1, 2], [0, 2, 3]]))
    assert nested.lod() == [[0, 1, 2], [0, 2, 3]] and nested.data.tolist() == [[0, 1], [2, 3], [4, 5]]


def test_an_installed_library_that_does_not_import_is_not_called_missing(monkeypatch):
    """pyarrow >= 21 with NumPy 1.x (pip takes it: numpy>=1.22 and pyarrow>=12 admit both) raises
    ImportError("pyarrow requires NumPy 2.0 or newer"): the message said pyarrow was not installed."""
    pytest.importorskip("pyarrow")
    from lodtensor.interop import _lazy  # noqa: PLC0415

    real = _lazy.importlib.import_module

    def numpy_1(name, *args):
        if name.split(".")[0] == "pyarrow":
            raise ImportError("pyarrow requires NumPy 2.0 or newer, found 1.23.5")
        return real(name, *args)

    monkeypatch.setattr(_lazy.importlib, "import_module", numpy_1)
    with pytest.raises(ImportError, match=r"to_arrow\(\) needs pyarrow, which is installed but does not import "
                                          r"here: pyarrow requires NumPy 2.0 or newer") as caught:
        lt.LoDTensor(np.arange(3.0), [[0, 3]]).to_arrow()
    assert "not installed" not in str(caught.value)
    with pytest.raises(ImportError, match="needs lodtensor_missing, which is not installed"):
        _lazy.require("lodtensor_missing.sub", "arrow", "f()")


def test_arrow_and_parquet_reads_take_no_pandas_dtype(tmp_path):
    """pyarrow < 21 (what runs with NumPy 1.x) imports pandas for ``DataType.to_pandas_dtype()``: without
    pandas, from_arrow and read_parquet raised ModuleNotFoundError there. No read calls it now."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("pyarrow.parquet")
    import sys  # noqa: PLC0415

    t = lt.LoDTensor(np.arange(12, dtype=np.int16).reshape(6, 2), [[0, 2, 6]])
    arr, path = t.to_arrow(), tmp_path / "t.parquet"
    lt.interop.write_parquet(path, {"x": t})
    called = set()

    def profile(frame, event, arg):
        if event == "c_call":
            called.add(getattr(arg, "__name__", ""))

    sys.setprofile(profile)
    try:
        back = lt.from_arrow(arr)
        read = lt.interop.read_parquet(path)["x"]
    finally:
        sys.setprofile(None)
    assert "to_pandas_dtype" not in called
    for got in (back, read):
        assert got.lod() == [[0, 2, 6]] and got.data.dtype == np.int16 and got.tolist() == t.tolist()
    for typ, want in ((pa.uint64(), "uint64"), (pa.float16(), "float16"), (pa.int8(), "int8"), (pa.bool_(), "bool")):
        assert lt.interop.arrow.leaf_dtype(pa, typ) == np.dtype(want)


class _Item:
    """What older_oracle_skips reads and writes of a collected pytest item."""

    def __init__(self, nodeid):
        self.nodeid, self.reasons = nodeid, []

    def add_marker(self, mark):
        self.reasons.append(mark.kwargs["reason"])


@pytest.mark.parametrize(("release", "skipped"), [((2, 11), {"compiled", "jagged"}), ((2, 12), {"jagged"}),
                                                  ((2, 13), set()), (None, set())])
def test_compile_tests_skip_below_their_own_release(monkeypatch, release, skipped):
    """The one-graph torch.compile tests skip below COMPILE_RELEASE, the jagged-oracle tests below
    JAGGED_ORACLE_RELEASE, each on its own (here 2.12 and 2.13, made apart by monkeypatching): both skipped
    before 2.13 under the one JAGGED_ORACLE_RELEASE, so moving one floor moved the other."""
    monkeypatch.setattr(_torch_range, "COMPILE_RELEASE", (2, 12))
    monkeypatch.setattr(_torch_range, "JAGGED_ORACLE_RELEASE", (2, 13))
    monkeypatch.setattr(_torch_range, "torch_release", lambda: release)
    items = {"compiled": _Item("tests/test_compile_lod.py::test_the_lod_gate_stays_outside_the_graph[aot_eager]"),
             "compiled test": _Item(next(t for t in sorted(_torch_range.COMPILE_TESTS) if "::" in t)),
             "jagged": _Item(sorted(_torch_range.JAGGED_ORACLE_TESTS)[0] + "[float32]"),
             "other": _Item("tests/test_version_range.py::test_arrow_and_parquet_reads_take_no_pandas_dtype")}
    _torch_range.older_oracle_skips(list(items.values()))
    assert items["compiled"].reasons == items["compiled test"].reasons
    assert {name for name in ("compiled", "jagged") if items[name].reasons} == skipped
    assert items["other"].reasons == [] and all(len(item.reasons) <= 1 for item in items.values())
    here = ".".join(map(str, release or ()))
    if "compiled" in skipped:
        assert items["compiled"].reasons == [f"one-graph tracing under torch.compile needs torch 2.12's dynamo; "
                                             f"torch {here}'s breaks graphs inside lodtensor (same values)"]
    if "jagged" in skipped:
        assert items["jagged"].reasons == [f"its oracle is torch 2.13's jagged layout; torch {here}'s lacks or "
                                           f"differs in its ops"]


@pytest.mark.parametrize(("release", "skipped"), [((2, 11), {"case", "sibling"}), ((2, 12), {"case"}),
                                                  ((2, 13), set())])
def test_a_compile_case_skips_below_its_own_floor(monkeypatch, release, skipped):
    """A case of COMPILE_CASE_RELEASES (a test id with its parameters) skips below its own floor, with its own
    reason; the test's other cases (and the rest of COMPILE_TESTS) run from COMPILE_RELEASE."""
    case = "tests/test_compile_lod.py::test_operators_and_functions_match_eager_in_one_graph[0 < t]"
    monkeypatch.setattr(_torch_range, "COMPILE_RELEASE", (2, 12))
    monkeypatch.setattr(_torch_range, "COMPILE_CASE_RELEASES", {case: ((2, 13), "needs {}; here {}")})
    monkeypatch.setattr(_torch_range, "torch_release", lambda: release)
    items = {"case": _Item(case), "sibling": _Item(case.replace("[0 < t]", "[t > 0]"))}
    _torch_range.older_oracle_skips(list(items.values()))
    assert {name for name, item in items.items() if item.reasons} == skipped
    assert all(len(item.reasons) <= 1 for item in items.values())
    if skipped == {"case"}:
        assert items["case"].reasons == ["needs 2.13; here 2.12"]


def test_each_compile_case_names_a_case_of_a_one_graph_test():
    """Each key of COMPILE_CASE_RELEASES is a parametrized case of a test of COMPILE_TESTS (a misspelt id
    would skip nothing)."""
    for case, (floor, _) in _torch_range.COMPILE_CASE_RELEASES.items():
        test, param = case[:-1].split("[", 1)
        path, name = test.split("::")
        assert test in _torch_range.COMPILE_TESTS or path in _torch_range.COMPILE_TESTS
        assert floor > _torch_range.COMPILE_RELEASE
        fn = getattr(importlib.import_module(path[:-3].replace("/", ".")), name)
        assert any(param in mark.args[1] for mark in fn.pytestmark if mark.name == "parametrize")
