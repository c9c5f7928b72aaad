"""Why a schema may not follow a subject's versions, in the list of messages Confluent's registry
gives: in a 409's ``details`` and in a compatibility check's ``messages`` (``verbose``).

As Confluent's checker assembles them (``SchemaValidatorBuilder``, ``CompatibilityChecker``,
``AbstractSchemaRegistry.isCompatibleWithPrevious``): the versions the level compares with, the
latest first, and for the first one the schema may not follow, its format's errors with the roles
filled in (``model.compatibility_errors``: the old schema reading new data first, under FORWARD and
FULL; then the new one reading old data, under BACKWARD and FULL), then that version and its text
(``{oldSchemaVersion: N}``, ``{oldSchema: '…'}``, the text cut at 10 KiB) after the last of the
two checks when it found errors, and at the end the level
(``{validateFields: 'false', compatibility: 'BACKWARD'}``). A version of another schema type is
``Incompatible because of different schema type`` alone.

Collaborators: ``parsing.SchemaParser`` (the versions' schemas, parsed and compared off the event
loop when big); ``registry.SchemaRegistry`` calls ``compatibility_messages``.
"""

from __future__ import annotations

from typing import Final

from service.errors import InvalidSchemaError

from .model import Compatibility, ParsedSchema
from .parsing import SchemaParser
from .state import RegistryState, Version

DIFFERENT_TYPE: Final = "Incompatible because of different schema type"
OLD_SCHEMA_CHARS: Final = 10 * 1024  # Confluent's MAX_SCHEMA_SIZE_FOR_LOGGING


async def compatibility_messages(
    parser: SchemaParser,
    state: RegistryState,
    subject: str,
    parsed: ParsedSchema,
    against: list[Version],
    level: Compatibility,
) -> list[str]:
    """Why ``parsed`` may not follow ``against`` (a subject's versions, oldest first) under
    ``level``, as Confluent lists it; empty if it may."""
    previous = against if level.transitive else against[-1:]
    for version in reversed(previous if level is not Compatibility.NONE else []):
        try:
            old = await parser.by_id(version.schema_id, state)
        except InvalidSchemaError as exc:
            raise InvalidSchemaError(
                f"Version {version.version} of subject '{subject}', to compare with, cannot be parsed: "
                f"{exc.message}"
            ) from None
        errors = [DIFFERENT_TYPE]
        if old.schema.schema_type is parsed.schema.schema_type:
            errors = await _errors(parser, parsed, old, version, level)
        if errors:
            return [*errors, f"{{validateFields: 'false', compatibility: '{level.value}'}}"]
    return []


async def _errors(
    parser: SchemaParser, new: ParsedSchema, old: ParsedSchema, version: Version, level: Compatibility
) -> list[str]:
    forward = await parser.compatibility_errors(new, [old], Compatibility.FORWARD) if level.forward else []
    backward = await parser.compatibility_errors(new, [old], Compatibility.BACKWARD) if level.backward else []
    last = backward if level.backward else forward  # the check Confluent appends the old schema to
    return [*forward, *backward, *(_old_schema(version, old) if last else [])]


def _old_schema(version: Version, old: ParsedSchema) -> list[str]:
    text = old.schema.text
    shown = f"'{text}'" if len(text) <= OLD_SCHEMA_CHARS else f"<truncated> '{text[:OLD_SCHEMA_CHARS]}...'"
    return [f"{{oldSchemaVersion: {version.version}}}", f"{{oldSchema: {shown}}}"]
