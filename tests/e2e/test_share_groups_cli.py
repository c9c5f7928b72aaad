"""``brokergate share-groups`` and ``brokergate consume --share-group``, as a user runs them.

One gateway process whose share consumers hold a record for 1 s (so a crashed consumer's records
come back soon) and acquire at most 5 a poll (so two consumers polling side by side both get
some); a second one has HTTP Basic authentication and ACL authorization on (alice is a super
user, bob has no binding). The tools run as separate processes, without a terminal.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.e2e.gateway_process import GatewayProcess, authorizing_gateway
from tests.e2e.tool_process import bg, ok, refused, rows, tool_env

LOCK_MS = 1000
ALICE, ALICE_PW = "alice", "alice's secret pw"
BOB, BOB_PW = "bob", "bob's secret pw"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = {"BROKERGATE_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS), "BROKERGATE_SHARE_MAX_RECORDS": "5"}
    gw = GatewayProcess(tmp_path_factory.mktemp("shares") / "data", env=env).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    data = tmp_path_factory.mktemp("shares-secured") / "data"
    gw = authorizing_gateway(data, {ALICE: ALICE_PW, BOB: BOB_PW}, ALICE)
    yield gw
    gw.stop()


@contextmanager
def running(gw: GatewayProcess, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``brokergate ARGS`` in the background, killed at the end of the block if it still runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=tool_env(gw),
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def describe(gw: GatewayProcess, group: str) -> dict[str, Any]:
    return dict(json.loads(ok(bg(gw, "share-groups", "describe", group, "--output", "json"))))


def described(gw: GatewayProcess, group: str) -> dict[str, Any] | None:
    """The group as ``describe`` shows it, or None while the gateway knows no such group."""
    r = bg(gw, "share-groups", "describe", group, "--output", "json")
    return dict(json.loads(r.stdout)) if r.returncode == 0 else None


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def has_consumers(gw: GatewayProcess, group: str, count: int) -> Callable[[], bool]:
    def check() -> bool:
        group_now = described(gw, group)
        return group_now is not None and len(group_now["consumers"]) == count

    return check


def topic_with(gw: GatewayProcess, topic: str, values: list[str], partitions: int = 1) -> None:
    ok(bg(gw, "topics", "create", "--topic", topic, "--partitions", str(partitions)))
    if values:
        ok(bg(gw, "produce", "--topic", topic, stdin="".join(v + "\n" for v in values)))


def printed(out: str) -> list[tuple[str, int, str]]:
    """``--print-offset`` lines: (partition:offset, delivery count, value)."""
    found = []
    for line in out.splitlines():
        where, delivery, value = line.split("\t")
        assert delivery.startswith("delivery:"), line
        found.append((where, int(delivery.removeprefix("delivery:")), value))
    return found


# --- consume --share-group ------------------------------------------------------------------


def test_each_record_printed_is_accepted_and_the_consumer_goes_away(gateway, name):
    topic_with(gateway, name, [f"v{i}" for i in range(8)])
    args = ("consume", "--share-group", name, name, "--from-beginning", "--print-offset", "--print-key")
    r = bg(gateway, *args, "--max-messages", "3", "--timeout-ms", "10000")
    assert [line.split("\t") for line in ok(r).splitlines()] == [
        [f"0:{i}", "delivery:1", "null", f"v{i}"] for i in range(3)
    ]
    assert r.stderr.strip() == "Processed a total of 3 messages"
    group = describe(gateway, name)
    # accepted, and nothing more acquired than was printed; the consumer deleted on its way out
    assert group["consumers"] == [] and group["state"] == "Empty"
    [p] = group["partitions"]
    assert (p["start_offset"], p["acquired"], p["available"], p["lag"]) == (3, 0, 0, 5)

    # the next consumer goes on where the group is: first deliveries, as JSON lines
    out = ok(bg(gateway, "consume", "--share-group", name, name, "--output", "json", "--timeout-ms", "1500"))
    got = [json.loads(line) for line in out.splitlines()]
    assert [(g["offset"], g["value"], g["delivery_count"]) for g in got] == [
        (i, f"v{i}", 1) for i in range(3, 8)
    ]
    assert describe(gateway, name)["lag"] == 0


def test_two_consumers_split_the_records_and_none_is_printed_twice(gateway, name):
    topic_with(gateway, name, [], partitions=3)
    args = ("consume", "--share-group", name, name, "--from-beginning", "--print-offset")
    with running(gateway, *args) as first, running(gateway, *args) as second:
        wait_until(has_consumers(gateway, name, 2), "both consumers are in the group")
        ok(bg(gateway, "produce", "--topic", name, stdin="".join(f"job-{i}\n" for i in range(60))))

        def all_done() -> bool:
            group = described(gateway, name)
            return (
                group is not None
                and sum(p["end_offset"] for p in group["partitions"]) == 60
                and not group["lag"]
            )

        wait_until(all_done, "every record is accepted")
        for consumer in (first, second):
            consumer.send_signal(signal.SIGINT)
        (out1, err1), (out2, err2) = first.communicate(timeout=30), second.communicate(timeout=30)
    assert first.returncode == second.returncode == 130, (err1, err2)
    seen1, seen2 = printed(out1), printed(out2)
    assert seen1 and seen2, "one consumer got every record"
    where = [w for w, _, _ in seen1 + seen2]
    assert len(where) == len(set(where)) == 60  # every record once
    assert sorted(v for _, _, v in seen1 + seen2) == sorted(f"job-{i}" for i in range(60))
    assert {d for _, d, _ in seen1 + seen2} == {1}
    assert describe(gateway, name)["consumers"] == []


def test_a_killed_consumers_records_come_back_after_the_lock_duration(gateway, name):
    # Records too big for a pipe nobody reads: the consumer blocks printing its first poll's.
    topic_with(gateway, name, [f"{i}:" + "x" * 40_000 for i in range(5)] + ["after"])
    args = ("consume", "--share-group", name, name, "--from-beginning", "--print-offset")
    with running(gateway, *args) as doomed:
        # Its first line printed, the consumer holds its first poll (5 records: SHARE_MAX_RECORDS)
        # and is stuck printing the next. (Asking `describe` instead races the 1 s lock: the tool
        # takes longer than that to start on a busy machine.)
        assert doomed.stdout is not None
        ready, _, _ = select.select([doomed.stdout], [], [], 30)
        assert ready, "the consumer printed nothing"
        assert doomed.stdout.readline().startswith("0:0\tdelivery:1\t0:")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)
    # no goodbye from the killed one: its records come back when its lock expires, to another
    r = bg(
        gateway,
        "consume",
        "--share-group",
        name,
        name,
        "--print-offset",
        "--max-messages",
        "6",
        "--timeout-ms",
        "20000",
    )
    # (the record nobody held may come first: it is available before the locks expire)
    got = sorted(printed(ok(r)), key=lambda g: int(g[0].split(":")[1]))
    assert [(w, d) for w, d, _ in got] == [(f"0:{i}", 2) for i in range(5)] + [("0:5", 1)]
    assert [v.split(":")[0] for _, _, v in got[:5]] == [str(i) for i in range(5)] and got[5][2] == "after"
    [p] = describe(gateway, name)["partitions"]
    assert (p["start_offset"], p["acquired"], p["lag"]) == (6, 0, 0)


def test_ctrl_c_deletes_the_consumer_at_once(gateway, name):
    topic_with(gateway, name, [])
    with running(gateway, "consume", "--share-group", name, name) as consumer:
        wait_until(has_consumers(gateway, name, 1), "the consumer is in the group")
        consumer.send_signal(signal.SIGINT)
        _, err = consumer.communicate(timeout=30)
    assert consumer.returncode == 130 and "Traceback" not in err, err
    assert describe(gateway, name)["consumers"] == []


def test_several_topics_print_the_topic_with_the_offset(gateway, name):
    topic_with(gateway, f"{name}-a", ["a0"])
    topic_with(gateway, f"{name}-b", ["b0"])
    r = bg(
        gateway,
        "consume",
        "--share-group",
        name,
        f"{name}-a",
        "--topic",
        f"{name}-b",
        "--from-beginning",
        "--print-offset",
        "--max-messages",
        "2",
        "--timeout-ms",
        "10000",
    )
    assert sorted(printed(ok(r))) == [(f"{name}-a:0:0", 1, "a0"), (f"{name}-b:0:0", 1, "b0")]
    assert describe(gateway, name)["lag"] == 0


# --- share-groups ---------------------------------------------------------------------------


def test_list_describe_reset_and_delete(gateway, name):
    topic_with(gateway, name, [f"v{i}" for i in range(6)], partitions=2)
    ok(
        bg(
            gateway,
            "consume",
            "--share-group",
            name,
            name,
            "--from-beginning",
            "--max-messages",
            "2",
            "--timeout-ms",
            "10000",
        )
    )

    listed = {row[0]: row for row in rows(ok(bg(gateway, "share-groups", "list")))}
    assert listed[name] == [name, "Empty", "0", "4"]
    as_json = json.loads(ok(bg(gateway, "share-groups", "list", "--output", "json")))
    assert [g["lag"] for g in as_json if g["share_group_id"] == name] == [4]

    # a consumer of another (empty) topic of the group: it takes none of the records of the first
    topic_with(gateway, f"{name}-idle", [])
    with running(gateway, "consume", "--share-group", name, f"{name}-idle") as idle:
        wait_until(has_consumers(gateway, name, 1), "the consumer is in the group")
        table = ok(bg(gateway, "share-groups", "describe", name))
        partitions, consumers = table.split("\n\n")
        assert partitions.splitlines()[0].split() == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "START-OFFSET",
            "END-OFFSET",
            "AVAILABLE",
            "ACQUIRED",
            "ARCHIVING",
            "LAG",
        ]
        mine = {int(row[2]): row for row in rows(partitions) if row[1] == name}
        assert set(mine) == {0, 1} and sum(int(row[8]) for row in mine.values()) == 4
        assert all(row[0] == name and row[3:8] == [row[4], row[4], "0", "0", "0"] for row in mine.values())
        [member] = rows(consumers)
        assert consumers.splitlines()[0].split() == ["GROUP", "CONSUMER-ID", "SUBSCRIPTION"]
        assert member[0] == name and member[2] == f"{name}-idle"

        # not while the group has a consumer: the gateway's 409, in one line
        for args in (("reset", name, "--to-latest"), ("delete", name)):
            refused(bg(gateway, "share-groups", *args), 1, "(HTTP 409, error 40903)")
        idle.send_signal(signal.SIGINT)
        idle.communicate(timeout=30)

    out = ok(bg(gateway, "share-groups", "reset", name, "--to-offset", f"{name}:1:1"))
    assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET", "LAG"]
    [row] = rows(out)
    assert row[:4] == [name, name, "1", "1"]
    out = ok(bg(gateway, "share-groups", "reset", name, "--to-earliest", "--topic", name))
    assert {(r[2], r[3]) for r in rows(out)} == {("0", "0"), ("1", "0")}
    assert describe(gateway, name)["lag"] == 6
    reset = json.loads(ok(bg(gateway, "share-groups", "reset", name, "--to-latest", "--output", "json")))
    topic = json.loads(ok(bg(gateway, "topics", "describe", "--topic", name, "--output", "json")))
    ends = {p["partition_id"]: p["end_offset"] for p in topic["partitions"]}
    assert reset["lag"] == 0
    assert {
        p["partition_id"]: p["start_offset"] for p in reset["partitions"] if p["topic_name"] == name
    } == ends

    assert rows(ok(bg(gateway, "share-groups", "delete", name))) == [[name, "deleted"]]
    refused(bg(gateway, "share-groups", "describe", name), 1, "(HTTP 404, error 404)")
    assert name not in {row[0] for row in rows(ok(bg(gateway, "share-groups", "list")))}


def test_the_credentials_options_reach_the_share_group_routes(secured, name):
    as_alice = ("--user", ALICE, "--password", ALICE_PW)
    ok(bg(secured, "topics", "create", "--topic", name, *as_alice))
    ok(bg(secured, "produce", "--topic", name, *as_alice, stdin="v\n"))
    out = ok(
        bg(
            secured,
            "consume",
            "--share-group",
            name,
            name,
            *as_alice,
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout-ms",
            "10000",
        )
    )
    assert out == "v\n"
    assert name in {row[0] for row in rows(ok(bg(secured, "share-groups", "list", *as_alice)))}
    r = bg(
        secured,
        "consume",
        "--share-group",
        name,
        name,
        "--user",
        BOB,
        "--password",
        BOB_PW,
        "--timeout-ms",
        "1000",
    )
    refused(r, 1, "not allowed (user 'bob')", alone=False)
    refused(bg(secured, "share-groups", "describe", name), 1, "the gateway requires credentials")


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("share-groups", "describe"), "share-groups describe needs a GROUP"),
        (("share-groups", "list", "g"), "share-groups list takes no GROUP"),
        (("share-groups", "reset", "g"), "needs --to-earliest, --to-latest or --to-offset"),
        (("share-groups", "reset", "g", "--to-earliest", "--to-latest"), "not --to-earliest and --to-latest"),
        (("share-groups", "reset", "g", "--to-offset", "t:one:2"), "TOPIC:PARTITION:OFFSET"),
        (("share-groups", "reset", "g", "--to-offset", "t:0:-1"), "TOPIC:PARTITION:OFFSET"),
        (("share-groups", "reset", "g", "--to-offset", "t:0:1", "--to-offset", "t:0:2"), "t:0 twice"),
        (("share-groups", "reset", "g", "--to-offset", "t:0:1", "--topic", "t"), "--topic goes with"),
        (("share-groups", "delete", "g", "--to-latest"), "--to-latest goes with share-groups reset"),
        (("consume", "--share-group", "g"), "needs topics to read"),
        (("consume", "--share-group", "g", "t", "--group", "h"), "--group does not go with --share-group"),
        (("consume", "--share-group", "g", "t", "--partition", "0"), "--partition does not go"),
        (("consume", "--share-group", "g", "t", "--offset", "3"), "--offset does not go"),
        (("consume", "t"), "go with --share-group"),
        (("consume",), "consume needs --topic"),
    ],
)
def test_bad_usage_is_one_line_and_status_2(gateway, args, needle):
    refused(bg(gateway, *args), 2, needle)


def test_names_the_gateway_refuses_and_groups_it_does_not_know(gateway, name):
    refused(bg(gateway, "consume", "--share-group", name, "no/such"), 1, "Invalid topic name")
    refused(
        bg(gateway, "share-groups", "reset", name, "--to-latest", "--topic", "a b"), 1, "Invalid topic name"
    )
    refused(bg(gateway, "share-groups", "describe", name), 1, f"Share group '{name}' not found. (HTTP 404")
