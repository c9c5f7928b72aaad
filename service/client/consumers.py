"""The consumer side of the client: consumer instances, share consumers, and what they poll.

``GatewayClient.consumer`` (``service.client``) creates a ``Consumer``, an instance of a consumer
group; ``GatewayClient.share_consumer`` a ``ShareConsumer``, a consumer of a share group (the
gateway's KIP-932 extension), whose records carry their ``delivery_count`` and which settles what
it holds with ``Acknowledgement``s (on their own, or piggy-backed on its next poll). Both reach the
gateway through the client that created them, as a ``Requester``: this module does not depend on
``service.client``, which re-exports its names.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, Self

import httpx

from service.client.http import ClientError, _json, data_type, url_path
from service.core.rules import check_group, check_instance, check_topic
from service.wire.formats import V2

# The header of a share consumer's piggy-backed poll: how many of its acknowledgements were refused.
REFUSED_HEADER: Final = "Brokergate-Acknowledgements-Refused"


class Requester(Protocol):
    """What an instance needs of the client it was created through (``GatewayClient`` is one)."""

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer to a request, its headers for the reading; ``ClientError`` if refused."""
        ...

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer to a request (None if it has no body); ``ClientError`` if refused."""
        ...


@dataclass(slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(slots=True)
class ShareRecord(Record):
    """A record a share consumer acquired: ``delivery_count`` is 1 on its first delivery, more when
    a consumer before released it or held it past its lock."""

    delivery_count: int = 1


AckType = Literal["accept", "release", "reject", "renew"]


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """What a share consumer says of records of one partition it holds: ``accept`` (done),
    ``release`` (deliver again now), ``reject`` (never again), ``renew`` (hold them longer)."""

    topic: str
    partition: int
    offsets: tuple[int, ...]
    type: AckType = "accept"
    error: str | None = None  # why it failed (release, reject): kept for the dead-letter copy

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "offsets": list(self.offsets),
            "type": self.type,
        }
        if self.error is not None:
            body["error"] = self.error
        return body


def acknowledgements(records: Iterable[Record], type: AckType = "accept") -> list[Acknowledgement]:
    """One acknowledgement of ``type`` per partition of ``records``, in the order they came."""
    offsets: dict[tuple[str, int], list[int]] = {}
    for r in records:
        offsets.setdefault((r.topic, r.partition), []).append(r.offset)
    return [Acknowledgement(t, p, tuple(o), type) for (t, p), o in offsets.items()]


class _Instance:
    """What a consumer instance and a share consumer have in common: an address, and an end."""

    def __init__(self, client: Requester, path: str, fmt: str) -> None:
        self.client = client
        self.path = path
        self.format = fmt

    def _records(self, method: str, params: dict[str, int], **kwargs: Any) -> httpx.Response:
        headers = {"Accept": data_type(self.format), **kwargs.pop("headers", {})}
        return self.client.send(method, f"{self.path}/records", params=params, headers=headers, **kwargs)

    def delete(self) -> None:
        self.client.request("DELETE", self.path, headers={"Content-Type": V2})

    @contextmanager
    def deleted_on_exit(self) -> Iterator[Self]:
        """Delete the instance when the block ends, however it ends (Ctrl-C included)."""
        try:
            yield self
        finally:
            try:
                self.delete()
            except ClientError:
                pass


def _fields(r: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ``Record``, from a record of the v2 API."""
    return {
        "topic": r["topic"],
        "partition": r["partition"],
        "offset": r["offset"],
        "timestamp": r["timestamp"],
        "key": r["key"],
        "value": r["value"],
        "headers": [
            (h["name"], None if h["value"] is None else base64.b64decode(h["value"])) for h in r["headers"]
        ],
    }


def _poll_params(timeout_ms: int, max_bytes: int | None, max_records: int | None = None) -> dict[str, int]:
    params: dict[str, int] = {"timeout": timeout_ms}
    if max_bytes is not None:
        params["max_bytes"] = max_bytes
    if max_records is not None:
        params["max_records"] = max_records
    return params


