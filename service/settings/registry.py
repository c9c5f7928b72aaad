"""The schema registry: embedded (its state in a topic of the log) or the URL of an external one,
and the bounds, cache and locks of the embedded one or the client of the external one.

The registry's core (``service.core.schemas``) and its external client
(``service.adapters.registry``) read them; how the client settings fit the URL is checked by
``model.Settings``, over ``REGISTRY_CLIENT_SETTINGS``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from ..core.schemas.model import Compatibility
from ..core.schemas.registration import RegistryLimits
from ..core.schemas.serde import SubjectNameStrategy
from .group import SettingsGroup

# The settings of the client of an external schema registry: each needs schema_registry to be a URL.
REGISTRY_CLIENT_SETTINGS = (
    "schema_registry_username",
    "schema_registry_password",
    "schema_registry_password_file",
    "schema_registry_ssl_cafile",
    "schema_registry_ssl_certfile",
    "schema_registry_ssl_keyfile",
    "schema_registry_ssl_password",
)


class RegistrySettings(SettingsGroup):
    """Which registry, its topic, the subject-name strategy, its bounds, and an external one's client."""

    # the schema registry: Confluent's schema-registry API at /schema-registry
    schema_registry: str = Field(
        "embedded",
        description="'embedded': brokergate is the registry, its state in the log's schema_registry_topic, "
        "shared by every replica on the same log and coordinator; or the http(s):// URL of an external "
        "Confluent-compatible registry the gateway uses instead.",
    )
    schema_registry_topic: str = Field(
        "_schemas",
        pattern=r"^[a-zA-Z0-9._-]{1,249}$",
        description="The topic holding the registry's records, in Confluent's format (one partition, "
        "compacted where the log compacts, kept forever); created by the first write.",
    )
    schema_subject_strategy: SubjectNameStrategy = Field(
        SubjectNameStrategy.TOPIC,
        description="The subject a schema given inline to a produce is registered under: 'topic' "
        "({topic}-key / {topic}-value), 'record' (the record's full name) or 'topic_record' "
        "({topic}-{record full name}), as Confluent's subject name strategies.",
    )
    schema_registry_compatibility: Compatibility = Field(
        Compatibility.BACKWARD,
        description="Compatibility level of a subject that sets none, with no global one.",
    )
    schema_registry_max_schema_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest schema text a client may register (413, 42201 beyond)."
    )
    schema_registry_max_schemas: int = Field(
        10_000, ge=1, description="Most schema ids the registry holds (422, 42205 beyond)."
    )
    schema_registry_max_subjects: int = Field(
        10_000, ge=1, description="Most subjects the registry holds (422, 42205 beyond)."
    )
    schema_registry_max_versions: int = Field(
        1_000, ge=1, description="Most versions one subject holds, soft-deleted ones too (422, 42205 beyond)."
    )
    schema_registry_max_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Most bytes of schema text the registry holds, every id together (422, 42205 beyond).",
    )
    schema_registry_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Parsed schemas kept in memory, counted by the size of their texts (least recently used "
        "out first).",
    )
    schema_registry_lock_timeout_ms: int = Field(
        10_000,
        ge=100,
        description="Longest wait of a registry write for the writer lock every replica shares "
        "(503, 50002 beyond).",
    )
    # an external registry (schema_registry is its URL): how the gateway signs in to it, the TLS it
    # checks, how long it waits on it. Secrets as for the other backends: never shown, or in a file.
    schema_registry_username: str | None = Field(
        None, description="HTTP Basic user the gateway signs in to an external registry as."
    )
    schema_registry_password: SecretStr | None = Field(None, description="Its password.")
    schema_registry_password_file: Path | None = Field(
        None, description="A file holding the registry password, instead of schema_registry_password."
    )
    schema_registry_ssl_cafile: Path | None = Field(
        None,
        description="With an https:// registry: CA certificates (PEM) its certificate and hostname are "
        "checked against; default: the system's.",
    )
    schema_registry_ssl_certfile: Path | None = Field(
        None,
        description="The gateway's client certificate (PEM) for the registry's mutual TLS; may hold its key.",
    )
    schema_registry_ssl_keyfile: Path | None = Field(
        None, description="The key (PEM) of schema_registry_ssl_certfile, if apart."
    )
    schema_registry_ssl_password: SecretStr | None = Field(
        None, description="The password of an encrypted registry client key."
    )
    schema_registry_request_timeout_ms: int = Field(
        5_000,
        ge=100,
        description="Longest wait for one answer of an external registry before answering 503 (schemas "
        "already known are not asked again).",
    )

    @field_validator("schema_registry")
    @classmethod
    def _registry_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith(("http://", "https://")):
            raise ValueError("schema_registry must be 'embedded' or the http(s):// URL of a registry")
        return v

    @field_validator("schema_registry_compatibility", mode="before")
    @classmethod
    def _level_upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v

    def registry_limits(self) -> RegistryLimits:
        """What the embedded registry may hold, and the parsed schemas it keeps in memory."""
        return RegistryLimits(
            schema_bytes=self.schema_registry_max_schema_bytes,
            schemas=self.schema_registry_max_schemas,
            subjects=self.schema_registry_max_subjects,
            versions=self.schema_registry_max_versions,
            total_bytes=self.schema_registry_max_bytes,
            cache_chars=self.schema_registry_cache_bytes,
        )
