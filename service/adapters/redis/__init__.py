"""The Redis sessions adapter (``--sessions redis://host:port/db``)."""

from .sessions import RedisSessions

__all__ = ["RedisSessions"]
