"""The schema registry's contexts and server metadata: ``/contexts``, ``/v1/metadata/id``,
``/v1/metadata/version`` and ``/v1/metadata/deployment``, answered as Confluent's registry
answers them (its ``ContextsResource`` and ``ServerMetadataResource``).

The registry has one context, Confluent's default (``.``), so the list of contexts is that one;
the cluster ids are the log's (``Log.cluster_id``, the id ``/v3/clusters`` gives) and Confluent's
default registry group; the version is brokergate's. The routes are put together by ``router``.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from typing import Annotated, Any, Final

from fastapi import Depends, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from service.api.gateway import Gateway, get_gateway

from .answers import ERRORS, _answer, _ok
from .requests import Answer, Limit, Offset
from .served import registry_router

router = registry_router()

DEFAULT_CONTEXT: Final = "."  # Confluent's name of the context subjects without one are in
# Confluent's default schema.registry.group.id: what its registries sharing a topic call themselves
REGISTRY_GROUP: Final = "schema-registry"


class Scope(BaseModel):
    path: list[str] = Field(description="Always empty.")
    clusters: dict[str, str] = Field(
        description="``kafka-cluster``: the Kafka cluster's id; ``schema-registry-cluster``: the registry's."
    )


class ServerClusterId(BaseModel):
    """Where the registry is, as Confluent's ``ServerClusterId`` (its empty ``id`` left out, as there)."""

    scope: Scope


class ServerVersion(BaseModel):
    version: str = Field(description="brokergate's version.")


class Deployment(BaseModel):
    attributes: list[str] = Field(description="Always empty: no deployment attributes are set.")


@router.get("/contexts", operation_id="listContexts", responses={**_ok(list[str]), **ERRORS})
async def list_contexts(
    answer: Answer,
    offset: Offset = 0,
    limit: Limit = -1,
    contextPrefix: Annotated[str, Query(max_length=1000, description="Only contexts starting so.")] = "",
) -> Response:
    """The registry's contexts: the default one, ``.``."""
    contexts = [c for c in (DEFAULT_CONTEXT,) if c.startswith(contextPrefix)][offset:]
    return _answer(contexts[:limit] if limit > 0 else contexts, answer)


@router.get("/v1/metadata/id", operation_id="getClusterId", responses={**_ok(ServerClusterId), **ERRORS})
async def cluster_id(answer: Answer, gw: Annotated[Gateway, Depends(get_gateway)]) -> Response:
    clusters = {"kafka-cluster": gw.log.cluster_id, "schema-registry-cluster": REGISTRY_GROUP}
    return _answer({"scope": {"path": [], "clusters": clusters}}, answer)


@router.get(
    "/v1/metadata/version",
    operation_id="getSchemaRegistryServerVersion",
    responses={**_ok(ServerVersion), **ERRORS},
)
async def server_version(answer: Answer) -> Response:
    """brokergate's version (Confluent's ``commitId`` is left out, as it leaves out an empty one)."""
    return _answer({"version": _version()}, answer)


@router.get(
    "/v1/metadata/deployment",
    operation_id="getSchemaRegistryDeployment",
    responses={**_ok(Deployment), **ERRORS},
)
async def deployment(answer: Answer) -> Response:
    out: dict[str, Any] = {"attributes": []}
    return _answer(out, answer)


@cache
def _version() -> str:
    try:
        return metadata.version("brokergate")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"
