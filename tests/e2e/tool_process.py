"""Run brokergate's console tools (``brokergate topics``, ``acls``, ``schemas`` …) as a user does: a
separate process against a ``GatewayProcess``, and what it printed and how it ended."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.e2e.gateway_process import GatewayProcess


def tool_env(gw: GatewayProcess, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without any BROKERGATE_ setting of its own, pointed at ``gw``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKERGATE_")}
    return {**env, "BROKERGATE_URL": gw.url, **(extra or {})}


def bg(
    gw: GatewayProcess, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``brokergate ARGS`` against ``gw``, in a session of its own: no terminal to prompt at."""
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=tool_env(gw, env),
        start_new_session=True,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that succeeded."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], status: int, needle: str, *, alone: bool = True) -> str:
    """The error line of a command that ended with ``status``; it holds ``needle``. ``alone``: it is
    the one line on stderr; else the last (a command may have said something before it failed)."""
    assert result.returncode == status, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines and (len(lines) == 1 or not alone), result.stderr
    assert lines[-1].startswith("brokergate: error: ") and needle in lines[-1], result.stderr
    assert "Traceback" not in result.stderr
    return lines[-1]


def rows(out: str) -> list[list[str]]:
    """The rows of a table printed by a tool, header left out."""
    return [line.split() for line in out.splitlines()[1:]]
