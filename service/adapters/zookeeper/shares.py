"""Share-partition states in ZooKeeper: a znode each, written with compare-and-set transactions.

The delivery state of a partition in a share group is the znode
``/brokergate/share-groups/{group}/{topic}/{partition}`` (JSON, as
``share_states`` encodes it), and the znode's ``stat.version`` is the state's
version. A write of several partitions is one ZooKeeper transaction
(``multi``): a versioned ``setData`` for each state that exists, a ``create``
for each that does not (it fails if another replica created it first). Of two
replicas writing from the same versions exactly one wins, whole; the other
stores nothing and is told so. No cache: every replica reads what ZooKeeper
holds now.

A state is written in the form every version of the gateway reads: a row per
record in flight (``stored.record_rows``), as the previous version wrote it,
not the runs ``SharePartition.to_json`` gives; so replicas of the previous
version and this one share the states during a rolling update. Both forms are
read. The bounds on a state's size apply to what is written. Each state also
carries the layout's ``format`` (``ZOOKEEPER_FORMAT``), which the previous
version ignores; a state of a newer format is refused as ``NewerFormat``, and the
core never sees the field.

ZooKeeper counts a znode's version in 32 bits. A state at the last version
is deleted (checking that version) and created again in the same
transaction, starting over at 0, rather than passed to a negative version.

A ``create`` needs its parents: they are made to exist before the
transaction; should a delete remove them in between, the transaction fails
and is sent again. The limits on share groups and partitions are checked
against listings, only for writes that create a state: replicas creating at
once may pass a bound by as many as write at once, never by more.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Collection, Mapping
from typing import Any, Final, cast

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError
from kazoo.interfaces import IAsyncResult

from service.core.models import TopicPartition
from service.core.rules import valid_group
from service.core.shares.stored import StoredState, record_rows
from service.errors import BackendError, BackendUnavailable, ShareStateTooLarge

from ..format_versions import ZOOKEEPER_FORMAT, check_version
from ..share_states import (
    ABSENT,
    DECODE_INLINE_BYTES,
    ShareStoreLimits,
    ShareWrite,
    check_room,
    decode_states,
    encode_writes,
    stored_partitions,
)
from .codec import decode_partition
from .groups import MAX_ZNODE_BYTES
from .paths import ZnodePaths, decode_name, encode_name
from .session import ZooKeeperSession

# The last version ZooKeeper counts to before its 32-bit counter turns negative.
_LAST_VERSION: Final = (1 << 31) - 1
# A delete of the group between making a create's parents and sending it, this many times in a row.
_STORE_ATTEMPTS: Final = 10
_OP_OVERHEAD: Final = 32  # what one operation of a transaction costs beside its path and data

Located = list[tuple[TopicPartition, str]]  # (partition, znode path)
_RUNS_FORM: Final = frozenset({"start", "end", "runs"})
_MALFORMED: Final = (KeyError, TypeError, ValueError, IndexError)


class ShareStateStore:
    """Reads, compare-and-set writes and deletes of share-partition states.

    Collaborators: ``ZooKeeperSession`` for requests, ``ZnodePaths`` for where the states are,
    ``share_states`` for what a coordinator accepts and how a state is stored.
    """

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths, limits: ShareStoreLimits) -> None:
        self._zk = zk
        self._paths = paths
        self._limits = limits

    # --- reading -------------------------------------------------------------------------

    async def states(
        self, group: str, tps: Collection[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[StoredState, int]]:
        if not valid_group(group):
            return {}
        wanted = stored_partitions(tps)
        located = (
            await self._all(group)
            if wanted is None
            else [(tp, self._paths.share_state(group, tp)) for tp in wanted]
        )
        read = await asyncio.gather(*(self._read(path) for _, path in located))
        found = [(tp, *got) for (tp, _), got in zip(located, read, strict=True) if got is not None]
        if sum(len(data) for _, data, _ in found) > DECODE_INLINE_BYTES:
            states = await asyncio.to_thread(decode_states, group, found)
        else:
            states = decode_states(group, found)
        for tp, (state, _) in states.items():
            where = f"the share state of partition {tp.topic}-{tp.partition} of group {group!r} in ZooKeeper"
            # the node's own key, beside the wire format's
            check_version(where, cast("dict[str, Any]", state).pop("format", 1), ZOOKEEPER_FORMAT)
        return states

    async def _read(self, path: str) -> tuple[bytes, int] | None:
        try:
            data, stat = await self._zk.call(
                lambda c: c.get_async(path), what="read a share state", expect=(NoNodeError,)
            )
        except NoNodeError:
            return None
        return bytes(data), stat.version

    async def groups(self) -> list[str]:
        """Groups with at least one state, sorted (a group znode a delete is emptying has none)."""
        znodes = await self._children(self._paths.share_groups, "list share groups")

        async def has_states(znode: str) -> bool:
            parent = f"{self._paths.share_groups}/{znode}"
            for topic in await self._children(parent, "list share topics"):
                if await self._children(f"{parent}/{topic}", "list share partitions"):
                    return True
            return False

        flags = await asyncio.gather(*(has_states(g) for g in znodes))
        return sorted(decode_name(g) for g, flag in zip(znodes, flags, strict=True) if flag)

    # --- writing -------------------------------------------------------------------------

    async def store(self, group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]]) -> bool:
        """One transaction for every state, or nothing stored (see the module's docstring)."""
        writes = encode_writes(
            group, {tp: (_with_format(_stored_form(s)), v) for tp, (s, v) in updates.items()}, self._limits
        )
        if not writes:
            return True
        paths = [self._paths.share_state(group, tp) for tp, _, _ in writes]
        size = sum(
            len(p.encode()) + len(data) + _OP_OVERHEAD for p, (_, data, _) in zip(paths, writes, strict=True)
        )
        if size > MAX_ZNODE_BYTES:
            raise ShareStateTooLarge(
                f"The states of {len(writes)} partitions of share group {group!r} make a ZooKeeper "
                f"request of {size} bytes, more than it takes; store them in several."
            )
        if any(version > _LAST_VERSION for _, _, version in writes):
            return False  # no znode is at a version past ZooKeeper's counter
        creates = [tp for tp, _, version in writes if version == ABSENT]
        if creates:
            await self._check_room(group, len(creates))
        for _ in range(_STORE_ATTEMPTS):
            parents = {self._paths.share_topic(group, tp.topic) for tp in creates}
            await asyncio.gather(
                *(self._zk.ensure_path(p, what="create share state parents") for p in parents)
            )
            results = await self._zk.call(
                functools.partial(self._transaction, writes, paths), what="store share states"
            )
            failed = [
                (i, r)
                for i, r in enumerate(results)
                if isinstance(r, Exception) and not isinstance(r, RolledBackError)
            ]
            if not failed:
                return True
            i, error = failed[0]
            if isinstance(error, BadVersionError | NodeExistsError):
                return False  # another writer got there first
            if isinstance(error, NoNodeError):
                if _op_version(writes, i) != ABSENT:
                    return False  # deleted since it was read: not the version given
                continue  # a create whose parents a delete removed: make them again
            raise BackendError(
                f"ZooKeeper refused the share states of group {group!r}: {type(error).__name__}."
            )
        raise BackendUnavailable(f"The share states of group {group!r} kept meeting deletes; retry.")

    @staticmethod
    def _transaction(writes: list[ShareWrite], paths: list[str], client: KazooClient) -> IAsyncResult:
        """Send one ``multi``: per state a create, a versioned set, or (at the last version) a
        versioned delete and a create."""
        txn = client.transaction()
        for path, (_, data, version) in zip(paths, writes, strict=True):
            if version == ABSENT:
                txn.create(path, data)
            elif version == _LAST_VERSION:
                txn.delete(path, version)
                txn.create(path, data)
            else:
                txn.set_data(path, data, version)
        return txn.commit_async()

    async def _check_room(self, group: str, new: int) -> None:
        znodes = await self._children(self._paths.share_groups, "list share groups")
        exists = encode_name(group) in znodes
        partitions = len(await self._all(group)) if exists else 0
        check_room(
            group, new, groups=len(znodes), group_exists=exists, partitions=partitions, limits=self._limits
        )

    # --- deleting ------------------------------------------------------------------------

    async def delete(self, group: str, tps: Collection[TopicPartition] | None) -> None:
        """Delete the states, then the group's and topics' znodes they leave empty."""
        if not valid_group(group):
            return
        wanted = stored_partitions(tps)
        if wanted is None:
            topics, located = await self._listing(group)
        else:
            located = [(tp, self._paths.share_state(group, tp)) for tp in wanted]
            topics = {self._paths.share_topic(group, tp.topic) for tp in wanted}
        await asyncio.gather(*(self._delete(path) for _, path in located))
        await asyncio.gather(*(self._delete(path) for path in topics))
        await self._delete(self._paths.share_group(group))

    async def _delete(self, path: str) -> None:
        """Delete ``path`` if it is there and empty: a parent a concurrent write fills stays."""
        try:
            await self._zk.call(
                lambda c: c.delete_async(path),
                what="delete a share state",
                expect=(NoNodeError, NotEmptyError),
            )
        except (NoNodeError, NotEmptyError):
            pass

    # --- listing -------------------------------------------------------------------------

    async def _children(self, path: str, what: str) -> list[str]:
        try:
            return list(
                await self._zk.call(lambda c: c.get_children_async(path), what=what, expect=(NoNodeError,))
            )
        except NoNodeError:
            return []

    async def _all(self, group: str) -> Located:
        """Every partition of ``group`` with a state, and its znode."""
        _, located = await self._listing(group)
        return located

    async def _listing(self, group: str) -> tuple[set[str], Located]:
        """The topic znodes of ``group`` (empty ones too), and every partition with a state."""
        parent = self._paths.share_group(group)
        topics = await self._children(parent, "list share topics")
        per_topic = await asyncio.gather(
            *(self._children(f"{parent}/{t}", "list share partitions") for t in topics)
        )
        located: Located = []
        for znode, partitions in zip(topics, per_topic, strict=True):
            topic = decode_name(znode)
            for name in partitions:
                partition = decode_partition(name)
                if partition is not None:
                    located.append((TopicPartition(topic, partition), f"{parent}/{znode}/{name}"))
        return {f"{parent}/{t}" for t in topics}, sorted(located)


def _stored_form(state: Any) -> Any:
    """What is written for ``state``: a share-partition's state in runs (``SharePartition.to_json``)
    as the previous version stored it, a row per record (``record_rows``), so that replicas of
    both versions read it during a rolling update; anything else as given."""
    if isinstance(state, Mapping) and state.keys() == _RUNS_FORM:
        try:
            return record_rows(state)
        except _MALFORMED:
            pass  # not runs after all: stored as given, as the port stores any JSON object
    return state


def _with_format(state: Any) -> Any:
    """``state`` marked with the layout's format (anything but an object is refused as given)."""
    return {**state, "format": ZOOKEEPER_FORMAT} if isinstance(state, Mapping) else state


def _op_version(writes: list[ShareWrite], op: int) -> int:
    """The version given for the state whose operation is the ``op``-th of the transaction."""
    for _, _, version in writes:
        ops = 2 if version == _LAST_VERSION else 1
        if op < ops:
            return version
        op -= ops
    raise AssertionError("an operation past the transaction's end")
