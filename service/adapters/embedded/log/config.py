"""Topic names and topic configs of the embedded log: validation only, no I/O.

``LogDefaults`` holds the broker-wide values the ``EmbeddedLog`` was built
with; a topic stores only the keys it overrides (``TopicConfig.overrides``), so
changing a default later reaches every topic that did not set the key, as in
Kafka. As in Kafka 4, ``segment.bytes`` is at least 1 MiB: a smaller segment
buys nothing but more files. The minimum is a ``LogDefaults`` field, so tests
can lower it (Kafka's tests have an internal override for the same). Topic
names are checked by ``service.core.rules.check_topic``, the guard that keeps
every path under the data dir.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from service.core.rules import INT64_MAX, check_partition_count
from service.errors import InvalidTopicConfig

_INT: Final = re.compile(r"-?[0-9]{1,19}")
INT32_MAX: Final = 2**31 - 1
MIN_SEGMENT_BYTES: Final = 1024 * 1024

RETENTION_MS: Final = "retention.ms"
RETENTION_BYTES: Final = "retention.bytes"
SEGMENT_BYTES: Final = "segment.bytes"
SEGMENT_MS: Final = "segment.ms"
CLEANUP_POLICY: Final = "cleanup.policy"
MAX_MESSAGE_BYTES: Final = "max.message.bytes"

# key -> (minimum, maximum) for the integer configs; segment.bytes is at least ``min_segment_bytes``
_INT_RANGES: Final[dict[str, tuple[int, int]]] = {
    RETENTION_MS: (-1, INT64_MAX),
    RETENTION_BYTES: (-1, INT64_MAX),
    SEGMENT_BYTES: (1, INT32_MAX),
    SEGMENT_MS: (1, INT64_MAX),
    MAX_MESSAGE_BYTES: (1, INT32_MAX),
}
SUPPORTED_KEYS: Final = frozenset({*_INT_RANGES, CLEANUP_POLICY})


@dataclass(frozen=True, slots=True)
class LogDefaults:
    """Broker-wide defaults for the per-topic configs, and the least ``segment.bytes`` allowed."""

    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    segment_bytes: int = 64 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    max_message_bytes: int = INT32_MAX
    min_segment_bytes: int = MIN_SEGMENT_BYTES

    def __post_init__(self) -> None:
        if not 1 <= self.min_segment_bytes <= INT32_MAX:
            raise ValueError(
                f"min_segment_bytes must be between 1 and {INT32_MAX}, got {self.min_segment_bytes}"
            )
        for key, value in self.as_configs().items():
            if key in _INT_RANGES:
                lo, hi = self._range(key)
                if not lo <= int(value) <= hi:
                    raise ValueError(f"{key} must be between {lo} and {hi}, got {value}")

    def _range(self, key: str) -> tuple[int, int]:
        lo, hi = _INT_RANGES[key]
        return (self.min_segment_bytes, hi) if key == SEGMENT_BYTES else (lo, hi)

    def as_configs(self) -> dict[str, str]:
        return _configs_of(self)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """The effective configs of one topic, and which of them the topic set itself."""

    retention_ms: int
    retention_bytes: int
    segment_bytes: int
    segment_ms: int
    max_message_bytes: int
    overrides: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls, overrides: Mapping[str, str], defaults: LogDefaults, *, stored: bool = False
    ) -> TopicConfig:
        """Validate ``overrides`` and merge them over ``defaults``; raise ``InvalidTopicConfig``.

        ``stored``: the configs of an existing topic, maybe set before the
        minimum segment size was raised; such a topic still opens, and rolls at
        the minimum from now on (what it stores is left as it is).
        """
        clean = parse_overrides(overrides, min_segment_bytes=1 if stored else defaults.min_segment_bytes)
        merged = defaults.as_configs() | clean
        return cls(
            retention_ms=int(merged[RETENTION_MS]),
            retention_bytes=int(merged[RETENTION_BYTES]),
            segment_bytes=max(int(merged[SEGMENT_BYTES]), defaults.min_segment_bytes),
            segment_ms=int(merged[SEGMENT_MS]),
            max_message_bytes=int(merged[MAX_MESSAGE_BYTES]),
            overrides=clean,
        )

    def effective(self) -> dict[str, str]:
        """Every supported config with its value for this topic (what ``describe_topic`` shows)."""
        return _configs_of(self)


def _configs_of(c: LogDefaults | TopicConfig) -> dict[str, str]:
    """The config map of defaults or of one topic: both carry the same fields."""
    return {
        CLEANUP_POLICY: "delete",
        MAX_MESSAGE_BYTES: str(c.max_message_bytes),
        RETENTION_BYTES: str(c.retention_bytes),
        RETENTION_MS: str(c.retention_ms),
        SEGMENT_BYTES: str(c.segment_bytes),
        SEGMENT_MS: str(c.segment_ms),
    }


def parse_overrides(
    configs: Mapping[str, str], *, min_segment_bytes: int = MIN_SEGMENT_BYTES
) -> dict[str, str]:
    """Check every key and value; return them normalised (ints without sign noise or spaces)."""
    clean: dict[str, str] = {}
    for key, raw in configs.items():
        if key not in SUPPORTED_KEYS:
            supported = ", ".join(sorted(SUPPORTED_KEYS))
            raise InvalidTopicConfig(f"Unknown topic config {key!r}; supported: {supported}.")
        value = str(raw).strip()
        if key == CLEANUP_POLICY:
            if value != "delete":
                raise InvalidTopicConfig(
                    f"Invalid value {raw!r} for {key}: only 'delete' is supported by the embedded log."
                )
            clean[key] = value
            continue
        lo, hi = _INT_RANGES[key]
        if key == SEGMENT_BYTES:
            lo = min_segment_bytes
        if not _INT.fullmatch(value):
            raise InvalidTopicConfig(f"Invalid value {raw!r} for {key}: expected an integer in [{lo}, {hi}].")
        if int(value) < lo:
            raise InvalidTopicConfig(f"Invalid value {raw!r} for {key}: the minimum is {lo}.")
        if int(value) > hi:
            raise InvalidTopicConfig(f"Invalid value {raw!r} for {key}: the maximum is {hi}.")
        clean[key] = str(int(value))
    return clean


def check_partitions_and_replication(partitions: int, replication_factor: int | None) -> None:
    """The embedded log is one machine: at least one partition, replication factor 1 (-1 = default)."""
    check_partition_count(partitions)
    if replication_factor not in (None, 1, -1):
        raise InvalidTopicConfig(
            f"Invalid replication factor {replication_factor!r}: the embedded log runs on one machine, "
            "so it must be 1 (or -1 for the default, 1)."
        )
