"""Where a REST produce or poll spends its CPU, per record, stage by stage.

    .venv/bin/python bench/stages.py

Runs the gateway's own code for each stage of a 1000-record request on one
core, without HTTP or fsync, next to the in-process work the benchmark uses
as its reference. It explains the REST/in-process ratios of bench/embedded.py:
the stages the in-process path does not have (JSON and base64 both ways) are
per-record work that the REST path cannot skip.

Then the terms of the consume model (bench/consume.py, bench/README.md), per
record of a poll of 1000 x 100 B JSON values: the gateway's side (fetch on each
log, the renderings of each format, values embedded as stored, framings) and
the client's (json.loads of an answer, aiokafka's batch reader, the framings
read back), and what a poll costs a share-partition's state: the state machine's
work and the change's store.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pybase64
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import json_values
from service.adapters.embedded.log import EmbeddedLog
from service.adapters.embedded.log.batch import encode_batch
from service.adapters.embedded.shares_format import change_frame
from service.adapters.embedded.shares_memory import StoredShare, prepare_change
from service.adapters.kafka.records import decode as kafka_decode
from service.adapters.share_states import decode_state, encode_state
from service.api.topics import produce_body
from service.core.acl import GATEWAY
from service.core.json_depth import check_depth
from service.core.models import NewRecord, NewRecords, Record, TopicPartition
from service.core.partitioner import Partitioner
from service.core.producer import ProduceService
from service.core.shares.delivery import AckType
from service.core.shares.state import SharePartition
from service.core.shares.stored import apply_change, change_records, record_rows
from service.core.topics import TopicService
from service.wire.records import parse_produce, render_records
from service.wire.values_body import binary_values

ROUNDS = 300
BATCH = 1000
_FRAME_HEAD = struct.Struct(">qqI")  # offset, timestamp, value length


class Stages:
    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add(self, name: str, started: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + time.perf_counter() - started

    def show(self, title: str, reference: str) -> None:
        print(title)
        rest = 0.0
        for name, total in self.totals.items():
            per_record = total / ROUNDS / BATCH * 1e6
            if name != reference:
                rest += per_record
            print(f"  {name:<34} {per_record:6.2f} us/record")
        ref = self.totals[reference] / ROUNDS / BATCH * 1e6
        print(f"  {'REST total (without HTTP)':<34} {rest:6.2f} us/record   ratio bound {ref / rest:4.2f}\n")


def timed(stages: Stages, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    stages.add(name, started)
    return result


async def produce(log: EmbeddedLog, size: int) -> None:
    body = orjson.dumps({"records": [{"value": base64.b64encode(os.urandom(size)).decode()}] * BATCH})
    topic = f"produce-{size}"
    await log.create_topic(topic, 1, 1, {})
    producer = ProduceService(log, TopicService(log, auto_create=False, default_partitions=1), Partitioner())
    stages = Stages()
    parsed = None
    for _ in range(ROUNDS):
        # as the route reads a body of binary values alone: no JSON parser, values kept as they are
        parsed = timed(
            stages,
            "body to values (split, base64)",
            binary_values,
            body,
            max_record_bytes=1 << 30,
            max_records=None,
        )
        assert parsed is not None
        started = time.perf_counter()
        outcome = await producer.produce(topic, parsed.records, parsed.partitions, who=GATEWAY)
        stages.add("route + encode + write (no fsync)", started)
        timed(stages, "response (offsets JSON)", lambda o: orjson.dumps(produce_body(o)), outcome)
    assert parsed is not None
    records = list(parsed.records)  # an in-process producer's: a NewRecord each
    started = time.perf_counter()
    for _ in range(ROUNDS):
        await log.append(TopicPartition(topic, 0), records)
    stages.add("in-process append (no fsync)", started)
    stages.show(f"produce {BATCH} x {size} B", "in-process append (no fsync)")


async def consume(log: EmbeddedLog, size: int) -> None:
    topic = f"consume-{size}"
    await log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    parsed = parse_produce(
        {"records": [{"value": base64.b64encode(os.urandom(size)).decode()}] * BATCH},
        "binary",
        max_record_bytes=1 << 30,
    )
    await log.append(tp, parsed.records)
    stages = Stages()
    for _ in range(ROUNDS):
        started = time.perf_counter()
        data = await log.fetch({tp: 0}, max_bytes=1 << 30, max_wait_ms=0)
        stages.add("in-process fetch (decode)", started)
        rendered = timed(
            stages, "base64 encode + record dicts", render_records, "binary", [(tp, data[tp].records)]
        )
        timed(stages, "JSON encode (orjson)", orjson.dumps, rendered)
    stages.totals["fetch (same as in-process)"] = stages.totals["in-process fetch (decode)"]
    stages.show(f"poll {BATCH} x {size} B", "in-process fetch (decode)")


def per_record(fn: Callable[[], Any], records: int = BATCH, rounds: int = ROUNDS) -> float:
    """µs per record of ``fn()``, which handles ``records`` records, the best of 3 runs of ``rounds``
    calls (the least disturbed by other processes on a shared machine)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / rounds / records * 1e6


