"""The descriptor budget counts what partitions will hold once written, and the connections'
sockets whole, not what is open at the moment a topic is created."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from service.adapters.embedded.log import EmbeddedLog
from service.adapters.embedded.log.fds import FDS_PER_PARTITION, FDS_RESERVED, open_files
from service.core.models import NewRecord, TopicPartition
from service.errors import InvalidTopicConfig

RECORD = [NewRecord(key=None, value=b"x")]


@pytest.fixture
def room_for():
    """Set the soft ``RLIMIT_NOFILE`` to what is open now, the reserve and ``n`` partitions."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def set_room(n: int) -> None:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (open_files() + FDS_RESERVED + n * FDS_PER_PARTITION, hard)
        )

    yield set_room
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_partitions_not_yet_written_are_counted_as_written(tmp_path: Path, room_for) -> None:
    log = EmbeddedLog(tmp_path)
    await log.start()
    try:
        room_for(60)
        await log.create_topic("first", 40, 1, {})  # each holds one descriptor now, three once written
        with pytest.raises(InvalidTopicConfig, match="80 kept for the partitions there are to be written"):
            await log.create_topic("second", 40, 1, {})
        await log.create_topic("second", 20, 1, {})  # what is left fits
        for p in range(40):  # and writing them all finds every descriptor it needs
            await log.append(TopicPartition("first", p), RECORD)
        for p in range(20):
            await log.append(TopicPartition("second", p), RECORD)
    finally:
        await log.stop()


async def test_the_client_connections_are_kept_their_descriptors(tmp_path: Path, room_for) -> None:
    log = EmbeddedLog(tmp_path, connection_fds=30 * FDS_PER_PARTITION)
    await log.start()
    try:
        room_for(40)
        with pytest.raises(InvalidTopicConfig, match="for client connections"):
            await log.create_topic("t", 20, 1, {})
        await log.create_topic("t", 10, 1, {})
    finally:
        await log.stop()
