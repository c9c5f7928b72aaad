"""brokergate's import rules, checked over the import graph: no cycles, and private names stay private.

``python -m tests.import_graph`` (``make lint``) prints every violation and
exits 1 if there is one; ``tests/unit/test_import_graph.py`` runs the same
check in the test suite and proves on small fake trees that it can fail.

The graph is read with ``ast``, nothing is imported. An edge is every import a
module runs when it is imported: module-level statements, including those under
``if TYPE_CHECKING:`` (a cycle only the type checker sees is still a cycle in
the design) and in ``try`` blocks. ``from pkg import name`` is an edge to
``pkg.name`` when that is a module, else to ``pkg``; ``import pkg`` is an edge
to ``pkg/__init__.py``. Imports inside functions are not edges; a cycle they
would close is only noted.

A private name (``_name``, not ``__dunder__``) stays in its package:
``from a.b import _name`` is allowed only in a module of the directory that
``a.b`` lives in (wherever the import stands, in a function or not).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

PACKAGES: Final = ("service", "api_schemas", "workers", "spark_jobs", "deploy", "bench")
ROOT: Final = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Import:
    """An import by ``importer`` of ``target``, a module of the checked packages: one edge of the graph."""

    importer: str
    target: str
    path: str  # the importer's file, relative to the root
    line: int
    source: str  # the module of ``from source import names``; ``target`` for ``import target``
    names: tuple[str, ...]  # empty for ``import target``
    deferred: bool  # inside a function body: runs when called, not when the module is imported

    def __str__(self) -> str:
        what = f"{', '.join(self.names)} from {self.source}" if self.names else self.target
        return f"{self.path}:{self.line} imports {what}"


@dataclass(slots=True)
class Report:
    """What the check found: ``problems`` fail it, ``notes`` are for information."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- the modules and their imports ---------------------------------------------------------


def find_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root`` by dotted name; a package by its ``__init__.py``."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


class _ImportCollector(ast.NodeVisitor):
    """The import statements of one module, each marked as run at import time or deferred."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self._depth = 0  # of function bodies around the current node

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self._depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append((node, self._depth > 0))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted name ``node`` imports from, its leading dots resolved against ``module``."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name`` or its longest prefix that is a checked module; None for a module of elsewhere."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, modules: Mapping[str, Path], root: Path) -> Iterator[Import]:
    """The imports of ``module`` that reach other checked modules."""
    path = modules[module]
    shown = path.relative_to(root).as_posix()
    collector = _ImportCollector()
    collector.visit(ast.parse(path.read_bytes(), filename=shown))
    for node, deferred in collector.found:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := _known(alias.name, modules)) is not None:
                    yield Import(module, target, shown, node.lineno, target, (), deferred)
            continue
        source = _absolute(module, path.name == "__init__.py", node)
        names: list[str] = []  # defined in ``source``; a submodule of it is an edge of its own
        for alias in node.names:
            if (submodule := f"{source}.{alias.name}") in modules:
                yield Import(module, submodule, shown, node.lineno, source, (alias.name,), deferred)
            else:
                names.append(alias.name)
        if names and (target := _known(source, modules)) is not None:
            yield Import(module, target, shown, node.lineno, source, tuple(names), deferred)


# --- the rules -------------------------------------------------------------------------------


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _graph(imports: Iterable[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        if imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    return graph


def _listing(component: Sequence[str], imports: Iterable[Import]) -> str:
    """The modules of ``component`` and, one a line, the imports among them."""
    members = set(component)
    lines = "".join(f"\n    {i}" for i in imports if i.importer in members and i.target in members)
    return f"{', '.join(component)}:{lines}"


def cycles(imports: Sequence[Import], report: Report) -> None:
    """Every import cycle as a problem; a cycle that only an import in a function closes as a note."""
    eager = [i for i in imports if not i.deferred]
    eager_cycles = strongly_connected(_graph(eager))
    for component in eager_cycles:
        report.problems.append(f"import cycle among {_listing(component, eager)}")
    in_eager_cycle = {m for component in eager_cycles for m in component}
    deferred = [i for i in imports if i.deferred]
    for component in strongly_connected(_graph(imports)):
        if not set(component) <= in_eager_cycle:
            closing = _listing(component, deferred)
            report.notes.append(f"an import in a function closes a cycle among {closing}")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _directory(imp: Import, modules: Mapping[str, Path]) -> Path:
    """The directory of the module ``imp`` imports names from (of a package: the package's own)."""
    if imp.source in modules:
        return modules[imp.source].parent
    target = modules[imp.target]  # a submodule of a namespace package, which has no file
    return target.parent.parent if target.name == "__init__.py" else target.parent


def private_imports(imports: Iterable[Import], modules: Mapping[str, Path], report: Report) -> None:
    """Every import of a private name by a module outside the directory of the module it comes from."""
    for imp in imports:
        if any(map(_private, imp.names)) and modules[imp.importer].parent != _directory(imp, modules):
            report.problems.append(f"private name imported from another package: {imp}")


def check(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> Report:
    """The import rules over ``packages`` under ``root``."""
    modules = find_modules(root, packages)
    imports = [imp for module in sorted(modules) for imp in imports_of(module, modules, root)]
    report = Report()
    cycles(imports, report)
    private_imports(imports, modules, report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to check (default: this one)")
    parser.add_argument("packages", nargs="*", default=list(PACKAGES), help=f"default: {' '.join(PACKAGES)}")
    args = parser.parse_args(argv)
    report = check(args.root, args.packages)
    for note in report.notes:
        print(f"note: {note}")
    for problem in report.problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
