"""``brokergate schemas``, and ``produce``/``consume`` in the schema formats, as a user runs them.

One gateway process serves its schema registry; a second one has HTTP Basic authentication and
ACL authorization on (alice is a super user, bob has no binding), for the credentials every
schemas command sends. The tools run as separate processes, without a terminal.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gateway_process import GatewayProcess, authorizing_gateway
from tests.e2e.tool_process import bg, ok, refused, rows

ALICE, ALICE_PW = "alice", "alice's secret pw"
BOB, BOB_PW = "bob", "bob's secret pw"
AS_ALICE = ("--user", ALICE, "--password", ALICE_PW)
AS_BOB = ("--user", BOB, "--password", BOB_PW)


def avro(name: str, *fields: tuple[str, object], namespace: str = "shop") -> str:
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [{"name": n, **(t if isinstance(t, dict) else {"type": t})} for n, t in fields],
        }
    )


ORDER_V1 = avro("Order", ("id", "string"))
ORDER_V2 = avro("Order", ("id", "string"), ("qty", {"type": "int", "default": 0}))  # compatible
ORDER_BAD = avro("Order", ("id", "string"), ("note", "string"))  # a new field without a default
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Item {\n  string sku = 1;\n  int32 count = 2;\n}\n'
JSON_SCHEMA = json.dumps({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]})


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("schemas") / "data").start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    data = tmp_path_factory.mktemp("schemas-secured") / "data"
    gw = authorizing_gateway(data, {ALICE: ALICE_PW, BOB: BOB_PW}, ALICE)
    yield gw
    gw.stop()


def sr(gw: GatewayProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """``brokergate schemas ARGS``."""
    return bg(gw, "schemas", *args)


def register(gw: GatewayProcess, subject: str, schema_file: str, *more: str) -> list[str]:
    """``schemas register``'s one row: subject, version, id."""
    [row] = rows(ok(sr(gw, "register", "--subject", subject, "--schema-file", schema_file, *more)))
    return row


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result))


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text + "\n", encoding="utf-8")
    return str(path)


# --- brokergate schemas ---------------------------------------------------------------------


def test_register_get_and_list(gateway, name, tmp_path):
    subject = f"{name}-value"
    v1, v2 = write(tmp_path, "v1.avsc", ORDER_V1), write(tmp_path, "v2.avsc", ORDER_V2)
    shown, version, first_id = register(gateway, subject, v1)
    assert (shown, version) == (subject, "1")
    again = as_json(sr(gateway, "register", "--subject", subject, "--schema-file", v1, "--output", "json"))
    assert again == {"subject": subject, "version": 1, "id": int(first_id)}  # the same schema: no new version
    _, version, second_id = register(gateway, subject, v2)
    assert version == "2" and second_id != first_id

    # get prints the text as it is stored, to be saved and registered again
    assert as_json(sr(gateway, "get", "--subject", subject)) == json.loads(ORDER_V2)
    assert as_json(sr(gateway, "get", "--subject", subject, "--version", "1")) == json.loads(ORDER_V1)
    assert as_json(sr(gateway, "get", "--id", first_id)) == json.loads(ORDER_V1)
    got = as_json(sr(gateway, "get", "--subject", subject, "--version", "latest", "--output", "json"))
    assert (got["subject"], got["version"], got["id"]) == (subject, 2, int(second_id))

    register(gateway, f"{name}-key", write(tmp_path, "key.avsc", '"string"'))
    listed = rows(ok(sr(gateway, "list", "--prefix", name)))
    assert listed == [[f"{name}-key"], [subject]]
    assert subject in as_json(sr(gateway, "list", "--output", "json"))


def test_other_types_and_references(gateway, name, tmp_path):
    register(gateway, f"{name}-proto", write(tmp_path, "item.proto", PROTO), "--type", "protobuf")
    got = as_json(sr(gateway, "get", "--subject", f"{name}-proto", "--output", "json"))
    assert got["schemaType"] == "PROTOBUF" and "message Item" in got["schema"]
    register(gateway, f"{name}-json", write(tmp_path, "item.json", JSON_SCHEMA), "--type", "JSON")

    # an Avro schema that imports a named type of another subject
    customer = write(tmp_path, "customer.avsc", avro("Customer", ("name", "string")))
    register(gateway, f"{name}-customer", customer)
    order = write(tmp_path, "order.avsc", avro("Order", ("id", "string"), ("customer", "shop.Customer")))
    refused(sr(gateway, "register", "--subject", f"{name}-order", "--schema-file", order), 1, "error 42201")
    register(gateway, f"{name}-order", order, "--reference", f"shop.Customer={name}-customer:latest")
    got = as_json(sr(gateway, "get", "--subject", f"{name}-order", "--output", "json"))
    assert got["references"] == [{"name": "shop.Customer", "subject": f"{name}-customer", "version": 1}]


