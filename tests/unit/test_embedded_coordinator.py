"""What only the embedded coordinator has: a journal on disk, and offsets that survive crashes.

The port's contract, which it shares with the ZooKeeper coordinator, is tested
over both in ``tests/integration/test_coordinator_port.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.offsets_format import LOCK_NAME
from service.core.models import TopicPartition
from service.errors import BackendError, BackendUnavailable

TP = TopicPartition
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def coord(tmp_path: Path) -> AsyncIterator[EmbeddedCoordinator]:
    async with EmbeddedCoordinator(tmp_path) as c:
        yield c


async def reopen(data_dir: Path, **kw: int) -> EmbeddedCoordinator:
    """A fresh instance on the same directory, as after a restart."""
    c = EmbeddedCoordinator(data_dir, **kw)
    await c.start()
    return c


def files(data_dir: Path) -> list[str]:
    """The offsets files (the directory's lock file, there while a coordinator runs, aside)."""
    return sorted(p.name for p in (data_dir / "coordinator").iterdir() if p.name != LOCK_NAME)


def entries(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def journal(data_dir: Path) -> Path:
    [path] = (data_dir / "coordinator").glob("*.journal")
    return path


# --- group names and commits ------------------------------------------------------------


async def test_any_group_name_round_trips_and_never_becomes_a_path(tmp_path: Path) -> None:
    names = ["../../escape", "/abs/path", "a\x00b", "ünïcødé 🚀", "\ud800lone-surrogate", "x" * 255, "."]
    c = await reopen(tmp_path)
    for i, name in enumerate(names):
        await c.commit(name, {TP("t", i): i + 1})
    await c.stop()
    assert not (tmp_path.parent / "escape").exists()
    assert entries(tmp_path) == ["coordinator"]
    c = await reopen(tmp_path)
    assert await c.groups() == sorted(names)
    for i, name in enumerate(names):
        assert await c.committed(name) == {TP("t", i): i + 1}
    await c.stop()


async def test_concurrent_commits_are_serialized(coord: EmbeddedCoordinator, tmp_path: Path) -> None:
    await asyncio.gather(*(coord.commit("g", {TP("t", 0): i, TP("t", i % 3): i}) for i in range(100)))
    in_memory = await coord.committed("g")
    assert in_memory[TP("t", 0)] == 99
    again = await reopen(tmp_path)  # crash view: what the journal holds right now
    assert await again.committed("g") == in_memory


async def test_a_cancelled_commit_is_applied_in_memory_and_on_disk_alike(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    request = asyncio.create_task(c.commit("g", {TP("t", 0): 42}))
    await asyncio.sleep(0)  # the commit is under way
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    await c.stop()  # waits for the write
    c = await reopen(tmp_path)
    assert await c.committed("g") == {TP("t", 0): 42}
    await c.stop()


async def test_not_running_is_unavailable(tmp_path: Path) -> None:
    c = EmbeddedCoordinator(tmp_path)
    with pytest.raises(BackendUnavailable):
        await c.commit("g", {TP("t", 0): 1})
    await c.start()
    await c.stop()
    await c.stop()  # idempotent
    with pytest.raises(BackendUnavailable):
        await c.committed("g")


# --- durability --------------------------------------------------------------------------


async def test_offsets_survive_restart_without_stop(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    for i in range(50):
        await c.commit("g", {TP("t", i % 4): i})
    await c.commit("h", {TP("u", 0): 1})
    # No stop(): the first instance is simply abandoned, as a killed process would be.
    c2 = await reopen(tmp_path)
    assert await c2.committed("g") == {TP("t", 0): 48, TP("t", 1): 49, TP("t", 2): 46, TP("t", 3): 47}
    assert await c2.committed("h") == {TP("u", 0): 1}
    await c2.stop()


async def test_stop_compacts_into_the_snapshot(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 1})
    await c.stop()
    assert files(tmp_path) == ["offsets-0000000000000001.journal", "offsets.snapshot"]
    assert journal(tmp_path).stat().st_size == 5  # only the header
    c = await reopen(tmp_path)
    assert await c.committed("g") == {TP("t", 0): 1}
    await c.stop()


async def test_torn_last_record_is_ignored_and_cut_off(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 1})
    path = journal(tmp_path)
    good = path.stat().st_size
    await c.commit("g", {TP("t", 0): 2, TP("t", 1): 2})
    full = path.read_bytes()
    for cut in range(good + 1, len(full)):  # every way the second commit can be torn
        path.write_bytes(full[:cut])
        again = await reopen(tmp_path)
        assert await again.committed("g") == {TP("t", 0): 1}
        assert path.stat().st_size == good
    # After recovery, new commits land after the intact part and are found again.
    await again.commit("g", {TP("t", 1): 5})
    last = await reopen(tmp_path)
    assert await last.committed("g") == {TP("t", 0): 1, TP("t", 1): 5}
    await last.stop()


async def test_corrupted_last_record_fails_its_crc_and_is_ignored(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 1})
    await c.commit("g", {TP("t", 0): 2})
    path = journal(tmp_path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last offset's low byte
    path.write_bytes(bytes(data))
    again = await reopen(tmp_path)
    assert await again.committed("g") == {TP("t", 0): 1}
    await again.stop()


async def test_torn_journal_header_is_recovered(tmp_path: Path) -> None:
    store = tmp_path / "coordinator"
    store.mkdir()
    (store / "offsets-0000000000000000.journal").write_bytes(b"BG")
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 3})
    again = await reopen(tmp_path)
    assert await again.committed("g") == {TP("t", 0): 3}
    await again.stop()


