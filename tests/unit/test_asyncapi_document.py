"""The AsyncAPI document's shape from what the gateway knows: a channel and two operations per
topic, payloads in the multi-format schema object, and the security of its authentication."""

from __future__ import annotations

from service.api.asyncapi import SCHEMA_FORMATS, document
from service.core.schemas.model import SchemaType

AVRO = {
    "schemaFormat": SCHEMA_FORMATS[SchemaType.AVRO],
    "schema": {"type": "record", "name": "K", "fields": []},
}
PROTO = {"schemaFormat": SCHEMA_FORMATS[SchemaType.PROTOBUF], "schema": "syntax = 'proto3'; message V {}"}


def test_a_topic_is_a_channel_received_from_producers_and_sent_to_consumers() -> None:
    doc = document("https://gw.example:8443", "1.2.3", [("orders.v1", 3, AVRO, PROTO)], frozenset())
    assert doc["asyncapi"] == "3.0.0" and doc["info"]["version"] == "1.2.3"
    assert (
        doc["servers"]["gateway"]["host"] == "gw.example:8443"
        and doc["servers"]["gateway"]["protocol"] == "https"
    )
    channel = doc["channels"]["orders.v1"]
    assert channel["address"] == "/topics/orders.v1" and channel["bindings"]["kafka"]["partitions"] == 3
    message = doc["components"]["messages"]["orders.v1"]
    assert message["payload"] == PROTO and "Avro schema of the subject orders.v1-key" in str(
        message["bindings"]
    )
    assert doc["operations"]["produce.orders.v1"]["action"] == "receive"
    assert doc["operations"]["consume.orders.v1"]["action"] == "send"
    assert doc["operations"]["produce.orders.v1"]["messages"] == [
        {"$ref": "#/channels/orders.v1/messages/record"}
    ]
    assert "security" not in doc["servers"]["gateway"] and "securitySchemes" not in doc["components"]


def test_a_topic_without_schemas_carries_any_json_and_a_protobuf_key_is_described() -> None:
    doc = document("http://localhost:8082", "0", [("raw", 1, PROTO, None)], frozenset())
    message = doc["components"]["messages"]["raw"]
    assert message["payload"] == {"description": "Any JSON value (no schema registered)."}
    assert "Protobuf schema" in message["bindings"]["kafka"]["key"]["description"]


def test_the_server_names_the_schemes_of_each_authentication_method() -> None:
    doc = document("https://gw", "0", [], frozenset({"basic", "jwt", "mtls"}))
    schemes = doc["components"]["securitySchemes"]
    assert schemes["basic"]["scheme"] == "basic" and schemes["bearer"]["bearerFormat"] == "JWT"
    assert schemes["mtls"]["type"] == "X509"
    assert doc["servers"]["gateway"]["security"] == [
        {"$ref": f"#/components/securitySchemes/{name}"} for name in ("basic", "bearer", "mtls")
    ]
    assert doc["channels"] == {} and doc["operations"] == {}
