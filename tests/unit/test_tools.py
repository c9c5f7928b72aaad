"""The console tools' pure parts: the consumer's commit after a rebalance, names refused before sending,
what the schema options make of their flags."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

import pytest

from service.cli.common import ToolError
from service.cli.schemas import RecordSchemas, cmd_schemas, record_schemas, reference, schema_of, version
from service.cli.tools import add_commands, commit_owned, refused_batch
from service.client import ClientError, Consumer, GatewayClient, schema_body, url_path
from service.core.schemas.model import Schema, SchemaReference, SchemaType
from service.errors import InvalidConsumerConfig, InvalidSubject, InvalidTopic

REBALANCED = ClientError(
    409, 40903, "consumer 'c' does not own partition t-1; its offsets were not committed."
)


class FakeConsumer:
    """A group member whose commits the group refuses while they name a partition it does not own."""

    def __init__(self, owned: list[tuple[str, int]], refusal: ClientError = REBALANCED) -> None:
        self.owned = owned
        self.refusal = refusal
        self.committed: list[list[tuple[str, int, int]]] = []
        self.refused: list[list[tuple[str, int, int]]] = []
        self.asked = 0

    def commit(self, offsets: Iterable[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]:
        assert offsets is not None
        wanted = list(offsets)
        if any((t, p) not in self.owned for t, p, _ in wanted):
            self.refused.append(wanted)
            raise self.refusal
        self.committed.append(wanted)
        return []

    def assignment(self) -> list[tuple[str, int]]:
        self.asked += 1
        return list(self.owned)


def test_a_commit_of_owned_partitions_is_sent_once(capsys):
    consumer = FakeConsumer([("t", 0), ("t", 1)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert consumer.committed == [[("t", 0, 9), ("t", 1, 4)]]
    assert consumer.asked == 0 and capsys.readouterr().err == ""


def test_after_a_rebalance_only_the_partitions_kept_are_committed(capsys):
    consumer = FakeConsumer([("t", 0)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert consumer.refused == [[("t", 0, 9), ("t", 1, 4)]]
    assert consumer.committed == [[("t", 0, 9)]]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("brokergate: warning: commit refused after a rebalance:")


def test_when_nothing_is_kept_nothing_more_is_sent(capsys):
    consumer = FakeConsumer([("other", 0)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert consumer.committed == [] and len(consumer.refused) == 1 and consumer.asked == 1
    assert "commit refused after a rebalance" in capsys.readouterr().err


def test_a_commit_refused_while_everything_is_still_owned_is_not_retried_for_ever(capsys):
    class Moving(FakeConsumer):
        def commit(self, offsets: Iterable[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]:
            self.refused.append(list(offsets or []))
            raise self.refusal  # the group is mid-rebalance: the assignment still lists both

    consumer = Moving([("t", 0), ("t", 1)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert len(consumer.refused) == 1 and consumer.asked == 1


@pytest.mark.parametrize(
    "refusal",
    [
        ClientError(409, 40902, "Consumer instance already exists."),  # a 409 that is not a rebalance
        ClientError(404, 40403, "Consumer instance not found."),
        ClientError(0, 0, "cannot reach the gateway"),
    ],
)
def test_other_refusals_are_not_taken_for_a_rebalance(refusal):
    consumer = FakeConsumer([], refusal)
    with pytest.raises(ClientError) as raised:
        commit_owned(consumer, {("t", 0): 9})
    assert raised.value is refusal and consumer.asked == 0


def test_every_path_segment_is_encoded_into_one():
    assert (
        url_path("consumers", "a b/c?d#e%f", "instances", "i")
        == "/consumers/a%20b%2Fc%3Fd%23e%25f/instances/i"
    )
    assert url_path("topics", "..", "partitions", 0) == "/topics/../partitions/0"  # refused by name, not here


def test_the_client_refuses_a_name_before_sending_anything():
    # Nothing listens on port 9: a request would fail with ClientError(0), not with the rule's error.
    with GatewayClient("http://127.0.0.1:9") as client:
        for call in (
            lambda: client.produce("orders/partitions/0", [{"value": "x"}]),
            lambda: client.delete_topic("foo/../orders"),
            lambda: client.set_partitions("..", 3),
            lambda: client.topic("a b"),
            lambda: client.create_topic(""),
        ):
            with pytest.raises(InvalidTopic):
                call()
        for call in (lambda: client.consumer(""), lambda: client.group("g" * 256), lambda: client.lags("")):
            with pytest.raises(InvalidConsumerConfig):
                call()
        with pytest.raises(InvalidConsumerConfig):
            client.consumer("g", name="me/../you")
        with pytest.raises(InvalidConsumerConfig):
            Consumer(client, "g", "../x", "binary")


# --- schemas: what the flags take, produce's schema options, refused batches --------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="brokergate")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_a_reference_is_a_name_a_subject_and_a_version():
    assert reference("shop.Customer=customers-value:3") == SchemaReference(
        "shop.Customer", "customers-value", 3
    )
    # a subject may hold ':' (a context); the version is after the last one, and latest is -1
    assert reference("c.proto=:.ctx:c:latest") == SchemaReference("c.proto", ":.ctx:c", -1)
    for bad in ("no-equals", "name=subject", "name=:1", "=s:1", "name=s:0", "name=s:x"):
        with pytest.raises(argparse.ArgumentTypeError):
            reference(bad)


def test_a_version_is_a_number_from_1_or_latest():
    assert (version("7"), version("LATEST"), version("latest")) == (7, "latest", "latest")
    for bad in ("0", "-1", "1.5", "", "newest"):
        with pytest.raises(argparse.ArgumentTypeError):
            version(bad)


def test_schema_file_and_type_make_the_schema_sent(tmp_path):
    (tmp_path / "item.proto").write_text('\n syntax = "proto3";\nmessage Item {}\n\n', encoding="utf-8")
    args = parse(
        "schemas",
        "register",
        "--subject",
        "items-value",
        "--schema-file",
        str(tmp_path / "item.proto"),
        "--type",
        "protobuf",
        "--reference",
        "a.proto=a-value:2",
    )
    schema = schema_of(args)
    assert schema == Schema(
        SchemaType.PROTOBUF,
        'syntax = "proto3";\nmessage Item {}',
        (SchemaReference("a.proto", "a-value", 2),),
    )
    assert schema_body(schema) == {
        "schema": schema.text,
        "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a-value", "version": 2}],
    }
    assert schema_body(Schema(SchemaType.AVRO, '"string"')) == {"schema": '"string"'}  # AVRO is the default


def test_produce_in_a_schema_format_takes_each_schema_once(tmp_path):
    (tmp_path / "v.avsc").write_text('{"type": "string"}\n', encoding="utf-8")
    value_file = str(tmp_path / "v.avsc")
    produce = ("produce", "--topic", "t")
    assert record_schemas(parse(*produce)) is None
    assert record_schemas(parse(*produce, "--format", "avro", "--value-schema-file", value_file)) == (
        RecordSchemas(None, '{"type": "string"}')
    )
    keyed = ("--format", "protobuf", "--value-schema-id", "4", "--key-separator", ":", "--key-schema-id", "3")
    assert record_schemas(parse(*produce, *keyed)) == RecordSchemas(3, 4)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--format", "jsonschema"), "--format jsonschema needs --value-schema-file or --value-schema-id"),
        (
            ("--value-schema-id", "1"),
            "--value-schema-id goes with --format avro, jsonschema or protobuf, not string",
        ),
        (("--format", "json", "--key-schema-id", "1"), "--key-schema-id goes with --format avro"),
        (
            ("--format", "avro", "--value-schema-id", "1", "--value-schema-file", "f"),
            "give the value schema once",
        ),
        (
            ("--format", "avro", "--value-schema-id", "1", "--key-separator", ":"),
            "--format avro with --key-separator needs --key-schema-file or --key-schema-id",
        ),
        (("--format", "avro", "--value-schema-id", "1", "--key-schema-id", "2"), "goes with --key-separator"),
        (("--format", "avro", "--value-schema-file", "/no/such/file"), "cannot read --value-schema-file"),
    ],
)
def test_contradictory_schema_options_are_refused_with_status_2(flags, says):
    with pytest.raises(ToolError) as refused:
        record_schemas(parse("produce", "--topic", "t", *flags))
    assert refused.value.status == 2 and says in str(refused.value)


def test_a_refused_batch_names_the_line_of_the_record_the_gateway_names():
    lines = [1, 2, 4, 7]  # line 3, 5 and 6 were empty
    said = ClientError(422, 42203, "records[2].value: $: expected a string, got an object")
    assert str(refused_batch(said, lines)) == (
        "line 4: records[2].value: $: expected a string, got an object (HTTP 422, error 42203)"
    )
    # a 400 names the record after Confluent's words
    said = ClientError(400, 400, "Bad Request: records[0].value: $.qty: 'six' is not of type 'integer'")
    assert str(refused_batch(said, lines)).startswith("line 1: Bad Request: records[0].value: ")
    # a refusal that names no record, or one beyond the batch, is left as it is
    for message in ("The value_schema is not a valid AVRO schema", "records[9].value: no"):
        assert (
            str(refused_batch(ClientError(422, 42205, message), lines))
            == f"{message} (HTTP 422, error 42205)"
        )


def test_a_subject_no_path_can_name_is_refused_before_anything_is_sent():
    schema = Schema(SchemaType.AVRO, '"string"')
    with GatewayClient("http://127.0.0.1:9") as client:
        for call in (
            lambda: client.subject_version(".."),
            lambda: client.register_schema(".", schema),
            lambda: client.delete_subject(".."),
            lambda: client.check_compatibility("__GLOBAL", schema),
            lambda: client.compatibility(""),
        ):
            with pytest.raises(InvalidSubject):
                call()


@pytest.mark.parametrize(
    "argv",
    [
        ("--subject", "s", "--id", "1"),
        ("--version", "2", "--id", "1"),
        ("--version", "2"),
        (),
    ],
)
def test_schemas_get_takes_a_subject_or_an_id(argv):
    with GatewayClient("http://127.0.0.1:9") as client, pytest.raises(ToolError) as refused:
        cmd_schemas(parse("schemas", "get", *argv), client)
    assert refused.value.status == 2 and "schemas get" in str(refused.value)
