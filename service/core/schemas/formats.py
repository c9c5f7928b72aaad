"""The schema formats by type, and ``parse``, which picks the format a schema declares.

The registry parses every schema it stores or checks through ``parse``, handing in the
references it resolved, already parsed (``service.core.schemas.model`` says what each format
provides).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .avro import AvroFormat
from .json_schema import JsonSchemaFormat
from .model import ParsedSchema, Schema, SchemaFormat, SchemaType
from .protobuf import ProtobufFormat

__all__ = ["FORMATS", "parse"]

FORMATS: Final[Mapping[SchemaType, SchemaFormat]] = {
    SchemaType.AVRO: AvroFormat(),
    SchemaType.JSON: JsonSchemaFormat(),
    SchemaType.PROTOBUF: ProtobufFormat(),
}


def parse(schema: Schema, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
    """``schema`` parsed by its type's format; ``InvalidSchema`` if it is not a valid schema."""
    return FORMATS[schema.schema_type].parse(schema, references)