def test_compat_says_compatible_or_why_not_and_exits_5(gateway, name, tmp_path):
    subject = f"{name}-value"
    register(gateway, subject, write(tmp_path, "v1.avsc", ORDER_V1))
    good, bad = write(tmp_path, "good.avsc", ORDER_V2), write(tmp_path, "bad.avsc", ORDER_BAD)
    compat = ("compat", "--subject", subject, "--schema-file")

    assert ok(sr(gateway, *compat, good)) == "compatible\n"
    r = sr(gateway, *compat, bad)
    refused(r, 5, f"the schema is not compatible with subject {subject!r}")
    verdict, *reasons = r.stdout.splitlines()
    assert verdict == "incompatible" and any("note" in reason for reason in reasons)
    assert all(reason.startswith("  ") for reason in reasons)
    r = sr(gateway, *compat, bad, "--version", "1", "--output", "json")
    refused(r, 5, f"not compatible with version 1 of subject {subject!r}")
    answer = json.loads(r.stdout)
    assert answer["is_compatible"] is False and answer["version"] == 1 and answer["messages"]

    # registering it is refused for the same reason
    refused(sr(gateway, "register", "--subject", subject, "--schema-file", bad), 1, "(HTTP 409, error 409)")
    # at level NONE anything goes
    ok(sr(gateway, "config", "--subject", subject, "--level", "none"))
    assert ok(sr(gateway, *compat, bad)) == "compatible\n"


def test_delete_soft_then_permanent(gateway, name, tmp_path):
    subject = f"{name}-value"
    register(gateway, subject, write(tmp_path, "v1.avsc", ORDER_V1))
    register(gateway, subject, write(tmp_path, "v2.avsc", ORDER_V2))
    assert rows(ok(sr(gateway, "delete", "--subject", subject, "--version", "1"))) == [
        [subject, "1", "soft-deleted"]
    ]
    refused(sr(gateway, "get", "--subject", subject, "--version", "1"), 1, "error 40402")
    ok(sr(gateway, "get", "--subject", subject, "--version", "1", "--deleted"))

    refused(sr(gateway, "delete", "--subject", subject, "--permanent"), 1, "error 40405")  # soft first
    deleted = as_json(sr(gateway, "delete", "--subject", subject, "--output", "json"))
    assert deleted == {"subject": subject, "versions": [2], "permanent": False}
    assert subject not in ok(sr(gateway, "list")).split()
    assert rows(ok(sr(gateway, "list", "--deleted", "--prefix", name))) == [[subject, "yes"]]
    assert rows(ok(sr(gateway, "delete", "--subject", subject, "--permanent"))) == [
        [subject, "1", "permanently", "deleted"],
        [subject, "2", "permanently", "deleted"],
    ]
    assert rows(ok(sr(gateway, "list", "--deleted", "--prefix", name))) == []


def test_config_shows_and_sets_the_compatibility_level(gateway, name):
    subject = f"{name}-value"
    [[_, level, source]] = rows(ok(sr(gateway, "config")))
    assert source == "global"
    # a subject without a level of its own has the registry's
    assert rows(ok(sr(gateway, "config", "--subject", subject))) == [[subject, level, "global"]]
    assert rows(ok(sr(gateway, "config", "--subject", subject, "--level", "full_transitive"))) == [
        [subject, "FULL_TRANSITIVE", "subject"]
    ]
    shown = as_json(sr(gateway, "config", "--subject", subject, "--output", "json"))
    assert shown == {"subject": subject, "compatibilityLevel": "FULL_TRANSITIVE", "source": "subject"}
    assert rows(ok(sr(gateway, "config"))) == [["-", level, "global"]]  # the registry's is unchanged
    r = sr(gateway, "config", "--level", "SIDEWAYS")
    assert r.returncode == 2 and "invalid choice" in r.stderr and "Traceback" not in r.stderr


