"""v2 topic resources: metadata, produce, partition offsets, and the native stateless read.

Produce is two steps every producer shares, the REST routes and the WebSocket stream alike
(``streams.socket``): ``records_of`` reads a body's records within the record limits (encoded
with their schemas in a schema format), ``store_records`` appends them, charged to the produce
quotas, and renders the v2 response. The stateless read answers Server-Sent Events when asked
(``streams.sse``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response

from api_schemas import v2
from service.api.gateway import Gateway, get_gateway
from service.core.acl import Decision, ResourceType
from service.core.models import EmbeddedFormat, PlainFormat, SchemaFormat, TopicInfo, TopicPartition
from service.core.producer import ProduceOutcome
from service.core.rules import MAX_OFFSET
from service.core.schemas.serde import SCHEMA_TYPES, Writer
from service.errors import NotAcceptable, NotBase64
from service.wire.formats import (
    FORMATS,
    V2,
    binary_by_default,
    content_type_for,
    holds_float,
    is_schema_format,
    loads_exact,
    produce_format,
)
from service.wire.records import ParsedProduce, encode_produce, parse_produce, schema_choice
from service.wire.values_body import DEPTH as VALUES_DEPTH
from service.wire.values_body import binary_values

from .accept import ACCEPTS_V2, accepted_formats, check_accept
from .access import caller_of, decision_of, visible
from .bodies import loads, read_body, request_body
from .quotas import client_of, identity_of
from .replies import JSONBody, records_response
from .replies import v2 as v2_response
from .responses import BAD_BODY, ERRORS, NOT_ACCEPTABLE, PRODUCE_ERRORS, THROTTLED, records_doc
from .streams.sse import EVENT_STREAM_DOC, LastEventId, partition_events, wants_events

router = APIRouter(tags=["topics"], default_response_class=JSONBody)
GW = Annotated[Gateway, Depends(get_gateway)]


def topic_body(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "configs": info.configs,
        "partitions": [partition_body(p) for p in info.partitions],
    }


def partition_body(p: Any) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": p.leader,
        "replicas": [{"broker": b, "leader": b == p.leader, "in_sync": b in p.in_sync} for b in p.replicas],
    }


def produce_body(
    outcome: ProduceOutcome, key_schema_id: int | None = None, value_schema_id: int | None = None
) -> dict[str, Any]:
    offsets: Any
    if len(outcome.partitions) == 1 and outcome.partitions[0].error is None:
        # The common case: every record on one partition, rendered with one join instead of a
        # dict per record (a third of the CPU of a 1000-record produce otherwise).
        part = outcome.partitions[0]
        entry = f'{{"partition":{part.partition},"offset":'
        between = ',"error_code":null,"error":null},' + entry
        inner = between.join(map(str, part.offsets))
        offsets = orjson.Fragment(f'[{entry}{inner},"error_code":null,"error":null}}]'.encode())
    else:
        offsets = [
            {"partition": p, "offset": o, "error_code": code, "error": error}
            for p, o, code, error in outcome.per_record()
        ]
    return {"key_schema_id": key_schema_id, "value_schema_id": value_schema_id, "offsets": offsets}


@router.get(
    "/topics",
    operation_id="listTopics",
    dependencies=[ACCEPTS_V2],
    responses={200: {"model": list[str]}, **ERRORS, **NOT_ACCEPTABLE},
)
async def list_topics(request: Request, gw: GW) -> Response:
    """Names of the topics the caller may see (all of them, with authorization off)."""
    return v2_response(await visible(request, ResourceType.TOPIC, await gw.topics.names()))


@router.get(
    "/topics/{topic}",
    operation_id="getTopic",
    dependencies=[ACCEPTS_V2],
    responses={200: {"model": v2.Topic}, **ERRORS, **NOT_ACCEPTABLE},
)
async def get_topic(topic: str, gw: GW) -> Response:
    """A topic's configs and partitions."""
    return v2_response(topic_body(await gw.topics.describe(topic)))


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retries with the same key (within the window, through any replica) store the records "
        "once and get the first response back, with Idempotency-Replayed: true.",
    ),
]


