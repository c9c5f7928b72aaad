"""The pure parts of push streams: cursors, credit, and the bound a stream's poll hands out within;
and how a stream waits, with its collaborators faked: an idle event stream polls once a heartbeat,
a stream woken mid-read leaves no read behind, a stream rides out a backend unavailable for less
than ``backend_retry_ms`` and ends with 50301 past it."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from api_schemas import streams as wire
from service.api.gateway import Gateway
from service.api.streams.sse import KEEP_ALIVE, _chunks, partition_cursor
from service.core.acl import ALLOW_ALL, Decision
from service.core.consumers import Allowance, ConsumerService
from service.core.credit import Credit, CreditLimits
from service.core.cursors import parse_offset, parse_positions, render_positions
from service.core.models import PartitionData, Record, RecordColumns, TopicPartition
from service.core.streams import End, Event, Records, StreamLimits, StreamService
from service.core.topics import TopicService
from service.errors import BackendUnavailable, InvalidPayload
from service.server.protocol import text_frame_header

TP = TopicPartition

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True).filter(lambda t: t not in (".", ".."))
positions = st.dictionaries(
    st.builds(TP, topics, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=20
)


@given(positions)
def test_a_cursor_reads_back_as_the_positions_it_was_written_from(found: dict[TopicPartition, int]) -> None:
    assert parse_positions(render_positions(found)) == found


def test_a_cursor_is_topic_partition_offset_in_partition_order() -> None:
    assert render_positions({TP("b", 0): 3, TP("a", 1): 7, TP("a", 0): 5}) == "a:0:5,a:1:7,b:0:3"
    assert render_positions({}) == ""
    assert parse_positions("  ") == {}
    assert parse_offset("42") == 42


@pytest.mark.parametrize(
    "text",
    [
        "orders:0",  # no offset
        "orders:0:1:2",
        "or/ders:0:1",  # not a topic name
        "orders:-1:5",
        "orders:0:+5",
        "orders:0:1_000",
        "orders:0:٣",  # a digit of another script
        "orders:0:99999999999999999999",  # past int64
        "orders:2147483648:0",  # past int32
        "orders:0:1,orders:0:2",  # one partition twice
        "orders:0:1,",
    ],
)
def test_a_malformed_cursor_is_a_422_naming_where_it_came_from(text: str) -> None:
    with pytest.raises(InvalidPayload, match="Last-Event-ID"):
        parse_positions(text, what="Last-Event-ID")


@pytest.mark.parametrize("text", ["", "-1", "x", "1.5", "9223372036854775808"])
def test_a_malformed_offset_cursor_is_a_422(text: str) -> None:
    with pytest.raises(InvalidPayload):
        parse_offset(text)


def test_credit_is_spent_by_what_is_sent_and_never_passes_what_was_granted() -> None:
    credit = Credit(CreditLimits(records=100, bytes=1000))
    assert not credit.open
    credit.grant(10, 0)
    assert not credit.open  # records without bytes send nothing
    credit.grant(0, 500)
    assert credit.open and (credit.records, credit.bytes) == (10, 500)
    credit.spend(4, 200)
    assert (credit.records, credit.bytes) == (6, 300)
    with pytest.raises(ValueError):
        credit.spend(7, 1)
    credit.spend(6, 300)
    assert not credit.open
    assert (credit.granted_records, credit.sent_records, credit.granted_bytes, credit.sent_bytes) == (
        10,
        10,
        500,
        500,
    )


def test_a_grant_past_the_maxima_is_refused_whole() -> None:
    credit = Credit(CreditLimits(records=100, bytes=1000))
    credit.grant(60, 600)
    with pytest.raises(InvalidPayload, match="at most 100 records and 1000 bytes"):
        credit.grant(50, 10)
    assert (credit.records, credit.bytes) == (60, 600)  # nothing of it was added
    with pytest.raises(InvalidPayload):
        credit.grant(-1, 0)
    credit.grant(40, 400)
    assert (credit.records, credit.bytes) == (100, 1000)


def _records(*sizes: int) -> RecordColumns:
    return RecordColumns.of([Record(i, 0, None, b"x" * size) for i, size in enumerate(sizes)])


def test_a_bounded_poll_takes_the_leading_records_within_both_bounds() -> None:
    left = Allowance(3, None)
    assert [r.offset for r in left.take(_records(1, 1, 1, 1))] == [0, 1, 2]
    assert left.take(_records(1)) == [] and left.records == 0

    left = Allowance(None, 10)
    assert [r.offset for r in left.take(_records(4, 4, 4))] == [0, 1]
    assert left.bytes == 2
    assert left.take(_records(3)) == []  # alone over what is left: not handed out
    assert [r.offset for r in left.take(_records(2, 0))] == [0, 1]
    assert left.bytes == 0

    left = Allowance(5, 100)
    assert [r.offset for r in left.take(_records(10, 10))] == [0, 1]
    assert (left.records, left.bytes) == (3, 80)


@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 40), st.integers(0, 400))
def test_a_bounded_poll_never_hands_out_more_than_allowed(sizes: list[int], most: int, budget: int) -> None:
    left = Allowance(most, budget)
    taken = left.take(_records(*sizes))
    assert len(taken) <= most and sum(r.size for r in taken) <= budget
    assert taken == _records(*sizes)[: len(taken)]  # a prefix: positions move past what is taken only
    if len(taken) < len(sizes) and len(taken) < most:
        assert sum(r.size for r in taken) + sizes[len(taken)] > budget  # stopped only by a bound
    fetched = Allowance(most, budget)  # a Kafka fetch's columns: the same records, by their own sizes
    columns = fetched.take(RecordColumns.of(_records(*sizes)))
    assert columns == taken and (fetched.records, fetched.bytes, fetched.spent) == (
        left.records,
        left.bytes,
        left.spent,
    )


def test_client_messages_are_checked_and_server_messages_are_versioned() -> None:
    credit = wire.CLIENT_MESSAGE.validate_python({"v": 1, "type": "credit", "records": 5, "bytes": 10})
    assert isinstance(credit, wire.Credit) and (credit.records, credit.bytes) == (5, 10)
    commit = wire.CLIENT_MESSAGE.validate_python({"type": "commit", "id": "c1"})
    assert isinstance(commit, wire.Commit) and commit.offsets is None and commit.id == "c1"
    for bad in (
        {"type": "credit", "records": -1},
        {"v": 2, "type": "credit"},
        {"type": "fly"},
        {"records": 1},
        {"type": "produce", "records": []},  # no topic
        {"type": "commit", "id": True},  # an id is a string or an integer: its answer carries it as sent
        {"type": "seek", "id": 1.0},
        ["credit"],
    ):
        with pytest.raises(ValueError):
            wire.CLIENT_MESSAGE.validate_python(bad)
    assert wire.request_id({"id": 7}) == 7 and wire.request_id({"id": True}) is None
    assert wire.request_id({"id": "x" * 201}) is None and wire.request_id("garbage") is None
    message = b"".join(wire.records("t:0:2", {TP("t", 0): 2}, 6, b"[]"))
    assert orjson.loads(message) == {
        "v": 1,
        "type": "records",
        "cursor": "t:0:2",
        "positions": [{"topic": "t", "partition": 0, "offset": 2}],
        "bytes": 6,
        "records": [],
    }
    assert wire.produced("p", b'{"offsets":[]}') == b'{"v":1,"type":"produced","id":"p","offsets":[]}'


@pytest.mark.parametrize("length", [0, 1, 125, 126, 65_535, 65_536, 3 * 1024 * 1024])
def test_a_text_frame_header_is_what_the_websocket_library_reads(length: int) -> None:
    payload = b"x" * length
    reader = StreamReader()
    reader.feed_data(text_frame_header(length) + payload)
    parser = Frame.parse(reader.read_exact, mask=False, max_size=None)
    try:
        next(parser)
    except StopIteration as done:
        frame = done.value
    else:
        raise AssertionError("the header and payload do not make a whole frame")
    assert frame.opcode is Opcode.TEXT and frame.fin and frame.data == payload


async def _allow_all() -> Decision:
    return ALLOW_ALL


class _Idle:
    """A stream with nothing to send, for ``_chunks``."""

    closed = False

    def close(self) -> None:
        self.closed = True

    def ended(self) -> End | None:
        return None


async def test_an_idle_event_stream_polls_once_a_heartbeat_not_in_a_loop() -> None:
    waits: list[int] = []

    async def step(wait_ms: int) -> list[Event]:  # a poll that finds nothing: it waits its time
        waits.append(wait_ms)
        await asyncio.sleep(wait_ms / 1000)
        return []

    heartbeat = SimpleNamespace(stream_heartbeat_ms=200)
    gw = cast(Gateway, SimpleNamespace(settings=heartbeat, metrics=SimpleNamespace(consumed_records=None)))
    beats = 0
    async with aclosing(_chunks(gw, _Idle(), step, partition_cursor)) as chunks:
        async for chunk in chunks:
            assert chunk == KEEP_ALIVE
            beats += 1
            if beats == 3:
                break
    # each poll waits until the heartbeat is due (a second at most), not a few dozen that return at once
    assert len(waits) <= 2 * beats, (len(waits), waits[:10])


class _Topics:
    """A log whose read waits for records that never come, and takes a moment to let go of its
    fetch when it is cancelled (as a Kafka client returns its connection)."""

    def __init__(self) -> None:
        self.reading = asyncio.Event()
        self.dropped = False

    async def read(self, tp: TopicPartition, offset: int, **_: Any) -> PartitionData:
        self.reading.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            self.dropped = True
        raise AssertionError("unreachable")


async def test_a_stream_woken_mid_read_leaves_no_read_behind() -> None:
    topics = _Topics()
    service = StreamService(cast(ConsumerService, None), cast(TopicService, topics))
    stream = service.partition(TP("t", 0), 0, "binary", decide=_allow_all)
    stepping = asyncio.ensure_future(stream.step(max_bytes=100))
    await topics.reading.wait()
    stream.close()  # the client went away
    assert await stepping == []
    assert topics.dropped, "the read went on behind the stream that started it"


class _Flaky:
    """A log unavailable (503) for its first ``failures`` reads; then each read finds one record."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.reads = 0

    async def read(self, tp: TopicPartition, offset: int, **_: Any) -> PartitionData:
        self.reads += 1
        if self.reads <= self.failures:
            raise BackendUnavailable("Kafka is unavailable while fetching.")
        return PartitionData([Record(offset, 0, None, b"v")], offset + 1, 0)


