"""The schema-registry wire format: what Confluent's serializers put in a Kafka record.

A framed value is the magic byte ``0``, the schema id as a 4-byte big-endian integer, then the
format's payload (for Protobuf the payload begins with the message-index list; that is the
codec's business, see ``service.core.schemas.protobuf``). Every Kafka tool with a
schema-registry deserializer (Java, librdkafka-based clients, Kafka Connect, ksqlDB) reads
records framed like this, so ``frame`` writes exactly the bytes those serializers write.
"""

from __future__ import annotations

import struct
from typing import Final

from .model import ConversionError

__all__ = ["HEADER_SIZE", "MAGIC_BYTE", "frame", "unframe"]

MAGIC_BYTE: Final = 0
HEADER_SIZE: Final = 5
_MAX_SCHEMA_ID: Final = 2**31 - 1  # Java's int: registries hand out ids in 1..2^31-1
_HEADER = struct.Struct(">BI")


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed for ``schema_id``: magic byte, big-endian id, payload."""
    if not 0 <= schema_id <= _MAX_SCHEMA_ID:
        raise ValueError(f"schema id {schema_id} is out of range (0..{_MAX_SCHEMA_ID})")
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    """The schema id and the payload of a framed value; ``ConversionError`` if it is not one."""
    if len(data) < HEADER_SIZE:
        raise ConversionError(
            f"not in the schema-registry wire format: {len(data)} bytes, "
            f"shorter than the {HEADER_SIZE}-byte header"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise ConversionError(
            f"not in the schema-registry wire format: magic byte {magic}, expected {MAGIC_BYTE}"
        )
    if schema_id > _MAX_SCHEMA_ID:
        raise ConversionError(f"not in the schema-registry wire format: schema id {schema_id} is negative")
    return schema_id, bytes(data[HEADER_SIZE:])
