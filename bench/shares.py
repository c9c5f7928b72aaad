"""Benchmark share groups against a consumer group: one gateway, one run, per log.

    .venv/bin/python bench/shares.py [--records 100000] [--size 100] [--partitions 4] [--rounds 3]
                                     [--max-records 500] [--seconds 3] [--quick]
                                     [--bootstrap host:port | --cluster | --no-kafka]

For the embedded log, then for a Kafka log (Apache Kafka started here, three brokers with
``--cluster``, or ``--bootstrap``), it starts ``brokergate serve``, fills a ``--partitions`` topic with
``--records`` records of ``--size`` bytes, and measures on that one gateway, each way reading
from the start in a group of its own, until it has every record or ``--seconds`` have passed:

  consumer group      a consumer instance of one group per partition (assigned), each
                      long-polling ``GET …/records`` with a byte budget of ``--max-records``
                      records, then committing the last offset it got (``POST …/offsets``): the
                      reference;
  share, N            N share consumers (N = 1, 4, 16) of one share group, each its own client
                      task running the loop the share-group docs show: ``POST …/records?timeout=``
                      with what the previous poll got accepted in the body (the first poll a
                      ``GET``), leaving ``max_records`` and ``max_bytes`` to the gateway;
  share, N, separate  the same, settling with a ``POST …/acknowledgements`` of its own after
                      every poll, before the next ``GET …/records`` (N = 1 and 4);
  share, 4, budgeted  the loop of ``share, 4`` with ``max_records`` (``--max-records``) and the
                      group's byte budget on every poll.

Reported per way: records/s and the gateway's CPU time per record (from /proc), medians of the
rounds; the ratio of records/s to the consumer group's, the median of the per-round ratios (the
machine is shared; rounds even its noise out); polls refused 503 (a share consumer lost every
race for the group's stored state; it polls again) and records delivered twice (none expected).

Clients use the minimal keep-alive HTTP client of ``bench/httpload.py`` and do not decode the
records: they find each record's partition and offset in the answer with a regular expression,
and accept them as ranges of consecutive offsets (as Kafka's share consumer acknowledges).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    BINARY,
    add_log_options,
    cpu_seconds,
    create_topic,
    on_each_log,
    produce_body,
)
from bench.httpload import Connection  # noqa: E402
from service.wire.formats import V2  # noqa: E402

PARTITIONS = 4
SHARE_CONSUMERS = (1, 4, 16)
SEPARATE = (1, 4)  # share consumers that also settle with requests of their own
BUDGETED = 4  # share consumers that also give max_records and max_bytes
POLL_TIMEOUT_MS = 100  # what a poll waits at most for records
REFERENCE = "consumer group"
# Where each record's partition and offset are in a consumer's or a share consumer's answer.
_POSITION = re.compile(rb'"partition":(\d+),"offset":(\d+)')
_FIRST_DELIVERY = re.compile(rb'"delivery_count":1[,}]')

Client = Callable[["Tally"], Coroutine[Any, Any, None]]


def positions(payload: bytes) -> dict[int, list[int]]:
    """The offsets of each partition in a poll's answer."""
    found: dict[int, list[int]] = {}
    for partition, offset in _POSITION.findall(payload):
        found.setdefault(int(partition), []).append(int(offset))
    return found


def accept_body(topic: str, got: dict[int, list[int]]) -> bytes:
    """Acknowledgements accepting ``got``: a range per run of consecutive offsets."""
    acks = []
    for partition, offsets in got.items():
        runs: list[list[int]] = []  # [first, last]
        for offset in sorted(offsets):
            if runs and offset == runs[-1][1] + 1:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset])
        acks += [
            {"topic": topic, "partition": partition, "first_offset": a, "last_offset": b, "type": "accept"}
            for a, b in runs
        ]
    return orjson.dumps({"acknowledgements": acks})


class Tally:
    """What the clients of one measurement were given, until they have ``goal`` records or time is up."""

    def __init__(self, goal: int) -> None:
        self.goal = goal
        self.got = 0
        self.again = 0  # records delivered before (delivery_count > 1)
        self.busy = 0  # polls answered 503
        self.at = 0.0  # when it stopped
        self.done = asyncio.Event()

    def add(self, n: int, again: int = 0) -> None:
        self.got += n
        self.again += again
        if self.got >= self.goal:
            self.stop()

    def stop(self) -> None:
        if not self.done.is_set():
            self.at = time.perf_counter()
            self.done.set()


