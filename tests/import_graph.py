"""brokergate's layout rules, checked over the import graph: imports go down the layers, no cycles,
private names stay private, and no module is longer than ``MAX_MODULE_LINES``.

``python -m tests.import_graph`` (``make lint``) prints every violation and
exits 1 if there is one; ``tests/unit/test_import_graph.py`` runs the same
check in the test suite and proves on small fake trees that it can fail.

The layers (``LAYERS``) say what each part of the code may import besides itself: the core
knows no adapter, the adapters no settings, the API no adapter and no server, and only the
composition root (``service.server``) and the programs over everything (``bench``, ``deploy``)
know every part. A module of a checked package that belongs to no layer fails the check too, so
a new top-level module has to say where it stands. Every import counts here, in a function too.

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
MAX_MODULE_LINES: Final = 500

_BASE: Final = frozenset({"service.errors", "service.core"})
_EVERYTHING: Final = frozenset({"*"})
# From the bottom up: each part and the parts it may import. A module belongs to the longest
# name here that is its own or one of its packages'.
LAYERS: Final[Mapping[str, frozenset[str]]] = {
    "service": frozenset(),  # the package's own __init__: nothing
    "service.errors": frozenset(),  # the one error root and its codes
    "service.tables": frozenset(),  # plain-text tables, for the CLI and the Spark jobs
    "service.metrics": frozenset(),
    "service.core": frozenset({"service.errors"}),  # the domain and its ports: no I/O, no adapter
    "service.settings": _BASE | {"service.security"},
    "service.adapters": _BASE,  # given their options by the composition root, never the settings
    "service.security": _BASE | {"service.adapters"},
    "api_schemas": _BASE,  # the API's models: what the OpenAPI document shows
    "service.wire": _BASE,  # the v2 JSON wire's codecs, the hot path
    "service.api": _BASE
    | {"service.settings", "service.security", "service.metrics", "api_schemas", "service.wire"},
    "service.ui": _BASE | {"service.api"},
    "spark_jobs": _BASE | {"service.adapters", "service.tables", "service.client"},  # the sink: a client
    "workers": _BASE | {"service.metrics", "spark_jobs"},
    # the composition root: every part of the server
    "service.server": _BASE
    | {
        "service.settings",
        "service.metrics",
        "service.adapters",
        "service.security",
        "service.api",
        "service.ui",
        "api_schemas",
        "service.wire",
        "workers",
    },
    "service.client": _BASE
    | {"api_schemas", "service.wire"},  # a program's view: the wire, nothing of the server
    "service.cli": _BASE
    | {
        "service.client",
        "service.settings",
        "service.tables",
        "service.security",
        "service.server",
        "workers",
    },
    "service.__main__": frozenset({"service.cli"}),
    "deploy": _EVERYTHING,
    "bench": _EVERYTHING,
}


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


def layer_of(module: str, layers: Mapping[str, frozenset[str]]) -> str | None:
    """The layer ``module`` belongs to: the longest name of ``layers`` that is it or a package of it.
    A name that is the package of other names stands for its own ``__init__`` only."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in layers and (end == len(parts) or not any(k.startswith(name + ".") for k in layers)):
            return name
    return None


def layering(
    imports: Iterable[Import],
    modules: Iterable[str],
    layers: Mapping[str, frozenset[str]],
    report: Report,
) -> None:
    """Every module of a layered package that is in no layer, and every import a layer may not make."""
    layered = {name.split(".")[0] for name in layers}
    for module in sorted(modules):
        if module.split(".")[0] in layered and layer_of(module, layers) is None:
            report.problems.append(f"{module} belongs to no layer (tests/import_graph.py LAYERS)")
    for imp in imports:
        here, there = layer_of(imp.importer, layers), layer_of(imp.target, layers)
        if here is None or there is None or here == there:
            continue
        allowed = layers[here]
        if there not in allowed and "*" not in allowed:
            report.problems.append(f"{here} may not import {there}: {imp}")


def module_sizes(modules: Mapping[str, Path], root: Path, report: Report, max_lines: int) -> None:
    """Every module longer than ``max_lines``: split it along its jobs."""
    for path in sorted(modules.values()):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > max_lines:
            where = path.relative_to(root)
            report.problems.append(
                f"{where} has {lines} lines, more than {max_lines}: split it along its jobs"
            )


def check(
    root: Path = ROOT,
    packages: Iterable[str] = PACKAGES,
    *,
    layers: Mapping[str, frozenset[str]] = LAYERS,
    max_lines: int = MAX_MODULE_LINES,
) -> Report:
    """The layout rules over ``packages`` under ``root``."""
    modules = find_modules(root, packages)
    imports = [imp for module in sorted(modules) for imp in imports_of(module, modules, root)]
    report = Report()
    layering(imports, modules, layers, report)
    cycles(imports, report)
    private_imports(imports, modules, report)
    module_sizes(modules, root, report, max_lines)
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
