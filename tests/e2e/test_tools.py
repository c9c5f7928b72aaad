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
    assert out.splitlines() == ['src:cli\t{"a":2}', 'src:cli\t{"a":3}']
    ok(bg(gateway, "topics", "alter", "--topic", "fmt", "--partitions", "4"))
    assert (
        json.loads(ok(bg(gateway, "topics", "describe", "--topic", "fmt", "--output", "json")))[
            "partitions_count"
        ]
        == 4
    )
    ok(bg(gateway, "topics", "delete", "--topic", "fmt"))
    assert "fmt" not in ok(bg(gateway, "topics", "list")).split()


def test_consume_prints_keys_and_values_as_produce_reads_them_in_every_format(gateway):
    """One rule: text as it is in string and binary, compact JSON (strings quoted) in json, so an
    absent key (null) and the key "null" differ; consume's lines piped into produce, with a tab
    as the key separator, write the same records again. --output json is compact too."""
    lines = '"alice"|{"item": "book", "qty": 1}\nnull|{"item": "lamp"}\n"null"|"text"\n'
    for topic in ("keys-json", "keys-again", "keys-text"):
        ok(bg(gateway, "topics", "create", "--topic", topic, "--partitions", "1"))
    produce = ("produce", "--format", "json")
    ok(bg(gateway, *produce, "--topic", "keys-json", "--key-separator", "|", stdin=lines))
    consume = ("consume", "--from-beginning", "--max-messages", "3", "--timeout-ms", "5000")
    out = ok(bg(gateway, *consume, "--topic", "keys-json", "--format", "json", "--print-key"))
    assert out.splitlines() == ['"alice"\t{"item":"book","qty":1}', 'null\t{"item":"lamp"}', '"null"\t"text"']
    ok(bg(gateway, *produce, "--topic", "keys-again", "--key-separator", "\t", stdin=out))
    again = ok(bg(gateway, *consume, "--topic", "keys-again", "--format", "json", "--print-key"))
    assert again == out
    shown = ok(bg(gateway, *consume, "--topic", "keys-json", "--format", "json", "--output", "json"))
    records = [json.loads(line) for line in shown.splitlines()]
    assert [(r["key"], r["value"]) for r in records] == [
        ("alice", {"item": "book", "qty": 1}),
        (None, {"item": "lamp"}),
        ("null", "text"),
    ]
    assert shown.splitlines() == [json.dumps(r, separators=(",", ":")) for r in records]
    # string and binary: text as it is, what produce --format string reads
    ok(bg(gateway, "produce", "--topic", "keys-text", "--key-separator", ":", stdin="k1:hello\nk2:wörld\n"))
    for fmt in ("string", "binary"):
        out = ok(
            bg(
                gateway,
                *consume,
                "--max-messages",
                "2",
                "--topic",
                "keys-text",
                "--format",
                fmt,
                "--print-key",
            )
        )
        assert out.splitlines() == ["k1\thello", "k2\twörld"], fmt


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


def tool(*args: str, url: str = "http://127.0.0.1:9") -> subprocess.CompletedProcess[str]:
    """``brokergate ARGS`` with ``BROKERGATE_URL`` at ``url`` (by default where nothing listens)."""
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BROKERGATE_URL": url},
    )


def test_the_common_options_go_before_the_command_too(gateway):
    """``brokergate --url URL topics list``, as git and kubectl take a global option: before the
    command as after it; given both places, the one after the command wins."""
    ok(bg(gateway, "topics", "create", "--topic", "before", "--partitions", "1"))
    assert "before" in ok(tool("--url", gateway.url, "topics", "list")).split()
    listed = json.loads(ok(tool("--output", "json", "--url", gateway.url, "topics", "list")))
    assert "before" in listed
    assert "before" in ok(tool("--url", "http://127.0.0.1:9", "topics", "list", "--url", gateway.url)).split()
    r = tool("--url", gateway.url, "topics", "list", "--url", "http://127.0.0.1:9", url=gateway.url)
    assert r.returncode == 3 and "cannot reach the gateway at http://127.0.0.1:9" in r.stderr, r.stderr
    # the other tools alike, a subcommand's subcommand too
    assert ok(tool("--url", gateway.url, "schemas", "list")).split() == ["SUBJECT"]
    assert ok(tool("--url", gateway.url, "groups", "list")).startswith("GROUP")
    r = tool("--url", gateway.url, "nosuch")
    assert r.returncode == 2 and "invalid choice: 'nosuch'" in r.stderr, r.stderr


