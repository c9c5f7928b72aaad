"""A TypeScript client generated from openapi.yaml runs the v2 flow, type-checked strictly, and
Redocly's recommended rules find nothing in the document.

The npm package in tests/typescript pins openapi-typescript, openapi-fetch, TypeScript and Redocly's
CLI (package-lock.json); ``npm ci`` installs them into its node_modules once per session, from
the npm registry. The program (tests/typescript/src/flow.ts) is compiled against the types
generated from the checked-in openapi.yaml, then run with node against a gateway process.
Node and npm come from ``make system-packages``: without them these tests fail, they do not skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gateway_process import GatewayProcess

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tests" / "typescript"
# Redocly's CLI needs this much Node (its package.json's engines).
NODE_AT_LEAST = (20, 19)
# No telemetry and no update check: the tests talk to nothing but the registry npm ci installs from.
ENV = {
    **os.environ,
    "REDOCLY_TELEMETRY": "off",
    "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true",
    "NO_UPDATE_NOTIFIER": "1",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
}


def run(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return f"$ {' '.join(result.args)}\n{result.stdout}{result.stderr}"


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """tests/typescript/node_modules, installed by ``npm ci`` from package-lock.json."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            "node and npm are needed to test the document with a TypeScript client: "
            "`make system-packages` installs them (apt-get install nodejs npm)."
        )
    version = run(node, "--version", cwd=PACKAGE).stdout.strip()
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < NODE_AT_LEAST:
        pytest.fail(
            f"node {version} is too old: Redocly's CLI needs {'.'.join(map(str, NODE_AT_LEAST))} or later."
        )
    installed = run(npm, "ci", cwd=PACKAGE, timeout=600)
    assert installed.returncode == 0, output(installed)
    return PACKAGE / "node_modules"


@pytest.fixture
def program(node_modules: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the program beside the types generated from openapi.yaml, type-checked with
    ``tsc --strict`` and compiled: its ``build/flow.js``."""
    work = tmp_path / "typescript"
    (work / "src").mkdir(parents=True)
    shutil.copy(PACKAGE / "tsconfig.json", work)
    shutil.copy(PACKAGE / "src" / "flow.ts", work / "src")
    (work / "node_modules").symlink_to(node_modules)
    bin_ = node_modules / ".bin"
    generated = run(
        str(bin_ / "openapi-typescript"), str(ROOT / "openapi.yaml"), "--output", "src/schema.d.ts", cwd=work
    )
    assert generated.returncode == 0, output(generated)
    checked = run(str(bin_ / "tsc"), "--strict", "--noEmit", "-p", ".", cwd=work)
    assert checked.returncode == 0 and "error" not in checked.stdout, output(checked)
    built = run(str(bin_ / "tsc"), "-p", ".", cwd=work)
    assert built.returncode == 0, output(built)
    yield work / "build" / "flow.js"


def test_the_program_silences_no_type():
    # The types must fit as generated: no cast to any or unknown, no ts-ignore.
    source = (PACKAGE / "src" / "flow.ts").read_text()
    assert not re.search(r"\bas\s+(any|unknown)\b|:\s*any\b|@ts-(ignore|expect-error|nocheck)", source)


def test_a_generated_typescript_client_runs_the_v2_flow(program, tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        ran = run("node", str(program), gw.url, cwd=program.parent, timeout=120)
        assert ran.returncode == 0, output(ran) + gw.output()[-4000:]
        assert "the v2 flow ran" in ran.stdout
    finally:
        gw.stop()


def test_redocly_recommended_rules_find_nothing_in_the_document(node_modules):
    linted = run(str(node_modules / ".bin" / "redocly"), "lint", str(ROOT / "openapi.yaml"), cwd=PACKAGE)
    assert linted.returncode == 0, output(linted)
    assert "Your API description is valid" in linted.stdout + linted.stderr, output(linted)
    assert not re.search(r"\b(error|warning)s?\b", linted.stdout), output(linted)
