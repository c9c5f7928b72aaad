"""The version of every form the gateway stores, in one place: what this release writes and reads.

Each stored form carries its version, and a release reads the versions up to its own. A
version newer than that is refused as ``NewerFormat`` ("written by a newer release (format N;
this release reads up to M)"), at start for what one process owns (the data dir), per request
for what replicas of several releases share. A form's version goes up only when a release
writes what the one before it would misread; docs/upgrading.md says which releases can go
back to which.

Pure, no I/O.
"""

from __future__ import annotations

from typing import Final

from service.errors import NewerFormat

__all__ = [
    "ACLS_FORMAT",
    "CLUSTER_FORMAT",
    "LOG_BATCH_FORMAT",
    "OFFSETS_FORMAT",
    "REDIS_FORMAT",
    "SHARES_FORMAT",
    "TOPIC_FORMAT",
    "USERS_FORMAT",
    "ZOOKEEPER_FORMAT",
    "check_version",
]

# The embedded log: a record batch's magic byte (segments; the indexes are rebuilt from them).
LOG_BATCH_FORMAT: Final = 1
# ``topic.json``'s "format" and ``cluster.json``'s.
TOPIC_FORMAT: Final = 1
CLUSTER_FORMAT: Final = 1
# The embedded coordinator's journals and snapshots (the byte after their four letters).
OFFSETS_FORMAT: Final = 1
# 2: states as runs of offsets, and changes in the journal; 1: a row per record, whole writes.
SHARES_FORMAT: Final = 2
# ``coordinator/acls.json``'s "version".
ACLS_FORMAT: Final = 1
# The users file's first line, ``# brokergate users file, format N`` (a comment to the releases
# before the number, which skip such lines; a file without it is format 1).
USERS_FORMAT: Final = 1
# State that replicas share, one number for each store, as Kafka's metadata.version is one for
# its cluster: in the store's marker (the znode ``/brokergate/format``, the Redis key
# ``{prefix}format``), written at start by the newest release that started on the store, and in
# each record brokergate lays out itself ("format" in the JSON of group members and states, share
# states and consumer instances). Kafka's own layouts keep Kafka's numbers: committed offsets in
# ``/consumers`` (digits) have none, the ``/kafka-acl`` znodes carry Kafka's "version" 1.
ZOOKEEPER_FORMAT: Final = 1
REDIS_FORMAT: Final = 1


def check_version(what: str, found: object, reads: int) -> None:
    """Refuse ``what`` if its stored version ``found`` is a number above ``reads``; a version
    that is not a number is the reader's to refuse, as any malformed content."""
    if type(found) is int and found > reads:
        raise NewerFormat(what, found, reads)