def test_a_refusal_without_authentication_does_not_blame_credentials(gateway):
    """With authentication off a 403 is no matter of credentials: the line says what the gateway
    said, not "(no credentials)" as if signing in would help."""
    r = bg(gateway, "topics", "delete", "--topic", "_schemas")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "brokergate: error: not allowed: Topic '_schemas' holds the schema registry's records; "
        "clients may not delete it. (HTTP 403, error 40301)"
    ]


def test_consume_deletes_its_instance_on_ctrl_c(gateway):
    import signal

    ok(bg(gateway, "topics", "create", "--topic", "ctrlc", "--partitions", "1"))
    ok(bg(gateway, "produce", "--topic", "ctrlc", stdin="before\n"))  # a new group starts after it
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
    assert_left_committed_at_the_end(gateway, "ctrlc-group", "ctrlc")


def test_consume_leaves_the_group_on_sigterm(gateway):
    import signal

    ok(bg(gateway, "topics", "create", "--topic", "sigterm", "--partitions", "1"))
    ok(bg(gateway, "produce", "--topic", "sigterm", stdin="before\n"))  # a new group starts after it
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "consume", "--topic", "sigterm", "--group", "sigterm-group"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROKERGATE_URL": gateway.url},
    )
    assert wait_for_member(gateway, "sigterm-group")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err
    assert "Processed a total of 0 messages" in err
    assert_left_committed_at_the_end(gateway, "sigterm-group", "sigterm")


def assert_left_committed_at_the_end(gw: GatewayProcess, group: str, topic: str) -> None:
    """The member that read nothing left at once (not when its session timed out), having
    committed where it stood, the end, as Kafka's console consumer commits its positions when it
    closes: the group is there for ``groups describe``, its lag 0, with no member."""
    described = json.loads(ok(bg(gw, "groups", "describe", "--group", group, "--output", "json")))
    assert described["consumers"] == []
    assert [(r["topic_name"], r["current_offset"], r["lag"]) for r in described["lags"]] == [(topic, 1, 0)]


def wait_for_member(gw: GatewayProcess, group: str) -> bool:
    for _ in range(100):
        groups = json.loads(ok(bg(gw, "groups", "list", "--output", "json")))
        if any(g["consumer_group_id"] == group and g["consumers"] for g in groups):
            return True
        time.sleep(0.1)
    return False


def end_offsets(gw: GatewayProcess, topic: str) -> list[int]:
    described = json.loads(ok(bg(gw, "topics", "describe", "--topic", topic, "--output", "json")))
    return [p["end_offset"] for p in described["partitions"]]