class Bench:
    """The ways to consume one topic from one gateway, and their figures per round."""

    def __init__(
        self,
        port: int,
        pid: int,
        records: int,
        size: int,
        rounds: int,
        max_records: int,
        seconds: float,
        partitions: int = PARTITIONS,
    ) -> None:
        self.port = port
        self.partitions = partitions  # of the topic; the consumer group has an instance for each
        self.pid = pid  # the gateway's, whose CPU time per record is measured
        self.records = records
        self.size = size
        self.rounds = rounds
        self.max_records = max_records
        self.budget = max_records * size  # the byte budget of every poll: max_records of these records
        self.seconds = seconds
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60)
        self.rates: dict[str, list[float]] = {}  # per way, records/s per round
        self.cpu: dict[str, list[float]] = {}  # per way, the gateway's CPU µs per record, per round
        self.again: dict[str, int] = {}  # per way, records delivered more than once, all rounds
        self.busy: dict[str, int] = {}  # per way, polls answered 503, all rounds
        self.partial: dict[str, int] = {}  # per way, rounds stopped by the clock before the last record

    async def fill(self, topic: str) -> None:
        await create_topic(self.http, topic, self.partitions)
        body = produce_body(os.urandom(self.size), 1000)
        for n in range(self.records // 1000):
            r = await self.http.post(
                f"/topics/{topic}/partitions/{n % self.partitions}",
                content=body,
                headers={"Content-Type": BINARY},
            )
            assert r.status_code == 200, r.text

    async def timed(self, label: str, clients: list[Client]) -> None:
        """Run ``clients`` together until they were given every record or time is up."""
        tally = Tally(self.records)
        cpu = cpu_seconds(self.pid)
        start = time.perf_counter()
        tasks = [asyncio.create_task(client(tally)) for client in clients]
        try:
            await asyncio.wait_for(tally.done.wait(), self.seconds)
        except TimeoutError:
            tally.stop()
            self.partial[label] = self.partial.get(label, 0) + 1
        used = cpu_seconds(self.pid) - cpu  # read at once: what follows is the clients' last requests
        await asyncio.gather(*tasks)
        self.rates.setdefault(label, []).append(tally.got / (tally.at - start))
        self.cpu.setdefault(label, []).append(used / max(tally.got, 1) * 1e6)
        self.again[label] = self.again.get(label, 0) + tally.again
        self.busy[label] = self.busy.get(label, 0) + tally.busy

    async def _instance(self, create: str, body: dict[str, str]) -> str:
        r = await self.http.post(create, json=body, headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        return "/" + str(r.json()["base_uri"]).split("/", 3)[3]

    # --- the reference: a consumer group ---------------------------------------------------------

    async def consumer_group(self, topic: str) -> None:
        group = f"bench-group-{time.monotonic_ns()}"
        paths = []
        for partition in range(self.partitions):
            config = {"format": "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "false"}
            path = await self._instance(f"/consumers/{group}", config)
            body = {"partitions": [{"topic": topic, "partition": partition}]}
            r = await self.http.post(f"{path}/assignments", json=body, headers={"Content-Type": V2})
            assert r.status_code == 204, r.text
            paths.append(path)

        def client(path: str) -> Client:
            async def run(tally: Tally) -> None:
                async with Connection("127.0.0.1", self.port) as conn:
                    query = f"{path}/records?timeout={POLL_TIMEOUT_MS}&max_bytes={self.budget}"
                    poll = conn.build("GET", query, accept=BINARY)
                    while not tally.done.is_set():
                        status, payload = await conn.send(poll)
                        assert status == 200, payload
                        got = positions(payload)
                        tally.add(sum(len(o) for o in got.values()))
                        if got:
                            offsets = [
                                {"topic": topic, "partition": p, "offset": max(o)} for p, o in got.items()
                            ]
                            body = orjson.dumps({"offsets": offsets})
                            status, payload = await conn.send(conn.build("POST", f"{path}/offsets", body, V2))
                            assert status == 200, payload

            return run

        await self.timed(REFERENCE, [client(path) for path in paths])
        for path in paths:
            await self.http.delete(path)

    # --- share consumers ---------------------------------------------------------------------------

    async def share_group(self, topic: str, consumers: int, separate: bool, budgeted: bool = False) -> None:
        label = f"share, {consumers}" + (", separate" * separate) + (", budgeted" * budgeted)
        group = f"bench-share-{consumers}-{int(separate)}-{int(budgeted)}-{time.monotonic_ns()}"
        paths = []
        for _ in range(consumers):
            config = {"format": "binary", "share.auto.offset.reset": "earliest"}
            path = await self._instance(f"/share-groups/{group}/consumers", config)
            r = await self.http.post(
                f"{path}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2}
            )
            assert r.status_code == 204, r.text
            paths.append(path)

        def client(path: str) -> Client:
            async def run(tally: Tally) -> None:
                query = f"{path}/records?timeout={POLL_TIMEOUT_MS}"  # the docs' loop: the gateway's defaults
                if budgeted:
                    query += f"&max_records={self.max_records}&max_bytes={self.budget}"
                async with Connection("127.0.0.1", self.port) as conn:
                    poll = conn.build("GET", query, accept=BINARY)
                    settle = b""  # the acknowledgements of what the last poll got
                    while not tally.done.is_set():
                        if settle and separate:
                            ack = conn.build("POST", f"{path}/acknowledgements", settle, V2)
                            status, payload = await conn.send(ack)
                            if status == 503:  # lost every race for the group's state: again
                                tally.busy += 1
                                continue
                            assert status == 200 and payload == b'{"refused":[]}', payload
                            settle = b""
                        request = conn.build("POST", query, settle, V2, accept=BINARY) if settle else poll
                        status, payload = await conn.send(request)
                        if status == 503:
                            tally.busy += 1
                            continue
                        assert status == 200, payload
                        got = positions(payload)
                        n = sum(len(o) for o in got.values())
                        tally.add(n, again=n - len(_FIRST_DELIVERY.findall(payload)))
                        settle = accept_body(topic, got) if got else b""

            return run

        await self.timed(label, [client(path) for path in paths])
        for path in paths:
            await self.http.delete(path)

    # --- the run ---------------------------------------------------------------------------------------

    async def run(self) -> None:
        topic = f"bench-shares-{os.getpid()}"
        await self.fill(topic)
        ways: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            (REFERENCE, partial(self.consumer_group, topic)),
            *((f"share, {n}", partial(self.share_group, topic, n, False)) for n in SHARE_CONSUMERS),
            *((f"share, {n}, separate", partial(self.share_group, topic, n, True)) for n in SEPARATE),
            (f"share, {BUDGETED}, budgeted", partial(self.share_group, topic, BUDGETED, False, True)),
        ]
        for round_ in range(self.rounds):
            # Turned around every other round, so that no way always follows the same one.
            for _, way in ways if round_ % 2 == 0 else ways[::-1]:
                await way()
        await self.http.aclose()
        self.report([label for label, _ in ways])

    def ratio(self, label: str) -> float:
        """The median of the per-round ratios of ``label``'s records/s to the consumer group's."""
        pairs = zip(self.rates[label], self.rates[REFERENCE], strict=True)
        return statistics.median(a / b for a, b in pairs)

    def report(self, labels: list[str]) -> None:
        print(
            f"{self.records:,} records of {self.size} B on {self.partitions} partitions read from the start "
            f"(or for {self.seconds:g} s), group polls of {self.max_records} records' bytes"
            + f", median of {self.rounds} rounds"
        )
        reference = statistics.median(self.cpu[REFERENCE])
        for label in labels:
            rate, cpu = statistics.median(self.rates[label]), statistics.median(self.cpu[label])
            notes = [
                f"{count} {what}"
                for count, what in (
                    (self.partial.get(label, 0), "rounds timed out"),
                    (self.busy[label], "polls 503"),
                    (self.again[label], "records delivered twice"),
                )
                if count
            ]
            print(
                f"  {label:<20} {rate:>9,.0f} rec/s   x group {self.ratio(label):5.2f}   "
                f"gateway {cpu:6.1f} µs CPU/record ({cpu - reference:+6.1f})"
                + (f"   [{', '.join(notes)}]" if notes else ""),
                flush=True,
            )
        print("acknowledging with a request of its own rather than piggy-backed on the poll:")
        for n in SEPARATE:
            piggy = statistics.median(self.cpu[f"share, {n}"])
            apart = statistics.median(self.cpu[f"share, {n}, separate"])
            print(f"  {n:>2} share consumer(s)   {apart - piggy:+6.1f} µs CPU/record", flush=True)
        docs = statistics.median(self.cpu[f"share, {BUDGETED}"])
        budgeted = statistics.median(self.cpu[f"share, {BUDGETED}, budgeted"])
        print(
            f"giving max_records={self.max_records} and max_bytes={self.budget} rather than the defaults:\n"
            f"  {BUDGETED:>2} share consumer(s)   {budgeted - docs:+6.1f} µs CPU/record",
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-records", type=int, default=500, help="records a poll asks for")
    parser.add_argument("--seconds", type=float, default=3.0, help="the longest one way reads")
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--quick", action="store_true", help="20,000 records, 1 round")
    add_log_options(parser)
    args = parser.parse_args()
    records, rounds = (20_000, 1) if args.quick else (args.records, args.rounds)

    async def measure(gateway: subprocess.Popen[bytes], port: int, bootstrap: str | None) -> None:
        bench = Bench(
            port,
            gateway.pid,
            records,
            args.size,
            rounds,
            args.max_records,
            args.seconds,
            partitions=args.partitions,
        )
        await bench.run()

    await on_each_log(args, measure)


if __name__ == "__main__":
    asyncio.run(main())
