"""Every Redis key and hash field the Redis adapters (sessions, quotas) use, and how names become key parts.

The layout, under a per-deployment prefix (``redis_key_prefix``, default ``brokergate:``)::

    {prefix}format                    string: the layout's format (decimal), see ``sessions``; no TTL
    {prefix}instance:{group}/{name}   hash: one consumer instance (fields below); TTL = timeout + margin
    {prefix}leases                    sorted set: member {group}/{name}, score = lease expiry (ms); no TTL
    {prefix}group:{group}             set: the instance names of one group; TTL >= its instances'
    {prefix}owner:{principal}         set: members {group}/{name} of one principal's instances; no TTL
    {prefix}idem:{key}                string: one Idempotency-Key's claim, then its response; TTL = window
    {prefix}quota:{bucket}            hash: one quota token bucket (fields below); TTL = until full again

The fields of an instance hash::

    v       the compare-and-set version (decimal)
    seen    last_seen_ms (decimal); only ever moves forward
    tmo     instance_timeout_ms (decimal), for scripts that renew the lease without the body
    w       token of the create or save that wrote the current version (so its retry recognises it)
    state   everything else: JSON of group, name, config, subscription, assignment, positions

The fields of a quota bucket (``service.core.buckets``; a missing bucket is a full one)::

    l       the level: tokens left, negative when in debt (decimal, may have a fraction)
    at      when ``l`` was written, in ms of the Redis server's clock (decimal)

Bucket names are ``client/{id}/{direction}`` or ``topic/{name}/{direction}``,
where a client's id is a hash of its API key (never the key) or its address.

The scalar fields live beside the JSON so that the Lua scripts compare and
renew them without decoding JSON, and ``load`` reads only what it needs.

``leases`` is also the index of all instances (``instances()`` with no group)
and the reaper's work list. A member outlives its hash when the hash expired
by TTL (no replica ran for the margin), and stays until a reaper deletes the
instance, which also removes it from its group in the coordinator; that is
why ``leases`` itself has no TTL: a gateway coming back after a long outage
must still learn which members to remove. It shrinks as the reaper works, so
it holds at most the instances of the last run. A group set does get a TTL,
renewed to at least the longest TTL of its instances, and dangling names are
pruned when a listing finds them; it only serves ``instances(group)``. An owner
set serves ``count(owner=)`` (a principal's share of the instances): created
instances are added to it, and every count prunes the members whose hash is
gone (deleted or expired), so it holds at most the principal's instances since
its last create; an instance of the anonymous principal is in none.

Group and instance names are used verbatim, except ``%`` and ``/``, which are
percent-encoded so that ``{group}/{name}`` always splits back into the same
pair: the ``Sessions`` port takes any string, not only the names the API
validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_PREFIX: Final = "brokergate:"

INSTANCE: Final = "instance:"
LEASES: Final = "leases"
GROUP: Final = "group:"
OWNER: Final = "owner:"
IDEMPOTENCY: Final = "idem:"
FORMAT: Final = "format"
QUOTA: Final = "quota:"

# Hash fields of an instance.
VERSION: Final = "v"
SEEN: Final = "seen"
TIMEOUT: Final = "tmo"
WRITER: Final = "w"
STATE: Final = "state"

# Hash fields of a quota bucket.
QUOTA_LEVEL: Final = "l"
QUOTA_UPDATED: Final = "at"

_SEPARATOR: Final = "/"
# How key text becomes bytes and back. Lone surrogates can reach the port from JSON; they must
# round-trip like any other character rather than fail the request.
TEXT_ERRORS: Final = "surrogatepass"


def decode(raw: bytes | str) -> str:
    """A name as Redis returned it (bytes, since replies are not decoded) back to text."""
    return raw.decode("utf-8", TEXT_ERRORS) if isinstance(raw, bytes) else raw


def escape(part: str) -> str:
    """``part`` with ``%`` and ``/`` percent-encoded (a no-op for every name the API accepts)."""
    if "%" in part or "/" in part:
        return part.replace("%", "%25").replace("/", "%2F")
    return part


def unescape(part: str) -> str:
    # '%2F' first: every '%' of an escaped part starts '%25' or '%2F', so neither pass can
    # create a false match for the other.
    if "%" in part:
        return part.replace("%2F", "/").replace("%25", "%")
    return part


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """The keys of one deployment (one prefix); pure string work, no I/O."""

    prefix: str = DEFAULT_PREFIX

    @property
    def leases(self) -> str:
        return self.prefix + LEASES

    @property
    def format(self) -> str:
        return self.prefix + FORMAT

    @property
    def instance_prefix(self) -> str:
        return self.prefix + INSTANCE

    def member(self, group: str, name: str) -> str:
        """The lease member of an instance; the instance key is ``instance_prefix + member``."""
        return escape(group) + _SEPARATOR + escape(name)

    def parse_member(self, member: bytes | str) -> tuple[str, str]:
        """(group, name) of a lease member; ``ValueError`` if it is not one."""
        text = decode(member)
        group, sep, name = text.partition(_SEPARATOR)
        if not sep or _SEPARATOR in name:
            raise ValueError(f"not an instance member: {text!r}")
        return unescape(group), unescape(name)

    def instance(self, group: str, name: str) -> str:
        return self.instance_prefix + self.member(group, name)

    def instance_of_member(self, member: str) -> str:
        return self.instance_prefix + member

    def group(self, group: str) -> str:
        return self.prefix + GROUP + escape(group)

    def owner(self, principal: str) -> str:
        return self.prefix + OWNER + principal

    def idempotency(self, key: str) -> str:
        """An Idempotency-Key's entry: ``P<fingerprint>`` pending, then ``D<fingerprint>\n<response>``."""
        return self.prefix + IDEMPOTENCY + key

    def quota(self, bucket: str) -> str:
        """A quota token bucket (see ``service.core.buckets``)."""
        return self.prefix + QUOTA + bucket
