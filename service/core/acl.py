"""Kafka's ACL model: who may do which operation on which resource, and how a request is decided.

A binding is (principal, resource type, resource name, pattern type, operation, permission,
host), as ``kafka-acls`` and Confluent's v3 ``/acls`` API spell them. ``Authorizer`` decides as
Kafka's ``StandardAuthorizer`` does:

- super users may do everything;
- a DENY that matches wins over any ALLOW;
- an ALLOW matches the operation itself, ``ALL``, or an operation that implies it (READ,
  WRITE, DELETE or ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS);
- a binding matches a resource by LITERAL name, the LITERAL wildcard ``*``, or a PREFIXED
  name the resource starts with; a principal by name or ``User:*``; a host by address or ``*``;
- with no matching ALLOW, the answer is no.

``Access`` turns the coordinator's bindings (every replica decides alike) into a ``Decision``
for one caller, the object requests are checked with; with authorization off it is
``ALLOW_ALL``. Pure but for reading the bindings: no adapter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final

from service.errors import Forbidden

from . import audit


class ResourceType(StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"


class PatternType(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(StrEnum):
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"


class Permission(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


WILDCARD: Final = "*"  # a LITERAL resource name, a host, or the name part of ``User:*``
ANY_USER: Final = "User:*"
ANONYMOUS: Final = "User:ANONYMOUS"  # every caller, when authentication is off
CLUSTER_NAME: Final = "kafka-cluster"  # Kafka's one name for the CLUSTER resource

# An ALLOW of the key allows these too (Kafka's implied operations).
_IMPLIES: Final[dict[Operation, frozenset[Operation]]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    principal: str  # "User:alice", or "User:*"
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    operation: Operation
    permission: Permission
    host: str = WILDCARD

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> AclBinding:
        """The binding ``as_dict`` wrote (``ValueError`` naming the field if it is not one)."""
        try:
            return cls(
                principal=_text(d["principal"], "principal"),
                resource_type=ResourceType(_text(d["resource_type"], "resource_type")),
                resource_name=_text(d["resource_name"], "resource_name"),
                pattern_type=PatternType(_text(d["pattern_type"], "pattern_type")),
                operation=Operation(_text(d["operation"], "operation")),
                permission=Permission(_text(d["permission"], "permission")),
                host=_text(d.get("host", WILDCARD), "host"),
            )
        except KeyError as exc:
            raise ValueError(f"an ACL binding needs {exc.args[0]!r}") from exc

    def as_dict(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "resource_type": self.resource_type.value,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.value,
            "operation": self.operation.value,
            "permission": self.permission.value,
            "host": self.host,
        }


def _text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"an ACL binding's {field} is a non-empty string")
    return value


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Bindings to list or delete; ``None`` matches anything (v3's ``ANY``).

    ``pattern_type`` MATCH (``match=True``) selects every binding that would apply to the
    named resource: LITERAL equal or ``*``, and PREFIXED that the name starts with.
    """

    principal: str | None = None
    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType | None = None
    match: bool = False
    operation: Operation | None = None
    permission: Permission | None = None
    host: str | None = None

    def selects(self, b: AclBinding) -> bool:
        if self.resource_type is not None and b.resource_type is not self.resource_type:
            return False
        if self.match:
            if self.resource_name is not None and not b.matches_resource(b.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type is not None and b.pattern_type is not self.pattern_type:
                return False
            if self.resource_name is not None and b.resource_name != self.resource_name:
                return False
        return all(
            want is None or want == have
            for want, have in (
                (self.principal, b.principal),
                (self.operation, b.operation),
                (self.permission, b.permission),
                (self.host, b.host),
            )
        )


class Authorizer:
    """Decides requests from a set of bindings (replaced whole when the bindings change).

    The bindings are indexed by resource type and principal, so a check reads only the caller's
    own bindings and those for ``User:*``, not every team's; and a verdict is remembered (up to
    ``REMEMBERED`` of them, forgotten all at once past that), so the checks a busy client repeats
    on every request cost a dictionary lookup.
    """

    REMEMBERED: ClassVar[int] = 10_000

    def __init__(self, bindings: Iterable[AclBinding] = (), *, super_users: Iterable[str] = ()) -> None:
        self.super_users = frozenset(super_users)
        self._index: dict[tuple[ResourceType, str], tuple[AclBinding, ...]] = {}
        self._verdicts: dict[tuple[str, str | None, ResourceType, str, Operation], bool] = {}
        self.replace(bindings)

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        index: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        for b in bindings:
            index.setdefault((b.resource_type, b.principal), []).append(b)
        self._index = {key: tuple(bs) for key, bs in index.items()}
        self._verdicts = {}

    def allowed(
        self, principal: str, host: str | None, resource_type: ResourceType, name: str, operation: Operation
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on resource ``name`` of ``resource_type``.

        A ``host`` of None (a decision taken away from any request, e.g. which topics a member's
        pattern covers) counts only ALLOWs for every host, and every DENY: it never allows more
        than some request would be allowed."""
        if principal in self.super_users:
            return True
        key = (principal, host, resource_type, name, operation)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._decide(principal, host, resource_type, name, operation)
            if len(self._verdicts) >= self.REMEMBERED:
                self._verdicts = {}  # a client cycling through names costs misses, never memory
            self._verdicts[key] = verdict
        return verdict

    def _decide(
        self, principal: str, host: str | None, resource_type: ResourceType, name: str, operation: Operation
    ) -> bool:
        allowed = False
        for b in self._candidates(resource_type, principal):
            if host is None:
                if b.host != WILDCARD and b.permission is Permission.ALLOW:
                    continue
            elif b.host not in (host, WILDCARD):
                continue
            if not b.matches_resource(resource_type, name):
                continue
            if b.permission is Permission.DENY:
                if b.operation in (operation, Operation.ALL):
                    return False  # deny wins, whatever allows it
            elif not allowed:
                allowed = b.operation is Operation.ALL or b.operation in _IMPLIES.get(operation, (operation,))
        return allowed

    def _candidates(self, resource_type: ResourceType, principal: str) -> Iterator[AclBinding]:
        yield from self._index.get((resource_type, principal), ())
        if principal != ANY_USER:
            yield from self._index.get((resource_type, ANY_USER), ())


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, and from which address (None: not known, see ``Authorizer.allowed``)."""

    principal: str = ANONYMOUS
    host: str | None = None


class Decision:
    """What one caller may do, by the bindings as they were when it was made."""

    __slots__ = ("_authorizer", "caller", "super_user")

    def __init__(self, authorizer: Authorizer | None, caller: Caller, *, super_user: bool = False) -> None:
        self._authorizer = authorizer  # None: authorization is off, everything is allowed
        self.caller = caller
        self.super_user = super_user

    def owns(self, owner: str) -> bool:
        """Whether what ``owner`` created (a consumer instance) is the caller's to use: its own,
        or anything for a super user."""
        return self.super_user or owner == self.caller.principal

    def may(self, resource_type: ResourceType, name: str, operation: Operation) -> bool:
        a = self._authorizer
        return a is None or a.allowed(self.caller.principal, self.caller.host, resource_type, name, operation)

    def audit(
        self,
        event: str,
        operation: Operation | str,
        resource_type: ResourceType,
        name: str,
        outcome: str = audit.ALLOWED,
        **details: object,
    ) -> None:
        """One line of the audit trail about this caller (``service.core.audit``)."""
        audit.record(
            event,
            principal=self.caller.principal,
            address=self.caller.host,
            operation=str(operation),
            resource=f"{resource_type.value}:{name}",
            outcome=outcome,
            **details,
        )

    def may_create_topic(self, topic: str) -> bool:
        """Kafka's rule: CREATE on the cluster, or on the topic."""
        return self.may(ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE) or self.may(
            ResourceType.TOPIC, topic, Operation.CREATE
        )

    def check(self, resource_type: ResourceType, names: Iterable[str], operation: Operation) -> None:
        """Raise ``Forbidden`` (403) unless the caller may do ``operation`` on every resource of ``names``.

        The error names every resource the caller may not ``operation``."""
        denied = sorted({n for n in names if not self.may(resource_type, n, operation)})
        for name in denied:
            self.audit("authorization", operation, resource_type, name, audit.DENIED)
        if denied:
            what = resource_type.value.lower() + ("s" if len(denied) > 1 else "")
            listed = ", ".join(repr(n) for n in denied)
            raise Forbidden(
                f"Not authorized: {self.caller.principal} may not {operation.value} {what} {listed}."
            )

    def check_create_topic(self, topic: str) -> None:
        if not self.may_create_topic(topic):
            self.audit("authorization", Operation.CREATE, ResourceType.TOPIC, topic, audit.DENIED)
            raise Forbidden(
                f"Not authorized: {self.caller.principal} may not CREATE topic {topic!r} "
                "(it needs CREATE on the topic or on the cluster)."
            )


ALLOW_ALL: Final = Decision(None, Caller())
# The ``who`` of what the gateway does on its own behalf rather than a client's (expiring
# instances, writing a share group's dead letters): no ACL is checked, every instance is reached,
# nothing is audited. The core's methods take ``who`` without a default, so each call says whose it is.
GATEWAY: Final[None] = None


class Access:
    """Decisions by the current bindings: an ``Authorizer`` rebuilt only when they change.

    ``bindings`` is the coordinator's ``acls``, which hands out the same sequence until the
    bindings change; so a request costs one call and an identity check, not a rebuild.
    """

    def __init__(
        self,
        bindings: Callable[[], Awaitable[Sequence[AclBinding]]],
        *,
        super_users: Iterable[str] = (),
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self._bindings = bindings
        self._super_users = frozenset(super_users)
        self._seen: Sequence[AclBinding] | None = None
        self._authorizer = Authorizer(super_users=self._super_users)

    @classmethod
    def off(cls) -> Access:
        async def none() -> Sequence[AclBinding]:
            return ()

        return cls(none, enabled=False)

    async def decision(self, caller: Caller) -> Decision:
        super_user = caller.principal in self._super_users
        if not self.enabled:
            return ALLOW_ALL if caller == ALLOW_ALL.caller else Decision(None, caller, super_user=super_user)
        bindings = await self._bindings()
        if bindings is not self._seen:
            self._authorizer = Authorizer(bindings, super_users=self._super_users)
            self._seen = bindings
        return Decision(self._authorizer, caller, super_user=super_user)
