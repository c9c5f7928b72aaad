"""Run ``brokergate serve`` as a user does: a separate process on a free port."""

from __future__ import annotations

from pathlib import Path

from deploy.local.gateway import GatewayReplica


class GatewayProcess(GatewayReplica):
    """A ``brokergate serve`` subprocess; its output goes to a log file that failures print."""

    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        # In the test run's process group: a Ctrl-C stops it with pytest.
        super().__init__(data_dir, args=extra, env=env, new_session=False)
