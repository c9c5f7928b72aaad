"""Three stateless replicas behind nginx, on the local cluster of ``deploy/cluster.py``.

One cluster (Apache Kafka, ZooKeeper, Redis with an append-only file, three replicas and the
balancer) is started for the module, secure as a shared deployment is: HTTPS on every hop
(a test CA), HTTP Basic authentication, ACLs enforced, an audit trail per replica, and the
replicas signed in to ZooKeeper. Clients sign in as the super user and trust the CA, except
where a test says otherwise. Any replica serves any request of any consumer instance; a
kill -9 of a replica in the middle of consumption loses no instance and no record; an
Idempotency-Key retried through another replica stores once; a Redis restart keeps every
instance (the cluster's Redis persists them) and the replicas recover by themselves; a
replica restarted after a kill -9 rejoins; a request through the balancer without
credentials is refused, one without the ACLs it needs is refused, and a binding made through
one replica holds on the others. The last tests run the script itself, as a user does, and check that
it leaves no process behind.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from deploy.local.balancer import UPSTREAM_HEADER
from deploy.local.cluster import STATE_FILE, ClusterSpec, LocalCluster
from deploy.local.process import alive
from deploy.local.security import ClusterSecurity
from service.client import V2, ClientError, Consumer, GatewayClient, Record
from service.core.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
# Short timeouts, so that failures are noticed quickly.
FAST = {
    "BROKERGATE_KAFKA_REQUEST_TIMEOUT_MS": "5000",
    "BROKERGATE_ZOOKEEPER_SESSION_TIMEOUT_MS": "1500",
    "BROKERGATE_ZOOKEEPER_REQUEST_TIMEOUT_MS": "2000",
    "BROKERGATE_REAPER_INTERVAL_MS": "200",
    "BROKERGATE_METADATA_REFRESH_MS": "200",
    "BROKERGATE_REDIS_SOCKET_TIMEOUT_MS": "500",
}
# What a client may retry: the gateway could not be reached (0), the balancer found no
# replica (502/504), or a backend is down (503).
TRANSIENT = {0, 502, 503, 504}
STRING = "application/vnd.kafka.string.v2+json"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(tmp_path_factory.mktemp("cluster"), replicas=3, env=FAST, secure=True)
    with LocalCluster(spec) as running:
        yield running


def security(cluster: LocalCluster) -> ClusterSecurity:
    assert cluster.security is not None, "the module's cluster is secure"
    return cluster.security


def connect(cluster: LocalCluster, url: str, auth: tuple[str, str] | None = None) -> GatewayClient:
    """A client of ``url`` (the balancer or a replica) trusting the cluster's CA, signed in as
    ``auth`` (default: the super user)."""
    return GatewayClient(url, auth=auth or security(cluster).admin, verify=str(security(cluster).tls.ca))


def raw(cluster: LocalCluster, **kwargs: Any) -> httpx.Client:
    """A bare HTTP client trusting the cluster's CA, for what ``GatewayClient`` hides (headers, status)."""
    return httpx.Client(verify=ssl.create_default_context(cafile=security(cluster).tls.ca), **kwargs)


