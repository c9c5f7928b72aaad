"""The embedded schema registry: Confluent's registry, its state in the log, shared by every replica.

``SchemaRegistry`` does what Confluent's registry does and answers as it does (its error codes
are ``service.errors``' registry errors), keeping its records in one topic of the ``Log`` port
(``store.RegistryTopic``) in Confluent's own format (``records``). Every replica reads the same
records into the same ``RegistryState``, so a write through one replica is read through any.

Reads catch up with the topic first (one offsets call; a fetch only if it holds records not
yet applied), then answer from memory. Writes take the coordinator's lock, one writer at a time
among every replica, and under it catch up, decide (``RegistryState.plan_*``; a registration
by ``registration.decide``), append, and apply what they appended (deciding again, a few
times, should another writer's records have come first unseen; then a retriable 503): a new
schema id is one above the highest ever seen, a schema already known anywhere in the registry
keeps its id, and a schema already live in the subject keeps its version. A write runs to its
end even if its client goes away.

Schemas are parsed by ``parsing.SchemaParser`` (references resolved, big texts off the event
loop, parsed schemas cached by id); schemas are the same when their identity (type, canonical
text, references) is; a new schema is stored in its canonical text; with ``normalize`` the schema
is its normalized text's (which may order what the other does not: Protobuf's fields by tag), as
Confluent normalizes first and stores that. It is also the ``SchemaResolver`` that
producing and consuming with schemas use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from service.errors import (
    BackendUnavailable,
    InvalidSchemaError,
    LockTimeout,
    PayloadTooLarge,
    RegistryTimeout,
    SchemaNotFound,
    SchemaTooLarge,
    SubjectCompatibilityNotConfigured,
    SubjectModeNotConfigured,
    SubjectNotFound,
    VersionNotFound,
)

from ..ports import Locks, Log
from .incompatibility import compatibility_messages
from .model import Compatibility, ParsedSchema, Schema, formatted_text, normalized_text
from .parsing import OFF_LOOP_CHARS, SchemaParser
from .registration import NewVersion, RegistryLimits, check_size, decide
from .state import LATEST, Mode, Record, RegistryState, Version, check_subject
from .store import RegistryTopic

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_TOPIC: Final = "_schemas"
WRITE_ATTEMPTS: Final = 3  # decisions a write makes under the lock when other writers' records came first


@dataclass(frozen=True, slots=True)
class Registered:
    """A version of a subject with its schema, as the API shows it."""

    subject: str
    version: int
    schema_id: int
    schema: Schema
    deleted: bool


class SchemaRegistry:
    """Confluent's schema registry over the ``Log`` (its records) and ``Locks`` (its lock).

    Collaborators: ``RegistryTopic`` reads and appends the records into a ``RegistryState``;
    ``SchemaParser`` parses; a ``Locks`` lock makes one writer at a time. ``start``
    does no I/O (the topic is created by the first write); ``stop`` lets writes in progress end.
    """

    def __init__(
        self,
        log_port: Log,
        locks: Locks,
        *,
        topic: str = DEFAULT_TOPIC,
        default_compatibility: Compatibility = Compatibility.BACKWARD,
        limits: RegistryLimits | None = None,
        lock_timeout_s: float = 10.0,
    ) -> None:
        self._topic = RegistryTopic(log_port, topic)
        self._locks = locks
        self._lock_name = f"schema-registry.{topic}"
        self._lock_timeout_s = lock_timeout_s
        self.default_compatibility = default_compatibility
        self.limits = limits or RegistryLimits()
        self._parser = SchemaParser(cache_chars=self.limits.cache_chars)
        self._writes: set[asyncio.Task[Any]] = set()
        self._open = False

    async def start(self) -> None:
        self._open = True

    async def stop(self) -> None:
        """Refuse new writes; let those in progress end (bounded by the lock's wait). Idempotent."""
        self._open = False
        if self._writes:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._lock_timeout_s + 5):
                    await asyncio.gather(*self._writes, return_exceptions=True)

    async def state(self) -> RegistryState:
        """The state as fresh as the topic."""
        if not self._open:
            raise BackendUnavailable("The schema registry is not running.")
        return await self._topic.catch_up()

    # --- reads ----------------------------------------------------------------------------

    async def subjects(
        self, *, deleted: bool = False, deleted_only: bool = False, prefix: str = ""
    ) -> list[str]:
        return (await self.state()).subjects(deleted=deleted, deleted_only=deleted_only, prefix=prefix)

    async def versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False) -> list[int]:
        state = await self.state()
        if not state.has_subject(subject, deleted=deleted or deleted_only):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return [v.version for v in state.versions(subject, deleted=deleted, deleted_only=deleted_only)]

    async def all_versions(
        self, *, prefix: str = "", deleted: bool = False, latest_only: bool = False
    ) -> list[Registered]:
        """The versions of every subject starting with ``prefix``, by subject and version: live
        ones (``deleted``: soft-deleted ones too); ``latest_only``: the highest of each subject."""
        state = await self.state()
        out: list[Registered] = []
        for subject in state.subjects(deleted=True, prefix=prefix):
            versions = state.versions(subject, deleted=deleted)
            out += [self._registered(state, v) for v in (versions[-1:] if latest_only else versions)]
        return out

    async def get(self, subject: str, version: int, *, deleted: bool = False) -> Registered:
        """Version ``version`` (``LATEST``: the latest live one) of ``subject``."""
        state = await self.state()
        found = state.version(subject, version, deleted=deleted)
        if found is None:
            if not state.has_subject(subject, deleted=deleted):
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            raise VersionNotFound(f"Version {version} not found.")
        return self._registered(state, found)

    async def schema(self, schema_id: int) -> Schema:
        schema = (await self.state()).schema(schema_id)
        if schema is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return schema

    async def uses(self, schema_id: int, *, deleted: bool = False) -> list[Version]:
        """The subject versions that are schema ``schema_id``."""
        state = await self.state()
        if state.schema(schema_id) is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return state.uses(schema_id, deleted=deleted)

    async def referenced_by(self, subject: str, version: int, *, deleted: bool = False) -> list[int]:
        """Ids of the schemas that reference version ``version`` of ``subject``."""
        found = await self.get(subject, version, deleted=True)
        return (await self.state()).referenced_by(subject, found.version, deleted=deleted)

    async def compatibility(self, subject: str | None, *, default_to_global: bool = False) -> Compatibility:
        """The level of ``subject`` (None: the global one, or the default); with
        ``default_to_global``, a subject without one has the global level."""
        state = await self.state()
        if subject is not None:
            level = state.compatibility(subject)
            if level is not None:
                return level
            if not default_to_global:
                raise SubjectCompatibilityNotConfigured(
                    f"Subject '{subject}' does not have subject-level compatibility configured"
                )
        return state.compatibility(None) or self.default_compatibility

    async def mode(self, subject: str | None, *, default_to_global: bool = False) -> Mode:
        state = await self.state()
        if subject is None:
            return state.mode(None) or Mode.READWRITE
        mode = state.mode(subject)
        if mode is not None:
            return mode
        if not default_to_global:
            raise SubjectModeNotConfigured(f"Subject '{subject}' does not have subject-level mode configured")
        return state.mode_in_scope(subject)

    async def find_version(
        self, subject: str, schema: Schema, *, deleted: bool = False, normalize: bool = False
    ) -> Registered:
        """The latest version of ``subject`` that is ``schema`` (live, or soft-deleted too with
        ``deleted``; with ``normalize``, that is its normalized schema, as ``register`` would
        register it): ``InvalidSchemaError`` if it is not valid, ``SubjectNotFound`` or
        ``SchemaNotFound`` if there is none."""
        check_size(schema, self.limits)
        state = await self.state()
        schema = self._parser.resolve(schema, state)
        parsed = await self._parser.parse(schema, state)
        if normalize:
            normal = Schema(schema.schema_type, normalized_text(parsed), schema.references)
            parsed = await self._parser.parse(normal, state)
        identity = await self._parser.identity(parsed)
        for found in reversed(state.versions(subject, deleted=deleted)):
            if await self._parser.identity_of_id(found.schema_id, state) == identity:
                return self._registered(state, found)
        if not state.has_subject(subject, deleted=deleted):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        raise SchemaNotFound("Schema not found")

    async def check(self, subject: str, schema: Schema, version: int | None = None) -> list[str]:
        """Why ``schema`` may not follow ``version`` of ``subject`` (``LATEST``; None: the live
        versions its level compares with) under its compatibility level; empty if it may."""
        check_size(schema, self.limits)
        state = await self.state()
        if version is None:
            against = state.versions(subject)
        else:
            target = state.version(subject, version)
            if target is None and version != LATEST:
                raise VersionNotFound(f"Version {version} not found.")
            against = [target] if target is not None else []
        schema = self._parser.resolve(schema, state)
        parsed = await self._parser.parse(schema, state)
        level = state.compatibility_in_scope(subject, self.default_compatibility)
        return await compatibility_messages(self._parser, state, subject, parsed, against, level)

    # --- writes ---------------------------------------------------------------------------

    async def register(
        self, subject: str, schema: Schema, *, normalize: bool = False, version: int | None = None
    ) -> tuple[int, int]:
        """(schema id, version) of ``schema`` under ``subject``: the existing version if it is a
        live one there already, else a new version (the schema's id if the registry knows it).
        A new schema is stored in its format's canonical text, with ``normalize`` its normalized
        text, as Confluent stores them; schemas are compared by their identity either way."""
        check_subject(subject)
        size = check_size(schema, self.limits)
        state = await self.state()
        state.check_writable(subject)
        schema = self._parser.resolve(schema, state)
        parsed = await self._parser.parse(schema, state)
        text_of = normalized_text if normalize else formatted_text
        big = len(schema.text) >= OFF_LOOP_CHARS  # a big schema's text is written off the loop too
        text = await asyncio.to_thread(text_of, parsed) if big else text_of(parsed)
        schema = Schema(schema.schema_type, text, schema.references)
        if normalize:  # as Confluent's normalize() first: the normalized schema is the one registered
            parsed = await self._parser.parse(schema, state)
        identity = await self._parser.identity(parsed)
        # Parse outside the lock what deciding will need (kept in the caches), so that the lock
        # is held for moments only: the subject's versions and the stored schemas' identities.
        await self._parser.find(identity, schema.schema_type, state)
        for found in state.versions(subject):
            with contextlib.suppress(InvalidSchemaError, SchemaNotFound):
                await self._parser.by_id(found.schema_id, state)

        new = NewVersion(subject, schema, parsed, identity, size, version)

        def stored(state: RegistryState, result: tuple[int, int]) -> bool:
            found = state.version(subject, result[1])
            return found is not None and found.schema_id == result[0]

        return await self._write(
            lambda state: decide(self._parser, self.limits, self.default_compatibility, new, state),
            written=stored,
        )

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        async def decide(state: RegistryState) -> tuple[list[Record], list[int]]:
            return state.plan_delete_subject(subject, permanent=permanent)

        return await self._write(decide)

    async def delete_version(self, subject: str, version: int, *, permanent: bool = False) -> int:
        async def decide(state: RegistryState) -> tuple[list[Record], int]:
            return state.plan_delete_version(subject, version, permanent=permanent)

        return await self._write(decide)

    async def set_compatibility(self, subject: str | None, level: Compatibility) -> None:
        if subject is not None:
            check_subject(subject)

        async def decide(state: RegistryState) -> tuple[list[Record], None]:
            return state.plan_set_config(subject, level), None

        await self._write(decide)

    async def delete_compatibility(self, subject: str | None) -> Compatibility:
        """Remove the level of ``subject`` (None: the global one, back to the default); the level it had."""

        async def decide(state: RegistryState) -> tuple[list[Record], Compatibility]:
            out, level = state.plan_delete_config(subject)
            return out, level or self.default_compatibility

        return await self._write(decide)

    async def set_mode(self, subject: str | None, mode: Mode) -> None:
        if subject is not None:
            check_subject(subject)

        async def decide(state: RegistryState) -> tuple[list[Record], None]:
            return state.plan_set_mode(subject, mode), None

        await self._write(decide)

    async def delete_mode(self, subject: str) -> Mode:
        async def decide(state: RegistryState) -> tuple[list[Record], Mode]:
            return state.plan_delete_mode(subject)

        return await self._write(decide)

    # --- what producing and consuming need (``SchemaResolver``) ---------------------------

    async def lookup(self, subject: str, schema: Schema) -> int | None:
        try:
            return (await self.find_version(subject, schema)).schema_id
        except (SubjectNotFound, SchemaNotFound):
            return None

    async def schema_by_id(self, schema_id: int) -> ParsedSchema:
        return await self._parser.by_id(schema_id, await self.state())

    async def version(self, subject: str, version: int | Literal["latest"]) -> tuple[int, int, ParsedSchema]:
        found = await self.get(subject, LATEST if version == "latest" else version)
        return found.schema_id, found.version, await self.schema_by_id(found.schema_id)

    # --- internals ------------------------------------------------------------------------

    def _registered(self, state: RegistryState, found: Version) -> Registered:
        schema = state.schema(found.schema_id)
        assert schema is not None  # a version's id always has its schema
        return Registered(found.subject, found.version, found.schema_id, schema, found.deleted)

    async def _write(
        self,
        decide: Callable[[RegistryState], Awaitable[tuple[list[Record], T]]],
        *,
        written: Callable[[RegistryState, T], bool] | None = None,
    ) -> T:
        """Decide and append under the lock, in a task of its own: a client that goes away does
        not cut a write in half. ``written`` checks, still under the lock, that the state shows
        what was appended and that no other writer's record came before it unseen; if one did,
        the write decides again on the state that holds them (``WRITE_ATTEMPTS`` in all, then
        ``RegistryTimeout``: 503, retry)."""
        if not self._open:
            raise BackendUnavailable("The schema registry is not running.")
        task = asyncio.ensure_future(self._locked(decide, written))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_retrieve)
            raise

    async def _locked(
        self,
        decide: Callable[[RegistryState], Awaitable[tuple[list[Record], T]]],
        written: Callable[[RegistryState, T], bool] | None,
    ) -> T:
        try:
            async with self._locks.lock(self._lock_name, timeout_s=self._lock_timeout_s):
                for attempt in range(1, WRITE_ATTEMPTS + 1):
                    state = await self._topic.catch_up(complete=True)
                    seen = self._topic.position  # what the decision may rest on
                    records, result = await decide(state)
                    if not records:
                        return result
                    try:
                        first = await self._topic.append(records)
                    except PayloadTooLarge as exc:
                        raise SchemaTooLarge(f"The log refused the schema's record: {exc.message}") from exc
                    raced = first is not None and first > seen
                    if written is None or (not raced and written(self._topic.state, result)):
                        return result
                    # Another writer's records came before these, unseen when deciding (an end offset
                    # that read low, a replica on another coordinator); the state now holds them and
                    # these (which may have been ignored): decide again on it (a registration that
                    # was applied finds itself).
                    log.warning("a registry write lost a race (attempt %d of %d)", attempt, WRITE_ATTEMPTS)
                raise RegistryTimeout(
                    f"The registry's records were not read back as written in {WRITE_ATTEMPTS} attempts: "
                    "other writers raced this one (is every replica on the same coordinator?); retry."
                )
        except LockTimeout as exc:
            raise RegistryTimeout(
                f"The registry's writer lock was not acquired in time: {exc.message}"
            ) from exc


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
