"""What a schema is to brokergate, and what each schema format provides.

A ``Schema`` is what a client registers: its type, its text (an Avro schema in JSON, a JSON
Schema document, a ``.proto`` file) and the references it imports from other subjects. Each
format (``avro``, ``json_schema``, ``protobuf``) provides a ``SchemaFormat``: it parses a
``Schema`` into a ``ParsedSchema`` or raises ``InvalidSchema`` saying why, and a parsed schema
knows its canonical text (two schemas with the same canonical text are the same schema), whether
it can read what another version wrote (the compatibility rules), and its ``Codec``: JSON as a
REST client sends and receives it, to and from the payload a schema-registry serializer writes.

A format may also give the texts the registry stores (``formatted_text``, and ``normalized_text``
for ``?normalize=true``) through two optional methods of its parsed schemas.

Nothing here does I/O: the registry resolves references and hands the parsed ones in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

JSON = Any  # a value as json.loads returns it


class SchemaType(StrEnum):
    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


class Compatibility(StrEnum):
    """Confluent's compatibility levels: what a new version must be able to do with the old ones.

    BACKWARD: the new version reads what the old wrote; FORWARD: the old read what the new
    writes; FULL: both. Against the latest version only, or every version (TRANSITIVE).
    """

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """An import: ``name`` as the schema text refers to it (an Avro full name, a JSON Schema
    ``$ref`` URL, a ``.proto`` import path), resolved to ``version`` of ``subject``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Schema:
    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...] = ()


class InvalidSchema(ValueError):
    """The schema cannot be used; the message says why (shown to the client, 42201)."""


class ConversionError(ValueError):
    """A value does not fit the schema, or stored bytes do not decode with it; the message says
    where (shown to the client, 42203 on produce)."""


class Codec(Protocol):
    """JSON to and from the payload of the wire format: everything after the magic byte and the
    schema id (for Protobuf that includes the message-index list)."""

    def encode(self, value: JSON) -> bytes:
        """The payload for ``value``; ``ConversionError`` if it does not fit the schema."""
        ...

    def decode(self, payload: bytes) -> JSON:
        """The JSON a consumer is given for ``payload``; ``ConversionError`` if it is not one."""
        ...


class ParsedSchema(Protocol):
    schema: Schema

    def canonical(self) -> str:
        """The schema's normalized text: the same for two texts of the same schema (whitespace,
        key order, defaults spelled out as the format defines), different otherwise."""
        ...

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        """Why this schema, as a reader, cannot read data ``writer`` wrote (empty: it can).
        ``writer`` is always of the same type. In Confluent's words where the format has them,
        ``%s`` where they name the roles (the reader's, then the writer's: ``fill_roles``)."""
        ...

    def codec(self) -> Codec:
        """This schema's codec (built once; a parsed schema is immutable)."""
        ...

    def record_name(self) -> str | None:
        """The full name of what the schema describes, as the record-name subject strategies
        use it: an Avro named type's, the first Protobuf message's, a JSON Schema's title."""
        ...


class SchemaFormat(Protocol):
    schema_type: SchemaType

    def parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        """``schema`` parsed, its references given by name already parsed; ``InvalidSchema`` if
        it is not a valid schema of this type or names a reference it was not given."""
        ...


def formatted_text(parsed: ParsedSchema) -> str:
    """The text the registry stores and answers for ``parsed``, Confluent's ``canonicalString``:
    the format's ``formatted()`` where it has one, else the text as it was sent.

    A format provides ``formatted() -> str`` on its parsed schema to have its schemas stored in
    its canonical spelling (Avro: Avro's compact print)."""
    hook = getattr(parsed, "formatted", None)
    return str(hook()) if callable(hook) else parsed.schema.text


def normalized_text(parsed: ParsedSchema) -> str:
    """The text the registry stores for ``?normalize=true``, Confluent's ``normalize()``: the
    format's ``normalized()`` where it has one, else ``formatted_text``.

    A format provides ``normalized() -> str`` on its parsed schema; it must parse, and its
    parse's ``normalized()`` be itself: the registry registers and looks up the schema it parses
    to (Protobuf's normalized print orders fields by tag, so its canonical text may differ)."""
    hook = getattr(parsed, "normalized", None)
    return str(hook()) if callable(hook) else formatted_text(parsed)


def compatibility_errors(
    new: ParsedSchema, previous: Sequence[ParsedSchema], level: Compatibility
) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level``; empty if it may.

    As Confluent's checker: the latest first, the errors of the first one ``new`` may not follow,
    those of the old schema reading new data (FORWARD, FULL) before those of the new one reading
    old data (BACKWARD, FULL), each with its roles filled in (``fill_roles``)."""
    if level is Compatibility.NONE or not previous:
        return []
    against = previous if level.transitive else previous[-1:]
    for old in reversed(against):
        errors: list[str] = []
        if level.forward:
            errors += [fill_roles(e, "old", "new") for e in old.reading_errors(new)]
        if level.backward:
            errors += [fill_roles(e, "new", "old") for e in new.reading_errors(old)]
        if errors:
            return errors
    return []


def fill_roles(text: str, reader: str, writer: str) -> str:
    """A ``reading_errors`` text with its roles written: the first ``%s`` the reader's, the next
    the writer's, as Confluent fills in its checkers' descriptions ("new" and "old" or back)."""
    return text.replace("%s", reader, 1).replace("%s", writer, 1)
