"""Live gateway replicas: one ephemeral znode each under ``/brokergate/nodes``.

ZooKeeper deletes an ephemeral znode when the session that created it ends, so
the children of ``/brokergate/nodes`` are exactly the replicas alive now. A
session that expired (a long network cut, a paused process) takes the znode
with it; the coordinator calls ``register`` again on every new session.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time

from kazoo.exceptions import NodeExistsError

from service.errors import BackendError

from .paths import ZnodePaths, decode_name
from .session import ZooKeeperSession

log = logging.getLogger(__name__)

_RECHECK_S = 0.1


def default_node_id() -> str:
    """hostname-pid: unique among live processes, readable in ZooKeeper."""
    return f"{socket.gethostname()}-{os.getpid()}"


class NodeRegistry:
    """Registers this replica and lists the live ones.

    Collaborators: ``ZooKeeperSession`` for requests; the coordinator decides
    when to (re-)register.
    """

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths, node_id: str) -> None:
        self._zk = zk
        self._paths = paths
        self.node_id = node_id
        self._path = paths.node(node_id)

    def _data(self) -> bytes:
        info = {
            "node_id": self.node_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "registered_ms": int(time.time() * 1000),
        }
        return json.dumps(info, ensure_ascii=True).encode("ascii")

    async def register(self) -> bool:
        """Create this replica's znode in the current session.

        True if it exists and belongs to this session; False if a znode of the
        same id belongs to another session (another replica with this id, or
        this replica's previous, not yet expired, session).
        """
        while True:
            session = self._zk.session_id
            try:
                await self._zk.call(
                    lambda c: c.create_async(self._path, self._data(), ephemeral=True),
                    what="register this replica",
                    expect=(NodeExistsError,),
                )
                return True
            except NodeExistsError:
                pass
            stat = await self._zk.call(lambda c: c.exists_async(self._path), what="check this replica's node")
            if stat is None:  # gone meanwhile: try again
                continue
            return session is not None and stat.ephemeralOwner == session

    async def register_waiting(self, wait_s: float) -> None:
        """``register``, waiting up to ``wait_s`` for a previous session's znode to expire."""
        deadline = time.monotonic() + wait_s
        while not await self.register():
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"Node id {self.node_id!r} is registered in ZooKeeper by another live replica; "
                    "give every replica its own BROKERGATE_NODE_ID."
                )
            await asyncio.sleep(_RECHECK_S)

    async def nodes(self) -> list[str]:
        """Ids of the live replicas, sorted."""
        children = await self._zk.call(
            lambda c: c.get_children_async(self._paths.nodes), what="list replicas"
        )
        return sorted(decode_name(c) for c in children)
