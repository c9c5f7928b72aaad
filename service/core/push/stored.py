"""The ``PushStore`` port's wire format: a push subscription as the coordinator keeps it.

A JSON object of plain fields (``StoredPush``); ``FORMAT`` is its version, written with it,
so that a newer release's subscription is refused rather than misread. Adapters store the
object as it is (as JSON text); only this module turns it into a ``PushSubscription`` and back.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

from service.errors import BackendError, NewerFormat

from .spec import Auth, Ordering, PushSpec, PushSubscription

FORMAT: Final = 1


class StoredPush(TypedDict):
    format: int
    name: str
    uid: str
    owner: str
    created_ms: int
    paused: bool
    secrets: list[str]
    previous_until_ms: int | None
    spec: dict[str, Any]


def to_stored(sub: PushSubscription) -> StoredPush:
    spec = sub.spec
    return {
        "format": FORMAT,
        "name": sub.name,
        "uid": sub.uid,
        "owner": sub.owner,
        "created_ms": sub.created_ms,
        "paused": sub.paused,
        "secrets": list(sub.secrets),
        "previous_until_ms": sub.previous_until_ms,
        "spec": {
            "endpoint": spec.endpoint,
            "topics": list(spec.topics),
            "topic_pattern": spec.topic_pattern,
            "format": spec.format,
            "start": spec.start,
            "start_timestamp_ms": spec.start_timestamp_ms,
            "max_records": spec.max_records,
            "max_bytes": spec.max_bytes,
            "max_in_flight": spec.max_in_flight,
            "ordering": spec.ordering.value,
            "ack_deadline_ms": spec.ack_deadline_ms,
            "min_backoff_ms": spec.min_backoff_ms,
            "max_backoff_ms": spec.max_backoff_ms,
            "max_attempts": spec.max_attempts,
            "dead_letter_topic": spec.dead_letter_topic,
            "auth": spec.auth.value,
            "token": spec.token,
        },
    }


def from_stored(data: StoredPush, version: int) -> PushSubscription:
    """The subscription ``data`` holds; ``NewerFormat`` for a newer release's, ``BackendError`` if damaged."""
    found = data.get("format")
    if isinstance(found, int) and found > FORMAT:
        raise NewerFormat(f"push subscription {data.get('name')!r}", found, FORMAT)
    try:
        s = data["spec"]
        spec = PushSpec(
            endpoint=s["endpoint"],
            topics=tuple(s["topics"]),
            topic_pattern=s["topic_pattern"],
            format=s["format"],
            start=s["start"],
            start_timestamp_ms=s["start_timestamp_ms"],
            max_records=s["max_records"],
            max_bytes=s["max_bytes"],
            max_in_flight=s["max_in_flight"],
            ordering=Ordering(s["ordering"]),
            ack_deadline_ms=s["ack_deadline_ms"],
            min_backoff_ms=s["min_backoff_ms"],
            max_backoff_ms=s["max_backoff_ms"],
            max_attempts=s["max_attempts"],
            dead_letter_topic=s["dead_letter_topic"],
            auth=Auth(s["auth"]),
            token=s["token"],
        )
        return PushSubscription(
            name=data["name"],
            uid=data["uid"],
            owner=data["owner"],
            spec=spec,
            created_ms=data["created_ms"],
            paused=data["paused"],
            secrets=tuple(data["secrets"]),
            previous_until_ms=data["previous_until_ms"],
            version=version,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"A stored push subscription is damaged: {exc!r}.") from exc
