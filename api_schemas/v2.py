"""Request and response bodies of the Confluent REST Proxy v2 API (plus extensions).

Field names and shapes follow Confluent's v2 entities; brokergate's additions
(record ``timestamp`` and ``headers``, ``timestamps`` seeks, instance timeout
and assignment strategy) are optional fields that no existing client sends.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.core.rules import MAX_OFFSET, MAX_PARTITION


class ErrorBody(BaseModel):
    error_code: int = Field(description="Confluent error code, e.g. 40401 for an unknown topic.")
    message: str


class Header(BaseModel):
    name: str = Field(min_length=1)
    value: str | None = Field(None, description="Base64 of the header value, or null.")


class _RecordOptions(BaseModel):
    partition: int | None = Field(None, ge=0, description="Target partition; default: by key, else spread.")
    headers: list[Header] | None = None
    timestamp: int | datetime | None = Field(
        None, description="Milliseconds since epoch or ISO 8601; default now."
    )


class BinaryRecord(_RecordOptions):
    key: str | None = Field(None, description="Base64 of the key bytes, or null.")
    value: str | None = Field(None, description="Base64 of the value bytes, or null.")


class JsonRecord(_RecordOptions):
    key: Any = Field(None, description="Any JSON value, stored as its JSON text; null for none.")
    value: Any = Field(None, description="Any JSON value, stored as its JSON text; null for none.")


class StringRecord(_RecordOptions):
    key: str | None = Field(None, description="UTF-8 text, or null.")
    value: str | None = Field(None, description="UTF-8 text, or null.")


class BinaryProduceRequest(BaseModel):
    """Records for ``application/vnd.kafka.binary.v2+json`` (and plain ``application/json``)."""

    records: list[BinaryRecord] = Field(min_length=1)


class JsonProduceRequest(BaseModel):
    """Records for ``application/vnd.kafka.json.v2+json``."""

    records: list[JsonRecord] = Field(min_length=1)


class StringProduceRequest(BaseModel):
    """Records for ``application/vnd.kafka.string.v2+json`` (a brokergate extension)."""

    records: list[StringRecord] = Field(min_length=1)


class SchemaRecord(_RecordOptions):
    key: Any = Field(None, description="The key as JSON its schema describes, or null.")
    value: Any = Field(None, description="The value as JSON its schema describes, or null.")


class SchemaProduceRequest(BaseModel):
    """Records for ``application/vnd.kafka.{avro,jsonschema,protobuf}.v2+json``: keys and values
    as JSON, stored in the schema-registry wire format. Each side's schema is given by id, or
    inline (registered under its subject — ``{topic}-key`` / ``{topic}-value`` by default — if
    it is not there yet); a side with any non-null record needs one."""

    key_schema: str | None = Field(
        None, description="The key schema's text (Avro JSON, JSON Schema, .proto)."
    )
    key_schema_id: int | None = Field(None, ge=0, description="The key schema's registry id.")
    value_schema: str | None = Field(None, description="The value schema's text.")
    value_schema_id: int | None = Field(None, ge=0, description="The value schema's registry id.")
    records: list[SchemaRecord] = Field(min_length=1)


class PartitionOffset(BaseModel):
    partition: int
    offset: int | None
    error_code: int | None = None
    error: str | None = None


class ProduceResponse(BaseModel):
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    offsets: list[PartitionOffset]


BoolLike = bool | Literal["true", "false"]


class CreateConsumerRequest(BaseModel):
    """Confluent's consumer instance config and brokergate's; a key neither takes is refused (422)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: str | None = None
    format: Literal["binary", "json", "string", "avro", "jsonschema", "protobuf"] = "binary"
    auto_offset_reset: Literal["earliest", "latest", "none"] | None = Field(None, alias="auto.offset.reset")
    auto_commit_enable: BoolLike | None = Field(None, alias="auto.commit.enable")
    fetch_min_bytes: int | str | None = Field(None, alias="fetch.min.bytes")
    consumer_request_timeout_ms: int | str | None = Field(None, alias="consumer.request.timeout.ms")
    consumer_instance_timeout_ms: int | str | None = Field(None, alias="consumer.instance.timeout.ms")
    partition_assignment_strategy: str | None = Field(None, alias="partition.assignment.strategy")

    @field_validator("auto_commit_enable", mode="before")
    @classmethod
    def _bool_like(cls, v: object) -> object:
        # Confluent clients send "true"/"false" strings, in any case.
        return v.lower() if isinstance(v, str) else v

    @field_validator("format", mode="before")
    @classmethod
    def _format_in_any_case(cls, v: object) -> object:
        # Confluent's proxy upper-cases the format before it looks it up: "BINARY" is binary.
        return v.lower() if isinstance(v, str) else v

    @field_validator("fetch_min_bytes", "consumer_request_timeout_ms", "consumer_instance_timeout_ms")
    @classmethod
    def _int_like(cls, v: int | str | None) -> int | None:
        if v is None:
            return None
        try:
            return int(v)
        except ValueError as exc:
            raise ValueError("must be an integer") from exc


