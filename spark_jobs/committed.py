"""Committed offsets of consumer groups, read without a gateway: from a data dir or from ZooKeeper.

The ``coordinator`` option names where a gateway keeps its groups' commits:
the data dir of an embedded coordinator, or the ``zookeeper://`` URL (with its
chroot) of the ZooKeeper coordinator. Both readers are read-only and safe to
use while gateways commit. A ZooKeeper reader signs in with the gateway's
digest credentials when given (``credentials``): a coordinator that is not
world-readable lets no one else read its offsets.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from service.adapters.embedded.offsets_reader import read_all_committed
from service.core.models import TopicPartition

from .logs import is_kafka
from .offsets import OptionError

if TYPE_CHECKING:
    from .credentials import BackendCredentials

ZOOKEEPER_SCHEME: Final = "zookeeper://"

Offsets = dict[TopicPartition, int]


class CommittedSource(Protocol):
    """Groups with commits, and each group's committed offsets."""

    def groups(self) -> list[str]: ...

    def committed(self, group: str) -> Offsets: ...

    def close(self) -> None: ...


def coordinator_for(log: str, coordinator: str | None) -> str:
    """Where committed offsets are: ``coordinator`` when given, else the log's data dir.

    ``embedded`` (the gateway's own spelling) means the log's data dir too.
    """
    if coordinator and coordinator != "embedded":
        return coordinator
    if is_kafka(log):
        raise OptionError(
            "coordinator: a Kafka log keeps no committed offsets of brokergate's groups; "
            "name the gateway's data dir or its zookeeper:// URL"
        )
    return log


def open_committed(coordinator: str, credentials: BackendCredentials | None = None) -> CommittedSource:
    if coordinator.startswith(ZOOKEEPER_SCHEME):
        from service.adapters.zookeeper.offsets_reader import ZooKeeperOffsetsReader

        zk = ZooKeeperOffsetsReader(
            coordinator, credentials=credentials.zookeeper if credentials is not None else None
        )
        zk.start()
        return zk
    return EmbeddedCommitted(Path(coordinator))


class EmbeddedCommitted:
    """The embedded coordinator's offsets files in a data dir, read once when first asked."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._all: dict[str, Offsets] | None = None

    def _load(self) -> dict[str, Offsets]:
        if self._all is None:
            self._all = read_all_committed(self.data_dir)
        return self._all

    def groups(self) -> list[str]:
        return sorted(g for g, offsets in self._load().items() if offsets)

    def committed(self, group: str) -> Offsets:
        return dict(self._load().get(group, {}))

    def close(self) -> None:
        pass
