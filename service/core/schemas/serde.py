"""Producing and consuming with schemas: JSON in and out, the schema-registry wire format stored.

A produce request in the ``avro``, ``jsonschema`` or ``protobuf`` format names the schema of
its keys and of its values, by id or inline; ``Serde.writer`` turns that into a ``Writer``
(the schema's id and codec), registering an inline schema under its subject first — the
subject named by the ``SubjectNameStrategy``, as Confluent's serializers name it — and taking
a schema given by id only if it is a version of that subject, as Confluent's proxy does. A writer
frames what it encodes exactly as Confluent's serializers do, so every Kafka tool with a
schema-registry deserializer reads the records.

A consumer in one of those formats is given decoded JSON: ``Serde.decode`` reads the schema id
of each stored key and value, fetches each schema once, and decodes; it stops at the first
record it cannot decode so that a consumer is never moved past a record it was not given.

Schemas come through the ``SchemaResolver`` port: the embedded registry or an external one.
Ids name one schema forever, so what this module learns of them is kept (bounded).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import chain
from typing import Final, Generic, TypeVar

from service.errors import (
    BackendUnavailable,
    ConversionError,
    IncompatibleSchema,
    InvalidRecordSchema,
    InvalidSchemaError,
    KeySchemaMissing,
    RegistryError,
    SchemaNotFound,
    SerializationError,
    SubjectNotFound,
    ValueSchemaMissing,
)

from ..models import RecordColumns, TopicPartition
from ..ports import SchemaResolver
from .formats import parse
from .model import JSON, Codec, InvalidSchema, ParsedSchema, Schema, SchemaType
from .model import ConversionError as CodecError
from .wire import frame, unframe

# The v2 API's schema formats and the registry's schema types they take.
_DECODE_ON_LOOP: Final = 200  # records decoded on the event loop at once; more go to a worker thread

SCHEMA_TYPES: Final[dict[str, SchemaType]] = {
    "avro": SchemaType.AVRO,
    "jsonschema": SchemaType.JSON,
    "protobuf": SchemaType.PROTOBUF,
}

# The formats' names as Confluent's proxy prints them (its EmbeddedFormat).
_FORMAT_NAMES: Final[dict[SchemaType, str]] = {
    SchemaType.AVRO: "AVRO",
    SchemaType.JSON: "JSONSCHEMA",
    SchemaType.PROTOBUF: "PROTOBUF",
}

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SubjectNameStrategy(StrEnum):
    """The subject an inline schema is registered under, as Confluent's serializers choose it:
    ``topic`` — ``{topic}-key`` / ``{topic}-value`` (TopicNameStrategy, the default);
    ``record`` — the record's full name (RecordNameStrategy);
    ``topic_record`` — ``{topic}-{record full name}`` (TopicRecordNameStrategy)."""

    TOPIC = "topic"
    RECORD = "record"
    TOPIC_RECORD = "topic_record"


def subject_name(strategy: SubjectNameStrategy, topic: str, *, is_key: bool, record: str | None) -> str:
    """The subject of a key's or value's schema under ``strategy``; ``record`` is the schema's
    record name (an Avro named type, a Protobuf message, a JSON Schema title)."""
    if strategy is SubjectNameStrategy.TOPIC:
        return f"{topic}-{'key' if is_key else 'value'}"
    if not record:
        raise InvalidRecordSchema(
            f"The gateway names subjects by record name ({strategy.value}), and this "
            f"{'key' if is_key else 'value'} schema names no record: give an Avro record, enum or "
            "fixed, a Protobuf message, or a JSON Schema with a title."
        )
    return record if strategy is SubjectNameStrategy.RECORD else f"{topic}-{record}"


def _serialization(what: str, refusal: RegistryError) -> SerializationError:
    """Confluent's proxy's 42207 for a registry's ``refusal`` of ``what`` it asked: its message,
    then the registry client's (the registry's message and error code)."""
    return SerializationError(
        f"Error serializing message. {what}\n{refusal.message}; error code: {int(refusal.error_code)}"
    )


class _Lru(Generic[K, V]):
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Writer:
    """A key's or value's schema as a produce request uses it: its id and its codec."""

    schema_id: int
    schema_type: SchemaType
    codec: Codec
    header: bytes = field(init=False, repr=False, compare=False)  # the same before every value

    def __post_init__(self) -> None:
        object.__setattr__(self, "header", frame(self.schema_id, b""))

    def encode(self, value: JSON) -> bytes:
        """``value`` in the wire format; the codec's ``ConversionError`` if it does not fit."""
        return self.header + self.codec.encode(value)