def _partition_stream(topics: _Flaky, retry_ms: int) -> Any:
    limits = StreamLimits(backend_retry_ms=retry_ms)
    service = StreamService(cast(ConsumerService, None), cast(TopicService, topics), limits=limits)
    return service.partition(TP("t", 0), 5, "binary", decide=_allow_all)


async def _until_told(stream: Any, most: int = 100) -> tuple[list[Event], int]:
    """The first events a stream's polls tell (as a transport polls again after nothing), and
    how many polls that took."""
    for polls in range(1, most + 1):
        if events := await stream.step(max_bytes=100):
            return events, polls
    raise AssertionError(f"nothing told in {most} polls")


async def test_a_stream_rides_out_a_backend_unavailable_for_a_moment() -> None:
    topics = _Flaky(failures=3)
    stream = _partition_stream(topics, retry_ms=10_000)
    events, polls = await _until_told(stream)
    [records] = events
    assert isinstance(records, Records) and records.positions == {TP("t", 0): 6}
    assert (polls, topics.reads) == (4, 4)
    topics.failures = 5  # a later failure gets a bound of its own
    events, _ = await _until_told(stream)
    assert isinstance(events[0], Records), events


async def test_a_stream_ends_with_50301_once_the_backend_is_away_longer_than_its_bound() -> None:
    topics = _Flaky(failures=10**9)
    stream = _partition_stream(topics, retry_ms=500)
    started = asyncio.get_running_loop().time()
    events, polls = await _until_told(stream)
    [end] = events
    assert isinstance(end, End) and end.error is not None and end.error.error_code == 50301
    assert polls > 2 and asyncio.get_running_loop().time() - started >= 0.5
    events, polls = await _until_told(_partition_stream(_Flaky(failures=1), retry_ms=0))
    assert polls == 1 and isinstance(events[0], End)  # 0: the first failure ends it
