"""The delivery states a replica stored last, kept decoded between its operations.

Reading a partition's state back from the coordinator and decoding it costs in proportion to
the records in flight (up to ``ShareLimits.max_in_flight``), where a poll changes a few of
them. ``KeptStates`` keeps each ``SharePartition`` this replica stored, under the version the
coordinator gave it, and reuses it while the coordinator's version is still that one: the
version is the fence. Another writer (a replica, an operator's reset) stores a new version, and
the next operation here reads the state again. A coordinator that gives no versions
(``change_share_states`` of whole states, ZooKeeper's) keeps nothing here: every operation
reads, as before.

A kept state is taken out while an operation changes it and put back only once what it
changed is stored, so a failed or lost store never leaves a state here that the coordinator
does not have. Changes are stored as deltas (``SharePartition.change_json``).

Collaborators: ``ShareStates`` (``share_versions``, ``share_states``, ``change_share_states``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Final

from ..models import TopicPartition
from ..ports import ShareStates
from .delivery import ShareLimits
from .state import SharePartition

# Records in flight kept at most, over every state kept (a state keeps them as runs, at most one
# each, about 100 bytes decoded); past it, the states kept longest are let go (read again when
# next used).
_MAX_KEPT_RECORDS: Final = 200_000

States = dict[TopicPartition, tuple[SharePartition, int]]  # (state, version) by partition


class KeptStates:
    """Decoded delivery states, by group and partition, fenced by their versions (see the module)."""

    def __init__(
        self, store: ShareStates, limits: ShareLimits, *, max_records: int = _MAX_KEPT_RECORDS
    ) -> None:
        self._store = store
        self._limits = limits
        self._max_records = max_records
        # (version, state, its records when kept) by (group, partition), the longest kept first
        self._kept: dict[tuple[str, TopicPartition], tuple[int, SharePartition, int]] = {}
        self._records = 0  # records in flight of the states kept, as they were kept

    async def load(self, group: str, tps: Iterable[TopicPartition]) -> States:
        """The stored state and version of each of ``tps`` that has one: the kept one while its
        version is the stored one, else read. The caller owns them until it ``store``s them."""
        wanted = list(dict.fromkeys(tps))
        held = {tp: entry for tp in wanted if (entry := self._take((group, tp))) is not None}
        versions = await self._store.share_versions(group, list(held)) if held else {}
        found: States = {}
        misses: list[TopicPartition] = []
        for tp in wanted:
            entry = held.get(tp)
            if entry is not None and versions.get(tp) == entry[0]:
                found[tp] = (entry[1], entry[0])
            else:
                misses.append(tp)
        if misses:
            for tp, (data, version) in (await self._store.share_states(group, misses)).items():
                found[tp] = (SharePartition.from_json(data, self._limits), version)
        return found

    async def store(
        self,
        group: str,
        states: Mapping[TopicPartition, tuple[SharePartition, int]],
        changed: Collection[TopicPartition],
    ) -> bool:
        """Store what changed of ``changed`` (each at its version, -1 for a new state) at once,
        compare-and-set; False, storing nothing, if another writer stored first. Then keep every
        state of ``states`` the coordinator now holds as it is here."""
        changes = {tp: (states[tp][0].change_json(), states[tp][1]) for tp in changed}
        versions: Mapping[TopicPartition, int] = {}
        if changes:
            given = await self._store.change_share_states(group, changes)
            if given is None:
                return False
            versions = given
        for tp, (sp, version) in states.items():
            if tp in changes:
                sp.stored()
                if tp in versions:
                    self._keep(group, tp, versions[tp], sp)
            elif version != -1 and not sp.changes:
                self._keep(group, tp, version, sp)
        return True

    def forget(self, group: str) -> None:
        """Let every kept state of ``group`` go (its states are being replaced whole)."""
        for key in [key for key in self._kept if key[0] == group]:
            self._take(key)

    def _take(self, key: tuple[str, TopicPartition]) -> tuple[int, SharePartition, int] | None:
        entry = self._kept.pop(key, None)
        if entry is not None:
            self._records -= entry[2]
        return entry

    def _keep(self, group: str, tp: TopicPartition, version: int, sp: SharePartition) -> None:
        size = sp.in_flight + 1
        if size > self._max_records:
            return
        while self._records + size > self._max_records:
            self._take(next(iter(self._kept)))
        self._kept[(group, tp)] = (version, sp, size)
        self._records += size
