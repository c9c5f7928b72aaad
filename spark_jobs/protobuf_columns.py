"""Protobuf messages as a Spark column: a struct built from the reader schema's message descriptor.

The column is the schema's first message type (what Confluent's serializers
write by default), a struct of its fields under their ``.proto`` names, as
Spark's ``from_protobuf`` maps them: int32/sint32/sfixed32 → int;
int64/sint64/sfixed64 and uint32/fixed32 → long; uint64/fixed64 →
decimal(20, 0) (every value fits); float, double, bool, string, bytes → their
Spark types; enums → string (the value's name, or its number when the schema
does not name it); messages → struct; repeated → array; maps → map. Among the
well-known types, ``google.protobuf.Timestamp`` is a timestamp and the
wrappers (``Int64Value``, …) their nullable value; ``Struct``, ``Value``,
``ListValue``, ``Any``, ``Duration`` and ``FieldMask`` are their protobuf JSON
as a string. A field with presence (a message, a oneof member, ``optional``)
that is not set is null; the others hold their default. A message type that
contains itself has no Spark type: ``UnsupportedSchema`` when the job is planned.

A payload names its message by Confluent's message-index list. It is read
with the reader's message type when it is that type (the same full name) or
the first message of its own schema (a renamed or moved root message): fields
match by number, which is how protobuf evolves. Any other message is a
``DecodeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import orjson
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from service.core.schemas.model import ConversionError, ParsedSchema
from service.core.schemas.protobuf import ProtobufSchema, read_message_indexes

from .column_types import Convert, DecodeError, Shape, UnsupportedSchema, identity

F = FieldDescriptor
_SCALARS: Final[dict[int, tuple[DataType, Convert]]] = {
    F.TYPE_DOUBLE: (DoubleType(), identity),
    F.TYPE_FLOAT: (FloatType(), identity),
    F.TYPE_INT32: (IntegerType(), identity),
    F.TYPE_SINT32: (IntegerType(), identity),
    F.TYPE_SFIXED32: (IntegerType(), identity),
    F.TYPE_INT64: (LongType(), identity),
    F.TYPE_SINT64: (LongType(), identity),
    F.TYPE_SFIXED64: (LongType(), identity),
    F.TYPE_UINT32: (LongType(), identity),
    F.TYPE_FIXED32: (LongType(), identity),
    F.TYPE_UINT64: (DecimalType(20, 0), Decimal),
    F.TYPE_FIXED64: (DecimalType(20, 0), Decimal),
    F.TYPE_BOOL: (BooleanType(), identity),
    F.TYPE_STRING: (StringType(), identity),
    F.TYPE_BYTES: (BinaryType(), identity),
}
_TIMESTAMP: Final = "google.protobuf.Timestamp"
_WRAPPERS: Final = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
_AS_JSON: Final = frozenset(
    f"google.protobuf.{name}" for name in ("Struct", "Value", "ListValue", "Any", "Duration", "FieldMask")
)


def _as_json(message: Message) -> str:
    try:
        return orjson.dumps(json_format.MessageToDict(message)).decode()
    except (TypeError, ValueError, orjson.JSONEncodeError) as exc:  # e.g. an Any of an unknown type
        raise DecodeError(f"the {message.DESCRIPTOR.full_name} has no JSON form: {exc}") from None


class _Shaper:
    """Walks a message descriptor, building the ``Shape`` of each message and field."""

    def __init__(self) -> None:
        self._open: list[str] = []

    def message(self, descriptor: Descriptor, where: str) -> Shape:
        name = descriptor.full_name
        if name == _TIMESTAMP:
            return Shape(TimestampType(), True, lambda m: m.seconds * 1_000_000 + m.nanos // 1000)
        if name in _WRAPPERS:
            spark_type, convert = _SCALARS[descriptor.fields_by_name["value"].type]
            return Shape(spark_type, True, lambda m: convert(m.value))
        if name in _AS_JSON:
            return Shape(StringType(), True, _as_json)
        if name in self._open:
            raise UnsupportedSchema(
                f"the protobuf message {name!r} contains itself ({where}), which no Spark column can "
                "hold; read the column as binary"
            )
        self._open.append(name)
        try:
            fields = [(f, self.field(f, f"{where}.{f.name}")) for f in descriptor.fields]
        finally:
            self._open.pop()
        converters = [(f.name, s.convert, f.has_presence and not f.is_repeated) for f, s in fields]

        def convert_message(message: Message) -> dict[str, Any]:
            return {
                name: None if presence and not message.HasField(name) else convert(getattr(message, name))
                for name, convert, presence in converters
            }

        struct = StructType([StructField(f.name, s.type, s.nullable) for f, s in fields])
        return Shape(struct, True, convert_message)

    def field(self, field: FieldDescriptor, where: str) -> Shape:
        entry = field.message_type
        if field.is_repeated and entry is not None and entry.GetOptions().map_entry:
            key = self.single(entry.fields_by_name["key"], where)
            value = self.single(entry.fields_by_name["value"], f"{where}{{}}")
            convert_key, convert_value = key.convert, value.convert
            return Shape(
                MapType(key.type, value.type, value.nullable),
                False,
                lambda m: {convert_key(k): convert_value(v) for k, v in m.items()},
            )
        single = self.single(field, where)
        if field.is_repeated:
            convert_item = single.convert
            return Shape(ArrayType(single.type, False), False, lambda items: [convert_item(v) for v in items])
        return Shape(single.type, single.nullable or field.has_presence, single.convert)

    def single(self, field: FieldDescriptor, where: str) -> Shape:
        """One value of ``field`` (an element, if it is repeated)."""
        if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            return self.message(field.message_type, where)
        if field.type == F.TYPE_ENUM:
            names = {v.number: v.name for v in field.enum_type.values}
            return Shape(StringType(), False, lambda n: names.get(n, str(n)))
        spark_type, convert = _SCALARS[field.type]
        return Shape(spark_type, False, convert)


class ProtobufColumns:
    """The column of a Protobuf reader schema (``ColumnReader``)."""

    def __init__(self, reader_id: int, reader: ProtobufSchema) -> None:
        try:
            self._class = reader.codec().message_class()
        except ConversionError:
            raise UnsupportedSchema(f"schema {reader_id} defines no message type to read") from None
        self._name = self._class.DESCRIPTOR.full_name
        shape = _Shaper().message(self._class.DESCRIPTOR, self._class.DESCRIPTOR.name)
        self.data_type: DataType = shape.type
        self._convert: Callable[[Message], Any] = shape.convert

    def read(self, writer_id: int, writer: ParsedSchema, payload: bytes) -> Any:
        if not isinstance(writer, ProtobufSchema):
            raise DecodeError(f"schema {writer_id} is {writer.schema.schema_type.value}, not PROTOBUF")
        try:
            indexes, start = read_message_indexes(payload)
            written = writer.codec().message_class(indexes).DESCRIPTOR.full_name
        except ConversionError as exc:
            raise DecodeError(str(exc)) from None
        if written != self._name and indexes != [0]:
            raise DecodeError(f"the payload is a {written} message; the column holds {self._name}")
        try:
            message = self._class.FromString(payload[start:])
        except ProtobufDecodeError as exc:
            raise DecodeError(f"the payload is not a {self._name} message: {exc}") from None
        except RecursionError:
            raise DecodeError("the message is nested too deeply") from None
        return self._convert(message)
