"""A parsed Avro schema (``AvroSchema``) and the format that parses one (``AvroFormat``).

``AvroFormat.parse`` reads the JSON, gathers the named types of the references and hands the
document to ``parser``; ``AvroSchema`` answers the registry's questions with ``compatibility``
(reading rules) and ``codec`` (built on first use). The canonical text is the normalized form as
JSON with sorted keys and no whitespace (``parser`` says what it keeps); the text stored and
answered is Avro's print of it (``text``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from service.core.json_depth import MAX_SCHEMA_DEPTH, exceeds

from ..model import InvalidSchema, ParsedSchema, Schema, SchemaType
from .codec import AvroCodec
from .compatibility import incompatibilities
from .nodes import Node
from .parser import _Normalizer
from .text import render

__all__ = ["AvroFormat", "AvroSchema"]


class AvroSchema:
    """A parsed Avro schema: its normalized form, the named types it knows (its own and its
    references'), and its codec, built on first use."""

    def __init__(
        self, schema: Schema, root: Node, named: Mapping[str, Node], referenced: frozenset[str] = frozenset()
    ) -> None:
        self.schema = schema
        self.root = root
        self.named = named
        self.referenced = referenced  # the names the references define
        self._canonical = json.dumps(root, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self._codec: AvroCodec | None = None

    def canonical(self) -> str:
        return self._canonical

    def formatted(self) -> str:
        """The text Confluent stores and answers: Avro's compact print (``text``)."""
        return render(self.root, self.referenced)

    def normalized(self) -> str:
        """The text ``?normalize=true`` stores: the same, other attributes sorted (``text``)."""
        return render(self.root, self.referenced, normalized=True)

    def in_format(self, name: str) -> str | None:
        """``resolved``: the text with the references' types written in full (``text``), as
        Confluent's ``formattedString``; None for another name (``output_formats``)."""
        return render(self.root, (), inline=self.named) if name == "resolved" else None

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        """Confluent's texts of Avro's incompatibilities (``compatibility``), ``%s`` for the roles."""
        if not isinstance(writer, AvroSchema):
            return ["Incompatible because of different schema type"]
        return [found.text() for found in incompatibilities(self.root, writer.root, self.named, writer.named)]

    def codec(self) -> AvroCodec:
        if self._codec is None:
            self._codec = AvroCodec(self.root, self.named)
        return self._codec

    def record_name(self) -> str | None:
        root = self.root
        if not isinstance(root, dict) or not isinstance(root.get("name"), str):
            return None
        name, namespace = root["name"], root.get("namespace")
        return f"{namespace}.{name}" if namespace and "." not in name else name

    def __repr__(self) -> str:
        return f"AvroSchema({self._canonical[:80]!r})"


class AvroFormat:
    """Parses Avro schemas (``SchemaFormat`` for ``SchemaType.AVRO``)."""

    schema_type: SchemaType = SchemaType.AVRO

    def parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> AvroSchema:
        if exceeds(schema.text, MAX_SCHEMA_DEPTH):  # before the recursive parser and codec see it
            raise InvalidSchema(f"an Avro schema nests JSON more than {MAX_SCHEMA_DEPTH} levels deep")
        try:
            document = json.loads(schema.text)
        except ValueError as exc:
            raise InvalidSchema(f"an Avro schema is JSON: {exc}") from None
        known: dict[str, Node] = {}
        for ref in schema.references:
            parsed = references.get(ref.name)
            if parsed is None:
                raise InvalidSchema(
                    f"reference '{ref.name}' ({ref.subject} version {ref.version}) was not given"
                )
            if not isinstance(parsed, AvroSchema):
                raise InvalidSchema(
                    f"reference '{ref.name}' is a {parsed.schema.schema_type} schema, not AVRO"
                )
            for name, node in parsed.named.items():
                if known.setdefault(name, node) != node:  # the same type through two paths is fine
                    raise InvalidSchema(f"type '{name}' is defined by two references")
        normalizer = _Normalizer(known)
        try:
            root = normalizer.node(document, "", "schema")
            normalizer.finish()
        except RecursionError:
            raise InvalidSchema("the schema is nested too deeply") from None
        return AvroSchema(schema, root, normalizer.named, frozenset(known))