@contextmanager
def logs_on_failure(cluster: LocalCluster) -> Iterator[None]:
    """Attach the tail of every replica's log to a failure: what a reader needs to explain it."""
    try:
        yield
    except Exception as exc:
        for number, replica in enumerate(cluster.replicas, 1):
            exc.add_note(f"--- replica {number} ({replica.url}) ---\n{replica.output(40)}")
        raise


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def retried(action: Callable[[], Any], timeout: float = 30.0) -> Any:
    """``action()``, retried while it fails in a way a client should retry."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except ClientError as exc:
            if exc.status not in TRANSIENT or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def values(records: list[Record]) -> list[str]:
    return [str(r.value) for r in records]


def test_one_instance_created_polled_and_committed_through_three_replicas(cluster):
    topic, group = name("t"), name("g")
    r1, r2, r3 = (connect(cluster, r.url) for r in cluster.replicas)
    with logs_on_failure(cluster), r1, r2, r3:
        r1.create_topic(topic, 3)
        r1.produce(topic, [{"value": f"v{i}", "partition": i % 3} for i in range(30)])

        created = r1.consumer(group, format="string", auto_offset_reset="earliest")
        created.subscribe(topic)
        via_r2 = Consumer(r2, group, created.instance, "string")
        via_r3 = Consumer(r3, group, created.instance, "string")
        got: list[Record] = []
        while len(got) < 30:
            batch = via_r2.poll(timeout_ms=1000)
            assert batch, "the instance created through replica 1 stopped delivering through replica 2"
            got += batch
        assert sorted(values(got)) == sorted(f"v{i}" for i in range(30))

        # An empty commit through replica 3 commits what replica 2 fetched: the state is in Redis.
        via_r3.commit()
        committed = r1.request(
            "GET",
            f"{created.path}/offsets",
            json={"partitions": [{"topic": topic, "partition": p} for p in range(3)]},
            headers={"Content-Type": V2},
        )["offsets"]
        assert {o["partition"]: o["offset"] for o in committed} == {0: 10, 1: 10, 2: 10}


def test_members_used_through_different_replicas_split_the_partitions(cluster):
    topic, group = name("t"), name("g")
    r1, r2, r3 = (connect(cluster, r.url) for r in cluster.replicas)
    with logs_on_failure(cluster), r1, r2, r3:
        r1.create_topic(topic, 6)
        first = r1.consumer(group, format="string", auto_offset_reset="earliest")
        second = r2.consumer(group, format="string", auto_offset_reset="earliest")
        first.subscribe(topic)
        second.subscribe(topic)

        mine, theirs = set(first.assignment()), set(second.assignment())
        assert len(mine) == len(theirs) == 3
        assert not mine & theirs and mine | theirs == {(topic, p) for p in range(6)}
        # The third replica, which neither member used, sees the same assignment.
        assert set(Consumer(r3, group, first.instance, "string").assignment()) == mine

        r3.produce(topic, [{"value": f"v{i}", "partition": i % 6} for i in range(60)])
        seen: dict[str, list[Record]] = {first.instance: [], second.instance: []}
        for _ in range(40):
            for member in (first, second):
                seen[member.instance] += member.poll(timeout_ms=200)
            if sum(len(v) for v in seen.values()) >= 60:
                break
        assert {(r.topic, r.partition) for r in seen[first.instance]} == mine
        assert {(r.topic, r.partition) for r in seen[second.instance]} == theirs
        assert sorted(values(seen[first.instance] + seen[second.instance])) == sorted(
            f"v{i}" for i in range(60)
        )


def test_an_idempotency_key_retried_through_other_replicas_stores_once(cluster):
    topic = name("t")
    body = {"records": [{"value": "pay"}, {"value": "ship"}]}
    with logs_on_failure(cluster), connect(cluster, cluster.url) as lb:
        lb.create_topic(topic, 1)
        key = name("order")
        headers = {"Content-Type": STRING, "Idempotency-Key": key}
        answers = [
            connect(cluster, r.url).request("POST", f"/topics/{topic}", json=body, headers=headers)
            for r in cluster.replicas
        ]
        answers.append(lb.request("POST", f"/topics/{topic}", json=body, headers=headers))
        assert all(a == answers[0] for a in answers)
        assert [o["offset"] for o in answers[0]["offsets"]] == [0, 1]

        # Two copies at once through two replicas: the first wins, the other gets its answer.
        concurrent: list[Any] = []
        headers = {"Content-Type": STRING, "Idempotency-Key": name("order")}

        def send(url: str) -> None:
            with connect(cluster, url) as client:
                concurrent.append(client.request("POST", f"/topics/{topic}", json=body, headers=headers))

        threads = [threading.Thread(target=send, args=(r.url,)) for r in cluster.replicas[1:]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(concurrent) == 2 and concurrent[0] == concurrent[1]

        stored = lb.request("GET", f"/topics/{topic}/partitions/0/records", params={"offset": 0})["records"]
        assert len(stored) == 4


@dataclass
class Reader:
    """A consumer loop as an at-least-once application writes it: commit what it processed and,
    after any failure, resume from the committed offsets (a lost answer may have moved the
    instance's positions). Delivering a record twice is allowed only above the committed offset."""

    clients: list[GatewayClient]  # the first is used until it fails, then the next
    group: str
    topic: str
    expected: set[str]
    delivered: list[tuple[int, int, str]] = field(default_factory=list)
    recoveries: int = 0
    errors: list[BaseException] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)  # partition -> next offset, as last known
    violations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = self.clients[0]
        self.consumer = self.client.consumer(self.group, format="string", auto_offset_reset="earliest")
        self.consumer.subscribe(self.topic)

    @property
    def unique(self) -> set[str]:
        return {v for _, _, v in self.delivered}

    def run(self, deadline: float) -> None:
        try:
            polls = 0
            while self.unique != self.expected and time.monotonic() < deadline:
                try:
                    batch = self.consumer.poll(timeout_ms=300, max_bytes=400)
                    self._accept(batch)
                    polls += 1
                    if batch and polls % 2 == 0:  # every other batch: some are uncommitted at the kill
                        last: dict[int, int] = {}
                        for r in batch:
                            last[r.partition] = r.offset
                        self.consumer.commit([(self.topic, p, o) for p, o in last.items()])
                        self.committed.update({p: o + 1 for p, o in last.items()})
                except ClientError as exc:
                    if exc.status not in TRANSIENT:
                        raise
                    self._recover()
        except BaseException as exc:
            self.errors.append(exc)

    def _accept(self, batch: list[Record]) -> None:
        seen = {(p, o) for p, o, _ in self.delivered}
        for r in batch:
            if (r.partition, r.offset) in seen and r.offset < self.committed.get(r.partition, 0):
                self.violations.append(f"committed record {r.partition}/{r.offset} delivered again")
            self.delivered.append((r.partition, r.offset, str(r.value)))

    def _recover(self) -> None:
        self.recoveries += 1
        if len(self.clients) > 1 and self.client is self.clients[0]:
            self.client = self.clients[1]  # its replica is gone: carry on through another
            self.consumer = Consumer(self.client, self.group, self.consumer.instance, "string")
        time.sleep(0.2)
        consumer = self.consumer
        owned = retried(consumer.assignment)
        truth = retried(
            lambda: self.client.request(
                "GET",
                f"{consumer.path}/offsets",
                json={"partitions": [{"topic": t, "partition": p} for t, p in owned]},
                headers={"Content-Type": V2},
            )["offsets"]
        )
        for o in truth:
            if o["offset"] >= 0:
                self.committed[o["partition"]] = o["offset"]
                retried(partial(consumer.seek, self.topic, o["partition"], o["offset"]))
            else:
                retried(partial(consumer.seek_to_beginning, [(self.topic, o["partition"])]))


