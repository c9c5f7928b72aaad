"""Committed offsets in ZooKeeper, in Kafka's classic layout, with fenced atomic commits.

An offset lives at ``/consumers/{group}/offsets/{topic}/{partition}`` as ASCII
digits, where Kafka's ZooKeeper-era consumers and tools keep it.

A ``commit`` call is one ZooKeeper transaction (``multi``): all its offsets
are stored or none. A commit by a group member is fenced exactly like the
embedded coordinator's: the member must own every partition in the current
generation, since no later than the generation it read in. The fence is part
of the transaction: it starts with a version check of the state znode the
ownership was validated against, so a rebalance published between the
validation and the write makes the transaction fail, and the commit is
validated again against the new generation.

A transaction must say whether each offset znode is created or overwritten;
``_known`` remembers which exist, so a steady stream of commits costs one
read of the state (when fenced) and one ``multi``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Final

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.interfaces import IAsyncResult

from service.core.fencing import fence
from service.core.models import TopicPartition
from service.core.rules import check_group, check_offsets, valid_group, valid_offset_key
from service.errors import BackendError, BackendUnavailable, InvalidPayload

from .codec import decode_offset, decode_partition, encode_offset
from .groups import MAX_ZNODE_BYTES, GroupStore
from .paths import ZnodePaths, decode_name
from .session import ZooKeeperSession

log = logging.getLogger(__name__)

# Rebalances are rare; a commit losing this many races in a row is better retried by the client.
_COMMIT_ATTEMPTS: Final = 10
_KNOWN_LIMIT: Final = 100_000

Entries = list[tuple[TopicPartition, int]]
Writes = list[tuple[str, bytes]]  # (znode path, data)


class OffsetStore:
    """Commits and reads committed offsets.

    Collaborators: ``ZooKeeperSession`` for requests, ``GroupStore`` for the
    generation a fenced commit is checked against.
    """

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths, groups: GroupStore) -> None:
        self._zk = zk
        self._paths = paths
        self._groups = groups
        self._known: set[str] = set()  # offset znodes known to exist

    async def commit(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str | None = None,
        generation: int | None = None,
    ) -> None:
        """Store every offset or none, fenced by ownership when ``member_id`` is given."""
        check_group(group)
        entries = check_offsets(offsets)
        if not entries:
            return
        writes = [(self._paths.offset(group, tp), encode_offset(off)) for tp, off in entries]
        size = sum(len(path.encode("utf-8")) + len(data) + 32 for path, data in writes)
        if size > MAX_ZNODE_BYTES // 2:
            raise InvalidPayload(f"Too many offsets in one commit ({len(entries)}); commit them in parts.")
        for _ in range(_COMMIT_ATTEMPTS):
            checked: int | None = None
            if member_id is not None:
                state = await self._groups.state(group)
                fence(group, state, entries, member_id, generation)
                checked = state.version  # never ABSENT_VERSION: an absent state owns nothing
            missing = await self._missing(group, entries, writes)
            results = await self._zk.call(
                functools.partial(self._transaction, group, writes, checked, missing), what="commit offsets"
            )
            failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if not failed:
                self._remember(path for path, _ in writes)
                return
            if checked is not None and isinstance(results[0], BadVersionError | NoNodeError):
                continue  # a rebalance got in between: validate against the new generation
            if isinstance(failed[0], NodeExistsError | NoNodeError):
                # Another writer created, or a tool deleted, an offset znode: look again.
                self._known.difference_update(path for path, _ in writes)
                continue
            raise BackendError(
                f"ZooKeeper refused the commit of group {group!r}: {type(failed[0]).__name__}."
            )
        raise BackendUnavailable(f"The commit of group {group!r} kept meeting concurrent changes; retry.")

    def _transaction(
        self, group: str, writes: Writes, checked: int | None, missing: set[str], client: KazooClient
    ) -> IAsyncResult:
        """Send one ``multi``: the fence's version check, then a create or a set per offset."""
        txn = client.transaction()
        if checked is not None:
            txn.check(self._paths.state(group), checked)
        for path, data in writes:
            if path in missing:
                txn.create(path, data)
            else:
                txn.set_data(path, data)
        return txn.commit_async()

    async def _missing(self, group: str, entries: Entries, writes: Writes) -> set[str]:
        """The offset znodes of this commit that do not exist yet; their parents are made to exist."""
        unknown = [
            (tp, path) for (tp, _), (path, _) in zip(entries, writes, strict=True) if path not in self._known
        ]
        if not unknown:
            return set()
        stats = await asyncio.gather(
            *(self._zk.exists(path, what="look up an offset") for _, path in unknown)
        )
        missing = {path for (_, path), stat in zip(unknown, stats, strict=True) if stat is None}
        self._remember(path for (_, path), stat in zip(unknown, stats, strict=True) if stat is not None)
        parents = {self._paths.topic_offsets(group, tp.topic) for tp, path in unknown if path in missing}
        await asyncio.gather(*(self._zk.ensure_path(p, what="create offset parents") for p in parents))
        return missing

    def _remember(self, paths: Iterable[str]) -> None:
        if len(self._known) > _KNOWN_LIMIT:  # a bound, not an LRU: forgetting only costs an exists()
            self._known.clear()
        self._known.update(paths)

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of ``group`` (all of them when ``partitions`` is None)."""
        if not valid_group(group):
            return {}
        if partitions is None:
            located = await self._all_partitions(group)
        else:
            located = [
                (tp, self._paths.offset(group, tp))
                for tp in dict.fromkeys(partitions)
                if valid_offset_key(tp)
            ]
        values = await asyncio.gather(*(self._read(path) for _, path in located))
        return {tp: off for (tp, _), off in zip(located, values, strict=True) if off is not None}

    async def _read(self, path: str) -> int | None:
        try:
            data, _ = await self._zk.call(
                lambda c: c.get_async(path), what="read an offset", expect=(NoNodeError,)
            )
        except NoNodeError:
            return None
        self._remember((path,))
        offset = decode_offset(data)
        if offset is None:
            log.warning("ignoring %s: %r is not an offset", path, bytes(data[:40]))
        return offset

    async def _children(self, path: str, what: str) -> list[str]:
        try:
            return list(
                await self._zk.call(lambda c: c.get_children_async(path), what=what, expect=(NoNodeError,))
            )
        except NoNodeError:
            return []

    async def _all_partitions(self, group: str) -> list[tuple[TopicPartition, str]]:
        """Every committed partition of ``group`` with its znode, as listed (another tool's names
        included, even those our encoding would spell differently)."""
        parent = self._paths.offsets(group)
        topics = await self._children(parent, "list committed topics")
        per_topic = await asyncio.gather(
            *(self._children(f"{parent}/{t}", "list committed partitions") for t in topics)
        )
        located: list[tuple[TopicPartition, str]] = []
        for znode, partitions in zip(topics, per_topic, strict=True):
            topic = decode_name(znode)
            for name in partitions:
                partition = decode_partition(name)
                if partition is not None:
                    located.append((TopicPartition(topic, partition), f"{parent}/{znode}/{name}"))
        return sorted(located)

    async def with_offsets(self) -> set[str]:
        """Groups with at least one committed offset (whoever wrote it: brokergate or a Kafka tool)."""
        groups = await self._children(self._paths.consumers, "list consumer groups")

        async def has_offsets(znode: str) -> bool:
            parent = self._paths.offsets_of_znode(znode)
            for topic in await self._children(parent, "list committed topics"):
                if await self._children(f"{parent}/{topic}", "list committed partitions"):
                    return True
            return False

        flags = await asyncio.gather(*(has_offsets(g) for g in groups))
        return {decode_name(g) for g, flag in zip(groups, flags, strict=True) if flag}
