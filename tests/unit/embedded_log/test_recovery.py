"""Restart and crash recovery: torn tails, damaged or missing indexes, kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from service.adapters.embedded.log import EmbeddedLog
from service.adapters.embedded.log.index import OFFSET_ENTRY, TIME_ENTRY
from service.adapters.embedded.log.segment import Segment
from service.core.models import NewRecord, TopicPartition

from .conftest import OpenLog, read_all, segments_of

TP = TopicPartition("t", 0)
REPO = Path(__file__).resolve().parents[3]


def pdir(data_dir: Path) -> Path:
    return data_dir / "topics" / "t" / "0"


def seg_file(data_dir: Path, base: int, suffix: str) -> Path:
    return pdir(data_dir) / f"{base:020d}{suffix}"


def mark_unclean(data_dir: Path) -> None:
    """What a crash leaves: no clean-shutdown marker."""
    (data_dir / "topics.clean").unlink()


async def fill(log: EmbeddedLog, batches: int, *, per_batch: int = 3, ts0: int = 1000) -> None:
    """Batches of records with values "b:i" and rising timestamps (10 ms apart per batch)."""
    for b in range(batches):
        await log.append(
            TP,
            [
                NewRecord(f"k{b}".encode(), f"{b}:{i}".encode(), timestamp=ts0 + 10 * b)
                for i in range(per_batch)
            ],
        )


def expected_values(batches: int, per_batch: int = 3) -> list[bytes]:
    return [f"{b}:{i}".encode() for b in range(batches) for i in range(per_batch)]


async def check_seeks(log: EmbeddedLog, batches: int, per_batch: int = 3) -> None:
    """Every offset and every timestamp seek lands where it should."""
    values = expected_values(batches, per_batch)
    for offset in range(len(values)):
        data = (await log.fetch({TP: offset}, max_bytes=1, max_wait_ms=0))[TP]
        assert [(r.offset, r.value) for r in data.records] == [(offset, values[offset])]
    for b in range(batches):
        assert await log.offset_for_timestamp(TP, 1000 + 10 * b) == b * per_batch
        assert await log.offset_for_timestamp(TP, 1000 + 10 * b - 5) == b * per_batch
    assert await log.offset_for_timestamp(TP, 1000 + 10 * batches) is None


# several segments, several index entries each
KW = {"segment_bytes": 1200, "min_segment_bytes": 1, "index_interval_bytes": 150}


async def make(open_log: OpenLog, batches: int = 40) -> EmbeddedLog:
    log = await open_log(**KW)
    await log.create_topic("t", 1, 1, {})
    await fill(log, batches)
    return log


async def test_restart_reopens_the_same_data(open_log: OpenLog, data_dir: Path) -> None:
    log = await make(open_log)
    before = await read_all(log, TP)
    bases = [s.base_offset for s in segments_of(log, TP)]
    assert len(bases) > 3
    await log.stop()
    log = await open_log(data_dir, **KW)
    assert await read_all(log, TP) == before
    assert [s.base_offset for s in segments_of(log, TP)] == bases
    await check_seeks(log, 40)
    assert (await log.append(TP, [NewRecord(None, b"next")]))[0] == 120


@pytest.mark.parametrize("clean", [True, False], ids=["clean-marker", "unclean"])
async def test_a_clean_restart_does_not_rebuild_sound_indexes(
    open_log: OpenLog, data_dir: Path, monkeypatch: pytest.MonkeyPatch, clean: bool
) -> None:
    log = await make(open_log)
    await log.stop()
    if not clean:
        mark_unclean(data_dir)
    rebuilt: list[int] = []
    real = Segment._rebuild

    def spy(self: Segment, file_size: int, *, sealed: bool) -> None:
        rebuilt.append(self.base_offset)
        real(self, file_size, sealed=sealed)

    monkeypatch.setattr(Segment, "_rebuild", spy)
    log = await open_log(data_dir, **KW)
    active = segments_of(log, TP)[-1].base_offset
    # Closed segments are never rescanned; after a crash only the active one is.
    assert rebuilt == ([] if clean else [active])
    await check_seeks(log, 40)


@pytest.mark.parametrize("clean", [True, False], ids=["clean-marker", "unclean"])
@pytest.mark.parametrize(
    "damage", ["truncate-mid-batch", "garbage", "partial-header", "flipped-byte", "zeros"]
)
async def test_torn_tail_is_cut_and_appends_continue(
    open_log: OpenLog, data_dir: Path, damage: str, clean: bool
) -> None:
    log = await make(open_log, batches=10)
    active = segments_of(log, TP)[-1]
    good_size, good_end = active.size, active.next_offset
    await log.append(TP, [NewRecord(b"torn", b"x" * 100)])  # the batch the crash will tear
    await log.stop()
    if not clean:
        mark_unclean(data_dir)
    path = seg_file(data_dir, active.base_offset, ".log")
    raw = path.read_bytes()
    if damage == "truncate-mid-batch":
        path.write_bytes(raw[: good_size + 60])
    elif damage == "garbage":
        path.write_bytes(raw[:good_size] + os.urandom(333))
    elif damage == "partial-header":
        path.write_bytes(raw[: good_size + 20])
    elif damage == "flipped-byte":
        path.write_bytes(raw[:-10] + bytes([raw[-10] ^ 0xFF]) + raw[-9:])
    else:  # a file extended with zeros (size updated, data lost)
        path.write_bytes(raw[:good_size] + bytes(4096))

    log = await open_log(data_dir, **KW)
    assert await log.offsets(TP) == (0, good_end)
    assert path.stat().st_size == good_size
    assert (await log.append(TP, [NewRecord(None, b"after")]))[0] == good_end
    records = await read_all(log, TP)
    assert [r.offset for r in records] == list(range(good_end + 1))
    assert [r.value for r in records] == [*expected_values(10), b"after"]
    await log.stop()
    log = await open_log(data_dir, **KW)  # and the repair itself is durable
    assert [r.value for r in await read_all(log, TP)][-1] == b"after"


async def test_a_torn_batch_before_the_last_index_entry(open_log: OpenLog, data_dir: Path) -> None:
    """The indexed tail batch itself is bad: the index cannot be trusted, the segment is rescanned."""
    log = await make(open_log, batches=40)
    active = segments_of(log, TP)[-1]
    last_rel, last_pos = active.index.last
    await log.stop()
    path = seg_file(data_dir, active.base_offset, ".log")
    path.write_bytes(path.read_bytes()[: last_pos + 30])
    log = await open_log(data_dir, **KW)
    assert await log.offsets(TP) == (0, active.base_offset + last_rel)
    assert (await log.append(TP, [NewRecord(None, b"after")]))[0] == active.base_offset + last_rel


def corrupt_offset_index(path: Path, how: str) -> None:
    raw = path.read_bytes()
    entries = [OFFSET_ENTRY.unpack_from(raw, i) for i in range(0, len(raw), OFFSET_ENTRY.size)]
    assert len(entries) >= 3
    if how == "missing":
        path.unlink()
    elif how == "wrong-size":
        path.write_bytes(raw + b"\x01\x02\x03")
    elif how == "not-monotonic":
        entries[1], entries[2] = entries[2], entries[1]
        path.write_bytes(b"".join(OFFSET_ENTRY.pack(*e) for e in entries))
    elif how == "past-the-end":
        entries.append((entries[-1][0] + 1, 10**8))
        path.write_bytes(b"".join(OFFSET_ENTRY.pack(*e) for e in entries))
    elif how == "wrong-last-position":
        entries[-1] = (entries[-1][0], entries[-1][1] + 7)
        path.write_bytes(b"".join(OFFSET_ENTRY.pack(*e) for e in entries))
    elif how == "wrong-middle-position":  # only caught when a read lands on it
        entries[1] = (entries[1][0], entries[1][1] + 5)
        path.write_bytes(b"".join(OFFSET_ENTRY.pack(*e) for e in entries))
    elif how == "empty":
        path.write_bytes(b"")
    else:
        raise AssertionError(how)


OFFSET_DAMAGE = [
    "missing",
    "wrong-size",
    "not-monotonic",
    "past-the-end",
    "wrong-last-position",
    "wrong-middle-position",
    "empty",
]


@pytest.mark.parametrize("how", OFFSET_DAMAGE)
@pytest.mark.parametrize("which", ["closed", "active"])
async def test_damaged_offset_index_is_rebuilt(
    open_log: OpenLog, data_dir: Path, how: str, which: str
) -> None:
    log = await make(open_log, batches=40)
    segs = segments_of(log, TP)
    target = segs[1] if which == "closed" else segs[-1]
    assert len(target.index) >= 3
    await log.stop()
    original = seg_file(data_dir, target.base_offset, ".index").read_bytes()
    corrupt_offset_index(seg_file(data_dir, target.base_offset, ".index"), how)
    log = await open_log(data_dir, **KW)
    await check_seeks(log, 40)
    assert (await log.append(TP, [NewRecord(None, b"more")]))[0] == 120
    if how != "wrong-middle-position":  # rebuilt exactly as the appends had written it
        assert seg_file(data_dir, target.base_offset, ".index").read_bytes()[: len(original)] == original


@pytest.mark.parametrize("how", ["missing", "wrong-size", "not-monotonic", "beyond-the-segment", "garbage"])
@pytest.mark.parametrize("which", ["closed", "active"])
async def test_damaged_time_index_is_rebuilt(open_log: OpenLog, data_dir: Path, how: str, which: str) -> None:
    log = await make(open_log, batches=40)
    segs = segments_of(log, TP)
    target = segs[1] if which == "closed" else segs[-1]
    await log.stop()
    path = seg_file(data_dir, target.base_offset, ".timeindex")
    original = path.read_bytes()
    entries = [TIME_ENTRY.unpack_from(original, i) for i in range(0, len(original), TIME_ENTRY.size)]
    assert len(entries) >= 2
    if how == "missing":
        path.unlink()
    elif how == "wrong-size":
        path.write_bytes(original[:-1])
    elif how == "not-monotonic":
        path.write_bytes(b"".join(TIME_ENTRY.pack(*e) for e in reversed(entries)))
    elif how == "beyond-the-segment":
        path.write_bytes(original + TIME_ENTRY.pack(entries[-1][0] + 1, 10**6))
    else:
        path.write_bytes(os.urandom(len(original)))
    log = await open_log(data_dir, **KW)
    await check_seeks(log, 40)
    assert path.read_bytes() == original


async def test_rebuilt_indexes_match_what_appends_wrote(open_log: OpenLog, data_dir: Path) -> None:
    log = await make(open_log, batches=40)
    await log.stop()
    index_files = [p for p in pdir(data_dir).iterdir() if p.suffix in (".index", ".timeindex")]
    originals = {p: p.read_bytes() for p in index_files}
    assert len(originals) == 2 * len(segments_of(log, TP))
    for p in index_files:
        p.unlink()
    log = await open_log(data_dir, **KW)
    assert {p: p.read_bytes() for p in index_files} == originals


async def test_unclean_restart_keeps_everything_written(open_log: OpenLog, data_dir: Path) -> None:
    log = await make(open_log, batches=40)
    await log.stop()
    mark_unclean(data_dir)
    for p in pdir(data_dir).iterdir():
        if p.suffix in (".index", ".timeindex"):
            p.unlink()
    log = await open_log(data_dir, **KW)
    assert [r.value for r in await read_all(log, TP)] == expected_values(40)
    await check_seeks(log, 40)


async def test_orphan_index_files_are_removed(open_log: OpenLog, data_dir: Path) -> None:
    log = await make(open_log, batches=3)
    await log.stop()
    (pdir(data_dir) / f"{999:020d}.index").write_bytes(b"x" * 8)
    (pdir(data_dir) / f"{999:020d}.timeindex").write_bytes(b"x" * 12)
    (pdir(data_dir) / f"{0:020d}.index.tmp").write_bytes(b"x")
    log = await open_log(data_dir, **KW)
    assert (
        sorted(p.name for p in pdir(data_dir).iterdir() if "999" in p.name or p.name.endswith(".tmp")) == []
    )
    assert [r.value for r in await read_all(log, TP)] == expected_values(3)


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from service.adapters.embedded.log import EmbeddedLog
    from service.core.models import NewRecord, TopicPartition

    async def main():
        log = EmbeddedLog(Path(sys.argv[1]), flush="always", segment_bytes=4096, min_segment_bytes=1)
        await log.start()
        await log.create_topic("t", 1, 1, {})
        tp = TopicPartition("t", 0)

        async def writer(w):
            for i in range(10**6):
                records = [NewRecord(None, f"{w}:{i}:{j}".encode()) for j in range(5)]
                base = (await log.append(tp, records))[0]
                print(w, i, base, flush=True)

        await asyncio.gather(*(writer(w) for w in range(4)))

    asyncio.run(main())
    """
)


def test_kill_9_loses_no_acknowledged_record(data_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data_dir)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    acked: list[tuple[int, int, int]] = []
    try:
        assert proc.stdout is not None
        while len(acked) < 300:
            line = proc.stdout.readline()
            assert line, "the writer died before acknowledging enough records"
            w, i, base = map(int, line.split())
            acked.append((w, i, base))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    async def verify() -> None:
        async with EmbeddedLog(data_dir) as log:
            records = {r.offset: r.value for r in await read_all(log, TP)}
            end = (await log.offsets(TP))[1]
            assert sorted(records) == list(range(end))  # dense, whatever the crash cut
            for w, i, base in acked:
                assert [records[base + j] for j in range(5)] == [f"{w}:{i}:{j}".encode() for j in range(5)]
            assert (await log.append(TP, [NewRecord(None, b"after")]))[0] == end

    asyncio.run(verify())
