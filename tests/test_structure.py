"""The package's structure rules (issue 13): small modules and functions, imports only down the
layers with no cycle between subpackages, no private name used outside its module, and a
module map (docs/MODULES.md) that matches the code."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import load_file

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "perfmodel"
#: The team's limits (COMMON.md, issue 13).
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

#: The layers from the bottom up; a subpackage (or top-level module) imports only from layers
#: below its own. ``perfmodel`` is the package root (``perfmodel/__init__.py``): it gathers the
#: pricing and search API, and validation reads ``__version__`` from it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "units", "limits", "io", "data"),
    ("network",),
    ("hardware",),
    ("cost",),
    ("partition",),
    ("strategies",),
    ("search",),
    ("perfmodel",),
    ("validation",),
    ("report", "export"),
    ("api",),
    ("commands",),
    ("cli",),
    ("__main__",),
)
#: Imports inside the bottom layer are allowed (io reports with errors' classes); ``data`` holds
#: the shipped tables, read as package resources.
BASE = LAYERS[0]


@dataclass(frozen=True)
class Import:
    """One ``import``/``from ... import`` of a perfmodel module inside the package."""

    path: str  # the importing file, relative to the repository
    module: str  # the importing module's dotted name
    line: int
    target: str  # the imported module's dotted name
    names: tuple[str, ...]  # the names of a ``from`` import
    in_function: bool
    type_only: bool  # under ``if TYPE_CHECKING:``
    submodule: bool = False  # ``from pkg import mod``: this entry is pkg.mod, names are pkg's
    alias: str = ""  # the local name a module is bound to (``from pkg import mod as alias``)


def _files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in _files()}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, in_function: bool, type_only: bool) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Every node under ``node``, with whether it sits in a function or under TYPE_CHECKING."""
    for child in ast.iter_child_nodes(node):
        yield child, in_function, type_only
        fn = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        tc = type_only or (isinstance(child, ast.If) and _is_type_checking(child))
        yield from _walk(child, fn, tc)


def _imports(path: Path) -> list[Import]:
    """The imports of perfmodel modules in ``path``, resolved to dotted names."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node, in_function, type_only in _walk(ast.parse(path.read_text(encoding="utf-8")), False, False):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names = tuple(a.name for a in node.names)
            # ``from pkg import mod`` imports the module pkg.mod too
            targets = [(target, False, "")] + [
                (f"{target}.{a.name}", True, a.asname or a.name) for a in node.names if f"{target}.{a.name}" in MODULES
            ]
        elif isinstance(node, ast.Import):
            targets, names = [(a.name, False, a.asname or "") for a in node.names], ()
        else:
            continue
        for t, sub, alias in targets:
            if t == "perfmodel" or t.startswith("perfmodel."):
                out.append(Import(_rel(path), module, node.lineno, t, names, in_function, type_only, sub, alias))
    return out


IMPORTS = [imp for p in _files() for imp in _imports(p)]


def _subpackage(dotted: str) -> str:
    """The subpackage (or top-level module) under perfmodel that ``dotted`` belongs to."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "perfmodel"


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


# -- sizes ---------------------------------------------------------------------------------
def test_no_module_over_400_lines() -> None:
    sizes = [(_rel(p), len(p.read_text(encoding="utf-8").splitlines())) for p in _files()]
    over = sorted((n, rel) for rel, n in sizes if n > MAX_MODULE_LINES)
    assert not over, f"{len(over)} module(s) over {MAX_MODULE_LINES} lines (split them by purpose): " + "; ".join(
        f"{rel} {n} lines" for n, rel in reversed(over)
    )


#: Functions over the limit waiting for a split (none today): each may not grow past its
#: length here, and must leave this table once it is cut.
PENDING_LONG_FUNCTIONS: dict[str, int] = {}


