"""The ZooKeeper coordinator adapter (``--coordinator zookeeper://host:port[,...][/chroot]``)."""

from .coordinator import ZooKeeperCoordinator

__all__ = ["ZooKeeperCoordinator"]
