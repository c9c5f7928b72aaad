"""The embedded coordinator: groups with compare-and-set, fenced commits, offsets that survive crashes."""

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
from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.core.ports import Coordinator
from service.errors import BackendError, BackendUnavailable, IllegalState, InvalidPayload

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
    return sorted(p.name for p in (data_dir / "coordinator").iterdir())


def entries(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def journal(data_dir: Path) -> Path:
    [path] = (data_dir / "coordinator").glob("*.journal")
    return path


async def own(
    c: EmbeddedCoordinator, group: str, member: str, tps: list[TopicPartition], gen: int = 1
) -> None:
    state = await c.state(group)
    new = GroupState(gen, {member: tps}, dict.fromkeys(tps, gen), {}, state.version)
    assert await c.publish(group, new, expected_version=state.version)


def test_implements_the_port(tmp_path: Path) -> None:
    assert isinstance(EmbeddedCoordinator(tmp_path), Coordinator)


# --- membership and generations ----------------------------------------------------------


async def test_members_join_replace_and_leave(coord: EmbeddedCoordinator) -> None:
    a = Member("a", Subscription(topics=("t",)), "range", 5)
    await coord.join("g", a)
    await coord.join("g", Member("b", Subscription(pattern="t.*")))
    await coord.join("g", Member("a", Subscription(topics=("u",))))
    members = await coord.members("g")
    assert sorted(members) == ["a", "b"]
    assert members["a"].subscription.topics == ("u",)
    assert await coord.leave("g", "a") is True
    assert await coord.leave("g", "a") is False
    assert await coord.leave("other", "a") is False
    assert list(await coord.members("g")) == ["b"]
    assert await coord.members("nobody") == {}


async def test_returned_members_and_state_are_copies(coord: EmbeddedCoordinator) -> None:
    member = Member("a", Subscription(topics=("t",)))
    await coord.join("g", member)
    member.strategy = "range"
    (await coord.members("g"))["a"].strategy = "roundrobin"
    assert (await coord.members("g"))["a"].strategy == "balanced"

    await own(coord, "g", "a", [TP("t", 0)])
    state = await coord.state("g")
    state.assignment["a"].append(TP("t", 1))
    state.owned_since.clear()
    again = await coord.state("g")
    assert again.assignment == {"a": [TP("t", 0)]} and again.owned_since == {TP("t", 0): 1}


async def test_publish_is_compare_and_set(coord: EmbeddedCoordinator) -> None:
    assert await coord.state("g") == GroupState()
    first = GroupState(generation=1, assignment={"a": [TP("t", 0)]})
    assert await coord.publish("g", first, expected_version=0)
    assert first.version == 1  # the caller learns the new token
    stale = GroupState(generation=2)
    assert not await coord.publish("g", stale, expected_version=0)
    assert (await coord.state("g")).generation == 1
    assert await coord.publish("g", GroupState(generation=2), expected_version=1)
    stored = await coord.state("g")
    assert (stored.generation, stored.version) == (2, 2)


async def test_concurrent_publishers_only_one_wins(coord: EmbeddedCoordinator) -> None:
    results = await asyncio.gather(
        *(coord.publish("g", GroupState(generation=i), expected_version=0) for i in range(10))
    )
    assert sum(results) == 1


async def test_groups_lists_groups_with_members_or_offsets(coord: EmbeddedCoordinator) -> None:
    await coord.join("members-only", Member("a", Subscription(topics=("t",))))
    await coord.commit("offsets-only", {TP("t", 0): 3})
    await coord.join("left", Member("a", Subscription()))
    await coord.leave("left", "a")
    await coord.publish("state-only", GroupState(generation=1), expected_version=0)
    assert await coord.groups() == ["members-only", "offsets-only"]


async def test_is_leader(coord: EmbeddedCoordinator) -> None:
    assert coord.is_leader() is True


# --- commits and fencing -----------------------------------------------------------------


async def test_commit_and_read_back(coord: EmbeddedCoordinator) -> None:
    await coord.commit("g", {TP("t", 0): 10, TP("t", 1): 0})
    await coord.commit("g", {TP("t", 0): 12, TP("u", 3): 7})
    await coord.commit("h", {TP("t", 0): 99})
    await coord.commit("g", {})
    assert await coord.committed("g") == {TP("t", 0): 12, TP("t", 1): 0, TP("u", 3): 7}
    assert await coord.committed("g", [TP("t", 1), TP("t", 2)]) == {TP("t", 1): 0}
    assert await coord.committed("nobody") == {}


async def test_commit_with_member_requires_ownership(coord: EmbeddedCoordinator) -> None:
    await own(coord, "g", "a", [TP("t", 0), TP("t", 1)], gen=3)
    await coord.commit("g", {TP("t", 0): 5, TP("t", 1): 6}, member_id="a", generation=3)
    await coord.commit("g", {TP("t", 0): 7}, member_id="a")  # no generation: ownership only
    with pytest.raises(IllegalState, match="does not own partition t-2"):
        await coord.commit("g", {TP("t", 0): 8, TP("t", 2): 1}, member_id="a", generation=3)
    with pytest.raises(IllegalState, match="does not own"):
        await coord.commit("g", {TP("t", 0): 8}, member_id="b", generation=3)
    with pytest.raises(IllegalState):
        await coord.commit("empty-group", {TP("t", 0): 8}, member_id="a")
    # A refused commit stores nothing, not even its valid part.
    assert await coord.committed("g") == {TP("t", 0): 7, TP("t", 1): 6}
    # Without a member (manual assignment), no fencing.
    await coord.commit("g", {TP("t", 2): 1})
    assert (await coord.committed("g"))[TP("t", 2)] == 1


async def test_commit_fenced_by_generation_of_ownership(coord: EmbeddedCoordinator) -> None:
    state = GroupState(
        generation=5,
        assignment={"a": [TP("t", 0), TP("t", 1)]},
        owned_since={TP("t", 0): 2, TP("t", 1): 5},
    )
    assert await coord.publish("g", state, expected_version=0)
    # Held t-0 continuously since generation 2: a view from generation 3 is still good for it.
    await coord.commit("g", {TP("t", 0): 1}, member_id="a", generation=3)
    # t-1 was (re)gained in generation 5: positions read in generation 3 are stale.
    with pytest.raises(IllegalState, match="only since generation 5"):
        await coord.commit("g", {TP("t", 1): 1}, member_id="a", generation=3)
    await coord.commit("g", {TP("t", 1): 1}, member_id="a", generation=5)


@pytest.mark.parametrize("bad", [-1, 1 << 63])
async def test_commit_rejects_impossible_offsets(coord: EmbeddedCoordinator, bad: int) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit("g", {TP("t", 0): 1, TP("t", 1): bad})
    assert await coord.committed("g") == {}


@pytest.mark.parametrize("group", ["", "x" * 256])
async def test_group_names_are_1_to_255_chars(coord: EmbeddedCoordinator, group: str) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit(group, {TP("t", 0): 1})
    with pytest.raises(InvalidPayload):
        await coord.join(group, Member("a", Subscription()))


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
