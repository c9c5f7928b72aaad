"""Reading: consumer instances and their polls, push streams (Server-Sent Events and WebSockets),
and share groups (KIP-932).

Each is a bound on what clients may hold open, or a timing the consumer core, the stream
routers and the share-group core (``service.core.shares``) keep to. The dead-letter topic
pattern is checked with the topic-name rule of ``service.core.rules``.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ..core.credit import CreditLimits
from ..core.fair import InstanceLimits
from ..core.rules import valid_topic
from ..core.shares.delivery import ShareLimits
from ..core.streams.stream import StreamLimits
from .group import SettingsGroup


class ConsumerSettings(SettingsGroup):
    """Consumer instances: how long they live, how many there may be, how long and how much a poll reads."""

    consumer_instance_timeout_ms: int = Field(300_000, ge=1000)
    max_instances_per_group: int = Field(
        1_000, ge=1, description="Most consumer instances one group may have (409 beyond)."
    )
    max_instances: int = Field(10_000, ge=1, description="Most consumer instances in all (409 beyond).")
    max_instances_per_principal: int = Field(
        1_000,
        ge=1,
        description="Most of max_instances (share consumers included) one authenticated principal may "
        "hold, counted across replicas with Redis sessions (409 beyond).",
    )
    max_open_polls: int = Field(
        1_000,
        ge=1,
        description="Most long-polls and stateless reads open at once (503 + Retry-After beyond).",
    )
    max_open_polls_per_principal: int = Field(
        100,
        ge=1,
        description="Most of max_open_polls one principal (an address, with authentication off) may "
        "hold (503 + Retry-After beyond).",
    )
    consumer_max_instance_timeout_ms: int = Field(
        3_600_000,
        ge=1000,
        description="Largest consumer.instance.timeout.ms a client may ask for (42204 beyond).",
    )
    consumer_request_timeout_ms: int = Field(1000, ge=0)
    consumer_max_timeout_ms: int = Field(60_000, ge=0)
    consumer_max_bytes: int = Field(64 * 1024 * 1024, ge=1)
    reaper_interval_ms: int = Field(1000, ge=50)
    metadata_refresh_ms: int = Field(2000, ge=50)

    def instance_limits(self) -> InstanceLimits:
        """How many consumer instances (share consumers too) may exist."""
        return InstanceLimits(
            self.max_instances_per_group, self.max_instances, self.max_instances_per_principal
        )


class StreamSettings(SettingsGroup):
    """Push streams: how many may be open, their heartbeats, lifetime and patience with a backend
    that is unavailable, and their flow control."""

    # push streams: Server-Sent Events and WebSockets over consumer instances and partitions
    max_open_streams: int = Field(
        1_000, ge=1, description="Most SSE and WebSocket streams open at once (503 + Retry-After beyond)."
    )
    max_open_streams_per_principal: int = Field(
        100,
        ge=1,
        description="Most of max_open_streams one principal (an address, with authentication off) may "
        "hold (503 + Retry-After beyond).",
    )
    stream_heartbeat_ms: int = Field(
        15_000, ge=100, description="An idle SSE stream sends a ': keep-alive' comment this often."
    )
    stream_max_lifetime_ms: int = Field(
        0,
        ge=0,
        description="A stream ends (end event, reason error, 50301) once open this long, so that its "
        "client authenticates again; 0: no limit.",
    )
    stream_send_timeout_ms: int = Field(
        30_000,
        ge=100,
        description="A stream whose client takes nothing of what is sent for this long is closed.",
    )
    stream_backend_retry_ms: int = Field(
        30_000,
        ge=0,
        description="A stream whose polls fail because a backend is unavailable (503) polls again, "
        "backing off up to 1 s, for this long before it ends (end event, reason error, 50301); "
        "0: it ends at the first.",
    )
    stream_max_batch_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Most record bytes one stream event or message carries (a larger record comes alone).",
    )
    stream_max_credit_records: int = Field(
        100_000, ge=1, description="Most records a WebSocket client may have granted and not yet received."
    )
    stream_max_credit_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1,
        description="Most record bytes a WebSocket client may have granted and not yet received.",
    )
    stream_max_message_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest WebSocket message a client may send (closed with 1009 beyond).",
    )
    stream_max_held_bytes: int = Field(
        2 * 1024 * 1024,
        ge=1024,
        description="Most bytes of one WebSocket's messages (produces, commits, seeks) read and not yet "
        "answered, counted raw; past it nothing more is read from that socket until some are answered.",
    )
    stream_max_held_bytes_per_principal: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="The same, for all the WebSockets of one principal (one address, with authentication "
        "off) together.",
    )

    def stream_limits(self) -> StreamLimits:
        """The bounds of the streams of one replica."""
        return StreamLimits(
            open=self.max_open_streams,
            open_per_holder=self.max_open_streams_per_principal,
            heartbeat_ms=self.stream_heartbeat_ms,
            lifetime_ms=self.stream_max_lifetime_ms,
            send_timeout_ms=self.stream_send_timeout_ms,
            batch_bytes=self.stream_max_batch_bytes,
            message_bytes=self.stream_max_message_bytes,
            credit=CreditLimits(self.stream_max_credit_records, self.stream_max_credit_bytes),
            held_bytes=self.stream_max_held_bytes,
            held_bytes_per_holder=self.stream_max_held_bytes_per_principal,
            backend_retry_ms=self.stream_backend_retry_ms,
        )


class ShareGroupSettings(SettingsGroup):
    """Share groups: record locks, delivery attempts, the dead-letter topic and the stored state's bounds."""

    # share groups (KIP-932): queues with per-record acknowledgement
    share_record_lock_duration_ms: int = Field(
        30_000,
        ge=100,
        le=3_600_000,
        description="How long a share consumer holds a record it acquired before it is delivered again "
        "(Kafka's group.share.record.lock.duration.ms).",
    )
    share_delivery_attempt_limit: int = Field(
        5,
        ge=2,
        le=10,
        description="Deliveries of a record before it is archived (group.share.delivery.attempt.limit).",
    )
    share_partition_max_record_locks: int = Field(
        2000,
        ge=100,
        le=10_000,
        description="Most records in flight per share-partition (group.share.partition.max.record.locks).",
    )
    share_dead_letter_topic: str = Field(
        "",
        max_length=300,
        description="Where records out of delivery attempts are copied, {group} and {topic} standing for "
        "the share group and the record's topic (e.g. '{group}.dlq'); empty: they are only archived.",
    )
    share_max_records: int = Field(
        500, ge=1, le=10_000, description="Most records one share-consumer poll acquires (max_records)."
    )
    share_max_groups: int = Field(
        1_000, ge=1, description="Most share groups with stored state (409 beyond)."
    )
    share_max_partitions: int = Field(
        10_000, ge=1, description="Most partitions with stored state per share group (409 beyond)."
    )
    share_max_state_bytes: int = Field(
        512 * 1024,
        ge=16 * 1024,
        le=900 * 1024,
        description="Largest stored state of one share-partition (its records in flight and their errors).",
    )

    @field_validator("share_dead_letter_topic")
    @classmethod
    def _dead_letter_topic(cls, v: str) -> str:
        if v and not valid_topic(v.replace("{group}", "g").replace("{topic}", "t")):
            raise ValueError(
                "share_dead_letter_topic must make a topic name ([a-zA-Z0-9._-]) of the group's and the "
                "topic's, e.g. '{group}.dlq'"
            )
        return v

    def share_limits(self) -> ShareLimits:
        """Kafka's share-group settings, as the share-group core keeps to them; records out of
        delivery attempts are parked for their dead-letter copy when there is a dead-letter topic."""
        return ShareLimits(
            max_in_flight=self.share_partition_max_record_locks,
            delivery_limit=self.share_delivery_attempt_limit,
            lock_ms=self.share_record_lock_duration_ms,
            park=bool(self.share_dead_letter_topic),
        )
