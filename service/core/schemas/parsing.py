"""Schemas parsed for the registry: references resolved, big texts off the event loop, results cached.

``SchemaParser`` parses through ``formats.parse``, handing each schema its references already
parsed (each resolved to a version of the registry and parsed by its id, recursively). A text
of ``OFF_LOOP_CHARS`` or more is parsed in a worker thread, at most ``concurrency`` at once,
so a big schema never holds the event loop for long; so are compatibility checks between big
schemas. Parsed schemas are cached by id, least recently used first out, within a budget of
source text.

It also gives each schema its *identity*: a digest of its type, canonical text and references.
Two schemas with the same identity are the same schema (the registry gives them one id); the
identity of a stored schema is computed on first need and remembered.

A format that fails in an unforeseen way (any exception but ``InvalidSchema``) is reported as
an invalid schema, never as a server error.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from service.errors import InvalidSchemaError, SchemaNotFound

from . import formats
from .model import (
    Compatibility,
    InvalidSchema,
    ParsedSchema,
    Schema,
    SchemaReference,
    SchemaType,
    compatibility_errors,
)
from .state import RegistryState

log = logging.getLogger(__name__)

OFF_LOOP_CHARS: Final = 4 * 1024
MAX_REFERENCE_DEPTH: Final = 32
T = TypeVar("T")


class SchemaParser:
    """Parses new and stored schemas; caches them by id and their identities.

    Collaborators: ``formats.parse`` does the parsing; the ``RegistryState`` a caller passes
    says what an id or a reference is (the caller has caught it up).
    """

    def __init__(self, *, cache_chars: int, concurrency: int = 2) -> None:
        self._cache: OrderedDict[int, tuple[Schema, ParsedSchema]] = OrderedDict()
        self._cache_chars = cache_chars
        self._cached_chars = 0
        self._identities: dict[int, tuple[Schema, bytes | None]] = {}
        self._by_identity: dict[bytes, int] = {}
        self._threads = asyncio.Semaphore(concurrency)

    # --- new schemas ----------------------------------------------------------------------

    def resolve(self, schema: Schema, state: RegistryState) -> Schema:
        """``schema`` with every reference to ``latest`` (-1) made a version number;
        ``InvalidSchemaError`` if one names no version of the registry."""
        refs = []
        for ref in schema.references:
            found = state.version(ref.subject, ref.version, deleted=True)
            if found is None:
                raise _invalid(
                    schema,
                    f"reference '{ref.name}' to subject {ref.subject!r} version {ref.version} not found",
                )
            refs.append(SchemaReference(ref.name, ref.subject, found.version))
        return Schema(schema.schema_type, schema.text, tuple(refs))

    async def parse(self, schema: Schema, state: RegistryState) -> ParsedSchema:
        """``schema`` (its references resolved) parsed; ``InvalidSchemaError`` if it is not valid."""
        references: dict[str, ParsedSchema] = {}
        for ref in schema.references:
            found = state.version(ref.subject, ref.version, deleted=True)
            if found is None:
                raise _invalid(
                    schema,
                    f"reference '{ref.name}' to subject {ref.subject!r} version {ref.version} not found",
                )
            try:
                references[ref.name] = await self.by_id(found.schema_id, state, depth=1)
            except InvalidSchemaError as exc:
                raise _invalid(schema, f"reference '{ref.name}' cannot be parsed: {exc.message}") from None
        return await self._parse(schema, references)

    # --- stored schemas -------------------------------------------------------------------

    async def by_id(self, schema_id: int, state: RegistryState, *, depth: int = 0) -> ParsedSchema:
        """Schema ``schema_id`` parsed (``SchemaNotFound`` if it does not exist)."""
        schema = state.schema(schema_id)
        if schema is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        cached = self._cache.get(schema_id)
        if cached is not None and cached[0] is schema:
            self._cache.move_to_end(schema_id)
            return cached[1]
        if depth > MAX_REFERENCE_DEPTH:
            raise _invalid(schema, f"references are nested more than {MAX_REFERENCE_DEPTH} deep")
        references: dict[str, ParsedSchema] = {}
        for ref in schema.references:
            found = state.version(ref.subject, ref.version, deleted=True)
            if found is None:
                raise _invalid(
                    schema, f"reference '{ref.name}' to subject {ref.subject!r} version {ref.version} is gone"
                )
            references[ref.name] = await self.by_id(found.schema_id, state, depth=depth + 1)
        parsed = await self._parse(schema, references)
        self._remember(schema_id, schema, parsed)
        return parsed

    async def identity_of_id(self, schema_id: int, state: RegistryState) -> bytes | None:
        """The identity of stored schema ``schema_id``; None if it cannot be parsed (or is gone)."""
        schema = state.schema(schema_id)
        if schema is None:
            return None
        known = self._identities.get(schema_id)
        if known is not None and known[0] is schema:
            return known[1]
        try:
            identity: bytes | None = await self.identity(await self.by_id(schema_id, state))
        except (InvalidSchemaError, SchemaNotFound) as exc:
            log.warning("stored schema %d cannot be parsed: %s", schema_id, exc)
            identity = None
        self._identities[schema_id] = (schema, identity)
        if identity is not None:
            self._by_identity.setdefault(identity, schema_id)
        return identity

    async def find(self, identity: bytes, schema_type: SchemaType, state: RegistryState) -> int | None:
        """The lowest id whose schema has ``identity``, if any: remembered identities first, then
        those of the stored schemas of the same type not yet known (computed once each)."""
        known = self._by_identity.get(identity)
        if known is not None and await self.identity_of_id(known, state) == identity:
            return known
        self._by_identity.pop(identity, None)
        for gone in [i for i, (schema, _) in self._identities.items() if state.schema(i) is not schema]:
            del self._identities[gone]  # hard-deleted since: their texts are not kept for nothing
        for schema_id in sorted(state.schema_ids()):
            schema = state.schema(schema_id)
            if schema is None or schema.schema_type is not schema_type:
                continue
            cached = self._identities.get(schema_id)
            if cached is not None and cached[0] is schema:
                if cached[1] == identity:
                    return schema_id
                continue
            if await self.identity_of_id(schema_id, state) == identity:
                return schema_id
            await asyncio.sleep(0)  # many small parses in a row: let other requests in between
        return None

    async def identity(self, parsed: ParsedSchema) -> bytes:
        """``identity_of(parsed)``, in a worker thread when the schema is big."""
        return await self._run(len(parsed.schema.text), parsed.schema, identity_of, parsed)

    # --- checks ---------------------------------------------------------------------------

    async def compatibility_errors(
        self, new: ParsedSchema, previous: Sequence[ParsedSchema], level: Compatibility
    ) -> list[str]:
        """``model.compatibility_errors``, in a worker thread when the schemas are big."""
        size = len(new.schema.text) + sum(len(p.schema.text) for p in previous)
        return await self._run(size, new.schema, compatibility_errors, new, previous, level)

    # --- internals ------------------------------------------------------------------------

    async def _parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        return await self._run(len(schema.text), schema, formats.parse, schema, references)

    async def _run(self, size: int, schema: Schema, fn: Callable[..., T], *args: object) -> T:
        if size < OFF_LOOP_CHARS:
            return _guarded(schema, fn, *args)
        async with self._threads:
            return await asyncio.to_thread(_guarded, schema, fn, *args)

    def _remember(self, schema_id: int, schema: Schema, parsed: ParsedSchema) -> None:
        old = self._cache.pop(schema_id, None)
        if old is not None:
            self._cached_chars -= len(old[0].text)
        self._cache[schema_id] = (schema, parsed)
        self._cached_chars += len(schema.text)
        while self._cached_chars > self._cache_chars and len(self._cache) > 1:
            _, (dropped, _) = self._cache.popitem(last=False)
            self._cached_chars -= len(dropped.text)


def identity_of(parsed: ParsedSchema) -> bytes:
    """A digest of what makes two schemas the same: type, canonical text and references."""
    h = hashlib.sha256(parsed.schema.schema_type.value.encode())
    h.update(b"\0")
    h.update(parsed.canonical().encode("utf-8", "surrogatepass"))
    for ref in parsed.schema.references:
        for part in (ref.name, ref.subject, str(ref.version)):
            h.update(b"\0")
            h.update(part.encode("utf-8", "surrogatepass"))
    return h.digest()


def _guarded(schema: Schema, fn: Callable[..., T], *args: object) -> T:
    try:
        return fn(*args)
    except InvalidSchema as exc:
        raise _invalid(schema, str(exc)) from None
    except RecursionError:
        raise _invalid(schema, "the schema is nested too deeply") from None
    except Exception as exc:  # a format's own failure must not become a server error
        log.exception("the %s format failed on a schema", schema.schema_type.value)
        raise _invalid(schema, f"{type(exc).__name__}: {exc}") from None


def _invalid(schema: Schema, details: str) -> InvalidSchemaError:
    return InvalidSchemaError(f"Invalid schema of type {schema.schema_type.value}, details: {details}")
