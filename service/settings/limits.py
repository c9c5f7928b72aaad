"""How much a client may send and take: the bounds of connections, requests and records
(``LimitSettings``), and the rates of produce and consume (``QuotaSettings``).

The server (``service.server.connections``, ``service.server.protocol``) and the API's parsing
keep to the bounds; the quota stores (``service.core.quotas``) to the rates.
"""

from __future__ import annotations

from pydantic import Field

from ..core.quotas import QuotaLimits
from .group import SettingsGroup


class LimitSettings(SettingsGroup):
    """Connections, handshake and header timeouts, request, record and JSON sizes."""

    # limits
    max_connections: int = Field(
        1_000, ge=1, description="Most client connections open at once (503 + Retry-After beyond)."
    )
    max_connections_per_address: int = Field(
        100,
        ge=1,
        description="Most of max_connections one client address may hold, counted from the TCP accept "
        "(503 + Retry-After beyond); a proxy in FORWARDED_ALLOW_IPS is held to max_connections only.",
    )
    tls_handshake_timeout_ms: int = Field(
        10_000, ge=100, description="Time a TLS handshake has to finish (the connection is closed beyond)."
    )
    header_timeout_ms: int = Field(
        10_000, ge=100, description="Time a request's headers have to arrive (408 and closed beyond)."
    )
    max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="Largest request line plus headers (431 and closed beyond)."
    )
    max_request_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="Largest request body (413 beyond); parsing one holds the event loop about 1 ms per MiB.",
    )
    max_record_bytes: int = Field(
        8 * 1024 * 1024, ge=16, description="Largest record: key, value and headers (413 beyond)."
    )
    max_records_per_request: int = Field(
        10_000, ge=1, description="Most records one produce request may carry (413 beyond)."
    )
    max_headers_per_record: int = Field(
        100, ge=0, description="Most headers one record may carry (413 beyond)."
    )
    compression: bool = Field(
        False,
        description="Answer record reads gzip- or zstd-coded when the client accepts it (Accept-Encoding) "
        "and the answer is compression_min_bytes or more; request bodies are decoded whatever this says.",
    )
    compression_min_bytes: int = Field(
        1024,
        ge=0,
        description="Smallest answer of a record read that is coded (smaller ones go as they are).",
    )
    max_json_depth: int = Field(
        64,
        ge=4,
        le=128,
        description="Deepest nesting of objects and arrays in JSON a client sends, a request body or a "
        "WebSocket message counted whole (422 beyond).",
    )


class QuotaSettings(SettingsGroup):
    """Token-bucket quotas per client and per topic."""

    # quotas (0 = off): token buckets per client (API key, else address) and per topic, in Redis when
    # the sessions are, so shared by every replica; bytes are record keys + values + headers
    quota_client_produce_bytes_per_s: int = Field(
        0, ge=0, description="Produce quota of each client, bytes/s (Kafka's producer_byte_rate)."
    )
    quota_client_consume_bytes_per_s: int = Field(
        0, ge=0, description="Consume quota of each client, bytes/s (Kafka's consumer_byte_rate)."
    )
    quota_topic_produce_bytes_per_s: int = Field(
        0, ge=0, description="Produce quota of each topic, bytes/s, shared by all its producers."
    )
    quota_topic_consume_bytes_per_s: int = Field(
        0, ge=0, description="Consume quota of each topic, bytes/s, shared by all its readers."
    )
    quota_client_requests_per_s: float = Field(
        0, ge=0, allow_inf_nan=False, description="Produce and read requests each client may send per second."
    )
    quota_burst_s: float = Field(
        1.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds of its rate an idle client or topic may use at once.",
    )
    quota_client_header: str = Field(
        "X-API-Key",
        pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]*$",
        description="Header naming the client for quotas; without it (or if empty), its address does.",
    )

    def quota_limits(self) -> QuotaLimits:
        """The token buckets' rates and burst (none on when every rate is 0)."""
        return QuotaLimits.from_rates(
            burst_s=self.quota_burst_s,
            client_produce=self.quota_client_produce_bytes_per_s,
            client_consume=self.quota_client_consume_bytes_per_s,
            topic_produce=self.quota_topic_produce_bytes_per_s,
            topic_consume=self.quota_topic_consume_bytes_per_s,
            client_requests=self.quota_client_requests_per_s,
        )
