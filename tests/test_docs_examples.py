"""Every exported callable has a doctested example (issue #26, "Docs").

Enumerates each public module's ``__all__`` (functions, classes, and the
public methods a class defines, itself or in a private base of this package)
and checks that the callable's own docstring holds an example that

- runs: at least one example line is not ``# doctest: +SKIP`` (unless
  :data:`SKIPPED` says why it cannot run here),
- names the callable (or calls the operator it implements, :data:`OPERATORS`;
  a class's own docstring is about the class however its example builds one),
- and is collected by ``pytest --doctest-modules`` (the docstring is one that
  ``doctest.DocTestFinder`` finds in the defining module), so ``make test``
  runs it.

Callables generated from one declaration, or run only through another one,
are covered by the example of their group in :data:`GROUPS`, each with its
reason; that example must pass the same checks. Properties and constants are
attributes, not callables, and are not counted. Run with ``-s`` for the count
per package.
"""

import doctest
import importlib
import re
import types

import pytest

#: package -> the public modules whose ``__all__`` it exports
PACKAGES = {
    "lodtensor": ["lodtensor", "lodtensor.tensor", "lodtensor.lod", "lodtensor.factories", "lodtensor.place",
                  "lodtensor.errors"],
    "sequence": ["lodtensor.sequence"],
    "interop": ["lodtensor.interop", "lodtensor.interop.arrow", "lodtensor.interop.parquet",
                "lodtensor.interop.files", "lodtensor.interop.torch", "lodtensor.interop.sparse",
                "lodtensor.interop.awkward", "lodtensor.interop.tf", "lodtensor.interop.dlpack"],
    "distributed": ["lodtensor.distributed"],
    "text": ["lodtensor.text"],
    "fluid": ["lodtensor.fluid", "lodtensor.fluid.layers", "lodtensor.fluid.nets", "lodtensor.fluid.io",
              "lodtensor.fluid.core"],
    "nn": ["lodtensor.nn", "lodtensor.nn.functional"],
    "backend": ["lodtensor.backend"],
    "nested": ["lodtensor.nested"],
}

#: (module, name) of exported namespaces whose callables are public one by one (``fluid.initializer.Constant``)
NAMESPACES = {("lodtensor.fluid", "initializer"), ("lodtensor.fluid", "regularizer")}


def _nested_method_op(qualname):
    """``NestedTensor.exp`` / ``NestedTensor.exp_`` -> ``lodtensor.nested.exp`` (None if there is none)."""
    import lodtensor.nested as ln

    name = qualname.rsplit(".", 1)[1]
    for candidate in (name, name[:-1] if name.endswith("_") else None):
        if candidate and candidate in ln.__all__:
            return f"lodtensor.nested.{candidate}"
    return None


#: Callables covered by the example of their group: (rule on the qualname, the covering callable, reason).
GROUPS = [
    (
        re.compile(r"lodtensor\.backend\.Backend\.\w+$"),
        lambda q: "lodtensor.backend.Backend",
        "the backend contract is one declaration (backend/_contract.py) in groups (its '# -- group --' "
        "comments, lodtensor.backend._contract.groups()) that op code calls, not users: Backend's "
        "docstring calls one kernel of each group (test_backend_contract_groups_each_have_an_example)",
    ),
    (
        re.compile(r"lodtensor\.nn\.\w+\.forward$"),
        lambda q: q.rsplit(".", 1)[0],
        "a torch.nn.Module's forward runs when the module is called: the class's example calls an instance",
    ),
    (
        re.compile(r"lodtensor\.fluid\.Program\.forward$"),
        lambda q: "lodtensor.fluid.Program",
        "a Program's forward is the network code it was built with: the class's example calls the program",
    ),
    (
        re.compile(r"lodtensor\.nested\.NestedTensor\.rmatmul$"),
        lambda q: "lodtensor.nested.matmul",
        "x.rmatmul(y) is y @ x (torch's __rmatmul__, a method the op table installs): matmul's example",
    ),
    (
        re.compile(r"lodtensor\.nested\.NestedTensor\.\w+$"),
        _nested_method_op,
        "a NestedTensor method named after a lodtensor.nested op is that op, installed from the op table "
        "(nested/_registry.py, attach_ops); the in-place x.op_() is op with the result written into x",
    ),
]

#: Callables whose example cannot run under ``make test``: the lines that call them are ``# doctest: +SKIP``.
SKIPPED = {
    "lodtensor.interop.tf.to_ragged_tensor": "TensorFlow is not a test extra; tests/interop/test_tf.py runs the "
    "conversions in TensorFlow's own interpreter (a doctest cannot switch interpreters)",
    "lodtensor.interop.tf.from_ragged_tensor": "as to_ragged_tensor",
}

