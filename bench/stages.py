"""Where a REST produce or poll spends its CPU, per record, stage by stage.

    .venv/bin/python bench/stages.py

Runs the gateway's own code for each stage of a 1000-record request on one
core, without HTTP or fsync, next to the in-process work the benchmark uses
as its reference. It explains the REST/in-process ratios of bench/embedded.py:
the stages the in-process path does not have (JSON and base64 both ways) are
per-record work that the REST path cannot skip.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api_schemas.records import parse_produce, render_records
from service.adapters.embedded.log import EmbeddedLog
from service.api.topics import produce_body
from service.core.models import TopicPartition
from service.core.partitioner import Partitioner
from service.core.producer import ProduceService
from service.core.topics import TopicService

ROUNDS = 300
BATCH = 1000


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
        data = timed(stages, "JSON parse (orjson)", orjson.loads, body)
        parsed = timed(
            stages, "base64 decode + records", parse_produce, data, "binary", max_record_bytes=1 << 30
        )
        started = time.perf_counter()
        outcome = await producer.produce(topic, parsed.records, parsed.partitions)
        stages.add("route + encode + write (no fsync)", started)
        timed(stages, "response (offsets JSON)", lambda o: orjson.dumps(produce_body(o)), outcome)
    assert parsed is not None
    started = time.perf_counter()
    for _ in range(ROUNDS):
        await log.append(TopicPartition(topic, 0), parsed.records)
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


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = EmbeddedLog(Path(tmp), flush="never")
        await log.start()
        try:
            for size in (100, 1000):
                await produce(log, size)
            for size in (100, 1000):
                await consume(log, size)
        finally:
            await log.stop()


if __name__ == "__main__":
    asyncio.run(main())
