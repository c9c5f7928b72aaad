"""Where the records are read from: an embedded data dir or a Kafka cluster, behind one small interface.

``open_log(url)`` gives a ``LogSource`` (``log_source``): an
``EmbeddedSource`` (``embedded_source``) or a ``KafkaSource``
(``kafka_source``). The planner (on the driver) asks it for topics, partition
counts and bounds; each Spark task opens its own and reads one
``OffsetRange``. Sources are opened where they are used, never pickled.

What "the end" of a partition is, so that only acknowledged, durable records
are read:

embedded data dir
    The end is the offset after the last complete, CRC-valid batch of the
    newest segment (``reader.partition_bounds``), and the planner then fsyncs
    that segment through a read-only descriptor. Everything below the end is
    therefore on disk whatever the gateway's ``flush`` policy, and no crash
    can take it back: recovery only ever cuts an incomplete batch. (With
    ``flush=always`` a batch can be complete a moment before the gateway's own
    fsync acknowledges it; it is durable all the same.) The gateway's lock on
    the data dir is not taken: reading while it writes is safe.
Kafka
    The end is the high watermark (ListOffsets "latest"): records every
    in-sync replica has, which is what ``acks=all`` acknowledged.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from .embedded_source import EmbeddedSource
from .kafka_source import KafkaSource
from .log_source import LogSource

if TYPE_CHECKING:
    from .credentials import BackendCredentials

KAFKA_SCHEME: Final = "kafka://"


def open_log(url: str, credentials: BackendCredentials | None = None) -> LogSource:
    """A source for ``kafka://host:port[,...]`` (signing in with ``credentials``, if any) or an
    embedded data dir path."""
    if url.startswith(KAFKA_SCHEME):
        return KafkaSource(url, security=credentials.kafka if credentials is not None else None)
    return EmbeddedSource(Path(url))


def is_kafka(url: str) -> bool:
    return url.startswith(KAFKA_SCHEME)
