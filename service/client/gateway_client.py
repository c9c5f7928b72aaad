"""A small typed HTTP client for any brokergate endpoint (httpx, synchronous).

The command-line tools are built on it, and tests use it to drive a gateway
the way a user's program would. Every non-2xx answer becomes a ``ClientError``
carrying the Confluent ``error_code``; a gateway that cannot be reached becomes
a ``ClientError`` with status 0.

Names are checked with the gateway's own rules (``service.core.rules``) before
any request is sent: a name the gateway would refuse raises the same
``GatewayError`` (``InvalidTopic``, ``InvalidConsumerConfig``) here. Every path
segment is percent-encoded, so a name is always exactly one segment: a group
may be any text, and no name can address another resource.

The schema registry the gateway serves under ``/schema-registry`` is reached through the same
client (``subjects``, ``register_schema``, ``check_compatibility``...): subjects are checked with
the registry's own rule (``check_subject``) before anything is sent, and one that is ``.`` or ``..``
(no path can name it) is refused here too; a ``/`` in a subject travels as ``%2F``.
``produce_with_schemas`` produces JSON records in a schema format (``avro``, ``jsonschema``,
``protobuf``).

Consumers: ``consumer`` creates a ``Consumer``, an instance of a consumer group. Share groups (the
gateway's KIP-932 extension): ``share_consumer`` creates a ``ShareConsumer``; ``share_groups``,
``share_group``, ``reset_share_group`` and ``delete_share_group`` administer the groups. Both
consumers, their records and ``Acknowledgement`` are ``service.client.consumers``'s.

Credentials and TLS are the constructor's: HTTP Basic (``auth=(user, password)``) or a
Bearer ``token``, the CA certificates to verify the gateway with (``verify``), and a client
certificate for mutual TLS (``cert``). A TLS handshake that fails says why in its
``ClientError`` (an untrusted gateway certificate, a client certificate required or refused).
The HTTP pieces under the client (``url_path``, ``ClientError``, ``BearerAuth``, ``tls_context``) are
``service.client.http``'s.

The package ``service.client`` re-exports the names of all three modules, so a program imports
everything it uses from ``service.client``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx

from service.client.consumers import (
    REFUSED_HEADER,
    Acknowledgement,
    AckType,
    Consumer,
    Record,
    ShareConsumer,
    ShareRecord,
    acknowledgements,
)
from service.client.http import (
    BearerAuth,
    ClientError,
    _json,
    _tls_failure,
    body_coding,
    coded_body,
    data_type,
    tls_context,
    url_path,
)
from service.core.acl import AclBinding, AclFilter
from service.core.rules import check_group, check_instance, check_subject, check_topic
from service.core.schemas.model import Schema, SchemaType
from service.errors import InvalidSubject
from service.wire.formats import V2

__all__ = [
    "LATEST",
    "REFUSED_HEADER",
    "REGISTRY",
    "V2",
    "AckType",
    "Acknowledgement",
    "BearerAuth",
    "ClientError",
    "Consumer",
    "GatewayClient",
    "ProducedOffset",
    "Record",
    "SchemaProduced",
    "ShareConsumer",
    "ShareRecord",
    "Version",
    "acknowledgements",
    "acl_params",
    "data_type",
    "registry_path",
    "registry_subject",
    "schema_body",
    "tls_context",
    "url_path",
]

REGISTRY: Final = "/schema-registry"
LATEST: Final = "latest"

Version = int | Literal["latest"]


@dataclass(slots=True)
class ProducedOffset:
    partition: int
    offset: int | None
    error_code: int | None
    error: str | None


@dataclass(slots=True)
class SchemaProduced:
    """The answer to a produce in a schema format: the ids the key and value schemas have in the
    registry (None: no such schema sent), and each record's offset or error."""

    key_schema_id: int | None
    value_schema_id: int | None
    offsets: list[ProducedOffset]


