"""Stream cursors: the positions a stream's events carry, so that a reconnect resumes exactly there.

A consumer instance's cursor names, for every partition the instance owns, the next offset the
client has not received: ``topic:partition:offset`` entries joined by ``,`` in partition order
(``orders:0:42,orders:1:17``). A topic name holds neither ``:`` nor ``,`` (``rules.TOPIC_NAME``),
so the text is unambiguous. A partition stream's cursor is its next offset alone.

Server-Sent Events carry the cursor as the event's ``id:``, which a browser's ``EventSource``
sends back as ``Last-Event-ID`` when it reconnects; the WebSocket protocol as ``cursor`` in its
messages and ``?cursor=`` when connecting. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from service.errors import InvalidPayload

from .models import TopicPartition
from .rules import MAX_OFFSET, MAX_PARTITION, valid_topic

# Entries one cursor may name: more partitions than any instance is let own (a header is bounded
# by the gateway's header limit anyway; this keeps the parse cheap whatever arrives).
MAX_ENTRIES: Final = 100_000


def render_positions(positions: Mapping[TopicPartition, int]) -> str:
    """The cursor of ``positions`` (partition -> next offset), in partition order."""
    return ",".join(f"{tp.topic}:{tp.partition}:{offset}" for tp, offset in sorted(positions.items()))


def parse_positions(text: str, *, what: str = "cursor") -> dict[TopicPartition, int]:
    """The positions of a cursor ``render_positions`` wrote; ``InvalidPayload`` (422) naming
    ``what`` (where it came from) if it is not one. An empty cursor names no partition."""
    text = text.strip()
    if not text:
        return {}
    entries = text.split(",", MAX_ENTRIES)
    if len(entries) > MAX_ENTRIES:
        raise InvalidPayload(f"The {what} names more than {MAX_ENTRIES} partitions.")
    positions: dict[TopicPartition, int] = {}
    for entry in entries:
        parts = entry.strip().split(":")
        if len(parts) != 3 or not valid_topic(parts[0]):
            raise InvalidPayload(f"The {what} entry {entry[:80]!r} is not topic:partition:offset.")
        partition = _number(parts[1], MAX_PARTITION, what, entry)
        tp = TopicPartition(parts[0], partition)
        if tp in positions:
            raise InvalidPayload(f"The {what} names partition {tp} twice.")
        positions[tp] = _number(parts[2], MAX_OFFSET, what, entry)
    return positions


def parse_offset(text: str, *, what: str = "cursor") -> int:
    """The next offset of a partition stream's cursor; ``InvalidPayload`` (422) if it is not one."""
    return _number(text.strip(), MAX_OFFSET, what, text)


def _number(text: str, most: int, what: str, entry: str) -> int:
    # ASCII digits only: int() would take "+1", " 1", "1_000" and other scripts' digits
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > most:
        raise InvalidPayload(f"The {what} entry {entry[:80]!r} holds {text[:24]!r}, not a number from 0.")
    return int(text)
