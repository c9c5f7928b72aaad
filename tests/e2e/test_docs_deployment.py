"""docs/deployment.md's commands run as written.

``brokergate serve`` on the three distributed backends runs against the session's Apache
Kafka broker, ZooKeeper and Redis started on loopback in place of the page's hosts, and hands out
URLs of its advertised address. "Try it on one machine": ``deploy/cluster.py up`` starts Kafka,
ZooKeeper, Redis, three replicas and nginx, a request through the balancer names the replica
that answered, and Ctrl-C stops everything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import httpx

from deploy.local.cluster import STATE_FILE
from deploy.local.process import free_port
from deploy.local.redis_server import RedisServer
from deploy.local.zookeeper_server import ZooKeeperServer
from tests.e2e.docs_blocks import ROOT, claim, shell_env


def test_try_it_on_one_machine(tmp_path):
    with claim("docs/deployment.md", "Try it on one machine") as section:
        up, use = (line.split("  #")[0].strip() for line in section.block(0).strip().splitlines())
    port = free_port()
    workdir = tmp_path / "cluster"
    # the page's command, in a directory of the test's and on a free port rather than 8082
    command = f"{up} --dir {workdir} --port {port}"
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=ROOT,
        env=shell_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        state = workdir / STATE_FILE
        deadline = time.monotonic() + 120
        while not (state.exists() and json.loads(state.read_text()).get("url")):
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stdout.read().decode() if proc.stdout else ""
            )
            time.sleep(0.3)
        seen = set()
        for _ in range(6):  # round-robin: the answers come from more than one replica
            shown = subprocess.run(
                ["bash", "-c", "set -o pipefail\n" + use.replace("localhost:8082", f"127.0.0.1:{port}")],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert shown.returncode == 0, shown.stderr
            assert shown.stdout.lower().startswith("x-brokergate-replica:"), shown.stdout
            seen.add(shown.stdout.strip())
        assert len(seen) > 1, seen
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C stops everything
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()


def test_run_it_for_real(tmp_path, kafka_broker):
    with claim("docs/deployment.md", "Run it for real: Kafka, ZooKeeper, Redis, several replicas") as section:
        command = section.block(0)
    port = free_port()
    with (
        ZooKeeperServer(tmp_path / "zookeeper") as zookeeper,
        RedisServer(tmp_path / "redis") as redis,
    ):
        # the page's hosts are these servers; the gateway listens on a free port rather than 8082
        servers = {
            "kafka://kafka-1:9092,kafka-2:9092": kafka_broker.url,
            "zookeeper://zk-1:2181,zk-2:2181": zookeeper.url,
            "redis://redis:6379/0": redis.url,
            "brokergate serve": f"brokergate serve --host 127.0.0.1 --port {port}",
        }
        for old, new in servers.items():
            assert old in command, old
            command = command.replace(old, new)
        env = shell_env()
        server = subprocess.Popen(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline, "the gateway did not get ready"
                time.sleep(0.3)
            v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
            created = httpx.post(f"{url}/consumers/docs", headers=v2, json={"name": "c1"})
            assert created.status_code == 200, created.text
            assert created.json()["base_uri"] == "https://gateway.example.com/consumers/docs/instances/c1"
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            _, errors = server.communicate(timeout=60)
        assert server.returncode in (0, -signal.SIGTERM), errors
