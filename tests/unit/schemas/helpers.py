"""What the tests of each schema format share: parsing a test's schema as that format, and asking
whether one schema reads what another wrote."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from service.core.schemas.model import ParsedSchema, Schema, SchemaReference, SchemaType

P = TypeVar("P", bound=ParsedSchema, covariant=True)


class Format(Protocol[P]):
    def parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> P: ...


def as_text(schema: Any) -> str:
    """A str as it is (schema text), anything else as JSON."""
    return schema if isinstance(schema, str) else json.dumps(schema)


@dataclass(frozen=True)
class Parser(Generic[P]):
    """``parse(schema, references, refs)`` of one format: ``schema`` made text by ``text`` and parsed
    with the parsed schemas it references by name and its own references ``refs``."""

    fmt: Format[P]
    kind: SchemaType
    text: Callable[[Any], str] = as_text

    def __call__(
        self,
        schema: Any,
        references: dict[str, ParsedSchema] | None = None,
        refs: tuple[SchemaReference, ...] = (),
    ) -> P:
        return self.fmt.parse(Schema(self.kind, self.text(schema), refs), references or {})

    def reading_errors(self, reader: Any, writer: Any) -> list[str]:
        """Why ``reader`` cannot read what ``writer`` wrote (none: it can)."""
        return self(reader).reading_errors(self(writer))
