"""Real servers on loopback: the runners the local cluster, the tests and the benchmarks share."""

from .balancer import NginxBalancer
from .cluster import ClusterSpec, LocalCluster
from .gateway import GatewayReplica
from .kafka_broker import KafkaBroker
from .redis_server import RedisServer
from .zookeeper_server import ZooKeeperServer

__all__ = [
    "ClusterSpec",
    "GatewayReplica",
    "KafkaBroker",
    "LocalCluster",
    "NginxBalancer",
    "RedisServer",
    "ZooKeeperServer",
]