def _long_functions() -> list[tuple[str, str, int]]:
    """(``path name``, ``path:line name``, length) of every function over the limit."""
    out = []
    for p in _files():
        for name, node in _functions(ast.parse(p.read_text(encoding="utf-8"))):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append((f"{_rel(p)} {name}", f"{_rel(p)}:{node.lineno} {name}", length))
    return sorted(out, key=lambda x: -x[2])


def test_no_function_over_80_lines() -> None:
    """Counted from the ``def`` line to the last line of the body, docstring included."""
    limit = PENDING_LONG_FUNCTIONS
    long = [(where, n) for key, where, n in _long_functions() if n > limit.get(key, MAX_FUNCTION_LINES)]
    assert not long, f"{len(long)} function(s) over {MAX_FUNCTION_LINES} lines: " + "; ".join(
        f"{where} is {n} lines" for where, n in long
    )


def test_pending_long_functions_are_still_long() -> None:
    now = {key: n for key, _, n in _long_functions()}
    done = [key for key in PENDING_LONG_FUNCTIONS if key not in now]
    assert not done, f"{done} no longer over {MAX_FUNCTION_LINES} lines: remove them from PENDING_LONG_FUNCTIONS"


#: Modules without ``__all__``, and why.
NO_ALL = {
    "perfmodel/__main__.py": "runs the CLI, defines nothing",
    "perfmodel/commands/__init__.py": "a docstring only; perfmodel.cli imports each command module",
    "perfmodel/data/__init__.py": "marks the folder of shipped tables, read as package resources",
    "perfmodel/export/template.py": "the program perfmodel export writes out; it is run, never imported",
}


