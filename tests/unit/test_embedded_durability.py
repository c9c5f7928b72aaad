"""The embedded stores' loose ends: one writer per directory, deletions that hold, durable dirs."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.fileio import create_file, ensure_dir
from service.adapters.embedded.log import EmbeddedLog
from service.adapters.embedded.log.fds import FDS_PER_PARTITION, FDS_RESERVED, open_fds
from service.core.models import NewRecord, TopicPartition
from service.errors import BackendError, BackendUnavailable, InvalidTopicConfig

TP = TopicPartition

OTHER_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from service.adapters.embedded.coordinator import EmbeddedCoordinator
    from service.core.models import TopicPartition
    from service.errors import BackendError, BackendUnavailable, InvalidTopicConfig

    async def main() -> None:
        c = EmbeddedCoordinator(Path(sys.argv[1]))
        try:
            await c.start()
        except BackendError as exc:
            print("refused:", exc)
            return
        await c.commit("g", {TopicPartition("t", 0): 99})
        await c.stop()
        print("started")

    asyncio.run(main())
    """
)


def other_process(data_dir: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(data_dir)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_a_second_process_cannot_write_the_offsets_of_a_running_coordinator(tmp_path: Path) -> None:
    c = EmbeddedCoordinator(tmp_path)
    await c.start()
    try:
        await c.commit("g", {TP("t", 0): 5})
        answer = other_process(tmp_path)
        assert answer.startswith("refused:") and "in use by another brokergate process" in answer
        assert await c.committed("g") == {TP("t", 0): 5}
    finally:
        await c.stop()
    # once it stopped, the directory is free again
    assert other_process(tmp_path) == "started"
    again = EmbeddedCoordinator(tmp_path)
    await again.start()
    assert await again.committed("g") == {TP("t", 0): 99}
    await again.stop()


async def test_a_topic_whose_files_cannot_be_deleted_is_still_served_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    log = EmbeddedLog(tmp_path)
    await log.start()
    try:
        await log.create_topic("kept", 1, 1, {})
        await log.append(TP("kept", 0), [NewRecord(b"k", b"v")])
        # A real fault on the deletion's durable step: the trash is no directory to rename into.
        trash = tmp_path / "topics.trash"
        trash.rmdir()
        trash.write_bytes(b"")
        with pytest.raises(BackendError, match="Cannot delete"):
            await log.delete_topic("kept")
        assert await log.list_topics() == ["kept"]
        data = await log.fetch({TP("kept", 0): 0}, max_bytes=1 << 20, max_wait_ms=0)
        assert [r.value for r in data[TP("kept", 0)].records] == [b"v"]
        await log.append(TP("kept", 0), [NewRecord(None, b"after")])
    finally:
        await log.stop()
    trash.unlink()
    log = EmbeddedLog(tmp_path)
    await log.start()
    try:
        assert await log.list_topics() == ["kept"]
        data = await log.fetch({TP("kept", 0): 0}, max_bytes=1 << 20, max_wait_ms=0)
        assert [r.value for r in data[TP("kept", 0)].records] == [b"v", b"after"]
    finally:
        await log.stop()


def test_ensure_dir_creates_every_missing_level_and_refuses_a_file(tmp_path: Path) -> None:
    ensure_dir(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    ensure_dir(tmp_path / "a" / "b" / "c")  # already there: nothing to do
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(OSError):
        ensure_dir(tmp_path / "f" / "x")


async def test_a_topic_that_cannot_be_opened_leaves_the_others_served(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path)
    await log.start()
    await log.create_topic("good", 1, 1, {})
    await log.create_topic("bad", 2, 1, {})
    await log.append(TP("good", 0), [NewRecord(None, b"still here")])
    await log.stop()
    partition = tmp_path / "topics" / "bad" / "1"
    for f in partition.iterdir():
        f.unlink()
    partition.rmdir()
    partition.write_bytes(b"not a directory")  # damage no restart can repair

    log = EmbeddedLog(tmp_path)
    await log.start()
    try:
        assert await log.list_topics() == ["good"]
        data = await log.fetch({TP("good", 0): 0}, max_bytes=1 << 20, max_wait_ms=0)
        assert [r.value for r in data[TP("good", 0)].records] == [b"still here"]
        assert list(log.unopened_topics()) == ["bad"]
        with pytest.raises(BackendUnavailable, match="could not be opened"):
            await log.describe_topic("bad")
        with pytest.raises(BackendUnavailable):
            await log.create_topic("bad", 1, 1, {})
        await log.delete_topic("bad")  # the cure: it goes, files and all
        assert log.unopened_topics() == {} and not (tmp_path / "topics" / "bad").exists()
        await log.create_topic("bad", 1, 1, {})
    finally:
        await log.stop()


async def test_partitions_that_would_not_fit_the_descriptor_limit_are_refused_whole(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    log = EmbeddedLog(tmp_path)
    await log.start()
    await log.create_topic("small", 1, 1, {})
    # Leave room for the reserve and about 50 partitions, whatever this process holds already.
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_fds() + FDS_RESERVED + 50 * FDS_PER_PARTITION, hard))
    try:
        with pytest.raises(InvalidTopicConfig, match="file descriptors") as refused:
            await log.create_topic("huge", 500, 1, {})
        assert refused.value.http_status == 422
        assert not (tmp_path / "topics" / "huge").exists()
        with pytest.raises(InvalidTopicConfig, match="file descriptors"):
            await log.add_partitions("small", 501)
        assert len((await log.describe_topic("small")).partitions) == 1
        await log.create_topic("fits", 10, 1, {})
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        await log.stop()
    log = EmbeddedLog(tmp_path)  # and it starts again, with everything it had
    await log.start()
    assert await log.list_topics() == ["fits", "small"]
    await log.stop()


def test_a_file_is_created_again_where_a_failed_creation_left_it_empty_but_never_over_data(
    tmp_path: Path,
) -> None:
    """A segment roll whose directory fsync failed leaves its new, empty log file behind: the roll's
    retry takes it, while a file that holds anything is never created over."""
    empty = tmp_path / "00000000000000000005.log"
    empty.touch()
    fd = create_file(empty)
    try:
        assert os.write(fd, b"x") == 1
    finally:
        os.close(fd)
    with pytest.raises(FileExistsError):
        create_file(empty)
    assert empty.read_bytes() == b"x"
