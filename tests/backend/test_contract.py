"""The declared backend contract (``lodtensor/backend/_contract.py``) holds for every backend.

What someone adding a backend runs to know they are done: every declared method
implemented by the backend's own package with the declared signature, the
attributes set, and code outside ``lodtensor/backend`` calling nothing else.
"""

import ast
import inspect
import pathlib
import re

import pytest

import lodtensor
from lodtensor.backend import _contract, get_backend
from lodtensor.backend._contract import ATTRIBUTES, DERIVED, KERNELS, Backend

from . import cupy_stub

ROOT = pathlib.Path(lodtensor.__file__).parent

# CuPy reuses the NumPy backend's array functions written against ``xp`` (no host machinery in
# them); every other method of a backend comes from its own package.
_SHARED = {"cupy": ("lodtensor.backend.numpy._arrays",)}


@pytest.fixture(params=["numpy", "torch", "cupy"])
def backend(request, monkeypatch):
    """Each backend; CuPy's real class is built over the recording cupy stub (no GPU needed)."""
    name = request.param
    if name == "torch":
        pytest.importorskip("torch")
    if name == "cupy":
        cupy_stub.install(monkeypatch)
    return get_backend(name)


def test_the_contract_is_declared():
    assert len(KERNELS) == len(set(KERNELS)) > 60
    assert Backend.__abstractmethods__ == set(KERNELS) - set(DERIVED)
    groups = _contract.groups()
    assert [name for names in groups.values() for name in names] == list(KERNELS)
    assert {"arrays, devices and dtypes", "segment kernels", "matrix and nn math"} <= set(groups)
    for name in KERNELS:  # a one-line contract each
        doc = inspect.getdoc(getattr(Backend, name))
        assert doc and doc.strip(), name


def test_every_method_is_implemented_with_the_declared_signature(backend):
    cls = type(backend)
    assert not cls.__abstractmethods__, f"{backend.name} lacks {sorted(cls.__abstractmethods__)}"
    for name in KERNELS:
        declared = inspect.signature(getattr(Backend, name))
        mine = inspect.signature(getattr(cls, name))
        want = [(p.name, p.kind) for p in declared.parameters.values()]
        got = [(p.name, p.kind) for p in mine.parameters.values()]
        positional = [p for p in want if p[1] != inspect.Parameter.KEYWORD_ONLY]
        assert got[: len(positional)] == positional, (backend.name, name, got, want)
        extra = {p.name for p in mine.parameters.values()} - {p[0] for p in want}
        for extra_name in extra:  # extra keywords are allowed, with a default
            param = mine.parameters[extra_name]
            assert param.default is not inspect.Parameter.empty or param.kind == param.VAR_KEYWORD, (name, param)
        assert {p[0] for p in want} <= {p.name for p in mine.parameters.values()}, (backend.name, name)


def test_every_method_comes_from_the_backends_own_package(backend):
    package = f"lodtensor.backend.{backend.name}"
    allowed = _SHARED.get(backend.name, ())
    for name in KERNELS:
        owner = next(c for c in type(backend).__mro__ if name in vars(c))
        module = owner.__module__
        if name in DERIVED and owner is Backend:
            continue
        assert module.startswith(package) or module in allowed, f"{backend.name}.{name} comes from {module}"


def test_attributes_are_set(backend):
    for name in ATTRIBUTES:
        assert name in {k for c in type(backend).__mro__[:-2] for k in vars(c)} or name == "xp", name
    assert backend.name in ("numpy", "torch", "cupy")


def _backend_receivers(tree):
    """Attribute names read from an object that is a backend: names ``be``/``backend``/``_be`` and
    any ``<expr>.backend`` (``x.backend.gather``)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("be", "backend", "_be"):
            yield node.attr, node.lineno
        elif isinstance(value, ast.Attribute) and value.attr == "backend":
            yield node.attr, node.lineno


def test_code_outside_backend_calls_only_the_contract():
    """Op code reaches a backend through the declared methods and attributes only (``xp``, the
    library's own namespace, stays inside ``backend/``)."""
    allowed = set(KERNELS) | set(ATTRIBUTES) - {"xp"}
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("backend/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        for attr, line in _backend_receivers(tree):
            if attr in allowed or attr.startswith("__") or "backend" in module_names:
                continue
            bad.append(f"lodtensor/{rel}:{line}: .{attr}")
    assert not bad, "calls to undeclared backend methods:\n" + "\n".join(bad)


# What a per-library branch looks like in op code: a library named in a comparison, or a duck-typed
# test for one library's arrays.
_BRANCH = re.compile(
    r"""(==|!=)\s*["'](torch|numpy|cupy)["']|["'](torch|numpy|cupy)["']\s*(==|!=)"""
    r"""|\bin \(["'](torch|numpy|cupy)["']|hasattr\([\w.]+, ["'](detach|__cuda_array_interface__)["']\)"""
    r"""|\bxp is (not )?np\b"""
)
_ALLOWED_BRANCHES = 5
def _branches():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("backend/", "interop/")):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _BRANCH.search(line.split("#", 1)[0]):
                found.append((f"lodtensor/{rel}:{number}", line.strip()))
    return found


def test_op_code_has_at_most_five_library_branches_each_explained():
    """Outside ``backend/`` and ``interop/`` library specifics are the backend's: at most five
    branches on a library remain, each with a ``# backend-branch:`` comment saying why."""
    found = _branches()
    unexplained = [f"{where}: {line}" for where, line in found if "# backend-branch:" not in line]
    assert not unexplained, "per-library branches outside backend/:\n" + "\n".join(unexplained)
    assert len(found) <= _ALLOWED_BRANCHES, found
