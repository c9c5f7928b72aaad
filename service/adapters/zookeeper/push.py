"""Push subscriptions in ZooKeeper: a znode each, its ``stat.version`` the version compare-and-set reads.

``/brokergate/push-subscriptions/{name}`` holds the subscription's wire form
(``core.push.stored``) as JSON. Creating one is a ``create`` (it fails if another replica
created it first); a change is a versioned ``setData``; a delete a versioned ``delete``. No
cache: every replica reads what ZooKeeper holds now, which the runners do once a tick.
"""

from __future__ import annotations

from typing import Any, cast

import orjson
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from service.core.push.stored import StoredPush
from service.errors import BackendError, PayloadTooLarge

from .groups import MAX_ZNODE_BYTES
from .paths import ZnodePaths, decode_name, encode_name
from .session import ZooKeeperSession


class PushSubscriptionStore:
    """The ``PushStore`` port over a ``ZooKeeperSession``."""

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths) -> None:
        self._zk = zk
        self._root = paths.push_subscriptions

    def _path(self, name: str) -> str:
        return f"{self._root}/{encode_name(name)}"

    async def push_subscriptions(self) -> dict[str, tuple[StoredPush, int]]:
        what = "listing the push subscriptions"
        try:
            children = await self._zk.call(
                lambda c: c.get_children_async(self._root), what=what, expect=(NoNodeError,)
            )
        except NoNodeError:
            return {}
        out: dict[str, tuple[StoredPush, int]] = {}
        for child in children:
            name = decode_name(child)
            found = await self.push_subscription(name)
            if found is not None:
                out[name] = found
        return out

    async def push_subscription(self, name: str) -> tuple[StoredPush, int] | None:
        path = self._path(name)
        try:
            data, stat = await self._zk.call(
                lambda c: c.get_async(path), what=f"reading push subscription {name!r}", expect=(NoNodeError,)
            )
        except NoNodeError:
            return None
        try:
            return cast(StoredPush, orjson.loads(data)), stat.version
        except orjson.JSONDecodeError as exc:
            raise BackendError(f"The znode {path} is not JSON: {exc}.") from exc

    async def put_push_subscription(
        self, name: str, data: StoredPush, *, expected_version: int | None
    ) -> int | None:
        path = self._path(name)
        raw = orjson.dumps(data)
        if len(raw) > MAX_ZNODE_BYTES:
            raise PayloadTooLarge(f"The push subscription is {len(raw)} bytes, more than a znode holds.")
        what = f"storing push subscription {name!r}"
        try:
            if expected_version is None:
                await self._zk.ensure_path(self._root, what=what)
                await self._zk.call(lambda c: c.create_async(path, raw), what=what, expect=(NodeExistsError,))
                return 0
            stat: Any = await self._zk.call(
                lambda c: c.set_async(path, raw, version=expected_version),
                what=what,
                expect=(BadVersionError, NoNodeError),
            )
        except (NodeExistsError, BadVersionError, NoNodeError):
            return None
        return int(stat.version)

    async def delete_push_subscription(self, name: str, *, expected_version: int) -> bool:
        path = self._path(name)
        try:
            await self._zk.call(
                lambda c: c.delete_async(path, version=expected_version),
                what=f"deleting push subscription {name!r}",
                expect=(BadVersionError, NoNodeError),
            )
        except (BadVersionError, NoNodeError):
            return False
        return True
