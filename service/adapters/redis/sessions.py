"""The Redis ``Sessions``: consumer-instance state shared by every gateway replica.

``RedisSessions`` is the façade the core sees (``ConsumerService`` loads an
instance at the start of every request and saves it back with compare-and-set;
the reaper asks for the expired ones). It behaves exactly like
``EmbeddedSessions``, but the state lives in Redis, so an instance created
through one replica can be polled through another, and a replica can die
without losing an instance.

Collaborators, one job each:

- ``RedisConnection`` (``connection.py``): the client, bounded start, and the
  failure policy (``BackendUnavailable`` within a bounded time, never a hang);
- ``KeyLayout`` (``keys.py``): every key name;
- ``codec.py``: ``InstanceState`` to hash fields and back;
- ``scripts.py``: the Lua scripts that make create, save, touch and delete
  atomic in one round trip.

A poll costs two round trips here: ``load`` is one HMGET, ``save`` (or
``touch``) one EVALSHA. Abandoned instances clean themselves up: each hash
has a TTL of the instance timeout plus ``ttl_margin_ms``, renewed by every
save and touch, and the margin leaves a live replica's reaper the time to
remove the instance from its group first.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from typing import Any, Final, cast

from redis.asyncio import Redis

from service.core.acl import ANONYMOUS
from service.core.models import IdempotentResult, InstanceState
from service.errors import BackendError, ConsumerAlreadyExists, ConsumerInstanceNotFound, NewerFormat

from ..format_versions import REDIS_FORMAT
from ..lifecycle import Lifecycle
from . import keys
from .codec import decode_state, encode_state
from .connection import RedisConnection, RedisURL
from .keys import KeyLayout
from .scripts import ABANDON, CLAIM_FORMAT, CREATE, DELETE, PRUNE, SAVE, TOUCH, ScriptArg
from .security import RedisSecurity

__all__ = ["RedisSessions"]

DEFAULT_CONNECT_TIMEOUT_MS: Final = 2_000
DEFAULT_SOCKET_TIMEOUT_MS: Final = 2_000
DEFAULT_TTL_MARGIN_MS: Final = 60_000

# What load reads, in this order.
_LOAD_FIELDS: Final = (keys.VERSION, keys.SEEN, keys.STATE)

# redis-py types replies as text or bytes; with decode_responses off (its default) they are bytes.
Row = Sequence[bytes | str | None]


def _not_found(group: str, name: str) -> ConsumerInstanceNotFound:
    return ConsumerInstanceNotFound(group, name)


async def _load_many(redis: Redis, instance_keys: Sequence[str]) -> list[Row]:
    # One round trip for all of them; no transaction: each row is read atomically, and a
    # listing is a snapshot per instance, as the embedded store's is.
    async with redis.pipeline(transaction=False) as pipe:
        for key in instance_keys:
            pipe.hmget(key, _LOAD_FIELDS)
        rows: list[Row] = await pipe.execute()
    return rows


class RedisSessions(Lifecycle):
    """Consumer-instance state keyed by (group, instance name), in Redis, for any number of replicas.

    ``url`` is ``redis[s]://[[user]:password@]host[:port][/db]``; a malformed
    one raises ``ValueError`` here, an unreachable one ``BackendUnavailable``
    from ``start()``. ``key_prefix`` separates deployments sharing one
    database. ``security``: credentials and TLS files beyond the URL.
    """

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = keys.DEFAULT_PREFIX,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        socket_timeout_ms: int = DEFAULT_SOCKET_TIMEOUT_MS,
        ttl_margin_ms: int = DEFAULT_TTL_MARGIN_MS,
        security: RedisSecurity | None = None,
    ) -> None:
        super().__init__()  # the start/stop state
        self._conn = RedisConnection(
            RedisURL.parse(url),
            connect_timeout_ms=connect_timeout_ms,
            socket_timeout_ms=socket_timeout_ms,
            security=security,
        )
        self._keys = KeyLayout(key_prefix)
        self._margin_ms = ttl_margin_ms
        # Write tokens: unique across replicas (the uuid) and writes (the counter), so a retried
        # create or save can tell its own earlier write from another request's.
        self._writer = uuid.uuid4().hex
        self._writes = itertools.count()

    @property
    def url(self) -> str:
        """The server, without credentials."""
        return str(self._conn.url)

    @property
    def request_bound_s(self) -> float:
        """The longest any call waits for Redis before raising ``BackendUnavailable``."""
        return self._conn.request_bound_s

    async def _open(self) -> None:
        await self._conn.start()
        try:
            await self._claim_format()
        except BaseException:
            await self._conn.stop()
            raise

    async def _claim_format(self) -> None:
        """Check the layout's format marker, ``{prefix}format``, and raise it to this release's
        if lower: as ZooKeeper's (``zookeeper.format_marker``), the highest format of any release
        that started on these keys; a higher one than this release reads refuses the start."""
        key = self._keys.format
        found = await self._conn.run(lambda r: CLAIM_FORMAT(r, (key,), (REDIS_FORMAT,)))
        if found is None:
            return
        text = keys.decode(found)
        if not text.isdecimal():
            raise BackendError(f"Redis at {self._conn.url} holds {text!r} in {key}, where a format belongs.")
        if int(text) > REDIS_FORMAT:
            raise NewerFormat(f"the sessions in Redis at {self._conn.url} ({key})", int(text), REDIS_FORMAT)

    async def _close(self) -> None:
        """Close the connections; the instances stay in Redis."""
        await self._conn.stop()

    def _token(self) -> str:
        return f"{self._writer}:{next(self._writes)}"

    def _instance_keys(self, group: str, name: str) -> tuple[str, str, str]:
        """The three keys every writing script takes: the instance, the leases, its group."""
        k = self._keys
        return k.instance(group, name), k.leases, k.group(group)

    def _decode(self, group: str, name: str, row: Row) -> InstanceState | None:
        version, seen, body = row
        if version is None or seen is None or body is None:
            return None  # gone (expired, or deleted between a listing and this read)
        try:
            return decode_state(group, name, version, seen, body)
        except ValueError as exc:
            raise BackendError(f"{exc} (Redis at {self._conn.url}).") from exc

    def _write_args(self, state: InstanceState) -> tuple[ScriptArg, ...]:
        """The arguments of the CREATE and SAVE scripts, which store an instance alike."""
        return (
            state.version,
            state.last_seen_ms,
            state.config.instance_timeout_ms,
            self._margin_ms,
            self._keys.member(state.group, state.name),
            state.name,
            encode_state(state),
            self._token(),
        )

    # --- the port --------------------------------------------------------------------

    async def create(self, state: InstanceState) -> None:
        keys_: tuple[str, ...] = self._instance_keys(state.group, state.name)
        if state.owner != ANONYMOUS:  # the anonymous principal has no share to count
            keys_ = (*keys_, self._keys.owner(state.owner))
        args = self._write_args(state)
        if not await self._conn.run(lambda r: CREATE(r, keys_, args)):
            raise ConsumerAlreadyExists(
                f"Consumer instance {state.name!r} already exists in consumer group {state.group!r}."
            )

    async def load(self, group: str, name: str) -> InstanceState:
        """The stored state; ``ConsumerInstanceNotFound`` if there is none.

        Expiry is not checked here: the caller owns the clock and removes an
        expired instance from its group as well (``Instances.load`` (``service.core.consumers.instances``)).
        """
        key = self._keys.instance(group, name)
        row = await self._conn.run(lambda r: r.hmget(key, _LOAD_FIELDS))
        state = self._decode(group, name, row)
        if state is None:
            raise _not_found(group, name)
        return state

    async def save(self, state: InstanceState) -> bool:
        """Store ``state`` if the stored version is still ``state.version``; bump both on success.

        The lease never moves backwards: a ``touch`` that happened after this
        copy was loaded is kept. False if another save won or the instance is gone.
        """
        keys_ = self._instance_keys(state.group, state.name)
        args = self._write_args(state)
        version: int = await self._conn.run(lambda r: SAVE(r, keys_, args))
        if version < 0:
            return False
        state.version = version
        return True

    async def touch(self, group: str, name: str, now_ms: int) -> None:
        """Renew the lease; ``ConsumerInstanceNotFound`` if the instance is gone.

        Not a compare-and-set change: the version stays, so a concurrent
        request's save is not refused for it.
        """
        keys_ = self._instance_keys(group, name)
        args = (now_ms, self._margin_ms, self._keys.member(group, name), name)
        if not await self._conn.run(lambda r: TOUCH(r, keys_, args)):
            raise _not_found(group, name)

    async def delete(self, group: str, name: str) -> bool:
        """Remove the instance and its index entries; whether it existed."""
        keys_ = self._instance_keys(group, name)
        args = (self._keys.member(group, name), name)
        return bool(await self._conn.run(lambda r: DELETE(r, keys_, args)))

    async def count(self, group: str | None = None, *, owner: str | None = None) -> int:
        """One ZCARD of the leases, or one SCARD of the group's set (which may still name an
        instance whose hash expired by TTL, until ``instances`` or the reaper prunes it). Of an
        owner: its set, read and pruned of what is gone (two round trips, as many keys checked
        as it names: at most its share and what it deleted since)."""
        k = self._keys
        if owner is not None:
            return await self._count_owned(owner)
        if group is None:
            found = await self._conn.run(lambda r: r.zcard(k.leases))
        else:
            group_key = k.group(group)
            found = await self._conn.run(lambda r: r.scard(group_key))
        return int(cast("int", found))

    async def instances(self, group: str | None = None) -> list[InstanceState]:
        """The stored instances (of ``group`` only, if given), by group then name.

        A group's set may name instances whose hash expired by TTL; they are
        left out and pruned from the set. The leases are not pruned here: an
        expired lease is the reaper's cue to remove the instance from its group.
        """
        k = self._keys
        pairs: list[tuple[str, str]]
        if group is None:
            members = await self._conn.run(lambda r: r.zrange(k.leases, 0, -1))
            pairs = sorted(self._parse_member(m) for m in cast("list[bytes]", members))
        else:
            group_key = k.group(group)
            names = await self._conn.run(lambda r: r.smembers(group_key))
            pairs = sorted((group, keys.decode(n)) for n in cast("set[bytes]", names))
        if not pairs:
            return []
        instance_keys = [k.instance(g, n) for g, n in pairs]
        rows = await self._conn.run(lambda r: _load_many(r, instance_keys))
        found: list[InstanceState] = []
        gone: list[tuple[str, str]] = []
        for (g, n), row in zip(pairs, rows, strict=True):
            state = self._decode(g, n, row)
            if state is None:
                gone.append((g, n))
            else:
                found.append(state)
        if gone and group is not None:
            await self._prune(group, [n for _, n in gone])
        return found

    async def _count_owned(self, owner: str) -> int:
        owner_key = self._keys.owner(owner)
        members = [keys.decode(m) for m in await self._conn.run(lambda r: r.smembers(owner_key))]
        if not members:
            return 0
        prune_keys = [owner_key, *(self._keys.instance_of_member(m) for m in members)]
        removed = await self._conn.run(lambda r: PRUNE(r, prune_keys, members))
        return len(members) - int(removed)

    async def _prune(self, group: str, names: list[str]) -> None:
        prune_keys = [self._keys.group(group), *(self._keys.instance(group, n) for n in names)]
        await self._conn.run(lambda r: PRUNE(r, prune_keys, names))

    async def expired(self, now_ms: int) -> list[tuple[str, str]]:
        """(group, name) of the instances whose lease ran out before ``now_ms``.

        Includes instances whose hash already expired by TTL, so that the
        reaper still removes them from their groups (its ``delete`` then
        removes the lease).
        """
        leases = self._keys.leases
        members = await self._conn.run(lambda r: r.zrangebyscore(leases, "-inf", f"({now_ms}"))
        return sorted(self._parse_member(m) for m in cast("list[bytes]", members))

    def _parse_member(self, member: bytes) -> tuple[str, str]:
        try:
            return self._keys.parse_member(member)
        except ValueError as exc:
            raise BackendError(f"Redis at {self._conn.url} holds a foreign lease entry: {exc}.") from exc

    # --- idempotency keys --------------------------------------------------------------
    # One string per key: b"P" + fingerprint while the first request runs, then
    # b"D" + fingerprint + b"\n" + response. The pending claim is SET NX, so exactly one
    # request through any replica wins it.

    async def claim(self, key: str, fingerprint: str, ttl_ms: int) -> IdempotentResult | None:
        name = self._keys.idempotency(key)
        pending = b"P" + fingerprint.encode()

        async def op(r: Redis) -> Any:
            if await r.set(name, pending, nx=True, px=max(1, ttl_ms)):
                return None
            return await r.get(name)

        held = await self._conn.run(op)
        if held is None:
            return None
        return _idempotent_result(held)

    async def fulfil(self, key: str, fingerprint: str, response: bytes, ttl_ms: int) -> None:
        value = b"D" + fingerprint.encode() + b"\n" + response
        name = self._keys.idempotency(key)
        await self._conn.run(lambda r: r.set(name, value, px=max(1, ttl_ms)))

    async def abandon(self, key: str, fingerprint: str) -> None:
        keys_ = (self._keys.idempotency(key),)
        args = (b"P" + fingerprint.encode(),)
        await self._conn.run(lambda r: ABANDON(r, keys_, args))


def _idempotent_result(raw: bytes) -> IdempotentResult:
    if raw[:1] == b"P":
        return IdempotentResult(raw[1:].decode(), None)
    fingerprint, _, response = raw[1:].partition(b"\n")
    return IdempotentResult(fingerprint.decode(), response)
