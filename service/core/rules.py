"""What a topic, group, instance, subject, header and record may be, and what each refusal answers.

The one home of brokergate's names and limits. The API, the core services,
both logs, both coordinators and the produce fast path ask here, so a name one
of them accepts is a name every one of them accepts, refused everywhere with
the same error code. ``check_*`` functions return what they were given or
raise the ``GatewayError`` a client sees; ``valid_*`` functions only answer.

Pure: no I/O, and no import of the rest of the core (``models`` builds on this
module, not the other way round).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, Protocol, TypeVar

from service.errors import (
    ConversionError,
    IllegalState,
    InvalidConsumerConfig,
    InvalidPayload,
    InvalidSubject,
    InvalidTopic,
    InvalidTopicConfig,
)

# --- numbers Kafka fixes -----------------------------------------------------------------

INT64_MIN: Final = -(1 << 63)  # offsets, timestamps, a config's milliseconds and bytes: int64 on the wire
INT64_MAX: Final = (1 << 63) - 1
MAX_OFFSET: Final = INT64_MAX
MAX_PARTITION: Final = (1 << 31) - 1  # partition numbers: int32
MAX_REPLICATION: Final = (1 << 15) - 1  # replication factor: int16

# --- limits of our own -------------------------------------------------------------------

MAX_PARTITIONS: Final = 10_000  # per topic: a guard against a typo creating millions of partitions
MAX_GROUP_CHARS: Final = 255  # what every coordinator stores as a group name
MAX_TOPIC_CHARS: Final = 249  # Kafka's own limit
MAX_COMMITTED_TOPIC_CHARS: Final = 255  # what every coordinator stores as the topic of an offset
MAX_SUBJECT_CHARS: Final = 1_000  # a schema subject: a topic name and a suffix, or a record's full name

# --- names -------------------------------------------------------------------------------

# Kafka's topic rule, which also keeps every name a safe file name (with '.' and '..' refused).
TOPIC_NAME: Final = rf"[a-zA-Z0-9._-]{{1,{MAX_TOPIC_CHARS}}}"
_TOPIC_RE: Final = re.compile(TOPIC_NAME)


def valid_topic(name: object) -> bool:
    return isinstance(name, str) and _TOPIC_RE.fullmatch(name) is not None and name not in (".", "..")


def check_topic(name: str) -> str:
    """``name`` if it is a legal Kafka topic name, else ``InvalidTopic``: no such name escapes a data dir."""
    if not valid_topic(name):
        raise InvalidTopic(
            f"Invalid topic name {str(name)[:300]!r}: "
            f"use 1 to {MAX_TOPIC_CHARS} characters of [a-zA-Z0-9._-], not '.' or '..'."
        )
    return name


# Confluent's subject rule: no control characters, not its two reserved names; and not too long.
_RESERVED_SUBJECTS: Final = frozenset({"__GLOBAL", "__EMPTY"})
_CONTROL_RE: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
# TopicNameStrategy, the serializers' default: a topic's keys and values are subjects of its name.
SUBJECT_SUFFIXES: Final = ("-key", "-value")


def check_subject(name: str) -> str:
    """``name`` if it may be a schema subject, else ``InvalidSubject`` (42208)."""
    if not name or len(name) > MAX_SUBJECT_CHARS or name in _RESERVED_SUBJECTS or _CONTROL_RE.search(name):
        raise InvalidSubject(
            f"The specified subject {name[:300]!r} is not valid: 1 to {MAX_SUBJECT_CHARS} characters, "
            "no control characters, not '__GLOBAL' or '__EMPTY'."
        )
    return name


def topic_of_subject(subject: str) -> str | None:
    """The topic whose keys or values ``subject`` holds under TopicNameStrategy (``<topic>-key``,
    ``<topic>-value``), or None if it names none."""
    for suffix in SUBJECT_SUFFIXES:
        if subject.endswith(suffix) and valid_topic(topic := subject[: -len(suffix)]):
            return topic
    return None


def valid_group(name: object) -> bool:
    # Kafka's rule: a group id is any text. Every coordinator stores any such name without it ever
    # becoming a path, and a '/' cannot reach a route (the URL would name another resource).
    return isinstance(name, str) and 0 < len(name) <= MAX_GROUP_CHARS


# A push subscription's share group is named this and the subscription's name: no client joins it.
PUSH_GROUP_PREFIX: Final = "push."


def check_not_push_group(group: str) -> str:
    """``group`` unless it is a push subscription's share group (``IllegalState``: 409)."""
    if group.startswith(PUSH_GROUP_PREFIX):
        raise IllegalState(
            f"Group {group!r} is a push subscription's share group: it is managed through its subscription."
        )
    return group


def check_group(name: str) -> str:
    """``name`` if it is a consumer group name, else ``InvalidConsumerConfig``."""
    if not valid_group(name):
        raise InvalidConsumerConfig(f"A consumer group name is 1 to {MAX_GROUP_CHARS} characters.")
    return name


