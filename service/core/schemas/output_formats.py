"""A stored schema's text in the form a client asks for with ``?format=``, as Confluent answers it.

Confluent's registry takes ``format`` on the routes that answer a schema (by id, a subject's
version, its text alone, a lookup): empty, it answers the stored text; otherwise the parsed
schema's ``formattedString(format)``: a format of the schema's type (Protobuf's ``serialized``,
its base64 ``FileDescriptorProto``, which Confluent's Protobuf deserializers ask for), else, for
a name it does not know, the canonical text — it refuses none, to stay compatible with formats
to come. The stored text is that canonical text, so a name no format claims answers it.

A format offers its forms through an optional ``in_format(name) -> str | None`` method of its
parsed schemas (None: not one of its forms). Collaborators: ``SchemaRegistry`` (the stored
schema, parsed); the registry's routes call ``in_format``.
"""

from __future__ import annotations

import dataclasses

from .model import ParsedSchema, Schema
from .registry import Registered, SchemaRegistry


def text_in_format(parsed: ParsedSchema, name: str) -> str:
    """``parsed``'s text in format ``name`` (case-insensitive, as Confluent reads it)."""
    hook = getattr(parsed, "in_format", None)
    text = hook(name.strip().lower()) if callable(hook) else None
    return text if isinstance(text, str) else parsed.schema.text


async def in_format(registry: SchemaRegistry, schema_id: int, schema: Schema, name: str) -> Schema:
    """Stored schema ``schema_id`` (``schema``) with its text in format ``name`` ("": as stored)."""
    if not name.strip():
        return schema
    parsed = await registry.schema_by_id(schema_id)
    return dataclasses.replace(schema, text=text_in_format(parsed, name))


async def registered_in_format(registry: SchemaRegistry, found: Registered, name: str) -> Registered:
    """A subject's version ``found`` with its schema's text in format ``name`` ("": as stored)."""
    if not name.strip():
        return found
    return dataclasses.replace(found, schema=await in_format(registry, found.schema_id, found.schema, name))