async def serve_produce(
    request: Request, gw: Gateway, topic: str, partition: int | None, key: str | None
) -> Response:
    # Content-Type first, then Accept, as Jersey checks them; here, not a dependency: the fast
    # path calls this too
    content_type = request.headers.get("content-type")
    fmt = produce_format(content_type)
    check_accept(request.headers.get("accept"))
    body = await read_body(request)
    # The same key with the same request (target, format, body) answers with the first response.
    idempotent = None
    if key is not None:
        fingerprint = hashlib.sha256(b"\0".join([request.url.path.encode(), fmt.encode(), body])).hexdigest()
        idempotent = (key, fingerprint)
    who = await decision_of(request)  # for a topic the produce would create
    try:
        parsed, schema_ids = await records_of(body, fmt, topic, gw, who)
    except NotBase64 as exc:  # JSON values sent as application/json, most likely: say why base64
        hint = binary_by_default(content_type)
        if hint is None:
            raise
        raise NotBase64(f"{exc.message} {hint}") from None
    del body  # peak memory: the body is not needed once its records are

    async def produce() -> bytes:
        client = client_of(request, gw.quotas) if gw.quotas.produce else ""
        return await store_records(gw, topic, partition, parsed, schema_ids, client=client, who=who)

    if idempotent is None:
        return Response(await produce(), media_type=V2)
    response, replayed = await gw.idempotency.run(*idempotent, produce, scope=_idempotency_scope(request, gw))
    return Response(
        response, media_type=V2, headers={"Idempotency-Replayed": "true" if replayed else "false"}
    )


SchemaIds = tuple[int | None, int | None]  # the key and value schemas' ids of a schema-format produce


async def records_of(
    body: bytes, fmt: EmbeddedFormat, topic: str, gw: Gateway, who: Decision, data: Any = None
) -> tuple[ParsedProduce, SchemaIds]:
    """The records of a produce ``body`` (``data``: its JSON, if already parsed) in ``fmt``, within
    the record limits; in a schema format encoded with their schemas (an inline schema registered
    first, which may create ``topic`` if ``who`` may), with the schemas' ids."""
    s = gw.settings
    limits = (s.max_record_bytes, s.max_records_per_request, s.max_headers_per_record)
    if is_schema_format(fmt):
        return await _encode(body, fmt, topic, gw, who, limits, data)
    if len(body) < OFF_LOOP_BYTES:
        return _parse(body, fmt, limits, data, s.max_json_depth), (None, None)
    # the record loop yields the interpreter to the event loop every few milliseconds there
    return await asyncio.to_thread(_parse, body, fmt, limits, data, s.max_json_depth), (None, None)


async def store_records(
    gw: Gateway,
    topic: str,
    partition: int | None,
    parsed: ParsedProduce,
    schema_ids: SchemaIds,
    *,
    client: str,
    who: Decision,
) -> bytes:
    """Append ``parsed`` to ``topic`` (all to ``partition``, if given) for ``client``, charged to
    its produce quotas; the v2 produce response's JSON."""
    results = await gw.producer.produce(
        topic, parsed.records, parsed.partitions, partition=partition, client=client, who=who
    )
    metrics = gw.metrics
    metrics.produced_records.labels(topic).inc(len(parsed.records))
    metrics.produced_bytes.labels(topic).inc(parsed.payload_bytes)
    return orjson.dumps(produce_body(results, *schema_ids))


# A produce body this big or bigger is parsed in a worker thread.
OFF_LOOP_BYTES = 256 * 1024


# A body in a schema format this big or bigger is encoded in a worker thread. Avro's codec costs
# about what the plain formats cost per record, so it shares their threshold: below it, a worker
# thread costs more CPU than it spares the loop (bench/README.md, "Avro through the gateway").
OFF_LOOP_SCHEMA_BYTES = {"avro": OFF_LOOP_BYTES, "jsonschema": 32 * 1024, "protobuf": 32 * 1024}


def _parse(
    body: bytes, fmt: PlainFormat, limits: tuple[int, int, int], data: Any, max_depth: int
) -> ParsedProduce:
    max_record_bytes, max_records, max_headers = limits
    if data is None and fmt == "binary" and max_depth >= VALUES_DEPTH:
        # binary values alone, the most common body: read without a JSON parser, or None
        parsed = binary_values(body, max_record_bytes=max_record_bytes, max_records=max_records)
        if parsed is not None:
            return parsed
    if data is None:  # else already parsed, its depth checked, by the WebSocket stream
        data = loads(body, records=True, max_depth=max_depth)
    if fmt == "json" and holds_float(data):
        data = loads_exact(body)  # numbers as the client wrote them, never rounded
    return parse_produce(
        data, fmt, max_record_bytes=max_record_bytes, max_records=max_records, max_headers=max_headers
    )


