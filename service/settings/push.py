"""Push subscriptions: where the gateway may send records, and how much of it there may be.

Push is off until ``push_allowed_destinations`` names somewhere (``core.push.destinations``
says how entries read and which addresses they must name explicitly). The bounds apply to
every subscription (``core.push.spec.Bounds``) and to their number (``PushLimits``).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ..core.push.destinations import Destinations
from ..core.push.service import PushLimits
from ..core.push.spec import Bounds
from .group import SettingsGroup


class PushSettings(SettingsGroup):
    """The destinations push may reach, and the bounds of subscriptions and their requests."""

    push_allowed_destinations: str = Field(
        "",
        max_length=10_000,
        description="Where push subscriptions may deliver, comma-separated: host names ('hooks.example.com', "
        "'*.example.com'), addresses or networks ('10.0.0.0/8'), each with an optional port and an "
        "'http://' prefix to allow plain HTTP; loopback, private and link-local addresses only where an "
        "entry names them. Empty: push is off.",
    )
    push_max_subscriptions: int = Field(
        1_000, ge=1, description="Most push subscriptions in all (409 beyond)."
    )
    push_max_subscriptions_per_principal: int = Field(
        100, ge=1, description="Most push subscriptions one principal may own (409 beyond)."
    )
    push_max_in_flight: int = Field(
        16,
        ge=1,
        le=256,
        description="Most requests one push subscription may have in flight (max_in_flight).",
    )
    push_max_in_flight_total: int = Field(
        1024,
        ge=1,
        description="Most requests all push subscriptions together may ask to have in flight (409 beyond).",
    )
    push_max_request_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        description="Most bytes of records in one push request (a subscription's max_bytes).",
    )
    push_max_request_records: int = Field(
        1_000, ge=1, le=10_000, description="Most records in one push request (max_records)."
    )
    push_refresh_ms: int = Field(
        1_000,
        ge=50,
        le=60_000,
        description="How often each replica reads the subscriptions and contends for those nobody delivers.",
    )

    @field_validator("push_allowed_destinations")
    @classmethod
    def _destinations(cls, v: str) -> str:
        Destinations(cls.split(v))  # a ValueError names the entry
        return v

    def push_destinations(self) -> Destinations:
        return Destinations(self.split(self.push_allowed_destinations))

    def push_limits(self) -> PushLimits:
        return PushLimits(
            subscriptions=self.push_max_subscriptions,
            per_owner=self.push_max_subscriptions_per_principal,
            in_flight=self.push_max_in_flight_total,
            bounds=Bounds(
                max_records=self.push_max_request_records,
                max_bytes=self.push_max_request_bytes,
                max_in_flight=self.push_max_in_flight,
            ),
        )