def test_a_name_that_is_not_one_topic_is_refused_before_anything_is_sent(gateway):
    ok(bg(gateway, "topics", "create", "--topic", "orders", "--partitions", "2"))
    ok(bg(gateway, "produce", "--topic", "orders", "--partition", "0", stdin="kept\n"))
    refused = [
        ("produce", "--topic", "orders/partitions/1"),
        ("produce", "--topic", "foo/../orders"),
        ("topics", "delete", "--topic", "foo/../orders"),
        ("topics", "delete", "--topic", ".."),
        ("topics", "alter", "--topic", "foo/../orders", "--partitions", "5"),
        ("topics", "describe", "--topic", "orders/partitions"),
        ("consume", "--topic", "foo/../orders", "--timeout-ms", "100"),
    ]
    for command in refused:
        r = bg(gateway, *command, stdin="x\n")
        assert r.returncode == 1, (command, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brokergate: error: Invalid topic name"), command
        assert lines[0].endswith("(HTTP 422, error 42207)"), command
    # nothing was stored, deleted or altered: orders has its two partitions and its one record
    assert end_offsets(gateway, "orders") == [1, 0]
    assert "orders" in ok(bg(gateway, "topics", "list")).split()
    r = bg(gateway, "groups", "describe", "--group", "")
    assert r.returncode == 1 and "error 42204" in r.stderr and "Traceback" not in r.stderr


def test_a_group_name_is_any_text(gateway):
    group = "team a?b#c%d&e+f=g é"  # every character that means something in a URL
    ok(bg(gateway, "topics", "create", "--topic", "anytext", "--partitions", "2"))
    ok(bg(gateway, "produce", "--topic", "anytext", stdin="one\ntwo\nthree\n"))
    consume = ("consume", "--topic", "anytext", "--group", group, "--from-beginning", "--timeout-ms", "1500")
    assert sorted(ok(bg(gateway, *consume)).splitlines()) == ["one", "three", "two"]
    lag = json.loads(ok(bg(gateway, "groups", "lag", "--group", group, "--output", "json")))
    assert sum(row["current_offset"] for row in lag) == 3 and all(row["lag"] == 0 for row in lag)
    described = json.loads(ok(bg(gateway, "groups", "describe", "--group", group, "--output", "json")))
    assert described["consumer_group_id"] == group
    assert group in [
        g["consumer_group_id"] for g in json.loads(ok(bg(gateway, "groups", "list", "--output", "json")))
    ]
    assert ok(bg(gateway, *consume)) == ""  # the group committed what it read


def test_a_bad_line_stops_produce_with_its_number_and_a_summary(gateway):
    ok(bg(gateway, "topics", "create", "--topic", "badline", "--partitions", "1"))
    lines = "".join(f'{{"n": {i}}}\n' if i != 8 else "{not json\n" for i in range(1, 11))
    r = bg(gateway, "produce", "--topic", "badline", "--format", "json", "--batch-size", "3", stdin=lines)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stdout.splitlines()[0].split() == ["TOPIC", "RECORDS", "FAILED", "TIME"]
    assert r.stdout.splitlines()[1].split()[:3] == ["badline", "7", "0"]
    error = r.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("brokergate: error: line 8: the value is not JSON")
    assert "after sending 7 record(s)" in error[0]
    # every line before the bad one was stored, whatever the batch size; none after it
    assert end_offsets(gateway, "badline") == [7]
    r = bg(
        gateway,
        "produce",
        "--topic",
        "badline",
        "--key-separator",
        ":",
        "--output",
        "json",
        stdin="k:v\nnone\n",
    )
    assert r.returncode == 2 and "line 2: no key separator" in r.stderr
    assert json.loads(r.stdout)["records"] == 1
    assert end_offsets(gateway, "badline") == [8]


def test_a_member_whose_commit_is_refused_after_a_rebalance_keeps_consuming(gateway):
    """The first member is mid-batch (its stdout is not read) when a second member joins: its commit
    names a partition it no longer owns and is refused. It goes on, commits the partition it kept,
    and when the second member leaves reads again only what it never committed."""
    import select
    import threading

    from service.client import GatewayClient

    topic, group, per_partition = "rebalance", "rebalance-g", 600
    ok(bg(gateway, "topics", "create", "--topic", topic, "--partitions", "2"))
    for p in (0, 1):
        values = "".join(f"{p}-{i}-{'x' * 100}\n" for i in range(per_partition))
        ok(bg(gateway, "produce", "--topic", topic, "--partition", str(p), stdin=values))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service",
            "consume",
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--print-offset",
            "--timeout-ms",
            "4000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROKERGATE_URL": gateway.url},
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        # Its first batch (both partitions, far more than a pipe holds) is being printed, and blocks.
        readable, _, _ = select.select([proc.stdout], [], [], 30)
        assert readable, "the consumer printed nothing"
        with GatewayClient(gateway.url) as client:
            second = client.consumer(group, format="string")
            second.subscribe(topic)
            lost = second.assignment()
            assert len(lost) == 1
            (kept,) = {(topic, 0), (topic, 1)} - set(lost)
            out: list[str] = []
            reader = threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True)
            reader.start()
            deadline = time.monotonic() + 30
            while True:  # the first member commits the partition it kept, and only that one
                lags = {(r["topic_name"], r["partition_id"]): r["current_offset"] for r in client.lags(group)}
                if lags.get(kept) == per_partition:
                    break
                assert time.monotonic() < deadline and proc.poll() is None, lags
                time.sleep(0.1)
            assert lags[lost[0]] == -1
            second.delete()  # the first member gets the lost partition back
        err = proc.stderr.read()
        proc.wait(timeout=30)
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("brokergate: warning:")]
    assert len(warnings) == 1 and "commit refused after a rebalance" in warnings[0]
    assert "brokergate: error" not in err
    seen = [line.split("\t")[0] for line in out]
    assert set(seen) == {f"{p}:{i}" for p in (0, 1) for i in range(per_partition)}
    read_twice = {s for s in seen if seen.count(s) > 1}
    # only what was never committed is read again: records of the lost partition, none of the kept one
    assert read_twice and all(s.startswith(f"{lost[0][1]}:") for s in read_twice)
    lag = json.loads(ok(bg(gateway, "groups", "lag", "--group", group, "--output", "json")))
    assert [row["current_offset"] for row in lag] == [per_partition, per_partition]
