"""The embedded ``Sessions``: consumer-instance state in a dict of this process.

``ConsumerService`` (``service.core.consumers``) loads an instance at the
start of every request, changes its copy, and saves it back with
compare-and-set on ``InstanceState.version``; the idle-instance reaper
(``workers.reaper``) asks for the expired ones. Instances do not outlive the
process, like the group memberships of the embedded coordinator they go with.

Every value crossing this boundary is copied, so no caller can change the
store behind its back; ``poll`` loads and saves on every call, so the copies
are shallow where that is safe: ``Subscription`` and ``TopicPartition`` are
frozen, and only the containers (``positions``, ``manual``) and the small
mutable ``InstanceConfig`` are duplicated.
"""

from __future__ import annotations

import heapq
import time

from service.core.models import IdempotentResult, InstanceConfig, InstanceState
from service.errors import ConsumerAlreadyExists, ConsumerInstanceNotFound

from ..lifecycle import Lifecycle

__all__ = ["EmbeddedSessions"]

_Key = tuple[str, str]


def _copy_config(c: InstanceConfig) -> InstanceConfig:
    return InstanceConfig(
        c.format,
        c.auto_offset_reset,
        c.auto_commit,
        c.fetch_min_bytes,
        c.request_timeout_ms,
        c.instance_timeout_ms,
        c.strategy,
        c.kind,
    )


def _copy(s: InstanceState) -> InstanceState:
    # Spelled out rather than dataclasses.replace/copy.deepcopy: this runs
    # twice per poll, and a direct constructor call is several times cheaper.
    return InstanceState(
        s.group,
        s.name,
        _copy_config(s.config),
        s.created_ms,
        s.last_seen_ms,
        s.subscription,
        list(s.manual) if s.manual is not None else None,
        s.generation,
        dict(s.positions),
        s.version,
        s.owner,
    )


