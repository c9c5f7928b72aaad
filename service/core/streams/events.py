"""What a stream tells its client, in order: where it starts, a rebalance, records, why it ended.

Plain values, no I/O. ``instance.InstanceStream`` and ``partition.PartitionStream`` make them;
the transports (``service.api.streams``) render them. A poll's ``Blocked`` (``consumers``) is one
of them too: a record alone over the client's credit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from service.errors import GatewayError

from ..consumers import Blocked, Polled
from ..models import EmbeddedFormat, TopicPartition

EndReason = Literal["shutdown", "deleted", "error"]
SHUTDOWN: Final = "shutdown"
DELETED: Final = "deleted"
ERROR: Final = "error"


@dataclass(frozen=True, slots=True)
class Opened:
    """Where the stream starts: the position of every partition the instance owns."""

    positions: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class Rebalance:
    """The instance's partitions changed: what it owns now, and where each starts."""

    partitions: tuple[TopicPartition, ...]
    positions: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class Records:
    """A batch, and the positions after it (every owned partition's, for an instance); ``size``
    is what the records weigh, if the poll counted it already."""

    format: EmbeddedFormat
    polled: Polled
    positions: dict[TopicPartition, int]
    size: int | None = None

    @property
    def count(self) -> int:
        return sum(len(records) for _, records in self.polled)

    def weight(self) -> int:
        """What the records weigh as credit and quotas count them (``Record.size``)."""
        if self.size is not None:
            return self.size
        return sum(records.weight for _, records in self.polled)


@dataclass(frozen=True, slots=True)
class End:
    """The stream is over: the gateway drains (``shutdown``), the instance is gone (``deleted``),
    or ``error`` ended it."""

    reason: EndReason
    error: GatewayError | None = None


Event = Opened | Rebalance | Records | Blocked | End
