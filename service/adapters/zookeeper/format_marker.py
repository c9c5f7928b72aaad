"""The layout's format marker, ``/brokergate/format``: what a replica checks before it serves.

ZooKeeper's state is shared by replicas of several releases, so no one file says which
release wrote it. The marker does, as Kafka's ``metadata.version`` does for a cluster: it
holds the highest format of the layout (``ZOOKEEPER_FORMAT``) of any release that started on
it. A release that finds a higher one than it reads refuses to start, in one line
(``NewerFormat``); one that finds a lower one (or none: the releases before the marker, which
ignore it) writes its own, compare-and-set, so that older releases started later refuse in
turn. A record of a newer format that appears after the start is refused where it is read
(``codec``, ``shares``).
"""

from __future__ import annotations

import functools
from typing import Final

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult

from service.errors import BackendUnavailable

from ..format_versions import ZOOKEEPER_FORMAT
from .codec import decode_format_marker, encode_format_marker
from .session import ZooKeeperSession

# Replicas starting at once race for the marker; each lost race means another one wrote it.
_ATTEMPTS: Final = 10


async def claim_format(zk: ZooKeeperSession, path: str) -> None:
    """Check the marker at ``path`` and raise it to this release's format if it is lower."""
    data = encode_format_marker()
    for _ in range(_ATTEMPTS):
        try:
            found, stat = await zk.call(
                lambda c: c.get_async(path), what="read the layout's format", expect=(NoNodeError,)
            )
        except NoNodeError:
            try:
                await zk.call(
                    lambda c: c.create_async(path, data, makepath=True),
                    what="mark the layout's format",
                    expect=(NodeExistsError,),
                )
            except NodeExistsError:
                continue
            return
        if decode_format_marker(bytes(found), path) >= ZOOKEEPER_FORMAT:
            return
        try:
            await zk.call(
                functools.partial(_set, path, data, stat.version),
                what="mark the layout's format",
                expect=(BadVersionError, NoNodeError),
            )
        except (BadVersionError, NoNodeError):
            continue
        return
    raise BackendUnavailable(f"{path} in ZooKeeper kept changing while this replica started; retry.")


def _set(path: str, data: bytes, version: int, client: KazooClient) -> IAsyncResult:
    return client.set_async(path, data, version=version)