def produce_batches(client: GatewayClient, topic: str, first: int, count: int, per_batch: int = 20) -> None:
    """Produce ``v<first>``… in batches, each retried under one Idempotency-Key until it is stored."""
    for start in range(first, first + count, per_batch):
        body = {"records": [{"value": f"v{i}"} for i in range(start, min(start + per_batch, first + count))]}
        headers = {"Content-Type": STRING, "Idempotency-Key": f"{topic}-{start}"}
        retried(partial(client.request, "POST", f"/topics/{topic}", json=body, headers=headers))


def test_kill9_of_a_replica_mid_consumption_loses_no_instance_and_no_record(cluster):
    topic = name("t")
    expected = {f"v{i}" for i in range(600)}
    lb = connect(cluster, cluster.url)
    r2, r3 = connect(cluster, cluster.replicas[1].url), connect(cluster, cluster.replicas[2].url)
    try:
        with logs_on_failure(cluster):
            lb.create_topic(topic, 4)
            produce_batches(lb, topic, 0, 300)
            # One group reads through the balancer; another through replica 2, moving to 3 when 2 dies.
            readers = [
                Reader([connect(cluster, cluster.url)], name("lb"), topic, expected),
                Reader([r2, r3], name("hop"), topic, expected),
            ]
            deadline = time.monotonic() + 60
            threads = [threading.Thread(target=r.run, args=(deadline,)) for r in readers]
            for t in threads:
                t.start()
            wait_for(lambda: all(len(r.unique) >= 100 or r.errors for r in readers))

            cluster.kill_replica(2)
            produce_batches(lb, topic, 300, 300)  # through the balancer, which now skips replica 2
            for t in threads:
                t.join()

            for reader in readers:
                assert not reader.errors, reader.errors  # never a 40403: the instance outlived its replica
                assert reader.unique == expected, f"missing: {sorted(expected - reader.unique)[:10]}"
                assert not reader.violations, reader.violations[:5]
            hop = readers[1]
            assert hop.recoveries >= 1 and hop.client is r3
            # Each record is stored once, whatever the retries of the producer were.
            stored = stored_values(lb, topic)
            assert len(stored) == 600 and set(stored) == expected
    finally:
        cluster.restart_replica(2)
        for client in (lb, r2, r3):
            client.close()


def stored_values(client: GatewayClient, topic: str) -> list[str]:
    """Every record of ``topic``, read by offset (stateless reads, no consumer)."""
    found: list[str] = []
    for p in range(len(client.request("GET", f"/topics/{topic}/partitions"))):
        offset = 0
        while True:
            answer = client.request(
                "GET",
                f"/topics/{topic}/partitions/{p}/records",
                params={"offset": offset, "timeout": 0},
                headers={"Accept": STRING},
            )
            if not answer["records"]:
                break
            found += [str(r["value"]) for r in answer["records"]]
            offset = answer["next_offset"]
    return found


