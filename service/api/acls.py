"""ACL bindings in Confluent's v3 shape: ``GET``, ``POST`` and ``DELETE /v3/clusters/{id}/acls``.

The bindings are stored through the coordinator (``Coordinator.add_acls``…), so every
replica sees the same set. Filters take Confluent's query parameters: each left out (or
``ANY``) matches everything; ``pattern_type=MATCH`` with a ``resource_name`` selects the
bindings that would apply to that resource (LITERAL equal or ``*``, and PREFIXED ones it
starts with).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from api_schemas import v3
from service.api.gateway import Gateway, get_gateway
from service.core.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from service.core.rules import valid_topic
from service.errors import BadRequest, GatewayError, InvalidPayload

from .access import decision_of
from .binding import Jackson, Refusals
from .bodies import Body
from .replies import V3, JSONBody
from .replies import v3 as v3_response
from .responses import ERRORS
from .v3 import BODY_ERRORS, CLUSTER, _base, _check, _listing

router = APIRouter(prefix="/v3/clusters", tags=["acls"], default_response_class=JSONBody)
GW = Annotated[Gateway, Depends(get_gateway)]
ACLS = CLUSTER + "/acls"


class AclQuery:
    """Confluent's ACL filter query parameters."""

    def __init__(
        self,
        resource_type: Annotated[Literal["ANY", "TOPIC", "GROUP", "CLUSTER"], Query()] = "ANY",
        resource_name: Annotated[str | None, Query(max_length=255)] = None,
        pattern_type: Annotated[Literal["ANY", "MATCH", "LITERAL", "PREFIXED"], Query()] = "ANY",
        principal: Annotated[str | None, Query(max_length=260)] = None,
        host: Annotated[str | None, Query(max_length=255)] = None,
        operation: Annotated[Literal["ANY"] | v3.AclOperation, Query()] = "ANY",
        permission: Annotated[Literal["ANY", "ALLOW", "DENY"], Query()] = "ANY",
    ) -> None:
        self.filter = AclFilter(
            principal=principal,
            resource_type=None if resource_type == "ANY" else ResourceType(resource_type),
            resource_name=resource_name,
            pattern_type=None if pattern_type in ("ANY", "MATCH") else PatternType(pattern_type),
            match=pattern_type == "MATCH",
            operation=None if operation == "ANY" else Operation(operation),
            permission=None if permission == "ANY" else Permission(permission),
            host=host,
        )


Filter = Annotated[AclQuery, Depends()]


def _acl(base: str, cluster_id: str, b: AclBinding) -> dict[str, Any]:
    return {
        "kind": "KafkaAcl",
        "metadata": {"self": f"{base}/{cluster_id}/acls"},
        "cluster_id": cluster_id,
        **b.as_dict(),
    }


def _not_a_constant(field: str) -> Callable[[Any], GatewayError]:
    """Jackson's refusal of a string its enum has no constant for: a binding failure, 400."""
    return lambda value: BadRequest(
        f"Cannot deserialize '{field}' from {str(value)[:100]!r}: not one of its enum's values."
    )


# CreateAclRequest's enums (ResourceType, PatternType, Operation, Permission)
_ENUMS: Refusals = {
    field: _not_a_constant(field) for field in ("resource_type", "pattern_type", "operation", "permission")
}
_CREATE_ACL = Body(v3.CreateAclRequest, Jackson(refusals=_ENUMS, creator_requires=True), V3)


@router.get(ACLS, operation_id="listAcls", responses={200: {"model": v3.AclList}, **ERRORS})
async def list_acls(cluster_id: str, request: Request, gw: GW, query: Filter) -> Response:
    """The ACL bindings the filter selects."""
    _check(cluster_id, gw)
    base = _base(request)
    data = [_acl(base, cluster_id, b) for b in await gw.coordinator.acls() if query.filter.selects(b)]
    return v3_response(_listing("KafkaAclList", f"{base}/{cluster_id}/acls", data))


@router.post(
    ACLS,
    operation_id="createAcls",
    status_code=201,
    responses={201: {"description": "Created."}, **ERRORS, **BODY_ERRORS},
    openapi_extra=_CREATE_ACL.openapi,
)
async def create_acl(cluster_id: str, request: Request, gw: GW) -> Response:
    """Store one ACL binding (storing one that exists changes nothing)."""
    _check(cluster_id, gw)
    req = await _CREATE_ACL.read(request)
    binding = AclBinding(
        principal=req.principal,
        resource_type=ResourceType(req.resource_type),
        resource_name=req.resource_name,
        pattern_type=PatternType(req.pattern_type),
        operation=Operation(req.operation),
        permission=Permission(req.permission),
        host=req.host,
    )
    _check_resource(binding)
    await gw.coordinator.add_acls([binding])
    who = await decision_of(request)
    who.audit("acl.create", Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, binding=binding.as_dict())
    return Response(status_code=201)


@router.delete(ACLS, operation_id="deleteAcls", responses={200: {"model": v3.AclList}, **ERRORS})
async def delete_acls(cluster_id: str, request: Request, gw: GW, query: Filter) -> Response:
    """Delete the ACL bindings the filter selects, and list them; ``resource_type`` is required,
    so that no call deletes every binding by leaving the filter out."""
    _check(cluster_id, gw)
    if query.filter.resource_type is None:
        raise InvalidPayload("Deleting ACLs needs a resource_type (TOPIC, GROUP or CLUSTER).")
    base = _base(request)
    removed = await gw.coordinator.remove_acls(query.filter)
    who = await decision_of(request)
    for b in removed:
        who.audit("acl.delete", Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, binding=b.as_dict())
    return v3_response(
        _listing("KafkaAclList", f"{base}/{cluster_id}/acls", [_acl(base, cluster_id, b) for b in removed])
    )


def _check_resource(b: AclBinding) -> None:
    """What Kafka refuses: a CLUSTER binding not on ``kafka-cluster``; a LITERAL TOPIC binding on a
    name no topic can have."""
    if b.resource_type is ResourceType.CLUSTER and (b.resource_name, b.pattern_type) != (
        CLUSTER_NAME,
        PatternType.LITERAL,
    ):
        raise InvalidPayload(f"A CLUSTER binding is on the LITERAL resource {CLUSTER_NAME!r}.")
    if (
        b.resource_type is ResourceType.TOPIC
        and b.pattern_type is PatternType.LITERAL
        and b.resource_name != "*"
        and not valid_topic(b.resource_name)
    ):
        raise InvalidPayload(f"{b.resource_name!r} is not a topic name (nor '*').")
