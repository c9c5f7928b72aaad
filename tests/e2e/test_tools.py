"""The console tools end to end, in the seed tutorial's workflow, against a real gateway process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.e2e.gateway_process import GatewayProcess


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("tools") / "data").start()
    yield gw
    gw.stop()


def bg(
    gw: GatewayProcess, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "BROKERGATE_URL": gw.url},
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_seed_workflow(gateway):
    ok(bg(gateway, "topics", "create", "--topic", "test4", "--partitions", "3"))
    assert "test4" in ok(bg(gateway, "topics", "list")).split()
    lines = "".join(f"user{i % 5}:event {i}\n" for i in range(30))
    summary = ok(bg(gateway, "produce", "--topic", "test4", "--key-separator", ":", stdin=lines))
    assert "30" in summary.splitlines()[1]

    described = ok(bg(gateway, "topics", "describe", "--topic", "test4", "--output", "json"))
    parts = json.loads(described)["partitions"]
    assert len(parts) == 3 and sum(p["end_offset"] for p in parts) == 30

    out = ok(
        bg(
            gateway,
            "consume",
            "--topic",
            "test4",
            "--from-beginning",
            "--max-messages",
            "30",
            "--print-key",
            "--timeout-ms",
            "5000",
        )
    )
    got = [line.split("\t") for line in out.splitlines()]
    assert sorted(v for _, v in got) == sorted(f"event {i}" for i in range(30))
    assert {k for k, v in got if v == "event 7"} == {"user2"}  # keys travel with their values

    # two consumers in one group split the partitions between them. Both join before the records
    # arrive: records read before a rebalance may be read again after it (at-least-once), which
    # is not what this checks.
    ok(bg(gateway, "topics", "create", "--topic", "split4", "--partitions", "3"))
    cmd = [
        sys.executable,
        "-m",
        "service",
        "consume",
        "--topic",
        "split4",
        "--group",
        "split",
        "--from-beginning",
        "--timeout-ms",
        "8000",
        "--print-offset",
    ]
    env = {**os.environ, "BROKERGATE_URL": gateway.url}
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def both_joined() -> bool:
        r = bg(gateway, "groups", "describe", "--group", "split", "--output", "json")
        members = json.loads(r.stdout)["consumers"] if r.returncode == 0 else []
        return len(members) == 2 and all(m["assignments"] for m in members)

    deadline = time.monotonic() + 30
    while not both_joined():
        assert time.monotonic() < deadline, "the two consumers did not both join"
        time.sleep(0.2)
    ok(bg(gateway, "produce", "--topic", "split4", "--key-separator", ":", stdin=lines))
    out1, _ = first.communicate(timeout=60)
    out2, _ = second.communicate(timeout=60)
    seen1 = {line.split("\t")[0] for line in out1.splitlines()}
    seen2 = {line.split("\t")[0] for line in out2.splitlines()}
    assert len(seen1 | seen2) == 30 and not seen1 & seen2  # every record once, partition:offset unique

    # a second group gets everything again
    out = ok(
        bg(
            gateway,
            "consume",
            "--topic",
            "test4",
            "--group",
            "audit",
            "--from-beginning",
            "--timeout-ms",
            "2000",
        )
    )
    assert len(out.splitlines()) == 30

    lag = json.loads(ok(bg(gateway, "groups", "lag", "--group", "audit", "--output", "json")))
    assert len(lag) == 3 and all(row["lag"] == 0 for row in lag)
    table = ok(bg(gateway, "groups", "lag", "--group", "split"))
    assert table.splitlines()[0].split()[:5] == [
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
    ]
    assert [row.split()[4] for row in table.splitlines()[1:]] == ["0", "0", "0"]
    listed = ok(bg(gateway, "groups", "list"))
    assert "audit" in listed and "split" in listed
    assert "audit" in ok(bg(gateway, "groups", "describe", "--group", "audit"))


def test_formats_headers_and_partition_offset(gateway):
    ok(bg(gateway, "topics", "create", "--topic", "fmt", "--partitions", "2"))
    ok(
        bg(
            gateway,
            "produce",
            "--topic",
            "fmt",
            "--format",
            "json",
            "--partition",
            "1",
            "--header",
            "src=cli",
            stdin='{"a": 1}\n{"a": 2}\n{"a": 3}\n',
        )
    )
    out = ok(
        bg(
            gateway,
            "consume",
            "--topic",
            "fmt",
            "--format",
            "json",
            "--partition",
            "1",
            "--offset",
            "1",
            "--max-messages",
            "2",
            "--print-headers",
            "--timeout-ms",
            "3000",
        )
    )
    assert out.splitlines() == ['src:cli\t{"a": 2}', 'src:cli\t{"a": 3}']
    ok(bg(gateway, "topics", "alter", "--topic", "fmt", "--partitions", "4"))
    assert (
        json.loads(ok(bg(gateway, "topics", "describe", "--topic", "fmt", "--output", "json")))[
            "partitions_count"
        ]
        == 4
    )
    ok(bg(gateway, "topics", "delete", "--topic", "fmt"))
    assert "fmt" not in ok(bg(gateway, "topics", "list")).split()


def test_error_paths(gateway, tmp_path):
    r = bg(gateway, "topics", "describe", "--topic", "no-such-topic")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "brokergate: error: Topic 'no-such-topic' not found. (HTTP 404, error 40401)"
    ]
    r = bg(gateway, "produce", "--topic", "bad name", stdin="x\n")
    assert r.returncode == 1 and "42207" in r.stderr
    r = bg(gateway, "produce", "--topic", "t", "--format", "json", stdin="{not json\n")
    assert r.returncode == 2 and "line 1" in r.stderr
    r = bg(gateway, "produce", "--topic", "t", "--key-separator", ":", stdin="no separator\n")
    assert r.returncode == 2 and "separator" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "service", "topics", "list", "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 3 and r.stderr.startswith("brokergate: error: cannot reach the gateway")
    assert "Traceback" not in r.stderr


def test_consume_deletes_its_instance_on_ctrl_c(gateway):
    import signal

    ok(bg(gateway, "topics", "create", "--topic", "ctrlc", "--partitions", "1"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "consume", "--topic", "ctrlc", "--group", "ctrlc-group"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROKERGATE_URL": gateway.url},
    )
    groups = []
    for _ in range(100):
        groups = json.loads(ok(bg(gateway, "groups", "list", "--output", "json")))
        if any(g["consumer_group_id"] == "ctrlc-group" and g["consumers"] for g in groups):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err
    # the instance is gone: the group, which never committed, has no member left and so no longer exists
    r = bg(gateway, "groups", "describe", "--group", "ctrlc-group")
    assert r.returncode == 1 and "40405" in r.stderr
