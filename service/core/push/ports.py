"""The push subscriptions' two ports: where subscriptions are stored, and how a request is sent.

``PushStore`` keeps each subscription as its wire form (``stored.StoredPush``) with a version
for compare-and-set, beside the share groups' states: in the embedded coordinator's directory, or
in ZooKeeper for every replica. ``PushSender`` sends one request to a checked destination and
says what came back; it never raises for what the endpoint did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .destinations import Destinations, Target
from .stored import StoredPush


class PushStore(Protocol):
    """Push subscriptions by name, each with the version it was stored at."""

    async def push_subscriptions(self) -> dict[str, tuple[StoredPush, int]]:
        """Every subscription stored, with its version."""
        ...

    async def push_subscription(self, name: str) -> tuple[StoredPush, int] | None:
        """One subscription and its version, or None if there is none of that name."""
        ...

    async def put_push_subscription(
        self, name: str, data: StoredPush, *, expected_version: int | None
    ) -> int | None:
        """Store ``data`` under ``name`` if the stored version is still ``expected_version`` (None:
        only if there is none); the new version, or None if another writer came first."""
        ...

    async def delete_push_subscription(self, name: str, *, expected_version: int) -> bool:
        """Delete ``name`` if it is still at ``expected_version``; whether it was deleted."""
        ...


@dataclass(frozen=True, slots=True)
class PushRequest:
    """One POST to an endpoint: its target, body, headers and how long it may take in all."""

    target: Target
    body: bytes
    headers: tuple[tuple[str, str], ...]
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a request met: the status (None if no answer came), or why there was none, and how long
    the endpoint asked to be left alone (``Retry-After``)."""

    status: int | None
    error: str | None = None
    retry_after_ms: int | None = None

    @property
    def summary(self) -> str:
        """The outcome in a few words, for the last error and the dead-letter headers."""
        if self.status is None:
            return self.error or "no answer"
        return f"HTTP {self.status}" + (f": {self.error}" if self.error else "")


class PushSender(Protocol):
    """Sends push requests; resolves the name and checks the address against ``Destinations``."""

    async def check(self, target: Target, destinations: Destinations) -> None:
        """``DestinationRefused`` unless ``target``'s host resolves, now, to an address
        ``destinations`` allows (what a subscription's creation and change ask)."""
        ...

    async def send(self, request: PushRequest, destinations: Destinations) -> Outcome:
        """POST the request to the first address of its host that ``destinations`` allows (no
        redirect followed, the answer's body read only up to a bound); an ``Outcome`` whatever
        happened, ``error`` saying what when no status came back."""
        ...
