"""Avro schemas: parsing and the canonical text (``parser``), the texts the registry stores
(``text``: Avro's compact print, and the normalized one), Avro's schema-resolution rules
(``compatibility``), the codec (``codec``, over the value conversions of ``values``), and the parsed
schema that ties them together (``schema``)."""

from .codec import AvroCodec
from .nodes import PRIMITIVES
from .schema import AvroFormat, AvroSchema

__all__ = ["PRIMITIVES", "AvroCodec", "AvroFormat", "AvroSchema"]
