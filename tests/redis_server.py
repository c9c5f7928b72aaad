"""Tests import the Redis runner from here; it lives in ``deploy.local`` (the cluster script uses it)."""

from deploy.local.redis_server import RedisServer, available, free_port

__all__ = ["RedisServer", "available", "free_port"]
