"""The embedded coordinator's share states stored as changes: the data of the previous version
still loads, a change is compare-and-set and checked like a whole write, and ``kill -9`` between
a change and a compaction loses nothing acknowledged."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.share_states import ShareStoreLimits
from service.core.models import TopicPartition
from service.core.shares.delivery import AckType
from service.core.shares.state import SharePartition
from service.errors import InvalidPayload, ShareStateTooLarge

REPO = Path(__file__).resolve().parents[2]
TP = TopicPartition("t", 0)

# What the previous version (whole states only) left of a share-partition in a data dir: a
# snapshot of its first write (four records acquired by m1) and, in the journal after it, its
# second (0 accepted, 2 released with an error); the process was killed, no compaction since.
_PREVIOUS: dict[str, str] = {
    "shares.snapshot": (
        "QkdTUwEAAAAAAAAAAQAAAAEAAAC+emXRfQACc2cAAAABAAF0AAAAAAAAAAAAAAAAAAAAo3sic3RhcnQiOjAsImVuZCI6NCwi"
        "cmVjb3JkcyI6W1swLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFsxLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51"
        "bGxdLFsyLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFszLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdXX0="
    ),
    "shares-0000000000000001.journal": (
        "QkdTSgEAAACdnzF6hQACc2cAAAABAAF0AAAAAAAAAAAAAAABAAAAgnsic3RhcnQiOjEsImVuZCI6NCwicmVjb3JkcyI6W1sx"
        "LCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFsyLCJBVkFJTEFCTEUiLDEsbnVsbCwwLCJsYXRlciJdLFszLCJBQ1FV"
        "SVJFRCIsMSwibTEiLDMxMDAwLG51bGxdXX0="
    ),
}


async def reopen(data_dir: Path, **kw: object) -> EmbeddedCoordinator:
    c = EmbeddedCoordinator(data_dir, **kw)  # type: ignore[arg-type]
    await c.start()
    return c


async def test_the_share_states_of_the_previous_version_load_and_take_changes(tmp_path: Path) -> None:
    root = tmp_path / "coordinator"
    root.mkdir()
    for name, data in _PREVIOUS.items():
        (root / name).write_bytes(base64.b64decode(data))
    c = await reopen(tmp_path)
    [(state, version)] = (await c.share_states("sg")).values()
    sp = SharePartition.from_json(state)
    assert version == 1 and (sp.start, sp.end, sorted(sp.records)) == (1, 4, [1, 2, 3])
    assert sp.records[2].error == "later" and sp.counts() == {"available": 1, "acquired": 2, "archiving": 0}
    # the next write is a change: only what it touched goes to the journal
    sp.acquire("m2", 2000, max_records=5, log_offsets=[4, 5])
    sp.acknowledge("m1", [1], AckType.ACCEPT, 2000)
    assert await c.change_share_states("sg", {TP: (sp.change_json(), version)}) == {TP: 2}
    assert await c.share_versions("sg", [TP, TopicPartition("t", 1)]) == {TP: 2}
    expected = sp.to_json()
    assert await c.share_states("sg") == {TP: (expected, 2)}
    again = await reopen(tmp_path)  # no stop: the snapshot of the previous version, then the journals
    assert await again.share_states("sg") == {TP: (expected, 2)}
    await again.stop()  # compacted: the snapshot now holds the state the changes made
    last = await reopen(tmp_path)
    assert await last.share_states("sg") == {TP: (expected, 2)}
    await last.stop()


# What the version before runs (a row per record) left of a share-partition: a snapshot of its
# first change (six records acquired by m1, 0 to 5), and in the journal after it two changes of
# that version (rows set, offsets dropped): 0 accepted, 2 and 3 released with an error, then 2
# acquired again by m2; the process was killed, no compaction since.
_ROWS_PER_RECORD: dict[str, str] = {
    "shares.snapshot": (
        "QkdTUwEAAAAAAAAAAQAAAAEAAAEAW8oRtgACc2cAAAABAAF0AAAAAAAAAAAAAAAAAAAA5Xsic3RhcnQiOjAsImVuZCI6Niwi"
        "cmVjb3JkcyI6W1swLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFsxLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51"
        "bGxdLFsyLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFszLCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFs0"
        "LCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdLFs1LCJBQ1FVSVJFRCIsMSwibTEiLDMxMDAwLG51bGxdXX0="
    ),
    "shares-0000000000000001.journal": (
        "QkdTSgEAAACIpwAhcP8AAnNnAAAAAQABdAAAAAAAAAAAAAAAAQAAAGx7InN0YXJ0IjoxLCJlbmQiOjYsInJlY29yZHMiOltb"
        "MiwiQVZBSUxBQkxFIiwxLG51bGwsMCwibGF0ZXIiXSxbMywiQVZBSUxBQkxFIiwxLG51bGwsMCwibGF0ZXIiXV0sImRyb3Ai"
        "OlswXX0AAABpTD+Cqv8AAnNnAAAAAQABdAAAAAAAAAAAAAAAAgAAAE17InN0YXJ0IjoxLCJlbmQiOjYsInJlY29yZHMiOltb"
        "MiwiQUNRVUlSRUQiLDIsIm0yIiwzMTAwMiwibGF0ZXIiXV0sImRyb3AiOltdfQ=="
    ),
}


async def test_the_states_and_changes_of_a_row_per_record_load_as_runs(tmp_path: Path) -> None:
    root = tmp_path / "coordinator"
    root.mkdir()
    for name, data in _ROWS_PER_RECORD.items():
        (root / name).write_bytes(base64.b64decode(data))
    c = await reopen(tmp_path)
    [(state, version)] = (await c.share_states("sg")).values()
    sp = SharePartition.from_json(state)
    assert version == 2 and (sp.start, sp.end, list(sp.records)) == (1, 6, [1, 2, 3, 4, 5])
    assert [(o, r.state.value, r.deliveries, r.owner, r.error) for o, r in sp.records.items()] == [
        (1, "ACQUIRED", 1, "m1", None),
        (2, "ACQUIRED", 2, "m2", "later"),
        (3, "AVAILABLE", 1, None, "later"),
        (4, "ACQUIRED", 1, "m1", None),
        (5, "ACQUIRED", 1, "m1", None),
    ]
    assert state["runs"][-1] == [4, 5, "ACQUIRED", 1, "m1", 31000, None]  # 4 and 5 alike: one run
    # it takes changes of this version, and they replay onto it after a restart
    refused, _ = sp.acknowledge("m1", [1, 4, 5], AckType.ACCEPT, 2000)
    assert not refused
    assert await c.change_share_states("sg", {TP: (sp.change_json(), 2)}) == {TP: 3}
    await c.stop()
    c = await reopen(tmp_path)
    assert await c.share_states("sg") == {TP: (sp.to_json(), 3)}
    await c.stop()


async def test_a_change_is_compare_and_set_and_checked_as_a_whole_write(tmp_path: Path) -> None:
    c = await reopen(tmp_path, share_limits=ShareStoreLimits(max_state_bytes=2000))
    sp = SharePartition(0)
    sp.acquire("m", 1000, max_records=5, log_offsets=range(5))
    assert await c.change_share_states("sg", {TP: (sp.change_json(), 0)}) is None  # nothing stored yet
    assert await c.share_states("sg") == {}
    assert await c.change_share_states("sg", {TP: (sp.change_json(), -1)}) == {TP: 0}
    assert await c.change_share_states("sg", {TP: (sp.change_json(), -1)}) is None  # used up
    sp.stored()
    before = await c.share_states("sg")
    for n in range(80):  # 85 records whose locks end apart: 85 runs, past 2,000 bytes
        sp.acquire("m", 1001 + n, max_records=1, log_offsets=range(5 + n, 85))
    with pytest.raises(ShareStateTooLarge, match="more than the 2000"):
        await c.change_share_states("sg", {TP: (sp.change_json(), 0)})
    assert await c.share_states("sg") == before  # refused whole: nothing stored, nothing changed
    assert await c.store_share_states("sg", {TopicPartition("u", 0): ({"n": 1}, -1)})
    with pytest.raises(InvalidPayload, match="not a share-partition's state"):
        await c.change_share_states("sg", {TopicPartition("u", 0): (sp.change_json(), 0)})
    with pytest.raises(InvalidPayload, match="not a share-partition's change"):
        await c.change_share_states("sg", {TP: ({"records": "no"}, 0)})
    await c.stop()


_CRASHER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from service.adapters.embedded.coordinator import EmbeddedCoordinator
    from service.core.models import TopicPartition
    from service.core.shares.state import SharePartition
    from tests.unit.test_embedded_share_changes import step

    async def main() -> None:
        c = EmbeddedCoordinator(Path(sys.argv[1]), compact_bytes=4000)
        await c.start()
        tp = TopicPartition("t", 0)
        sp, version, i = SharePartition(0), -1, 0
        while True:
            step(sp, i)
            versions = await c.change_share_states("sg", {tp: (sp.change_json(), version)})
            assert versions is not None
            sp.stored()
            version = versions[tp]
            print(i, flush=True)  # acknowledged
            i += 1

    asyncio.run(main())
    """
)


