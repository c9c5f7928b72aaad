"""Records cross between the gateway and Kafka's console tools byte for byte, both ways.

What HTTP producers wrote (keys, values, headers, timestamps, partitions; binary and JSON), Kafka's
console consumer prints as stored; what Kafka's console producer wrote, HTTP consumers read with
the same keys, values and headers, and a key lands on the partition Java's producer puts it on.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.kafka_tools import run_tool, run_tool_bytes
from tests.conftest import RunningGateway
from tests.helpers import BINARY, JSON, b64, consumer, create_topic, poll_until, produce, subscribe, unb64

FIELD, LINE, HEADER, NULL = b"\x1f", b"\x1e", b"\x1d", b"\x1cNULL"

Printed = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def printed(out: bytes) -> dict[tuple[int, int], Printed]:
    """(partition, offset) -> (timestamp, offset, key, value, headers) from the console consumer's
    output with the separators above."""
    rows: dict[tuple[int, int], Printed] = {}
    for line in out.split(LINE)[:-1]:
        stamp, partition, offset, headers, key, value = line.split(FIELD)
        kind, _, ms = stamp.decode().partition(":")
        assert kind == "CreateTime", line
        parsed: list[tuple[str, bytes | None]] = []
        if headers != b"NO_HEADERS":
            for header in headers.split(HEADER):
                name, _, data = header.partition(b":")
                parsed.append((name.decode(), None if data == NULL else data))
        p, o = int(partition.removeprefix(b"Partition:")), int(offset.removeprefix(b"Offset:"))
        rows[(p, o)] = (
            int(ms),
            o,
            None if key == NULL else key,
            None if value == NULL else value,
            parsed,
        )
    return rows


async def stored(gw: RunningGateway, topic: str, partition: int) -> list[dict[str, Any]]:
    r = await gw.client.get(
        f"/topics/{topic}/partitions/{partition}/records", params={"offset": 0}, headers={"Accept": BINARY}
    )
    assert r.status_code == 200, r.text
    return list(r.json()["records"])


async def test_console_consumer_prints_what_http_producers_wrote(
    kafka_gateway: RunningGateway, kafka_broker: KafkaBroker, name: str
) -> None:
    client = kafka_gateway.client
    await create_topic(client, name, 3)
    binary = [
        {
            "key": b64(b"\xff\x00k\x80"),
            "value": b64(b"\x00\x01\xfe\xff binary \xc3"),
            "partition": 2,
            "headers": [{"name": "trace", "value": b64(b"\x80\x81\x00")}, {"name": "ünï", "value": None}],
            "timestamp": 1_600_000_000_123,
        },
        {"key": None, "value": b64(b"no key"), "partition": 0, "timestamp": 1_600_000_000_456},
        {"key": b64("ключ"), "value": None, "partition": 1, "headers": [{"name": "a", "value": b64("")}]},
    ]
    await produce(client, name, binary, fmt=BINARY)
    documents = [
        {"key": {"id": 7}, "value": {"name": "ünïcødé ✓", "n": [1, 2.5, None, True]}, "partition": 0},
        {"value": [1, "two"], "partition": 1, "timestamp": 1_700_000_000_000},
    ]
    await produce(client, name, documents, fmt=JSON)

    out = await run_tool_bytes(
        "kafka-console-consumer",
        *("--bootstrap-server", kafka_broker.bootstrap, "--topic", name, "--from-beginning"),
        *("--max-messages", "5", "--timeout-ms", "20000"),
        *(
            arg
            for prop in (
                "print.timestamp=true",
                "print.partition=true",
                "print.offset=true",
                "print.headers=true",
                "print.key=true",
                f"key.separator={FIELD.decode()}",
                f"line.separator={LINE.decode()}",
                f"headers.separator={HEADER.decode()}",
                f"null.literal={NULL.decode()}",
            )
            for arg in ("--formatter-property", prop)
        ),
    )
    rows = printed(out)
    assert len(rows) == 5, out

    # byte for byte what the gateway reads back, partition by partition
    for partition in range(3):
        for record in await stored(kafka_gateway, name, partition):
            ts, _, key, value, headers = rows[(partition, record["offset"])]
            assert ts == record["timestamp"]
            assert key == unb64(record["key"]) and value == unb64(record["value"])
            assert headers == [(h["name"], unb64(h["value"])) for h in record["headers"]]

    # and what was produced: binary as given, JSON as the documents
    by_value = {row[3]: row for row in rows.values()}
    first = rows[(2, 0)]
    assert first[:4] == (1_600_000_000_123, 0, b"\xff\x00k\x80", b"\x00\x01\xfe\xff binary \xc3")
    assert first[4] == [("trace", b"\x80\x81\x00"), ("ünï", None)]
    assert rows[(0, 0)][:4] == (1_600_000_000_456, 0, None, b"no key")
    assert rows[(1, 0)][2:] == ("ключ".encode(), None, [("a", b"")])
    docs = {(p, o): row for (p, o), row in rows.items() if o == 1}
    assert json.loads(docs[(0, 1)][2] or b"") == {"id": 7}
    assert json.loads(docs[(0, 1)][3] or b"") == documents[0]["value"]
    assert docs[(1, 1)][2] is None and json.loads(docs[(1, 1)][3] or b"") == [1, "two"]
    assert docs[(1, 1)][0] == 1_700_000_000_000
    assert len(by_value) == 5


async def test_http_consumers_read_what_the_console_producer_wrote(
    kafka_gateway: RunningGateway, kafka_broker: KafkaBroker, name: str
) -> None:
    client = kafka_gateway.client
    await create_topic(client, name, 3)
    lines = [
        "trace:abc,ünï:çødé\tk1\tvalue one ✓",
        "a:1\t<null>\tno key",
        "b:2,n:<null>\tk2\t<null>",
        'c:3\tk3\t{"json": [1, 2]}',
    ]
    before = int(time.time() * 1000)
    await run_tool(
        "kafka-console-producer",
        *("--bootstrap-server", kafka_broker.bootstrap, "--topic", name),
        *(
            arg
            for prop in ("parse.key=true", "parse.headers=true", "null.marker=<null>")
            for arg in ("--reader-property", prop)
        ),
        input="\n".join(lines) + "\n",
    )
    after = int(time.time() * 1000)

    base = await consumer(client, f"g-{name}", fmt="binary")
    await subscribe(client, base, name)
    got = await poll_until(client, base, 4, fmt=BINARY)
    seen = sorted(
        (
            (unb64(r["key"]), unb64(r["value"]), [(h["name"], unb64(h["value"])) for h in r["headers"]])
            for r in got
        ),
        key=repr,
    )
    assert seen == sorted(
        [
            (b"k1", "value one ✓".encode(), [("trace", b"abc"), ("ünï", "çødé".encode())]),
            (None, b"no key", [("a", b"1")]),
            (b"k2", None, [("b", b"2"), ("n", None)]),
            (b"k3", b'{"json": [1, 2]}', [("c", b"3")]),
        ],
        key=repr,
    )
    assert all(before <= r["timestamp"] <= after for r in got)

    # a key goes where Java's producer put it: the gateway hashes as Kafka's default partitioner
    java_partitions = {base64.b64decode(r["key"]): r["partition"] for r in got if r["key"] is not None}
    ours = await produce(client, name, [{"key": b64(k)} for k in java_partitions], fmt=BINARY)
    assert [o["partition"] for o in ours] == list(java_partitions.values())
