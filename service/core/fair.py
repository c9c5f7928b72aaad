"""Fair shares of the limits every client shares: connections, consumer instances, streams, long-polls.

A limit meant for everyone (``max_connections``, ``max_instances``, ``max_open_streams``,
``max_open_polls``) is no use if one client can take all of it: everyone else is then refused
while that client holds what it took. So each of them is a ``FairShare``: at most ``total`` in
all, and at most ``share`` by any one holder (a principal; an address where there is none yet,
or where everyone is the anonymous principal). One decision, ``FairShare.refusal``, says
whether one more fits; ``FairCounter`` keeps the counts where they live in this process
(connections, streams, polls), and the consumer instances ask the same decision with the
counts the sessions store keeps, shared by every replica (``InstanceLimits``).

Collaborators: ``acl.Caller`` (who holds), and the callers' own errors: a refusal is said
once here, and raised as what the limit answers (503 with Retry-After, or 409).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from service.errors import GatewayError, IllegalState

from .acl import ANONYMOUS, Caller
from .ports import Sessions

__all__ = ["FairCounter", "FairShare", "Hold", "InstanceLimits", "holder_of"]


def holder_of(caller: Caller) -> str:
    """Whose share a request draws on: its principal, or its address when it has none of its own
    (authentication off: every caller is the one anonymous principal)."""
    if caller.principal != ANONYMOUS or caller.host is None:
        return caller.principal
    return f"address {caller.host}"


@dataclass(frozen=True, slots=True)
class FairShare:
    """At most ``total`` of ``what`` in all, and at most ``share`` of them held by one holder."""

    total: int
    share: int
    what: str

    def refusal(self, mine: int, everyone: int) -> str | None:
        """Why one more does not fit beside ``mine`` of the holder's and ``everyone``'s in all
        (None: it fits). The whole limit is named first: a holder at its share when everything
        is taken is told the gateway is full, which it is."""
        if everyone >= self.total:
            return f"This gateway holds {self.total} {self.what}, the most allowed"
        if mine >= self.share:
            return (
                f"You already hold {self.share} {self.what}, the most one client may hold "
                f"of the gateway's {self.total}"
            )
        return None


class Hold:
    """One place taken in a ``FairCounter``; ``release`` gives it back (once, however often called)."""

    __slots__ = ("_counter", "holder")

    def __init__(self, counter: FairCounter, holder: str | None) -> None:
        self._counter: FairCounter | None = counter
        self.holder = holder

    def release(self) -> None:
        counter, self._counter = self._counter, None
        if counter is not None:
            counter._give_back(self.holder)


class FairCounter:
    """What is held now in this process, in all and per holder, within a ``FairShare``.

    ``refuse`` makes the error a refusal is raised as (``take``, ``hold``); ``try_take`` is for
    callers that answer a refusal themselves (a connection, before any request).
    """

    def __init__(self, share: FairShare, refuse: Callable[[str], GatewayError]) -> None:
        self.share = share
        self._refuse = refuse
        self._held: dict[str, int] = {}
        self.open = 0

    def held_by(self, holder: str) -> int:
        return self._held.get(holder, 0)

    def refusal(self, holder: str | None) -> str | None:
        return self.share.refusal(self._held.get(holder, 0) if holder is not None else 0, self.open)

    def try_take(self, holder: str | None) -> Hold | None:
        """A place for ``holder``, or None when none fits; a None holder is held to the whole
        limit only (a proxy trusted to carry many clients)."""
        if self.refusal(holder) is not None:
            return None
        if holder is not None:
            self._held[holder] = self._held.get(holder, 0) + 1
        self.open += 1
        return Hold(self, holder)

    def take(self, holder: str) -> Hold:
        """A place for ``holder``, or the error ``refuse`` makes of why none fits."""
        hold = self.try_take(holder)
        if hold is None:
            raise self._refuse(self.refusal(holder) or "")
        return hold

    @contextmanager
    def hold(self, holder: str) -> Iterator[None]:
        """A place for ``holder`` while the block runs."""
        hold = self.take(holder)
        try:
            yield
        finally:
            hold.release()

    def _give_back(self, holder: str | None) -> None:
        self.open -= 1
        if holder is None:
            return
        left = self._held[holder] - 1
        if left:
            self._held[holder] = left
        else:
            del self._held[holder]  # no entry per holder that ever came: only those holding now


@dataclass(frozen=True, slots=True)
class InstanceLimits:
    """How many consumer instances (share consumers too) may exist, per group, per principal and
    in all (``max_instances*`` settings): the ``FairShare`` of instances. The counts are the
    sessions store's, not this process's, so with Redis they are every replica's."""

    per_group: int = 1_000
    total: int = 10_000
    per_principal: int = 10_000

    async def admit(
        self,
        sessions: Sessions,
        group: str,
        owner: str,
        *,
        in_group: int | None = None,
        what: str = "Consumer group",
    ) -> None:
        """Check that one more instance of ``owner`` fits in ``group``; raise ``IllegalState`` (409) if not.

        ``group`` has ``in_group`` instances (counted here when not given). Bounded, as Kafka bounds a group
        (group.max.size): counted, then created, so concurrent creates may pass a bound by as many
        as run at once; never by more. The anonymous principal has no share of its own: with
        authentication off every caller is it (and may use any instance), so the whole limit is its."""
        if in_group is None:
            in_group = await sessions.count(group)
        owned = 0 if owner == ANONYMOUS else await sessions.count(owner=owner)
        self.check(group, in_group, await sessions.count(), owned=owned, what=what)

    def check(
        self, group: str, in_group: int, total: int, *, owned: int = 0, what: str = "Consumer group"
    ) -> None:
        """Check that one more instance fits; raise ``IllegalState`` (409) if not.

        It must fit beside the ``in_group`` instances of ``group``, the ``owned`` ones of its
        principal and the ``total`` in all."""
        if in_group >= self.per_group:
            raise IllegalState(
                f"{what} {group!r} has {self.per_group} instances, the most allowed; "
                "delete one (or let it expire) first."
            )
        refusal = FairShare(self.total, self.per_principal, "consumer instances").refusal(owned, total)
        if refusal is not None:
            raise IllegalState(f"{refusal}; delete one (or let it expire) first.")
