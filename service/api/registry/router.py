"""The schema registry's one router: every route under ``/schema-registry``, in the order the
OpenAPI document lists them (``schemas``, ``subjects``, ``compatibility``, ``config``).
"""

from __future__ import annotations

from . import compatibility, config, metadata, schemas, subjects
from .served import registry_router

router = registry_router()
# The routes themselves, not their routers: FastAPI includes a router as a branch that routing
# then descends into, a cost every request that gets that far would pay. registry_router makes
# the routers alike, so these are the routes that declaring them all on this one router made.
router.routes.extend(
    route for routes in (schemas, subjects, compatibility, config, metadata) for route in routes.router.routes
)
