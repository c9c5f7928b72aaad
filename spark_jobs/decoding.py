"""Decoded key and value columns: the plan made once when a read is planned, and the decoder of its tasks.

``plan_decoding`` runs where Spark plans the read (the data source's
``schema()``): it asks the registry for each decoded column's reader schema
and fixes the column's Spark type (``DecodePlan``, which Spark ships to the
tasks with the reader). ``Decoder`` runs in each task: per record, it takes
the schema id out of the wire format, gets that writer schema (parsed once per
executor process, ``schema_source.schemas_for``) and has the format's
``ColumnReader`` decode the payload into the column's type.

The decoded read's columns: ``topic, partition, offset, timestamp, key,
value, headers`` as ever, the decoded ones of a struct (or other) type; then,
for each decoded column, ``<side>_schema_id`` (the id in the record, null when
there is none) and, with ``onDecodeError=null``, ``<side>_error`` (why the
column is null, null when it was decoded). A null key or value (a tombstone)
is null, and no error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, IntegerType, StringType, StructField, StructType

from service.core.models import RecordColumns
from service.core.schemas.avro import AvroSchema
from service.core.schemas.json_schema import JsonSchema
from service.core.schemas.model import ConversionError, InvalidSchema, ParsedSchema
from service.core.schemas.protobuf import ProtobufSchema
from service.core.schemas.wire import unframe

from .avro_columns import AvroColumns
from .column_types import ColumnReader, DecodeError
from .decode_options import FORMATS, ColumnOptions, DecodeOptions, OnDecodeError, RegistryConfig, Side
from .json_columns import JsonColumns
from .offsets import OptionError
from .protobuf_columns import ProtobufColumns
from .schema_source import SchemaNotFound, Schemas, open_schema_source, schemas_for

if TYPE_CHECKING:
    from .credentials import BackendCredentials

_ARROW_ERRORS: Final = (pa.ArrowException, TypeError, ValueError, OverflowError)


class RecordDecodeError(ValueError):
    """A record whose key or value cannot be decoded, with ``onDecodeError=fail``; the message says
    where it is (topic, partition, offset) and why."""


def column_reader(reader_id: int, reader: ParsedSchema) -> ColumnReader:
    """The ``ColumnReader`` of a parsed reader schema (``UnsupportedSchema`` if no column holds it)."""
    if isinstance(reader, AvroSchema):
        return AvroColumns(reader_id, reader)
    if isinstance(reader, ProtobufSchema):
        return ProtobufColumns(reader_id, reader)
    if isinstance(reader, JsonSchema):
        return JsonColumns(reader_id, reader)
    raise OptionError(f"schema {reader_id} is of a type no column reads: {reader.schema.schema_type}")


@dataclass(frozen=True, slots=True)
class ColumnPlan:
    """One decoded column: its format, its reader schema and the Spark type that schema fixed."""

    side: Side
    format: str
    reader_id: int
    data_type: DataType


@dataclass(frozen=True, slots=True)
class DecodePlan:
    """What a decoded read's tasks need: the registry, the decoded columns, the error policy."""

    registry: RegistryConfig
    on_error: OnDecodeError
    key: ColumnPlan | None
    value: ColumnPlan | None

    @property
    def columns(self) -> list[ColumnPlan]:
        return [c for c in (self.key, self.value) if c is not None]

    def spark_schema(self, base: StructType) -> StructType:
        """``base`` (the binary read's schema) with the decoded columns and the extra ones."""
        decoded = {c.side: c for c in self.columns}
        fields = [
            StructField(f.name, decoded[f.name].data_type, True) if f.name in decoded else f
            for f in base.fields
        ]
        for column in self.columns:
            fields.append(StructField(f"{column.side}_schema_id", IntegerType(), True))
            if self.on_error == "null":
                fields.append(StructField(f"{column.side}_error", StringType(), True))
        return StructType(fields)


def plan_decoding(
    options: DecodeOptions, log: str, topic_spec: str, credentials: BackendCredentials | None = None
) -> DecodePlan | None:
    """The decoded columns of a read (None: nothing is decoded), their reader schemas asked of the
    registry now (the registry's topic in ``log`` read with ``credentials``); ``OptionError`` if a
    reader schema is missing or does not fit its format."""
    if not options.decoding:
        return None
    registry = options.registry(log, credentials)
    source = open_schema_source(registry)
    try:
        schemas = Schemas(source)
        key, value = (
            _plan_column(c, schemas, registry, topic_spec) if c.decoded else None
            for c in (options.key, options.value)
        )
    finally:
        source.close()
    return DecodePlan(registry, options.on_error, key, value)


