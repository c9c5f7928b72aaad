"""JSON Schema records as a Spark column: a struct where the reader schema types its properties, else text.

A reader schema that is an object with ``properties`` (``type: object``, or no
``type`` beside ``properties``) gives a struct of its properties, each
nullable (a JSON property may be absent). Each property maps by its ``type``:
``string`` → string, ``integer`` → long, ``number`` → double, ``boolean`` →
boolean, an object with ``properties`` → struct, an object with only an
``additionalProperties`` schema → map<string, _>, an array with one ``items``
schema → array; ``[T, "null"]`` is ``T``. ``$ref`` is followed (inside the
document and into references). Anything else — no ``type``, several types,
combinators, tuples, a reference back to itself — is a string holding the
value's JSON text, and so is the whole column when the reader schema is not an
object with properties.

A payload is JSON (the writer schema only has to be a JSON Schema); a value
that does not fit the column's type (a string where the reader says integer)
is a ``DecodeError`` naming the property. Properties the reader does not name
are left out.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)
from referencing.exceptions import Unresolvable

from service.core.rules import INT64_MAX, INT64_MIN
from service.core.schemas.json_schema import JsonSchema
from service.core.schemas.model import ParsedSchema

from .column_types import Convert, DecodeError, Shape, nullable

_MAX_DEPTH: Final = 64  # of nested subschemas: deeper ones are JSON text

Resolver = Any  # referencing's Resolver


def json_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # beyond 64-bit integers or 255 levels
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_TEXT: Final = Shape(StringType(), True, json_text)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _string(where: str) -> Convert:
    def convert(value: Any) -> str:
        if not isinstance(value, str):
            raise DecodeError(f"{where}: expected a string, got {_type_name(value)}")
        return value

    return convert


def _integer(where: str) -> Convert:
    def convert(value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
            raise DecodeError(f"{where}: expected a 64-bit integer, got {json_text(value)}")
        return value

    return convert


def _number(where: str) -> Convert:
    def convert(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DecodeError(f"{where}: expected a number, got {_type_name(value)}")
        return float(value)

    return convert


def _boolean(where: str) -> Convert:
    def convert(value: Any) -> bool:
        if not isinstance(value, bool):
            raise DecodeError(f"{where}: expected a boolean, got {_type_name(value)}")
        return value

    return convert


class _Shaper:
    """Walks a reader schema, following ``$ref``\\ s, building each subschema's ``Shape``."""

    def __init__(self, schema: JsonSchema) -> None:
        self.spec = schema.spec
        self._open: list[int] = []  # ids of the subschemas being walked: meeting one again is recursion

    def top(self, schema: JsonSchema) -> Shape:
        try:
            node, resolver = self._deref(schema.document, schema.resolver())
        except Unresolvable:
            return _TEXT
        if self._is_object(node) and isinstance(node.get("properties"), dict):
            return self.shape(node, resolver, "")
        return _TEXT

    def _deref(self, node: Any, resolver: Resolver) -> tuple[Any, Resolver]:
        for _ in range(_MAX_DEPTH):
            if isinstance(node, dict) and self.spec.id_of(node) is not None:
                resolver = resolver.in_subresource(self.spec.create_resource(node))
            if not isinstance(node, dict) or not isinstance(node.get("$ref"), str):
                return node, resolver
            resolved = resolver.lookup(node["$ref"])
            node, resolver = resolved.contents, resolved.resolver
        return True, resolver  # a chain of references that never ends: anything

    def _is_object(self, node: Any) -> bool:
        return isinstance(node, dict) and (
            node.get("type") == "object" or ("type" not in node and "properties" in node)
        )

    def shape(self, node: Any, resolver: Resolver, where: str) -> Shape:
        try:
            node, resolver = self._deref(node, resolver)
        except Unresolvable:
            return _TEXT
        if not isinstance(node, dict) or id(node) in self._open or len(self._open) >= _MAX_DEPTH:
            return _TEXT
        self._open.append(id(node))
        try:
            return self._shape(node, resolver, where)
        finally:
            self._open.pop()

    def _shape(self, node: dict[str, Any], resolver: Resolver, where: str) -> Shape:
        if any(k in node for k in ("allOf", "anyOf", "oneOf", "not", "if", "const")):
            return _TEXT
        kind = node.get("type", "object" if "properties" in node else None)
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            kind = others[0] if len(others) == 1 else None
        if kind == "string":
            return Shape(StringType(), True, _string(where or "the value"))
        if kind == "integer":
            return Shape(LongType(), True, _integer(where or "the value"))
        if kind == "number":
            return Shape(DoubleType(), True, _number(where or "the value"))
        if kind == "boolean":
            return Shape(BooleanType(), True, _boolean(where or "the value"))
        if kind == "array":
            return self._array(node, resolver, where)
        if kind == "object":
            return self._object(node, resolver, where)
        return _TEXT

    def _array(self, node: dict[str, Any], resolver: Resolver, where: str) -> Shape:
        items = node.get("items")
        if not isinstance(items, dict) or "prefixItems" in node:
            return _TEXT
        item = self.shape(items, resolver, f"{where}[]")
        convert = nullable(item.convert)

        def convert_array(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise DecodeError(f"{where or 'the value'}: expected an array, got {_type_name(value)}")
            return [convert(v) for v in value]

        return Shape(ArrayType(item.type, True), True, convert_array)

    def _object(self, node: dict[str, Any], resolver: Resolver, where: str) -> Shape:
        properties = node.get("properties")
        if not isinstance(properties, dict) or not properties:
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and not node.get("patternProperties"):
                values = self.shape(extra, resolver, f"{where}{{}}")
                convert_value = nullable(values.convert)

                def convert_map(value: Any) -> dict[str, Any]:
                    if not isinstance(value, dict):
                        raise DecodeError(
                            f"{where or 'the value'}: expected an object, got {_type_name(value)}"
                        )
                    return {k: convert_value(v) for k, v in value.items()}

                return Shape(MapType(StringType(), values.type, True), True, convert_map)
            return _TEXT
        fields = []
        converters = []
        for name, sub in properties.items():
            s = self.shape(sub, resolver, f"{where}.{name}" if where else name)
            fields.append(StructField(name, s.type, True))
            converters.append((name, nullable(s.convert)))

        def convert_object(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise DecodeError(f"{where or 'the value'}: expected an object, got {_type_name(value)}")
            return {name: convert(value.get(name)) for name, convert in converters}

        return Shape(StructType(fields), True, convert_object)


class JsonColumns:
    """The column of a JSON Schema reader schema (``ColumnReader``)."""

    def __init__(self, reader_id: int, reader: JsonSchema) -> None:
        shape = _Shaper(reader).top(reader)
        self.data_type: DataType = shape.type
        self._convert = nullable(shape.convert)

    def read(self, writer_id: int, writer: ParsedSchema, payload: bytes) -> Any:
        if not isinstance(writer, JsonSchema):
            raise DecodeError(f"schema {writer_id} is {writer.schema.schema_type.value}, not JSON")
        try:
            value = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"the payload is not JSON: {exc}") from None
        return self._convert(value)