def test_a_replica_restarted_after_kill9_rejoins(cluster):
    topic, group = name("t"), name("g")
    third = cluster.replicas[2]
    with logs_on_failure(cluster), connect(cluster, cluster.url) as lb:
        lb.create_topic(topic, 1)
        consumer = lb.consumer(group, format="string", auto_offset_reset="earliest")
        consumer.subscribe(topic)
        lb.produce(topic, [{"value": "before"}])
        cluster.kill_replica(3)
        retried(lambda: lb.produce(topic, [{"value": "while-down"}]))

        cluster.restart_replica(3)
        # It serves the instance created while it was down ...
        with connect(cluster, third.url) as direct:
            got = Consumer(direct, group, consumer.instance, "string").poll(timeout_ms=2000)
        assert values(got) == ["before", "while-down"]

        # ... and the balancer sends it requests again once its failure has timed out.
        with raw(cluster, auth=security(cluster).admin, timeout=5) as http:

            def served_by_third() -> bool:
                answer = http.get(f"{cluster.url}/topics")
                return (
                    answer.status_code == 200 and answer.headers[UPSTREAM_HEADER] == f"127.0.0.1:{third.port}"
                )

            wait_for(served_by_third, timeout=15)


def test_a_redis_restart_keeps_every_instance_and_the_replicas_recover(cluster):
    topic, group = name("t"), name("g")
    assert cluster.redis is not None and cluster.redis.appendonly
    with logs_on_failure(cluster), connect(cluster, cluster.url) as lb:
        lb.create_topic(topic, 1)
        consumer = lb.consumer(group, format="string", auto_offset_reset="earliest")
        consumer.subscribe(topic)
        lb.produce(topic, [{"value": f"a{i}"} for i in range(5)])
        got = consumer.poll(timeout_ms=2000)
        assert values(got) == [f"a{i}" for i in range(5)]
        consumer.commit()

        cluster.redis.stop()
        try:
            # Produce without an Idempotency-Key needs no Redis ...
            lb.produce(topic, [{"value": f"b{i}"} for i in range(5)])
            # ... consumer operations answer 503 with Retry-After.
            with raw(cluster, auth=security(cluster).admin) as http:
                answer = http.get(
                    f"{cluster.url}{consumer.path}/records", params={"timeout": 0}, headers={"Accept": STRING}
                )
            assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1
            assert "Redis" in answer.json()["message"]
        finally:
            cluster.redis.start()

        # The instance and its positions came back from the append-only file: it resumes after a4.
        def resumed() -> list[Record]:
            return consumer.poll(timeout_ms=1000)

        after = retried(resumed, timeout=20)
        while len(after) < 5:
            after += consumer.poll(timeout_ms=1000)
        assert values(after) == [f"b{i}" for i in range(5)]
        for replica in cluster.replicas:
            wait_for(replica.ready, timeout=10)


def answer_of(action: Callable[[], Any]) -> tuple[int, int]:
    """The status and Confluent error code the gateway answered ``action`` with; (200, 0) if done."""
    try:
        action()
    except ClientError as exc:
        return exc.status, exc.error_code
    return 200, 0


