"""A timestamp a client sends, as milliseconds since the epoch: a record's (produce) and a seek's.

Both take an integer of milliseconds or ISO 8601 text with a time zone, from 1970 up to what a log
stores (a signed 64-bit integer); anything else is refused with where it was (42206). Before 1970
is refused rather than stored: Kafka reads -1 as "latest", and a log cannot keep the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.core.rules import INT64_MAX
from service.errors import InvalidPayload

__all__ = ["epoch_millis"]


def epoch_millis(value: Any, where: str) -> int:
    """``value`` (an integer of milliseconds, ISO 8601 text, or a ``datetime``) in milliseconds
    since the epoch; ``InvalidPayload`` naming ``where`` when it is none of those or out of range."""
    given = value
    if isinstance(value, bool):
        raise InvalidPayload(f"{where}: a timestamp is milliseconds since the epoch or ISO 8601, not {value}")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidPayload(f"{where}: {value[:64]!r} is not an ISO 8601 timestamp") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidPayload(f"{where}: an ISO 8601 timestamp needs a time zone (e.g. 'Z')")
        millis = int(value.timestamp() * 1000)
    elif isinstance(value, int):
        millis = value
    else:
        raise InvalidPayload(f"{where}: a timestamp is milliseconds since the epoch or ISO 8601")
    if not 0 <= millis <= INT64_MAX:
        raise InvalidPayload(f"{where}: timestamp {given} is out of range: milliseconds from 1970 on")
    return millis