@dataclass(frozen=True, slots=True)
class Decoded:
    """What ``Serde.decode`` made of a partition's records: the first ``count`` of them, with the
    JSON of each key and value (``RecordColumns.decoded``); ``error`` says why the record after
    them could not be decoded (None when all were)."""

    records: RecordColumns
    error: ConversionError | None

    @property
    def count(self) -> int:
        return len(self.records)

    def leading(self) -> RecordColumns:
        """The records that decoded; if none did, the first one's error is raised."""
        if self.error is not None and not self.records:
            raise self.error
        return self.records


class Serde:
    """Writers for produce requests and decoding for consumers, over a ``SchemaResolver``.

    Collaborators: the resolver (ids and schemas), the format codecs (``formats``), the wire
    format (``wire``). Safe to share between requests: its caches only ever gain what ids name.
    """

    def __init__(
        self,
        resolver: SchemaResolver,
        *,
        strategy: SubjectNameStrategy = SubjectNameStrategy.TOPIC,
        cache_size: int = 1024,
    ) -> None:
        self._resolver = resolver
        self.strategy = strategy
        self._writers: _Lru[tuple[object, ...], Writer] = _Lru(cache_size)
        self._schemas: _Lru[int, ParsedSchema] = _Lru(cache_size)

    # --- produce --------------------------------------------------------------------------

    async def writer(
        self,
        schema_type: SchemaType,
        topic: str,
        *,
        is_key: bool,
        text: str | None = None,
        schema_id: int | None = None,
    ) -> Writer:
        """The writer of a produce request's ``key_schema[_id]`` or ``value_schema[_id]``.

        By id: that schema, which must be of ``schema_type`` and a version of its subject. Inline:
        the schema registered under its subject (looked up first, so that a schema already there
        takes no registry write), its compatibility checked by the registry as for any
        registration. What the registry refuses is a ``SerializationError``, as in Confluent's proxy.
        """
        what = "key" if is_key else "value"
        if schema_id is not None:
            return await self._writer_by_id(schema_type, topic, is_key=is_key, schema_id=schema_id)
        if text is None:
            raise (KeySchemaMissing if is_key else ValueSchemaMissing)(
                f"The records have {what}s but the request gives no {what}_schema or {what}_schema_id."
            )
        key = ("text", schema_type, topic, is_key, text)
        cached = self._writers.get(key)
        if cached is not None:
            return cached
        schema = Schema(schema_type, text)
        try:  # in a worker thread: a large schema, or protoc compiling a .proto, takes milliseconds
            parsed = await asyncio.to_thread(parse, schema, {})
        except InvalidSchema as exc:
            raise InvalidRecordSchema(
                f"The {what}_schema is not a valid {schema_type.value} schema: {exc}"
            ) from None
        subject = subject_name(self.strategy, topic, is_key=is_key, record=parsed.record_name())
        try:
            found = await self._resolver.lookup(subject, schema)
            if found is None:
                found, _ = await self._resolver.register(subject, schema)
        except InvalidSchemaError as exc:  # the registry's 42201 means something else on this API
            raise InvalidRecordSchema(
                f"The {what}_schema was refused by the registry: {exc.message}"
            ) from None
        except IncompatibleSchema as exc:  # Confluent's proxy: the registry's refusal is its 42207
            raise _serialization(
                f"Error when registering schema. format = {_FORMAT_NAMES[schema_type]}, subject = {subject}, "
                f"schema = {parsed.canonical()}",
                exc,
            ) from None
        writer = Writer(found, schema_type, parsed.codec())
        self._writers.put(key, writer)
        self._schemas.put(found, parsed)
        return writer

    async def _writer_by_id(
        self, schema_type: SchemaType, topic: str, *, is_key: bool, schema_id: int
    ) -> Writer:
        """The writer of schema ``schema_id``, which must be a version of the subject the
        strategy names for ``topic`` (as Confluent's proxy asks the registry for the schema's
        version under that subject): else the registry's refusal as a ``SerializationError``."""
        try:
            parsed = await self.schema(schema_id)
        except SchemaNotFound as exc:
            raise _serialization(f"Error when fetching schema by id. schemaId = {schema_id}", exc) from None
        if parsed.schema.schema_type is not schema_type:
            raise InvalidRecordSchema(
                f"{'key' if is_key else 'value'}_schema_id {schema_id} is a "
                f"{parsed.schema.schema_type.value} schema; this request's format takes "
                f"{schema_type.value} schemas."
            )
        subject = subject_name(self.strategy, topic, is_key=is_key, record=parsed.record_name())
        key = ("id", schema_id, subject)
        cached = self._writers.get(key)
        if cached is not None:
            return cached
        if await self._resolver.lookup(subject, parsed.schema) is None:
            refusal: RegistryError
            try:  # which of the registry's two answers: no such subject, or not a version of it
                await self._resolver.version(subject, "latest")
                refusal = SchemaNotFound("Schema not found")
            except SubjectNotFound as exc:
                refusal = exc
            raise _serialization(
                f"Error when fetching schema version. subject = {subject}, schema = {parsed.canonical()}",
                refusal,
            )
        writer = Writer(schema_id, schema_type, parsed.codec())
        self._writers.put(key, writer)
        return writer

    # --- consume --------------------------------------------------------------------------

    async def schema(self, schema_id: int) -> ParsedSchema:
        """The schema ``schema_id`` names, fetched once."""
        parsed = self._schemas.get(schema_id)
        if parsed is None:
            parsed = await self._resolver.schema_by_id(schema_id)
            self._schemas.put(schema_id, parsed)
        return parsed

    async def prepare(self, records: RecordColumns) -> None:
        """Fetch the schemas the keys and values of ``records`` name, so that ``decode`` finds
        them (a schema that cannot be had is ``decode``'s to report, at its record)."""
        ids: set[int] = set()
        for data in chain(records.keys, records.values):
            if data is not None and len(data) >= 5 and data[0] == 0:
                ids.add(int.from_bytes(data[1:5], "big"))
        for schema_id in ids:
            if self._schemas.get(schema_id) is None:
                with contextlib.suppress(SchemaNotFound, InvalidSchemaError):
                    await self.schema(schema_id)

    async def decode_fetched(
        self, schema_type: SchemaType, tp: TopicPartition, records: RecordColumns
    ) -> Decoded:
        """``decode`` of records fetched from ``tp``, their schemas fetched first (``prepare``);
        more than a few hundred are decoded in a worker thread, off the event loop."""
        await self.prepare(records)
        where = f"{tp.topic!r} partition {tp.partition}"
        if len(records) > _DECODE_ON_LOOP:
            return await asyncio.to_thread(self.decode, schema_type, records, where=where)
        return self.decode(schema_type, records, where=where)

    def decode(self, schema_type: SchemaType, records: RecordColumns, *, where: str) -> Decoded:
        """The leading records of a partition's ``records`` whose keys and values decode with the
        schemas ``prepare`` fetched, with their JSON (``where`` names the partition in errors)."""
        keys: list[JSON] = []
        values: list[JSON] = []
        for offset, key, value in zip(records.offsets, records.keys, records.values, strict=True):
            try:
                keys.append(None if key is None else self._decode_one(schema_type, key, "key"))
                values.append(None if value is None else self._decode_one(schema_type, value, "value"))
            except ConversionError as exc:
                return Decoded(
                    records[: len(values)].with_decoded(keys[: len(values)], values),
                    ConversionError(
                        f"The record at {where} offset {offset} cannot be read as {schema_type.value}: "
                        f"{exc.message}. Seek past it, or read it with a binary consumer."
                    ),
                )
        return Decoded(records.with_decoded(keys, values), None)

    def _decode_one(self, schema_type: SchemaType, data: bytes, what: str) -> JSON:
        try:
            schema_id, payload = unframe(data)
        except CodecError as exc:
            raise ConversionError(f"its {what} is {exc}") from None
        parsed = self._schemas.get(schema_id)
        if parsed is None:
            raise ConversionError(f"its {what}'s schema id {schema_id} is not in the schema registry")
        if parsed.schema.schema_type is not schema_type:
            raise ConversionError(
                f"its {what} was written with schema {schema_id}, a {parsed.schema.schema_type.value} schema"
            )
        try:
            return parsed.codec().decode(payload)
        except CodecError as exc:
            raise ConversionError(f"its {what} does not decode with schema {schema_id}: {exc}") from None


def no_registry(fmt: str) -> str:
    """Why records in the schema format ``fmt`` cannot be read here: no registry is configured."""
    return f"The {fmt} format needs a schema registry, and there is none."


async def decode_in(serde: Serde | None, fmt: str, tp: TopicPartition, records: RecordColumns) -> Decoded:
    """Decode ``records`` of ``tp`` in the schema format ``fmt`` with ``Serde.decode_fetched``;
    raise ``BackendUnavailable`` (503) when there is no registry to decode them with."""
    if serde is None:
        raise BackendUnavailable(no_registry(fmt))
    return await serde.decode_fetched(SCHEMA_TYPES[fmt], tp, records)
