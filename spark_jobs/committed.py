"""Committed offsets of consumer groups, read without a gateway: from Kafka, a data dir or ZooKeeper.

Where a gateway keeps its groups' commits depends on its log. On a Kafka log
they are Kafka's, in its group coordinator (``kafka_committed``), with what the
gateway's coordinator kept before they moved there (``KafkaLogCommitted``). On
the embedded log they are the coordinator's: the data dir of an embedded
coordinator, or the ``zookeeper://`` URL (with its chroot) of the ZooKeeper
coordinator, which the ``coordinator`` option names (with a Kafka log, it names
where the older offsets are). Every reader is read-only and safe to use while
gateways commit. A ZooKeeper reader signs in with the gateway's digest
credentials when given (``credentials``): a coordinator that is not
world-readable lets no one else read its offsets.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from service.adapters.embedded.offsets_reader import read_all_committed
from service.core.carried_offsets import as_read, is_carried
from service.core.models import TopicPartition

from .kafka_committed import KafkaCommitted
from .logs import is_kafka

if TYPE_CHECKING:
    from .credentials import BackendCredentials

ZOOKEEPER_SCHEME: Final = "zookeeper://"

Offsets = dict[TopicPartition, int]


class CommittedSource(Protocol):
    """Groups with commits, and each group's committed offsets."""

    def groups(self) -> list[str]: ...

    def committed(self, group: str) -> Offsets: ...

    def close(self) -> None: ...


def coordinator_for(log: str, coordinator: str | None) -> str | None:
    """Where the gateway's coordinator keeps its own store of committed offsets: ``coordinator``
    when given, else the log's data dir; None for a Kafka log, whose gateway's data dir is not
    the log's (its groups' offsets are Kafka's, and this store holds only older ones).

    ``embedded`` (the gateway's own spelling) means the log's data dir too.
    """
    if coordinator and coordinator != "embedded":
        return coordinator
    return None if is_kafka(log) else log


def open_committed(
    log: str, coordinator: str | None = None, credentials: BackendCredentials | None = None
) -> CommittedSource:
    """The committed offsets of the groups of gateways on ``log`` whose coordinator is
    ``coordinator`` (``coordinator_for``): on a Kafka log Kafka's, with the older store's
    (``KafkaLogCommitted``)."""
    store = coordinator_for(log, coordinator)
    older = open_store(store, credentials) if store is not None else None
    if not is_kafka(log):
        assert older is not None  # an embedded log is its own store
        return older
    try:
        return KafkaLogCommitted(KafkaCommitted(log, credentials), older)
    except BaseException:
        if older is not None:
            older.close()
        raise


def open_store(coordinator: str, credentials: BackendCredentials | None = None) -> CommittedSource:
    """The coordinator's own store of committed offsets: ZooKeeper's, or a data dir's."""
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


class KafkaLogCommitted:
    """A Kafka log's groups, as the gateway reads them: Kafka's committed offsets (``kafka``), and
    those the gateway's coordinator kept before they moved to Kafka (``older``, when named).

    The gateway carries a group's older offsets into Kafka at its first read and marks them so
    in the older store (``service.adapters.split_offsets``); this reader writes nothing, answers
    what that read answers (``service.core.carried_offsets.as_read``), and never shows the mark. ``close()``
    closes both.
    """

    def __init__(self, kafka: KafkaCommitted, older: CommittedSource | None = None) -> None:
        self._kafka = kafka
        self._older = older

    def groups(self) -> list[str]:
        """Kafka's consumer groups, and the older store's not carried into Kafka."""
        listed = set(self._kafka.groups())
        if (older := self._older) is not None:
            listed.update(g for g in older.groups() if not is_carried(older.committed(g)))
        return sorted(listed)

    def committed(self, group: str) -> Offsets:
        older = self._older.committed(group) if self._older is not None else {}
        return as_read(self._kafka.committed(group), older)

    def close(self) -> None:
        try:
            self._kafka.close()
        finally:
            if self._older is not None:
                self._older.close()
