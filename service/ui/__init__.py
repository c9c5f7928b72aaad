"""The web console at ``/ui`` and the API documentation pages: files in the package and the routers
that serve them."""

from .docs import asset_paths as docs_asset_paths
from .docs import docs_router
from .router import PREFIX as CONSOLE_PAGE
from .router import console_router

__all__ = ["CONSOLE_PAGE", "console_router", "docs_asset_paths", "docs_router"]
