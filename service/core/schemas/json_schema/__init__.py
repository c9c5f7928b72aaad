"""JSON Schema: parsing and the canonical text (``schema``), Confluent's compatibility rules
(``compatibility``, over what each subschema constrains: ``constraints``), and the codec (``codec``,
matching patterns by RE2: ``patterns``)."""

from .codec import JsonSchemaCodec
from .compatibility import MAX_COMPARISONS
from .schema import JsonSchema, JsonSchemaFormat

__all__ = ["MAX_COMPARISONS", "JsonSchema", "JsonSchemaCodec", "JsonSchemaFormat"]
