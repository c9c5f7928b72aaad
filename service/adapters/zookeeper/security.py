"""The coordinator's identity in ZooKeeper: digest credentials, and the ACL of every znode it creates.

With ``zookeeper_username``/``zookeeper_password`` set, the session authenticates with
ZooKeeper's ``digest`` scheme and every znode the gateway creates (its layout, groups,
offsets, replicas, the election, Kafka's ACL znodes) carries an ACL that gives all rights to
that identity alone, plus read to anyone when ``zookeeper_world_readable`` is on (the default,
as Kafka does with ``zookeeper.set.acl``, so Kafka's tools and the Spark offsets reader still
read offsets and ACL bindings). Another client can then look, but not change or delete.

Every replica of a deployment must use the same credentials: a znode one creates is changed
by the others. ZooKeeper never refuses a digest credential itself; a wrong one is an identity
without rights, which the session reports as refused requests (``NoAuthError``).

The ACL is given to kazoo as the client's ``default_acl``, which kazoo applies to every
``create``, ``ensure_path`` (parents included) and transaction ``create`` that names no ACL
of its own, and this adapter never names one: nothing is created without it. Znodes created
before the credentials were set keep the ACL they had.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.security import ACL, READ_ACL_UNSAFE, make_digest_acl

__all__ = ["DigestCredentials"]


@dataclass(frozen=True, slots=True)
class DigestCredentials:
    """A ZooKeeper ``digest`` identity (``user:password``) and the ACL of the znodes it creates."""

    username: str
    password: str = field(repr=False)
    world_readable: bool = True

    def __post_init__(self) -> None:
        if not self.username or ":" in self.username:
            raise ValueError("zookeeper_username must be a non-empty name without ':'")
        if not self.password:
            raise ValueError("zookeeper_password must not be empty")

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """What kazoo sends on every (re)connection to authenticate the session."""
        return [("digest", f"{self.username}:{self.password}")]

    def acl(self) -> list[ACL]:
        """All rights to this identity; read to anyone if ``world_readable``."""
        acl = [make_digest_acl(self.username, self.password, all=True)]
        if self.world_readable:
            acl.extend(READ_ACL_UNSAFE)
        return acl
