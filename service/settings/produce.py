"""Producing: whether the two produce routes take the fast path, and how long and how many
Idempotency-Keys the sessions keep.

``service.api.fastpath`` and the idempotent-produce core (``service.core.idempotency``) read them.
"""

from __future__ import annotations

from pydantic import Field

from .group import SettingsGroup


class ProduceSettings(SettingsGroup):
    """The produce fast path and idempotent produce."""

    # the produce fast path (service.api.fastpath): the two produce routes served without FastAPI's
    # per-request machinery; the same answers either way, off only to compare or to debug
    produce_fast_path: bool = Field(
        True, description="Serve produce requests on the fast path (the same answers, less CPU)."
    )

    # idempotent produce (Idempotency-Key header)
    idempotency_window_ms: int = Field(
        24 * 3600 * 1000, ge=1000, description="How long a produce's Idempotency-Key answers its retries."
    )
    idempotency_max_keys: int = Field(
        100_000,
        ge=1,
        description="Most Idempotency-Keys the embedded sessions keep (oldest answered go first).",
    )
    idempotency_max_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Most bytes the embedded sessions' idempotency records take."
    )
    idempotency_wait_ms: int = Field(
        30_000, ge=0, description="How long a duplicate waits for the first request with its key."
    )
