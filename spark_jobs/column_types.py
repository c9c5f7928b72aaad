"""What the three formats' decoded columns share: the reader protocol, its errors, and ``Shape``.

A format module (``avro_columns``, ``protobuf_columns``, ``json_columns``)
turns a *reader* schema into a ``ColumnReader``: the Spark type of the column,
fixed when the job is planned, and ``read``, which decodes one payload written
with some *writer* schema into a Python value of exactly that type (what
``pyarrow.array`` takes for the column's Arrow type). Every walk over a schema
builds the type and the conversion together, as ``Shape``\\ s, so the two
cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from pyspark.sql.types import DataType

from service.core.schemas.model import ParsedSchema

from .offsets import OptionError

MICROS_PER_MILLI: Final = 1000

Convert = Callable[[Any], Any]


class DecodeError(ValueError):
    """One payload cannot be decoded into the column (the message says why, without the record's
    place, which the caller adds); ``schema_id`` is the record's, when it had one."""

    def __init__(self, message: str, schema_id: int | None = None) -> None:
        super().__init__(message)
        self.schema_id = schema_id


class UnsupportedSchema(OptionError):
    """A reader schema no Spark column can hold (a recursive type); found when the job is planned."""


@dataclass(frozen=True, slots=True)
class Shape:
    """A schema node as a Spark column: its type, whether it may be null, and the conversion of a
    decoded value into what Arrow takes for that type."""

    type: DataType
    nullable: bool
    convert: Convert


class ColumnReader(Protocol):
    """Decodes payloads into one column whose type a reader schema fixed."""

    data_type: DataType

    def read(self, writer_id: int, writer: ParsedSchema, payload: bytes) -> Any:
        """The column's value for ``payload`` (the wire format's payload, after the schema id),
        written with schema ``writer_id``; ``DecodeError`` if it has none."""
        ...


def identity(value: Any) -> Any:
    return value


def not_null(convert: Convert, where: str) -> Convert:
    """``convert``, refusing a missing value (Arrow would store it in a non-null field silently)."""

    def checked(value: Any) -> Any:
        if value is None:
            raise DecodeError(f"{where or 'the value'} is missing")
        return convert(value)

    return checked


def nullable(convert: Convert) -> Convert:
    """``convert`` for a value that may be null."""
    if convert is identity:
        return identity
    return lambda value: None if value is None else convert(value)