#: Functions that are Python operators: their example may use the operator (``nt + 1`` runs ``add``).
OPERATORS = {"add": r"\+", "sub": r" - ", "matmul": r" @ ", "getitem": r"\w\[[^\]]*\]"}


# -- enumeration ----------------------------------------------------------------------------------
def exported():
    """``[(package, qualname, obj)]``: every exported callable, each object once (its first name)."""
    out, seen = [], set()
    for package, modules in PACKAGES.items():
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in module.__all__:
                obj = getattr(module, name)
                if isinstance(obj, types.ModuleType):
                    continue
                if (module_name, name) in NAMESPACES:
                    items = [(f"{module_name}.{name}.{k}", v) for k, v in vars(obj).items() if callable(v)]
                elif callable(obj):
                    items = [(f"{module_name}.{name}", obj)]
                else:
                    continue  # a constant
                for qualname, item in items:
                    if id(item) in seen:
                        continue
                    seen.add(id(item))
                    out.append((package, qualname, item))
                    if isinstance(item, type) and not issubclass(item, BaseException):
                        out.extend((package, f"{qualname}.{k}", m) for k, m in _methods(item, seen))
    return out


def _methods(cls, seen):
    """The public methods ``cls`` defines, itself or in a private base of this package; not properties."""
    bases = [b for b in cls.__mro__
             if b is cls or (b.__name__.startswith("_") and b.__module__.startswith("lodtensor"))]
    names = set()
    for base in bases:
        for name, value in vars(base).items():
            if name.startswith("_") or name in names or isinstance(value, property):
                continue
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if not isinstance(func, (types.FunctionType, types.BuiltinFunctionType)):
                continue
            names.add(name)
            if id(func) not in seen:
                seen.add(id(func))
                yield name, func


def _resolve(qualname):
    """The object a dotted name refers to (modules imported on the way)."""
    head, *attrs = qualname.split(".")
    obj, path = importlib.import_module(head), head
    for attr in attrs:
        path += "." + attr
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            obj = importlib.import_module(path)
    return obj


# -- the checks -----------------------------------------------------------------------------------
_COLLECTED = {}
_SKIPPED_IDS = []


def _collected_docstrings(module_name):
    """The docstrings with examples that ``--doctest-modules`` collects from ``module_name``."""
    if module_name not in _COLLECTED:
        module = importlib.import_module(module_name)
        tests = doctest.DocTestFinder(exclude_empty=True).find(module, module_name)
        _COLLECTED[module_name] = {t.docstring for t in tests if t.examples}
    return _COLLECTED[module_name]


def _own_doc(obj):
    return obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)


def _skipped(obj):
    """Whether :data:`SKIPPED` lists ``obj`` (under any of its names: ``t.to_ragged_tensor`` is reached first)."""
    if not _SKIPPED_IDS:
        _SKIPPED_IDS.append({id(_resolve(q)) for q in SKIPPED})
    return id(obj) in _SKIPPED_IDS[0]


def _names(qualname, obj):
    """The names an example may call ``obj`` by: the exported one, its own, and a LoDTensor method it is
    installed as (``interop.dlpack.dlpack`` is ``t.__dlpack__``)."""
    from lodtensor import LoDTensor

    names = {qualname.rsplit(".", 1)[1], getattr(obj, "__name__", "")}
    names.update(k for k, v in vars(LoDTensor).items() if v is obj)
    return {n for n in names if n}


def problem(qualname, obj):
    """Why ``obj`` lacks a doctested example that names it; None when it has one."""
    doc = _own_doc(obj)
    if not isinstance(doc, str) or ">>>" not in doc:
        return "no example (no '>>>' in its docstring)"
    examples = doctest.DocTestParser().get_examples(doc)
    if not _skipped(obj):
        examples = [e for e in examples if not e.options.get(doctest.SKIP)]
        if not examples:
            return "every line of its example is +SKIP and SKIPPED does not say why"
    name = qualname.rsplit(".", 1)[1]
    source = "\n".join(e.source for e in examples)
    text = "\n".join(e.source + e.want for e in examples)
    named = (
        isinstance(obj, type)
        or (name in OPERATORS and re.search(OPERATORS[name], source))
        or any(re.search(rf"(?<![\w.]){re.escape(n)}\b|\.{re.escape(n)}\b", text) for n in _names(qualname, obj))
    )
    if not named:
        return f"its example never names {name!r}"
    module_name = getattr(obj, "__module__", None)
    if module_name is None or doc not in _collected_docstrings(module_name):
        return f"its example is not collected by --doctest-modules from {module_name}"
    return None


def group_of(qualname):
    """``(covering qualname, reason)`` of the first :data:`GROUPS` rule for ``qualname``, else None."""
    for pattern, cover, reason in GROUPS:
        if pattern.match(qualname):
            target = cover(qualname)
            if target is not None:
                return target, reason
    return None


