"""The Kafka Log adapter: topics and records in a real Kafka cluster, through aiokafka."""

from .log import KafkaLog

__all__ = ["KafkaLog"]
