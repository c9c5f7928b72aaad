"""Where the schemas of decoded columns come from: the registry's topic in the log, or a registry over HTTP.

A ``SchemaSource`` answers two questions, by schema id and by subject version.
``LogRegistry`` replays the registry's topic (``_schemas`` by default) of the
log being read into a ``RegistryState``, exactly as a gateway does, so no
gateway needs to run; an id it does not know makes it read what the topic
gained since (a schema is registered before records use it). ``HttpRegistry``
asks Confluent's API (``GET /schemas/ids/{id}``,
``GET /subjects/{subject}/versions/{version}``) of brokergate's
``/schema-registry`` or of any Confluent-compatible registry, with httpx.

``Schemas`` parses what a source gives (references resolved, recursively) and
keeps every parsed schema by id; ``schemas_for`` hands out one ``Schemas`` per
``RegistryConfig`` and process, so a Spark executor fetches and parses each
schema id once however many tasks it runs.
"""

from __future__ import annotations

import ssl
import threading
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import quote

import httpx

from service.core.models import TopicPartition
from service.core.schemas.formats import parse
from service.core.schemas.model import InvalidSchema, ParsedSchema, Schema, SchemaReference, SchemaType
from service.core.schemas.state import LATEST, RegistryState

from .decode_options import DEFAULT_REGISTRY_TOPIC, RegistryConfig, Version
from .log_source import LogSource
from .logs import open_log
from .offsets import OffsetRange

if TYPE_CHECKING:
    from .credentials import BackendCredentials

HTTP_TIMEOUT_S: Final = 30.0
MAX_REFERENCE_DEPTH: Final = 32
_ACCEPT: Final = "application/vnd.schemaregistry.v1+json, application/json"


class SchemaNotFound(LookupError):
    """The registry has no such schema id or subject version; the message says which."""


class RegistryError(ValueError):
    """The registry cannot be asked (unreachable, refusing, answering nonsense); the message says why."""


class SchemaSource(Protocol):
    """Schemas by id and subject versions, as a schema registry stores them."""

    def schema(self, schema_id: int) -> Schema:
        """The schema with this id; ``SchemaNotFound`` if there is none."""
        ...

    def version(self, subject: str, version: Version, *, deleted: bool = False) -> tuple[int, Schema]:
        """The id and schema of ``version`` of ``subject`` (``latest``: the latest live one);
        with ``deleted``, a soft-deleted version too. ``SchemaNotFound`` if there is none."""
        ...

    def close(self) -> None: ...


class LogRegistry:
    """The registry's records in one partition of the log, replayed into a ``RegistryState``."""

    def __init__(
        self, log: str, topic: str = DEFAULT_REGISTRY_TOPIC, credentials: BackendCredentials | None = None
    ) -> None:
        self.log_url = log
        self.topic = topic
        self.credentials = credentials
        self.state = RegistryState()
        self._position = 0
        self._log: LogSource | None = None
        self.catch_up()

    def catch_up(self) -> None:
        """Apply what the topic holds beyond what was read; nothing if it does not exist (yet)."""
        if self._log is None:
            self._log = open_log(self.log_url, self.credentials)
        if self.topic not in self._log.topics():
            return
        start, end = self._log.bounds([TopicPartition(self.topic, 0)])[TopicPartition(self.topic, 0)]
        if end < self._position:  # deleted and written again: read it from the start
            self.state, self._position = RegistryState(), 0
        for chunk in self._log.read(OffsetRange(self.topic, 0, max(start, self._position), end)):
            for record in chunk:
                self.state.apply(record.key, record.value)  # ignored records: as a gateway ignores them
        self._position = end

    def schema(self, schema_id: int) -> Schema:
        found = self.state.schema(schema_id)
        if found is None:
            self.catch_up()
            found = self.state.schema(schema_id)
        if found is None:
            raise SchemaNotFound(f"schema id {schema_id} is not in {self._where()}")
        return found

    def version(self, subject: str, version: Version, *, deleted: bool = False) -> tuple[int, Schema]:
        number = LATEST if version == "latest" else version
        found = self.state.version(subject, number, deleted=deleted)
        if found is None:
            self.catch_up()
            found = self.state.version(subject, number, deleted=deleted)
        schema = self.state.schema(found.schema_id) if found is not None else None
        if found is None or schema is None:
            raise SchemaNotFound(f"subject {subject!r} has no version {version} in {self._where()}")
        return found.schema_id, schema

    def _where(self) -> str:
        return f"the registry topic {self.topic!r} of {self.log_url}"

    def close(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            log.close()


class HttpRegistry:
    """Confluent's schema-registry API at ``url`` (brokergate's is ``<gateway>/schema-registry``)."""

    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        password: str | None = None,
        ca_file: str | None = None,
        timeout_s: float = HTTP_TIMEOUT_S,
    ) -> None:
        self.url = url.rstrip("/")
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        auth = httpx.BasicAuth(user, password or "") if user is not None else None
        self._client = httpx.Client(
            base_url=self.url + "/", auth=auth, verify=verify, timeout=timeout_s, headers={"Accept": _ACCEPT}
        )

    def schema(self, schema_id: int) -> Schema:
        return _schema_of(self._get(f"schemas/ids/{schema_id}", f"schema id {schema_id}"))

    def version(self, subject: str, version: Version, *, deleted: bool = False) -> tuple[int, Schema]:
        params = {"deleted": "true"} if deleted else {}
        path = f"subjects/{quote(subject, safe='')}/versions/{version}"
        doc = self._get(path, f"version {version} of subject {subject!r}", params)
        schema_id = doc.get("id")
        if type(schema_id) is not int:
            raise RegistryError(f"{self.url}/{path} answered without a schema id")
        return schema_id, _schema_of(doc)

    def _get(self, path: str, what: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        try:
            response = self._client.get(path, params=params)
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot reach the schema registry at {self.url}: {exc}") from exc
        if response.status_code == 404:
            raise SchemaNotFound(f"{what} is not in the schema registry at {self.url} ({_message(response)})")
        if response.status_code != 200:
            raise RegistryError(
                f"the schema registry at {self.url} answered {response.status_code} for {what}: "
                f"{_message(response)}"
            )
        try:
            doc = response.json()
        except ValueError as exc:
            raise RegistryError(f"the schema registry at {self.url} answered {what} with no JSON") from exc
        if not isinstance(doc, dict):
            raise RegistryError(f"the schema registry at {self.url} answered {what} with no JSON object")
        return doc

    def close(self) -> None:
        self._client.close()


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200] or response.reason_phrase