async def test_journal_is_compacted_past_the_threshold(tmp_path: Path) -> None:
    c = await reopen(tmp_path, compact_bytes=1000)
    for i in range(200):
        await c.commit("g", {TP("t", i % 7): i})
        await c.commit(f"group-{i % 5}", {TP("u", 0): i})
    assert journal(tmp_path).stat().st_size <= 1000 + 100
    assert "offsets.snapshot" in files(tmp_path)
    assert len(files(tmp_path)) == 2
    expected = {g: await c.committed(g) for g in await c.groups()}
    again = await reopen(tmp_path, compact_bytes=1000)  # no stop()
    assert {g: await again.committed(g) for g in await again.groups()} == expected
    await again.stop()


async def test_every_crash_point_of_a_compaction_loads_the_same(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 1})
    await c.stop()  # snapshot -> journal 1
    store = tmp_path / "coordinator"
    snapshot_before = (store / "offsets.snapshot").read_bytes()
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 2, TP("t", 1): 1})
    journal_before = journal(tmp_path).read_bytes()
    await c.stop()  # snapshot -> journal 2, journal 1 deleted
    snapshot_after = (store / "offsets.snapshot").read_bytes()
    expected = {TP("t", 0): 2, TP("t", 1): 1}

    scenarios = {
        # new empty journal created, snapshot not yet replaced
        "new-journal-only": (snapshot_before, {1: journal_before, 2: b"BGOJ\x01"}),
        # snapshot replaced, old journal not yet deleted
        "old-journal-left": (snapshot_after, {1: journal_before, 2: b"BGOJ\x01"}),
        # snapshot replaced, new journal's header never made it
        "new-journal-torn": (snapshot_after, {1: journal_before, 2: b""}),
    }
    for name, (snapshot, journals) in scenarios.items():
        for p in store.iterdir():
            p.unlink()
        (store / "offsets.snapshot").write_bytes(snapshot)
        (store / "offsets.snapshot.tmp").write_bytes(b"half-written")
        for seq, data in journals.items():
            (store / f"offsets-{seq:016d}.journal").write_bytes(data)
        again = await reopen(tmp_path)
        assert await again.committed("g") == expected, name
        await again.commit("g", {TP("t", 9): 9})
        last = await reopen(tmp_path)
        assert await last.committed("g") == {**expected, TP("t", 9): 9}, name
        await last.stop()
        assert "offsets.snapshot.tmp" not in files(tmp_path)


async def test_failed_compaction_keeps_every_commit(tmp_path: Path) -> None:
    c = await reopen(tmp_path, compact_bytes=200)
    obstacle = tmp_path / "coordinator" / "offsets.snapshot.tmp"
    obstacle.mkdir()  # the snapshot cannot be written: compaction fails, commits must not
    for i in range(30):
        await c.commit("g", {TP("t", i % 2): i})
    assert files(tmp_path) == [
        "offsets-0000000000000000.journal",
        "offsets-0000000000000001.journal",
        obstacle.name,
    ]
    again = await reopen(tmp_path, compact_bytes=200)
    assert await again.committed("g") == {TP("t", 0): 28, TP("t", 1): 29}
    obstacle.rmdir()
    for i in range(30, 60):  # compaction works again
        await again.commit("g", {TP("t", i % 2): i})
    assert len(files(tmp_path)) == 2 and "offsets.snapshot" in files(tmp_path)
    last = await reopen(tmp_path)
    assert await last.committed("g") == {TP("t", 0): 58, TP("t", 1): 59}
    await last.stop()


async def test_damaged_snapshot_refuses_to_start(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 1})
    await c.stop()
    snapshot = tmp_path / "coordinator" / "offsets.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[-2] ^= 0x01
    snapshot.write_bytes(bytes(data))
    with pytest.raises(BackendError, match="damaged"):
        await reopen(tmp_path)


_CRASHER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from service.adapters.embedded.coordinator import EmbeddedCoordinator
    from service.core.models import TopicPartition

    async def main() -> None:
        c = EmbeddedCoordinator(Path(sys.argv[1]), compact_bytes=2000)
        await c.start()
        i = 0
        while True:
            await c.commit("g", {TopicPartition("t", i % 3): i, TopicPartition("u", 0): i})
            print(i, flush=True)  # acknowledged
            i += 1

    asyncio.run(main())
    """
)


async def test_kill_9_loses_no_acknowledged_commit(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CRASHER,
        str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    acked = -1
    try:
        async with asyncio.timeout(60):
            while line := await proc.stdout.readline():
                acked = int(line)
                if acked >= 300:  # several compactions (threshold 2000 bytes) have happened
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # The child ran on until the kill: what it acknowledged meanwhile is still in the pipe.
    for line in (await proc.stdout.read()).splitlines():
        acked = int(line)
    assert proc.returncode == -signal.SIGKILL
    assert acked >= 300
    c = await reopen(tmp_path)
    offsets = await c.committed("g")
    # Everything acknowledged is there; at most the commit in flight at the kill is there too.
    assert offsets[TP("u", 0)] in (acked, acked + 1)
    last = offsets[TP("u", 0)]
    assert offsets == {TP("t", (last - k) % 3): last - k for k in range(3)} | {TP("u", 0): last}
    await c.stop()