def show(title: str, stages: list[tuple[str, float]]) -> None:
    print(title)
    for name, us in stages:
        print(f"  {name:<58} {us:6.2f} us/record")
    print()


def kafka_batch(values: list[bytes]) -> bytes:
    """A Kafka record batch (v2, uncompressed) of ``values``, as a broker's fetch answer holds it."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset, value in enumerate(values):
        builder.append(offset, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def length_prefixed(records: Sequence[Record]) -> bytes:
    """Records as a length-prefixed binary frame: offset, timestamp, value length, value."""
    pack = _FRAME_HEAD.pack
    return b"".join([pack(r.offset, r.timestamp, len(r.value or b"")) + (r.value or b"") for r in records])


def read_length_prefixed(frame: bytes) -> list[bytes]:
    values, pos, unpack = [], 0, _FRAME_HEAD.unpack_from
    while pos < len(frame):
        _, _, n = unpack(frame, pos)
        pos += _FRAME_HEAD.size
        values.append(frame[pos : pos + n])
        pos += n
    return values


def arrow_batch(records: Sequence[Record]) -> bytes:
    """Records as one Arrow IPC stream holding one record batch (offset, timestamp, value)."""
    batch = pa.record_batch(
        [
            pa.array([r.offset for r in records], pa.int64()),
            pa.array([r.timestamp for r in records], pa.int64()),
            pa.array([r.value for r in records], pa.binary()),
        ],
        names=["offset", "timestamp", "value"],
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def loads_each(values: list[bytes]) -> None:
    for value in values:
        json.loads(value)


def json_text(tp: TopicPartition, records: Sequence[Record]) -> bytes:
    """A json-format poll's answer written as text around the stored values, none parsed (what
    trusting values checked when produced would allow)."""
    head = b'{"topic":' + orjson.dumps(tp.topic) + b',"key":null,"value":'
    after = b',"partition":%d,"offset":' % tp.partition
    return (
        b"["
        + b",".join(
            [
                head
                + (r.value or b"null")
                + after
                + b'%d,"timestamp":%d,"headers":[]}' % (r.offset, r.timestamp)
                for r in records
            ]
        )
        + b"]"
    )


async def consume_paths(log: EmbeddedLog) -> None:
    """A poll of 1000 records of 100 B JSON, stage by stage, gateway side and client side, and
    what the directions of a faster consume would change."""
    topic = "consume-json"
    await log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    values = json_values(100, BATCH)
    await log.append(tp, [NewRecord(None, v) for v in values])
    records = (await log.fetch({tp: 0}, max_bytes=1 << 30, max_wait_ms=0))[tp].records
    polled = [(tp, records)]
    json_answer = orjson.dumps(render_records("json", polled))
    binary_answer = orjson.dumps(render_records("binary", polled))
    batch = kafka_batch(values)
    fetched_columns = [(tp, kafka_decode(batch, 0).records)]
    frame = length_prefixed(records)
    arrow = arrow_batch(records)

    def trusted() -> bytes:
        return orjson.dumps(
            [
                {
                    "topic": topic,
                    "key": None,
                    "value": orjson.Fragment(r.value or b"null"),
                    "partition": 0,
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "headers": [],
                }
                for r in records
            ]
        )

    def aiokafka_read(parse: bool) -> None:
        for record in DefaultRecordBatch(batch):
            if parse:
                json.loads(record.value)

    def arrow_read(parse: bool) -> None:
        table = pa.ipc.open_stream(arrow).read_all()
        got = table.column("value").to_pylist()
        if parse:
            loads_each(got)

    started = time.perf_counter()
    for _ in range(ROUNDS):
        await log.fetch({tp: 0}, max_bytes=1 << 30, max_wait_ms=0)
    fetched = (time.perf_counter() - started) / ROUNDS / BATCH * 1e6
    show(
        f"consume: a poll of {BATCH} x {len(values[0])} B JSON values, the gateway's side",
        [
            ("embedded log: in-process fetch (records read into columns)", fetched),
            (
                "Kafka log: decode a fetched batch (columns and sizes, no Record)",
                per_record(lambda: kafka_decode(batch, 0)),
            ),
            (
                "Kafka log: iterate the same batch (aiokafka, no Record objects)",
                per_record(lambda: aiokafka_read(False)),
            ),
            ("render binary (base64, text)", per_record(lambda: render_records("binary", polled))),
            (
                "  the same from a Kafka fetch's columns",
                per_record(lambda: render_records("binary", fetched_columns)),
            ),
            (
                "render json from a Kafka fetch's columns (checked, text)",
                per_record(lambda: render_records("json", fetched_columns)),
            ),
            (
                "render json (each value checked, text around it)",
                per_record(lambda: render_records("json", polled)),
            ),
            (
                "  of which the check (orjson.loads of each value)",
                per_record(lambda: loads_with(orjson.loads, values)),
            ),
            (
                "render json, values trusted (dicts of Fragments, orjson)",
                per_record(trusted),
            ),
            ("render json, values trusted, as text (no dict)", per_record(lambda: json_text(tp, records))),
            ("frame: length-prefixed binary", per_record(lambda: length_prefixed(records))),
            ("frame: Arrow IPC record batch", per_record(lambda: arrow_batch(records))),
        ],
    )
    show(
        "consume: the same poll, the client's side (without HTTP)",
        [
            ("json.loads of each 100 B value alone", per_record(lambda: loads_each(values))),
            ("json format: json.loads of the answer", per_record(lambda: json.loads(json_answer))),
            (
                "binary format: json.loads of the answer, b64decode + json.loads each value",
                per_record(
                    lambda: [json.loads(base64.b64decode(r["value"])) for r in json.loads(binary_answer)]
                ),
            ),
            ("aiokafka: iterate the batch, no parse", per_record(lambda: aiokafka_read(False))),
            ("aiokafka: iterate the batch, json.loads each value", per_record(lambda: aiokafka_read(True))),
            (
                "length-prefixed frame: split, json.loads each value",
                per_record(lambda: loads_each(read_length_prefixed(frame))),
            ),
            ("Arrow IPC: read, values to bytes, json.loads each", per_record(lambda: arrow_read(True))),
            ("Arrow IPC: read, values to bytes, no parse", per_record(lambda: arrow_read(False))),
        ],
    )


def loads_with(loads: Callable[[bytes], Any], values: list[bytes]) -> None:
    for value in values:
        loads(value)


def produce_paths() -> None:
    """Where a body of 1000 x 100 B binary values goes, per record: read without a JSON parser
    (``binary_values``) as the route reads it, against the general way any other body takes."""
    encoded = [base64.b64encode(v).decode() for v in json_values(100, BATCH)]
    decoded = [pybase64.b64decode(v) for v in encoded]
    body = orjson.dumps({"records": [{"value": v} for v in encoded]})
    data = orjson.loads(body)
    records = [NewRecord(None, v, timestamp=0) for v in decoded]  # through the encoder's loop of any other
    show(
        f"produce: a request's {BATCH} x 100 B values",
        [
            ("values alone: body to values (split, base64)", per_record(lambda: values_body(body))),
            ("  of which the split at quotes", per_record(lambda: body.split(b'"'))),
            (
                "  of which base64, pybase64 with validate by position",
                per_record(lambda: [pybase64.b64decode(v, None, True) for v in encoded]),
            ),
            (
                "  (base64 with validate=True as a keyword)",
                per_record(lambda: [pybase64.b64decode(v, validate=True) for v in encoded]),
            ),
            ("the general way: depth measure", per_record(lambda: check_depth(body, 64))),
            ("  JSON parse (orjson)", per_record(lambda: orjson.loads(body))),
            (
                "  records (parse_produce: base64, values alone)",
                per_record(lambda: parse_produce(data, "binary", max_record_bytes=1 << 30)),
            ),
            (
                "  a NewRecord for each decoded value (no more)",
                per_record(lambda: [NewRecord(None, v) for v in decoded]),
            ),
            (
                "the log's encoder: values alone",
                per_record(lambda: encode_batch(NewRecords(list(decoded)), 0)),
            ),
            ("  the same through the loop of any other", per_record(lambda: encode_batch(records, 0))),
        ],
    )


def values_body(body: bytes) -> None:
    assert binary_values(body, max_record_bytes=1 << 30, max_records=None) is not None


def share_stores(data_dir: Path, in_flight: int = 2000, poll: int = 500) -> None:
    """What a poll of ``poll`` records costs a share-partition's state, ``in_flight`` records in
    flight, per record: the state machine's work (the poll's new records acquired, then accepted
    together, as a piggy-backed acknowledgement settles them on the next poll), and its change
    stored (``change_json``, checked and encoded, framed, made to the embedded coordinator's
    stored state), with the rest of the window in runs of a poll each, or fragmented (every record
    a run of its own: their locks all end apart); then the fdatasync of a change's frame."""
    member = "m-" + "0" * 36
    tp = TopicPartition("t", 0)
    fd = os.open(data_dir / "shares.journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def durable(payload: bytes) -> None:
        os.write(fd, payload)
        os.fdatasync(fd)

    def window(fragmented: bool) -> tuple[Callable[[], Any], Callable[[], Any]]:
        sp = SharePartition(0)
        held = in_flight - poll
        clock = [10**6]  # every lock of the window outlasts the polls measured
        for n in range(held if fragmented else 1):
            sp.acquire(
                member, clock[0] + n, max_records=1 if fragmented else held, log_offsets=range(n, held)
            )
        stored = StoredShare(encode_state(sp.to_json(), "p"), 0)
        sp.stored()

        def settle() -> None:  # one poll: its new records acquired, then accepted
            clock[0] += 1
            [(first, last, _)], _ = sp.acquire_runs(
                member, clock[0], max_records=poll, log_offsets=range(sp.end, sp.end + poll)
            )
            sp.acknowledge(member, range(first, last + 1), AckType.ACCEPT, clock[0])

        def store() -> bytes:
            settle()
            change, data = prepare_change(sp.change_json(), "p")
            stored.apply(change, 1)
            sp.stored()
            return change_frame("g", [(tp, data, 1)])

        return settle, store

    def zookeeper(rows: bool) -> Callable[[], Any]:
        """A poll on the ZooKeeper coordinator, which keeps nothing between polls: the state read,
        the poll's records acquired and accepted, the change made to the state read again
        (``change_by_whole_states``) and the whole state written, in runs or a row per record."""
        change = change_records if rows else apply_change
        first = SharePartition(0)
        first.acquire(member, 10**6, max_records=in_flight - poll, log_offsets=range(in_flight - poll))
        held, clock = [encode_state(record_rows(first.to_json()) if rows else first.to_json(), "p")], [10**6]

        def write() -> None:
            sp, clock[0] = SharePartition.from_json(decode_state(held[0], "p")), clock[0] + 1
            [(a, b, _)], _ = sp.acquire_runs(
                member, clock[0], max_records=poll, log_offsets=range(sp.end, sp.end + poll)
            )
            sp.acknowledge(member, range(a, b + 1), AckType.ACCEPT, clock[0])
            held[0] = encode_state(change(decode_state(held[0], "p"), sp.change_json()), "p")

        return write

    runs_settle, runs_store = window(False)
    parts_settle, parts_store = window(True)
    try:
        show(
            f"share groups: a {poll}-record poll, {in_flight} records in flight, per record of the poll",
            [
                ("acquired, then accepted (the window in runs)", per_record(runs_settle, poll, 50)),
                ("  and its change stored: checked, framed, made", per_record(runs_store, poll, 50)),
                ("acquired, then accepted (the window fragmented)", per_record(parts_settle, poll, 20)),
                ("  and its change stored: checked, framed, made", per_record(parts_store, poll, 20)),
                ("fdatasync of a change's frame", per_record(lambda: durable(runs_store()), poll, 50)),
                ("ZooKeeper: its poll, the state written in runs", per_record(zookeeper(False), poll, 20)),
                ("  the same, written a row per record", per_record(zookeeper(True), poll, 20)),
            ],
        )
    finally:
        os.close(fd)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = EmbeddedLog(Path(tmp), flush="never")
        await log.start()
        try:
            for size in (100, 1000):
                await produce(log, size)
            for size in (100, 1000):
                await consume(log, size)
            await consume_paths(log)
            produce_paths()
        finally:
            await log.stop()
        share_stores(Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
