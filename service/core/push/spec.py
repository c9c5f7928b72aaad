"""A push subscription: what its creator asked for, checked, and what the gateway keeps with it.

``PushSpec`` is what a client sends (and may change): the topics, the endpoint, the format,
where to start, batching, concurrency, ordering, the deadline, the retry policy, the attempts
and the dead-letter topic, and how requests are authenticated. ``PushSubscription`` is the
stored whole: the spec, its name and owner, whether it is paused, its signing secrets, and a
uid that makes its delivery ids its own. Both are immutable; a change is a new value.

Pure: no I/O. The destination rules (``destinations``) are checked by ``PushService``.
"""

from __future__ import annotations

import base64
import re
import secrets as random
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final, Literal, get_args

from service.errors import InvalidPayload

from ..models import EmbeddedFormat
from ..patterns import compile_pattern
from ..rules import PUSH_GROUP_PREFIX, check_topic

NAME: Final = r"[a-zA-Z0-9._-]{1,200}"
_NAME_RE: Final = re.compile(NAME)
SECRET_PREFIX: Final = "whsec_"  # the Standard Webhooks form of a secret: this, then base64
SECRET_BYTES: Final = 32
MAX_TOPICS: Final = 100
MAX_URL_CHARS: Final = 2000
MAX_TOKEN_CHARS: Final = 4096
FORMATS: Final = frozenset(get_args(EmbeddedFormat))

StartAt = Literal["earliest", "latest"]


class Ordering(StrEnum):
    """Which records wait for others: none; those of one key; those of one partition."""

    NONE = "none"
    KEY = "key"
    PARTITION = "partition"


class Auth(StrEnum):
    """How a push request proves it is the gateway's: signed (Standard Webhooks), a bearer token, none."""

    WEBHOOK = "webhook"
    BEARER = "bearer"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The spec's limits, from the gateway's settings: what a subscription may ask at most."""

    max_records: int = 1000  # per request
    max_bytes: int = 1024 * 1024  # of records per request
    max_in_flight: int = 16  # requests per subscription
    max_deadline_ms: int = 60_000
    max_backoff_ms: int = 3_600_000
    max_attempts: int = 100


@dataclass(frozen=True, slots=True)
class PushSpec:
    """What a push subscription delivers, where, and how (see the module docstring)."""

    endpoint: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    format: EmbeddedFormat = "binary"
    start: StartAt = "latest"
    start_timestamp_ms: int | None = None  # instead of ``start``: each partition's first record at or after
    max_records: int = 1
    max_bytes: int = 1024 * 1024
    max_in_flight: int = 1
    ordering: Ordering = Ordering.NONE
    ack_deadline_ms: int = 10_000
    min_backoff_ms: int = 1_000
    max_backoff_ms: int = 60_000
    max_attempts: int = 5
    dead_letter_topic: str | None = None
    auth: Auth = Auth.WEBHOOK
    token: str | None = None  # with ``Auth.BEARER``

    def check(self, bounds: Bounds) -> PushSpec:
        """This spec if every field keeps its rule and ``bounds``; else ``InvalidPayload`` saying which."""
        if bool(self.topics) == (self.topic_pattern is not None):
            raise InvalidPayload("A push subscription names either topics or a topic_pattern, not both.")
        if len(self.topics) > MAX_TOPICS:
            raise InvalidPayload(f"A push subscription names at most {MAX_TOPICS} topics.")
        for topic in self.topics:
            check_topic(topic)
        if self.topic_pattern is not None:
            compile_pattern(self.topic_pattern)
        if self.format not in FORMATS:
            raise InvalidPayload(f"format must be one of {', '.join(sorted(FORMATS))}.")
        if self.start not in ("earliest", "latest"):
            raise InvalidPayload("start must be 'earliest' or 'latest'.")
        if self.start_timestamp_ms is not None and self.start_timestamp_ms < 0:
            raise InvalidPayload("start_timestamp_ms is a time in ms since the epoch, 0 or more.")
        _within("max_records", self.max_records, 1, bounds.max_records)
        _within("max_bytes", self.max_bytes, 1, bounds.max_bytes)
        _within("max_in_flight", self.max_in_flight, 1, bounds.max_in_flight)
        _within("ack_deadline_ms", self.ack_deadline_ms, 100, bounds.max_deadline_ms)
        _within("min_backoff_ms", self.min_backoff_ms, 1, bounds.max_backoff_ms)
        _within("max_backoff_ms", self.max_backoff_ms, self.min_backoff_ms, bounds.max_backoff_ms)
        _within("max_attempts", self.max_attempts, 1, bounds.max_attempts)
        if self.dead_letter_topic is not None:
            check_topic(self.dead_letter_topic)
            if self.dead_letter_topic in self.topics:
                raise InvalidPayload("The dead_letter_topic cannot be one of the topics delivered.")
        if (self.auth is Auth.BEARER) != (self.token is not None):
            raise InvalidPayload("A token is given exactly when auth is 'bearer'.")
        if self.token is not None and not (
            1 <= len(self.token) <= MAX_TOKEN_CHARS and self.token.isascii() and self.token.isprintable()
        ):
            raise InvalidPayload(f"A bearer token is 1 to {MAX_TOKEN_CHARS} printable ASCII characters.")
        if len(self.endpoint) > MAX_URL_CHARS:
            raise InvalidPayload(f"The endpoint URL is at most {MAX_URL_CHARS} characters.")
        return self

    @property
    def lock_ms(self) -> int:
        """How long a record the deliverer holds stays its own without renewal: twice the deadline,
        so that a request that took all of it is settled before its records could go elsewhere."""
        return max(2 * self.ack_deadline_ms, 2_000)


@dataclass(frozen=True, slots=True)
class PushSubscription:
    """A stored push subscription: the spec, who created it, whether it is paused, its secrets."""

    name: str
    uid: str  # random at creation: delivery ids of a re-created subscription are new ones
    owner: str
    spec: PushSpec
    created_ms: int
    paused: bool = False
    secrets: tuple[str, ...] = ()  # newest first; two while a rotation lets the previous one verify too
    previous_until_ms: int | None = None  # when the previous secret stops being sent
    version: int = -1  # the store's, for compare-and-set; -1 before it is stored

    @property
    def group(self) -> str:
        """The share group that keeps which records were delivered."""
        return self.group_of(self.name)

    @staticmethod
    def group_of(name: str) -> str:
        return PUSH_GROUP_PREFIX + name

    def signing_secrets(self, now_ms: int) -> tuple[str, ...]:
        """The secrets a request is signed with now: the newest, and the previous until it retires."""
        if len(self.secrets) > 1 and self.previous_until_ms is not None and now_ms >= self.previous_until_ms:
            return self.secrets[:1]
        return self.secrets

    def rotated(self, now_ms: int, keep_previous_ms: int) -> PushSubscription:
        """A new secret first, the current one still sent for ``keep_previous_ms``."""
        return replace(
            self,
            secrets=(new_secret(), *self.secrets[:1]),
            previous_until_ms=now_ms + keep_previous_ms,
        )


def check_name(name: str) -> str:
    """``name`` if it may name a push subscription (one URL path segment), else ``InvalidPayload``."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name in (".", ".."):
        raise InvalidPayload("A push subscription's name is 1 to 200 of a-z, A-Z, 0-9, '.', '_' and '-'.")
    return name


def new_secret() -> str:
    """A signing secret in the Standard Webhooks form: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(random.token_bytes(SECRET_BYTES)).decode()


def new_uid() -> str:
    return random.token_hex(8)


def _within(field: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidPayload(f"{field} must be an integer from {low} to {high}.")
