"""JSON Schema: parsing and the canonical text (``schema``), Confluent's compatibility rules
(``compatibility`` over the typed schemas of ``constraints``, with ``keywords`` and ``objects``;
the rules' names and messages in ``differences``), and the codec (``codec``, matching patterns by
RE2: ``patterns``)."""

from .codec import JsonSchemaCodec
from .compatibility import MAX_COMPARISONS
from .schema import JsonSchema, JsonSchemaFormat

__all__ = ["MAX_COMPARISONS", "JsonSchema", "JsonSchemaCodec", "JsonSchemaFormat"]