def _plan_column(
    options: ColumnOptions, schemas: Schemas, registry: RegistryConfig, topic: str
) -> ColumnPlan:
    option = f"{options.side}SchemaId" if options.schema_id is not None else f"{options.side}Subject"
    try:
        if options.schema_id is not None:
            reader_id, described = options.schema_id, f"schema {options.schema_id}"
        else:
            subject = options.subject_for(topic)
            reader_id = schemas.version(subject, options.version)
            described = f"schema {reader_id} ({subject} version {options.version})"
        reader = schemas.parsed(reader_id)
    except SchemaNotFound as exc:
        raise OptionError(f"{option}: no reader schema for the {options.side} column: {exc}") from None
    except InvalidSchema as exc:
        raise OptionError(f"{option}: the reader schema cannot be parsed: {exc}") from None
    expected = FORMATS[options.format]
    if reader.schema.schema_type is not expected:
        raise OptionError(
            f"{options.side}Format {options.format}: the reader schema, {described} of "
            f"{registry.describe()}, is {reader.schema.schema_type.value}"
        )
    data_type = column_reader(reader_id, reader).data_type
    return ColumnPlan(options.side, options.format, reader_id, data_type)


class _ColumnDecoder:
    """Decodes one column in one task: writer schemas through the process's ``Schemas``, and what
    failed remembered for the task (a task full of one bad id asks the registry once)."""

    def __init__(self, plan: ColumnPlan, schemas: Schemas, registry: RegistryConfig) -> None:
        self.plan = plan
        self._schemas = schemas
        self._registry = registry
        self.reader = column_reader(plan.reader_id, schemas.parsed(plan.reader_id))
        if self.reader.data_type != plan.data_type:
            raise ValueError(
                f"the {plan.side} column's reader schema {plan.reader_id} gives another Spark type now "
                f"than when the read was planned"
            )
        self._failed: dict[int, DecodeError] = {}

    def _writer(self, schema_id: int) -> ParsedSchema:
        failed = self._failed.get(schema_id)
        if failed is not None:
            raise failed
        try:
            return self._schemas.parsed(schema_id)
        except SchemaNotFound:
            failed = DecodeError(f"schema id {schema_id} is not in {self._registry.describe()}")
        except InvalidSchema as exc:
            failed = DecodeError(f"schema {schema_id} cannot be parsed: {exc}")
        self._failed[schema_id] = failed
        raise failed

    def decode(self, data: bytes) -> tuple[int, Any]:
        """The schema id of ``data`` and its decoded value; ``DecodeError`` (with the id, when
        ``data`` has one) if it cannot be decoded."""
        try:
            schema_id, payload = unframe(data)
        except ConversionError as exc:
            raise DecodeError(str(exc)) from None
        try:
            return schema_id, self.reader.read(schema_id, self._writer(schema_id), payload)
        except (DecodeError, ConversionError) as exc:
            raise DecodeError(str(exc), schema_id) from None
        except RecursionError:
            raise DecodeError("the value is nested too deeply", schema_id) from None


class Decoder:
    """The decoded columns of a task's records, as Arrow arrays in the read's schema."""

    def __init__(self, plan: DecodePlan, base: StructType) -> None:
        self.plan = plan
        schemas = schemas_for(plan.registry)
        self._columns = [_ColumnDecoder(c, schemas, plan.registry) for c in plan.columns]
        self.arrow_schema = to_arrow_schema(plan.spark_schema(base), timezone="UTC")

    def columns(self, topic: str, partition: int, records: RecordColumns) -> dict[str, pa.Array]:
        """The arrays of the decoded and extra columns by name; ``RecordDecodeError`` on a record
        that cannot be decoded when the policy is to fail."""
        out: dict[str, pa.Array] = {}
        for column in self._columns:
            out.update(self._column(column, topic, partition, records))
        return out

    def _column(
        self, column: _ColumnDecoder, topic: str, partition: int, records: RecordColumns
    ) -> dict[str, pa.Array]:
        side = column.plan.side
        n = len(records)
        values: list[Any] = [None] * n
        ids: list[int | None] = [None] * n
        errors: list[str | None] = [None] * n

        def failed(i: int, why: str) -> None:
            if self.plan.on_error == "fail":
                raise RecordDecodeError(
                    f"{topic}-{partition} at offset {records.offsets[i]}: the {side} cannot be decoded: "
                    f"{why} (onDecodeError=null reads such records as null, the reason in {side}_error)"
                )
            values[i], errors[i] = None, why

        for i, data in enumerate(records.keys if side == "key" else records.values):
            if data is None:
                continue
            try:
                ids[i], values[i] = column.decode(data)
            except DecodeError as exc:
                ids[i] = exc.schema_id
                failed(i, str(exc))
        out: dict[str, pa.Array] = {side: _array(values, self.arrow_schema.field(side).type, failed)}
        out[f"{side}_schema_id"] = pa.array(ids, pa.int32())
        if self.plan.on_error == "null":
            out[f"{side}_error"] = pa.array(errors, pa.string())
        return out


def _array(values: list[Any], arrow_type: pa.DataType, failed: Callable[[int, str], None]) -> pa.Array:
    """``values`` as an Arrow array; a value Arrow refuses is reported through ``failed`` (which
    raises, or nulls it in ``values``), so one bad value never fails a batch obscurely."""
    try:
        return pa.array(values, arrow_type)
    except _ARROW_ERRORS:
        pass
    for i, value in enumerate(values):
        try:
            pa.array([value], arrow_type)
        except _ARROW_ERRORS as exc:
            failed(i, f"the decoded value does not fit the column's type: {exc}")
    return pa.array(values, arrow_type)
