"""Leader election among gateway replicas: ephemeral-sequential candidates, the lowest leads.

The recipe of ZooKeeper's documentation (and of kazoo's ``Election``), done
with asyncio-bridged calls instead of a thread blocked in ``Lock.acquire``:

- each replica creates ``/brokergate/election/{token}__{seq}`` (ephemeral,
  sequential) once per session, where ``token`` is random per process so the
  replica recognizes its candidate even when the answer to the create was lost;
- the candidate with the lowest sequence number leads;
- every replica watches the candidates' list, so when the leader's session ends
  (it stopped, died, or was cut off longer than the session timeout) ZooKeeper
  deletes its candidate and the next one learns at once that it leads.

A replica that loses its connection stops considering itself leader right away
(the coordinator checks the connection on every ``is_leader``): its session may
be expiring and another replica taking over.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from .paths import CANDIDATE_SEPARATOR, ZnodePaths, candidate_sequence
from .session import ZooKeeperSession

log = logging.getLogger(__name__)


class LeaderElection:
    """This replica's candidacy and what it last learned about leadership.

    Collaborators: ``ZooKeeperSession`` for requests and watches; the
    coordinator's maintenance loop calls ``campaign`` when a watch fires, the
    connection comes back, or its timer ticks, and ``revoke`` when the
    connection drops.
    """

    def __init__(
        self, zk: ZooKeeperSession, paths: ZnodePaths, node_id: str, on_change: Callable[[], None]
    ) -> None:
        self._zk = zk
        self._paths = paths
        self._node_id = node_id
        self._token = uuid.uuid4().hex
        self._leader = False
        self._synced_session: int | None = None
        self._first: str | None = None
        self.leader_id: str | None = None  # the node id of the leader last seen, for operators and tests
        # ``on_change`` runs in the event loop whenever the list of candidates changes.
        self._watch = zk.watcher(on_change)

    @property
    def is_leader(self) -> bool:
        return self._leader

    def revoke(self) -> None:
        self._leader = False

    def _mine(self, children: list[str]) -> list[str]:
        prefix = self._token + CANDIDATE_SEPARATOR
        return sorted((c for c in children if c.startswith(prefix)), key=candidate_sequence)

    async def _candidates(self) -> list[str]:
        children = await self._zk.call(
            lambda c: c.get_children_async(self._paths.election, watch=self._watch),
            what="list leader candidates",
        )
        return sorted(children, key=candidate_sequence)

    async def campaign(self) -> bool:
        """Be a candidate in the current session; return (and remember) whether this replica leads."""
        session = self._zk.session_id
        if session != self._synced_session:
            # After a new session, a lagging server may still list the old session's candidates.
            await self._zk.call(lambda c: c.sync_async(self._paths.election), what="sync")
            self._synced_session = session
        candidates = await self._candidates()
        mine = self._mine(candidates)
        if not mine:
            await self._zk.call(
                lambda c: c.create_async(
                    self._paths.candidate_prefix(self._token),
                    self._node_id.encode("utf-8", "surrogatepass"),
                    ephemeral=True,
                    sequence=True,
                ),
                what="enter the leader election",
            )
            candidates = await self._candidates()
            mine = self._mine(candidates)
        for extra in mine[1:]:  # a create retried after its answer was lost
            await self._drop(extra)
        leads = bool(mine) and candidates[0] == mine[0]
        first = candidates[0] if candidates else None
        if first != self._first:
            # Learn who leads before saying we lead, so the two never disagree.
            if leads:
                self.leader_id = self._node_id
            else:
                self.leader_id = await self._owner(first) if first is not None else None
            self._first = first
        leads = leads and self._zk.connected
        if leads != self._leader:
            log.info("replica %s %s leader", self._node_id, "is now" if leads else "is no longer")
        self._leader = leads
        return leads

    async def _drop(self, name: str) -> None:
        try:
            await self._zk.call(
                lambda c: c.delete_async(f"{self._paths.election}/{name}"),
                what="drop a duplicate candidate",
                expect=(NoNodeError,),
            )
        except NoNodeError:
            pass

    async def _owner(self, name: str) -> str | None:
        try:
            data, _ = await self._zk.call(
                lambda c: c.get_async(f"{self._paths.election}/{name}"),
                what="read the leader's id",
                expect=(NoNodeError,),
            )
        except NoNodeError:  # it just left; the watch will tell us who is next
            return None
        return bytes(data).decode("utf-8", "surrogatepass")
