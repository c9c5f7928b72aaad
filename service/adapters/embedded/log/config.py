"""Topic names and topic configs of the embedded log: validation only, no I/O.

``LogDefaults`` holds the broker-wide values the ``EmbeddedLog`` was built
with; a topic stores only the keys it overrides (``TopicConfig.overrides``), so
changing a default later reaches every topic that did not set the key, as in
Kafka. Topic names are checked by ``service.core.rules.check_topic``,
the guard that keeps every path under the data dir.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from service.core.rules import check_partition_count
from service.errors import InvalidTopicConfig

_INT: Final = re.compile(r"-?[0-9]{1,19}")
INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1

RETENTION_MS: Final = "retention.ms"
RETENTION_BYTES: Final = "retention.bytes"
SEGMENT_BYTES: Final = "segment.bytes"
SEGMENT_MS: Final = "segment.ms"
CLEANUP_POLICY: Final = "cleanup.policy"
MAX_MESSAGE_BYTES: Final = "max.message.bytes"

# key -> (minimum, maximum) for the integer configs
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
    """Broker-wide defaults for the per-topic configs."""

    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    segment_bytes: int = 64 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    max_message_bytes: int = INT32_MAX

    def __post_init__(self) -> None:
        for key, value in self.as_configs().items():
            if key in _INT_RANGES:
                lo, hi = _INT_RANGES[key]
                if not lo <= int(value) <= hi:
                    raise ValueError(f"{key} must be between {lo} and {hi}, got {value}")

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
    def build(cls, overrides: Mapping[str, str], defaults: LogDefaults) -> TopicConfig:
        """Validate ``overrides`` and merge them over ``defaults``; raise ``InvalidTopicConfig``."""
        clean = parse_overrides(overrides)
        merged = defaults.as_configs() | clean
        return cls(
            retention_ms=int(merged[RETENTION_MS]),
            retention_bytes=int(merged[RETENTION_BYTES]),
            segment_bytes=int(merged[SEGMENT_BYTES]),
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


def parse_overrides(configs: Mapping[str, str]) -> dict[str, str]:
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
        if not _INT.fullmatch(value) or not lo <= int(value) <= hi:
            raise InvalidTopicConfig(f"Invalid value {raw!r} for {key}: expected an integer in [{lo}, {hi}].")
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