def _schema_of(doc: dict[str, Any]) -> Schema:
    """A ``Schema`` from a registry's answer (``schema``, ``schemaType``, ``references``)."""
    text, kind = doc.get("schema"), doc.get("schemaType") or SchemaType.AVRO.value
    if not isinstance(text, str) or not isinstance(kind, str) or kind.upper() not in SchemaType.__members__:
        raise RegistryError(f"the schema registry answered no schema of a known type: {str(doc)[:200]}")
    try:
        refs = tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in doc.get("references") or ()
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RegistryError(f"the schema registry answered malformed references: {exc!r}") from exc
    return Schema(SchemaType(kind.upper()), text, refs)


def open_schema_source(config: RegistryConfig) -> SchemaSource:
    if config.url:
        return HttpRegistry(config.url, user=config.user, password=config.password, ca_file=config.ca_file)
    return LogRegistry(config.log, config.topic, config.log_credentials)


class Schemas:
    """Parsed schemas by id, from one ``SchemaSource``: each fetched and parsed once.

    Only what was found is kept: an id unknown now may be registered later.
    """

    def __init__(self, source: SchemaSource) -> None:
        self.source = source
        self._parsed: dict[int, ParsedSchema] = {}

    def parsed(self, schema_id: int) -> ParsedSchema:
        """Schema ``schema_id`` parsed, its references resolved and parsed too; ``SchemaNotFound``
        or ``InvalidSchema``."""
        return self._by_id(schema_id, 0)

    def _by_id(self, schema_id: int, depth: int) -> ParsedSchema:
        found = self._parsed.get(schema_id)
        if found is None:
            found = self._parsed[schema_id] = self._parse(self.source.schema(schema_id), depth)
        return found

    def _parse(self, schema: Schema, depth: int) -> ParsedSchema:
        if depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchema(f"references are nested more than {MAX_REFERENCE_DEPTH} deep")
        references = {}
        for ref in schema.references:
            try:
                ref_id, _ = self.source.version(ref.subject, ref.version, deleted=True)
                references[ref.name] = self._by_id(ref_id, depth + 1)
            except (SchemaNotFound, InvalidSchema) as exc:
                raise InvalidSchema(f"its reference {ref.name!r} cannot be used: {exc}") from exc
        try:
            return parse(schema, references)
        except InvalidSchema:
            raise
        except (RecursionError, ValueError, TypeError) as exc:  # a format's own failure: an invalid schema
            raise InvalidSchema(f"{type(exc).__name__}: {exc}") from exc

    def version(self, subject: str, version: Version) -> int:
        """The id of ``version`` of ``subject`` (``latest``: the latest live one)."""
        schema_id, _ = self.source.version(subject, version)
        return schema_id


_PROCESS_SCHEMAS: dict[RegistryConfig, Schemas] = {}
_PROCESS_LOCK = threading.Lock()


def schemas_for(config: RegistryConfig) -> Schemas:
    """This process's ``Schemas`` of ``config``'s registry (kept while the process lives: a Spark
    Python worker runs task after task, and a schema id always names the same schema)."""
    with _PROCESS_LOCK:
        found = _PROCESS_SCHEMAS.get(config)
        if found is None:
            found = _PROCESS_SCHEMAS[config] = Schemas(open_schema_source(config))
        return found
