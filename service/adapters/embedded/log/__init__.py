"""The embedded Log adapter: topics stored as segment files in a local data directory."""

from .log import EmbeddedLog

__all__ = ["EmbeddedLog"]
