"""The import rules hold for brokergate's packages, and the checker of them fails where they are broken."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import check, main


def tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path: source) under ``root``; returns ``root``."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_the_packages_keep_the_import_rules() -> None:
    report = check()
    assert not report.problems, "\n".join(report.problems)


def test_a_cycle_fails_and_names_its_modules_and_imports(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "import os\n\nfrom pkg.sub.c import C\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from ..a import A\n\nC = 1\n",
            "pkg/d.py": "from pkg.a import A\n",  # imports into the cycle: not part of it
        },
    )
    [problem] = check(root, ["pkg"]).problems
    assert problem == (
        "import cycle among pkg.a, pkg.b, pkg.sub.c:\n"
        "    pkg/a.py:1 imports b from pkg\n"
        "    pkg/b.py:3 imports C from pkg.sub.c\n"
        "    pkg/sub/c.py:1 imports A from pkg.a"
    )


def test_an_import_of_a_package_is_an_edge_to_its_init(tmp_path: Path) -> None:
    root = tree(tmp_path, {"pkg/__init__.py": "from .a import A\n", "pkg/a.py": "import pkg\n\nA = 1\n"})
    [problem] = check(root, ["pkg"]).problems
    assert problem.startswith("import cycle among pkg, pkg.a:")


@pytest.mark.parametrize(
    "guarded",
    [
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.a import A\n",
        "try:\n    from pkg.a import A\nexcept ImportError:\n    A = None\n",
        "class B:\n    from pkg.a import A\n",
    ],
    ids=["type-checking", "try", "class-body"],
)
def test_an_import_run_with_the_module_counts_wherever_it_stands(tmp_path: Path, guarded: str) -> None:
    root = tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from .b import B\n", "pkg/b.py": guarded})
    [problem] = check(root, ["pkg"]).problems
    assert problem.startswith("import cycle among pkg.a, pkg.b:")


def test_an_import_in_a_function_is_no_cycle_but_is_noted(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import B\n",
            "pkg/b.py": "B = 1\n\n\ndef late() -> object:\n    from .a import A\n\n    return A\n",
        },
    )
    report = check(root, ["pkg"])
    assert report.problems == []
    assert report.notes == [
        "an import in a function closes a cycle among pkg.a, pkg.b:\n    pkg/b.py:5 imports A from pkg.a"
    ]


def test_a_private_name_from_another_package_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/inner/__init__.py": "_SECRET = 1\n",
            "pkg/inner/store.py": "_LAYOUT = 1\n__version__ = '1'\n",
            "pkg/inner/_impl.py": "X = 1\n",
            # the same package: allowed
            "pkg/inner/reader.py": "from .store import _LAYOUT\nfrom . import _SECRET, _impl\n",
            "pkg/outside.py": (
                "from pkg.inner.store import _LAYOUT, __version__\n"
                "from pkg.inner import _SECRET\n"
                "\n"
                "\n"
                "def later() -> None:\n"
                "    from pkg.inner import _impl\n"
            ),
        },
    )
    assert check(root, ["pkg"]).problems == [
        "private name imported from another package: pkg/outside.py:1 imports _LAYOUT, __version__ "
        "from pkg.inner.store",
        "private name imported from another package: pkg/outside.py:2 imports _SECRET from pkg.inner",
        "private name imported from another package: pkg/outside.py:6 imports _impl from pkg.inner",
    ]


def test_the_command_fails_with_the_problems_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tree(
        tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from .b import B\n", "pkg/b.py": "from .a import A\n"}
    )
    assert main(["--root", str(root), "pkg"]) == 1
    assert capsys.readouterr().err.startswith("error: import cycle among pkg.a, pkg.b:")
    (root / "pkg/b.py").write_text("B = 1\n")
    assert main(["--root", str(root), "pkg"]) == 0
    assert capsys.readouterr().err == ""


LAYERS = {
    "pkg": frozenset(),
    "pkg.core": frozenset(),
    "pkg.adapters": frozenset({"pkg.core"}),
    "pkg.api": frozenset({"pkg.core"}),
    "pkg.root": frozenset({"pkg.core", "pkg.adapters", "pkg.api"}),
}


def test_an_import_up_or_across_the_layers_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core/__init__.py": "",
            "pkg/core/ports.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.adapters import log\n"
            ),
            "pkg/adapters/__init__.py": "",
            "pkg/adapters/log.py": "X = 1\n",
            "pkg/api/__init__.py": "",
            "pkg/api/routes.py": (
                "from pkg.core import ports\n\n\ndef later() -> None:\n    from pkg.adapters.log import X\n"
            ),
            "pkg/root/__init__.py": "from pkg.adapters import log\nfrom pkg.api import routes\n",
        },
    )
    assert check(root, ["pkg"], layers=LAYERS).problems == [
        "pkg.api may not import pkg.adapters: pkg/api/routes.py:5 imports X from pkg.adapters.log",
        "pkg.core may not import pkg.adapters: pkg/core/ports.py:4 imports log from pkg.adapters",
    ]


def test_a_module_in_no_layer_fails(tmp_path: Path) -> None:
    root = tree(tmp_path, {"pkg/__init__.py": "", "pkg/core/__init__.py": "", "pkg/stray.py": "X = 1\n"})
    assert check(root, ["pkg"], layers=LAYERS).problems == [
        "pkg.stray belongs to no layer (tests/import_graph.py LAYERS)"
    ]


def test_a_module_over_the_line_limit_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path, {"pkg/__init__.py": "", "pkg/long.py": "X = 1\n" * 11, "pkg/short.py": "X = 1\n" * 10}
    )
    assert check(root, ["pkg"], max_lines=10).problems == [
        "pkg/long.py has 11 lines, more than 10: split it along its jobs"
    ]
