"""The records of the registry's topic, in Confluent's own format: what they say, and how to write them.

Confluent's schema registry keeps its state in a compacted topic (``_schemas``), one JSON key
and one JSON value per record; Karapace reads and writes the same records. brokergate writes
them as Confluent 7 does, so either can read what brokergate wrote, and brokergate reads theirs:

- ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` → ``{"subject":S,"version":V,
  "id":I,"schemaType":T,"references":[...],"schema":TEXT,"deleted":false}``: version ``V`` of
  subject ``S``. ``schemaType`` is left out for AVRO and ``references`` when there are none. A
  soft delete writes the value again with ``"deleted":true``; a hard delete is a tombstone
  (the key with no value).
- ``{"keytype":"CONFIG","subject":S,"magic":0}`` → ``{"subject":S,"compatibilityLevel":L}``:
  the compatibility level of ``S``; without ``subject`` (or with ``null``, as Karapace writes
  it), the global level. A tombstone removes it.
- ``{"keytype":"MODE","subject":S,"magic":0}`` → ``{"subject":S,"mode":M}``: likewise, the mode.
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` → ``{"subject":S,"version":V}``: every
  version of ``S`` up to ``V`` is soft-deleted (a soft delete of the whole subject).
- ``{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}`` → ``{"subject":S}``: forget ``S``.
- ``NOOP`` (Confluent's marker for reaching the end of the topic) and record kinds of newer
  registries (contexts, associations) say nothing to brokergate.

Keys are written byte for byte as Confluent writes them (the same key, the same bytes), so that
compaction keeps only the last record of each. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .model import Schema, SchemaReference, SchemaType

SCHEMA: Final = "SCHEMA"
CONFIG: Final = "CONFIG"
MODE: Final = "MODE"
DELETE_SUBJECT: Final = "DELETE_SUBJECT"
CLEAR_SUBJECT: Final = "CLEAR_SUBJECT"
# Record kinds that carry nothing brokergate keeps.
IGNORED_KINDS: Final = frozenset({"NOOP", "CONTEXT", "ASSOC"})
INT32_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SchemaPut:
    """Version ``version`` of ``subject`` is schema ``schema_id``, ``deleted`` (soft) or live."""

    subject: str
    version: int
    schema_id: int
    schema: Schema
    deleted: bool


@dataclass(frozen=True, slots=True)
class SchemaTombstone:
    """Version ``version`` of ``subject`` is gone (a hard delete)."""

    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class ConfigPut:
    """The compatibility level of ``subject`` (None: the global one); ``level`` None: none set."""

    subject: str | None
    level: str | None


@dataclass(frozen=True, slots=True)
class ConfigTombstone:
    subject: str | None


@dataclass(frozen=True, slots=True)
class ModePut:
    subject: str | None
    mode: str


@dataclass(frozen=True, slots=True)
class ModeTombstone:
    subject: str | None


@dataclass(frozen=True, slots=True)
class DeleteSubject:
    """Every version of ``subject`` up to ``version`` is soft-deleted."""

    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class ClearSubject:
    subject: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record that says nothing to brokergate; ``why`` for the log (None: nothing worth saying)."""

    why: str | None = None


Event = (
    SchemaPut
    | SchemaTombstone
    | ConfigPut
    | ConfigTombstone
    | ModePut
    | ModeTombstone
    | DeleteSubject
    | ClearSubject
    | Skipped
)


class MalformedRecord(ValueError):
    """A record that is not one of the registry's (what is wrong, for the log)."""


# --- writing ------------------------------------------------------------------------------


def _dumps(data: Mapping[str, Any]) -> bytes:
    return orjson.dumps(data)


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def _subject_key(kind: str, subject: str | None) -> bytes:
    key: dict[str, Any] = {"keytype": kind}
    if subject is not None:
        key["subject"] = subject
    key["magic"] = 0
    return _dumps(key)


def config_key(subject: str | None) -> bytes:
    return _subject_key(CONFIG, subject)


def mode_key(subject: str | None) -> bytes:
    return _subject_key(MODE, subject)


def delete_subject_key(subject: str) -> bytes:
    return _subject_key(DELETE_SUBJECT, subject)


def schema_value(subject: str, version: int, schema_id: int, schema: Schema, *, deleted: bool) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema.schema_type is not SchemaType.AVRO:
        value["schemaType"] = schema.schema_type.value
    if schema.references:
        value["references"] = [reference_json(r) for r in schema.references]
    value["schema"] = schema.text
    value["deleted"] = deleted
    return _dumps(value)


