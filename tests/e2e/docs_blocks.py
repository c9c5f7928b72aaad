"""The code blocks of the README and of every docs/ page, handed to the tests that run them.

A code block is a promise that it runs as written, so the suite runs every one, whatever its
language: ```sh (commands, run by bash), ```python (the Python client, a WebSocket consumer,
PySpark in the Spark suite's session), ```js (run by node). A test takes the blocks of one
language under one section with ``claim(page, heading, language)``: a context manager that hands
them out and, when the test's body ends without an error, fails unless every block of the
section was taken. ``test_docs_commands.test_every_block_is_run_by_a_test`` reads the tests'
source for those ``claim`` calls and fails on a block no test claims, or on a claim of a section
that has no block any more: a new block on any page fails the suite until a test runs it.

Two kinds of block are not run, each for a reason ``NOT_RUN`` gives: ```console, commands for
machines the suite does not have (Docker, Kubernetes, a Spark cluster, your own Kafka), which
``test_docs_console`` checks instead (every file they name exists and every flag they give a
``brokergate`` or ``spark_jobs`` command is a real one); and what is shown rather than run:
```text (what a program prints, a file tree, a diagram) and ```json (lines a program writes,
each checked to be JSON). A block of any other language, or of none, fails the suite.

Collaborators: the pages themselves (``README.md``, ``docs/*.md``) and ``tests.e2e.gateway_process``
for the tests that serve what the blocks talk to.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TESTS = ROOT / "tests"

_FENCE = re.compile(r"^```(\w*)")

# The languages of blocks a test runs, each claimed by the test that runs it.
RUN = ("sh", "python", "js")
# The languages of blocks no test runs, and why.
NOT_RUN = {
    "console": "commands for machines the suite does not have: test_docs_console checks the files "
    "and flags they name",
    "text": "what a program prints, a file tree or a diagram: shown, not run",
    "json": "lines a program writes, shown: each line is checked to be one JSON document",
}
_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")


def pages() -> list[Path]:
    """The README and every page of the site, in a stable order."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def page_name(path: Path) -> str:
    """How a claim names a page: its path from the repository root, e.g. ``docs/cli.md``."""
    return path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, the heading it is under, its first line (1-based), its text."""

    page: str
    heading: str
    line: int
    language: str
    text: str


def blocks(path: Path, language: str | None = "sh") -> list[Block]:
    """The fenced blocks of ``language`` (None: of every language) in the page at ``path``, each
    with its nearest heading."""
    found: list[Block] = []
    heading = ""
    fence: tuple[str, int, list[str]] | None = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if fence is None:
            opening = _FENCE.match(line)
            if opening:
                fence = (opening.group(1), number, [])
                continue
            title = _HEADING.match(line)
            if title:
                heading = title.group(2)
        elif line.startswith("```"):
            lang, start, body = fence
            if language is None or lang == language:
                found.append(Block(page_name(path), heading, start, lang, "\n".join(body) + "\n"))
            fence = None
        else:
            fence[2].append(line)
    return found


def every_block(language: str | None = "sh") -> list[Block]:
    return [block for path in pages() for block in blocks(path, language)]


@dataclass
class Section:
    """The blocks of one language under one heading of one page; ``taken`` counts what the test
    asked for."""

    page: str
    heading: str
    blocks: list[Block]
    taken: set[int] = field(default_factory=set)

    def block(self, index: int) -> str:
        """The text of the section's ``index``-th block (0-based)."""
        self.taken.add(index)
        return self.blocks[index].text

    def texts(self) -> list[str]:
        """Every block's text, in page order."""
        return [self.block(index) for index in range(len(self.blocks))]

    def script(self, url: str | None = None) -> str:
        """Every block as one bash script that stops at the first failing command, aimed at
        ``url`` (e.g. ``http://127.0.0.1:41234``) where the page says ``localhost:8082``."""
        text = "\n".join(self.texts())
        if url is not None:
            text = at(text, url)
        return "set -euo pipefail\n" + text


def at(text: str, url: str) -> str:
    """``text`` with the page's ``localhost:8082`` pointed at the gateway a test started."""
    host = url.split("://", 1)[1]
    return text.replace("http://localhost:8082", url).replace("localhost:8082", host)


@contextmanager
def claim(page: str, heading: str, language: str = "sh") -> Iterator[Section]:
    """The ``language`` blocks under ``heading`` of ``page``, for a test that runs them all."""
    found = [block for block in blocks(ROOT / page, language) if block.heading == heading]
    assert found, f"{page} has no {language} block under the heading {heading!r}"
    section = Section(page, heading, found)
    yield section
    missed = [section.blocks[i].line for i in range(len(found)) if i not in section.taken]
    assert not missed, f"{page}, {heading!r}: the blocks at lines {missed} were claimed and not run"


def claims_in_tests() -> set[tuple[str, str, str]]:
    """Every ``claim(page, heading[, language])`` written in the tests, as (page, heading, language)."""
    found: set[tuple[str, str, str]] = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "claim"
            ):
                continue
            given = [*node.args, *(k.value for k in node.keywords if k.arg == "language")]
            words = [a.value for a in given if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(words) != len(given) or len(words) not in (2, 3) or not words[0].endswith(".md"):
                continue
            page, heading, *language = words
            found.add((page, heading, language[0] if language else "sh"))
    return found


def shell_env(**more: str) -> dict[str, str]:
    """The environment with the venv's ``brokergate`` first on ``PATH``, as an installed one is."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **more}


def run_sh(script: str, url: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """A page's ``sh`` block run by bash (``set -euo pipefail``) in ``cwd``, its ``localhost:8082``
    pointed at ``url``; what it printed. Fails the test, with what it said on stderr, if it fails."""
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + at(script, url)],
        cwd=cwd,
        env=env if env is not None else os.environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def said(script: str) -> list[str]:
    """What a block's ``# `` comment lines say it prints, in order."""
    return [line[2:] for line in script.splitlines() if line.startswith("# ")]
