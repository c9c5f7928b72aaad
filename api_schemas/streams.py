"""The WebSocket stream protocol, version 1: JSON text messages, each ``{"v": 1, "type": …}``.

A client connects to ``ws(s)://…/consumers/{group}/instances/{instance}/records`` (with
``?cursor=`` to resume at a cursor it was sent; it may ask for the subprotocol ``brokergate.v1``).
The gateway sends ``hello``, then a ``rebalance`` naming the instance's partitions and where
each starts, then records as the client's credit allows. Messages, by direction::

    client → gateway
      credit    {"records": n, "bytes": b}        the gateway may send n more records and b more
                                                  bytes (as max_bytes counts them); additive
      commit    {"id"?, "offsets"?: [{"topic", "partition", "offset"}]}
                                                  as POST …/offsets: each the last processed;
                                                  without offsets, everything sent so far
      seek      {"id"?, "offsets"?: [{"topic", "partition", "offset"}],
                 "timestamps"?: [{"topic", "partition", "timestamp"}],
                 "beginning"?: [{"topic", "partition"}], "end"?: [{"topic", "partition"}]}
                                                  as POST …/positions[/beginning|/end]
      produce   {"id"?, "topic", "partition"?, "format"?, "records": [...],
                 "key_schema"?, "key_schema_id"?, "value_schema"?, "value_schema_id"?}
                                                  as POST /topics/{topic}[/partitions/{p}] in
                                                  that format (default: the instance's)

    gateway → client
      hello      {"group", "instance", "format", "limits": {"credit_records", "credit_bytes",
                  "message_bytes", "batch_bytes"}}
      rebalance  {"partitions": [{"topic", "partition"}], "cursor", "positions": [...]}
      records    {"cursor", "positions": [{"topic", "partition", "offset"}], "bytes",
                  "records": [the array a poll returns]}
      committed  {"id", "offsets": [{"topic", "partition", "offset"}]}
      seeked     {"id", "cursor", "positions"}      where the instance stands after the seek
      produced   {"id", "key_schema_id", "value_schema_id", "offsets": [...]}   (the v2 body)
      error      {"id"?, "error_code", "message"}   Confluent's body; with the id of the message
                                                  it answers, without one it is about the stream
      end        {"reason": "shutdown"|"deleted"|"error", "cursor", "positions",
                  "error_code"?, "message"?}      the last message; the socket closes after it

``positions`` and ``cursor`` say the same thing, the next offset of every partition the
instance owns: as a list, and as the text a reconnect's ``?cursor=`` takes (the SSE ``id``).
An ``id`` is any string (up to 200 characters) or integer the client picks; it comes back in the
answer. A message that cannot be read is answered with an ``error`` and the stream goes on.

This module is the wire format only: the models clients' messages are checked against, and the
rendering of the gateway's. ``service.api.streams.socket`` serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter

from service.core.models import EmbeddedFormat, TopicPartition
from service.core.rules import MAX_OFFSET

from .v2 import TopicPartitionOffset, TopicPartitionRef, TopicPartitionTimestamp

VERSION: Final = 1
SUBPROTOCOL: Final = "brokergate.v1"

# Strict: a JSON true or 1.0 is no id (an answer must carry the id as the client sent it).
RequestId = Annotated[str, Field(max_length=200)] | StrictInt


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    v: Literal[1] = 1


class Credit(_Message):
    type: Literal["credit"]
    records: int = Field(0, ge=0, le=MAX_OFFSET)
    bytes: int = Field(0, ge=0, le=MAX_OFFSET)


class Commit(_Message):
    type: Literal["commit"]
    id: RequestId | None = None
    offsets: list[TopicPartitionOffset] | None = None


class Seek(_Message):
    type: Literal["seek"]
    id: RequestId | None = None
    offsets: list[TopicPartitionOffset] | None = None
    timestamps: list[TopicPartitionTimestamp] | None = None
    beginning: list[TopicPartitionRef] | None = None
    end: list[TopicPartitionRef] | None = None


class Produce(_Message):
    """A produce's envelope; its records (and schemas) are read by the produce machinery, from the
    message itself, as a REST produce body's are."""

    type: Literal["produce"]
    id: RequestId | None = None
    topic: str
    partition: int | None = Field(None, ge=0)
    format: EmbeddedFormat | None = None


ClientMessage = Annotated[Credit | Commit | Seek | Produce, Field(discriminator="type")]
CLIENT_MESSAGE: Final[TypeAdapter[Credit | Commit | Seek | Produce]] = TypeAdapter(ClientMessage)
TYPES: Final = ("credit", "commit", "seek", "produce")


def request_id(data: Any) -> Any:
    """The ``id`` of a message that may not be valid, if it carries a usable one (for its error)."""
    if isinstance(data, dict):
        found = data.get("id")
        if (isinstance(found, str) and len(found) <= 200) or (
            isinstance(found, int) and not isinstance(found, bool)
        ):
            return found
    return None


# --- the gateway's messages ------------------------------------------------------------


def _head(kind: str, request: Any = None) -> dict[str, Any]:
    head: dict[str, Any] = {"v": VERSION, "type": kind}
    if request is not None:
        head["id"] = request
    return head


def positions_body(positions: Mapping[TopicPartition, int]) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition, "offset": off} for tp, off in sorted(positions.items())
    ]


def hello(group: str, instance: str, fmt: EmbeddedFormat, limits: Mapping[str, int]) -> bytes:
    return orjson.dumps(
        {**_head("hello"), "group": group, "instance": instance, "format": fmt, "limits": limits}
    )


def rebalance(
    partitions: tuple[TopicPartition, ...], positions: Mapping[TopicPartition, int], cursor: str
) -> bytes:
    body = [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]
    return orjson.dumps(
        {**_head("rebalance"), "partitions": body, "cursor": cursor, "positions": positions_body(positions)}
    )


def records(
    cursor: str, positions: Mapping[TopicPartition, int], size: int, array: bytes
) -> tuple[bytes, bytes, bytes]:
    """A ``records`` message around ``array``, the records' JSON array as a poll renders it: the
    message is the three parts one after the other (joined, they would copy the array once more)."""
    head = orjson.dumps(
        {**_head("records"), "cursor": cursor, "positions": positions_body(positions), "bytes": size}
    )
    return head[:-1] + b',"records":', array, b"}"


def committed(request: Any, offsets: Mapping[TopicPartition, int]) -> bytes:
    return orjson.dumps({**_head("committed", request), "offsets": positions_body(offsets)})


def seeked(request: Any, cursor: str, positions: Mapping[TopicPartition, int]) -> bytes:
    return orjson.dumps(
        {**_head("seeked", request), "cursor": cursor, "positions": positions_body(positions)}
    )


def produced(request: Any, response: bytes) -> bytes:
    """A ``produced`` message around ``response``, the v2 produce response's JSON object."""
    return orjson.dumps(_head("produced", request))[:-1] + b"," + response[1:]


def error(request: Any, code: int, message: str) -> bytes:
    return orjson.dumps({**_head("error", request), "error_code": code, "message": message})


def end(reason: str, cursor: str, positions: Mapping[TopicPartition, int], body: Mapping[str, Any]) -> bytes:
    """The last message: why (``body``: the reason and, for an error, Confluent's error body) and
    where the stream stood."""
    return orjson.dumps(
        {**_head("end"), **body, "reason": reason, "cursor": cursor, "positions": positions_body(positions)}
    )
