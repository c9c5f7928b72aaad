"""Registering a schema: the limits a registration meets, and the decision made under the writer lock.

``SchemaRegistry.register`` parses the schema and fills the parser's caches
outside the lock, then, under it, calls ``decide`` on the state just caught up
with: the version the schema already is in the subject, or the record that makes
it a new one, after the compatibility check and the registry's limits. The
decision does no I/O the caches have not made cheap, so the lock is held for
moments only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from service.errors import IncompatibleSchema, InvalidSchemaError, OperationNotPermitted, SchemaTooLarge

from .incompatibility import compatibility_messages
from .model import Compatibility, ParsedSchema, Schema
from .parsing import SchemaParser
from .state import Record, RegistryState

MESSAGE_CHARS: Final = 64 * 1024  # of the compatibility errors put in one 409 (the old text's too)


@dataclass(frozen=True, slots=True)
class RegistryLimits:
    """What a registration may add (``OperationNotPermitted`` beyond; ``SchemaTooLarge`` for
    ``schema_bytes``), and the parsed schemas kept in memory (``cache_chars`` of their texts)."""

    schema_bytes: int = 1024 * 1024
    schemas: int = 10_000
    subjects: int = 10_000
    versions: int = 1_000
    total_bytes: int = 256 * 1024 * 1024
    cache_chars: int = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class NewVersion:
    """A registration being decided: the schema parsed, with its identity."""

    subject: str
    schema: Schema
    parsed: ParsedSchema
    identity: bytes
    size: int
    version: int | None  # the version the client asked for, if it did


def check_size(schema: Schema, limits: RegistryLimits) -> int:
    """The bytes of the schema's text; ``SchemaTooLarge`` over the limit."""
    size = len(schema.text.encode("utf-8", "surrogatepass"))
    if size > limits.schema_bytes:
        raise SchemaTooLarge(
            f"The schema is {size} bytes, over the registry's limit of {limits.schema_bytes} bytes."
        )
    return size


async def decide(
    parser: SchemaParser,
    limits: RegistryLimits,
    default_level: Compatibility,
    new: NewVersion,
    state: RegistryState,
) -> tuple[list[Record], tuple[int, int]]:
    """(records to append, (schema id, version)): none if ``new`` is a live version already."""
    subject, schema = new.subject, new.schema
    state.check_writable(subject)
    parser.resolve(schema, state)  # its references are still there
    live = state.versions(subject)
    for found in reversed(live):
        if new.version in (None, found.version) and (
            await parser.identity_of_id(found.schema_id, state) == new.identity
        ):
            return [], (found.schema_id, found.version)
    level = state.compatibility_in_scope(subject, default_level)
    errors = await compatibility_messages(parser, state, subject, new.parsed, live, level)
    if errors:
        details = ", ".join(errors)  # as Confluent prints its list of messages
        if len(details) > MESSAGE_CHARS:
            details = details[: MESSAGE_CHARS - 3] + "..."
        details = f"[{details}]"
        raise IncompatibleSchema(
            f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
            f"details: {details}"
        )
    stored = schema
    schema_id = state.id_of(schema)
    if schema_id is None:
        schema_id = await parser.find(new.identity, schema.schema_type, state)
    if schema_id is None:
        _check_room(state, limits, new.size)
        schema_id = state.max_id + 1
    else:  # the same schema, maybe spelled otherwise: an id names one text, the first one's
        stored = state.schema(schema_id) or schema
    number = state.next_version(subject)
    if new.version is not None and new.version != number:
        raise InvalidSchemaError(
            f"Invalid schema: version {new.version} is not one more than the previous version ({number - 1})."
        )
    if state.version_count(subject) >= limits.versions:
        raise OperationNotPermitted(
            f"Subject '{subject}' has {limits.versions} versions, the most the registry keeps "
            "(schema_registry_max_versions); delete old versions permanently first."
        )
    if not state.version_count(subject) and state.subject_count >= limits.subjects:
        raise OperationNotPermitted(
            f"The registry holds {limits.subjects} subjects, its limit (schema_registry_max_subjects)."
        )
    return state.plan_register(subject, number, schema_id, stored), (schema_id, number)


def _check_room(state: RegistryState, limits: RegistryLimits, size: int) -> None:
    """``OperationNotPermitted`` if one more schema of ``size`` bytes is past the registry's limits."""
    if state.schema_count >= limits.schemas:
        raise OperationNotPermitted(
            f"The registry holds {limits.schemas} schemas, its limit (schema_registry_max_schemas)."
        )
    if state.total_bytes + size > limits.total_bytes:
        raise OperationNotPermitted(
            f"The registry's schemas would take more than {limits.total_bytes} bytes, its limit "
            "(schema_registry_max_bytes)."
        )