def calls_an_instance(cls):
    """Whether ``cls``'s example calls an instance (``m = Cls(...)`` then ``m(...)``, or ``Cls(...)(...)``)."""
    source = "\n".join(e.source for e in doctest.DocTestParser().get_examples(_own_doc(cls) or ""))
    name = re.escape(cls.__name__)
    if re.search(rf"\b{name}\([^()]*(\([^()]*\)[^()]*)*\)\(", source):
        return True
    instances = re.findall(rf"(\w+) = (?:\w+\.)*{name}\(", source)
    return any(re.search(rf"\b{re.escape(var)}\(", source) for var in instances)


def contract_groups_without_example():
    """The backend contract's groups none of whose kernels Backend's example calls."""
    from lodtensor.backend import Backend
    from lodtensor.backend._contract import groups

    source = "\n".join(e.source for e in doctest.DocTestParser().get_examples(Backend.__doc__))
    return [group for group, kernels in groups().items() if not any(re.search(rf"\.{k}\(", source) for k in kernels)]


def report():
    """``({package: (documented, total)}, [one line per callable lacking a doctested example])``."""
    counts, missing = {}, []
    for package, qualname, obj in exported():
        why = problem(qualname, obj)
        group = group_of(qualname) if why is not None else None
        if group is not None:
            target = _resolve(group[0])
            why = problem(group[0], target)
            if why is None and qualname.endswith(".forward") and not calls_an_instance(target):
                why = "it never calls an instance"
            why = None if why is None else f"its group's example ({group[0]}) fails: {why}"
        done, total = counts.get(package, (0, 0))
        counts[package] = (done + (why is None), total + 1)
        if why is not None:
            missing.append(f"{qualname}: {why}")
    return counts, missing


# -- tests ----------------------------------------------------------------------------------------
def test_every_exported_callable_has_a_doctested_example():
    pytest.importorskip("torch")  # the nn modules, fluid.Program and ParquetCorpus are torch classes
    counts, missing = report()
    width = max(map(len, counts))
    for package, (done, total) in counts.items():
        print(f"{package:<{width}}  {done:>4} / {total:<4} exported callables with a doctested example")
    print(f"{'all':<{width}}  {sum(d for d, _ in counts.values()):>4} / {sum(t for _, t in counts.values())}")
    assert not missing, f"{len(missing)} exported callables lack a doctested example:\n" + "\n".join(missing)


def test_backend_contract_groups_each_have_an_example():
    assert contract_groups_without_example() == []


def test_every_group_rule_and_skip_is_in_use():
    """A rule that covers nothing, or a SKIPPED entry for a name that is gone, is stale."""
    pytest.importorskip("torch")
    names = [q for _, q, _ in exported()]
    for pattern, _, reason in GROUPS:
        assert any(pattern.match(q) and group_of(q) for q in names), f"stale rule {pattern.pattern!r} ({reason})"
    for qualname in SKIPPED:
        assert callable(_resolve(qualname)), qualname


def test_api_page_names_every_public_name():
    """docs/api.md names each name of every public module's ``__all__`` (and fluid's initializers)."""
    pytest.importorskip("torch")
    import os

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "api.md")) as f:
        page = f.read()
    missing = []
    for modules in PACKAGES.values():
        for module_name in modules:
            module = importlib.import_module(module_name)
            names = list(module.__all__)
            names += [k for m, n in NAMESPACES if m == module_name for k in vars(getattr(module, n))]
            missing += [f"{module_name}.{n}" for n in names if not re.search(rf"(?<![\w]){re.escape(n)}\b", page)]
    assert not missing, "docs/api.md does not name: " + ", ".join(missing)


def test_the_checker_finds_each_kind_of_missing_example():
    # defined here, inside a function: --doctest-modules never collects these docstrings
    def undocumented(x):
        """No example here."""

    def skipped_only(x):
        """Only a skipped line.

        >>> skipped_only(1)  # doctest: +SKIP
        1
        """

    def unnamed(x):
        """An example that never calls it.

        >>> 1 + 1
        2
        """

    def uncollected(x):
        """Runs, and names itself, but no module's doctests hold it.

        >>> uncollected(1)
        """

    class Module:
        """An example that never calls an instance.

        >>> m = Module()
        >>> m.weight
        1
        """

        weight = 1

    assert "no example" in problem("m.undocumented", undocumented)
    assert "+SKIP" in problem("m.skipped_only", skipped_only)
    assert "never names" in problem("m.unnamed", unnamed)
    assert "not collected" in problem("m.uncollected", uncollected)
    assert not calls_an_instance(Module)


def test_the_checker_accepts_a_real_example():
    import lodtensor as lt
    from lodtensor.nn import FC

    assert problem("lodtensor.from_nested_list", lt.from_nested_list) is None
    assert calls_an_instance(FC)