async def _encode(
    body: bytes,
    fmt: SchemaFormat,
    topic: str,
    gw: Gateway,
    who: Decision,
    limits: tuple[int, int, int],
    data: Any = None,
) -> tuple[ParsedProduce, SchemaIds]:
    """The records of a body in a schema format, each key and value encoded with its schema (an
    inline schema registered first), and the schemas' ids."""
    big = len(body) >= OFF_LOOP_SCHEMA_BYTES[fmt]
    if data is None:
        parse = functools.partial(loads, body, records=True, max_depth=gw.settings.max_json_depth)
        data = await asyncio.to_thread(parse) if big else parse()
    if fmt == "jsonschema" and holds_float(data):
        # an integer beyond 64 bits, which orjson reads as a rounded double: read the text again,
        # integers exact (JSON Schema's checks need numbers, so decimals stay doubles)
        data = await asyncio.to_thread(json.loads, body) if big else json.loads(body)
    choice = schema_choice(data)
    # The topic first (created if it may be): no schema is registered for a topic that cannot be.
    await gw.topics.for_produce(topic, who)
    schema_type = SCHEMA_TYPES[fmt]
    writers: list[Writer | None] = []
    for is_key, text, schema_id, needed in (
        (True, choice.key_schema, choice.key_schema_id, choice.has_keys),
        (False, choice.value_schema, choice.value_schema_id, choice.has_values),
    ):
        if needed or text is not None or schema_id is not None:
            writers.append(
                await gw.serde.writer(schema_type, topic, is_key=is_key, text=text, schema_id=schema_id)
            )
        else:
            writers.append(None)
    key_writer, value_writer = writers
    max_record_bytes, max_records, max_headers = limits
    encode = functools.partial(
        encode_produce,
        data,
        None if key_writer is None else key_writer.encode,
        None if value_writer is None else value_writer.encode,
        max_record_bytes=max_record_bytes,
        max_records=max_records,
        max_headers=max_headers,
    )
    parsed = await asyncio.to_thread(encode) if big else encode()
    ids = tuple(None if w is None else w.schema_id for w in writers)
    return parsed, (ids[0], ids[1])


def _idempotency_scope(request: Request, gw: Gateway) -> str:
    """Whose key it is: the client (``identity_of``) and the path, so one client's key never
    answers for another's request nor for another topic. Clients without an identity share one
    scope per path: an address would not do, a retry may come through another balancer."""
    return f"{identity_of(request, gw.quotas.header) or 'anonymous'}\0{request.url.path}"


# Plain application/json is accepted too and means binary, as in Confluent's proxy.
_PRODUCE_DOC = request_body(
    {
        "application/vnd.kafka.binary.v2+json": v2.BinaryProduceRequest,
        "application/vnd.kafka.json.v2+json": v2.JsonProduceRequest,
        "application/vnd.kafka.string.v2+json": v2.StringProduceRequest,
        "application/vnd.kafka.avro.v2+json": v2.SchemaProduceRequest,
        "application/vnd.kafka.jsonschema.v2+json": v2.SchemaProduceRequest,
        "application/vnd.kafka.protobuf.v2+json": v2.SchemaProduceRequest,
    },
    required=False,
)


@router.post(
    "/topics/{topic}",
    operation_id="produceToTopic",
    responses={200: {"model": v2.ProduceResponse}, **BAD_BODY, **PRODUCE_ERRORS, **NOT_ACCEPTABLE},
    openapi_extra=_PRODUCE_DOC,
)
async def produce_to_topic(
    topic: str, request: Request, gw: GW, idempotency_key: IdempotencyKey = None
) -> Response:
    """Produce records; each goes to its `partition`, else by key (murmur2), else spread evenly."""
    return await serve_produce(request, gw, topic, None, idempotency_key)


@router.get(
    "/topics/{topic}/partitions",
    operation_id="listPartitions",
    dependencies=[ACCEPTS_V2],
    responses={200: {"model": list[v2.Partition]}, **ERRORS, **NOT_ACCEPTABLE},
)
async def list_partitions(topic: str, gw: GW) -> Response:
    return v2_response([partition_body(p) for p in (await gw.topics.describe(topic)).partitions])


@router.get(
    "/topics/{topic}/partitions/{partition}",
    operation_id="getPartition",
    dependencies=[ACCEPTS_V2],
    responses={200: {"model": v2.Partition}, **ERRORS, **NOT_ACCEPTABLE},
)
async def get_partition(topic: str, partition: int, gw: GW) -> Response:
    info = await gw.topics.check_partition(TopicPartition(topic, partition))
    return v2_response(partition_body(info.partitions[partition]))


