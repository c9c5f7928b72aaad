"""Synchronous, read-only access to committed offsets in ZooKeeper, for other processes.

A Spark job (or any tool) reads ``/consumers/{group}/offsets/{topic}/{partition}``
under the chroot of a ``zookeeper://`` URL with kazoo's plain blocking client:
no event loop, no ephemeral znodes, nothing written; with the gateway's digest
``credentials`` it reads what a coordinator that is not world-readable keeps.
Each offset is one
znode, so a read overlapping a commit may see some partitions before it and
some after; every value seen is one the group really committed.

Names are decoded as the coordinator encodes them (``paths.decode_name``), and
znodes other tools left behind that hold no offset are skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Self, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from service.core.models import TopicPartition
from service.errors import BackendError, BackendUnavailable

from .codec import decode_offset, decode_partition
from .paths import ZnodePaths, decode_name
from .security import DigestCredentials
from .session import _UNAVAILABLE, ZooKeeperURL

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperOffsetsReader"]

DEFAULT_TIMEOUT_S: Final = 10.0

Offsets = dict[TopicPartition, int]
T = TypeVar("T")


class ZooKeeperOffsetsReader:
    """One short-lived kazoo session that lists groups and reads their committed offsets.

    Use it as a context manager; every call raises ``BackendUnavailable`` when
    ZooKeeper cannot be reached within ``timeout_s``.
    """

    def __init__(
        self, url: str, *, credentials: DigestCredentials | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        parsed = ZooKeeperURL.parse(url)  # ValueError with a one-line reason
        self._credentials = credentials
        self._servers = parsed.servers
        self._paths = ZnodePaths(parsed.chroot)
        self._timeout_s = timeout_s
        self._client: KazooClient | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._client is not None:
            return
        auth = self._credentials.auth_data if self._credentials is not None else None
        client = KazooClient(hosts=self._servers, timeout=self._timeout_s, read_only=True, auth_data=auth)
        try:
            client.start(timeout=self._timeout_s)
        except (KazooTimeoutError, KazooException) as exc:
            client.close()
            raise BackendUnavailable(
                f"Cannot reach ZooKeeper at {self._servers} within {self._timeout_s:.0f} s."
            ) from exc
        self._client = client

    def close(self) -> None:
        """End the session. Idempotent."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.stop()
            finally:
                client.close()

    def groups(self) -> list[str]:
        """Groups with at least one committed offset, sorted."""
        found = []
        for znode in self._children(self._paths.consumers):
            parent = self._paths.offsets_of_znode(znode)
            if any(self._children(f"{parent}/{topic}") for topic in self._children(parent)):
                found.append(decode_name(znode))
        return sorted(found)

    def committed(self, group: str) -> Offsets:
        """The committed offsets of ``group`` (partitions without a commit are left out)."""
        if not group:
            return {}
        parent = self._paths.offsets(group)
        offsets: Offsets = {}
        for topic_znode in self._children(parent):
            topic = decode_name(topic_znode)
            for name in self._children(f"{parent}/{topic_znode}"):
                partition = decode_partition(name)
                if partition is None:
                    continue
                offset = self._offset(f"{parent}/{topic_znode}/{name}")
                if offset is not None:
                    offsets[TopicPartition(topic, partition)] = offset
        return offsets

    def _offset(self, path: str) -> int | None:
        try:
            data, _ = self._call(lambda c: c.get(path))
        except NoNodeError:  # deleted by a tool between the listing and the read
            return None
        offset = decode_offset(data)
        if offset is None:
            log.warning("ignoring %s: %r is not an offset", path, bytes(data[:40]))
        return offset

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._call(lambda c: c.get_children(path)))
        except NoNodeError:
            return []

    def _call(self, op: Callable[[KazooClient], T]) -> T:
        client = self._client
        if client is None:
            raise BackendUnavailable("The ZooKeeper offsets reader is not started.")
        try:
            return op(client)
        except NoNodeError:
            raise
        except _UNAVAILABLE as exc:
            raise BackendUnavailable(
                f"ZooKeeper at {self._servers} was lost during a read ({type(exc).__name__})."
            ) from exc
        except KazooException as exc:
            who = f"as {self._credentials.username!r}" if self._credentials else "without credentials"
            raise BackendError(
                f"ZooKeeper at {self._servers} refused a read ({who}): {type(exc).__name__}."
            ) from exc
