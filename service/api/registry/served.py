"""What every route of the schema registry is declared with: the registry it reaches, and the
router it is declared on.

``served_registry`` is the dependency of every route (``GW`` gives it to the routes that use the
registry): the gateway's embedded ``SchemaRegistry`` (``service.api.gateway``), or
``ExternalRegistryInUse`` when the gateway uses an external one. ``registry_router`` makes the
routers the route modules declare their routes on, all alike, so that ``router`` can put their
routes together as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends

from service.api.gateway import Gateway, get_gateway
from service.core.schemas.registry import SchemaRegistry
from service.errors import GatewayError

from .media import PREFIX, RegistryJSON


class ExternalRegistryInUse(GatewayError):
    """The gateway uses an external registry: its own registry API is not served, and requests are
    not forwarded (that would lend the gateway's credentials to whoever sends one)."""

    http_status = 404
    error_code = 404  # the registry's generic codes are the HTTP status
    default_message = (
        "HTTP 404 Not Found: this gateway uses an external schema registry; registry clients talk to "
        "that registry directly."
    )


@dataclass(frozen=True, slots=True)
class Served:
    """What the routes reach: the gateway's embedded registry."""

    registry: SchemaRegistry


async def served_registry(gw: Annotated[Gateway, Depends(get_gateway)]) -> Served:
    """The dependency of every route: the embedded registry (``ExternalRegistryInUse`` when the
    gateway uses an external one)."""
    if gw.registry is None:
        raise ExternalRegistryInUse()
    return Served(gw.registry)


GW = Annotated[Served, Depends(served_registry)]


def registry_router() -> APIRouter:
    """A router to declare registry routes on: under its prefix and tag, answering ``RegistryJSON``,
    each depending on the served registry."""
    return APIRouter(
        prefix=PREFIX,
        tags=["schema-registry"],
        default_response_class=RegistryJSON,
        dependencies=[Depends(served_registry)],  # the routes that need no registry answer alike
    )
