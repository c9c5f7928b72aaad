"""``GET /asyncapi.json``: the gateway's topics as an AsyncAPI 3.0 document, for event-driven tools.

One channel per topic the caller may describe (as ``GET /topics`` lists them, but for the internal
ones: the registry's and those named ``__…``), addressed by its
produce path, with its partition count in a Kafka binding. Its message is a record: the payload
the latest version of the registry subject ``<topic>-value`` describes (Avro, JSON Schema or
Protobuf, in AsyncAPI's multi-format schema object), the key the ``<topic>-key`` subject's; a
topic without such a subject carries any JSON. Two operations each: the gateway *receives* what
clients produce (``POST /topics/<topic>``) and *sends* records to consumers (long-polls,
Server-Sent Events and the WebSocket stream of a consumer instance; stateless reads). The
server is the URL clients reach this gateway at (``public_base``), with the security schemes its
authentication methods offer.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from service.api.gateway import Gateway, get_gateway
from service.core.acl import ResourceType
from service.core.schemas.model import SchemaType
from service.errors import GatewayError

from .access import visible
from .replies import V3, JSONBody
from .urls import public_base

__all__ = ["ASYNCAPI", "router"]

ASYNCAPI: Final = "/asyncapi.json"
SCHEMA_FORMATS: Final = {
    SchemaType.AVRO: "application/vnd.apache.avro+json;version=1.9.0",
    SchemaType.JSON: "application/schema+json;version=draft-07",
    SchemaType.PROTOBUF: "application/vnd.google.protobuf;version=3",
}
_HTTP: Final = {"bindingVersion": "0.3.0"}

router = APIRouter()
GW = Annotated[Gateway, Depends(get_gateway)]
Payload = dict[str, Any] | None
Channel = tuple[str, int, Payload, Payload]  # a topic, its partitions, its key's and value's payloads


@router.get(ASYNCAPI, include_in_schema=False)
async def asyncapi(request: Request, gw: GW) -> Response:
    """The AsyncAPI 3.0 document of the topics the caller may describe (see the module docstring)."""
    channels = []
    internal = {gw.settings.schema_registry_topic}
    names = [n for n in await gw.topics.names() if n not in internal and not n.startswith("__")]
    for name in await visible(request, ResourceType.TOPIC, names):
        try:
            partitions = len((await gw.topics.describe(name)).partitions)
        except GatewayError:  # deleted meanwhile, or its log unavailable now: left out
            continue
        key, value = await _payload(gw, f"{name}-key"), await _payload(gw, f"{name}-value")
        channels.append((name, partitions, key, value))
    doc = document(public_base(request), request.app.version, channels, gw.settings.auth_methods)
    return JSONBody(doc, media_type=V3)


async def _payload(gw: Gateway, subject: str) -> Payload:
    """The multi-format schema object of ``subject``'s latest version, None if there is none."""
    try:
        _, _, parsed = await gw.schemas.version(subject, "latest")
    except GatewayError:  # no such subject (or no registry to ask now): any JSON
        return None
    schema = parsed.schema
    text: Any = schema.text if schema.schema_type is SchemaType.PROTOBUF else json.loads(schema.text)
    return {"schemaFormat": SCHEMA_FORMATS[schema.schema_type], "schema": text}


def document(base: str, version: str, channels: list[Channel], methods: frozenset[str]) -> dict[str, Any]:
    """The document of a gateway at ``base`` (its ``version``) of ``channels``, with the
    authentication ``methods``."""
    scheme, _, host = base.partition("://")
    schemes = _security(methods)
    server: dict[str, Any] = {
        "host": host,
        "protocol": scheme,
        "title": "brokergate",
        "summary": "Kafka's model over HTTP: the Confluent REST Proxy v2 API and more.",
    }
    if schemes:
        server["security"] = [{"$ref": f"#/components/securitySchemes/{n}"} for n in schemes]
    doc: dict[str, Any] = {
        "asyncapi": "3.0.0",
        "info": {
            "title": "brokergate",
            "version": version,
            "description": "The topics of this gateway, each a channel: produce with POST /topics/{topic}; "
            "consume in a group by long-poll, Server-Sent Events or WebSocket, or read a partition "
            "statelessly (see /docs).",
        },
        "defaultContentType": "application/json",
        "servers": {"gateway": server},
        "channels": {},
        "operations": {},
        "components": {"messages": {}, "securitySchemes": schemes},
    }
    for topic, partitions, key, value in channels:
        message = _message(topic, key, value)
        doc["components"]["messages"][topic] = message
        ref = f"#/channels/{_pointer(topic)}"
        doc["channels"][topic] = {
            "address": f"/topics/{topic}",
            "title": topic,
            "description": f"The topic {topic}, of {partitions} partition(s).",
            "messages": {"record": {"$ref": f"#/components/messages/{_pointer(topic)}"}},
            "bindings": {
                "kafka": {"topic": topic, "partitions": partitions, "bindingVersion": "0.5.0"},
                "ws": {
                    "method": "GET",
                    "bindingVersion": "0.1.0",
                },
            },
        }
        doc["operations"][f"produce.{topic}"] = {
            "action": "receive",
            "channel": {"$ref": ref},
            "summary": f"Records produced to {topic} (POST /topics/{topic}, or a partition's path).",
            "messages": [{"$ref": f"{ref}/messages/record"}],
            "bindings": {"http": {"method": "POST", **_HTTP}},
        }
        doc["operations"][f"consume.{topic}"] = {
            "action": "send",
            "channel": {"$ref": ref},
            "summary": f"Records of {topic} to a consumer instance subscribed to it: GET …/records "
            "(a long-poll, or text/event-stream), or its WebSocket stream; or GET "
            f"/topics/{topic}/partitions/{{partition}}/records without a group.",
            "messages": [{"$ref": f"{ref}/messages/record"}],
            "bindings": {"http": {"method": "GET", **_HTTP}},
        }
    if not doc["components"]["messages"]:
        del doc["components"]["messages"]
    if not schemes:
        del doc["components"]["securitySchemes"]
    return doc


def _message(topic: str, key: Payload, value: Payload) -> dict[str, Any]:
    kafka: dict[str, Any] = {"bindingVersion": "0.5.0"}
    if key is not None:  # the binding's key is a JSON Schema: another format's is named, not shown
        if key["schemaFormat"] == SCHEMA_FORMATS[SchemaType.JSON]:
            kafka["key"] = key["schema"]
        else:
            kind = "Avro" if key["schemaFormat"] == SCHEMA_FORMATS[SchemaType.AVRO] else "Protobuf"
            kafka["key"] = {
                "description": f"The {kind} schema of the subject {topic}-key (its latest version)."
            }
    return {
        "name": "record",
        "title": f"A record of {topic}",
        "contentType": "application/json",
        "payload": value if value is not None else {"description": "Any JSON value (no schema registered)."},
        "bindings": {"kafka": kafka},
    }


def _security(methods: frozenset[str]) -> dict[str, Any]:
    schemes: dict[str, Any] = {}
    if "basic" in methods:
        schemes["basic"] = {"type": "http", "scheme": "basic", "description": "HTTP Basic credentials."}
    if "jwt" in methods:
        schemes["bearer"] = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    if "mtls" in methods:
        schemes["mtls"] = {"type": "X509", "description": "A client certificate (mutual TLS)."}
    return schemes


def _pointer(name: str) -> str:
    """``name`` as a JSON pointer segment (RFC 6901)."""
    return name.replace("~", "~0").replace("/", "~1")
