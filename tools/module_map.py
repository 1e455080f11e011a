"""Write docs/MODULES.md, the module map of perfmodel, from the code.

For every subpackage: each module, its size in lines, the summary of its docstring (what it
owns) and the perfmodel subpackages it imports. tests/test_structure.py fails when the file is
not what this script writes::

    python tools/module_map.py            # rewrite docs/MODULES.md
    python tools/module_map.py --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

from perfmodel.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "perfmodel"
OUTPUT = ROOT / "docs" / "MODULES.md"
TOP = "(top level)"


@dataclass(frozen=True)
class ModuleInfo:
    """One module of the package: where it is, its size, what it owns and what it imports."""

    rel: str  # path under perfmodel/
    subpackage: str
    lines: int
    summary: str
    imports: dict[str, str]  # subpackage -> "" (at import), "lazy" (in functions), "types"


def _dotted(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Perfmodel subpackages (or top-level modules) imported by a module, and how."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    found: dict[str, set[str]] = {}

    def visit(node: ast.AST, how: str) -> None:
        for child in ast.iter_child_nodes(node):
            sub = how
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and how == "":
                sub = "lazy"
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                sub = "types"
            targets: list[str] = []
            if isinstance(child, ast.ImportFrom):
                base = here[: len(here) - child.level + 1] if child.level else []
                target = ".".join(base + ([child.module] if child.module else []))
                # ``from perfmodel import x``: the module x when there is one, else the package root
                targets = [target] if target != "perfmodel" else [_from_root(a.name) for a in child.names]
            elif isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            for t in targets:
                if t == "perfmodel" or t.startswith("perfmodel."):
                    found.setdefault(_target_name(t), set()).add(how)
            visit(child, sub)

    visit(tree, "")
    own = _target_name(module)
    out = {}
    for name, hows in found.items():
        if name == own:
            continue
        out[name] = "" if "" in hows else ("lazy" if "lazy" in hows else "types")
    return out


def _target_name(dotted: str) -> str:
    """A subpackage's name, a top-level module's (``errors``) or ``perfmodel`` (the package
    root, ``perfmodel/__init__.py``) for a dotted module name."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "perfmodel"


def _from_root(name: str) -> str:
    return f"perfmodel.{name}" if (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file() else "perfmodel"


def modules(package: Path = PACKAGE) -> list[ModuleInfo]:
    """Every module of ``package``, by subpackage then path."""
    out = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        doc = ast.get_docstring(tree) or ""
        dotted = _dotted(path, package)
        rel = path.relative_to(package).as_posix()
        sub = rel.split("/")[0] if "/" in rel else TOP
        out.append(
            ModuleInfo(
                rel=rel,
                subpackage=sub,
                lines=len(text.splitlines()),
                summary=" ".join(doc.strip().split("\n\n")[0].split()) or "(no docstring)",
                imports=_imports(tree, dotted, path.name == "__init__.py"),
            )
        )
    return sorted(out, key=lambda m: (m.subpackage != TOP, m.subpackage, m.rel))


def _imports_text(imports: dict[str, str]) -> str:
    now = sorted(k for k, v in imports.items() if v == "")
    lazy = sorted(k for k, v in imports.items() if v == "lazy")
    types = sorted(k for k, v in imports.items() if v == "types")
    parts = [", ".join(now)] if now else []
    if lazy:
        parts.append(f"in functions: {', '.join(lazy)}")
    if types:
        parts.append(f"types: {', '.join(types)}")
    return "; ".join(parts) or "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(package: Path = PACKAGE) -> str:
    """The module map as Markdown."""
    mods = modules(package)
    groups: dict[str, list[ModuleInfo]] = {}
    for m in mods:
        groups.setdefault(m.subpackage, []).append(m)
    lines = [
        "# Module map of perfmodel",
        "",
        "Written by `python tools/module_map.py` from the code; `tests/test_structure.py` fails when",
        "it is stale. For each subpackage: its modules, their size in lines, the summary of their",
        "docstring (what the module owns) and the perfmodel subpackages they import (`errors`,",
        "`units`, ... are top-level modules; \"in functions\": imported only inside functions, for a",
        "late or optional load; \"types\": only for type checking). The layers, from the bottom up,",
        "are listed in `tests/test_structure.py` (`LAYERS`).",
        "",
        "| subpackage | modules | lines | largest module (lines) | imports |",
        "|---|---|---|---|---|",
    ]
    top = {"perfmodel", *(m.rel.removesuffix(".py") for m in groups.get(TOP, []))}
    for sub, ms in groups.items():
        imports: dict[str, str] = {}
        for m in ms:
            for k, v in m.imports.items():
                if k == sub or (sub == TOP and k in top):
                    continue
                old = imports.get(k)
                imports[k] = v if old is None else min(old, v, key=["", "lazy", "types"].index)
        big = max(ms, key=lambda m: m.lines)
        size = f"{len(ms)} | {sum(m.lines for m in ms):,} | `{big.rel}` ({big.lines})"
        lines.append(f"| {sub} | {size} | {_imports_text(imports)} |")
    lines += ["", f"{len(mods)} modules, {sum(m.lines for m in mods):,} lines.", ""]
    for sub, ms in groups.items():
        title = "Top-level modules" if sub == TOP else f"`{sub}`"
        lines += [f"## {title}", "", "| module | lines | owns | imports |", "|---|---|---|---|"]
        lines += [f"| `{m.rel}` | {m.lines} | {_cell(m.summary)} | {_imports_text(m.imports)} |" for m in ms]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/MODULES.md is stale; write nothing")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python tools/module_map.py", file=sys.stderr)
            return 1
        return 0
    atomic_write_text(OUTPUT, text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