def valid_instance(name: object) -> bool:
    # A consumer instance is named as its group is (any text), and the name must also be one URL
    # path segment: it is the last segment of its base_uri, where a '/', '.' or '..' would name
    # another resource or none. (A group name from a URL is one segment already: RawPathGuard.)
    return isinstance(name, str) and valid_group(name) and "/" not in name and name not in (".", "..")


def check_instance(name: str) -> str:
    """``name`` if it may name a consumer instance, else ``InvalidConsumerConfig``."""
    if not valid_instance(name):
        raise InvalidConsumerConfig(
            f"A consumer instance name is 1 to {MAX_GROUP_CHARS} characters, without '/', "
            "and not '.' or '..'."
        )
    return name


def check_header_name(name: object, where: str) -> str:
    """A record header's name: a non-empty string (``ConversionError``, as for any record field)."""
    if not isinstance(name, str) or not name:
        raise ConversionError(f"{where}: a header needs a non-empty string 'name'")
    return name


IDEMPOTENCY_KEY: Final = r"[\x21-\x7e]{1,255}"  # printable ASCII, no spaces: a header value
_IDEMPOTENCY_KEY_RE: Final = re.compile(IDEMPOTENCY_KEY)


def check_idempotency_key(key: str) -> str:
    """An ``Idempotency-Key`` header's value (``InvalidPayload``)."""
    if _IDEMPOTENCY_KEY_RE.fullmatch(key) is None:
        raise InvalidPayload("An Idempotency-Key is 1 to 255 printable ASCII characters without spaces.")
    return key


# --- topics and partitions ---------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_partition_count(partitions: int) -> int:
    """A partition count a topic may have (``InvalidTopicConfig``)."""
    if not _is_int(partitions) or not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidTopicConfig(
            f"Invalid partition count {partitions!r}: a topic has between 1 and {MAX_PARTITIONS} partitions."
        )
    return partitions


def check_partition_growth(topic: str, current: int, total: int) -> int:
    """A new partition count for ``topic``, which has ``current``: it only grows (``InvalidTopicConfig``)."""
    check_partition_count(total)
    if total <= current:
        raise InvalidTopicConfig(
            f"Topic {topic!r} has {current} partition(s); the count can only grow, "
            f"so {total} is not a valid new total."
        )
    return total


def check_replication_factor(replication_factor: int) -> int:
    """At least 1 (each log may ask for less), or -1 for the log's default (``InvalidTopicConfig``)."""
    if replication_factor != -1 and (
        not _is_int(replication_factor) or not 1 <= replication_factor <= MAX_REPLICATION
    ):
        raise InvalidTopicConfig(
            f"Invalid replication factor {replication_factor!r}: at least 1, or -1 for the default."
        )
    return replication_factor


def valid_partition(partition: object) -> bool:
    return _is_int(partition) and 0 <= partition <= MAX_PARTITION  # type: ignore[operator]


def valid_offset(offset: object) -> bool:
    return _is_int(offset) and 0 <= offset <= MAX_OFFSET  # type: ignore[operator]


# --- committed offsets -------------------------------------------------------------------


class PartitionKey(Protocol):
    """A topic partition, as ``models.TopicPartition`` is one."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


K = TypeVar("K", bound=PartitionKey)


def valid_offset_key(tp: PartitionKey) -> bool:
    """Whether a coordinator stores a committed offset for ``tp``.

    As in Kafka, whose group coordinator takes a commit for any topic name, the topic is any
    text of 1 to ``MAX_COMMITTED_TOPIC_CHARS`` characters: the gateway only ever commits for
    topics it read, but a coordinator's store may hold others, and reads them back.
    """
    topic = tp.topic
    return (
        isinstance(topic, str)
        and 0 < len(topic) <= MAX_COMMITTED_TOPIC_CHARS
        and valid_partition(tp.partition)
    )


def check_offsets(offsets: Mapping[K, int]) -> list[tuple[K, int]]:
    """The entries of a commit, as a list; ``InvalidPayload`` if a coordinator would not store one."""
    entries = list(offsets.items())
    for tp, offset in entries:
        if not valid_offset_key(tp) or not valid_offset(offset):
            raise InvalidPayload(f"Cannot commit offset {offset} for partition {tp.topic}-{tp.partition}.")
    return entries


# --- records -----------------------------------------------------------------------------


class RecordLike(Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...


def record_size(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]) -> int:
    """A record's size as brokergate counts it everywhere (``max_bytes`` budgets, byte quotas,
    metrics): its key, value and headers as stored, not as encoded in JSON."""
    n = (len(key) if key else 0) + (len(value) if value else 0)
    if headers:  # rare, and an empty loop costs more than the test
        for k, v in headers:
            n += len(k) + (len(v) if v else 0)
    return n


def record_bytes(records: Iterable[RecordLike]) -> int:
    """What ``records`` weigh together: the sum of their ``record_size``."""
    return sum(record_size(r.key, r.value, r.headers) for r in records)