class EmbeddedSessions(Lifecycle):
    """Consumer-instance state keyed by (group, instance name), for one gateway process.

    Nothing to open or close: the instances go with the process, and every
    call works whether or not the store was started.
    """

    def __init__(self, *, max_idempotency_keys: int = 100_000, max_idempotency_bytes: int = 64 << 20) -> None:
        super().__init__()  # the start/stop state
        self._store: dict[_Key, InstanceState] = {}
        self._owned: dict[str, int] = {}  # instances per owner, for its share (``count(owner=)``)
        # instances per group (``count(group)``, asked at every create): not a walk of them all
        self._in_group: dict[str, int] = {}
        # (lease end, key) for every instance, at or before its lease's real end (a renewal does
        # not move its entry; ``expired`` does, once it reaches it): the reaper asks each second,
        # and looks only at instances whose lease may have ended, not at them all.
        self._deadlines: list[tuple[int, _Key]] = []
        # idempotency key -> (result, expiry in monotonic seconds); oldest first, as inserted
        self._idempotent: dict[str, tuple[IdempotentResult, float]] = {}
        self._idempotent_bytes = 0
        self._max_keys = max_idempotency_keys
        self._max_bytes = max_idempotency_bytes
        self._claims = 0

    async def create(self, state: InstanceState) -> None:
        key = (state.group, state.name)
        if key in self._store:
            raise ConsumerAlreadyExists(
                f"Consumer instance {state.name!r} already exists in consumer group {state.group!r}."
            )
        self._store[key] = _copy(state)
        heapq.heappush(self._deadlines, (state.expires_ms, key))
        self._owned[state.owner] = self._owned.get(state.owner, 0) + 1
        self._in_group[state.group] = self._in_group.get(state.group, 0) + 1

    async def load(self, group: str, name: str) -> InstanceState:
        """A copy of the stored state; ``ConsumerInstanceNotFound`` if there is none.

        Expiry is not checked here: the caller owns the clock and removes an
        expired instance from its group as well (``Instances.load`` (``service.core.consumers.instances``)).
        """
        stored = self._store.get((group, name))
        if stored is None:
            raise ConsumerInstanceNotFound(group, name)
        return _copy(stored)

    async def save(self, state: InstanceState) -> bool:
        """Store a copy if the stored version is still ``state.version``; bump both on success.

        The lease never moves backwards: a ``touch`` that happened after this
        copy was loaded is kept.
        """
        key = (state.group, state.name)
        stored = self._store.get(key)
        if stored is None or stored.version != state.version:
            return False
        new = _copy(state)
        new.version = state.version + 1
        new.last_seen_ms = max(stored.last_seen_ms, state.last_seen_ms)
        self._store[key] = new
        if new.expires_ms < stored.expires_ms:  # a shorter timeout: its entry may be too late now
            heapq.heappush(self._deadlines, (new.expires_ms, key))
        state.version = new.version
        return True

    async def touch(self, group: str, name: str, now_ms: int) -> None:
        """Renew the lease; ``ConsumerInstanceNotFound`` if the instance is gone.

        Not a compare-and-set change: the version stays, so a concurrent
        request's save is not refused for it.
        """
        stored = self._store.get((group, name))
        if stored is None:
            raise ConsumerInstanceNotFound(group, name)
        stored.last_seen_ms = max(stored.last_seen_ms, now_ms)

    async def delete(self, group: str, name: str) -> bool:
        stored = self._store.pop((group, name), None)
        if stored is None:
            return False
        _less(self._owned, stored.owner)
        _less(self._in_group, group)
        return True

    async def instances(self, group: str | None = None) -> list[InstanceState]:
        """Copies of the stored instances (of ``group`` only, if given), by group then name."""
        return [_copy(self._store[key]) for key in sorted(self._store) if group is None or key[0] == group]

    async def count(self, group: str | None = None, *, owner: str | None = None) -> int:
        if owner is not None:
            return (
                self._owned.get(owner, 0)
                if group is None
                else sum(1 for (g, _), s in self._store.items() if g == group and s.owner == owner)
            )
        if group is None:
            return len(self._store)
        return self._in_group.get(group, 0)

    async def expired(self, now_ms: int) -> list[tuple[str, str]]:
        due: dict[_Key, int] = {}
        heap = self._deadlines
        while heap and heap[0][0] < now_ms:
            _, key = heapq.heappop(heap)
            stored = self._store.get(key)
            if stored is None:  # deleted: its entry goes with it
                continue
            if stored.expires_ms < now_ms:
                due[key] = stored.expires_ms
            else:  # renewed since: its entry moves to the lease's end
                heapq.heappush(heap, (stored.expires_ms, key))
        for key, ends in due.items():  # kept until the instance is deleted
            heapq.heappush(heap, (ends, key))
        if len(heap) > 2 * len(self._store) + 64:  # entries of deleted instances, dropped at once
            self._deadlines = [(s.expires_ms, k) for k, s in self._store.items()]
            heapq.heapify(self._deadlines)
        return sorted(due)

    # --- idempotency keys --------------------------------------------------------------

    # Bounded by count and bytes: a client sending a new key with every request would otherwise fill
    # the process's memory for the whole window. Past a bound the oldest answered keys go first
    # (their retries would run again); a claim still running is never dropped.

    def _held(self, key: str) -> IdempotentResult | None:
        entry = self._idempotent.get(key)
        if entry is None:
            return None
        if entry[1] <= time.monotonic():
            self._forget(key)
            return None
        return entry[0]

    def _put(self, key: str, result: IdempotentResult, ttl_ms: int) -> None:
        if key in self._idempotent:
            self._idempotent_bytes -= _weight(key, self._idempotent[key][0])
        self._idempotent[key] = (result, time.monotonic() + ttl_ms / 1000)
        self._idempotent_bytes += _weight(key, result)
        if len(self._idempotent) > self._max_keys or self._idempotent_bytes > self._max_bytes:
            self._trim()

    def _forget(self, key: str) -> None:
        result, _ = self._idempotent.pop(key)
        self._idempotent_bytes -= _weight(key, result)

    def _trim(self) -> None:
        for key, (result, _) in list(self._idempotent.items()):
            if len(self._idempotent) <= self._max_keys and self._idempotent_bytes <= self._max_bytes:
                return
            if result.response is not None:
                self._forget(key)

    async def claim(self, key: str, fingerprint: str, ttl_ms: int) -> IdempotentResult | None:
        held = self._held(key)
        if held is not None:
            return held
        self._claims += 1
        if self._claims % 1024 == 0:  # drop lapsed keys now and then, not on every claim
            now = time.monotonic()
            for lapsed in [k for k, (_, expiry) in self._idempotent.items() if expiry <= now]:
                self._forget(lapsed)
        self._put(key, IdempotentResult(fingerprint, None), ttl_ms)
        return None

    async def fulfil(self, key: str, fingerprint: str, response: bytes, ttl_ms: int) -> None:
        self._put(key, IdempotentResult(fingerprint, response), ttl_ms)

    async def abandon(self, key: str, fingerprint: str) -> None:
        held = self._held(key)
        if held is not None and held.response is None and held.fingerprint == fingerprint:
            self._forget(key)

    def idempotency_usage(self) -> tuple[int, int]:
        """(keys, bytes) the idempotency records hold now."""
        return len(self._idempotent), self._idempotent_bytes


def _weight(key: str, result: IdempotentResult) -> int:
    """What an idempotency record costs, about: its strings and response, and the entry around them."""
    return len(key) + len(result.fingerprint) + len(result.response or b"") + 200


def _less(counts: dict[str, int], key: str) -> None:
    """One fewer of ``key``: no entry once none is left (only those that hold some are kept)."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