def step(sp: SharePartition, i: int) -> None:
    """The ``i``-th poll of the crash test: three acquired (released ones first), one accepted,
    one released (archived at the delivery limit), one kept: the window grows by one a poll."""
    now = 1000 + i
    sp.acquire("m", now, max_records=3, log_offsets=range(sp.end, sp.end + 3))
    held = [o for o, r in sp.records.items() if r.owner == "m"][-3:]
    sp.acknowledge("m", held[:1], AckType.ACCEPT, now)
    sp.acknowledge("m", held[1:2], AckType.RELEASE, now, error=f"error {i}")


async def test_kill_9_between_changes_and_compactions_loses_no_acknowledged_change(tmp_path: Path) -> None:
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
                if acked >= 300:  # a compaction every few changes (threshold 4000 bytes) by then
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    for line in (await proc.stdout.read()).splitlines():
        acked = int(line)
    assert proc.returncode == -signal.SIGKILL
    expected, sp = [], SharePartition(0)
    for i in range(acked + 2):
        step(sp, i)
        expected.append(sp.to_json())
    c = await reopen(tmp_path)
    [(state, version)] = (await c.share_states("sg")).values()
    # the last acknowledged change, or the one in flight at the kill; version i after change i
    assert (state, version) in ((expected[acked], acked), (expected[acked + 1], acked + 1))
    sp = SharePartition.from_json(state)
    assert sum(r.deliveries for r in sp.records.values()) == sum(
        deliveries * (last - first + 1) for first, last, _, deliveries, *_ in state["runs"]
    )
    # bounded: the journal never outgrows the compaction's threshold (the snapshot's size) by more
    # than the change that passed it
    root = tmp_path / "coordinator"
    [journal] = root.glob("shares-*.journal")
    assert int(journal.stem.split("-")[1]) > 5  # compacted again and again between the changes
    assert journal.stat().st_size <= max(4000, (root / "shares.snapshot").stat().st_size) + 1000
    await c.stop()
