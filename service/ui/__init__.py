"""The web console at ``/ui``: static files in the package and the router that serves them."""

from .router import console_router

__all__ = ["console_router"]