def test_a_subject_holding_a_slash_is_served(gateway, name, tmp_path):
    """The client sends its "/" as %2F, which the registry reads as part of the subject."""
    schema = write(tmp_path, "s.avsc", ORDER_V1)
    registered = rows(ok(sr(gateway, "register", "--subject", f"team/{name}", "--schema-file", schema)))
    assert registered[0][:2] == [f"team/{name}", "1"]
    assert f"team/{name}" in [row[0] for row in rows(ok(sr(gateway, "list")))]


def test_errors_are_one_line(gateway, name, tmp_path):
    refused(sr(gateway, "get", "--subject", f"{name}-nope"), 1, f"Subject '{name}-nope' not found. (HTTP 404")
    refused(sr(gateway, "delete", "--subject", f"{name}-nope"), 1, "(HTTP 404, error 40401)")
    refused(sr(gateway, "get", "--id", "987654"), 1, "error 40403")
    schema, proto = write(tmp_path, "s.avsc", ORDER_V1), write(tmp_path, "p.proto", PROTO)
    refused(sr(gateway, "register", "--subject", f"{name}-v", "--schema-file", proto), 1, "error 42201")
    # refused before anything is sent
    refused(sr(gateway, "get", "--subject", ".."), 1, "cannot be named in a URL path")
    refused(sr(gateway, "get", "--subject", "__GLOBAL"), 1, "error 42208")
    # bad usage: status 2
    refused(sr(gateway, "get", "--subject", "s", "--id", "1"), 2, "(and --version) or --id, not both")
    refused(sr(gateway, "get"), 2, "needs --subject (and --version) or --id")
    missing = str(tmp_path / "missing.avsc")
    refused(sr(gateway, "compat", "--subject", "s", "--schema-file", missing), 2, "cannot read --schema-file")
    empty = write(tmp_path, "empty.avsc", " ")
    refused(sr(gateway, "compat", "--subject", "s", "--schema-file", empty), 2, "is empty")
    r = sr(gateway, "register", "--subject", "s", "--schema-file", schema, "--reference", "no-version")
    assert r.returncode == 2 and "name=subject:version" in r.stderr
    r = sr(gateway, "get", "--subject", "s", "--version", "0")
    assert r.returncode == 2 and "a number from 1 or 'latest'" in r.stderr
    refused(sr(gateway, "list", "--url", "http://127.0.0.1:9"), 3, "cannot reach the gateway")


# --- produce and consume in the schema formats ------------------------------------------------


def test_avro_round_trip_with_keys(gateway, name, tmp_path):
    ok(bg(gateway, "topics", "create", "--topic", name, "--partitions", "1"))
    schemas = (
        "--key-schema-file",
        write(tmp_path, "key.avsc", '"string"'),
        "--value-schema-file",
        write(tmp_path, "order.avsc", ORDER_V2),
    )
    lines = "".join(f'"user{i}"|{{"id": "o{i}", "qty": {i}}}\n' for i in range(5))
    produce = ("produce", "--topic", name, "--format", "avro", "--key-separator", "|", *schemas)
    # from the second batch on, the schemas go by the ids the first one got
    summary = as_json(bg(gateway, *produce, "--batch-size", "2", "--output", "json", stdin=lines))
    assert summary["records"] == 5 and summary["failed"] == 0
    # the gateway registered them under the topic's subjects
    registered = as_json(sr(gateway, "get", "--subject", f"{name}-value", "--output", "json"))
    assert registered["id"] == summary["value_schema_id"]
    assert as_json(sr(gateway, "get", "--id", str(summary["key_schema_id"]))) == "string"

    consume = ("consume", "--topic", name, "--from-beginning", "--timeout-ms", "5000", "--format", "avro")
    out = ok(bg(gateway, *consume, "--print-key", "--max-messages", "5"))
    assert out == lines.replace("|", "\t").replace(": ", ":").replace(", ", ",")  # as JSON, compact
    out = ok(bg(gateway, *consume, "--output", "json", "--max-messages", "5"))
    assert [(r["offset"], r["key"], r["value"]) for r in map(json.loads, out.splitlines())] == [
        (i, f"user{i}", {"id": f"o{i}", "qty": i}) for i in range(5)
    ]

    # by id, without the schema's text; a record that does not fit is named by its line
    value_id = str(summary["value_schema_id"])
    by_id = ("produce", "--topic", name, "--format", "avro", "--value-schema-id", value_id)
    more = '{"id": "o5", "qty": 5}\n\n{"id": "o6", "qty": "six"}\n'
    line = refused(bg(gateway, *by_id, stdin=more), 1, "line 3: ")
    assert "(HTTP 400, error 400)" in line and "after sending 0 record(s)" in line
    ok(bg(gateway, *by_id, stdin=more.splitlines()[0] + "\n"))
    at_5 = ("--partition", "0", "--offset", "5", "--max-messages", "1")
    assert ok(bg(gateway, *consume, *at_5)) == '{"id":"o5","qty":5}\n'


