"""Run ``brokergate serve`` as a user does: a separate process on a free port."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from deploy.local.gateway import GatewayReplica


class GatewayProcess(GatewayReplica):
    """A ``brokergate serve`` subprocess; its output goes to a log file that failures print."""

    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        # In the test run's process group: a Ctrl-C stops it with pytest.
        super().__init__(data_dir, args=extra, env=env, new_session=False)


def authorizing_gateway(data_dir: Path, users: Mapping[str, str], super_user: str) -> GatewayProcess:
    """A started gateway with HTTP Basic over ``users`` (name: password, added with ``brokergate
    users add`` as an operator would) and ACLs on, ``super_user`` allowed everything."""
    for user, password in users.items():
        added = subprocess.run(
            [
                sys.executable,
                "-m",
                "service",
                "users",
                "add",
                user,
                "--data-dir",
                str(data_dir),
                "--password-stdin",
            ],
            input=password + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert added.returncode == 0, added.stderr
    env = {"BROKERGATE_AUTHORIZE": "true", "BROKERGATE_SUPER_USERS": f"User:{super_user}"}
    return GatewayProcess(data_dir, "--auth", "basic", env=env).start()
