"""Tests import the Tansu runner from here; it lives in ``deploy.local`` (the cluster script uses it)."""

from deploy.local.kafka_broker import TansuBroker, broker_binary, free_port

__all__ = ["TansuBroker", "broker_binary", "free_port"]
