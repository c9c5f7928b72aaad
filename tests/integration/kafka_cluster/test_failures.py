"""What users are promised, measured on a three-broker Kafka cluster while brokers fail.

Real HTTP gateways on the cluster, with Kafka's defaults (idempotent producer, acks=all):
a leader killed under load, a rolling restart under producers and a consumer group, a frozen
broker and the whole cluster stopped, two brokers of three gone (below ``min.insync.replicas``),
a partition left without a leader past the request timeout, and a broker just gone while topics
are described. Topics created without a replication factor take the controller's default.
Every record a producer is told was stored (200 with offsets) must be in the topic exactly once,
where the gateway said; every other answer must be a retryable 503 with ``Retry-After``; nothing
may be a 500 or hang. What the tests count (503s, duplicates) is printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from deploy.local.kafka_cluster import KafkaCluster
from tests.conftest import KAFKA_TEST_SETTINGS, RunningGateway, running_gateway
from tests.helpers import STRING, V2, create_topic
from tests.stream_client import send, socket_url

# How long anything the tests wait for may take, at most, on a busy 2-core machine.
RECOVERY_S = 60.0
CLIENT_TIMEOUT_S = 20.0  # a request the gateway has not answered by then has hung
STREAM_CREDIT = 200  # records a WebSocket client lets the gateway send ahead
POLL_MAX_BYTES = 1800  # a long-poll's answer: at most 300 records (ids are 6 bytes or more)
HELD = 300  # so the most records a member holds that it has not committed


def gateway_settings(cluster: KafkaCluster) -> dict[str, object]:
    return {
        "log": cluster.url,
        "schema_registry_topic": f"_schemas-{uuid.uuid4().hex[:12]}",
        **KAFKA_TEST_SETTINGS,
    }


@asynccontextmanager
async def gateway_on(
    cluster: KafkaCluster, tmp_path: Path, **overrides: object
) -> AsyncIterator[RunningGateway]:
    async with running_gateway(tmp_path / "data", **{**gateway_settings(cluster), **overrides}) as gw:
        gw.client.timeout = httpx.Timeout(CLIENT_TIMEOUT_S)
        yield gw


def unavailable(response: httpx.Response) -> bool:
    """Whether ``response`` is the retryable refusal promised: 503, ``Retry-After``, Confluent's body."""
    if response.status_code != 503 or not response.headers.get("retry-after", "").strip():
        return False
    body = response.json()
    return isinstance(body.get("error_code"), int) and isinstance(body.get("message"), str)


