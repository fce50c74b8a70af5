"""The import graph of the lodtensor package: no cycles, and imports only go down the layers.

Every ``import`` and ``from ... import`` inside ``lodtensor`` counts, at module
level and inside functions alike (a function-level import is still an arrow).
Run ``python tests/test_layers.py`` to print the graph's cycles and upward arrows.
"""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "lodtensor"

#: The layers, lowest first: errors <- backend <- lod <- tensor <- ops <- {sequence, nested, interop}
#: <- {text, distributed, nn} <- fluid. A module may import from its own layer and the layers below
#: it, never from one above. The private top-level modules (``lodtensor/_*.py``) sit in the lowest
#: layer above everything they import.
LAYERS = [
    ("errors", "_format", "_cache", "_level", "place", "_compile"),
    ("backend", "_validate", "_indexing", "_lod_algebra"),
    ("lod", "_data", "_ufunc"),
    ("_dense", "_conversions", "_paddle_methods", "_nested_list"),
    ("tensor",),
    ("ops", "factories"),
    ("sequence", "nested", "interop"),
    ("text", "distributed", "nn"),
    ("fluid",),
    ("__init__",),
]

#: Front ends of one layer that never import each other (STYLE.md: "the front ends never import
#: each other"); shared helpers move down instead.
SIBLINGS_APART = {"sequence", "nested", "interop"}

#: Justified exceptions: (importer, imported) -> why. Each would be a function-level import of an
#: upper layer that the lower one needs only when the upper layer is already in use; these arrows
#: are left out of both checks. None is needed today: keep it that way where you can.
EXCEPTIONS = {}


def module_name(path):
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(importer, path, node, known):
    """The lodtensor modules one import statement loads (its own arrows, not the parent packages')."""
    is_package = path.name == "__init__.py"
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "lodtensor"]
    if node.level:
        base = importer.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "lodtensor":
        return []
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in known else target)
    return out


def import_graph():
    """module -> {imported module: [(line, 'module' or 'function')]} over the whole package."""
    known = _modules()
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges = graph.setdefault(name, {})
        for node, where in _imports(tree, "module"):
            for target in _resolve(name, path, node, known):
                if target != name:
                    edges.setdefault(target, []).append((node.lineno, where))
    return graph


def _imports(node, where):
    """Every import statement below ``node``, with 'function' for those inside a def or lambda."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, where
        inner = "function" if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else where
        yield from _imports(child, inner)


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(module):
    top = module.split(".")[1] if "." in module else "__init__"
    for rank, names in enumerate(LAYERS):
        if top in names:
            return rank, top
    raise AssertionError(f"{module}: its top-level name {top!r} is in no layer of tests/test_layers.py LAYERS")


def upward_imports(graph):
    bad = []
    for importer, edges in graph.items():
        rank, top = layer_of(importer)
        for target, places in edges.items():
            trank, ttop = layer_of(target)
            upward = trank > rank or (top != ttop and top in SIBLINGS_APART and ttop in SIBLINGS_APART)
            if upward and (importer, target) not in EXCEPTIONS:
                bad.append(f"{importer} -> {target} (line {places[0][0]}, {places[0][1]} level)")
    return sorted(bad)


def test_every_module_has_a_layer():
    for name in _modules():
        layer_of(name)


def _without_exceptions(graph):
    return {m: {t: p for t, p in edges.items() if (m, t) not in EXCEPTIONS} for m, edges in graph.items()}


def test_no_import_cycles():
    found = cycles(_without_exceptions(import_graph()))
    assert not found, "import cycles (module- or function-level imports):\n" + "\n".join(map(", ".join, found))


def test_imports_go_down_the_layers():
    found = upward_imports(import_graph())
    assert not found, "imports of a higher layer (see LAYERS):\n" + "\n".join(found)


def test_exceptions_are_still_needed():
    graph = import_graph()
    stale = [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], {})]
    assert stale == []


def test_the_checker_sees_cycles_and_function_level_imports(tmp_path):
    graph = {"lodtensor.a": {"lodtensor.b": [(3, "function")]}, "lodtensor.b": {"lodtensor.a": [(1, "module")]}}
    assert cycles(graph) == [["lodtensor.a", "lodtensor.b"]]
    graph = {"lodtensor.lod": {"lodtensor.tensor": [(9, "function")]}, "lodtensor.tensor": {}}
    assert upward_imports(graph) == ["lodtensor.lod -> lodtensor.tensor (line 9, function level)"]


if __name__ == "__main__":
    g = import_graph()
    for comp in cycles(_without_exceptions(g)):
        print("cycle:", ", ".join(comp))
    for line in upward_imports(g):
        print("upward:", line)
