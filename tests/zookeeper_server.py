"""Tests import the ZooKeeper runner from here; it lives in ``deploy.local`` (the cluster script uses it)."""

from deploy.local.zookeeper_server import ZooKeeperServer, class_path, free_port

__all__ = ["ZooKeeperServer", "class_path", "free_port"]