@router.post(
    "/topics/{topic}/partitions/{partition}",
    operation_id="produceToPartition",
    responses={200: {"model": v2.ProduceResponse}, **BAD_BODY, **PRODUCE_ERRORS, **NOT_ACCEPTABLE},
    openapi_extra=_PRODUCE_DOC,
)
async def produce_to_partition(
    topic: str, partition: int, request: Request, gw: GW, idempotency_key: IdempotencyKey = None
) -> Response:
    """Produce records to one partition."""
    return await serve_produce(request, gw, topic, partition, idempotency_key)


# Served by ``fastpath.ProduceFastPath`` when it is on: it refuses to start should one of these
# routes take an input it does not supply.
FAST_PATH_ENDPOINTS = (produce_to_topic, produce_to_partition)


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    operation_id="getPartitionOffsets",
    dependencies=[ACCEPTS_V2],
    responses={200: {"model": v2.PartitionOffsets}, **ERRORS, **NOT_ACCEPTABLE},
)
async def partition_offsets(topic: str, partition: int, gw: GW) -> Response:
    """The first stored offset and the next offset to be written."""
    begin, end = await gw.topics.offsets(TopicPartition(topic, partition))
    return v2_response({"beginning_offset": begin, "end_offset": end})


_READ_DOC = records_doc({"$ref": "#/components/schemas/ReadRecords"})


@router.get(
    "/topics/{topic}/partitions/{partition}/records",
    operation_id="readPartition",
    responses={
        200: {"model": v2.ReadRecords, "content": {**_READ_DOC["content"], **EVENT_STREAM_DOC}},
        **ERRORS,
        **THROTTLED,
    },
)
async def read_partition(
    topic: str,
    partition: int,
    request: Request,
    gw: GW,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="First offset to read.")] = 0,
    max_bytes: Annotated[
        int | None, Query(ge=1, description="Byte budget; one record is always returned.")
    ] = None,
    timeout: Annotated[int, Query(ge=0, description="Long-poll wait in ms when nothing is there yet.")] = 0,
    format_: Annotated[
        EmbeddedFormat | None,
        Query(
            alias="format",
            description="The embedded format, instead of Accept (which a browser's EventSource cannot "
            "set to a Kafka media type); default binary.",
        ),
    ] = None,
    last_event_id: LastEventId = None,
) -> Response:
    """Stateless read by offset: no consumer instance, no group (native extension).

    The Accept header, or `format`, picks the embedded format (binary by default). With
    `Accept: text/event-stream`, the records from `offset` on as Server-Sent Events, as they arrive.
    """
    tp = TopicPartition(topic, partition)
    if wants_events(request):
        return await partition_events(
            request,
            gw,
            tp,
            format_ or "binary",
            offset=offset,
            max_bytes=max_bytes,
            last_event_id=last_event_id,
        )
    allowed = accepted_formats(request.headers.get("accept"))
    if allowed is not None and (not allowed or (format_ is not None and format_ not in allowed)):
        raise NotAcceptable("Accept one of " + ", ".join(content_type_for(f) for f in FORMATS))
    if format_ is not None:
        fmt: EmbeddedFormat = format_
    else:
        fmt = "binary" if allowed is None else next(f for f in FORMATS if f in allowed)
    quotas = gw.quotas
    client = ""
    if quotas.consume:
        client = client_of(request, quotas)
        await quotas.admit_consume(client, (topic,))
    settings = gw.settings
    part = await gw.topics.read(
        tp,
        offset,
        max_bytes=min(max_bytes or settings.consumer_max_bytes, settings.consumer_max_bytes),
        max_wait_ms=min(timeout, settings.consumer_max_timeout_ms),
        caller=caller_of(request.scope),
    )
    records = part.records
    if quotas.consume:
        await quotas.consumed(client, [(tp, records)])
    if is_schema_format(fmt) and records:  # what decodes; a record that does not is the client's to skip
        records = (await gw.serde.decode_fetched(SCHEMA_TYPES[fmt], tp, records)).leading()
    next_offset = records.offsets[-1] + 1 if records else max(offset, part.log_start_offset)
    after = orjson.dumps({"next_offset": next_offset, "high_watermark": part.high_watermark})
    return records_response(fmt, [(tp, records)], media_type=content_type_for(fmt), after=b"," + after[1:])