class Consumer(_Instance):
    """A consumer instance of a group, as created through ``GatewayClient.consumer``."""

    def __init__(self, client: Requester, group: str, instance: str, fmt: str) -> None:
        super().__init__(
            client, url_path("consumers", check_group(group), "instances", check_instance(instance)), fmt
        )
        self.group = group
        self.instance = instance

    def subscribe(self, *topics: str, pattern: str | None = None) -> None:
        body: dict[str, Any] = {"topic_pattern": pattern} if pattern else {"topics": list(topics)}
        self.client.request("POST", f"{self.path}/subscription", json=body, headers={"Content-Type": V2})

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        body = {"partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        self.client.request("POST", f"{self.path}/assignments", json=body, headers={"Content-Type": V2})

    def assignment(self) -> list[tuple[str, int]]:
        body = self.client.request("GET", f"{self.path}/assignments")
        return [(p["topic"], p["partition"]) for p in body["partitions"]]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        body = {"offsets": [{"topic": topic, "partition": partition, "offset": offset}]}
        self.client.request("POST", f"{self.path}/positions", json=body, headers={"Content-Type": V2})

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]]) -> None:
        body = {"partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        self.client.request(
            "POST", f"{self.path}/positions/beginning", json=body, headers={"Content-Type": V2}
        )

    def poll(self, timeout_ms: int = 1000, max_bytes: int | None = None) -> list[Record]:
        body = _json(self._records("GET", _poll_params(timeout_ms, max_bytes)))
        return [Record(**_fields(r)) for r in body]

    def commit(self, offsets: Iterable[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]:
        """Commit ``(topic, partition, last processed offset)``s, or everything polled when None."""
        kwargs: dict[str, Any] = {"headers": {"Content-Type": V2}}
        if offsets is not None:
            kwargs["json"] = {"offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets]}
        return list(self.client.request("POST", f"{self.path}/offsets", **kwargs) or [])


class ShareConsumer(_Instance):
    """A consumer of a share group, as created through ``GatewayClient.share_consumer``: it
    shares its topics' partitions with the group's other consumers, record by record. Each record
    it polls is its own under an acquisition lock until it settles it (``acknowledge``, or
    piggy-backed: ``acknowledge_and_poll``) or the lock expires; deleting it gives back at once
    what it holds.
    """

    def __init__(self, client: Requester, group: str, instance: str, fmt: str) -> None:
        super().__init__(
            client, url_path("share-groups", check_group(group), "consumers", check_instance(instance)), fmt
        )
        self.group = group
        self.instance = instance

    def subscribe(self, *topics: str) -> None:
        body = {"topics": [check_topic(t) for t in topics]}
        self.client.request("POST", f"{self.path}/subscription", json=body, headers={"Content-Type": V2})

    def subscription(self) -> list[str]:
        return list(self.client.request("GET", f"{self.path}/subscription")["topics"])

    def poll(
        self, timeout_ms: int = 1000, *, max_records: int | None = None, max_bytes: int | None = None
    ) -> list[ShareRecord]:
        """Acquire records: new ones, released ones, and those whose lock expired."""
        return self.acknowledge_and_poll((), timeout_ms, max_records=max_records, max_bytes=max_bytes)[0]

    def acknowledge_and_poll(
        self,
        acks: Iterable[Acknowledgement],
        timeout_ms: int = 1000,
        *,
        max_records: int | None = None,
        max_bytes: int | None = None,
    ) -> tuple[list[ShareRecord], int]:
        """Settle ``acks``, then poll, in one round trip: the records, and how many of the
        acknowledgements were refused (``acknowledge`` says which and why)."""
        body = [a.as_dict() for a in acks]
        params = _poll_params(timeout_ms, max_bytes, max_records)
        if body:
            response = self._records(
                "POST", params, json={"acknowledgements": body}, headers={"Content-Type": V2}
            )
        else:
            response = self._records("GET", params)
        records = [ShareRecord(**_fields(r), delivery_count=r["delivery_count"]) for r in _json(response)]
        return records, int(response.headers.get(REFUSED_HEADER, 0))

    def acknowledge(self, acks: Iterable[Acknowledgement]) -> list[dict[str, Any]]:
        """Settle ``acks``; those refused (``topic``, ``partition``, ``offset``, ``message``): the
        records the consumer does not hold (its lock expired, or they were settled already)."""
        body = {"acknowledgements": [a.as_dict() for a in acks]}
        answer = self.client.request(
            "POST", f"{self.path}/acknowledgements", json=body, headers={"Content-Type": V2}
        )
        return list(answer["refused"])
