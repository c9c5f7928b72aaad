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


# --- share-partition states --------------------------------------------------------------


def share_files(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / "coordinator").glob("shares*"))


def share_journal(data_dir: Path) -> Path:
    [path] = (data_dir / "coordinator").glob("shares-*.journal")
    return path


async def test_share_states_have_no_file_until_the_first_is_stored(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.commit("g", {TP("t", 0): 1})
    assert await c.share_groups() == []
    await c.stop()
    assert share_files(tmp_path) == []
    c = await reopen(tmp_path)
    assert await c.store_share_states("sg", {TP("t", 0): ({"n": 1}, -1)})
    assert share_files(tmp_path) == ["shares-0000000000000000.journal"]
    await c.stop()
    assert share_files(tmp_path) == ["shares-0000000000000001.journal", "shares.snapshot"]
    assert files(tmp_path)[:2] == ["offsets-0000000000000001.journal", "offsets.snapshot"]


async def versions(c: EmbeddedCoordinator, group: str) -> dict[TopicPartition, int]:
    return {tp: version for tp, (_, version) in (await c.share_states(group)).items()}


async def test_share_states_survive_restart_without_stop(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    for i in range(20):
        tp = TP("t", i % 3)
        assert await c.store_share_states("sg", {tp: ({"i": i}, (await versions(c, "sg")).get(tp, -1))})
    await c.delete_share_states("sg", [TP("t", 2)])
    await c.store_share_states("other", {TP("u", 0): ({"x": 1}, -1)})
    await c.store_share_states("gone", {TP("u", 0): ({"x": 1}, -1)})
    await c.delete_share_states("gone")
    # No stop(): the first instance is simply abandoned, as a killed process would be.
    again = await reopen(tmp_path)
    # Here a version counts the writes of a state, from 0: seven each.
    assert await again.share_states("sg") == {TP("t", 0): ({"i": 18}, 6), TP("t", 1): ({"i": 19}, 6)}
    assert await again.share_groups() == ["other", "sg"]
    await again.stop()
    last = await reopen(tmp_path)  # from the snapshot the stop wrote
    assert await last.share_states("sg") == {TP("t", 0): ({"i": 18}, 6), TP("t", 1): ({"i": 19}, 6)}
    assert await last.share_groups() == ["other", "sg"]
    await last.stop()


async def test_a_torn_share_write_is_ignored_whole_and_cut_off(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    assert await c.store_share_states("sg", {TP("t", 0): ({"n": 1}, -1), TP("t", 1): ({"n": 1}, -1)})
    first = await versions(c, "sg")
    path = share_journal(tmp_path)
    good = path.stat().st_size
    await c.store_share_states("sg", {tp: ({"n": 2}, v) for tp, v in first.items()})
    full = path.read_bytes()
    for cut in range(good + 1, len(full)):  # every way the second write can be torn: neither partition has it
        path.write_bytes(full[:cut])
        again = await reopen(tmp_path)
        assert await again.share_states("sg") == {tp: ({"n": 1}, v) for tp, v in first.items()}
        assert path.stat().st_size == good
    # After recovery, the versions read are the ones to write with, and new writes are found again.
    assert await again.store_share_states("sg", {TP("t", 0): ({"n": 3}, first[TP("t", 0)])})
    last = await reopen(tmp_path)
    assert {tp: state for tp, (state, _) in (await last.share_states("sg")).items()} == {
        TP("t", 0): {"n": 3},
        TP("t", 1): {"n": 1},
    }
    await last.stop()


async def test_share_journal_is_compacted_past_the_threshold(tmp_path: Path) -> None:
    c = await reopen(tmp_path, compact_bytes=2000)
    for i in range(200):
        tp = TP("t", i % 5)
        version = (await versions(c, "sg")).get(tp, -1)
        assert await c.store_share_states("sg", {tp: ({"i": i, "pad": "x" * 50}, version)})
    await c.delete_share_states("sg", [TP("t", 4)])
    assert share_files(tmp_path)[-1] == "shares.snapshot" and len(share_files(tmp_path)) == 2
    assert share_journal(tmp_path).stat().st_size <= 2000 + 200
    assert files(tmp_path) == [
        "offsets-0000000000000000.journal",
        *share_files(tmp_path),
    ]  # offsets untouched
    expected = await c.share_states("sg")
    assert sorted(expected) == [TP("t", p) for p in range(4)]
    again = await reopen(tmp_path, compact_bytes=2000)  # no stop()
    assert await again.share_states("sg") == expected
    await again.stop()


async def test_damaged_share_snapshot_refuses_to_start(tmp_path: Path) -> None:
    c = await reopen(tmp_path)
    await c.store_share_states("sg", {TP("t", 0): ({"n": 1}, -1)})
    await c.stop()
    snapshot = tmp_path / "coordinator" / "shares.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[-2] ^= 0x01
    snapshot.write_bytes(bytes(data))
    with pytest.raises(BackendError, match=r"share states snapshot .* is damaged"):
        await reopen(tmp_path)
    snapshot.unlink()  # the directory was left free: a retry starts (without the states)
    again = await reopen(tmp_path)
    await again.stop()


_SHARE_CRASHER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from service.adapters.embedded.coordinator import EmbeddedCoordinator
    from service.core.models import TopicPartition

    async def main() -> None:
        c = EmbeddedCoordinator(Path(sys.argv[1]), compact_bytes=4000)
        await c.start()
        tps = (TopicPartition("t", 0), TopicPartition("u", 3))
        i = 0
        while True:  # here a version counts a state's writes: write i is written from version i - 1
            assert await c.store_share_states("sg", {tp: ({"i": i, "pad": "x" * 100}, i - 1) for tp in tps})
            print(i, flush=True)  # acknowledged
            i += 1

    asyncio.run(main())
    """
)


async def test_kill_9_loses_no_acknowledged_share_write_and_tears_none(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _SHARE_CRASHER,
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
                if acked >= 300:  # several compactions (threshold 4000 bytes) have happened
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    for line in (await proc.stdout.read()).splitlines():
        acked = int(line)
    assert proc.returncode == -signal.SIGKILL
    c = await reopen(tmp_path)
    states = await c.share_states("sg")
    # Both partitions from the same write, the last acknowledged one or the one in flight at the kill
    # (here a version counts a state's writes from 0: write i stores version i).
    [last] = {state["i"] for state, _ in states.values()}
    assert last in (acked, acked + 1)
    assert states == {tp: ({"i": last, "pad": "x" * 100}, last) for tp in (TP("t", 0), TP("u", 3))}
    await c.stop()


async def test_large_share_states_are_rewritten_no_more_often_than_written(tmp_path: Path) -> None:
    # Ten states of 1,000 bytes: a snapshot of about 10,000 bytes, ten times the threshold.
    c = await reopen(tmp_path, compact_bytes=1000)
    for p in range(10):
        assert await c.store_share_states("sg", {TP("t", p): ({"pad": "x" * 1000}, -1)})
    await c.stop()
    snapshot = (tmp_path / "coordinator" / "shares.snapshot").stat().st_size
    assert snapshot > 10_000
    c = await reopen(tmp_path, compact_bytes=1000)
    first = share_journal(tmp_path).name
    version = -1
    # Small writes past compact_bytes, not past the snapshot's size: no compaction yet.
    while share_journal(tmp_path).stat().st_size < snapshot - 100:
        assert await c.store_share_states("sg", {TP("u", 0): ({"n": version}, version)})
        version += 1
        assert share_journal(tmp_path).name == first
    while share_journal(tmp_path).name == first:  # then soon one
        assert await c.store_share_states("sg", {TP("u", 0): ({"n": version}, version)})
        version += 1
    assert share_journal(tmp_path).stat().st_size < 200
    await c.stop()