async def until(check: Callable[[], Awaitable[bool]], what: str, limit: float = RECOVERY_S) -> float:
    """Await ``check()`` until it holds (every 0.2 s); the seconds it took. Fails after ``limit``."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > limit:
            raise AssertionError(f"{what}: not within {limit:g} s")
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def in_sync(cluster: KafkaCluster, topic: str, partitions: int, node_id: int | None = None) -> bool:
    """Whether every partition has a leader and its ISR holds ``node_id`` (every replica if None)."""
    try:
        states = [await cluster.partition(topic, p) for p in range(partitions)]
    except (RuntimeError, LookupError):
        return False
    return all(
        s.leader >= 0 and (node_id in s.isr if node_id is not None else set(s.isr) == set(s.replicas))
        for s in states
    )


@dataclass
class Producers:
    """HTTP producers writing records whose values are unique ids, keeping every answer.

    ``acked`` maps the id of each record a 200 stored to where the gateway said it is;
    ``unsure`` holds the ids of requests answered 503 (at-least-once: maybe stored, at most
    once); ``wrong`` every answer that was neither (a 500, a 503 without Retry-After, a hang).
    """

    client: httpx.AsyncClient
    topic: str
    partitions: int
    workers: int = 4
    batch: int = 5
    acked: dict[str, tuple[int, int]] = field(default_factory=dict)
    unsure: set[str] = field(default_factory=set)
    wrong: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def _worker(self, worker: int) -> None:
        for n in itertools.count():
            if self.stop.is_set():
                return
            partition = (worker + n) % self.partitions
            ids = [f"w{worker}-{n}-{i}" for i in range(self.batch)]
            try:
                r = await self.client.post(
                    f"/topics/{self.topic}/partitions/{partition}",
                    json={"records": [{"value": i} for i in ids]},
                    headers={"Content-Type": STRING},
                )
            except httpx.TimeoutException:
                self.wrong.append(f"no answer within {CLIENT_TIMEOUT_S} s")
                self.unsure.update(ids)
                continue
            self.statuses[r.status_code] += 1
            if r.status_code == 200:
                offsets = r.json()["offsets"]
                if len(offsets) != len(ids) or any(o["error_code"] is not None for o in offsets):
                    self.wrong.append(f"200 with {offsets}")
                    continue
                for i, o in zip(ids, offsets, strict=True):
                    self.acked[i] = (o["partition"], o["offset"])
            elif unavailable(r):
                self.unsure.update(ids)
                await asyncio.sleep(min(float(r.headers["retry-after"]), 0.5))
            else:
                self.wrong.append(f"{r.status_code} {r.headers.get('retry-after')!r} {r.text}")
                self.unsure.update(ids)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Producers]:
        tasks = [asyncio.create_task(self._worker(w)) for w in range(self.workers)]
        try:
            yield self
        finally:
            self.stop.set()
            await asyncio.gather(*tasks)

    async def until_acked(self, more: int) -> None:
        """Return once ``more`` records more than now have been acknowledged."""
        target = len(self.acked) + more
        await until(lambda: _true(len(self.acked) >= target), f"{more} more records acknowledged")


async def _true(value: bool) -> bool:
    return value


async def read_topic(cluster: KafkaCluster, topic: str, partitions: int) -> dict[str, list[tuple[int, int]]]:
    """Every record of ``topic``, read by Kafka's own protocol (a native aiokafka consumer):
    id → where each copy of it is."""
    consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    await consumer.start()
    found: dict[str, list[tuple[int, int]]] = {}
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        async with asyncio.timeout(RECOVERY_S):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                    for record in records:
                        found.setdefault(record.value.decode(), []).append((tp.partition, record.offset))
    finally:
        await consumer.stop()
    return found


def check_acknowledged(producers: Producers, found: dict[str, list[tuple[int, int]]]) -> None:
    """Every acknowledged record exactly once, where the gateway said; any other at most once."""
    lost = [i for i in producers.acked if i not in found]
    assert not lost, f"{len(lost)} acknowledged records missing, e.g. {lost[:5]}"
    moved = {i: found[i] for i, at in producers.acked.items() if found[i] != [at]}
    assert not moved, f"acknowledged records duplicated or elsewhere: {list(moved.items())[:5]}"
    twice = {i: found[i] for i in producers.unsure if len(found.get(i, [])) > 1}
    assert not twice, f"records stored twice: {list(twice.items())[:5]}"
    strangers = set(found) - set(producers.acked) - producers.unsure
    assert not strangers, f"records nobody sent: {sorted(strangers)[:5]}"


async def test_a_killed_leader_loses_no_acknowledged_record(cluster: KafkaCluster, tmp_path: Path) -> None:
    topic = f"kill-{uuid.uuid4().hex[:8]}"
    async with gateway_on(cluster, tmp_path) as gw:
        await create_topic(gw.client, topic, 2)
        await until(lambda: in_sync(cluster, topic, 2), "the topic fully replicated")
        victim = await cluster.leader_of(topic, 0)
        producers = Producers(gw.client, topic, 2)
        async with producers.running():
            await producers.until_acked(100)
            killed_at = time.monotonic()
            await asyncio.to_thread(cluster.broker(victim).kill)
            await until(lambda: _moved(cluster, topic, victim), "a new leader elected")
            elected = time.monotonic() - killed_at
            await producers.until_acked(200)  # and writes go on through the new leader
            recovered = time.monotonic() - killed_at
        found = await read_topic(cluster, topic, 2)
    print(
        f"\nkill -9 of leader {victim}: new leader after {elected:.1f} s, writes acknowledged again "
        f"after {recovered:.1f} s; answers {dict(producers.statuses)}, {len(producers.acked)} records "
        f"acknowledged, {len(producers.unsure)} refused (of which stored: "
        f"{sum(1 for i in producers.unsure if i in found)})"
    )
    assert not producers.wrong, producers.wrong[:5]
    check_acknowledged(producers, found)


async def _moved(cluster: KafkaCluster, topic: str, old: int) -> bool:
    leader = await cluster.leader_of(topic, 0)
    return leader not in (old, -1)


@dataclass
class Group:
    """An HTTP consumer group of two members: one long-polling, one on a WebSocket stream.

    ``delivered`` counts every id either member was given; ``committed`` is every sample of the
    group's committed offsets; ``answers`` counts the long-poller's and sampler's statuses, and
    ``stream_errors`` the stream's error messages and reconnects; ``wrong`` what broke a promise.
    """

    client: httpx.AsyncClient
    topic: str
    partitions: int
    name: str = field(default_factory=lambda: f"g-{uuid.uuid4().hex[:8]}")
    delivered: Counter[str] = field(default_factory=Counter)
    committed: list[dict[int, int]] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    stream_errors: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    bases: list[str] = field(default_factory=list)

    async def join(self) -> None:
        for _ in range(2):
            body = {
                "format": "string",
                "auto.offset.reset": "earliest",
                "consumer.instance.timeout.ms": 60000,
            }
            r = await self.client.post(f"/consumers/{self.name}", json=body, headers={"Content-Type": V2})
            assert r.status_code == 200, r.text
            base = r.json()["base_uri"]
            r = await self.client.post(
                f"{base}/subscription", json={"topics": [self.topic]}, headers={"Content-Type": V2}
            )
            assert r.status_code == 204, r.text
            self.bases.append(base)

    def _answer(self, who: str, r: httpx.Response) -> bool:
        """Count ``r``; True if it is a 200, note it if it is neither that nor a proper 503."""
        self.answers[f"{who} {r.status_code}"] += 1
        if r.status_code == 200:
            return True
        if not unavailable(r):
            self.wrong.append(f"{who}: {r.status_code} {r.headers.get('retry-after')!r} {r.text}")
        return False

    async def long_poll(self) -> None:
        base = self.bases[0]
        while not self.stop.is_set():
            r = await self.client.get(
                f"{base}/records",
                params={"timeout": 1000, "max_bytes": POLL_MAX_BYTES},
                headers={"Accept": STRING},
            )
            if not self._answer("poll", r):
                await asyncio.sleep(0.5)
                continue
            records = r.json()
            if not records:
                continue
            self.delivered.update(rec["value"] for rec in records)
            last: dict[int, int] = {}
            for rec in records:
                last[rec["partition"]] = max(rec["offset"], last.get(rec["partition"], -1))
            offsets = [{"topic": self.topic, "partition": p, "offset": o} for p, o in last.items()]
            r = await self.client.post(
                f"{base}/offsets", json={"offsets": offsets}, headers={"Content-Type": V2}
            )
            self._answer("commit", r)

    async def stream(self) -> None:
        cursor: str | None = None
        while not self.stop.is_set():
            query = {"cursor": cursor} if cursor else {}
            try:
                async with connect(socket_url(self.bases[1], **query), max_size=None) as ws:
                    await send(ws, "credit", records=STREAM_CREDIT, bytes=1 << 20)
                    while not self.stop.is_set():
                        try:
                            async with asyncio.timeout(1):
                                message: dict[str, Any] = json.loads(await ws.recv())
                        except TimeoutError:
                            continue
                        kind = message["type"]
                        if kind == "records":
                            self.delivered.update(rec["value"] for rec in message["records"])
                            cursor = message["cursor"]
                            await send(ws, "commit", id=cursor)
                            await send(ws, "credit", records=len(message["records"]), bytes=message["bytes"])
                        elif kind in ("rebalance", "seeked"):
                            cursor = message.get("cursor", cursor)
                        elif kind == "error":
                            self.stream_errors[f"error {message.get('error_code')}"] += 1
                            if message.get("error_code", 0) // 100 == 500:
                                self.wrong.append(f"stream: {message}")
                        elif kind == "end":
                            self.stream_errors[
                                f"end {message.get('reason')} {message.get('error_code')}"
                            ] += 1
                            if message.get("error_code", 0) // 100 == 500:
                                self.wrong.append(f"stream: {message}")
                            cursor = message.get("cursor", cursor)
                            break
            except (ConnectionClosed, OSError) as exc:
                self.stream_errors[f"closed {type(exc).__name__}"] += 1
                await asyncio.sleep(0.5)

    async def sample_commits(self) -> None:
        partitions = [{"topic": self.topic, "partition": p} for p in range(self.partitions)]
        while not self.stop.is_set():
            r = await self.client.request(
                "GET",
                f"{self.bases[0]}/offsets",
                json={"partitions": partitions},
                headers={"Content-Type": V2},
            )
            if self._answer("offsets", r):
                self.committed.append({o["partition"]: o["offset"] for o in r.json()["offsets"]})
            await asyncio.sleep(0.2)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Group]:
        tasks = [asyncio.create_task(job()) for job in (self.long_poll, self.stream, self.sample_commits)]
        try:
            yield self
        finally:
            self.stop.set()
            await asyncio.gather(*tasks)


async def test_a_rolling_restart_loses_nothing_and_commits_never_go_back(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = f"roll-{uuid.uuid4().hex[:8]}"
    async with gateway_on(cluster, tmp_path) as gw:
        await create_topic(gw.client, topic, 3)
        await until(lambda: in_sync(cluster, topic, 3), "the topic fully replicated")
        producers = Producers(gw.client, topic, 3, workers=2)
        group = Group(gw.client, topic, 3)
        await group.join()
        restarts: list[float] = []
        async with group.running():
            async with producers.running():
                await producers.until_acked(50)
                for node_id, node in cluster.brokers.items():
                    began = time.monotonic()
                    await asyncio.to_thread(node.restart)
                    back = functools.partial(in_sync, cluster, topic, 3, node_id)
                    await until(back, f"broker {node_id} back in sync")
                    restarts.append(time.monotonic() - began)
                    await producers.until_acked(30)
            # The producers' last requests are answered now: every acknowledged record is known
            # (a check made before them missed the records acknowledged after it).
            await until(
                lambda: _true(set(producers.acked) <= set(group.delivered)),
                "every acknowledged record delivered",
            )
        found = await read_topic(cluster, topic, 3)
    duplicates = sum(n - 1 for n in group.delivered.values())
    print(
        f"\nrolling restart ({', '.join(f'{s:.1f}' for s in restarts)} s per broker): produce "
        f"{dict(producers.statuses)}, {len(producers.acked)} acknowledged; group {dict(group.answers)}, "
        f"stream {dict(group.stream_errors)}; {sum(group.delivered.values())} deliveries of "
        f"{len(group.delivered)} records, {duplicates} duplicates; {len(group.committed)} commit samples"
    )
    assert not producers.wrong, producers.wrong[:5]
    assert not group.wrong, group.wrong[:5]
    # A broker away for a restart is a brief failure the stream rides out (stream_backend_retry_ms)
    # rather than ending with 50301 and making its client reconnect.
    ends = sum(n for what, n in group.stream_errors.items() if what.startswith("end error"))
    assert ends <= 1, group.stream_errors
    check_acknowledged(producers, found)
    missed = set(producers.acked) - set(group.delivered)
    assert not missed, f"{len(missed)} acknowledged records never delivered"
    for earlier, later in itertools.pairwise(group.committed):
        for partition, offset in earlier.items():
            assert later.get(partition, offset) >= offset, (
                f"commit went back on {partition}: {earlier} {later}"
            )
    assert group.committed and any(o > 0 for o in group.committed[-1].values())
    # A record comes again only to a member that lost its place (a stream resumed from an older
    # cursor, a poll answered whose commit was not): at most what a member holds uncommitted, per
    # member and restart.
    assert duplicates <= 3 * 2 * HELD, duplicates


@dataclass
class Watch:
    """One producer writing one record at a time and a probe of ``/readyz``, side by side,
    keeping every answer (``produce``, ``ready``: status → count) and what broke a promise."""

    client: httpx.AsyncClient
    topic: str
    produce: Counter[int] = field(default_factory=Counter)
    ready: Counter[int] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    last_ready: tuple[float, httpx.Response] | None = None  # when it was asked, and the answer
    last_produce: tuple[float, httpx.Response] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def _check(self, what: str, r: httpx.Response) -> None:
        if r.status_code != 200 and not unavailable(r):
            self.wrong.append(f"{what}: {r.status_code} {r.headers.get('retry-after')!r} {r.text}")

    async def _produce(self) -> None:
        for n in itertools.count():
            if self.stop.is_set():
                return
            asked = time.monotonic()
            r = await self.client.post(
                f"/topics/{self.topic}/partitions/0",
                json={"records": [{"value": f"p{n}"}]},
                headers={"Content-Type": STRING},
            )
            self.produce[r.status_code] += 1
            self.last_produce = asked, r
            self._check("produce", r)
            if r.status_code != 200:
                await asyncio.sleep(min(float(r.headers.get("retry-after", 1)), 0.5))

    async def _probe(self) -> None:
        while not self.stop.is_set():
            asked = time.monotonic()
            r = await self.client.get("/readyz", params={"backend": "log"})
            self.ready[r.status_code] += 1
            self.last_ready = asked, r
            self._check("readyz", r)
            await asyncio.sleep(0.2)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Watch]:
        tasks = [asyncio.create_task(self._produce()), asyncio.create_task(self._probe())]
        try:
            yield self
        finally:
            self.stop.set()
            await asyncio.gather(*tasks)

    async def answers(self, produce: int, ready: int) -> float:
        """Once a produce and a probe asked from now on answer ``produce`` and ``ready``: how long it took."""
        since = time.monotonic()

        async def both() -> bool:
            return all(
                last is not None and last[0] >= since and last[1].status_code == status
                for last, status in ((self.last_produce, produce), (self.last_ready, ready))
            )

        return await until(both, f"produce answering {produce} and /readyz {ready}")

    def clear(self) -> tuple[dict[int, int], dict[int, int]]:
        """The answers counted so far, forgotten."""
        counted = dict(self.produce), dict(self.ready)
        self.produce.clear()
        self.ready.clear()
        return counted


async def test_a_frozen_broker_and_a_stopped_cluster_give_503_then_recover(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = f"freeze-{uuid.uuid4().hex[:8]}"
    async with gateway_on(cluster, tmp_path) as gw:
        await create_topic(gw.client, topic, 1)
        await until(lambda: in_sync(cluster, topic, 1), "the topic fully replicated")
        frozen = cluster.broker(await cluster.leader_of(topic, 0))
        async with Watch(gw.client, topic).running() as watch:
            await watch.answers(200, 200)
            watch.clear()
            frozen.pause()  # the partition's leader: writes wait for Kafka to fence it and elect another
            try:
                healed = await watch.answers(200, 200)  # the other brokers serve: the gateway is ready
            finally:
                frozen.resume()
            frozen_answers = watch.clear()

            await asyncio.to_thread(cluster.stop_all)
            await watch.answers(503, 503)  # nothing to write to: not ready, and it says why
            assert watch.last_ready is not None
            down = watch.last_ready[1].json()
            await asyncio.to_thread(cluster.start_all)
            back = await watch.answers(200, 200)  # by itself: the same gateway, no restart
            stopped_answers = watch.clear()
    print(
        f"\nfrozen leader: writes and readiness back after {healed:.1f} s, (produce, readyz) answers "
        f"{frozen_answers}; whole cluster stopped then started: {stopped_answers}, back {back:.1f} s "
        f"after the start; /readyz said {down}"
    )
    assert not watch.wrong, "\n".join(watch.wrong)
    assert stopped_answers[0].get(503) and stopped_answers[1].get(503)
    assert "Kafka" in down["message"]


async def test_below_min_insync_replicas_produce_is_refused_not_acknowledged(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = f"isr-{uuid.uuid4().hex[:8]}"
    async with gateway_on(cluster, tmp_path) as gw:
        await create_topic(gw.client, topic, 1)
        await until(lambda: in_sync(cluster, topic, 1), "the topic fully replicated")
        url = f"/topics/{topic}/partitions/0"
        headers = {"Content-Type": STRING}
        r = await gw.client.post(url, json={"records": [{"value": "before"}]}, headers=headers)
        assert r.status_code == 200, r.text
        gone = list(cluster.brokers.values())[:2]
        await asyncio.gather(*(asyncio.to_thread(n.stop) for n in gone))
        refused = await asyncio.gather(
            *(
                gw.client.post(url, json={"records": [{"value": f"below-{i}"}]}, headers=headers)
                for i in range(3)
            )
        )
        for r in refused:
            assert unavailable(r), (r.status_code, r.headers, r.text)
            assert "in-sync replicas" in r.json()["message"], r.text
        await asyncio.gather(*(asyncio.to_thread(n.start) for n in gone))

        async def writes() -> bool:
            r = await gw.client.post(url, json={"records": [{"value": "after"}]}, headers=headers)
            return r.status_code == 200

        back = await until(writes, "writes after the brokers came back")
        print(f"\nbelow min.insync.replicas: {refused[0].json()}; writes again {back:.1f} s after")


async def test_a_partition_without_a_leader_past_the_timeout_is_503_then_writable(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    # aiokafka fails a batch it has sent once, when its partition has had no leader for the
    # request timeout, with the sequence numbers it took: the broker would refuse every later
    # batch of that producer to the partition as out of order, unless the gateway starts anew.
    topic = f"orphan-{uuid.uuid4().hex[:8]}"
    async with gateway_on(cluster, tmp_path) as gw:
        cid = (await gw.client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        body = {"topic_name": topic, "partitions_count": 1, "replication_factor": 1}
        r = await gw.client.post(f"/v3/clusters/{cid}/topics", json=body)
        assert r.status_code == 201, r.text
        url = f"/topics/{topic}/partitions/0"
        headers = {"Content-Type": STRING}

        async def produce(value: str) -> httpx.Response:
            return await gw.client.post(url, json={"records": [{"value": value}]}, headers=headers)

        assert (await produce("first")).status_code == 200
        only = cluster.broker(await cluster.leader_of(topic, 0))  # its one replica
        only.pause()
        in_flight = asyncio.create_task(produce("in flight"))
        await asyncio.sleep(1)  # sent to the frozen broker, which has not answered
        assert only.pid is not None
        os.kill(only.pid, signal.SIGKILL)  # dies frozen: kill() would thaw it first, and it might answer
        await asyncio.to_thread(only.kill)
        r = await in_flight
        assert unavailable(r), (r.status_code, r.text)
        await until(lambda: _no_leader(cluster, topic), "the partition without a leader")
        # Past the request timeout already; the producer's next metadata refresh (its retries ask
        # every 100 ms) shows it no leader, and it fails the batch: nothing outside can see that.
        await asyncio.sleep(1)
        await asyncio.to_thread(only.start)
        answers: list[httpx.Response] = []

        async def writes() -> bool:
            answers.append(await produce("after"))
            return answers[-1].status_code == 200

        back = await until(writes, "writes once the partition's broker is back")
        print(
            f"\npartition without a leader: writes again {back:.1f} s after its broker, answers "
            f"{Counter(a.status_code for a in answers)}"
        )
        wrong = [f"{a.status_code} {a.text}" for a in answers if a.status_code != 200 and not unavailable(a)]
        assert not wrong, wrong


async def _no_leader(cluster: KafkaCluster, topic: str) -> bool:
    return await cluster.leader_of(topic, 0) == -1


async def test_a_topic_without_a_replication_factor_takes_the_controllers_default(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    # The cluster's default.replication.factor (3) is the controller's alone, as Kafka 5.0 will
    # have it: a broker asked for its own would say 1, Kafka's default.
    async with gateway_on(cluster, tmp_path) as gw:
        cid = (await gw.client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        topic = f"default-rf-{uuid.uuid4().hex[:8]}"
        body = {"topic_name": topic, "partitions_count": 2}  # no replication_factor
        r = await gw.client.post(f"/v3/clusters/{cid}/topics", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["replication_factor"] == 3, r.text
        # the broker asked may learn of the new topic from the controller a moment later
        await until(lambda: in_sync(cluster, topic, 2), f"{topic} in every broker's metadata", 10)
        states = [await cluster.partition(topic, p) for p in range(2)]
    assert all(len(state.replicas) == 3 for state in states), states


async def test_a_broker_just_gone_costs_no_topic_lookup(cluster: KafkaCluster, tmp_path: Path) -> None:
    # Every describe asks the cluster again (no cache): its Metadata and DescribeConfigs requests
    # must reach a broker that is up, although the dead one is still in the client's broker list.
    topic = f"gone-{uuid.uuid4().hex[:8]}"
    async with gateway_on(cluster, tmp_path, kafka_metadata_max_age_ms=0) as gw:
        await create_topic(gw.client, topic, 1)
        await until(lambda: in_sync(cluster, topic, 1), "the topic fully replicated")
        leader = await cluster.leader_of(topic, 0)
        victim = next(n for n in cluster.brokers if n != leader)  # the topic keeps its leader
        await asyncio.to_thread(cluster.broker(victim).kill)
        answers: Counter[int] = Counter()
        wrong: list[str] = []
        for _ in range(30):
            r = await gw.client.get(f"/topics/{topic}")
            answers[r.status_code] += 1
            if r.status_code != 200:
                wrong.append(f"{r.status_code} {r.text}")
            elif r.json()["configs"].get("min.insync.replicas") != "2":
                wrong.append(f"configs {r.json()['configs']}")
    print(f"\ntopic described 30 times just after broker {victim} died: {dict(answers)}")
    assert not wrong, wrong[:5]
