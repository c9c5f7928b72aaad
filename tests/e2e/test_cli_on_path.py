"""The README's next steps put a bare ``brokergate`` on the PATH of a new terminal once ``make run``
has made ``.venv``, so the commands of the docs run as they are written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx

from deploy.local.process import free_port
from tests.e2e.docs_blocks import ROOT, claim
from tests.e2e.gateway_process import make_run, user_env


def new_terminal_env(**more: str) -> dict[str, str]:
    """A user's environment in a terminal just opened: no virtualenv active, and no directory on
    ``PATH`` that holds a ``brokergate`` (this suite's own venv may be on it)."""
    env = user_env()
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        d for d in env["PATH"].split(os.pathsep) if d and not (Path(d) / "brokergate").exists()
    )
    return {**env, **more}


def bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_next_steps_put_brokergate_on_the_path_of_a_new_terminal(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with make_run(ROOT, port, {"BROKERGATE_DATA_DIR": str(tmp_path / "data")}):
        clusters = httpx.get(f"{url}/v3/clusters", timeout=10).json()
        created = httpx.post(
            f"{url}/v3/clusters/{clusters['data'][0]['cluster_id']}/topics",
            json={"topic_name": "orders", "partitions_count": 3},
            timeout=10,
        )
        assert created.status_code == 201, created.text  # the walk-through's topic
        env = new_terminal_env(BROKERGATE_URL=url)  # the next steps' commands talk to make run's port
        # where the newcomer of the issue stood: make run serves, and a bare brokergate is unknown
        before = bash("brokergate topics list", env)
        assert before.returncode == 127 and "command not found" in before.stderr, before
        with claim("README.md", "Next steps") as section:
            block = section.block(0)
        after = bash("set -euo pipefail\n" + block, env)
    assert after.returncode == 0, after.stderr
    shown = [line.removeprefix("# ") for line in block.splitlines() if line.startswith("# ")]
    assert after.stdout.splitlines() == shown, after.stdout
