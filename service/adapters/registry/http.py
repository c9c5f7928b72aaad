"""An external schema registry (Confluent's, Karapace...) as the ``SchemaResolver`` of the gateway.

``HttpSchemaRegistry`` speaks Confluent's schema-registry REST API with httpx: ``register`` posts
to ``/subjects/{subject}/versions`` (the version comes with the answer, or from a lookup),
``lookup`` posts to ``/subjects/{subject}``, ``schema_by_id`` gets ``/schemas/ids/{id}`` and
``version`` gets ``/subjects/{subject}/versions/{version}``; a subject is always one
percent-encoded path segment. Schemas are parsed by ``service.core.schemas.formats``, their
references fetched from the registry (the referenced subject versions) and parsed first; a big
text is parsed in a worker thread.

What never changes is kept (``cache``): the parsed schema of an id, and the (id, version) a
(subject, schema) was registered or found as, each within ``schema_registry_cache_bytes`` of
schema text, the least recently used out first; concurrent requests for the same answer share
one call. So a produce with a known schema asks the registry nothing, and keeps working while
the registry is away. A version asked by number or as ``latest`` is asked each time.

``errors`` turns every answer and failure into ``service.errors``: the registry's own errors
are the embedded registry's, and a registry that cannot be reached, does not answer within
``schema_registry_request_timeout_ms``, fails (5xx) or answers what a registry does not is
``BackendUnavailable`` (503). ``start`` opens the HTTP client and asks the registry's root in
the background, for the log only: the gateway starts whether or not the registry answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeVar
from urllib.parse import quote

import httpx
import orjson

from service.core.rules import check_subject
from service.core.schemas import formats
from service.core.schemas.model import InvalidSchema, ParsedSchema, Schema, SchemaReference, SchemaType
from service.core.schemas.parsing import MAX_REFERENCE_DEPTH, OFF_LOOP_CHARS
from service.errors import (
    BackendError,
    BackendUnavailable,
    GatewayError,
    InvalidSchemaError,
    SchemaNotFound,
    SchemaTooLarge,
    SubjectNotFound,
    VersionNotFound,
)

from ..lifecycle import Lifecycle
from . import errors
from .cache import LruCache, SingleFlight
from .options import RegistryClientOptions

__all__ = ["HttpSchemaRegistry"]

log = logging.getLogger(__name__)

T = TypeVar("T")
SR_V1: Final = "application/vnd.schemaregistry.v1+json"
ACCEPT: Final = f"{SR_V1}, application/vnd.schemaregistry+json; q=0.9, application/json; q=0.5"
MAX_CONNECTIONS: Final = 64
MAX_CACHED_IDS: Final = 100_000  # (subject, schema) pairs remembered, whatever their size
PARSE_THREADS: Final = 2
# A pooled connection the registry closed while idle fails the next request on it; that one
# request is sent again on a new connection (registering the same schema twice is harmless).
_STALE_CONNECTION: Final = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)

RegisteredAs = tuple[int, int]  # (schema id, version)


class HttpSchemaRegistry(Lifecycle):
    """The ``SchemaResolver`` of a registry reached over HTTP(S) at ``options.url``.

    Collaborators: an ``httpx.AsyncClient`` (opened by ``start``, closed by ``stop``) with the
    gateway's credentials and TLS context; ``errors`` for what answers mean; ``LruCache`` and
    ``SingleFlight`` (``cache``) for what need not be asked again.
    """

    def __init__(self, options: RegistryClientOptions) -> None:
        super().__init__()
        self.options = options
        self.url = options.url
        self._timeout_s = options.timeout_ms / 1000
        self._client: httpx.AsyncClient | None = None
        self._probe: asyncio.Task[None] | None = None
        self._parsed: LruCache[int, ParsedSchema] = LruCache(
            max_weight=options.cache_chars, max_entries=MAX_CACHED_IDS
        )
        self._ids: LruCache[tuple[str, Schema], RegisteredAs] = LruCache(
            max_weight=options.cache_chars, max_entries=MAX_CACHED_IDS
        )
        self._fetching: SingleFlight[int, ParsedSchema] = SingleFlight()
        self._registering: SingleFlight[tuple[str, Schema, bool], RegisteredAs] = SingleFlight()
        self._threads = asyncio.Semaphore(PARSE_THREADS)

    def __repr__(self) -> str:
        return f"HttpSchemaRegistry({self.url!r})"

    async def _open(self) -> None:
        options = self.options
        auth = None
        if options.username is not None:
            auth = httpx.BasicAuth(options.username, options.password or "")
        self._client = httpx.AsyncClient(
            base_url=self.url,
            auth=auth,
            verify=options.tls if options.tls is not None else True,
            timeout=httpx.Timeout(self._timeout_s),
            limits=httpx.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS // 4
            ),
            headers={"Accept": ACCEPT, "User-Agent": "brokergate"},
            follow_redirects=False,
            trust_env=False,  # no proxy or .netrc credentials picked up from the environment
        )
        self._probe = asyncio.create_task(self._say_whether_it_answers())

    async def _close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
            self._probe = None
        await self._fetching.cancel()
        await self._registering.cancel()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _say_whether_it_answers(self) -> None:
        """For the log: whether the registry answers now (nothing depends on it)."""
        try:
            await self._call("GET", "/")
        except GatewayError as exc:
            log.warning(
                "%s (schemas the gateway has not seen yet are unavailable until it answers)", exc.message
            )
        else:
            log.info("schema registry: the external registry at %s answers", self.url)

    # --- SchemaResolver --------------------------------------------------------------------

    async def register(self, subject: str, schema: Schema, *, normalize: bool = False) -> tuple[int, int]:
        """(schema id, version) of ``schema`` under ``subject``, as the registry registers it
        (its compatibility rules decide); remembered, so asking again asks the registry nothing."""
        check_subject(subject)
        self._check_size(schema)
        known = self._ids.get((subject, schema))
        if known is not None:
            return known
        return await self._registering.run(
            (subject, schema, normalize), lambda: self._register(subject, schema, normalize)
        )

    async def lookup(self, subject: str, schema: Schema) -> int | None:
        """The id of ``schema`` if it is a live version of ``subject`` (None otherwise); a found
        one is remembered."""
        check_subject(subject)
        self._check_size(schema)
        known = self._ids.get((subject, schema))
        if known is not None:
            return known[0]
        path = f"/subjects/{_segment(subject)}"
        try:
            found = await self._call("POST", path, _body(schema))
        except (SubjectNotFound, SchemaNotFound):
            return None
        schema_id = self._number(found, "id", f"POST {path}")
        self._remember(subject, schema, (schema_id, self._number(found, "version", f"POST {path}")))
        return schema_id

    async def schema_by_id(self, schema_id: int) -> ParsedSchema:
        """The schema with this id, parsed (``SchemaNotFound`` if the registry has none)."""
        cached = self._parsed.get(schema_id)
        if cached is not None:
            return cached
        return await self._fetching.run(schema_id, lambda: self._fetch(schema_id))

    async def version(self, subject: str, version: int | Literal["latest"]) -> tuple[int, int, ParsedSchema]:
        """(schema id, version, parsed schema) of a live version of ``subject`` (asked each time:
        ``latest`` moves, and a numbered version may be deleted)."""
        check_subject(subject)
        schema_id, number, schema = await self._subject_version(subject, version)
        return schema_id, number, await self._parsed_schema(schema_id, schema, depth=0)

    # --- internals: asking ----------------------------------------------------------------

    async def _register(self, subject: str, schema: Schema, normalize: bool) -> RegisteredAs:
        params = {"normalize": "true"} if normalize else None
        path = f"/subjects/{_segment(subject)}"
        registered = await self._call("POST", f"{path}/versions", _body(schema), params=params)
        schema_id = self._number(registered, "id", f"POST {path}/versions")
        version = registered.get("version")
        if not _is_number(version):  # Confluent's registry answers the id alone: ask which version
            found = await self._call("POST", path, _body(schema), params=params)
            version = self._number(found, "version", f"POST {path}")
        self._remember(subject, schema, (schema_id, version))
        return schema_id, version

    async def _fetch(self, schema_id: int) -> ParsedSchema:
        path = f"/schemas/ids/{int(schema_id)}"
        found = await self._call("GET", path)
        return await self._parsed_schema(schema_id, self._schema(found, f"GET {path}"), depth=0)

    async def _subject_version(
        self, subject: str, version: int | Literal["latest"]
    ) -> tuple[int, int, Schema]:
        number = "latest" if version == "latest" else str(int(version))
        path = f"/subjects/{_segment(subject)}/versions/{number}"
        found = await self._call("GET", path)
        request = f"GET {path}"
        return (
            self._number(found, "id", request),
            self._number(found, "version", request),
            self._schema(found, request),
        )

    async def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """The JSON the registry answers ``method path``, or the error its answer means; at most
        ``schema_registry_request_timeout_ms`` however the exchange goes."""
        client = self._client
        if client is None:
            raise BackendUnavailable("The external schema registry's client is not running.")
        request = f"{method} {path}"
        content = None if body is None else orjson.dumps(body)
        headers = None if body is None else {"Content-Type": SR_V1}
        try:
            async with asyncio.timeout(self._timeout_s):
                try:
                    status, answer = await self._exchange(client, method, path, content, headers, params)
                except _STALE_CONNECTION:
                    status, answer = await self._exchange(client, method, path, content, headers, params)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise errors.unreachable(exc, self.url, self.options.timeout_ms) from exc
        return errors.answer(self.url, request, status, answer)

    async def _exchange(
        self,
        client: httpx.AsyncClient,
        method: str,
        path: str,
        content: bytes | None,
        headers: Mapping[str, str] | None,
        params: Mapping[str, str] | None,
    ) -> tuple[int, bytes]:
        """The status and body of one request, the body read up to ``max_answer_bytes``."""
        limit = self.options.max_answer_bytes
        async with client.stream(method, path, content=content, headers=headers, params=params) as response:
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise BackendError(
                        f"The schema registry at {self.url} answered {method} {path} with more than {limit} "
                        "bytes: schemas over schema_registry_max_schema_bytes are not accepted."
                    )
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)

    # --- internals: parsing ---------------------------------------------------------------

    async def _parsed_schema(self, schema_id: int, schema: Schema, *, depth: int) -> ParsedSchema:
        """Schema ``schema_id`` (whose text is ``schema``) parsed, its references fetched first."""
        cached = self._parsed.get(schema_id)
        if cached is not None:
            return cached
        if depth > MAX_REFERENCE_DEPTH:
            raise _invalid(schema, f"references are nested more than {MAX_REFERENCE_DEPTH} deep")
        references: dict[str, ParsedSchema] = {}
        for ref in schema.references:
            try:
                ref_id, _, ref_schema = await self._subject_version(ref.subject, ref.version)
            except (SubjectNotFound, VersionNotFound):
                raise _invalid(
                    schema, f"reference '{ref.name}' to subject {ref.subject!r} version {ref.version} is gone"
                ) from None
            references[ref.name] = await self._parsed_schema(ref_id, ref_schema, depth=depth + 1)
        parsed = await self._parse(schema, references)
        self._parsed.put(schema_id, parsed, len(schema.text))
        return parsed

    async def _parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        if len(schema.text) < OFF_LOOP_CHARS:
            return _guarded(schema, formats.parse, schema, references)
        async with self._threads:  # a big schema never holds the event loop for long
            return await asyncio.to_thread(_guarded, schema, formats.parse, schema, references)

    # --- internals: answers -----------------------------------------------------------------

    def _number(self, data: Any, key: str, request: str) -> int:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise errors.not_a_registry(self.url, request, f"no integer {key!r} in the answer")

    def _schema(self, data: Any, request: str) -> Schema:
        """The schema an answer describes: ``schema``, ``schemaType`` (AVRO when left out) and
        ``references``."""
        if not isinstance(data, dict) or not isinstance(data.get("schema"), str):
            raise errors.not_a_registry(self.url, request, "no schema text in the answer")
        kind = data.get("schemaType") or SchemaType.AVRO.value
        if not isinstance(kind, str) or kind not in SchemaType.__members__:
            raise InvalidSchemaError(
                f"The schema registry's schema type {str(kind)[:100]!r} is not supported."
            )
        refs = []
        for ref in data.get("references") or ():
            if not (
                isinstance(ref, dict)
                and isinstance(ref.get("name"), str)
                and isinstance(ref.get("subject"), str)
                and _is_number(ref.get("version"))
            ):
                raise errors.not_a_registry(
                    self.url, request, "a reference without name, subject and version"
                )
            refs.append(SchemaReference(ref["name"], ref["subject"], ref["version"]))
        return Schema(SchemaType(kind), data["schema"], tuple(refs))

    def _remember(self, subject: str, schema: Schema, registered: RegisteredAs) -> None:
        self._ids.put((subject, schema), registered, len(subject) + len(schema.text))

    def _check_size(self, schema: Schema) -> None:
        size = len(schema.text.encode("utf-8", "surrogatepass"))
        limit = self.options.max_schema_bytes
        if size > limit:
            raise SchemaTooLarge(f"The schema is {size} bytes, over the limit of {limit} bytes.")


# --- what goes to and comes from the registry ---------------------------------------------------


def _segment(subject: str) -> str:
    """``subject`` as one path segment: every reserved character percent-encoded, and the dots of
    ``.`` and ``..`` too, which a URL would otherwise resolve as directories."""
    encoded = quote(subject, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _body(schema: Schema) -> dict[str, Any]:
    """The registration (and lookup) body of ``schema``; an Avro one without ``schemaType``, which
    registries older than Protobuf and JSON Schema support do not know."""
    body: dict[str, Any] = {"schema": schema.text}
    if schema.schema_type is not SchemaType.AVRO:
        body["schemaType"] = schema.schema_type.value
    if schema.references:
        body["references"] = [
            {"name": ref.name, "subject": ref.subject, "version": ref.version} for ref in schema.references
        ]
    return body


def _is_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _guarded(schema: Schema, parse: Callable[..., T], *args: object) -> T:
    """``parse(*args)``, any failure of a format an ``InvalidSchemaError``, never a server error."""
    try:
        return parse(*args)
    except InvalidSchema as exc:
        raise _invalid(schema, str(exc)) from None
    except RecursionError:
        raise _invalid(schema, "the schema is nested too deeply") from None
    except Exception as exc:
        log.exception("the %s format failed on a schema of the external registry", schema.schema_type.value)
        raise _invalid(schema, f"{type(exc).__name__}: {exc}") from None


def _invalid(schema: Schema, details: str) -> InvalidSchemaError:
    return InvalidSchemaError(f"Invalid schema of type {schema.schema_type.value}, details: {details}")
