"""The three ports the core talks through, the stores of the optional quotas and of group offsets
kept in the log, and the schemas. The ``Coordinator`` is served as one store, and read by the
core through its one-job parts: ``ConsumerGroups`` (``Membership`` and ``Offsets``),
``ShareStates``, ``AclStore`` and ``Locks``.

Each port has an embedded adapter (one process, nothing to install) and a
distributed one (Kafka, ZooKeeper, Redis). The core only ever sees these
protocols; ``service.server.backends`` picks the adapters from the settings.
``SchemaResolver`` is what producing and consuming with schemas need of a
registry: the embedded one (``service.core.schemas.registry``) or an external one.

Every port is started and stopped by the application lifespan; ``stop()`` is
idempotent. Adapters raise ``service.errors`` exceptions only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol, runtime_checkable

from .acl import AclBinding, AclFilter
from .buckets import Charge
from .models import (
    Broker,
    GroupState,
    IdempotentResult,
    InstanceState,
    Member,
    NewRecord,
    PartitionData,
    TopicInfo,
    TopicPartition,
)
from .push.ports import PushStore
from .schemas.model import ParsedSchema, Schema
from .shares.stored import StateChange, StoredState

# When an append is durable: fsync before it is acknowledged ("always"), on an interval, or when
# the OS writes it back ("never"). The embedded log keeps to it; a Kafka log has its brokers' own.
FlushPolicy = Literal["always", "interval", "never"]


@runtime_checkable
class Log(Protocol):
    """Where records live: topics, partitions, offsets.

    ``append`` returns only once the records are acknowledged (durable per
    the flush policy).
    ``fetch`` is stateless: it reads from the given positions and may wait up
    to ``max_wait_ms`` for at least ``min_bytes`` to arrive. It always returns
    at least one record for a partition that has one at its position, even if
    that record alone exceeds ``max_bytes``.
    """

    @property
    def cluster_id(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def brokers(self) -> list[Broker]: ...

    async def list_topics(self) -> list[str]: ...

    async def describe_topic(self, topic: str) -> TopicInfo:
        """The metadata of ``topic``; raise ``TopicNotFound`` if it is absent."""
        ...

    async def create_topic(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        """Create ``topic`` and return its metadata; raise ``TopicExists`` if it is present."""
        ...

    async def delete_topic(self, topic: str) -> None: ...

    async def add_partitions(self, topic: str, total: int) -> TopicInfo:
        """Grow ``topic`` to ``total`` partitions (never shrinks)."""
        ...

    async def append(self, tp: TopicPartition, records: Sequence[NewRecord]) -> Sequence[int]:
        """Append and return each record's offset, in order.

        Offsets are ascending; on the embedded log they are also consecutive (a
        ``range``), while on a shared Kafka cluster another producer's batch may
        land between two batches of one call.
        """
        ...

    async def fetch(
        self,
        positions: Mapping[TopicPartition, int],
        *,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int = 1,
        max_records: int | None = None,
    ) -> dict[TopicPartition, PartitionData]:
        """Records from each position on, the partitions in the order given sharing one
        ``max_bytes`` (the first record always delivered) and, unless None, ``max_records`` in
        all; long-polls until ``min_bytes`` arrive, ``max_records`` did, or ``max_wait_ms`` passed."""
        ...

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        """(beginning offset, end offset): the first stored and the next to be written."""
        ...

    async def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        """First offset whose timestamp is >= ``timestamp_ms``; None if there is none."""
        ...


class Membership(Protocol):
    """Consumer groups' members and generations, shared by every replica.

    The core computes assignments (``service.core.groups``); the store keeps them with
    compare-and-set (``publish``) so that rebalances through several replicas cannot interleave.
    """

    def is_leader(self) -> bool:
        """Whether this replica runs the group-wide duties (expiry, rebalance on metadata change)."""
        ...

    async def coordinated_groups(self) -> list[str]:
        """Groups the gateway coordinates, sorted: every group with a member, and perhaps some that
        had one or a published generation; never one of which only committed offsets are stored
        (a native consumers' group on a Kafka log). What the leader's refresh walks."""
        ...

    async def join(self, group: str, member: Member) -> None:
        """Add or replace a member."""
        ...

    async def leave(self, group: str, member_id: str) -> bool: ...

    async def members(self, group: str) -> dict[str, Member]: ...

    def membership_version(self) -> int | None:
        """A number that changes whenever a member joins or leaves any group, or a generation is
        published, if every such change goes through this object (one process); None when members
        may change where this replica does not see it (another replica, a session that ended):
        then the leader's refresh looks at every group each time."""
        ...

    async def state(self, group: str) -> GroupState:
        """The current generation (generation 0, empty, if the group has none)."""
        ...

    async def publish(self, group: str, state: GroupState, *, expected_version: int) -> bool:
        """Store ``state`` if the stored version is still ``expected_version``."""
        ...

    def watch_state(self, group: str, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` once, in the event loop, when the group's generation is next
        published through another replica (or may have been); any request sent after this call
        sees the state before that change. A coordinator of one process does nothing: the core
        announces the publishes made through it."""
        ...


class Offsets(Protocol):
    """Consumer groups' committed offsets. ``commit`` is atomic per call and fenced: with a
    ``member_id`` it is refused (``IllegalState``) unless that member owns every partition in the
    current generation since at least ``generation``."""

    async def commit(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str | None = None,
        generation: int | None = None,
    ) -> None:
        """Store every offset or none. Entries ``rules.check_offsets`` refuses, and a commit too
        large for the store to write at once, are refused with ``InvalidPayload``.

        With a ``member_id``, refused with ``IllegalState`` unless ``fencing.fence`` passes against
        the stored group state, checked atomically with the write. Without one the commit is not
        fenced here: the caller has decided who may commit (``ConsumerService`` lets only a manually
        assigned instance commit outside the membership, and only its assigned partitions, with
        ``fencing.fence_assigned``)."""
        ...

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of ``group`` (all of them when ``partitions`` is None)."""
        ...


class ConsumerGroups(Membership, Offsets, Protocol):
    """Consumer groups whole: members, generations and committed offsets (the offsets may be kept
    apart, in the log's own group coordinator: ``GroupOffsets``)."""

    async def groups(self) -> list[str]:
        """Groups with members or committed offsets, sorted; with a Kafka log, every consumer
        group on the cluster (native consumers' too)."""
        ...


class ShareStates(Protocol):
    """The delivery state of each share-partition, shared by every replica, in the wire format of
    ``shares.stored``: what an adapter writes and reads, as JSON, without the share-group logic."""

    async def share_states(
        self, group: str, tps: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[StoredState, int]]:
        """The stored state (``stored.StoredState``, of ``SharePartition.to_json``; a new copy) and its
        version of each partition of ``tps`` that has one; every such partition of ``group`` when
        ``tps`` is None. A state and its version are read together; several partitions need not
        be read at one instant (the versions make the next write safe)."""
        ...

    async def store_share_states(
        self, group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]]
    ) -> bool:
        """Compare-and-set of several partitions at once: store every new state only if each
        partition's stored version is still the one given (-1: nothing stored yet), all or none.

        True once the states are durable (fsynced; in a committed ZooKeeper transaction; empty
        ``updates`` store nothing and are True); False, having stored nothing, when a version is
        not the stored one (another replica wrote first: read again and decide again). Versions
        are opaque: pass back only one ``share_states`` gave. After a delete a partition's
        versions start over, so a writer still holding one from before may match a new state:
        delete (reset) only a share group without members, as Kafka does.

        Refused before anything is stored: ``InvalidPayload`` for a group, partition or version no
        coordinator stores; ``ShareStateTooLarge`` for a state over the coordinator's bound, or
        states over what one write stores together; ``IllegalState`` for a partition that would be
        new past the limit on share groups, or on partitions per share group."""
        ...

    async def share_versions(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The version of each partition of ``tps`` that has a stored state, without its state."""
        ...

    async def change_share_states(
        self, group: str, changes: Mapping[TopicPartition, tuple[StateChange, int]]
    ) -> dict[TopicPartition, int] | None:
        """``store_share_states`` of changes rather than whole states: each partition's change
        (``stored.StateChange``, of ``SharePartition.change_json``) made to its stored state, which must be at
        the version given (-1: nothing stored, the change made to an empty state), all or none,
        durable when it returns; refused as ``store_share_states`` (``InvalidPayload`` too for a
        change of a state that is not a share-partition's).

        None, having stored nothing, when a version is not the stored one. Else the new version of
        each partition where the coordinator gives it (of none: a caller then reads the states
        again): no other state is stored under a version given here until the state is deleted,
        so a caller may keep the state it stored and trust it while ``share_versions`` gives that
        version (and forget it when it deletes the state)."""
        ...

    async def share_groups(self) -> list[str]:
        """Groups with at least one stored share state, sorted."""
        ...

    async def delete_share_states(self, group: str, tps: Collection[TopicPartition] | None = None) -> None:
        """Forget the states of ``tps`` (every one of ``group`` when None): a share group's reset
        or deletion. Durable when it returns."""
        ...


class AclStore(Protocol):
    """ACL bindings, stored where every replica reads them, so that every replica decides alike."""

    async def acls(self) -> Sequence[AclBinding]:
        """Every ACL binding, as this replica last saw them (a change made through another
        replica shows within a second); each binding once. The same sequence object until the
        bindings change, so a caller may keep what it built from them while it is returned."""
        ...

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Store ``bindings`` durably (one already stored stays stored once)."""
        ...

    async def remove_acls(self, selector: AclFilter) -> list[AclBinding]:
        """Remove every binding ``selector`` selects; return them."""
        ...


class Locks(Protocol):
    """Named locks: one holder at a time among every replica that shares the store."""

    def lock(self, name: str, *, timeout_s: float = 10.0) -> AbstractAsyncContextManager[None]:
        """Hold the lock ``name`` for the ``async with`` block: no other holder, in this replica or
        another, is inside a block of the same name meanwhile. ``LockTimeout`` if it is not
        acquired within ``timeout_s``. A distributed lock is released when its holder's session
        ends (the replica died or was cut off past the session timeout), so a lock is never held
        by a replica that is gone; the holder should then expect its block to overlap another's."""
        ...

    async def contended(self, name: str) -> bool:
        """Whether a holder, or a contender, has the lock ``name`` now: a hint (it may change at
        once) that tells a caller with many locks to try which are worth waiting for, cheaply."""
        ...


@runtime_checkable
class Coordinator(ConsumerGroups, ShareStates, AclStore, Locks, PushStore, Protocol):
    """What the replicas share besides the log and the sessions, in one store (embedded, or
    ZooKeeper): consumer groups, share-partitions' states, ACL bindings, locks and push
    subscriptions. The core takes the one-job port it needs; an adapter serves them all and is
    started and stopped as one."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@runtime_checkable
class GroupOffsets(Protocol):
    """Consumer groups' committed offsets kept where the log keeps its own: Kafka's group
    coordinator, when the log is Kafka, so that Kafka's tools and native consumers see them.

    A ``Coordinator`` then keeps membership, generations and the commit fence, and this store
    the offsets (``service.adapters.split_offsets`` joins the two into one ``Coordinator``).
    Calls are unfenced: the caller has checked who may commit.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def commit(self, group: str, entries: Sequence[tuple[TopicPartition, int]]) -> None:
        """Store every offset of ``entries`` (already checked by ``rules.check_offsets``) or none;
        ``IllegalState`` when the store's own group membership refuses a commit from outside it."""
        ...

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of ``group`` (all of them when ``partitions`` is None)."""
        ...

    async def groups(self) -> Collection[str]:
        """Groups with committed offsets (or members of the store's own), by whoever committed:
        the gateway, native consumers, tools; possibly a few seconds old."""
        ...


@runtime_checkable
class Sessions(Protocol):
    """Per-consumer-instance state between requests.

    ``save`` is compare-and-set on ``InstanceState.version`` and bumps it on
    success, so two requests of one instance through two replicas can never
    both advance the same positions.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def create(self, state: InstanceState) -> None:
        """Store the new instance ``state``; raise ``ConsumerAlreadyExists`` if the instance exists."""
        ...

    async def load(self, group: str, name: str) -> InstanceState:
        """The stored state of instance ``name`` of ``group``; raise ``ConsumerInstanceNotFound`` if absent.

        Expiry is judged by the caller, which owns the clock.
        """
        ...

    async def save(self, state: InstanceState) -> bool:
        """Store ``state`` if the stored version is still ``state.version``; on success the new
        version is also set on ``state``."""
        ...

    async def touch(self, group: str, name: str, now_ms: int) -> None:
        """Renew the instance's lease."""
        ...

    async def delete(self, group: str, name: str) -> bool: ...

    async def instances(self, group: str | None = None) -> list[InstanceState]: ...

    async def count(self, group: str | None = None, *, owner: str | None = None) -> int:
        """How many instances are stored (in ``group``, or of ``owner``, if given), without loading
        them; one whose lease ran out may be counted until it is reaped."""
        ...

    async def expired(self, now_ms: int) -> list[tuple[str, str]]:
        """(group, name) of instances whose lease ran out before ``now_ms``."""
        ...

    async def claim(self, key: str, fingerprint: str, ttl_ms: int) -> IdempotentResult | None:
        """Claim an idempotency key atomically: None when this caller now owns it (the key then
        holds a pending claim for ``ttl_ms``); otherwise what the key holds."""
        ...

    async def fulfil(self, key: str, fingerprint: str, response: bytes, ttl_ms: int) -> None:
        """Store the response of the request that claimed ``key``, kept for ``ttl_ms``."""
        ...

    async def abandon(self, key: str, fingerprint: str) -> None:
        """Drop a pending claim (the request failed), so that a retry runs again."""
        ...


@runtime_checkable
class QuotaStore(Protocol):
    """Token buckets by name, shared by every replica that shares the store.

    Both calls refill each bucket first (``service.core.buckets.refill``) and
    are atomic over all the buckets they are given, so a client bucket and a
    topic bucket are never charged one without the other. A store that
    cannot answer raises ``BackendUnavailable``; ``Quotas`` then fails open.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def take(self, charges: Sequence[Charge]) -> list[float]:
        """The buckets' levels before this request; if they admit it (``buckets.admits``), every
        bucket has been debited its cost, otherwise none has been touched."""
        ...

    async def debit(self, charges: Sequence[Charge]) -> None:
        """Debit every bucket its cost unconditionally (bytes known only after a read)."""
        ...


@runtime_checkable
class SchemaResolver(Protocol):
    """The schemas producing and consuming need: ids for schemas and schemas for ids.

    Served by the embedded registry (``service.core.schemas.registry.SchemaRegistry``) or by an
    external Confluent-compatible one. Errors are the registry's (``service.errors``:
    ``SubjectNotFound``, ``VersionNotFound``, ``SchemaNotFound``, ``InvalidSchemaError``,
    ``IncompatibleSchema``, ``OperationNotPermitted``...).
    """

    async def register(self, subject: str, schema: Schema, *, normalize: bool = False) -> tuple[int, int]:
        """(schema id, version) of ``schema`` under ``subject``: the existing ones if it is
        registered there already, else a new version (the schema's id if the registry knows it)."""
        ...

    async def lookup(self, subject: str, schema: Schema) -> int | None:
        """The id of ``schema`` if it is a live version of ``subject``; None otherwise."""
        ...

    async def schema_by_id(self, schema_id: int) -> ParsedSchema:
        """The schema with this id, parsed (``SchemaNotFound`` if there is none)."""
        ...

    async def version(self, subject: str, version: int | Literal["latest"]) -> tuple[int, int, ParsedSchema]:
        """(schema id, version, parsed schema) of a live version of ``subject``."""
        ...