@pytest.mark.parametrize(
    ("fmt", "schema", "value"),
    [("jsonschema", JSON_SCHEMA, {"sku": "a-1"}), ("protobuf", PROTO, {"sku": "a-1", "count": 3})],
)
def test_jsonschema_and_protobuf_round_trip(gateway, name, tmp_path, fmt, schema, value):
    ok(bg(gateway, "topics", "create", "--topic", name, "--partitions", "1"))
    schema_file = write(tmp_path, "schema", schema)
    produce = ("produce", "--topic", name, "--format", fmt, "--value-schema-file", schema_file)
    table = ok(bg(gateway, *produce, stdin=json.dumps(value) + "\n"))
    assert table.splitlines()[0].split()[-2:] == ["KEY-SCHEMA-ID", "VALUE-SCHEMA-ID"]
    consume = ("consume", "--topic", name, "--from-beginning", "--format", fmt, "--timeout-ms", "5000")
    assert json.loads(ok(bg(gateway, *consume, "--max-messages", "1"))) == value


def test_contradictory_produce_options_end_in_status_2(gateway, name, tmp_path):
    schema = write(tmp_path, "s.avsc", ORDER_V1)
    by_id = ("--format", "avro", "--value-schema-id", "1")
    for args, needle in [
        (("--format", "avro"), "--format avro needs --value-schema-file or --value-schema-id"),
        (("--format", "json", "--value-schema-file", schema), "--value-schema-file goes with --format avro"),
        (("--value-schema-id", "1"), "--value-schema-id goes with --format avro, jsonschema or protobuf"),
        ((*by_id, "--value-schema-file", schema), "give the value schema once"),
        ((*by_id, "--key-separator", ":"), "--key-separator needs --key-schema-file or --key-schema-id"),
        ((*by_id, "--key-schema-id", "1"), "a key schema goes with --key-separator"),
        (("--format", "protobuf", "--value-schema-file", str(tmp_path / "no")), "cannot read"),
    ]:
        refused(bg(gateway, "produce", "--topic", name, *args, stdin='{"id": "x"}\n'), 2, needle)
    plain = ok(bg(gateway, "produce", "--topic", name, stdin="plain\n"))
    assert plain.splitlines()[0].split() == ["TOPIC", "RECORDS", "FAILED", "TIME"]  # as it was


# --- with authentication and authorization on -------------------------------------------------


def test_schemas_commands_send_the_credentials(secured, name, tmp_path):
    subject = f"{name}-value"
    schema = write(tmp_path, "s.avsc", ORDER_V1)
    refused(sr(secured, "list"), 1, "requires credentials and none were given")
    refused(sr(secured, "list", "--user", ALICE, "--password", "not it"), 1, "refused the credentials")
    register(secured, subject, schema, *AS_ALICE)
    assert rows(ok(sr(secured, "list", *AS_ALICE))) == [[subject]]
    ok(sr(secured, "config", "--subject", subject, "--level", "FULL", *AS_ALICE))
    # reads and checks are open to every user; writes to a subject need WRITE on its topic
    assert as_json(sr(secured, "get", "--subject", subject, *AS_BOB)) == json.loads(ORDER_V1)
    ok(sr(secured, "compat", "--subject", subject, "--schema-file", schema, *AS_BOB))
    refused(sr(secured, "register", "--subject", subject, "--schema-file", schema, *AS_BOB), 1, "not allowed")
    refused(sr(secured, "delete", "--subject", subject, *AS_BOB), 1, "not allowed (user 'bob')")

    ok(bg(secured, "topics", "create", "--topic", name, "--partitions", "1", *AS_ALICE))
    produce = ("produce", "--topic", name, "--format", "avro", "--value-schema-file", schema, *AS_ALICE)
    ok(bg(secured, *produce, stdin='{"id": "o1"}\n'))
    consume = ("consume", "--topic", name, "--format", "avro", "--from-beginning", "--timeout-ms", "5000")
    assert as_json(bg(secured, *consume, "--max-messages", "1", *AS_ALICE)) == {"id": "o1"}
