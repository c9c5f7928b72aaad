"""The web console at ``/ui``: static files in the package and the router that serves them."""

from .router import PREFIX as CONSOLE_PAGE
from .router import console_router

__all__ = ["CONSOLE_PAGE", "console_router"]