def reference_json(reference: SchemaReference) -> dict[str, Any]:
    return {"name": reference.name, "subject": reference.subject, "version": reference.version}


def config_value(subject: str | None, level: str) -> bytes:
    value: dict[str, Any] = {} if subject is None else {"subject": subject}
    value["compatibilityLevel"] = level
    return _dumps(value)


def mode_value(subject: str | None, mode: str) -> bytes:
    value: dict[str, Any] = {} if subject is None else {"subject": subject}
    value["mode"] = mode
    return _dumps(value)


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


# --- reading ------------------------------------------------------------------------------


def decode(key: bytes | None, value: bytes | None) -> Event:
    """What a record of the topic says; ``MalformedRecord`` if it is not a registry record."""
    if key is None:
        raise MalformedRecord("a record without a key")
    k = _object(key, "key")
    kind = k.get("keytype")
    if kind in IGNORED_KINDS:
        return Skipped()
    if kind == SCHEMA:
        subject, version = _subject(k), _version(k.get("version"), "key")
        return SchemaTombstone(subject, version) if value is None else _schema_put(subject, version, value)
    if kind in (CONFIG, MODE):
        scope = _optional_subject(k)
        if value is None:
            return ConfigTombstone(scope) if kind == CONFIG else ModeTombstone(scope)
        v = _object(value, "value")
        if kind == CONFIG:
            level = v.get("compatibilityLevel", v.get("compatibility"))
            if level is not None and not isinstance(level, str):
                raise MalformedRecord("compatibilityLevel is not a string")
            return ConfigPut(scope, level.upper() if level is not None else None)
        mode = v.get("mode")
        if not isinstance(mode, str):
            raise MalformedRecord("a MODE record without a mode")
        return ModePut(scope, mode.upper())
    if kind == DELETE_SUBJECT:
        if value is None:
            return Skipped()  # Confluent never tombstones it; nothing to undo
        v = _object(value, "value")
        return DeleteSubject(_subject(k), _version(v.get("version"), "value"))
    if kind == CLEAR_SUBJECT:
        return Skipped() if value is None else ClearSubject(_subject(k))
    return Skipped(f"unknown record kind {kind!r}")


def _schema_put(subject: str, version: int, raw: bytes) -> SchemaPut:
    v = _object(raw, "value")
    schema_id = v.get("id")
    text = v.get("schema")
    kind = v.get("schemaType") or SchemaType.AVRO.value
    deleted = v.get("deleted", False)
    if type(schema_id) is not int or not 0 <= schema_id <= INT32_MAX:
        raise MalformedRecord(f"schema id {schema_id!r} is not an id")
    if not isinstance(text, str):
        raise MalformedRecord("a SCHEMA record without a schema")
    if not isinstance(kind, str) or kind.upper() not in SchemaType.__members__:
        raise MalformedRecord(f"unknown schema type {kind!r}")
    if not isinstance(deleted, bool):
        raise MalformedRecord("deleted is not a boolean")
    references = tuple(_reference(r) for r in _list(v.get("references")))
    schema = Schema(SchemaType(kind.upper()), text, references)
    return SchemaPut(subject, version, schema_id, schema, deleted)


def _reference(raw: Any) -> SchemaReference:
    if not isinstance(raw, dict):
        raise MalformedRecord("a reference is not an object")
    name, subject = raw.get("name"), raw.get("subject")
    if not isinstance(name, str) or not isinstance(subject, str):
        raise MalformedRecord("a reference without a name or a subject")
    return SchemaReference(name, subject, _version(raw.get("version"), "reference"))


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedRecord(f"the {what} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MalformedRecord(f"the {what} is not a JSON object")
    return data


def _list(raw: Any) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise MalformedRecord("references is not a list")
    return raw


def _subject(key: dict[str, Any]) -> str:
    subject = key.get("subject")
    if not isinstance(subject, str):
        raise MalformedRecord("a key without a subject")
    return subject


def _optional_subject(key: dict[str, Any]) -> str | None:
    subject = key.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise MalformedRecord("the key's subject is not a string")
    return subject


def _version(raw: Any, where: str) -> int:
    if type(raw) is not int or not 1 <= raw <= INT32_MAX:
        raise MalformedRecord(f"version {raw!r} in the {where} is not a version")
    return raw
