"""ACL bindings in ZooKeeper, in Kafka's classic layout, cached by every replica.

The layout, under the chroot, as ZooKeeper-era Kafka keeps ACLs (``kafka-acls`` users
recognise it)::

    /kafka-acl/{Topic|Group|Cluster}/{name}                       LITERAL bindings of one resource
    /kafka-acl-extended/prefixed/{Topic|Group|Cluster}/{prefix}   PREFIXED bindings of one prefix
    /kafka-acl-changes/acl_changes_{seq}                          one per change: replicas reload

Each resource znode holds ``{"version":1,"acls":[{"principal":"User:alice",
"permissionType":"Allow","operation":"Read","host":"*"}, ...]}`` with Kafka's spellings, and
is updated with compare-and-set on its version, so replicas changing one resource at once
both land. A name becomes one znode name as group names do (``paths.encode_name``): where
Kafka's topic names never hold ``/``, group names and prefixes may, and are percent-encoded.

Every replica keeps all bindings in memory (``acls()`` asks ZooKeeper nothing), loaded at
start and again whenever a change node appears (a children watch on the changes path) or a
new session begins. Only the newest ``_KEEP_CHANGES`` change nodes are kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from service.core.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from service.errors import BackendError

from .paths import decode_name, encode_name
from .session import ZooKeeperSession

log = logging.getLogger(__name__)

LITERAL_ROOT: Final = "/kafka-acl"
PREFIXED_ROOT: Final = "/kafka-acl-extended/prefixed"
CHANGES: Final = "/kafka-acl-changes"
CHANGE_PREFIX: Final = "acl_changes_"
_KEEP_CHANGES: Final = 100
_ATTEMPTS: Final = 20  # compare-and-set rounds before giving up on a contended resource

_TYPES: Final = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster"}
_OPERATIONS: Final = {
    Operation.ALL: "All",
    Operation.READ: "Read",
    Operation.WRITE: "Write",
    Operation.CREATE: "Create",
    Operation.DELETE: "Delete",
    Operation.ALTER: "Alter",
    Operation.DESCRIBE: "Describe",
    Operation.CLUSTER_ACTION: "ClusterAction",
    Operation.DESCRIBE_CONFIGS: "DescribeConfigs",
    Operation.ALTER_CONFIGS: "AlterConfigs",
    Operation.IDEMPOTENT_WRITE: "IdempotentWrite",
}
_PERMISSIONS: Final = {Permission.ALLOW: "Allow", Permission.DENY: "Deny"}
_ROOTS: Final = {PatternType.LITERAL: LITERAL_ROOT, PatternType.PREFIXED: PREFIXED_ROOT}

Resource = tuple[ResourceType, PatternType, str]


def _entry(b: AclBinding) -> dict[str, str]:
    return {
        "principal": b.principal,
        "permissionType": _PERMISSIONS[b.permission],
        "operation": _OPERATIONS[b.operation],
        "host": b.host,
    }


def _binding(resource: Resource, entry: dict[str, Any]) -> AclBinding:
    rtype, pattern, name = resource
    operations = {v: k for k, v in _OPERATIONS.items()}
    permissions = {v: k for k, v in _PERMISSIONS.items()}
    return AclBinding(
        principal=str(entry["principal"]),
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern,
        operation=operations[entry["operation"]],
        permission=permissions[entry["permissionType"]],
        host=str(entry.get("host", "*")),
    )


def _encode(bindings: Iterable[AclBinding]) -> bytes:
    return json.dumps({"version": 1, "acls": [_entry(b) for b in bindings]}, ensure_ascii=True).encode()


def _decode(resource: Resource, data: bytes) -> list[AclBinding]:
    doc = json.loads(data)
    return [_binding(resource, entry) for entry in doc.get("acls", [])]


class AclStore:
    """The bindings of one deployment (a chroot), and this replica's copy of them."""

    def __init__(self, zk: ZooKeeperSession, chroot: str) -> None:
        self._zk = zk
        self._chroot = chroot.rstrip("/")
        self._cache: dict[AclBinding, None] = {}
        self._reloading: asyncio.Task[None] | None = None
        self._dirty = False

    def _path(self, resource: Resource) -> str:
        rtype, pattern, name = resource
        return f"{self._chroot}{_ROOTS[pattern]}/{_TYPES[rtype]}/{encode_name(name)}"

    @property
    def _changes(self) -> str:
        return self._chroot + CHANGES

    def cached(self) -> list[AclBinding]:
        return list(self._cache)

    # --- reading, and watching for changes --------------------------------------------

    async def load(self) -> None:
        """Read every binding, and watch the changes path for the next change."""
        await self._zk.ensure_path(self._changes, what="create the ACL changes path")
        await self._zk.call(
            lambda c: c.get_children_async(self._changes, watch=self._zk.watcher(self._changed)),
            what="watch ACL changes",
        )
        found: dict[AclBinding, None] = {}
        for pattern in PatternType:
            for rtype in ResourceType:
                parent = f"{self._chroot}{_ROOTS[pattern]}/{_TYPES[rtype]}"
                for resource, data in await self._read_type(parent, rtype, pattern):
                    try:
                        found.update(dict.fromkeys(_decode(resource, data)))
                    except (ValueError, KeyError, AttributeError) as exc:
                        log.error("ACLs of %s in ZooKeeper cannot be read, skipped: %s", resource, exc)
        self._cache = found

    async def _read_type(
        self, parent: str, rtype: ResourceType, pattern: PatternType
    ) -> list[tuple[Resource, bytes]]:
        """The data of every resource znode under ``parent``."""
        try:
            children = await self._zk.call(
                lambda c: c.get_children_async(parent), what="list ACLs", expect=(NoNodeError,)
            )
        except NoNodeError:
            return []
        out = []
        for child in children:
            data = await self._get(f"{parent}/{child}")
            if data is not None:  # (None: removed meanwhile)
                out.append(((rtype, pattern, decode_name(child)), data))
        return out

    async def _get(self, path: str) -> bytes | None:
        try:
            data, _ = await self._zk.call(
                lambda c: c.get_async(path), what="read ACLs", expect=(NoNodeError,)
            )
        except NoNodeError:
            return None
        return bytes(data)

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self._zk.call(
                lambda c: c.delete_async(path), what="trim ACL changes", expect=(NoNodeError,)
            )
        except NoNodeError:
            pass

    def _changed(self) -> None:
        """A change node appeared (a watch fired, in the loop): reload in the background, and once
        more if another change comes during that reload (its watch may have fired before the read)."""
        self._dirty = True
        if self._reloading is None or self._reloading.done():
            self._reloading = asyncio.create_task(self._reload(), name="zookeeper-acl-reload")

    async def _reload(self) -> None:
        while self._dirty:
            self._dirty = False
            try:
                await self.load()
            except Exception as exc:  # the next change, or the next session, reloads again
                log.warning("cannot reload the ACLs from ZooKeeper: %s", exc)
                return

    async def close(self) -> None:
        if self._reloading is not None:
            self._reloading.cancel()
            await asyncio.gather(self._reloading, return_exceptions=True)
            self._reloading = None

    # --- changing ------------------------------------------------------------------------

    async def add(self, bindings: Sequence[AclBinding]) -> None:
        by_resource: dict[Resource, list[AclBinding]] = {}
        for b in bindings:
            by_resource.setdefault((b.resource_type, b.pattern_type, b.resource_name), []).append(b)
        for resource, new in by_resource.items():
            await self._update(resource, _adding(new))
        await self._announce()

    async def remove(self, selector: AclFilter) -> list[AclBinding]:
        await self.load()  # decide on what is stored, not on a copy that may be a moment old
        resources = {
            (b.resource_type, b.pattern_type, b.resource_name) for b in self._cache if selector.selects(b)
        }
        removed: list[AclBinding] = []
        for resource in resources:
            outcome = await self._update(resource, lambda old: [b for b in old if not selector.selects(b)])
            removed.extend(outcome.gone)
        if removed:
            await self._announce()
        return removed

    async def _update(
        self, resource: Resource, change: Callable[[list[AclBinding]], list[AclBinding]]
    ) -> _Outcome:
        """Apply ``change(old bindings) -> new bindings`` to one resource's znode, compare-and-set."""
        for _ in range(_ATTEMPTS):
            outcome = await self._attempt(self._path(resource), resource, change)
            if outcome is not None:
                return outcome
        raise BackendError(f"The ACLs of {resource[0].value} {resource[2]!r} keep changing; retry.")

    async def _attempt(
        self, path: str, resource: Resource, change: Callable[[list[AclBinding]], list[AclBinding]]
    ) -> _Outcome | None:
        """One compare-and-set round; None if another replica changed the znode first."""
        try:
            data, stat = await self._zk.call(
                lambda c: c.get_async(path), what="read ACLs", expect=(NoNodeError,)
            )
            old = _decode(resource, data)
            version: int | None = stat.version
        except NoNodeError:
            old, version = [], None
        new = change(old)
        payload = _encode(new)
        try:
            if version is None:
                if new:
                    await self._zk.call(
                        lambda c: c.create_async(path, payload, makepath=True),
                        what="store ACLs",
                        expect=(NodeExistsError,),
                    )
            elif not new:
                await self._zk.call(
                    lambda c: c.delete_async(path, version=version),
                    what="remove ACLs",
                    expect=(BadVersionError, NoNodeError, NotEmptyError),
                )
            elif new != old:
                await self._zk.call(
                    lambda c: c.set_async(path, payload, version=version),
                    what="store ACLs",
                    expect=(BadVersionError, NoNodeError),
                )
        except (NodeExistsError, BadVersionError, NoNodeError, NotEmptyError):
            return None
        return _Outcome(gone=[b for b in old if b not in new])

    async def _announce(self) -> None:
        """A change node for every replica's watch; then this replica's own copy, at once."""
        prefix = f"{self._changes}/{CHANGE_PREFIX}"
        await self._zk.call(
            lambda c: c.create_async(prefix, b"", sequence=True, makepath=True), what="announce an ACL change"
        )
        await self.load()
        children = sorted(
            await self._zk.call(lambda c: c.get_children_async(self._changes), what="list ACL changes")
        )
        for old in children[:-_KEEP_CHANGES]:
            await self._delete_quietly(f"{self._changes}/{old}")  # (another replica may trim it first)


def _adding(new: list[AclBinding]) -> Callable[[list[AclBinding]], list[AclBinding]]:
    return lambda old: [*old, *(b for b in new if b not in old)]


class _Outcome:
    __slots__ = ("gone",)

    def __init__(self, gone: list[AclBinding]) -> None:
        self.gone = gone
