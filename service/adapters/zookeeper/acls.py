"""ACL bindings in ZooKeeper, in Kafka's classic layout, with a local cache every replica keeps fresh.

Layout (``paths.py``): the bindings of a LITERAL resource are one znode,
``/kafka-acl/{Topic|Group|Cluster}/{name}``, those of a PREFIXED one
``/kafka-acl-extended/prefixed/{type}/{prefix}``, holding Kafka's
``{"version":1,"acls":[{"principal":…,"permissionType":"Allow",…}]}``
(``codec.py``). Entries of a Kafka-written znode that brokergate cannot model
are kept as they are when it rewrites the znode.

Writes go resource by resource, as Kafka's: a compare-and-set on the znode's
version, in one transaction with a sequential change znode
(``/kafka-acl-changes/acl_changes_N``; ``/kafka-acl-extended-changes/…`` for
prefixes; data as Kafka writes it), so no change is stored unannounced. A lost
race reads again and retries, so two replicas adding to one resource at once
both land. Removing a resource's last binding deletes its znode.

Reads answer from a cache of every binding, without a ZooKeeper round trip.
It is loaded whole on start and in every new session (what changed while the
session was gone is unknown), and otherwise kept fresh from the change znodes:
a children watch on both change paths wakes the *refresher* task, which reads
the change znodes newer than the last it processed and reloads just those
resources. kazoo drops watches with the connection, so every reconnection
also triggers a catch-up, which sets them again. A call's own writes are read
back before it returns.

Old change znodes are purged by the leader, once a minute: those created more
than 15 minutes ago (Kafka's expiry of ACL change notifications). A replica
needs a change znode only until its watch fires; one cut off for longer than
that has lost its session (timeouts are seconds) and reloads everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Final, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.interfaces import IAsyncResult

from service.core.acl import AclBinding, AclFilter, PatternType, ResourceType
from service.errors import BackendError, BackendUnavailable, GatewayError, InvalidPayload, NewerFormat

from .codec import (
    AclEntries,
    AclResource,
    CorruptZnode,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
)
from .groups import MAX_ZNODE_BYTES
from .paths import ZnodePaths, acl_change_sequence, decode_name, encode_name
from .session import ZooKeeperSession

log = logging.getLogger(__name__)

CHANGE_RETENTION_MS: Final = 15 * 60 * 1000
_PURGE_INTERVAL_S: Final = 60.0
_PURGE_BATCH: Final = 1000  # change znodes looked at per purge, at most
# The refresher's timer: how soon a failed refresh is retried.
_TICK_S: Final = 1.0
# Admin changes are rare; losing this many races in a row is better retried by the client.
_ATTEMPTS: Final = 20
_BACKOFF_S: Final = 0.005  # times the attempt, at most, before the next: rivals fall out of step
_IN_FLIGHT: Final = 100  # ZooKeeper requests one load or update has in flight, at most
_KINDS: Final = [(p, t) for p in PatternType for t in ResourceType]

T = TypeVar("T")
R = TypeVar("R")
Bindings = tuple[AclBinding, ...]
Edit = Callable[[Bindings], Bindings]


class _LostTrack(Exception):
    """A change znode that cannot say which resource changed: only a full reload is safe."""


class AclStore:
    """Stores ACL bindings and keeps every binding in a local cache.

    Collaborators: ``ZooKeeperSession`` for requests, watches and connection
    states; ``ZnodePaths`` and ``codec`` for Kafka's layout and formats. The
    coordinator starts and stops it, and tells it whether this replica leads
    (``may_purge``): only the leader purges old change znodes.
    """

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths, *, may_purge: Callable[[], bool]) -> None:
        self._zk = zk
        self._paths = paths
        self._may_purge = may_purge
        self._cache: dict[AclResource, Bindings] = {}
        self._snapshot: Bindings = ()
        # Znodes named otherwise than ``encode_name`` would (a '%' in a name Kafka wrote).
        self._odd_znodes: dict[AclResource, str] = {}
        self._seen = dict.fromkeys(PatternType, -1)  # the last change znode processed, per path
        self._loaded_session: int | None = None
        self._stale = False  # a change may have been announced since the last catch-up
        self._lock = asyncio.Lock()  # one reader of ZooKeeper into the cache at a time
        self._wake = asyncio.Event()
        self._watch = zk.watcher(self._on_change)
        self._refresher: asyncio.Task[None] | None = None
        self._next_purge = 0.0
        # Writers of one resource in this replica take turns (racing each other wastes round
        # trips); the count says when the lock is no longer needed.
        self._turns: dict[AclResource, tuple[asyncio.Lock, int]] = {}
        zk.add_listener(self._on_state)

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Load every binding (a znode that cannot be read fails the start), then follow changes."""
        async with self._lock:
            await self._load_all(strict=True)
        self._refresher = asyncio.create_task(self._refresh(), name="zookeeper-acls")

    async def stop(self) -> None:
        """Stop following changes (the cache stays as it was). Idempotent."""
        task, self._refresher = self._refresher, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loaded_session = None

    def _on_change(self) -> None:
        self._stale = True
        self._wake.set()

    def _on_state(self, state: KazooState) -> None:
        self._on_change()  # a dropped connection dropped the watches too: catch up and set them again

    async def _refresh(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_TICK_S):
                    await self._wake.wait()
            self._wake.clear()
            if not self._zk.connected:
                continue
            try:
                async with self._lock:
                    await self._sync()
                await self._purge_if_due()
            except GatewayError as exc:
                log.warning("ACL bindings not refreshed: %s", exc.message)
            except Exception:
                log.exception("ACL refresh failed; retrying")

    # --- reads -----------------------------------------------------------------------

    def bindings(self) -> Bindings:
        """Every binding, as this replica last saw them: the same tuple until they change."""
        return self._snapshot

    async def _sync(self, *, always: bool = False) -> None:
        if self._zk.session_id != self._loaded_session:
            await self._load_all(strict=False)
        elif self._stale or always:
            await self._catch_up()

    async def _load_all(self, *, strict: bool) -> None:
        """Read every ACL znode into the cache. ``strict``: raise on a damaged znode rather than
        keep what was read of it before."""
        session = self._zk.session_id
        self._stale = False
        try:
            # Watches first: whatever changes after the listing is announced, and read again.
            seen = {}
            for pattern in PatternType:
                numbers = [acl_change_sequence(n) for n in await self._changes(pattern)]
                seen[pattern] = max(numbers, default=-1)
            listed = await asyncio.gather(*(self._children(self._paths.acl_type(p, t)) for p, t in _KINDS))
            located: list[tuple[AclResource, str]] = []
            odd: dict[AclResource, str] = {}
            for (pattern, resource_type), children in zip(_KINDS, listed, strict=True):
                for child in children:
                    resource = AclResource(resource_type, pattern, decode_name(child))
                    path = f"{self._paths.acl_type(pattern, resource_type)}/{child}"
                    located.append((resource, path))
                    if encode_name(resource.name) != child:
                        odd[resource] = path
            read = await _each(located, functools.partial(self._read_bindings, strict=strict))
        except BaseException:
            self._stale = True
            raise
        cache: dict[AclResource, Bindings] = {}
        for (resource, _), bindings in zip(located, read, strict=True):
            if bindings:  # two znodes for one resource only if a tool wrote one: keep both
                cache[resource] = tuple(dict.fromkeys((*cache.get(resource, ()), *bindings)))
        self._cache, self._odd_znodes, self._seen = cache, odd, seen
        self._loaded_session = session
        self._publish()

    async def _catch_up(self) -> None:
        """Reload the resources that change znodes announced since the last ones processed."""
        self._stale = False
        try:
            changed, seen = await self._announced()
            await self._reload(changed)
        except _LostTrack as exc:
            log.info("reloading every ACL binding: %s", exc)
            await self._load_all(strict=False)
            return
        except BaseException:
            self._stale = True
            raise
        self._seen = seen

    async def _announced(self) -> tuple[set[AclResource], dict[PatternType, int]]:
        changed: set[AclResource] = set()
        seen = dict(self._seen)
        for pattern in PatternType:
            numbered = sorted((acl_change_sequence(n), n) for n in await self._changes(pattern))
            numbered = [(seq, name) for seq, name in numbered if seq >= 0]
            if not numbered:
                continue
            if numbered[-1][0] < seen[pattern]:
                raise _LostTrack(f"{self._paths.acl_changes(pattern)} was created anew")
            fresh = [name for seq, name in numbered if seq > seen[pattern]]
            found = await _each(fresh, functools.partial(self._announcement, pattern))
            changed.update(r for r in found if r is not None)
            seen[pattern] = numbered[-1][0]
        return changed, seen

    async def _announcement(self, pattern: PatternType, name: str) -> AclResource | None:
        path = f"{self._paths.acl_changes(pattern)}/{name}"
        try:
            data, _ = await self._zk.call(
                lambda c: c.get_async(path), what="read an ACL change", expect=(NoNodeError,)
            )
        except NoNodeError:
            raise _LostTrack(f"{path} was deleted before this replica read it") from None
        try:
            return decode_acl_change(bytes(data), pattern, f"ACL change {path}")
        except CorruptZnode as exc:
            raise _LostTrack(exc.message) from None

    async def _reload(self, resources: Iterable[AclResource]) -> None:
        """Read ``resources`` again into the cache (lock held)."""
        wanted = list(dict.fromkeys(resources))
        if not wanted:
            return
        located = list(zip(wanted, await _each(wanted, self._znode), strict=True))
        read = await _each(located, functools.partial(self._read_bindings, strict=False))
        for (resource, _), bindings in zip(located, read, strict=True):
            if bindings:
                self._cache[resource] = bindings
            else:
                self._cache.pop(resource, None)
        self._publish()

    def _publish(self) -> None:
        self._snapshot = tuple(b for bindings in self._cache.values() for b in bindings)

    async def _read_bindings(self, located: tuple[AclResource, str], *, strict: bool) -> Bindings:
        resource, path = located
        try:
            stored = await self._read(resource, path)
        except (CorruptZnode, NewerFormat) as exc:  # at start the start fails; later, it is logged
            if strict:
                raise
            log.error("%s Keeping the bindings of %s read before.", exc.message, resource)
            return self._cache.get(resource, ())
        return stored[0].bindings if stored is not None else ()

    async def _read(self, resource: AclResource, path: str) -> tuple[AclEntries, int] | None:
        """What the znode holds, and its version; None if it does not exist."""
        try:
            data, stat = await self._zk.call(
                lambda c: c.get_async(path), what="read ACL bindings", expect=(NoNodeError,)
            )
        except NoNodeError:
            return None
        entries = decode_acls(bytes(data), resource, f"ACL znode {path}")
        if entries.foreign:
            log.warning("%s holds %d ACL entries brokergate does not model", path, len(entries.foreign))
        return entries, stat.version

    async def _changes(self, pattern: PatternType) -> list[str]:
        """The change znodes of ``pattern``, watched; until the first, a watch on their parent."""
        path = self._paths.acl_changes(pattern)
        while True:
            try:
                return list(
                    await self._zk.call(
                        lambda c: c.get_children_async(path, watch=self._watch),
                        what="list ACL changes",
                        expect=(NoNodeError,),
                    )
                )
            except NoNodeError:
                pass
            stat = await self._zk.call(
                lambda c: c.exists_async(path, watch=self._watch), what="watch for ACL changes"
            )
            if stat is None:
                return []

    async def _children(self, path: str) -> list[str]:
        try:
            return list(
                await self._zk.call(
                    lambda c: c.get_children_async(path), what="list ACL znodes", expect=(NoNodeError,)
                )
            )
        except NoNodeError:
            return []

    async def _znode(self, resource: AclResource) -> str:
        """The znode of ``resource``'s bindings: ours, or one Kafka named its way."""
        if resource in self._odd_znodes:
            return self._odd_znodes[resource]
        pattern, resource_type, name = resource.pattern_type, resource.resource_type, resource.name
        kafkas = self._paths.kafka_acl_resource(pattern, resource_type, name)
        if kafkas is not None and await self._zk.exists(kafkas, what="look up ACL bindings") is not None:
            self._odd_znodes[resource] = kafkas
            return kafkas
        return self._paths.acl_resource(pattern, resource_type, name)

    # --- writes ----------------------------------------------------------------------

    async def add(self, bindings: Sequence[AclBinding]) -> None:
        """Store ``bindings`` (one already stored stays stored once)."""
        wanted: dict[AclResource, dict[AclBinding, None]] = {}
        for b in bindings:
            if not b.resource_name:
                raise InvalidPayload("An ACL binding needs a resource name.")
            wanted.setdefault(AclResource.of(b), {})[b] = None

        def adding(new: Iterable[AclBinding]) -> Edit:
            return lambda stored: tuple(dict.fromkeys((*stored, *new)))

        await _each(list(wanted.items()), lambda item: self._rewrite(item[0], adding(item[1])))
        async with self._lock:
            await self._reload(wanted)

    async def remove(self, selector: AclFilter) -> list[AclBinding]:
        """Remove every binding ``selector`` selects; return them."""
        async with self._lock:
            await self._sync(always=True)  # include what another replica stored a moment ago
            candidates = [r for r, bs in self._cache.items() if any(selector.selects(b) for b in bs)]

        def removing(stored: Bindings) -> Bindings:
            return tuple(b for b in stored if not selector.selects(b))

        before = await _each(candidates, lambda r: self._rewrite(r, removing))
        async with self._lock:
            await self._reload(candidates)
        return [b for bindings in before for b in bindings if selector.selects(b)]

    async def _rewrite(self, resource: AclResource, edit: Edit) -> Bindings:
        """Apply ``edit`` to the bindings of ``resource``, compare-and-set; the bindings it found."""
        async with self._turn(resource):
            return await self._compare_and_set(resource, edit)

    @contextlib.asynccontextmanager
    async def _turn(self, resource: AclResource) -> AsyncIterator[None]:
        lock, users = self._turns.get(resource, (asyncio.Lock(), 0))
        self._turns[resource] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[resource]
            if users == 1:
                del self._turns[resource]
            else:
                self._turns[resource] = (lock, users - 1)

    async def _compare_and_set(self, resource: AclResource, edit: Edit) -> Bindings:
        path = await self._znode(resource)
        for attempt in range(_ATTEMPTS):
            if attempt:
                await asyncio.sleep(random.uniform(0, _BACKOFF_S * attempt))
            stored = await self._read(resource, path)
            entries, version = stored if stored is not None else (AclEntries(()), None)
            bindings = edit(entries.bindings)
            if bindings == entries.bindings:
                return entries.bindings
            data = encode_acls(bindings, entries.foreign) if bindings or entries.foreign else None
            if data is not None and len(data) > MAX_ZNODE_BYTES:
                raise InvalidPayload(f"The ACL bindings of {resource} are too many to store in ZooKeeper.")
            results = await self._zk.call(
                functools.partial(self._transaction, resource, path, data, version), what="store ACL bindings"
            )
            failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if not failed:
                return entries.bindings
            if isinstance(failed[0], NoNodeError):  # the first binding of its kind, or a tool removed it
                await self._ensure_parents(resource)
            elif not isinstance(failed[0], BadVersionError | NodeExistsError):
                raise BackendError(
                    f"ZooKeeper refused to store the ACL bindings of {resource}: {type(failed[0]).__name__}."
                )
        raise BackendUnavailable(f"Storing the ACL bindings of {resource} kept meeting concurrent changes.")

    def _transaction(
        self, resource: AclResource, path: str, data: bytes | None, version: int | None, client: KazooClient
    ) -> IAsyncResult:
        """Send one ``multi``: create, replace or delete the resource's znode, and announce it."""
        txn = client.transaction()
        if version is None:
            txn.create(path, data or b"")
        elif data is None:
            txn.delete(path, version)
        else:
            txn.set_data(path, data, version)
        txn.create(
            self._paths.acl_change_prefix(resource.pattern_type), encode_acl_change(resource), sequence=True
        )
        return txn.commit_async()

    async def _ensure_parents(self, resource: AclResource) -> None:
        pattern = resource.pattern_type
        for path in (self._paths.acl_type(pattern, resource.resource_type), self._paths.acl_changes(pattern)):
            await self._zk.ensure_path(path, what="create the ACL layout")

    # --- change znodes ---------------------------------------------------------------

    async def _purge_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_purge or not self._may_purge():
            return
        self._next_purge = now + _PURGE_INTERVAL_S
        purged = await self.purge_changes(time.time() * 1000 - CHANGE_RETENTION_MS)
        if purged:
            log.info(
                "purged %d ACL change znodes older than %d minutes", purged, CHANGE_RETENTION_MS // 60_000
            )

    async def purge_changes(self, created_before_ms: float) -> int:
        """Delete the change znodes created before ``created_before_ms`` (ZooKeeper's clock, ms since
        the epoch), oldest first, at most ``_PURGE_BATCH`` per path; return how many went."""
        purged = 0
        for pattern in PatternType:
            parent = self._paths.acl_changes(pattern)
            numbered = sorted((acl_change_sequence(n), n) for n in await self._children(parent))
            for _, name in [(seq, name) for seq, name in numbered if seq >= 0][:_PURGE_BATCH]:
                path = f"{parent}/{name}"
                stat = await self._zk.exists(path, what="look up an ACL change")
                if stat is None:
                    continue
                if stat.ctime >= created_before_ms:
                    break  # sequence order is creation order: the rest are younger
                if await self._delete(path):
                    purged += 1
        return purged

    async def _delete(self, path: str) -> bool:
        try:
            await self._zk.call(
                lambda c: c.delete_async(path), what="purge an ACL change", expect=(NoNodeError,)
            )
        except NoNodeError:  # purged by a replica that led a moment ago
            return False
        return True


async def _each(items: Sequence[T], fn: Callable[[T], Awaitable[R]]) -> list[R]:
    """``fn`` over ``items`` concurrently, at most ``_IN_FLIGHT`` at a time, results in order."""
    results: list[R] = []
    for start in range(0, len(items), _IN_FLIGHT):
        results.extend(await asyncio.gather(*(fn(item) for item in items[start : start + _IN_FLIGHT])))
    return results