class GatewayClient:
    """One gateway, addressed by its base URL; use as a context manager or call ``close()``.

    ``auth`` is an HTTP Basic ``(user, password)``, ``token`` a Bearer token (one or the other);
    ``verify`` and ``cert`` are ``tls_context``'s; ``compress`` (gzip, zstd) codes request bodies."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        auth: tuple[str, str] | None = None,
        token: str | None = None,
        verify: str | bool = True,
        cert: str | tuple[str, str] | None = None,
        compress: str | None = None,
    ) -> None:
        if auth is not None and token is not None:
            raise ValueError("auth and token are two ways to authenticate: give one")
        self.url = url.rstrip("/")
        self._compress = body_coding(compress)
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            auth=BearerAuth(token) if token is not None else auth,
            verify=tls_context(verify, cert),
        )

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- plumbing ------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer to a request (None if it has no body); ``ClientError`` if refused."""
        return _json(self.send(method, path, **kwargs))

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer to a request, its headers for the reading; ``ClientError`` if refused."""
        if self._compress is not None:
            kwargs = coded_body(kwargs, self._compress)
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            tls = _tls_failure(exc)
            if tls is not None:
                raise ClientError(0, 0, f"no connection with the gateway at {self.url}: {tls}") from exc
            raise ClientError(0, 0, f"cannot reach the gateway at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                code, message = int(body.get("error_code", 0)), str(body.get("message", response.text))
            except ValueError:
                code, message = 0, response.text or response.reason_phrase
            raise ClientError(response.status_code, code, message)
        return response

    def cluster_id(self) -> str:
        return str(self.request("GET", "/v3/clusters")["data"][0]["cluster_id"])

    def _v3(self, *segments: str | int) -> str:
        return url_path("v3", "clusters", self.cluster_id(), *segments)

    # --- topics --------------------------------------------------------------------

    def topics(self) -> list[str]:
        return list(self.request("GET", "/topics"))

    def topic(self, name: str) -> dict[str, Any]:
        check_topic(name)
        return dict(self.request("GET", self._v3("topics", name)))

    def partitions(self, name: str) -> list[dict[str, Any]]:
        check_topic(name)
        return list(self.request("GET", self._v3("topics", name, "partitions"))["data"])

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        check_topic(name)
        body: dict[str, Any] = {
            "topic_name": name,
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
        }
        if partitions is not None:
            body["partitions_count"] = partitions
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        return dict(self.request("POST", self._v3("topics"), json=body))

    def delete_topic(self, name: str) -> None:
        check_topic(name)
        self.request("DELETE", self._v3("topics", name))

    def set_partitions(self, name: str, count: int) -> dict[str, Any]:
        check_topic(name)
        return dict(self.request("PATCH", self._v3("topics", name), json={"partitions_count": count}))

    # --- produce -------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        records: Iterable[Mapping[str, Any]],
        *,
        fmt: str = "string",
        partition: int | None = None,
    ) -> list[ProducedOffset]:
        """Produce already-encoded v2 records (``key``/``value`` in ``fmt``'s encoding)."""
        check_topic(topic)
        to = (
            url_path("topics", topic)
            if partition is None
            else url_path("topics", topic, "partitions", partition)
        )
        body = self.request(
            "POST", to, json={"records": list(records)}, headers={"Content-Type": data_type(fmt)}
        )
        return [
            ProducedOffset(o["partition"], o["offset"], o["error_code"], o["error"]) for o in body["offsets"]
        ]

    def produce_with_schemas(
        self,
        topic: str,
        records: Iterable[Mapping[str, Any]],
        *,
        fmt: str,
        value_schema: str | int,
        key_schema: str | int | None = None,
        partition: int | None = None,
    ) -> SchemaProduced:
        """Produce records whose keys and values are JSON, in a schema format (``avro``,
        ``jsonschema``, ``protobuf``). Each schema is its text (the gateway registers it under the
        topic's ``-key``/``-value`` subject) or the id of a registered one."""
        check_topic(topic)
        to = (
            url_path("topics", topic)
            if partition is None
            else url_path("topics", topic, "partitions", partition)
        )
        body: dict[str, Any] = {"records": list(records)}
        for side, schema in (("key", key_schema), ("value", value_schema)):
            if isinstance(schema, str):
                body[f"{side}_schema"] = schema
            elif schema is not None:
                body[f"{side}_schema_id"] = schema
        answer = self.request("POST", to, json=body, headers={"Content-Type": data_type(fmt)})
        return SchemaProduced(
            answer.get("key_schema_id"),
            answer.get("value_schema_id"),
            [
                ProducedOffset(o["partition"], o["offset"], o["error_code"], o["error"])
                for o in answer["offsets"]
            ],
        )

    # --- consumers -----------------------------------------------------------------

    def consumer(self, group: str, **config: Any) -> Consumer:
        """Create a consumer instance; ``config`` keys are Confluent's, with '_' for '.'."""
        check_group(group)
        body = {k.replace("_", "."): v for k, v in config.items()}
        if "name" in body:
            check_instance(body["name"])
        created = self.request("POST", url_path("consumers", group), json=body, headers={"Content-Type": V2})
        return Consumer(self, group, created["instance_id"], body.get("format", "binary"))

    def groups(self) -> list[dict[str, Any]]:
        return list(self.request("GET", self._v3("consumer-groups"))["data"])

    def group(self, group: str) -> dict[str, Any]:
        check_group(group)
        return dict(self.request("GET", self._v3("consumer-groups", group)))

    def lags(self, group: str) -> list[dict[str, Any]]:
        check_group(group)
        return list(self.request("GET", self._v3("consumer-groups", group, "lags"))["data"])

    # --- share groups --------------------------------------------------------------

    def share_consumer(self, group: str, **config: Any) -> ShareConsumer:
        """Create a consumer of share group ``group``; ``config`` keys are the gateway's, with '_'
        for '.' (``format``, ``share_auto_offset_reset``: where the group starts a partition it
        has never read, ``consumer_request_timeout_ms``...)."""
        check_group(group)
        body = {k.replace("_", "."): v for k, v in config.items()}
        if "name" in body:
            check_instance(body["name"])
        created = self.request(
            "POST", url_path("share-groups", group, "consumers"), json=body, headers={"Content-Type": V2}
        )
        return ShareConsumer(self, group, created["instance_id"], body.get("format", "binary"))

    def share_groups(self) -> list[dict[str, Any]]:
        return list(self.request("GET", self._v3("share-groups"))["data"])

    def share_group(self, group: str) -> dict[str, Any]:
        """The group's consumers, and per partition its start and end offsets, records in flight
        by state, and lag."""
        check_group(group)
        return dict(self.request("GET", self._v3("share-groups", group)))

    def reset_share_group(
        self,
        group: str,
        *,
        to: Literal["earliest", "latest"] | None = None,
        topics: Iterable[str] | None = None,
        offsets: Iterable[tuple[str, int, int]] | None = None,
    ) -> dict[str, Any]:
        """Start the group over ``to`` the earliest or latest offsets of ``topics`` (None: every
        topic it has read), or at ``(topic, partition, offset)``s; the group as it is then. Only
        a group without consumers can be reset (409)."""
        check_group(group)
        if (to is None) == (offsets is None):
            raise ValueError("reset a share group to earliest or latest, or to offsets: one of them")
        body: dict[str, Any] = {}
        if offsets is not None:
            body["offsets"] = [{"topic": check_topic(t), "partition": p, "offset": o} for t, p, o in offsets]
        else:
            body["to"] = to
            if topics is not None:
                body["topics"] = [check_topic(t) for t in topics]
        return dict(self.request("POST", self._v3("share-groups", group, "reset"), json=body))

    def delete_share_group(self, group: str) -> None:
        """Forget the group's delivery states; only a group without consumers (409)."""
        check_group(group)
        self.request("DELETE", self._v3("share-groups", group))

    # --- ACLs ----------------------------------------------------------------------

    def acls(self, selected: AclFilter | None = None) -> list[AclBinding]:
        """The ACL bindings ``selected`` selects (all of them when None)."""
        params = acl_params(selected or AclFilter())
        body = self.request("GET", self._v3("acls"), params=params)
        return [AclBinding.from_dict(d) for d in body["data"]]

    def create_acl(self, binding: AclBinding) -> None:
        """Store one binding (storing one that exists changes nothing)."""
        self.request("POST", self._v3("acls"), json=binding.as_dict())

    def delete_acls(self, selected: AclFilter) -> list[AclBinding]:
        """Delete the bindings ``selected`` selects and return them. Its ``resource_type`` is
        required, as the gateway requires it: no filter left empty deletes every binding."""
        if selected.resource_type is None:
            raise ValueError("deleting ACL bindings needs a resource_type")
        body = self.request("DELETE", self._v3("acls"), params=acl_params(selected))
        return [AclBinding.from_dict(d) for d in body["data"]]

    # --- schema registry -------------------------------------------------------------

    def subjects(self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False) -> list[str]:
        """The registry's subjects (``deleted``: soft-deleted ones too; ``deleted_only``: only those)."""
        params = {"subjectPrefix": prefix, "deleted": _flag(deleted), "deletedOnly": _flag(deleted_only)}
        return list(self.request("GET", registry_path("subjects"), params=params))

    def subject_version(
        self, subject: str, version: Version = LATEST, *, deleted: bool = False
    ) -> dict[str, Any]:
        """A version of a subject with its schema: ``subject``, ``version``, ``id``, ``schema``
        (``schemaType`` but for AVRO, ``references`` when there are some)."""
        path = registry_path("subjects", registry_subject(subject), "versions", version)
        return dict(self.request("GET", path, params={"deleted": _flag(deleted)}))

    def schema_by_id(self, schema_id: int) -> dict[str, Any]:
        """The schema with this id: ``schema`` (``schemaType`` but for AVRO, ``references``)."""
        return dict(self.request("GET", registry_path("schemas", "ids", schema_id)))

    def register_schema(self, subject: str, schema: Schema) -> int:
        """The id of ``schema`` once registered under ``subject`` (a new version unless it is one)."""
        path = registry_path("subjects", registry_subject(subject), "versions")
        return int(self.request("POST", path, json=schema_body(schema))["id"])

    def lookup_schema(self, subject: str, schema: Schema) -> dict[str, Any]:
        """The version of ``subject`` that is ``schema``, as ``subject_version`` gives it."""
        path = registry_path("subjects", registry_subject(subject))
        return dict(self.request("POST", path, json=schema_body(schema)))

    def check_compatibility(
        self, subject: str, schema: Schema, version: Version | None = None
    ) -> tuple[bool, list[str]]:
        """Whether ``schema`` may follow ``version`` of ``subject`` (None: the versions its level
        compares with, as a registration would), and why not."""
        segments: list[str | int] = ["compatibility", "subjects", registry_subject(subject), "versions"]
        if version is not None:
            segments.append(version)
        answer = self.request(
            "POST", registry_path(*segments), json=schema_body(schema), params={"verbose": "true"}
        )
        return bool(answer["is_compatible"]), [str(m) for m in answer.get("messages") or []]

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete every version of ``subject`` (``permanent``: remove them); the versions."""
        path = registry_path("subjects", registry_subject(subject))
        return list(self.request("DELETE", path, params={"permanent": _flag(permanent)}))

    def delete_subject_version(self, subject: str, version: Version, *, permanent: bool = False) -> int:
        path = registry_path("subjects", registry_subject(subject), "versions", version)
        return int(self.request("DELETE", path, params={"permanent": _flag(permanent)}))

    def compatibility(self, subject: str | None = None, *, default_to_global: bool = False) -> str:
        """The compatibility level of ``subject`` (None: the global one); a subject without a level
        of its own is a ``ClientError`` (40408) unless ``default_to_global``."""
        path = (
            registry_path("config") if subject is None else registry_path("config", registry_subject(subject))
        )
        answer = self.request("GET", path, params={"defaultToGlobal": _flag(default_to_global)})
        return str(answer["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = (
            registry_path("config") if subject is None else registry_path("config", registry_subject(subject))
        )
        return str(self.request("PUT", path, json={"compatibility": level})["compatibility"])


def registry_path(*segments: str | int) -> str:
    """The path of the registry's resource named by ``segments`` (each encoded as ``url_path`` does)."""
    return REGISTRY + url_path(*segments)


def registry_subject(subject: str) -> str:
    """``subject`` if a path can name it: a valid subject (``check_subject``), not ``.`` or ``..``
    (an HTTP client removes such a segment, and the request would reach another resource). A
    ``/`` in it is sent as ``%2F``, which the registry reads as part of the subject."""
    check_subject(subject)
    if subject in (".", ".."):
        raise InvalidSubject(f"The subject {subject!r} cannot be named in a URL path: it is '.' or '..'.")
    return subject


def schema_body(schema: Schema) -> dict[str, Any]:
    """The registry's request body for ``schema``."""
    body: dict[str, Any] = {"schema": schema.text}
    if schema.schema_type is not SchemaType.AVRO:
        body["schemaType"] = schema.schema_type.value
    if schema.references:
        body["references"] = [
            {"name": r.name, "subject": r.subject, "version": r.version} for r in schema.references
        ]
    return body


def _flag(value: bool) -> str:
    return "true" if value else "false"


def acl_params(selected: AclFilter) -> dict[str, str]:
    """Confluent v3's query parameters for ``selected``: ``ANY`` where it matches anything."""
    params = {
        "resource_type": selected.resource_type.value if selected.resource_type else "ANY",
        "pattern_type": "MATCH"
        if selected.match
        else (selected.pattern_type.value if selected.pattern_type else "ANY"),
        "operation": selected.operation.value if selected.operation else "ANY",
        "permission": selected.permission.value if selected.permission else "ANY",
    }
    for name, value in (
        ("resource_name", selected.resource_name),
        ("principal", selected.principal),
        ("host", selected.host),
    ):
        if value is not None:
            params[name] = value
    return params