def test_every_module_has_a_docstring_and_all() -> None:
    missing = []
    for p in _files():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        if not (ast.get_docstring(tree) or "").strip():
            missing.append(f"{_rel(p)}: no docstring")
        names = [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
        names += [n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
        if "__all__" not in names and _rel(p) not in NO_ALL:
            missing.append(f"{_rel(p)}: no __all__")
    assert not missing, f"{len(missing)} module(s) without a docstring or __all__: " + "; ".join(missing)


# -- imports -------------------------------------------------------------------------------
def _subpackage_graph() -> dict[str, dict[str, list[Import]]]:
    """Subpackage -> subpackages it imports (any import: module level, in a function or for
    type checking only), with the imports that make each edge."""
    graph: dict[str, dict[str, list[Import]]] = {}
    for imp in IMPORTS:
        a, b = _subpackage(imp.module), _subpackage(imp.target)
        if a != b:
            graph.setdefault(a, {}).setdefault(b, []).append(imp)
    return graph


def _cycles(graph: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_subpackages() -> None:
    graph = _subpackage_graph()
    cycles = _cycles(graph)
    lines = []
    for comp in cycles:
        edges = [
            f"{a} -> {b} ({len(graph[a][b])} import(s), e.g. {graph[a][b][0].path}:{graph[a][b][0].line})"
            for a in comp
            for b in comp
            if b in graph.get(a, {})
        ]
        lines.append(f"{{{', '.join(comp)}}}: " + ", ".join(edges))
    assert not cycles, f"{len(cycles)} import cycle(s) between subpackages: " + "; ".join(lines)


def test_cycle_finder_finds_a_planted_cycle() -> None:
    imp = IMPORTS[0]
    graph = {"a": {"b": [imp]}, "b": {"c": [imp]}, "c": {"a": [imp]}, "d": {"a": [imp]}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": [imp]}, "b": {}}) == []


def test_every_subpackage_has_a_layer() -> None:
    known = {name for layer in LAYERS for name in layer}
    found = {_subpackage(m) for m in MODULES}
    assert found <= known, f"subpackage(s) {sorted(found - known)} missing from LAYERS in tests/test_structure.py"


def test_imports_only_go_down_the_layers() -> None:
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    bad = [
        f"{imp.path}:{imp.line} ({a}, layer {rank[a]}) imports {imp.target} ({b}, layer {rank[b]})"
        for imp in IMPORTS
        for a, b in [(_subpackage(imp.module), _subpackage(imp.target))]
        if a != b and a in rank and b in rank and rank[b] >= rank[a] and not (a in BASE and b in BASE)
    ]
    assert not bad, f"{len(bad)} import(s) up or across the layers (tests/test_structure.py LAYERS): " + "; ".join(
        bad
    )


def _module_graph() -> dict[str, set[str]]:
    """Module -> modules its import runs: its module-level imports (not type-only) and the
    packages above each imported module, except the packages that hold the importer (Python
    is already importing those when the importer runs)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.in_function or imp.type_only:
            continue
        parts = imp.target.split(".")
        runs = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        mine = imp.module.split(".")
        graph[imp.module].update(runs - {".".join(mine[:i]) for i in range(1, len(mine))})
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w == goal:
                return True
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return False


def test_no_function_level_import_dodges_a_cycle() -> None:
    """A perfmodel import inside a function is fine for a late or optional load (matplotlib,
    torch, the zoo), but not when moving it to module level would make an import cycle."""
    graph = _module_graph()
    dodging = [
        f"{imp.path}:{imp.line} imports {imp.target}, which imports {imp.module} back"
        for imp in IMPORTS
        if imp.in_function and not imp.module.startswith(imp.target) and _reaches(graph, imp.target, imp.module)
    ]
    assert not dodging, f"{len(dodging)} function-level import(s) dodge a cycle: " + "; ".join(dodging)


@pytest.mark.parametrize("package", ["strategies", "partition"])
def test_pricing_layers_import_at_module_level(package: str) -> None:
    """The pricing path loads everything it uses when it is imported: no perfmodel import
    inside a function in strategies/ or partition/."""
    late = [
        f"{imp.path}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.in_function and _subpackage(imp.module) == package
    ]
    assert not late, f"{len(late)} function-level import(s) in {package}/: " + "; ".join(late)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_imported_across_modules() -> None:
    bad = [
        f"{imp.path}:{imp.line} imports {', '.join(n for n in imp.names if _private(n))} from {imp.target}"
        for imp in IMPORTS
        if not imp.submodule and imp.target != imp.module and any(_private(n) for n in imp.names)
    ]
    assert not bad, f"{len(bad)} private name(s) imported from another module: " + "; ".join(bad)


def test_no_private_attribute_of_another_module() -> None:
    """``mod._name`` where ``mod`` is a perfmodel module bound by ``import ... as mod`` or
    ``from pkg import mod``."""
    bad = []
    for p in _files():
        bound = {imp.alias: imp.target for imp in IMPORTS if imp.path == _rel(p) and imp.alias}
        for node, _, _ in _walk(ast.parse(p.read_text(encoding="utf-8")), False, False):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
            ):
                bad.append(f"{_rel(p)}:{node.lineno} uses {node.value.id}.{node.attr} of {bound[node.value.id]}")
    assert not bad, f"{len(bad)} private attribute(s) of another module used: " + "; ".join(bad)


# -- module map ----------------------------------------------------------------------------
def _module_map_tool() -> object:
    return load_file("tools/module_map.py", "module_map")


def test_module_map_is_current() -> None:
    tool = _module_map_tool()
    fresh = tool.render(PACKAGE)  # type: ignore[attr-defined]
    doc = ROOT / "docs" / "MODULES.md"
    old = doc.read_text(encoding="utf-8") if doc.is_file() else ""
    assert fresh == old, "docs/MODULES.md does not match the code: run `python tools/module_map.py`"


def test_module_map_lists_every_module_with_its_size() -> None:
    text = (ROOT / "docs" / "MODULES.md").read_text(encoding="utf-8")
    for m, p in MODULES.items():
        n = len(p.read_text(encoding="utf-8").splitlines())
        assert f"| `{_rel(p).removeprefix('perfmodel/')}` | {n} |" in text, f"{m} ({n} lines) not in docs/MODULES.md"