def audited(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Every line of every replica's audit trail."""
    paths = (cluster.audit_log(n) for n in range(1, len(cluster.replicas) + 1))
    return [json.loads(line) for path in paths if path.exists() for line in path.read_text().splitlines()]


def test_no_one_gets_in_unauthenticated_nor_past_the_acls_and_a_binding_holds_on_every_replica(cluster):
    topic = name("t")
    user = (name("alice"), name("pw"))
    r1, r2, r3 = (r.url for r in cluster.replicas)
    with logs_on_failure(cluster), connect(cluster, r1) as admin, raw(cluster, timeout=10) as anonymous:
        admin.create_topic(topic, 1)

        # Without credentials, through the balancer: refused before any route, with the challenge.
        refused = anonymous.get(f"{cluster.url}/topics/{topic}")
        assert (refused.status_code, refused.json()["error_code"]) == (401, 40101)
        assert refused.headers["WWW-Authenticate"].startswith("Basic ")
        wrong = anonymous.get(f"{cluster.url}/topics/{topic}", auth=(security(cluster).admin[0], "guess"))
        assert wrong.status_code == 401
        # A replica speaks TLS only: plain HTTP gets no answer.
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{r2.replace('https://', 'http://')}/healthz", timeout=5)

        security(cluster).add_user(*user)
        alice = [connect(cluster, url, user) for url in (r1, r2, r3)]
        try:
            # A user the ACLs give nothing: 403 (401 until the replica has read the users file again).
            def produce(via: GatewayClient, value: str) -> Callable[[], Any]:
                return lambda: via.produce(topic, [{"value": value}])

            wait_for(lambda: answer_of(produce(alice[0], "denied"))[0] != 401, timeout=10)
            assert answer_of(produce(alice[0], "denied")) == (403, 40301)

            # Granted through replica 1, it holds through replicas 2 and 3 (the binding is in ZooKeeper).
            admin.create_acl(
                AclBinding(
                    f"User:{user[0]}",
                    ResourceType.TOPIC,
                    topic,
                    PatternType.LITERAL,
                    Operation.WRITE,
                    Permission.ALLOW,
                )
            )
            wait_for(lambda: answer_of(produce(alice[1], "via-2")) == (200, 0), timeout=10)
            wait_for(lambda: answer_of(produce(alice[2], "via-3")) == (200, 0), timeout=10)
            # WRITE is all it gives: reading is still refused.
            read = answer_of(lambda: alice[2].request("GET", f"/topics/{topic}/partitions/0/records"))
            assert read == (403, 40301)
        finally:
            for client in alice:
                client.close()
        assert sorted(stored_values(admin, topic)) == ["via-2", "via-3"]

    # Each refusal is in the audit trail of the replica that made it.
    lines = audited(cluster)
    assert any(
        line["event"] == "authentication"
        and line["outcome"] == "FAILED"
        and line["path"] == f"/topics/{topic}"
        for line in lines
    )
    assert any(
        line["event"] == "authorization"
        and line["outcome"] == "DENIED"
        and line["principal"] == f"User:{user[0]}"
        and line["resource"] == f"TOPIC:{topic}"
        for line in lines
    )


# --- the script, as a user runs it -------------------------------------------------------


def script(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "deploy" / "cluster.py"), *args]


def start_script(
    cluster: LocalCluster, workdir: Path, *options: str
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """``deploy/cluster.py up`` with one replica on the module's broker, ZooKeeper and Redis."""
    assert cluster.broker and cluster.zookeeper and cluster.redis
    proc = subprocess.Popen(
        script(
            "up",
            "--dir",
            str(workdir),
            "--port",
            "0",
            "--replicas",
            "1",
            "--kafka",
            cluster.broker.bootstrap,
            "--zookeeper",
            f"{cluster.zookeeper.hosts}/{name('cli')}",
            "--redis",
            cluster.redis.url_for(1),
            "--no-restart",
            *(f"-e{k}={v}" for k, v in FAST.items()),
            *options,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    state_path = workdir / STATE_FILE

    def up() -> bool:
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        return state_path.exists() and json.loads(state_path.read_text())["url"] is not None

    wait_for(up, timeout=60)
    return proc, json.loads(state_path.read_text())


def pids(state: dict[str, Any]) -> list[tuple[int, int]]:
    found = [(r["pid"], r["start_ticks"]) for r in state["replicas"]]
    found.append((state["balancer"]["pid"], state["balancer"]["start_ticks"]))
    return found


def test_the_secure_script_serves_and_stops_everything_even_after_a_child_died(cluster, tmp_path):
    proc, state = start_script(cluster, tmp_path, "--secure")
    try:
        signed_in = state["security"]
        trusted = ssl.create_default_context(cafile=signed_in["ca"])
        password = Path(signed_in["password_file"]).read_text().strip()
        assert state["url"].startswith("https://")
        with httpx.Client(verify=trusted, timeout=5) as http:
            assert http.get(f"{state['url']}/readyz").status_code == 200
            assert http.get(f"{state['url']}/topics").status_code == 401
            assert http.get(f"{state['url']}/topics", auth=("admin", password)).status_code == 200
        replica = state["replicas"][0]
        os.kill(replica["pid"], signal.SIGKILL)
        wait_for(lambda: not alive(replica["pid"], replica["start_ticks"]))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out.decode()
    assert b"stopped" in out
    assert not [pid for pid, ticks in pids(state) if alive(pid, ticks)]
    assert not (tmp_path / STATE_FILE).exists()


def test_down_cleans_up_after_a_killed_script(cluster, tmp_path):
    proc, state = start_script(cluster, tmp_path)
    proc.kill()  # the owner dies without stopping anything
    proc.wait(10)
    assert all(alive(pid, ticks) for pid, ticks in pids(state))
    down = subprocess.run(script("down", "--dir", str(tmp_path)), capture_output=True, timeout=60, cwd=ROOT)
    assert down.returncode == 0, down.stdout.decode() + down.stderr.decode()
    assert not [pid for pid, ticks in pids(state) if alive(pid, ticks)]
    assert not (tmp_path / STATE_FILE).exists()
