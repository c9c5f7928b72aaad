"""The data source's options for decoded columns, checked: formats, reader schemas, the registry, errors.

``valueFormat`` / ``keyFormat``
    ``binary`` (the default: the stored bytes), ``avro``, ``jsonschema`` or
    ``protobuf``: the column is decoded from the schema-registry wire format.
``valueSchemaId`` | ``valueSubject`` [+ ``valueSchemaVersion``] (and ``key…``)
    the reader schema, which fixes the column's Spark type; by default the
    latest version of subject ``<topic>-value`` (``<topic>-key``), which needs
    a single topic.
``schemaRegistryUrl`` [+ ``schemaRegistryUser``, ``schemaRegistryPassword``, ``schemaRegistryCaFile``]
    ask a registry over HTTP (brokergate's ``<gateway>/schema-registry``, or
    any Confluent-compatible one); without it the schemas are read from the
    registry's topic in the log being read, ``schemaRegistryTopic`` (default
    ``_schemas``).
``onDecodeError``
    ``fail`` (the default: the job fails, naming the record's topic,
    partition and offset) or ``null`` (the column is null and the
    ``value_error`` / ``key_error`` column says why).

Pure parsing, no I/O, and light to import: a binary read never loads the
formats. ``as_options`` gives the options back (for the export, which passes
them to the data source).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from service.core.schemas.model import SchemaType

from .offsets import OptionError

if TYPE_CHECKING:
    from .credentials import BackendCredentials

Side = Literal["key", "value"]
OnDecodeError = Literal["fail", "null"]
Version = int | Literal["latest"]

BINARY: Final = "binary"
DEFAULT_REGISTRY_TOPIC: Final = "_schemas"
FORMATS: Final[Mapping[str, SchemaType]] = {
    "avro": SchemaType.AVRO,
    "jsonschema": SchemaType.JSON,
    "protobuf": SchemaType.PROTOBUF,
}
ON_DECODE_ERROR: Final[tuple[OnDecodeError, ...]] = ("fail", "null")
_REGISTRY_OPTIONS: Final = {
    "schemaregistrytopic": "schemaRegistryTopic",
    "schemaregistryurl": "schemaRegistryUrl",
    "schemaregistryuser": "schemaRegistryUser",
    "schemaregistrypassword": "schemaRegistryPassword",
    "schemaregistrycafile": "schemaRegistryCaFile",
}
# Every option this module reads.
OPTIONS: Final = (
    *(f"{side}{name}" for side in ("key", "value") for name in ("Format", "SchemaId", "Subject")),
    "keySchemaVersion",
    "valueSchemaVersion",
    "onDecodeError",
    *_REGISTRY_OPTIONS.values(),
)


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    """Which registry: ``url`` (with credentials) when given, else the topic ``topic`` of ``log``."""

    log: str
    topic: str = DEFAULT_REGISTRY_TOPIC
    url: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    log_credentials: BackendCredentials | None = None  # how to sign in to ``log`` (a Kafka's)

    def describe(self) -> str:
        return f"the schema registry at {self.url}" if self.url else f"the registry topic {self.topic!r}"


@dataclass(frozen=True, slots=True)
class ColumnOptions:
    """How one of the key and value columns is read: ``binary``, or decoded with a reader schema."""

    side: Side
    format: str = BINARY
    schema_id: int | None = None
    subject: str | None = None
    version: Version = "latest"

    @property
    def decoded(self) -> bool:
        return self.format != BINARY

    def subject_for(self, topic_spec: str) -> str:
        """The subject of the reader schema: the option, else ``<topic>-<side>`` of a single topic."""
        if self.subject:
            return self.subject
        topic = topic_spec.strip()
        if not topic or any(c in topic for c in ",*?[]()|^$+{}\\ "):
            raise OptionError(
                f"{self.side}Subject: the topic option names several topics or a pattern, so there is no "
                f"<topic>-{self.side} subject; name the reader schema with {self.side}Subject or "
                f"{self.side}SchemaId"
            )
        return f"{topic}-{self.side}"

    def as_options(self) -> dict[str, str]:
        if not self.decoded:
            return {}
        out = {f"{self.side}Format": self.format}
        if self.schema_id is not None:
            out[f"{self.side}SchemaId"] = str(self.schema_id)
        if self.subject is not None:
            out[f"{self.side}Subject"] = self.subject
        if self.version != "latest":
            out[f"{self.side}SchemaVersion"] = str(self.version)
        return out

    @classmethod
    def parse(cls, side: Side, lowered: Mapping[str, str]) -> ColumnOptions:
        fmt = lowered.get(f"{side}format", BINARY).strip().lower()
        if fmt != BINARY and fmt not in FORMATS:
            raise OptionError(f"{side}Format: {fmt!r} is not binary, {', '.join(FORMATS)}")
        schema_id = _positive(lowered.get(f"{side}schemaid"), f"{side}SchemaId")
        subject = lowered.get(f"{side}subject") or None
        raw_version = lowered.get(f"{side}schemaversion", "latest").strip().lower()
        version: Version = (
            "latest" if raw_version == "latest" else _version(raw_version, f"{side}SchemaVersion")
        )
        if fmt == BINARY:
            given = [k for k in ("SchemaId", "Subject", "SchemaVersion") if f"{side}{k.lower()}" in lowered]
            if given:
                raise OptionError(
                    f"{side}{given[0]}: a reader schema needs {side}Format avro|jsonschema|protobuf"
                )
        if schema_id is not None and (subject is not None or version != "latest"):
            raise OptionError(
                f"{side}SchemaId names the reader schema by itself; leave out {side}Subject and "
                f"{side}SchemaVersion"
            )
        return cls(side, fmt, schema_id, subject, version)


def _positive(raw: str | None, option: str) -> int | None:
    if raw is None:
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise OptionError(f"{option}: {raw!r} is not a schema id (a positive number)")
    return int(raw)


def _version(raw: str, option: str) -> int:
    number = _positive(raw, option)
    assert number is not None
    return number


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    """The decoding options of one read (all binary: nothing is decoded)."""

    key: ColumnOptions = field(default_factory=lambda: ColumnOptions("key"))
    value: ColumnOptions = field(default_factory=lambda: ColumnOptions("value"))
    registry_topic: str = DEFAULT_REGISTRY_TOPIC
    registry_url: str | None = None
    registry_user: str | None = None
    registry_password: str | None = field(default=None, repr=False)
    registry_ca_file: str | None = None
    on_error: OnDecodeError = "fail"

    @property
    def decoding(self) -> bool:
        return self.key.decoded or self.value.decoded

    def registry(self, log: str, credentials: BackendCredentials | None = None) -> RegistryConfig:
        return RegistryConfig(
            log=log,
            log_credentials=credentials,
            topic=self.registry_topic,
            url=self.registry_url,
            user=self.registry_user,
            password=self.registry_password,
            ca_file=self.registry_ca_file,
        )

    def as_options(self) -> dict[str, str]:
        """The data source's options that say what this says."""
        if not self.decoding:
            return {}
        out = {**self.key.as_options(), **self.value.as_options(), "onDecodeError": self.on_error}
        given = {
            "schemaRegistryTopic": self.registry_topic
            if self.registry_topic != DEFAULT_REGISTRY_TOPIC
            else None,
            "schemaRegistryUrl": self.registry_url,
            "schemaRegistryUser": self.registry_user,
            "schemaRegistryPassword": self.registry_password,
            "schemaRegistryCaFile": self.registry_ca_file,
        }
        return out | {k: v for k, v in given.items() if v is not None}

    @classmethod
    def parse(cls, lowered: Mapping[str, str]) -> DecodeOptions:
        """From the data source's options, their keys lowercased; raises ``OptionError``."""
        key, value = ColumnOptions.parse("key", lowered), ColumnOptions.parse("value", lowered)
        on_error = lowered.get("ondecodeerror", "fail").strip().lower()
        if on_error not in ON_DECODE_ERROR:
            raise OptionError(f"onDecodeError: {on_error!r} is not fail or null")
        decoding = key.decoded or value.decoded
        given = [name for lower, name in _REGISTRY_OPTIONS.items() if lowered.get(lower)]
        if given and not decoding:
            raise OptionError(f"{given[0]}: nothing is decoded; set valueFormat or keyFormat too")
        url = lowered.get("schemaregistryurl") or None
        if url is not None and not url.startswith(("http://", "https://")):
            raise OptionError(f"schemaRegistryUrl: {url!r} is not an http:// or https:// URL")
        if url is None and any(lowered.get(k) for k in ("schemaregistryuser", "schemaregistrycafile")):
            raise OptionError("schemaRegistryUser and schemaRegistryCaFile need schemaRegistryUrl")
        topic = lowered.get("schemaregistrytopic") or DEFAULT_REGISTRY_TOPIC
        if url is not None and topic != DEFAULT_REGISTRY_TOPIC:
            raise OptionError("schemaRegistryTopic and schemaRegistryUrl: name one place for the schemas")
        return cls(
            key=key,
            value=value,
            registry_topic=topic,
            registry_url=url,
            registry_user=lowered.get("schemaregistryuser") or None,
            registry_password=lowered.get("schemaregistrypassword") or None,
            registry_ca_file=lowered.get("schemaregistrycafile") or None,
            on_error="null" if on_error == "null" else "fail",
        )