class CreateConsumerResponse(BaseModel):
    instance_id: str
    base_uri: str


class SubscriptionRequest(BaseModel):
    """``topics`` or ``topic_pattern`` (a regular expression matched against whole names). As in
    Confluent's proxy: given both, ``topics`` is taken; given neither, nothing changes; an empty
    ``topics`` list unsubscribes (Kafka's consumer does)."""

    topics: list[str] | None = None
    topic_pattern: str | None = None


class SubscriptionResponse(BaseModel):
    topics: list[str]
    topic_pattern: str | None = None
    missing_topics: list[str] | None = Field(
        None,
        description="A brokergate extension, there only when some are: the subscribed topics that do "
        "not exist (yet). The subscription holds them, as Kafka's consumer does.",
    )


class TopicPartitionRef(BaseModel):
    topic: str
    partition: int = Field(ge=0, le=MAX_PARTITION)


class PartitionsRequest(BaseModel):
    partitions: list[TopicPartitionRef]


class AssignmentResponse(BaseModel):
    partitions: list[TopicPartitionRef]


class TopicPartitionOffset(BaseModel):
    topic: str
    partition: int = Field(ge=0, le=MAX_PARTITION)
    offset: int = Field(ge=0, le=MAX_OFFSET)


class CommitRequest(BaseModel):
    offsets: list[TopicPartitionOffset] | None = None


class CommittedOffset(BaseModel):
    topic: str
    partition: int
    offset: int = Field(description="Next offset the group reads; -1 if never committed.")
    metadata: str = ""


class CommittedOffsetsResponse(BaseModel):
    offsets: list[CommittedOffset]


class TopicPartitionTimestamp(BaseModel):
    topic: str
    partition: int = Field(ge=0, le=MAX_PARTITION)
    timestamp: int | datetime = Field(description="Milliseconds since epoch or ISO 8601.")


class SeekRequest(BaseModel):
    offsets: list[TopicPartitionOffset] | None = None
    timestamps: list[TopicPartitionTimestamp] | None = None


class ConsumerRecord(BaseModel):
    topic: str
    key: Any
    value: Any
    partition: int
    offset: int
    timestamp: int
    headers: list[Header]


class Replica(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class Partition(BaseModel):
    partition: int
    leader: int
    replicas: list[Replica]


class Topic(BaseModel):
    name: str
    configs: dict[str, str]
    partitions: list[Partition]


class PartitionOffsets(BaseModel):
    beginning_offset: int
    end_offset: int


class Brokers(BaseModel):
    brokers: list[int]


class ReadRecords(BaseModel):
    """A stateless read: records from one partition starting at an offset."""

    records: list[ConsumerRecord]
    next_offset: int
    high_watermark: int
